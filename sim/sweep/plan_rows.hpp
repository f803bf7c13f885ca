// `stepsim plan`'s rows as files and as Python's stepsim.plan() returns them: one per cluster
// and GPU count, the same fields in the same order in CSV and JSON.
#pragma once

#include <iosfwd>
#include <vector>

#include "sweep/plan.hpp"

namespace stepsim::sweep {

void write_plan_csv(const std::vector<PlanRow>& rows, std::ostream& out);
void write_plan_json(const std::vector<PlanRow>& rows, std::ostream& out);

}  // namespace stepsim::sweep
