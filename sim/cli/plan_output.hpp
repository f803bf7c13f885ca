// What `stepsim plan` prints: a table per cluster, the Pareto table of cost against time to
// train, and the rows as CSV or JSON for tools/plot.py.
#pragma once

#include <iosfwd>
#include <vector>

#include "sweep/plan.hpp"

namespace stepsim::cli {

void write_plan_tables(const sweep::PlanSpec& spec, const std::vector<sweep::PlanRow>& rows, std::ostream& out);
void write_plan_csv(const std::vector<sweep::PlanRow>& rows, std::ostream& out);
void write_plan_json(const std::vector<sweep::PlanRow>& rows, std::ostream& out);

}  // namespace stepsim::cli
