// HolisticTraceAnalysis' figures for one rank, by its rules: comm-comp overlap, temporal
// breakdown and kernel-type breakdown, so that a figure carrying HTA's name is HTA's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/kineto_trace.hpp"
#include "stepsim/units.hpp"

namespace stepsim::analysis {

struct HtaKernelTypeTime {
  std::string label;  // "COMPUTATION", "COMPUTATION overlapping COMMUNICATION", ...
  Time time;
};

struct HtaMetrics {
  bool available = false;             // a Kineto trace (stepsim's own traces have no HTA view)
  bool last_step_excluded = false;    // two or more ProfilerSteps: the last one is left out
  bool rounded = false;               // fractional timestamps rounded inward to microseconds
  std::size_t activities = 0;         // GPU activities HTA keeps
  Time comm;                          // merged communication time (the denominator)
  Time overlap;                       // communication and computation at once
  std::optional<double> overlap_pct;  // 100 × overlap / comm to 2 decimals; none without comm
  // Temporal breakdown over the kernel span (first start to last end of the kept activities).
  Time kernel_time, idle, compute, non_compute;
  std::vector<HtaKernelTypeTime> kernel_types;  // largest first
};

// How HTA computes them (hta/common/trace.py, trace_parser.py, analyzers/*.py):
// - With at least two distinct ProfilerStep#N names, a GPU activity (args.stream >= 0 and
//   args.correlation >= 0) is kept only when a CPU event with its correlation id starts before
//   the last CPU ProfilerStep#N starts; other events with a stream are kept when they start
//   before it. Intervals are not clipped.
// - Fractional timestamps round each event inward: ceil(ts), floor(ts + dur) in doubles.
// - Each class's intervals are merged across streams in start order (an interval joins the
//   current group unless it starts after every end so far); overlap = time computation and
//   communication groups run together / summed communication groups.
// Ties in start order are taken in file order (HTA leaves them to NumPy's unstable sort;
// they matter only for activities that rounding leaves shorter than nothing).
HtaMetrics measure_hta(const HtaView& view, const std::vector<Launch>& launches);

// NumPy's round(value, decimals): rint(value × 10^decimals) / 10^decimals.
double hta_round(double value, int decimals);

}  // namespace stepsim::analysis
