// Measurement and prediction with equal definitions. In a real trace an NCCL kernel starts
// when its stream reaches it and runs, counted as communication, while it waits for the
// slowest member; the simulator records that wait apart (Interval::waited) and starts the
// interval when every member has arrived. Both sides here count the wait as communication,
// and report it separately where it is known. A pipeline transfer's wait for the neighbouring
// stage is not such a wait but the bubble, on both sides as in the report (docs/report.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/analysis_output.hpp"
#include "stepsim/report.hpp"
#include "stepsim/scenario.hpp"
#include "stepsim/timeline.hpp"

namespace stepsim::analysis {

// `t` with every communication interval but pipeline transfers starting `waited` earlier (and
// waited zero).
Timeline waits_as_comm(Timeline t);

struct LikeForLike {
  Report measured;                        // the trace's mean step, waits as communication
  Report predicted;                       // the simulation's step, waits as communication
  std::optional<double> measured_wait_s;  // per step; unknown for a real trace (inside its kernels)
  double predicted_wait_s = 0;            // per step, on the rank the prediction is measured on
  // The GPU waiting for the host per step, by one rule on both sides: HolisticTraceAnalysis'
  // host wait on the compute stream, measured from the trace (measured_host_wait), predicted
  // on the simulated rank the prediction is measured on, each kernel launched where its Kineto
  // trace would put the launch (report::kernel_launches). simulate's own "GPU waiting for the
  // host" (Report::host.gpu_wait_s) counts only the time no kernel of the rank runs: a compute
  // stream waiting on another stream's collective for a kernel launched after the one before
  // it ended is host wait to HTA and not to simulate. A simulation that did not record the
  // host's issues (SimulateOptions::host_issues) gives simulate's figure instead.
  std::optional<double> measured_host_wait_s;
  double predicted_host_wait_s = 0;
  int measured_rank = -1;                 // the trace's global rank; -1 when it does not say
  int predicted_rank = -1;                // the global rank the prediction is measured on
  std::string predicted_label;            // that rank's label: "rank 0 (stage 0)"

  bool same_rank() const { return measured_rank >= 0 && measured_rank == predicted_rank; }
};

// The prediction is measured on the trace's global rank when the simulation simulated it
// (every rank with simulation.ranks "all", one rank per pipeline stage otherwise), else on
// the rank the report is measured on (the critical path); same_rank() tells which.
LikeForLike like_for_like(const Analysis& measured, const SimulationResult& predicted);

// HolisticTraceAnalysis' host wait per step (its window's over the ProfilerSteps it covers) on
// the compute stream of `h`'s rank, the stream with the most kernels (on it the GPU waits for
// the host; another stream's gaps are mostly its wait for the compute stream's work), on the
// exact timestamps where HTA rounds them; none when the trace has no idle breakdown (not a
// Kineto trace, or no kernel tied to its launch).
std::optional<double> measured_host_wait(const HtaMetrics& h);
// The same of one ProfilerStep alone (`step`: "ProfilerStep#N"), the last one too, each gap on
// the compute stream counted in the step that launched the kernel after it (step_host_wait()):
// compare --step N; none where measured_host_wait(h) is none.
std::optional<double> measured_host_wait(const HtaMetrics& h, const std::string& step);

// Where the process groups the measured rank communicates in are of another size than the
// prediction's communicators of the same kind, one line per kind ("tp process groups: the
// trace's have 8 ranks, the scenario's 2; ..."): the trace states each group's size ("Group size"),
// the simulation holds its communicators (its timeline's groups; a pipeline's also of
// `pipeline_stages` ranks, Megatron's pipeline group, beside the simulator's pairs of
// neighbouring stages). Groups of kind other and of one rank say nothing.
std::vector<std::string> group_size_differences(const Analysis& measured, const SimulationResult& predicted,
                                                int pipeline_stages);

// What tells that the trace and `scenario` (simulated as `predicted`) are different jobs, one
// line each: the world size its distributedInfo gives, the size of each kind's process groups
// (group_size_differences), and compute per step more than 2x apart, more than hardware
// differences explain. compare prints them; calibrate from-trace fits no efficiency past them.
std::vector<std::string> job_differences(const Analysis& measured, const Scenario& scenario,
                                         const SimulationResult& predicted);

}  // namespace stepsim::analysis
