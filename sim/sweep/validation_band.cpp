// The per-GPU errors of docs/validation.md's published training runs, as data: the mean
// absolute error of the step times of the runs not used for fitting, grouped by the GPU preset
// whose figures their scenario's GPU has (tests/sweep/validation_band_test.cpp recomputes them
// from the page).
#include "sweep/validation_band.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "io/presets.hpp"
#include "io/reader.hpp"
#include "io/scenario_schema.hpp"

namespace stepsim::sweep {
namespace {

struct GpuErrors {
  const char* gpu;
  double mape;
  int runs;
};

// docs/validation.md, "Published training runs" and "... on Blackwell", rows not marked fit.
constexpr std::array<GpuErrors, 6> kErrors = {{
    {"a100-sxm4-80gb", 0.0230, 2},       // torchtitan on A100
    {"h100-sxm5-80gb", 0.0954, 16},      // Megatron-LM README weak scaling, NeMo 24.07, Megatron-Bridge
    {"h100-sxm5-96gb-500w", 0.0533, 9},  // torchtitan on H100
    {"h200", 0.0360, 1},                 // torchtitan on H200
    {"b200", 0.1166, 7},                 // Megatron-Bridge on DGX B200 (dense and MoE)
    {"gb200", 0.0762, 9},                // Megatron-Bridge on GB200 NVL72 (dense and MoE)
}};

// Every row above together.
constexpr GpuErrors kAll = {"", 0.0816, 44};

// The GPU keys no step time reads: its name and provenance only name it, the board power gives
// the energy, and the memory capacity decides which layouts fit, not how long one takes.
constexpr std::array<std::string_view, 4> kUntimed = {"name", "provenance", "board_power_w", "memory"};

using Figures = std::vector<std::pair<std::string, std::string>>;

void flatten(const boost::json::value& v, const std::string& key, Figures& out) {
  if (!v.is_object()) {
    // Numbers as the shortest text that reads back as them (0.681, not 6.81E-1).
    out.emplace_back(key, v.is_string()   ? std::string(v.as_string())
                          : v.is_double() ? fmt::format("{}", v.as_double())
                                          : boost::json::serialize(v));
    return;
  }
  for (const auto& [k, child] : v.as_object())
    flatten(child, key.empty() ? std::string(k) : key + "." + std::string(k), out);
}

// What a GPU is to the step time: each key the resolved scenario writes but kUntimed, dotted
// ("flops.bf16"), with its value as text (units written exactly, so equal text is equal figures).
Figures timed_figures(const GpuSpec& gpu) {
  boost::json::value json = io::write_gpu(gpu);
  for (const std::string_view key : kUntimed) json.as_object().erase(key);
  Figures out;
  flatten(json, "", out);
  return out;
}

struct Preset {
  std::string name;
  Figures figures;
};

std::vector<Preset> gpu_presets() {
  std::vector<Preset> out;
  for (const std::string_view name : io::preset_names("gpus")) {
    GpuSpec gpu;
    io::read_gpu(gpu, boost::json::value(boost::json::string(name)), io::Reader("presets", true));
    out.push_back({std::string(name), timed_figures(gpu)});
  }
  return out;
}

// The keys whose values differ, as "KEY VALUE, not PRESET's VALUE".
std::vector<std::string> differences(const Figures& gpu, const Preset& preset) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < gpu.size() && i < preset.figures.size(); ++i)
    if (gpu[i].second != preset.figures[i].second)
      out.push_back(
          fmt::format("{} {}, not {}'s {}", gpu[i].first, gpu[i].second, preset.name, preset.figures[i].second));
  return out;
}

// Why a GPU whose figures are no preset's gets every run's band: where it differs from the preset
// it is named after, or else from the preset it differs least from.
std::string why_no_preset(const GpuSpec& gpu, const Figures& figures, const std::vector<Preset>& presets) {
  auto nearest = std::find_if(presets.begin(), presets.end(), [&](const Preset& p) { return p.name == gpu.name; });
  if (nearest == presets.end())
    nearest = std::min_element(presets.begin(), presets.end(), [&](const Preset& a, const Preset& b) {
      return differences(figures, a).size() < differences(figures, b).size();
    });
  std::vector<std::string> keys = differences(figures, *nearest);
  const std::size_t more = keys.size() > 3 ? keys.size() - 3 : 0;
  keys.resize(keys.size() - more);
  return fmt::format("{} has no GPU preset's figures for its step time ({}{})", gpu.name, fmt::join(keys, "; "),
                     more > 0 ? fmt::format("; {} more", more) : "");
}

}  // namespace

ValidationBand validation_band(const GpuSpec& gpu) {
  const Figures figures = timed_figures(gpu);
  const std::vector<Preset> presets = gpu_presets();
  const auto match =
      std::find_if(presets.begin(), presets.end(), [&](const Preset& p) { return p.figures == figures; });
  if (match == presets.end())
    return {kAll.mape, kAll.runs, false,
            fmt::format("{}: the mean absolute step-time error of all {} runs (docs/validation.md)",
                        why_no_preset(gpu, figures, presets), kAll.runs)};
  const std::string& preset = match->name;
  // The preset named when the GPU is called something else: its figures are what the band is of.
  const std::string which = preset == gpu.name ? preset : fmt::format("{} (the figures of {})", gpu.name, preset);
  for (const GpuErrors& e : kErrors)
    if (preset == e.gpu)
      return {e.mape, e.runs, true,
              fmt::format("the mean absolute step-time error of {} published run{} on {} (docs/validation.md)", e.runs,
                          e.runs == 1 ? "" : "s", which)};
  return {kAll.mape, kAll.runs, false,
          fmt::format("no published run on {}: the mean absolute step-time error of all {} runs (docs/validation.md)",
                      which, kAll.runs)};
}

}  // namespace stepsim::sweep
