// How simulated ranks differ in compute: a speed per rank and random per-kernel jitter. The
// builder fills it; the engine asks it once per compute op it starts.
#pragma once

#include <cstdint>
#include <vector>

#include "stepsim/units.hpp"

namespace stepsim::engine {

enum class JitterDraw : std::uint8_t { none, normal, lognormal, uniform };

struct ComputeVariation {
  std::vector<double> speed;  // per simulated rank (index into Program::ranks); empty: every rank 1
  JitterDraw jitter = JitterDraw::none;
  double sigma = 0;  // relative standard deviation of a kernel's duration
  std::uint64_t seed = 0;

  bool varies() const { return !speed.empty() || jitter != JitterDraw::none; }
  // `duration` of op `op` of simulated rank `r` (global rank `rank`) under this variation.
  Time scale(std::size_t r, int rank, std::uint32_t op, Time duration) const;
  // The jitter factor alone: mean 1, a pure function of (seed, rank, op), so it needs no
  // storage per op and does not depend on the order events run in.
  double jitter_factor(int rank, std::uint32_t op) const;
};

}  // namespace stepsim::engine
