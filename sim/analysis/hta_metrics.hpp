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

// One stream's idle time in HTA's idle time breakdown, over HTA's window: the gap before
// each kernel (from the end of the one before it on the stream) in the class of that kernel.
struct HtaStreamIdle {
  std::int64_t stream = -1;  // -1: all streams summed
  std::size_t kernels = 0;   // GPU activities of the kernel, memcpy and memset categories
  std::size_t launched = 0;  // of which tied to a launch on the CPU by correlation id
  Time host_wait;            // the next kernel's launch began after the previous kernel ended
  Time kernel_wait;          // otherwise, a gap under the consecutive kernel delay
  Time other;                // otherwise (waiting on another stream, an event, ...)
  Time idle() const { return host_wait + kernel_wait + other; }
};

struct HtaIdleBreakdown {
  bool rounded = false;                // on timestamps rounded inward as HTA rounds them
  std::vector<HtaStreamIdle> streams;  // by stream id
  HtaStreamIdle total;                 // summed over the streams (not the GPU's idle: streams idle at once)
  std::size_t launched() const { return total.launched; }
};

// The host wait of one CPU ProfilerStep#N on a rank's compute stream (step_host_wait()).
struct StepHostWait {
  std::string step;  // "ProfilerStep#N"
  Time host_wait;
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
  // Idle time breakdown (get_idle_time_breakdown), on HTA's timestamps, and where HTA rounds
  // them (fractional timestamps) also on the exact ones (HTA with HTA_DISABLE_NS_ROUNDING=1).
  HtaIdleBreakdown idle_breakdown;
  std::optional<HtaIdleBreakdown> idle_breakdown_exact;
  // The ProfilerSteps the window covers (the last one left out), at least 1: the per-step
  // figures are the window's divided by it.
  std::size_t steps = 1;
  // The compute stream's host wait in each step, the last one too (step_host_wait()).
  std::vector<StepHostWait> step_host_wait;
};

// HTA's consecutive_kernel_delay: a gap shorter than this that is not host wait is kernel
// wait. HTA's default is 30, compared with times in its tables' unit, microseconds (its
// docstring says nanoseconds; its code compares microseconds).
inline constexpr Time kHtaConsecutiveKernelDelay = Time::from_ps(30000000);

// How HTA computes them (hta/common/trace.py, trace_parser.py, analyzers/*.py):
// - With at least two distinct ProfilerStep#N names, a GPU activity (args.stream >= 0 and
//   args.correlation >= 0) is kept only when a CPU event with its correlation id starts before
//   the last CPU ProfilerStep#N starts; other events with a stream are kept when they start
//   before it. Intervals are not clipped.
// - Fractional timestamps round each event inward: ceil(ts), floor(ts + dur) in doubles.
// - Each class's intervals are merged across streams in start order (an interval joins the
//   current group unless it starts after every end so far); overlap = time computation and
//   communication groups run together / summed communication groups.
// - Idle time breakdown (hta/analyzers/breakdown_analysis.py, get_idle_time_breakdown and
//   _analyze_idle_time_for_stream): the kept activities of category kernel, gpu_memcpy or
//   gpu_memset, stream by stream in start order. Each but a stream's first has a gap, its
//   start less the previous activity's end (signed, summed as is): host wait when the CPU
//   event with its correlation id (its launch: a cudaLaunchKernel, cudaMemcpyAsync, or one
//   cudaGraphLaunch for all its graph's kernels) started after the previous activity ended;
//   else kernel wait when the gap is under kHtaConsecutiveKernelDelay; else other. A kernel
//   without a launch in the trace is never host wait. (Where several CPU events share a
//   correlation id, which no trace of tests/data has, HTA's filter repeats the kernel once
//   per event; here it counts once, its launch the last of them in the file.)
// Ties in start order are taken in file order (HTA leaves them to NumPy's unstable sort;
// they matter only for activities that rounding leaves shorter than nothing).
HtaMetrics measure_hta(const HtaView& view, const std::vector<Launch>& launches);

// HTA's host wait of each CPU ProfilerStep#N of `trace`, in file order, on its compute stream
// (the stream with the most activities of the idle breakdown's categories) and on the exact
// timestamps: the idle breakdown's rule for every gap on that stream, whatever HTA's window,
// each gap counted in the step whose CPU annotation holds the launch of the activity after it
// (a host wait is the host late to launch it). What one step alone waited for its host.
std::vector<StepHostWait> step_host_wait(const KinetoTrace& trace);

// NumPy's round(value, decimals): rint(value × 10^decimals) / 10^decimals.
double hta_round(double value, int decimals);

}  // namespace stepsim::analysis
