// What `stepsim plan` prints: a table per cluster and the Pareto table of cost against time to
// train (the rows as CSV or JSON are the library's, sweep/plan_rows.hpp).
#pragma once

#include <iosfwd>
#include <vector>

#include "sweep/plan.hpp"

namespace stepsim::cli {

void write_plan_tables(const sweep::PlanSpec& spec, const std::vector<sweep::PlanRow>& rows, std::ostream& out);

}  // namespace stepsim::cli
