// Advice when communication is exposed: which kind and why, and alternatives to the scenario
// (bucket size, prefetch, overlap, layout, schedule), each simulated and ranked by step time.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"

namespace stepsim {

// The usual target: exposed communication under this share of the step.
inline constexpr double kExposedTarget = 0.05;

struct AdviceRequest {
  io::ScenarioInput scenario;     // as given (path "": the default)
  std::vector<std::string> sets;  // its --set overrides
  bool asked = false;             // --advise: always, and simulate however large the scenario
  // How each change is simulated: simulate() when empty. Tests put a failing one here, to see
  // what the advice does with a bug met in one of its simulations.
  std::function<SimulationResult(const Scenario&)> simulate_change;
};

// Fills result.report.advice_cause and .advice when asked or when exposed communication
// reaches kExposedTarget (asked about a job that does not fit: the changes that make it fit,
// in pairs when none fits alone). An alternative that does not fit in memory is tried again
// with each change that makes a job fit and sets none of its keys; the fastest pair that fits
// joins the list.
// Alternatives are simulated when asked, or when the scenario is small enough to simulate
// several more times in about a second.
// A change whose simulation met a bug in stepsim (an internal error) is a row like the others,
// its status the internal error's message, and the rest of the advice and the report stand:
// they do not depend on it.
void advise(const AdviceRequest& request, const Scenario& scenario, SimulationResult& result);

// For each row of the advice whose simulation met a bug, what the command says on stderr before
// it fails with exit status 1, as a bug must make it fail, once it has written the report.
std::vector<std::string> advice_bugs(const Report& report);

}  // namespace stepsim
