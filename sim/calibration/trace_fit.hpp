// Fitting the GPU compute model to measured kernels: the GEMM efficiency curve (BF16 and FP8
// maxima, one half-size), attention and HBM efficiency from kernels that ran alone, then the
// slowdown from kernels that ran beside communication. Every model time comes from
// hardware::GpuModel itself, so the fit inverts the very formula the simulation uses.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "calibration/calibration.hpp"
#include "stepsim/scenario.hpp"
#include "workload/work.hpp"

namespace stepsim::calibration {

struct MeasuredKernel {
  // The model op it matched (a piece of a split op: that piece, with its own FLOPs and
  // bytes); when matched by class only, just `op.cls`.
  workload::OpCost op;
  double time_us = 0;     // as measured
  double overlap_us = 0;  // of it while a communication kernel ran on the same GPU
  bool matched = false;   // matched to one model op (by name), not only to a class
};

struct FittedValue {
  std::string key;  // "gemm_max", ...
  double preset = 0;
  std::optional<double> fitted;
  int kernels = 0;
  double residual = 0;  // RMS relative error of the fitted model over those kernels
  std::string why_not;  // when not fitted; how, when fitted another way than kernel by kernel
  // Fitted to a value no calibration file may hold (a fraction of a peak above 1: faster than
  // the GPU runs), so left out: the trace is not of the scenario, and no other way fits it.
  bool implausible = false;
};

struct TraceFit {
  // gemm_max, fp8_gemm_max, gemm_half_flops, gemm_half_k, attention_max, hbm, comm_slowdown
  std::vector<FittedValue> values;
  FittedEfficiency efficiency() const;
  FittedValue* find(const std::string& key);
};

// `gpu` gives the peaks, HBM bandwidth, kernel floor and the preset efficiencies, `precision`
// the run's (which ops are FP8 GEMMs is each op's own `fp8`).
TraceFit fit_kernels(const std::vector<MeasuredKernel>& kernels, const GpuSpec& gpu, Precision precision);

// The bounds a calibration file holds each value in (kEfficiencyFields), as the words of a
// note: "" within them, else why a value out of them cannot be the scenario's ("above 1, faster
// than the GPU's peak").
std::string out_of_bounds(const std::string& key, double value);

// Efficiency from class totals, for traces whose kernels cannot be matched one by one:
// the preset value scaled by simulated / measured time of that class.
std::optional<double> scale_by_totals(double preset, double simulated_us, double measured_us);

}  // namespace stepsim::calibration
