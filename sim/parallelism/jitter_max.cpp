// Expected maxima of jitter sums: one kernel's distribution as the masses of small bins, the
// sum of k kernels as its k-fold convolution, and E[max of n] = Σ x (G(x)ⁿ − G(x − step)ⁿ)
// over the sum's cumulative masses G.
#include "parallelism/jitter_max.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <boost/math/distributions/lognormal.hpp>
#include <boost/math/distributions/normal.hpp>

#include "stepsim/error.hpp"

namespace stepsim::parallelism {
namespace {

// Bins of one kernel: fine enough that their own spread (step²/12) is under 0.03 % of the
// variance, few enough that a sum of kMaxKernels convolves in a fraction of a second.
constexpr int kBins = 256;
// The lognormal is cut where its tails hold 1e-12 each: far beyond the maximum of any group.
constexpr double kTail = 1e-12;

// The standardized kernel jitter (factor − 1) / sigma as a CDF over [lo, hi].
struct Kernel {
  double lo = 0, hi = 0;
  double cdf(double x) const;
  JitterKind kind;
  boost::math::lognormal_distribution<double> lognormal{0, 1};
  double sigma = 0;
};

double Kernel::cdf(double x) const {
  if (x <= lo) return 0;
  if (x >= hi) return 1;
  if (kind == JitterKind::uniform) return (x - lo) / (hi - lo);
  return boost::math::cdf(lognormal, 1 + sigma * x);
}

// Mean 1 and standard deviation sigma: s² = ln(1 + sigma²), mu = −s²/2, as the engine draws.
Kernel kernel_of(JitterKind kind, double sigma) {
  Kernel k;
  k.kind = kind;
  k.sigma = sigma;
  if (kind == JitterKind::uniform) {
    k.lo = -std::sqrt(3.0);
    k.hi = std::sqrt(3.0);
    return k;
  }
  const double s2 = std::log1p(sigma * sigma);
  k.lognormal = boost::math::lognormal_distribution<double>(-s2 / 2, std::sqrt(s2));
  k.lo = (boost::math::quantile(k.lognormal, kTail) - 1) / sigma;
  k.hi = (boost::math::quantile(k.lognormal, 1 - kTail) - 1) / sigma;
  return k;
}

std::vector<double> convolve(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size() + b.size() - 1, 0.0);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == 0) continue;
    for (std::size_t j = 0; j < b.size(); ++j) out[i + j] += a[i] * b[j];
  }
  return out;
}

// ∫ x d(Gⁿ) over a bin [x0, x0 + h] across which G rises linearly from a to b:
// (x0 + h)·bⁿ − x0·aⁿ − ∫ Gⁿ dx, with ∫ Gⁿ dx = h·(bⁿ⁺¹ − aⁿ⁺¹) / ((n + 1)(b − a)).
double bin_part(double x0, double h, double a, double b, int n) {
  const double an = std::pow(a, n);
  const double bn = std::pow(b, n);
  if (b - a < 1e-12) return (x0 + h / 2) * (bn - an);
  const double integral = h * (bn * b - an * a) / ((n + 1) * (b - a));
  return (x0 + h) * bn - x0 * an - integral;
}

// The variance of the largest of n draws from a distribution given as masses of bins of
// width `step`, the first centred on `first`: bin centres against the rise of Gⁿ (the bins'
// own spread, step²/12, is far below a maximum's variance).
double variance_of_max(const std::vector<double>& mass, double first, double step, int n) {
  double below = 0, m1 = 0, m2 = 0;
  for (std::size_t i = 0; i < mass.size(); ++i) {
    const double above = std::min(1.0, below + mass[i]);
    const double rise = std::pow(above, n) - std::pow(below, n);
    const double x = first + static_cast<double>(i) * step;
    m1 += x * rise;
    m2 += x * x * rise;
    below = above;
  }
  return std::max(0.0, m2 - m1 * m1);
}

}  // namespace

double expected_max_normal(int n) {
  if (n <= 1) return 0.0;
  const double p = (n - 0.375) / (n + 0.25);
  return boost::math::quantile(boost::math::normal_distribution<double>(), p);
}

ExpectedMaxima::ExpectedMaxima(JitterKind kind, double sigma) {
  if (kind != JitterKind::uniform && kind != JitterKind::lognormal) return;
  const Kernel k = kernel_of(kind, sigma);
  step_ = (k.hi - k.lo) / kBins;
  std::vector<double> mass(kBins);
  double mean = 0;
  for (int i = 0; i < kBins; ++i) {
    const double left = k.lo + i * step_;
    mass[static_cast<std::size_t>(i)] = k.cdf(left + step_) - k.cdf(left);
    mean += mass[static_cast<std::size_t>(i)] * (left + step_ / 2);
  }
  // Centred on the bins' own mean, so that a sum of many drifts by nothing.
  lo_ = k.lo + step_ / 2 - mean;
  sums_.push_back(std::move(mass));
}

const std::vector<double>& ExpectedMaxima::sum_of(int kernels) {
  while (static_cast<int>(sums_.size()) < kernels) sums_.push_back(convolve(sums_.back(), sums_.front()));
  return sums_[static_cast<std::size_t>(kernels - 1)];
}

double ExpectedMaxima::of(int n, int kernels) {
  STEPSIM_CHECK(kernels >= 1, "a jitter sum of no kernels");
  if (n <= 1) return 0.0;
  // Asked for at every collective: kept per (n, kernels), 0 kernels for a normal sum.
  const int key = sums_.empty() || kernels > kMaxKernels ? 0 : kernels;
  const auto [it, inserted] = expected_.try_emplace({n, key}, 0.0);
  if (!inserted) return it->second;
  it->second = key == 0 ? expected_max_normal(n) : expected_of(n, kernels);
  return it->second;
}

double ExpectedMaxima::expected_of(int n, int kernels) {
  const std::vector<double>& mass = sum_of(kernels);
  // Bin i of the sum of k kernels is centred on k·lo + i·step, its mass spread evenly over it
  // (exact for one uniform kernel); the sum's deviation is √k.
  const double first = kernels * lo_ - step_ / 2;
  double below = 0, expected = 0;
  for (std::size_t i = 0; i < mass.size(); ++i) {
    const double above = std::min(1.0, below + mass[i]);
    expected += bin_part(first + static_cast<double>(i) * step_, step_, below, above, n);
    below = above;
  }
  return expected / std::sqrt(static_cast<double>(kernels));
}

double ExpectedMaxima::variance_of(int n, int kernels) {
  STEPSIM_CHECK(kernels >= 1, "a jitter sum of no kernels");
  if (n <= 1) return 1.0;
  if (sums_.empty() || kernels > kMaxKernels) {
    const auto [it, inserted] = normal_variances_.try_emplace(n, 0.0);
    if (inserted) {
      // The standard normal on [−10, 10] in bins of 1/256 of a deviation.
      constexpr double kStep = 1.0 / 256;
      constexpr int kHalf = 10 * 256;
      const boost::math::normal_distribution<double> normal;
      std::vector<double> mass(2 * kHalf);
      for (int i = 0; i < 2 * kHalf; ++i) {
        const double left = (i - kHalf) * kStep;
        mass[static_cast<std::size_t>(i)] = boost::math::cdf(normal, left + kStep) - boost::math::cdf(normal, left);
      }
      it->second = variance_of_max(mass, -kHalf * kStep + kStep / 2, kStep, n);
    }
    return it->second;
  }
  const auto [it, inserted] = variances_.try_emplace({n, kernels}, 0.0);
  if (inserted) it->second = variance_of_max(sum_of(kernels), kernels * lo_, step_, n) / kernels;
  return it->second;
}

namespace {

constexpr double kGridStep = 1.0 / 32;

}  // namespace

double RaisedByLevel::of(double level, int n) {
  if (level <= -kFarTail) return 0;
  const Table& t = table(n);
  if (level >= kFarTail) return t.integral.back() + (level - kFarTail);
  const double u = (level + kFarTail) / kGridStep;
  const auto k = std::min(static_cast<std::size_t>(u), t.integral.size() - 2);
  const double x = u - static_cast<double>(k);
  const double x2 = x * x;
  const double x3 = x2 * x;
  return (2 * x3 - 3 * x2 + 1) * t.integral[k] + (x3 - 2 * x2 + x) * kGridStep * t.slope[k] +
         (3 * x2 - 2 * x3) * t.integral[k + 1] + (x3 - x2) * kGridStep * t.slope[k + 1];
}

const RaisedByLevel::Table& RaisedByLevel::table(int n) {
  const auto [it, inserted] = tables_.try_emplace(n);
  Table& t = it->second;
  if (!inserted) return t;
  const boost::math::normal_distribution<double> normal;
  const auto power = [&normal, n](double x) { return std::pow(boost::math::cdf(normal, x), n); };
  // Five-point Gauss–Legendre on [−1, 1].
  constexpr std::array<double, 5> kNode = {0.0, 0.5384693101056831, -0.5384693101056831, 0.9061798459386640,
                                           -0.9061798459386640};
  constexpr std::array<double, 5> kWeight = {0.5688888888888889, 0.4786286704993665, 0.4786286704993665,
                                             0.2369268850561891, 0.2369268850561891};
  const auto cells = static_cast<int>(std::lround(2 * kFarTail / kGridStep));
  t.integral.assign(1, 0.0);
  t.slope.assign(1, power(-kFarTail));
  for (int i = 0; i < cells; ++i) {
    const double mid = -kFarTail + (i + 0.5) * kGridStep;
    double cell = 0;
    for (std::size_t j = 0; j < kNode.size(); ++j) cell += kWeight[j] * power(mid + kNode[j] * kGridStep / 2);
    t.integral.push_back(t.integral.back() + cell * kGridStep / 2);
    t.slope.push_back(power(-kFarTail + (i + 1) * kGridStep));
  }
  return t;
}

int ExpectedMaxima::equal_kernels(double sum_d2, double sum_d4) {
  if (sum_d4 <= 0) return 1;
  return std::max(1, static_cast<int>(std::lround(sum_d2 * sum_d2 / sum_d4)));
}

}  // namespace stepsim::parallelism
