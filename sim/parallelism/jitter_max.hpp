// The expected wait for the last member of a collective under kernel jitter, in
// representative mode: each member's drift since its last synchronisation is the sum of its
// kernels' jitter, and the collective starts when the largest of its members' drifts is in.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "stepsim/scenario.hpp"

namespace stepsim::parallelism {

// Blom's approximation of the expected maximum of n standard normal draws,
// Φ⁻¹((n − 0.375) / (n + 0.25)) (Blom 1958); 0 for n ≤ 1.
double expected_max_normal(int n);

// The expected maximum of n draws of the sum of `kernels` equal kernels' jitter, in standard
// deviations of the sum. A normal sum is normal whatever the kernels; a uniform one is
// bounded (one kernel: √3·(n − 1)/(n + 1) exactly); a lognormal one has a long right tail.
// The sums' distributions are convolved on a grid once per kernel count and kept.
class ExpectedMaxima {
 public:
  ExpectedMaxima(JitterKind kind, double sigma);

  double of(int n, int kernels);
  // The variance of that maximum, in variances of the sum: how far apart n groups' last
  // members are, each group's the largest of its n members' drifts (1 for n = 1; for normal
  // draws 1 − 1/π at n = 2, falling towards 0 as n grows).
  double variance_of(int n, int kernels);
  // The kernel count of a sum of durations d with these Σd² and Σd⁴ that has its variance and
  // its kurtosis: (Σd²)² / Σd⁴, one for a single kernel, k for k equal ones.
  static int equal_kernels(double sum_d2, double sum_d4);

  // Beyond this many kernels the sum is taken as normal (its excess kurtosis is under 2 %).
  static constexpr int kMaxKernels = 64;

 private:
  const std::vector<double>& sum_of(int kernels);
  double expected_of(int n, int kernels);  // from the sum's distribution

  std::map<std::pair<int, int>, double> expected_;   // by (n, kernels), kernels 0 for a normal sum
  std::map<std::pair<int, int>, double> variances_;  // by (n, kernels), the sum's distribution's
  std::map<int, double> normal_variances_;           // by n
  double lo_ = 0;  // the first bin's centre, one kernel, in standard deviations of a kernel
  double step_ = 0;
  std::vector<std::vector<double>> sums_;  // sums_[k - 1]: the mass of each bin of a sum of k kernels
};

// E[max(M, level)] − E[M], M the largest of n standard normal draws and `level` in standard
// deviations: the integral of P(M < x) = Φ(x)ⁿ up to `level`, 0 far below the mean, level − E[M]
// far above it. Asked for at every collective, so it is not integrated there: per n, the
// integral up to each point of a grid of 1/32 of a deviation is kept (each cell by five-point
// Gauss–Legendre), and between two points it is the cubic through their integrals and their
// slopes Φⁿ (Hermite), whose error, h⁴/384 times the largest third derivative of Φⁿ, is under
// 1e-7 of a deviation up to n of a million.
class RaisedByLevel {
 public:
  double of(double level, int n);

  // Below this many deviations under the mean no draw reaches: the integral is 0 there.
  static constexpr double kFarTail = 8;

 private:
  struct Table {
    std::vector<double> integral;  // from −kFarTail to each grid point
    std::vector<double> slope;     // Φⁿ there
  };
  const Table& table(int n);

  std::map<int, Table> tables_;  // by n
};

}  // namespace stepsim::parallelism
