// Helpers of the end-to-end tests: run a scenario and read times off its timeline.
#pragma once

#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"

namespace stepsim::test {

inline SimulationResult run(const std::string& scenario, const std::vector<std::string>& sets = {}) {
  return simulate(io::load_scenario(scenario, sets));
}

// Start of the first compute op on rank 0 whose name begins with `prefix` and which
// `accept` admits.
template <typename Accept>
Time first_start(const SimulationResult& r, const std::string& prefix, Accept accept) {
  for (const auto& iv : r.timeline.ranks.front().intervals) {
    if (iv.activity != Activity::compute) continue;
    const std::string& name = r.timeline.names[iv.name];
    if (name.rfind(prefix, 0) == 0 && accept(iv)) return iv.start;
  }
  return Time::max();
}

// GPT-3 Small (12 layers, hidden 768) in eager PyTorch under DDP on 8 H100, sequences of 512,
// micro-batch 1: the launch-bound worked example of the host model in docs/model.md.
inline const std::string kEagerGpt3Small = R"({
  "model": {"name": "gpt-125m", "layers": 12, "hidden": 768, "heads": 12, "vocab": 50304, "seq_len": 512, "mlp": "gelu"},
  "cluster": "dgx-h100-ndr",
  "parallel": {"tp": 1, "pp": 1, "dp": 8},
  "training": {"framework": "pytorch", "global_batch": 256, "micro_batch": 1},
  "data_parallel": {"kind": "ddp"}
})";

// "key=value" for a --set override.
inline std::string set(const std::string& key, const std::string& value) { return key + "=" + value; }

}  // namespace stepsim::test
