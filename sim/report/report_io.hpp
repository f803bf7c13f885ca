// Metrics over a timeline window and the writers of the report (table, JSON) and of the
// Chrome/Perfetto trace. Shared by `simulate`, `analyze` and `compare`.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stepsim/report.hpp"
#include "stepsim/scenario.hpp"
#include "stepsim/timeline.hpp"

namespace stepsim::report {

// Everything the definitions of docs/report.md measure on one rank between `begin` and `end`.
struct WindowMetrics {
  double length = 0;       // s
  double compute = 0;      // compute (not optimizer) running
  double optimizer = 0;    // optimizer compute running
  PerKind exposed{};       // comm running, no compute running; split among the kinds running
  PerKind busy{};          // union of each kind's comm intervals
  double comm_union = 0;   // union of all comm
  double overlap = 0;      // comm and compute at once
  double slowing = 0;      // NCCL kernels and compute at once: the compute runs slower
  double bubble = 0;       // inside bubble markers, nothing running
  double memory_only = 0;  // memcpy/memset only
  double idle = 0;         // nothing at all, outside bubble markers
  double hidden_fraction() const { return comm_union > 0 ? overlap / comm_union : 0.0; }
  double exposed_total() const {
    double sum = 0;
    for (double e : exposed) sum += e;
    return sum;
  }
};

// Sweeps the rank's intervals clipped to [begin, end): O(n log n), one buffer.
WindowMetrics measure(const RankTimeline& rank, Time begin, Time end);

// The rank's CPU issue time in [begin, end), and of it the time no kernel of the rank ran; and
// the time no kernel ran, the next one already issued (or the step's last done), while a copy
// ran: the GPU waiting for its copies (activation offload's), disjoint from its wait for the host.
struct HostMetrics {
  double issue = 0;      // s
  double gpu_wait = 0;   // s
  double copy_wait = 0;  // s
};
HostMetrics measure_host(const RankTimeline& rank, Time begin, Time end);

// "rank 3 (stage 1)": the label, or "rank N" without one.
std::string rank_title(const RankTimeline& rank);

// The facts a Report needs besides the timeline itself.
struct ReportInputs {
  std::string version;              // stepsim_version
  int gpus = 0;                     // real GPUs in the job
  double tokens_per_step = 0;       // global batch × sequence length
  double samples_per_step = 0;      // global batch in sequences
  double model_flops_per_step = 0;  // all GPUs together, no recompute
  FlopRate peak_flops_per_gpu;      // dense peak of the training precision
  MemoryReport memory;              // as modelled; `modelled` false leaves zeros and a note
  std::string config_json = "{}";   // the fully resolved scenario
  std::vector<std::string> notes;
  int representative = -1;                 // index into Timeline::ranks; -1: the critical-path rank
  double hardware_flops_per_step = 0;      // all GPUs together, recompute included
  double comm_slowdown = 0;                // the GPU's slowdown of compute while comm runs
  bool derived_slowdown = false;           // instead, by the SMs and HBM bandwidth NCCL takes (engine-measured)
  std::vector<int> stage_of_rank;          // pipeline stage of each Timeline rank; empty: no stages
  std::vector<MemoryReport> stage_memory;  // per pipeline stage
  double gpu_power_w = 0;
  double gpu_hour_price = 0;
  std::string flop_convention;
  std::vector<std::string> provenance;
  // The ranks' spread and waits, tallied while the timeline was written (RankTally), for a
  // timeline that does not keep every rank's intervals; unset: measured on the timeline.
  std::optional<RanksReport> ranks;
};

// The window a report measures: the first step window, or the span of all intervals when
// the timeline has none.
StepWindow report_window(const Timeline& timeline);

// The rank that finishes its last activity latest inside `window` (the critical path);
// the first such rank on ties. -1 when the timeline has no ranks.
int critical_rank(const Timeline& timeline, const StepWindow& window);

// The report of the timeline's step window, measured on `inputs.representative` or on the
// critical-path rank: breakdown_s sums to step_time_s (other = memory-only + idle).
Report make_report(const Timeline& timeline, const ReportInputs& inputs);

// When the rank's last activity other than a bubble ends inside `window`; window.start when
// none does. critical_rank() takes the rank for which it is latest.
Time last_activity(const RankTimeline& rank, const StepWindow& window);

// Per-rank step times, compute times and rendezvous waits, and the rank that made others
// wait most (its cause is left for the caller, who knows why ranks differ).
RanksReport ranks_report(const Timeline& timeline, const StepWindow& window);

// ranks_report() one rank at a time, in rank order, for a run that drops most ranks'
// intervals as soon as they are written: `ranks` of them, over `groups` process groups.
class RankTally {
 public:
  RankTally(std::size_t groups, std::size_t ranks, const StepWindow& window);
  ~RankTally();
  RankTally(const RankTally&) = delete;
  RankTally& operator=(const RankTally&) = delete;
  void add(const RankTimeline& rank);
  RanksReport result() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// What one pipeline stage holds and the compute time of each part over the step, at the
// ops' own costs (no slowdown beside communication, no jitter).
struct StageWork {
  int layers = 0;
  bool embedding = false;
  bool head = false;  // the LM head and the loss (and multi-token prediction)
  double layers_s = 0, embedding_s = 0, head_s = 0;
};

// The pipeline's shape, for explaining its bubbles.
struct PipelineFacts {
  int pp = 1;
  int virtual_stages = 1;
  long long micro_batches = 0;  // per pipeline replica and step
  // A schedule that splits the backward (zb-h1, zb-h2, dualpipe): its bubble depends on the
  // input- and weight-gradient passes' times, so 1F1B's is quoted as a comparison only.
  std::string split_schedule;
  std::vector<StageWork> stages;  // one per stage; empty: the reasons are not known
};

// Why the stage with the largest bubble waits, or "" without a pipeline or a bubble.
std::string bubble_note(const Report& report, const PipelineFacts& pipeline);

void write_table(const Report& report, std::ostream& out);
void write_json(const Report& report, std::ostream& out);
// A cluster of `simulate --compare-cluster`: the same job simulated on it (its layout held fixed).
struct ComparedCluster {
  std::string cluster;
  const Report* report = nullptr;
};
// The report with the comparison's columns, the scenario's own cluster first, as
// `compare_clusters` (each column's step time, throughput, exposed share, memory and cost, the
// figures of the table).
void write_json(const Report& report, const std::vector<ComparedCluster>& compared, std::ostream& out);
// `world_size` (the job's GPUs; 0: unknown, left out) goes into a distributedInfo as PyTorch's
// profiler writes it, with the rank when the trace holds one, so that `stepsim analyze` reads
// the trace back as the job it is and not as a job of its simulated ranks. `gpu` (the GPU
// preset's name; "": unknown, left out) goes into a deviceProperties as in the Kineto trace
// (write_kineto_trace), for the GPU check of `calibrate from-trace`.
void write_trace(const Timeline& timeline, std::ostream& out, int world_size = 0, const std::string& gpu = {});
// Only the ranks of Timeline::ranks whose global rank `keep` accepts.
void write_trace(const Timeline& timeline, const std::function<bool(int)>& keep, std::ostream& out, int world_size = 0,
                 const std::string& gpu = {});
// The element types of a simulated step's collectives, which its timeline does not carry:
// gradient reductions (a data-parallel or FSDP AllReduce or ReduceScatter, the pipeline's
// AllReduces of the tied embedding's and DualPipe's mirrored gradients) in
// data_parallel.grad_reduce_dtype, everything else (activations, parameters gathered) in
// `other`.
struct CollectiveDtypes {
  Precision gradients = Precision::bf16;
  Precision other = Precision::bf16;
  // A parameter AllGather (data-parallel or FSDP) moves a byte buffer, each FP8 weight at 1
  // byte and each other tensor at 2 (per-tensor FP8: parallelism::gathered_bytes); FSDP's root
  // unit, which holds no FP8 weight, gathers in the compute precision.
  bool byte_parameter_gathers = false;
};
// A scenario's: its grad_reduce_dtype, and its activations' type (bf16 under an 8- or 4-bit
// format).
CollectiveDtypes collective_dtypes(const Scenario& s);
// One rank (`rank_index` into Timeline::ranks; -1: the rank the report is measured on) as a
// PyTorch profiler (Kineto) trace that `stepsim analyze` and HolisticTraceAnalysis read;
// `gpu` (the GPU preset's name) is its deviceProperties' name, for the GPU check of
// `calibrate from-trace`; `dtypes` name each collective's kernel and dtype and count its
// elements.
void write_kineto_trace(const Timeline& timeline, int rank_index, const std::string& gpu, std::ostream& out,
                        const CollectiveDtypes& dtypes = {});

// When the host launched the kernel of each of `rank`'s intervals, as write_kineto_trace()
// records it: an op the host issued, at its cudaLaunchKernel's (cudaMemcpyAsync's) start, the
// kernel launch's share of its cost before it was issued; an op a CUDA graph replayed, at the
// cudaGraphLaunch of its layer's replay (`graph`: which, from 1), when the host reached the
// first op replayed; without recorded host issues, at the kernel's start within `window`.
// None for a bubble, which no host launches.
struct KernelLaunch {
  std::optional<Time> at;
  std::uint32_t graph = 0;  // 0: launched on its own
};
std::vector<KernelLaunch> kernel_launches(const Timeline& timeline, const RankTimeline& rank, const StepWindow& window);

// One output file of a command: the flag that asked for it, the path ("-": stdout) and
// what to write.
struct Output {
  std::string flag;  // "--json", "--trace", ...
  std::string path;
  std::function<void(std::ostream&)> write;
};

// Refuses, with InputError, outputs that cannot be written: an empty name, a folder, a
// symlink loop, and two outputs that name the same file (however spelled). Writes nothing.
void check_outputs(const std::vector<Output>& outputs);

// Writes every output or, when one fails, leaves every regular file as it was: regular files
// are written to temporaries first and replaced (renamed over) only once all succeeded;
// devices, FIFOs, /dev/fd/N and stdout are written through, never replaced. Errors are
// InputError(path, flag, what went wrong). With `table`, the command's printed report goes to
// stdout after every output that is not stdout has been written (so a full device named by a
// flag leaves stdout empty), and not at all when an output is stdout itself ('-', /dev/stdout,
// /dev/fd/1: its reader gets that output alone); a stdout that cannot take it is
// InputError("<stdout>", ...).
void write_outputs(const std::vector<Output>& outputs, const std::function<void(std::ostream&)>& table);
void write_outputs(const std::vector<Output>& outputs);
void write_output(const Output& output);

// Holds each of descriptors 0, 1 and 2 that the program was started without (`stepsim ...
// >&-`), so that no file opened later takes its number. For the program's main(), first.
void hold_standard_descriptors();

// std::cout through a buffer that keeps the errno of a failed write, unless stdout is a
// terminal (which keeps its line buffering). For the program's main().
void check_stdout_writes();
// Flushes what was printed to stdout; throws InputError("<stdout>", "", "cannot write WHAT:
// ...") when stdout could not take it (a full disk, /dev/full, an I/O error).
void flush_stdout(const std::string& what);

}  // namespace stepsim::report
