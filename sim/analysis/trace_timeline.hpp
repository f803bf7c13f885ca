// Real profiler traces as a stepsim Timeline, so that `analyze` and `compare` measure them
// with the same code and definitions as a simulated step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/hta_metrics.hpp"
#include "analysis/kineto_trace.hpp"
#include "stepsim/timeline.hpp"

namespace stepsim::analysis {

struct LoadedTrace {
  Timeline timeline;  // its step windows: every rank's together
  // Per rank, in Timeline::ranks order: its own step windows, which measure it (a Kineto
  // rank's from its own GPU activities; the windows a stepsim trace gives, for each of its ranks).
  std::vector<std::vector<StepWindow>> rank_steps;
  std::vector<DistributedInfo> dist;  // per rank, in Timeline::ranks order
  std::vector<std::string> files;     // per rank
  std::vector<HtaMetrics> hta;        // per rank: HolisticTraceAnalysis' figures
  std::uint64_t content_bytes = 0;    // decompressed JSON read, all files
  bool simulated = false;             // written by stepsim: collectives' waits are known
};

// One trace file (plain or .gz), or a folder whose *.json and *.json.gz files are the ranks
// of one job. Throws InputError naming the file on unreadable or malformed input, on times
// out of range (a negative dur; ts or dur beyond 10^12 us, see kineto_reader.cpp) and on a
// file without one GPU activity of positive length.
LoadedTrace load_trace(const std::string& path);

// What load_trace reads, before it becomes a timeline (to_timeline): for a caller that needs
// more of the trace than the timeline keeps (its CPU operators) without reading it twice, which
// a pipe or standard input would not allow.
std::vector<KinetoTrace> read_traces(const std::string& path);

// The files load_trace reads for `path`: the file itself ("-": /dev/stdin, standard input), or
// a folder's *.json and *.json.gz sorted by name, numbers by value (rank2 before rank10).
// InputError when it cannot be read or the folder holds none.
std::vector<std::string> trace_files(const std::string& path);

// One file alone (its ranks: one for a Kineto trace, one per process for stepsim's own),
// with times relative to `origin`, which the first timestamp sets when it is unset.
LoadedTrace load_file(const std::string& file, TimeOrigin& origin);

// How the intervals and steps are made (HolisticTraceAnalysis' classes):
// - GPU activities are the complete events of category kernel, gpu_memcpy and gpu_memset
//   (synchronisation events are not activities), each with its args.stream (the reader
//   refuses one without: HTA's figures would leave it out). Each (device, stream) is one
//   stream.
// - A kernel is communication when its name starts with "nccl" or contains "ncclKernel";
//   Memcpy/Memset are memory; every other kernel is compute.
// - A step is a CPU annotation ProfilerStep#N. A GPU activity belongs to the step during
//   whose CPU span it was launched (its cuda_runtime event with the same correlation id);
//   without a launch, to the step whose CPU span contains the activity's own start.
// - A step's window starts at the first start of its activities and ends where the next
//   step's window starts (in time order, whatever the numbers N say), so that steps tile the
//   time like the period of a training loop even when the CPU runs ahead of the GPU; the
//   last step ends at the last end of the activities of every step (it includes the drain,
//   and the work of earlier steps still running). Where the trace gives a step's GPU-side
//   annotation (category gpu_user_annotation, ProfilerStep#N), the step's activities span
//   it too: the step starts no later and ends no earlier than it (PyTorch's spans the step's
//   kernels; stepsim's own the whole step, so that a rank idle at its start, a later
//   pipeline stage, is measured over the step). Steps without GPU activity are dropped; a
//   trace without ProfilerStep annotations has one window "trace" over all its GPU activity.
//   Each rank's windows are of its own activities (LoadedTrace::rank_steps): another rank's
//   kernels, started earlier or ended later, are no part of its step. Timeline::steps are
//   of all the ranks' activities together.
LoadedTrace to_timeline(std::vector<KinetoTrace> traces);

}  // namespace stepsim::analysis
