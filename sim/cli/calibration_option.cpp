// `--calibration FILE`: one more `--set calibration=[...]` after the scenario's own list.
#include "cli/calibration_option.hpp"

#include <boost/json.hpp>

#include "io/scenario_loader.hpp"

namespace stepsim::cli {

Scenario load_with_calibration(const std::string& scenario_path, std::vector<std::string> sets,
                               const std::vector<std::string>& files) {
  Scenario scenario = io::load_scenario(scenario_path, sets);
  if (files.empty()) return scenario;
  boost::json::array list;
  for (const auto& f : scenario.calibration) list.emplace_back(f);
  for (const auto& f : files) list.emplace_back(f);
  sets.push_back("calibration=" + boost::json::serialize(list));
  return io::load_scenario(scenario_path, sets);
}

}  // namespace stepsim::cli
