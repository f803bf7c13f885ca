// What `stepsim analyze` and `stepsim compare` print: readable tables and JSON with the
// report's field names (docs/report.md) where they apply.
#pragma once

#include <iosfwd>
#include <string>

#include "analysis/step_analysis.hpp"
#include "analysis/trace_timeline.hpp"
#include "stepsim/report.hpp"

namespace stepsim::analysis {

struct Analysis {
  LoadedTrace trace;
  TraceMetrics metrics;
  Report mean;  // the mean step, as a report
};

// Loads `path` and measures one of its ranks over its own steps (all, or `step`), which
// become the timeline's steps: `rank` is the global rank (RankTimeline::rank: distributedInfo's,
// else the file's place among the files, or a stepsim trace's process); none: the lowest.
// InputError naming --rank and the ranks the trace holds when it holds no such rank.
Analysis analyze_trace(const std::string& path, std::optional<int> rank, const std::optional<std::string>& step);
// The same of a trace already loaded from `path` (to_timeline of read_traces: a pipe is read once).
Analysis analyze_loaded(LoadedTrace trace, const std::string& path, std::optional<int> rank,
                        const std::optional<std::string>& step);

void write_analysis_table(const Analysis& a, std::ostream& out);
void write_analysis_json(const Analysis& a, std::ostream& out);

// Measured (the trace's mean step) against predicted (a simulation), with the time a
// collective waits for its slowest member counted as communication on both sides and shown
// apart (see like_for_like.hpp).
void write_comparison_table(const Analysis& measured, const SimulationResult& predicted, std::ostream& out);
void write_comparison_json(const Analysis& measured, const SimulationResult& predicted, std::ostream& out);

}  // namespace stepsim::analysis
