// Measurements of a timeline step by step with report::measure() (the simulator's own
// definitions), plus what only a real trace has: each collective's size and bandwidth.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/report_io.hpp"
#include "stepsim/report.hpp"
#include "stepsim/timeline.hpp"

namespace stepsim::analysis {

using PerOp = std::array<double, 8>;  // seconds, indexed by CollOp

struct StepMetrics {
  std::string name;
  Time start;
  Time end;
  report::WindowMetrics metrics;
  PerOp exposed_by_op{};
  std::vector<double> exposed_by_group;  // per Timeline::groups, then one for "no group"
};

// One communication kernel with nccl-tests' algbw = S / t and busbw = algbw × factor.
struct CollectiveRecord {
  std::string step;
  std::uint32_t name = 0;  // index into Timeline::names
  CollOp op = CollOp::other;
  std::int32_t group = -1;
  int ranks = 0;   // group size (the process group's, else the job's world size); 0 unknown
  Bytes bytes{0};  // 0 unknown
  Time start;      // when the data starts to move
  // When the rank reached the collective: the start less its wait at the rendezvous for the
  // last member (stepsim's traces, args wait_us); the start itself in a real trace, whose
  // kernel starts on arrival and holds the wait.
  Time arrival;
  Time duration;
  // Unknown (none) without the size or a duration above zero; busbw also without the group size.
  std::optional<Bandwidth> algbw;
  std::optional<Bandwidth> busbw;
};

struct TraceMetrics {
  std::size_t rank_index = 0;  // into Timeline::ranks
  std::vector<StepMetrics> steps;
  StepMetrics total;                       // sums over the steps
  double whole_trace_hidden_fraction = 0;  // HTA's number: every activity of the rank
  std::vector<CollectiveRecord> collectives;
};

// Measures `rank_index` over every step window, or only the one named `step` ("4" or
// "ProfilerStep#4"); InputError naming `source` (the file measured; "" the trace) when no
// window has that name. `world_size` sizes the collectives whose process group the trace
// does not name (0: unknown, as their busbw then is).
TraceMetrics measure_steps(const Timeline& timeline, std::size_t rank_index, const std::optional<std::string>& step,
                           int world_size = 0, const std::string& source = "");

// Exposed communication (comm running, no compute running) between `begin` and `end`,
// split equally among the collective ops / process groups running at that instant.
PerOp exposed_by_op(const RankTimeline& rank, Time begin, Time end);
std::vector<double> exposed_by_group(const RankTimeline& rank, std::size_t groups, Time begin, Time end);

// The mean step as a Report with the contract's fields (step_time_s, breakdown_s, comm_s,
// overlap); hidden fraction over all steps together. stepsim_version is left to the caller.
Report mean_report(const TraceMetrics& m, int gpus);

// busbw factor-scaled bandwidth for one kernel, as nccl-tests prints it. `world_size` sizes a
// collective without a process group of known size (0: unknown).
CollectiveRecord collective_record(const Timeline& timeline, const Interval& iv, int world_size);

}  // namespace stepsim::analysis
