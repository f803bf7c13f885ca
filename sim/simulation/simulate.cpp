// simulate(): the layers in order — workload, hardware, parallelism, engine, report.
#include "stepsim/report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>

#include "calibration/apply.hpp"
#include "engine/engine.hpp"
#include "hardware/gpu_model.hpp"
#include "parallelism/activation_offload.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/mesh.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "parallelism/program_builder.hpp"
#include "parallelism/stage_layout.hpp"
#include "parallelism/variation.hpp"
#include "report/report_io.hpp"
#include "simulation/calibrated_costs.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"
#include "workload/work.hpp"

namespace stepsim {

namespace {

// What each pipeline stage holds and how long each part computes over the step, at the costs
// the program charged its ops (calibrated where measured), for the bubble note's reasons: a
// chunk's first micro-batch runs its first forward (Megatron-Core's weight quantization), the
// others the plain one; every micro-batch its recompute and backward.
std::vector<report::StageWork> stage_work(const Scenario& s, const workload::ModelWork& work,
                                          const calibration::MeasuredTables& tables, const hardware::GpuModel& gpu) {
  const ParallelSpec& p = s.parallel;
  const auto m = static_cast<double>(s.training.micro_batches(p.dp));
  const auto seconds = [&](const workload::LayerWork& block) {
    double sum = 0;
    const auto add = [&](const std::vector<workload::OpCost>& ops, double times) {
      for (const workload::OpCost& op : ops)
        sum += calibration::calibrate_compute(tables, gpu, op).time.seconds() * times;
    };
    add(block.forward, block.first_forward.empty() ? m : m - 1);
    add(block.first_forward, 1);
    add(block.recompute, m);
    add(block.backward, m);
    return sum;
  };
  const std::vector<parallelism::ChunkLayers> layout = parallelism::chunk_layers(p, s.model.layers);
  std::vector<report::StageWork> out;
  for (int stage = 0; stage < p.pp; ++stage) {
    report::StageWork w;
    for (int k = 0; k < parallelism::chunks_per_stage(p); ++k) {
      const parallelism::ChunkLayers& c = parallelism::chunk_of(layout, p, stage, k);
      w.layers += c.layers;
      for (int l = c.first_layer; l < c.first_layer + c.layers; ++l) w.layers_s += seconds(work.block(l));
      if (c.pre) w.embedding_s += seconds(work.pre);
      if (c.post) w.head_s += seconds(work.post);
      w.embedding = w.embedding || c.pre;
      w.head = w.head || c.post;
    }
    out.push_back(w);
  }
  return out;
}

// The memory model's breakdown for the report, and a note when the peak exceeds capacity
// (the simulate command also logs it; the library itself stays silent).
void add_memory(const Scenario& scenario, const workload::ModelWork& work, report::ReportInputs& inputs) {
  const parallelism::MemoryEstimate estimate = parallelism::estimate_memory(scenario, work);
  inputs.memory = parallelism::memory_report(estimate);
  for (const parallelism::StageMemory& st : estimate.stages) {
    parallelism::MemoryEstimate one = estimate;
    one.stages = {st};
    inputs.stage_memory.push_back(parallelism::memory_report(one));
  }
  const std::string note = parallelism::memory_note(estimate);
  if (!note.empty()) inputs.notes.push_back(note);
  // What CUDA graphs hold is not modelled: the capture keeps each graph's static inputs and
  // outputs and allocates inside a private pool that eager allocations cannot reuse; how much
  // that adds depends on the scope, the micro-batches in flight and the framework's buffer
  // sharing (docs/model.md).
  if (scenario.training.cuda_graphs)
    inputs.notes.push_back(
        "memory: the CUDA graphs' own memory is not counted: the figures are the eager step's; a graph keeps its "
        "static inputs and outputs and allocates from a private pool other allocations cannot reuse, from next to "
        "nothing to several GB more by scope and pipeline depth, so a close fit needs measuring");
}

// Where the hardware presets' figures come from, and a warning when one is not fitted.
void add_provenance(const Scenario& s, report::ReportInputs& inputs) {
  auto describe = [&](const char* what, const std::string& name, const Provenance& p) {
    if (p.source.empty()) return;
    inputs.provenance.push_back(fmt::format("{} {}: {}", what, name, p.source));
    if (p.fitted != Fitted::yes)
      inputs.notes.push_back(fmt::format(
          "{} {} is {} ({}); treat its times as estimates until calibrated", what, name,
          p.fitted == Fitted::partly ? "fitted to measurements only in part" : "not fitted to measurements", p.source));
  };
  describe("GPU", s.cluster.gpu.name, s.cluster.gpu.provenance);
  describe("cluster", s.cluster.name, s.cluster.provenance);
}

// A NIC faster than the PCIe path from its GPU carries only what that path does (NCCL's
// topology search counts the path's bandwidth): said where the job crosses the network. With
// more NICs than GPUs, a GPU's NICs together are its port, and their sum crosses the one link.
void add_nic_path_note(const Scenario& s, report::ReportInputs& inputs) {
  const PcieLink link = gpu_pcie_link(s.cluster.gpu.arch);
  const std::string link_name = fmt::format("PCIe Gen{} x16", link.generation);
  const double nic = s.cluster.inter_node.nic_bandwidth.gbytes_per_s();
  const double per_gpu =
      std::max(1.0, static_cast<double>(s.cluster.inter_node.nics_per_node) / std::max(1, s.cluster.gpus_per_node));
  const double port = nic * per_gpu;
  const double line_rate = link.line_gbps;
  if (s.parallel.gpus() <= s.cluster.domain_gpus() || port <= line_rate * (1 + 1e-9)) return;
  if (per_gpu == 1.0) {
    inputs.notes.push_back(fmt::format(
        "cluster.inter_node.nic_bandwidth {:g} Gb/s ({:g} GB/s) is beyond the {} link between each {} GPU and its "
        "NIC ({:g} GB/s; NCCL's topology counts {:g} GB/s of it): collectives across nodes run at that, not at the "
        "NIC's rate",
        nic * 8, nic, link_name, s.cluster.gpu.name, line_rate, link.nccl_gbps()));
    return;
  }
  inputs.notes.push_back(fmt::format(
      "cluster.inter_node: {} NICs of {:g} Gb/s for {} GPUs give each GPU {:g} NICs, {:g} Gb/s ({:g} GB/s), beyond "
      "the {} link between each {} GPU and its NICs ({:g} GB/s; NCCL's topology counts {:g} GB/s of it): collectives "
      "across nodes run at that, not at the NICs' rate",
      s.cluster.inter_node.nics_per_node, nic * 8, s.cluster.gpus_per_node, per_gpu, port * 8, port, link_name,
      s.cluster.gpu.name, line_rate, link.nccl_gbps()));
}

// Megatron-Core's EP overlap asked for where its step has no passes to pair: the key changes
// nothing, and the report says so and why.
std::string ep_overlap_note(const Scenario& s) {
  if (!s.model.moe.a2a_overlap || parallelism::ep_overlap_pairs(s)) return "";
  const long long m = s.training.micro_batches(s.parallel.dp);
  return fmt::format(
      "model.moe.a2a_overlap has no effect here: Megatron-Core's EP overlap runs one micro-batch's forward beside "
      "another's backward, and with {} micro-batch{} per replica (global_batch {} / (micro_batch {} x dp {})) {} no "
      "forward has another micro-batch's backward to pair with; it needs {}",
      m, m == 1 ? "" : "es", s.training.global_batch, s.training.micro_batch, s.parallel.dp,
      s.parallel.pp > 1 ? fmt::format("over {} stages, no stage has a steady state, and", s.parallel.pp)
                        : std::string("and no pipeline,"),
      s.parallel.pp > 1 ? "a stage whose warm-up leaves passes for a steady state"
                        : "2 or more micro-batches per replica");
}

// The rank whose own hardware is slowest (compute speed, NVLink or NIC share, against the
// fastest GPU's), -1 if none is slower than another.
int slowest_hardware(const Scenario& s, const parallelism::HardwareSpread& spread, const Timeline& timeline) {
  if (!s.simulation.variation.singles_out_gpus()) return -1;
  int slowest = -1;
  double least = 1.0;
  for (const RankTimeline& rank : timeline.ranks) {
    const parallelism::Hardware h = spread.own(rank.rank);
    const double f = std::min({h.speed, h.nic, h.nvlink});
    if (f >= least) continue;
    least = f;
    slowest = rank.rank;
  }
  return slowest;
}

// Why the straggler holds the others back. A degraded link makes no rank of its own arrive
// late: its collectives run slower for every member, and the rank that then arrives last
// elsewhere (its compute slowed longer by the longer communication, or held back by a
// pipeline peer) is one whose hardware is whole. The report names the slowed hardware's rank.
// Where no rank waited for another, there is no straggler, however slow some hardware is.
void explain_straggler(const Scenario& s, const Timeline& timeline, Straggler& straggler) {
  if (straggler.rank < 0) return;
  const parallelism::HardwareSpread spread(s);
  straggler.cause = spread.cause(straggler.rank);
  if (!straggler.cause.empty()) return;
  const int slowest = slowest_hardware(s, spread, timeline);
  if (slowest < 0) {
    straggler.cause = "its place in the schedule (no variation on this rank)";
    return;
  }
  const parallelism::Hardware h = spread.own(slowest);
  // A slow link slows its collectives for every member; a slow GPU arrives late at its own
  // collectives and holds back, through the pipeline, the stages that wait for its output.
  const bool link = std::min(h.nic, h.nvlink) < h.speed;
  straggler.cause =
      fmt::format("{} ({}; rank {}, whose hardware is whole, arrives last after them)", spread.cause(slowest),
                  link ? "its collectives run slower for every member"
                       : "its late work holds back the ranks that wait on it, through the pipeline",
                  straggler.rank);
  straggler.rank = slowest;
}

// Microseconds as a plain number to a tenth, without a trailing ".0": 1012, 17, 73.4.
std::string plain_us(Time t) {
  std::string text = fmt::format("{:.1f}", t.us());
  if (text.ends_with(".0")) text.resize(text.size() - 2);
  return text;
}

// Which framework's kernels and host costs the step runs, the kernel keys set beside it, and
// what its CPU pays per operator.
std::string framework_note(const TrainingSpec& t, Time launch, Time dispatch, bool experts) {
  const FrameworkTraits& f = traits_of(t.framework);
  std::vector<std::string> overridden;
  if (t.fusion != f.fusion) overridden.emplace_back("fusion");
  if (t.attention != f.attention) overridden.emplace_back("attention");
  if (t.cross_entropy != f.cross_entropy) overridden.emplace_back("cross_entropy");
  if (t.grad_clip != f.grad_clip) overridden.emplace_back("grad_clip");
  std::string note = fmt::format("framework {}: {}", f.name, f.kernels);
  if (!overridden.empty())
    note += fmt::format(" (training.{} set apart from it)", fmt::join(overridden, ", training."));
  note += fmt::format("; the CPU issues each operator in {} us ({} us launch, {} us dispatch)",
                      plain_us(launch + dispatch), plain_us(launch), plain_us(dispatch));
  if (experts && f.expert_gemm_host > Time::zero())
    note += fmt::format(
        "; each further expert GEMM of a grouped GEMM {} us ({} us launch, {} us of "
        "Transformer Engine's GroupedLinear around it)",
        plain_us(launch + f.expert_gemm_host), plain_us(launch), plain_us(f.expert_gemm_host));
  if (t.cuda_graphs && t.cuda_graph_scope.empty()) note += ", the transformer layers' replayed by CUDA graphs at no CPU cost";
  if (t.cuda_graphs && !t.cuda_graph_scope.empty()) {
    std::vector<std::string> scopes;
    for (const CudaGraphScope scope : t.cuda_graph_scope) scopes.emplace_back(to_string(scope));
    note += fmt::format(", each layer's {} replayed by CUDA graphs at no CPU cost", fmt::join(scopes, ", "));
  }
  return note;
}

// Each GPU's share of its host link: the link over the job's GPUs on it, which are all of
// the link's but on a last link the job fills only in part (or a job smaller than a link).
std::string host_share_text(const Scenario& s) {
  const HostLink& link = s.cluster.host_link;
  const int last = parallelism::host_link_gpus(s, s.parallel.gpus() - 1);
  std::string text = fmt::format("{:.4g} GB/s per GPU", parallelism::host_link_share(s, 0).gbytes_per_s());
  if (s.parallel.gpus() > link.gpus_per_link && last < link.gpus_per_link)
    text += fmt::format(", {:.4g} GB/s for the {} GPU{} of the job on a link of {}", link.per_gpu(last).gbytes_per_s(),
                        last, last == 1 ? "" : "s", link.gpus_per_link);
  text += fmt::format(" (cluster.host_link: {:.4g} GB/s shared by {} GPU{}", link.bandwidth.gbytes_per_s(),
                      link.gpus_per_link, link.gpus_per_link == 1 ? "" : "s");
  if (s.parallel.gpus() < link.gpus_per_link) text += fmt::format(", {} of them in the job", s.parallel.gpus());
  return text + ")";
}

// What activation offload copies, where to, and how fast.
std::string offload_note(const Scenario& s, const workload::ModelWork& work) {
  const int n = s.training.activation_offload_layers;
  Bytes all{0};
  for (int l = 0; l < n; ++l) all += parallelism::offloaded_bytes(work, l);
  return fmt::format(
      "activation offload: layers 0-{} of {} copy their activations ({:.1f} MiB per micro-batch in all) to host "
      "memory and back, each way at {}{}, on copy streams beside the compute, synchronised as Transformer Engine's CPU "
      "offload does",
      n - 1, s.model.layers, all.mib_value(), host_share_text(s),
      parallelism::offload_on_pcie(s) ? ", over each GPU's PCIe link, which its NIC traffic shares" : "");
}

std::string jitter_note(const JitterSpec& j, RankMode mode) {
  const char* name = j.distribution == JitterKind::normal      ? "normal"
                     : j.distribution == JitterKind::lognormal ? "lognormal"
                                                               : "uniform";
  if (mode == RankMode::all)
    return fmt::format(
        "kernel jitter: every compute kernel of every rank drawn from a {} distribution of mean 1 and "
        "relative standard deviation {:.3g} (seed {})",
        name, j.sigma, j.seed);
  return fmt::format(
      "kernel jitter ({}, relative standard deviation {:.3g}): each collective starts after the expected wait for the "
      "slowest of its N members, sigma x sqrt(sum of squared kernel times since a collective last held their compute "
      "back) x E[max of N such sums of the distribution's draws], and the step ends when the slowest rank is done; "
      "simulation.ranks \"all\" draws every kernel instead",
      name, j.sigma);
}

// The first simulated rank of each pipeline stage, in stage order, as the report's stage
// table measures them (report::make_report).
std::vector<bool> stage_ranks(const std::vector<int>& stage_of_rank) {
  std::vector<bool> first(stage_of_rank.size(), false);
  std::size_t stages = 0;
  for (std::size_t i = 0; i < stage_of_rank.size(); ++i) {
    if (stage_of_rank[i] < 0 || static_cast<std::size_t>(stage_of_rank[i]) != stages) continue;
    first[i] = true;
    ++stages;
  }
  return first;
}

// Tallies every rank for the report as the engine writes its intervals, and keeps only the
// intervals that someone reads afterwards: the caller's ranks, the ranks the report measures
// (the first, each stage's first, and the critical path's, which is known only once every rank
// is written: the latest so far is kept and dropped when a later one ends later).
class ReportObserver final : public engine::IntervalObserver {
 public:
  ReportObserver(const std::function<bool(int)>& keep, std::vector<bool> measured, std::size_t groups)
      : keep_(keep), measured_(std::move(measured)), groups_(groups) {}

  void begin(const StepWindow& step) override {
    window_ = step;
    tally_ = std::make_unique<report::RankTally>(groups_, measured_.size(), step);
  }

  bool observe(Timeline& timeline, std::size_t r) override {
    const RankTimeline& rank = timeline.ranks[r];
    tally_->add(rank);
    const Time last = report::last_activity(rank, window_);
    if (critical_ < timeline.ranks.size() && last <= critical_end_) return needed(timeline, r);
    if (critical_ < timeline.ranks.size() && !needed(timeline, critical_)) {
      RankTimeline& old = timeline.ranks[critical_];
      old.dropped = old.intervals.size();
      old.intervals = {};
      old.issues = {};
    }
    critical_ = r;
    critical_end_ = last;
    return true;
  }

  RanksReport ranks() const { return tally_->result(); }

 private:
  bool needed(const Timeline& timeline, std::size_t r) const {
    return r == 0 || (r < measured_.size() && measured_[r]) || keep_(timeline.ranks[r].rank);
  }

  const std::function<bool(int)>& keep_;
  std::vector<bool> measured_;
  std::size_t groups_;
  StepWindow window_;
  std::unique_ptr<report::RankTally> tally_;
  std::size_t critical_ = SIZE_MAX;
  Time critical_end_;
};

SimulationResult run_layers(const Scenario& given, const SimulateOptions& options) {
  // Calibration files replace GPU figures (fitted efficiencies, launch overhead, slowdown)
  // and, through CalibratedCosts, the costs they measured.
  const calibration::MeasuredTables tables = load_calibration(given);
  const std::vector<CalibratedValue> values = calibration::values_in_force(tables, given.cluster.gpu);
  Scenario calibrated;
  if (!tables.empty()) {
    calibrated = given;
    calibrated.cluster.gpu = calibration::calibrated_gpu(tables, given.cluster.gpu);
    // The report's config shows the figures the simulation used.
    if (!values.empty()) calibrated.resolved_json = calibration::config_in_force(given.resolved_json, values);
  }
  const Scenario& scenario = tables.empty() ? given : calibrated;
  const workload::ModelWork work = workload::build_work(scenario);
  const hardware::GpuModel gpu(scenario.cluster.gpu, scenario.training.precision);
  const CalibratedCosts costs(scenario, gpu, tables);
  const auto build_start = std::chrono::steady_clock::now();
  engine::Program program = tables.empty() ? parallelism::build_program(scenario, work, gpu)
                                           : parallelism::build_program(scenario, work, costs);
  // Always: the report measures how long the GPU waited for the host from when each op was
  // issued (report/host_metrics.cpp).
  program.record_host_issues = true;
  const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start).count();
  report::ReportInputs inputs;
  for (const engine::RankProgram& rank : program.ranks)
    inputs.stage_of_rank.push_back(parallelism::coord_of(scenario.parallel, rank.rank).pp);
  SimulationResult result;
  engine::RunStats stats;
  if (options.keep_intervals) {
    ReportObserver observer(options.keep_intervals, stage_ranks(inputs.stage_of_rank), program.groups.size());
    result.timeline = engine::run(program, &observer, &stats);
    inputs.ranks = observer.ranks();
  } else {
    result.timeline = engine::run(program, nullptr, &stats);
  }
  result.timeline.kernel_launch = gpu.kernel_launch();
  // Where the time of a large run goes (stepsim -v).
  spdlog::debug("program: {} simulated rank(s), {} ops in {} op list(s), {} collectives; built in {:.2f} s",
                program.ranks.size(), stats.ops, stats.op_lists, stats.collectives, build_s);
  spdlog::debug(
      "engine: {} events ({} superseded; {} compute ends under a later op's event), {} rate solves; setup "
      "{:.2f} s, events {:.2f} s ({}), intervals {:.2f} s{}",
      stats.events, stats.stale, stats.chained, stats.rate_solves, stats.setup_s, stats.loop_s, stats.event_rate(),
      stats.write_s,
      stats.prepare_s > 0
          ? fmt::format("; op states prepared alongside, done {:.2f} s after setup began", stats.prepare_s)
          : std::string());
  inputs.gpus = scenario.parallel.gpus();
  inputs.samples_per_step = static_cast<double>(scenario.training.global_batch);
  inputs.tokens_per_step = inputs.samples_per_step * static_cast<double>(scenario.model.seq_len);
  inputs.model_flops_per_step = work.model_flops_per_step;
  inputs.peak_flops_per_gpu = gpu.peak();
  inputs.config_json = scenario.resolved_json;
  inputs.version = stepsim_version();
  inputs.notes.push_back(parallelism::placement_notes(scenario));
  inputs.hardware_flops_per_step = work.model_flops_per_step + work.recompute_flops_per_step;
  inputs.comm_slowdown = gpu.comm_slowdown();
  inputs.derived_slowdown = gpu.spec().efficiency.derived_comm_slowdown;
  inputs.gpu_power_w = scenario.cluster.gpu.board_power_w;
  inputs.gpu_hour_price = scenario.cluster.gpu_hour_price;
  inputs.flop_convention = workload::flop_convention(scenario.model);
  add_provenance(scenario, inputs);
  add_nic_path_note(scenario, inputs);
  if (scenario.parallel.dp > 1 && deepspeed_pipeline_engine(scenario)) {
    inputs.notes.push_back(
        "DeepSpeed's pipeline engine (training.framework deepspeed, parallel.pp > 1) reduces every stage's gradients "
        "after the whole schedule, in buffers of 5e8 elements: overlap_grad_reduce is off whatever the scenario "
        "says, and no bucket size applies");
  } else if (scenario.parallel.dp > 1 && !scenario.data_parallel.overlap_grad_reduce) {
    const DataParallelSpec& d = scenario.data_parallel;
    const bool megatron = megatron_buckets(d.kind, scenario.training.framework);
    if (d.kind == DpKind::ddp && megatron)
      inputs.notes.push_back(
          "overlap_grad_reduce=false: every gradient is reduced in one AllReduce after the backward (as "
          "Megatron-Core's DDP without --overlap-grad-reduce), so the bucket size (data_parallel.bucket_parameters, by "
          "default max(4e7, 1e6·dp) parameters) does not apply");
    const bool deepspeed = scenario.training.framework == Framework::deepspeed;
    if (d.kind == DpKind::ddp && deepspeed)
      inputs.notes.push_back(
          "overlap_grad_reduce=false: every gradient is all-reduced after the last micro-batch's backward in buffers "
          "of 5e8 elements (DeepSpeed's engine at ZeRO stage 0: allreduce_gradients after the backward, its "
          "default), so no bucket size applies");
    if (d.kind == DpKind::ddp && !megatron && !deepspeed)
      inputs.notes.push_back(fmt::format(
          "overlap_grad_reduce=false: every gradient is reduced in one AllReduce after the backward (as DDP under "
          "no_sync() until the last micro-batch would, with one flat bucket), so bucket_cap_mb ({} MiB) and "
          "first_bucket_mb ({} MiB) do not apply",
          d.bucket_cap_mb, d.first_bucket_mb));
    // DeepSpeed all-reduces its buckets (stage_1_and_2.py); without overlap_comm ZeRO-1's
    // reduce_gradients reduces them one after another after the backward.
    const char* reduced = deepspeed ? "all-reduced" : "reduce-scattered";
    const char* size = deepspeed ? "by default reduce_bucket_size's 5e8" : "by default max(4e7, 1e6·dp)";
    if (d.kind == DpKind::zero1 && deepspeed)
      inputs.notes.push_back(fmt::format(
          "overlap_grad_reduce=false: the gradient buckets (data_parallel.bucket_parameters, {} parameters) are "
          "all-reduced one after another after the backward (as DeepSpeed's ZeRO-1 without overlap_comm: "
          "reduce_gradients)",
          size));
    else if (d.kind == DpKind::zero1)
      inputs.notes.push_back(fmt::format(
          "overlap_grad_reduce=false: every gradient is {} in one collective after the backward (as Megatron-Core "
          "without --overlap-grad-reduce), so the bucket size (data_parallel.bucket_parameters, {} parameters) does "
          "not apply",
          reduced, size));
    if (d.kind == DpKind::zero2)
      inputs.notes.push_back(fmt::format(
          "overlap_grad_reduce=false: each micro-batch's gradient buckets (data_parallel.bucket_parameters, {} "
          "parameters) are {} as its backward fills them, on the compute stream, the backward waiting for each (as "
          "DeepSpeed's ZeRO-2 without overlap_comm)",
          size, reduced));
  }
  inputs.notes.push_back(framework_note(scenario.training, gpu.kernel_launch(),
                                        costs.dispatch().value_or(traits_of(scenario.training.framework).dispatch),
                                        scenario.model.moe.experts > 1));
  if (scenario.training.activation_offload_layers > 0) inputs.notes.push_back(offload_note(scenario, work));
  if (std::string note = ep_overlap_note(scenario); !note.empty()) inputs.notes.push_back(std::move(note));
  add_memory(scenario, work, inputs);
  if (scenario.simulation.variation.jitters())
    inputs.notes.push_back(jitter_note(scenario.simulation.variation.jitter, scenario.simulation.ranks));
  result.report = report::make_report(result.timeline, inputs);
  result.report.host.framework = traits_of(scenario.training.framework).name;
  explain_straggler(scenario, result.timeline, result.report.ranks.straggler);
  if (!tables.empty()) {
    std::vector<CalibratedValue> with_host = values;
    if (std::optional<CalibratedValue> d =
            calibration::calibrated_dispatch(tables, traits_of(scenario.training.framework).dispatch))
      with_host.push_back(*d);
    costs.summarise(result.timeline, result.report, with_host);
  }
  report::PipelineFacts pipeline{scenario.parallel.pp,
                                 scenario.parallel.virtual_stages,
                                 scenario.training.micro_batches(scenario.parallel.dp),
                                 {},
                                 {}};
  if (scenario.parallel.pp > 1) pipeline.stages = stage_work(scenario, work, tables, gpu);
  for (const parallelism::ScheduleKind& k : parallelism::pipeline_schedules())
    if (k.schedule == scenario.parallel.schedule && k.split_backward) pipeline.split_schedule = k.name;
  if (std::string note = report::bubble_note(result.report, pipeline); !note.empty())
    result.report.notes.push_back(std::move(note));
  // The host's issue of each op was recorded for the report; the timeline keeps it only when
  // asked (a Kineto trace's CPU side).
  if (!options.host_issues)
    for (RankTimeline& rank : result.timeline.ranks) rank.issues = {};
  return result;
}

// Running out of memory is the scenario's size meeting this machine's (or this process's
// limit), not a bug: said as bad input, with what was too large and what helps.
// Steps beyond this are refused: the key ranges' own bound (validate_limits.cpp) stops most
// scenarios before they run.
constexpr double kMaxStepSeconds = 1e6;

InputError out_of_memory(const Scenario& s) {
  struct rlimit limit {};
  const bool capped = ::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
  const bool all = s.simulation.ranks == RankMode::all;
  return InputError(
      s.source, "",
      fmt::format("out of memory while simulating the step: {} GPUs{} need more memory than this process may "
                  "use{}; {}",
                  s.parallel.gpus(), all ? " in all-ranks mode (each rank simulated)" : "",
                  capped ? fmt::format(" (its address space is limited to {} MiB: ulimit -v)", limit.rlim_cur >> 20)
                         : std::string(),
                  all ? "representative mode (simulation.ranks = \"representative\") simulates one rank per stage"
                      : "run fewer simulations at once (sweep --jobs) or free memory"));
}

}  // namespace

const char* stepsim_version() { return STEPSIM_VERSION; }

MemoryReport estimate_memory(const Scenario& scenario) {
  try {
    return parallelism::memory_report(parallelism::estimate_memory(scenario, workload::build_work(scenario)));
  } catch (const InputError& e) {
    if (!e.file().empty()) throw;
    throw scenario_error(scenario, e.where(), e.message());
  }
}

// The largest part of a step's breakdown, named as the report names it.
std::pair<std::string, double> largest_part(const Breakdown& b) {
  std::pair<std::string, double> out{"compute", b.compute};
  const auto consider = [&](std::string name, double s) {
    if (s > out.second) out = {std::move(name), s};
  };
  for (std::size_t k = 0; k < kCommKinds; ++k)
    consider(fmt::format("exposed {} communication", to_string(static_cast<CommKind>(k))), b.exposed_comm[k]);
  consider("pipeline bubble", b.bubble);
  consider("optimizer", b.optimizer);
  consider("other", b.other);
  return out;
}

SimulationResult simulate(const Scenario& scenario, const SimulateOptions& options) {
  try {
    SimulationResult r = run_layers(scenario, options);
    // The key ranges bound the step from below (its compute at peak, its gradients over the
    // slowest link); latencies and launch costs can still carry it past what stepsim simulates.
    if (r.report.step_time_s > kMaxStepSeconds) {
      const auto [part, seconds] = largest_part(r.report.breakdown_s);
      throw InputError(scenario.source, "",
                       fmt::format("the step takes {:.4g} s, more than the {:.0f} s stepsim simulates; most of it is "
                                   "{} ({:.4g} s): the scenario's rates are too slow, its latencies too long or its "
                                   "sizes too large for one training step",
                                   r.report.step_time_s, kMaxStepSeconds, part, seconds));
    }
    return r;
  } catch (const RangeOverflow& e) {
    throw InputError(scenario.source, "",
                     fmt::format("{} while simulating the step: the scenario's rates are too slow or its sizes too "
                                 "large for one training step",
                                 e.what()));
  } catch (const InputError& e) {
    // The model layers name the key at fault; the scenario knows which file (or --set) gave it.
    if (!e.file().empty() && e.file() != scenario.source) throw;
    throw scenario_error(scenario, e.where(), e.message());
  } catch (const std::bad_alloc&) {
    throw out_of_memory(scenario);
  }
}

}  // namespace stepsim
