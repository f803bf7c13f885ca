// `--calibration FILE`: one more `--set calibration=[...]` after the scenario's own list.
#include "cli/calibration_option.hpp"

#include <boost/json.hpp>

#include "io/scenario_loader.hpp"

namespace stepsim::cli {

std::vector<std::string> sets_with_calibration(const std::string& scenario_path, std::vector<std::string> sets,
                                               const std::vector<std::string>& files) {
  if (files.empty()) return sets;
  boost::json::array list;
  for (const auto& f : io::load_scenario(scenario_path, sets).calibration) list.emplace_back(f);
  for (const auto& f : files) list.emplace_back(f);
  sets.push_back("calibration=" + boost::json::serialize(list));
  return sets;
}

}  // namespace stepsim::cli
