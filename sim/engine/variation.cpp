// Counter-based draws for kernel jitter: splitmix64 of (seed, rank, op) gives two uniform
// numbers, Box–Muller turns them into a normal one.
#include "engine/variation.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace stepsim::engine {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// In (0, 1): 53 random bits, offset by half a step so that log() never sees 0.
double unit(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

// The shortest a jittered kernel may take: a normal draw far in its left tail would be
// negative.
constexpr double kMinFactor = 0.05;

}  // namespace

double ComputeVariation::jitter_factor(int rank, std::uint32_t op) const {
  const std::uint64_t key = splitmix64(seed ^ splitmix64((static_cast<std::uint64_t>(rank) << 32) | op));
  const double u1 = unit(key);
  if (jitter == JitterDraw::uniform) return 1.0 + std::sqrt(3.0) * sigma * (2.0 * u1 - 1.0);
  const double u2 = unit(splitmix64(key));
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  if (jitter == JitterDraw::lognormal) {
    // Mean 1 and standard deviation sigma: s² = ln(1 + sigma²), mu = -s²/2.
    const double s2 = std::log1p(sigma * sigma);
    return std::exp(std::sqrt(s2) * z - s2 / 2.0);
  }
  return std::max(kMinFactor, 1.0 + sigma * z);
}

Time ComputeVariation::scale(std::size_t r, int rank, std::uint32_t op, Time duration) const {
  double factor = speed.empty() ? 1.0 : 1.0 / speed[r];
  if (jitter != JitterDraw::none) factor *= jitter_factor(rank, op);
  return factor == 1.0 ? duration : duration.scaled(factor);
}

}  // namespace stepsim::engine
