// The per-GPU errors of docs/validation.md's published training runs, as data: the mean
// absolute error of the step times of the runs not used for fitting, grouped by the GPU preset
// whose figures their scenario's GPU has (tests/sweep/validation_band_test.cpp recomputes them
// from the page).
#include "sweep/validation_band.hpp"

#include <fmt/format.h>

#include <array>

#include "io/scenario_loader.hpp"

namespace stepsim::sweep {
namespace {

struct GpuErrors {
  const char* gpu;
  double mape;
  int runs;
};

// docs/validation.md, "Published training runs" and "... on Blackwell", rows not marked fit.
constexpr std::array<GpuErrors, 6> kErrors = {{
    {"a100-sxm4-80gb", 0.0235, 2},       // torchtitan on A100
    {"h100-sxm5-80gb", 0.0966, 16},      // Megatron-LM README weak scaling, NeMo 24.07, Megatron-Bridge
    {"h100-sxm5-96gb-500w", 0.0527, 9},  // torchtitan on H100
    {"h200", 0.0230, 1},                 // torchtitan on H200
    {"b200", 0.1157, 7},                 // Megatron-Bridge on DGX B200 (dense and MoE)
    {"gb200", 0.0784, 9},                // Megatron-Bridge on GB200 NVL72 (dense and MoE)
}};

// Every row above together.
constexpr GpuErrors kAll = {"", 0.0820, 44};

}  // namespace

ValidationBand validation_band(const GpuSpec& gpu) {
  const std::string preset = io::gpu_preset_of(gpu);
  // The preset named when the GPU is called something else: its figures are what the band is of.
  const std::string which = preset == gpu.name ? preset : fmt::format("{} (the figures of {})", gpu.name, preset);
  for (const GpuErrors& e : kErrors)
    if (preset == e.gpu)
      return {e.mape, e.runs, true,
              fmt::format("the mean absolute step-time error of {} published run{} on {} (docs/validation.md)", e.runs,
                          e.runs == 1 ? "" : "s", which)};
  const std::string why = preset.empty() ? fmt::format("{} has no GPU preset's figures", gpu.name)
                                         : fmt::format("no published run on {}", which);
  return {kAll.mape, kAll.runs, false,
          fmt::format("{}: the mean absolute step-time error of all {} runs (docs/validation.md)", why, kAll.runs)};
}

}  // namespace stepsim::sweep
