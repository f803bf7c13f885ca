// What `stepsim analyze` prints for several ranks of a job: per rank, across ranks and the
// stragglers, as a table and as JSON.
#pragma once

#include <iosfwd>
#include <string>

#include "analysis/job_analysis.hpp"

namespace stepsim::analysis {

void write_job_table(const JobAnalysis& job, std::ostream& out);
void write_job_json(const JobAnalysis& job, const std::string& version, std::ostream& out);

}  // namespace stepsim::analysis
