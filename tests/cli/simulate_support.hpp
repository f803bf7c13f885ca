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

// "key=value" for a --set override.
inline std::string set(const std::string& key, const std::string& value) { return key + "=" + value; }

}  // namespace stepsim::test
