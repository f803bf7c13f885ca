// `--calibration FILE` on simulate: the files join the scenario's own `calibration` list.
#pragma once

#include <string>
#include <vector>

#include "stepsim/scenario.hpp"

namespace stepsim::cli {

// `sets` plus, when `files` is not empty, one `calibration=[...]` that extends the scenario's
// own list by them (so that the resolved scenario in the report names them too, and every
// variant simulated from these sets is calibrated alike).
std::vector<std::string> sets_with_calibration(const std::string& scenario_path, std::vector<std::string> sets,
                                               const std::vector<std::string>& files);

}  // namespace stepsim::cli
