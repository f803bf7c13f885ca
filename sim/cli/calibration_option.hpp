// `--calibration FILE` on simulate: the files join the scenario's own `calibration` list.
#pragma once

#include <string>
#include <vector>

#include "stepsim/scenario.hpp"

namespace stepsim::cli {

// The scenario loaded with `sets`, its calibration list extended by `files` (so that the
// resolved scenario in the report names them too).
Scenario load_with_calibration(const std::string& scenario_path, std::vector<std::string> sets,
                               const std::vector<std::string>& files);

}  // namespace stepsim::cli
