// Measured compute kernels against the GPU's dense peak and memory bandwidth.
#include "calibration/compute_bound.hpp"

#include <fmt/format.h>

#include "stepsim/error.hpp"

namespace stepsim::calibration {
namespace {

void check_rate(const Calibration& c, const GpuSpec& gpu, const std::string& place, const std::string& what,
                Precision dtype, double flops, double time_us) {
  const double peak = gpu.flops.for_precision(dtype).tflops();
  const double achieved = flops / (time_us * 1e-6) * 1e-12;
  if (achieved <= peak) return;
  throw InputError(c.source, place,
                   fmt::format("{} {} in {:g} us is {:.1f} TFLOPS, above the {} peak of {:.1f} TFLOPS of {}: no kernel "
                               "runs faster than its GPU's peak",
                               what, to_string(dtype), time_us, achieved, to_string(dtype), peak, gpu.name));
}

}  // namespace

void check_within_peak(const Calibration& c, const GpuSpec& gpu) {
  const ComputeTables& t = c.compute;
  for (std::size_t i = 0; i < t.gemm.size(); ++i) {
    const GemmPoint& g = t.gemm[i];
    check_rate(c, gpu, fmt::format("/compute/gemm/{}/time_us", i), fmt::format("{} x {} x {}", g.m, g.n, g.k), g.dtype,
               g.flops(), g.time_us);
  }
  for (std::size_t i = 0; i < t.attention.size(); ++i) {
    const AttentionPoint& a = t.attention[i];
    check_rate(c, gpu, fmt::format("/compute/attention/{}/time_us", i),
               fmt::format("attention {}", a.backward ? "backward" : "forward"), a.dtype, a.flops(), a.time_us);
  }
  const double hbm = gpu.memory_bandwidth.gbytes_per_s();
  for (std::size_t i = 0; i < t.memory.size(); ++i) {
    if (t.memory[i].gbytes_per_s <= hbm) continue;
    throw InputError(
        c.source, fmt::format("/compute/memory/{}/gbytes_per_s", i),
        fmt::format("{:g} GB/s is above the {:g} GB/s of {}'s memory", t.memory[i].gbytes_per_s, hbm, gpu.name));
  }
}

}  // namespace stepsim::calibration
