// HolisticTraceAnalysis' idle time breakdown (get_idle_time_breakdown) as `analyze` prints it:
// one rank's table and JSON, which the several ranks of a job show each as one rank's alone
// would, and what they add up to across the ranks.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "analysis/hta_metrics.hpp"

namespace boost::json {
class value;
}

namespace stepsim::analysis {

// 100 × part / whole; 0 when whole is 0.
double percent_of(Time part, Time whole);

// Why the breakdown has no split (no kernel in HTA's window, none tied to a launch); "" when
// it has one.
std::string idle_breakdown_missing(const HtaIdleBreakdown& b);

// One rank's breakdown, indented under HTA's figures: a row per stream and the streams summed,
// in ms per step and shares of the stream's idle time, and the streams summed on the exact
// timestamps where HTA rounds them; one line when it has no split.
void write_idle_breakdown(const HtaMetrics& h, std::ostream& out);

// One rank's breakdown as JSON (`hta.idle_time_breakdown` of docs/report.md).
boost::json::value idle_breakdown_json(const HtaMetrics& h);

// Across the ranks that have a breakdown: the mean per step of each rank's streams summed, and
// the rank whose streams wait longest for the host.
struct IdleAcrossRanks {
  std::size_t ranks = 0;  // ranks with a breakdown
  double idle_s = 0, host_wait_s = 0, kernel_wait_s = 0, other_s = 0;
  double host_wait_max_s = 0;
  int host_wait_max_rank = -1;
};
struct RankIdle {
  int rank = 0;
  const HtaMetrics* hta = nullptr;
};
std::optional<IdleAcrossRanks> idle_across_ranks(const std::vector<RankIdle>& ranks);

// The ranks' breakdowns in one table, a row per rank and stream (as HTA's DataFrame has a rank
// column) and each rank's streams summed, then the mean across ranks; one line when no rank
// is a Kineto trace.
void write_ranks_idle_breakdown(const std::vector<RankIdle>& ranks, std::ostream& out);

}  // namespace stepsim::analysis
