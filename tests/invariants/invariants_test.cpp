// Every embedded example and a grid of generated scenarios keep the report's invariants:
// finite numbers, breakdown summing to the step, fractions and MFU in range, positive
// memory, and faster hardware never slower.
#include <catch2/catch.hpp>

#include <string>

#include "invariants/known_violations.hpp"
#include "invariants/report_invariants.hpp"
#include "invariants/scenario_grid.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"
#include "workload/work.hpp"

namespace stepsim::test {
namespace {

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const io::PresetInfo& p : io::list_presets(workload::model_parameters))
    if (p.kind == "example") names.push_back(p.name);
  return names;
}

bool known(const std::string& label) { return known_violations().contains(label); }

// The violations of one grid point; `refused` when it is turned down as bad input (an
// InputError from validation, or from the simulation of a scenario validation let through).
std::vector<std::string> point_violations(const GridPoint& point, bool& refused) {
  refused = false;
  try {
    return all_violations(io::load_scenario("", point.sets));
  } catch (const InputError&) {
    refused = true;
    return {};
  } catch (const std::exception& e) {
    return {std::string("does not load: ") + e.what()};
  }
}

void require_no_violations(const std::string& label, const std::vector<std::string>& violations) {
  for (const std::string& v : violations) FAIL_CHECK(label << ": " << v);
}

}  // namespace

TEST_CASE("every embedded example keeps the report invariants") {
  const std::vector<std::string> names = example_names();
  REQUIRE(names.size() >= 10);
  for (const std::string& name : names) {
    const std::string label = "example " + name;
    if (known(label)) {
      WARN(label << ": skipped, known to break: " << known_violations().at(label));
      continue;
    }
    const Scenario s = io::load_scenario(name);
    if (STEPSIM_INVARIANT_FASTER_EXAMPLES) {
      require_no_violations(label, all_violations(s));
      continue;
    }
    require_no_violations(label, report_violations(simulate(s).report));
  }
}

TEST_CASE("generated scenarios keep the report invariants, and most of them validate") {
  const std::vector<GridPoint> grid = scenario_grid(STEPSIM_INVARIANT_GRID);
  REQUIRE(grid.size() == STEPSIM_INVARIANT_GRID);
  std::size_t simulated = 0, refused = 0, skipped = 0;
  for (const GridPoint& point : grid) {
    if (known(point.label)) {
      ++skipped;
      continue;
    }
    bool was_refused = false;
    const std::vector<std::string> violations = point_violations(point, was_refused);
    ++(was_refused ? refused : simulated);
    require_no_violations(point.label, violations);
  }
  WARN(simulated << " simulated, " << refused << " refused by validation, " << skipped << " known to break");
  CHECK(simulated >= grid.size() * 6 / 10);
}

// Fails while any listed scenario still breaks; once it passes, clear the list.
TEST_CASE("the scenarios known to break an invariant keep it now", "[.known-failing]") {
  const std::vector<GridPoint> grid = scenario_grid(STEPSIM_INVARIANT_GRID_MAX);
  for (const auto& [label, what] : known_violations()) {
    bool found = label.starts_with("example ");
    std::vector<std::string> violations;
    if (found) violations = all_violations(io::load_scenario(label.substr(8)));
    for (const GridPoint& point : grid) {
      if (point.label != label) continue;
      found = true;
      bool refused = false;
      violations = point_violations(point, refused);
      if (refused) violations.push_back("validation refuses it now");
    }
    if (!found) FAIL_CHECK(label << ": no such example or grid point");
    if (found && violations.empty()) WARN(label << ": holds now, remove it from known_violations.hpp");
    require_no_violations(label, violations);
  }
}

}  // namespace stepsim::test
