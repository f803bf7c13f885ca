// Fitting the GPU compute model to measured kernels: GEMM efficiency curve, attention and
// HBM efficiency from kernels that ran alone, then the slowdown from kernels that ran beside
// communication. Pure arithmetic on kernels already matched to the model's ops.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "calibration/calibration.hpp"
#include "stepsim/scenario.hpp"
#include "workload/work.hpp"

namespace stepsim::calibration {

struct MeasuredKernel {
  workload::OpClass cls = workload::OpClass::gemm;
  bool backward = false;
  double flops = 0;       // of the model op it matched; 0 when matched by class only
  double bytes = 0;       // HBM traffic of that op
  double time_us = 0;     // as measured
  double overlap_us = 0;  // of it while a communication kernel ran on the same GPU
  bool matched = false;   // matched to one model op (by name), not only to a class
  bool flash2 = false;    // that op is FlashAttention-2 (training.attention "flash2")
};

struct FittedValue {
  std::string key;  // "gemm_max", ...
  double preset = 0;
  std::optional<double> fitted;
  int kernels = 0;
  double residual = 0;  // RMS relative error of the fitted model over those kernels
  std::string why_not;  // when not fitted
};

struct TraceFit {
  std::vector<FittedValue> values;  // gemm_max, gemm_half_flops, attention_max, hbm, comm_slowdown
  FittedEfficiency efficiency() const;
};

// `gpu` gives the peaks, HBM bandwidth, kernel floor and the preset efficiencies; kernels
// matched only by class contribute through class totals against `simulated` (the same
// classes from the model's own step).
TraceFit fit_kernels(const std::vector<MeasuredKernel>& kernels, const GpuSpec& gpu, Precision precision);

// Efficiency from class totals, for traces whose kernels cannot be matched one by one:
// the preset value scaled by simulated / measured time of that class.
std::optional<double> scale_by_totals(double preset, double simulated_us, double measured_us);

}  // namespace stepsim::calibration
