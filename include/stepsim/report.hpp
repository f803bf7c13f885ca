// The report of one simulated or measured step (docs/report.md), and the one entry point
// that runs a simulation.
#pragma once

#include <array>
#include <functional>
#include <string>

#include "stepsim/scenario.hpp"
#include "stepsim/timeline.hpp"
#include "stepsim/units.hpp"

namespace stepsim {

using PerKind = std::array<double, kCommKinds>;  // seconds, indexed by CommKind

struct Throughput {
  double tokens_per_s = 0;
  double samples_per_s = 0;
  double tflops_per_gpu = 0;           // model FLOPs (no recompute) per GPU per second, in TFLOPS
  double mfu = 0;                      // model FLOPs utilisation against dense peak of the precision
  double hardware_tflops_per_gpu = 0;  // FLOPs the GPUs execute, recompute included, in TFLOPS
  double hfu = 0;                      // hardware FLOPs utilisation (recompute counted)
};

struct Breakdown {
  double compute = 0;      // s: compute kernels running (not optimizer)
  PerKind exposed_comm{};  // s: communication running, no compute running
  double bubble = 0;       // s: compute stream idle for lack of work
  double optimizer = 0;    // s: optimizer kernels
  double other = 0;        // s: the rest (memcpy-only, idle waiting on nothing modelled)
  double exposed_total() const;
  bool operator==(const Breakdown&) const = default;
};

struct Overlap {
  double hidden_fraction = 0;           // overlap(comm, compute) / union(comm)
  double exposed_fraction_of_step = 0;  // exposed comm / step time
};

struct MemoryReport {
  double peak = 0, params = 0, grads = 0, optimizer = 0, activations = 0, buffers = 0;  // live tensors
  double reserved = 0;  // the caching allocator's reserved peak (torch.cuda.max_memory_reserved)
  double device = 0;    // reserved plus the CUDA context and NCCL's buffers
  double headroom = 0;  // training.memory_headroom: fits when device + headroom <= capacity
  double capacity = 0;
  bool fits = true;
  bool modelled = false;  // false until a memory model filled it in
};

// A GPU figure a calibration file set in place of the preset's: the value in force and where
// it came from ("fitted.json: fitted to trace rank0.json", "node.json: measured").
struct CalibratedValue {
  std::string key;  // "gemm_max", "fp8_gemm_max", ..., "comm_slowdown", "kernel_launch_us", "dispatch_us"
  double value = 0;
  double preset = 0;
  std::string source;
};

// Which costs came from calibration files (the scenario key `calibration`) and how much of
// the step they cover; empty `files` when the step was not calibrated.
struct CalibrationReport {
  std::vector<std::string> files;
  double compute_fraction = 0;        // share of compute kernel time taken from measured tables
  double comm_fraction = 0;           // share of communication time at measured sizes and shapes
  double comm_scaled_fraction = 0;    // share of communication time scaled from a measured shape
  double step_fraction = 0;           // (compute·compute_fraction + exposed comm·comm_fraction) / step
  std::vector<std::string> measured;  // what was measured: "gemm", "allreduce 8 ranks on 1 node", ...
  // The GPU figures the files set that this job's costs use (in force), and those it does not
  // (an FP8 GEMM efficiency under BF16 training, a slowdown beside communication where none
  // overlaps compute): set but changing nothing here.
  std::vector<CalibratedValue> values;
  std::vector<CalibratedValue> unused_values;
  // What the model alone answered, that a measurement would replace: "gemm bf16",
  // "allgather 8 ranks on 1 node(s) x 8", ...
  std::vector<std::string> not_measured;
};

// One pipeline stage, measured on the simulated rank that stands for it.
struct StageReport {
  int stage = 0;
  std::string rank;  // "rank 8 (stage 1)"
  double step_time_s = 0;
  Breakdown breakdown_s;
  double compute_slowdown_s = 0;  // part of breakdown_s.compute: compute slowed by overlapping comm
  PerKind comm_s{};
  MemoryReport memory_bytes;
};

// Energy and money for the step: board power × GPUs × time, GPU-hour price × GPUs × time.
struct CostReport {
  double gpu_power_w = 0;            // board power per GPU; 0: unknown
  double energy_per_step_j = 0;      // GPU boards only
  double energy_per_mtoken_kwh = 0;  // per million tokens
  double gpu_hour_price = 0;         // 0: no price given
  double cost_per_step = 0;          // in the price's currency
  double cost_per_mtoken = 0;
};

// One simulated alternative to the scenario: a change of keys and what it predicts.
struct Advice {
  std::string change;  // "data_parallel.bucket_cap_mb=100", several joined by " "
  std::string why;     // which cause of exposure it addresses
  std::string status;  // "ok", or why it was not simulated (does not fit, not simulated yet, too large)
  // The step with the change: only where status is "ok" (null in JSON otherwise).
  double step_time_s = 0;
  double exposed_fraction_of_step = 0;
};

// A figure over the simulated ranks: the smallest, the median and the largest, and which
// global ranks have the extremes (-1 when there are no ranks).
struct RankSpread {
  double min = 0, median = 0, max = 0;
  int min_rank = -1, max_rank = -1;
  bool operator==(const RankSpread&) const = default;
};

// The rank the others waited for most at rendezvous, and why.
struct Straggler {
  int rank = -1;  // global rank; -1: none (every collective's members arrived together)
  double caused_wait_s =
      0;              // summed over collectives it arrived last at (not pipeline SendRecv): a peer's longest wait
  std::string cause;  // "compute at 0.8× speed", "kernel jitter", "network link at 0.5× bandwidth", ...
};

// How the simulated ranks differ: every rank in all-ranks mode, one per stage otherwise.
struct RanksReport {
  int simulated = 0;
  RankSpread step_time_s;           // when the rank's last activity ends, from the step's start
  RankSpread compute_s;             // the rank's compute kernels (optimizer included)
  PerKind rendezvous_wait_s{};      // per kind: time a rank's collectives waited for their last member, mean over ranks
  PerKind rendezvous_wait_max_s{};  // the same, the rank that waited most
  Straggler straggler;
};

// The CPU that issues the kernels, measured on the same rank as the breakdown: how long it
// spent issuing, and how much of the step the GPU ran nothing while the CPU was still issuing
// (the GPU waited for the host: part of breakdown_s.other).
// The host side of the step, on the pipeline stage whose GPU waits longest for its CPU (the
// stage the step waits on: the other stages see that wait as bubble), the measured rank's stage
// measured on it and every other stage on its first simulated rank, as `stages` are; the
// measured rank where none waits longer. Its breakdown's part is the measured rank's own.
struct HostReport {
  std::string framework;  // training.framework
  std::string rank;       // the rank the figures below are of ("rank 4 (stage 1)")
  double cpu_issue_s = 0;
  double gpu_wait_s = 0;
  double gpu_wait_fraction_of_step = 0;
  // The measured rank's own GPU wait for its host, part of breakdown_s.other.
  double breakdown_gpu_wait_s = 0;
};

struct Report {
  std::string stepsim_version;
  int gpus = 0;
  double step_time_s = 0;
  Throughput throughput;
  Breakdown breakdown_s;
  PerKind comm_s{};  // total busy (union) time per kind
  Overlap overlap;
  MemoryReport memory_bytes;
  std::string config_json;         // the fully resolved scenario (JSON text), "{}" when none
  std::vector<std::string> notes;  // placement, warnings: shown in the table, "notes" in JSON
  CalibrationReport calibration;   // "calibration" in JSON, only when calibrated
  // Part of breakdown_s.compute: how much longer compute ran because communication kernels
  // shared the GPU with it (overlap time × s / (1 + s) for the GPU's comm_slowdown s).
  double compute_slowdown_s = 0;
  // Part of breakdown_s.other: the time the measured rank's GPU ran no compute or communication
  // kernel while activation offload's copies ran, the next kernel already issued (waiting for
  // the copies, not for the host: disjoint from host.breakdown_gpu_wait_s).
  double offload_wait_s = 0;
  std::vector<StageReport> stages;  // every pipeline stage (one entry without a pipeline)
  CostReport cost;
  std::string flop_convention;          // how model FLOPs are counted, for MFU and HFU
  std::vector<std::string> provenance;  // where the hardware presets' figures come from
  std::string advice_cause;             // which communication is exposed and why; "" when under target
  std::vector<Advice> advice;           // simulated alternatives, best first
  RanksReport ranks;                    // "ranks" in JSON: spread, rendezvous waits, straggler
  HostReport host;                      // "host" in JSON: simulated steps only
};

struct SimulationResult {
  Report report;
  Timeline timeline;
};

// What a caller of simulate() reads of the timeline besides the report.
struct SimulateOptions {
  // The global ranks whose intervals the timeline keeps; empty: every simulated rank's. The
  // report is the same either way: it tallies every rank as its intervals are written and
  // keeps those it measures (the critical-path rank, the first rank of each stage, the first
  // rank). Others' intervals are dropped as soon as they are tallied
  // (RankTimeline::dropped), which in all-ranks mode saves most of the run's memory.
  std::function<bool(int)> keep_intervals;
  // The kept ranks' timelines record how the host issued each op (RankTimeline::issues), for
  // a Kineto trace's CPU side.
  bool host_issues = false;

  // Only the report is read.
  static SimulateOptions report_only() {
    return {[](int) { return false; }};
  }
};

// Simulate one training step of a validated scenario.
SimulationResult simulate(const Scenario& scenario, const SimulateOptions& options = {});

// The memory model alone, as simulate() reports it in memory_bytes, without simulating:
// cheap enough to discard configurations that do not fit before simulating them.
MemoryReport estimate_memory(const Scenario& scenario);

const char* stepsim_version();

}  // namespace stepsim
