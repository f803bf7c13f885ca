// Metrics over a timeline window and the writers of the report (table, JSON) and of the
// Chrome/Perfetto trace. Shared by `simulate`, `analyze` and `compare`.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>

#include "stepsim/report.hpp"
#include "stepsim/timeline.hpp"

namespace stepsim::report {

// Everything the DESIGN.md §3 definitions measure on one rank between `begin` and `end`.
struct WindowMetrics {
  double length = 0;       // s
  double compute = 0;      // compute (not optimizer) running
  double optimizer = 0;    // optimizer compute running
  PerKind exposed{};       // comm running, no compute running; split among the kinds running
  PerKind busy{};          // union of each kind's comm intervals
  double comm_union = 0;   // union of all comm
  double overlap = 0;      // comm and compute at once
  double bubble = 0;       // inside bubble markers, nothing running
  double memory_only = 0;  // memcpy/memset only
  double idle = 0;         // nothing at all, outside bubble markers
  double hidden_fraction() const { return comm_union > 0 ? overlap / comm_union : 0.0; }
};

WindowMetrics measure(const RankTimeline& rank, Time begin, Time end);

void write_table(const Report& report, std::ostream& out);
void write_json(const Report& report, std::ostream& out);
void write_trace(const Timeline& timeline, std::ostream& out);

// Writes `path` atomically (temporary file, then rename) so that a failure never leaves a
// half-written output; "-" writes to stdout.
void write_output(const std::string& path, const std::function<void(std::ostream&)>& writer);

}  // namespace stepsim::report
