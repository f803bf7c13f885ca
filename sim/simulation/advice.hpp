// Advice when communication is exposed: which kind and why, and alternatives to the scenario
// (bucket size, prefetch, overlap, layout, schedule), each simulated and ranked by step time.
#pragma once

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
};

// Fills result.report.advice_cause and .advice when asked or when exposed communication
// reaches kExposedTarget (asked about a job that does not fit: the changes that make it fit,
// in pairs when none fits alone). An alternative that does not fit in memory is tried again
// with each change that makes a job fit and sets none of its keys; the fastest pair that fits
// joins the list.
// Alternatives are simulated when asked, or when the scenario is small enough to simulate
// several more times in about a second.
void advise(const AdviceRequest& request, const Scenario& scenario, SimulationResult& result);

}  // namespace stepsim
