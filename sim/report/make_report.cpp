// make_report(): the Report of a timeline's step window, measured on the rank whose work
// ends last (the critical path), plus throughput from the job's facts.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "report/report_io.hpp"
#include "stepsim/error.hpp"

namespace stepsim {

double Breakdown::exposed_total() const {
  double sum = 0;
  for (double s : exposed_comm) sum += s;
  return sum;
}

}  // namespace stepsim

namespace stepsim::report {
namespace {

StepWindow span_of(const Timeline& timeline) {
  StepWindow w{"span", Time::max(), Time::zero()};
  for (const RankTimeline& rank : timeline.ranks)
    for (const Interval& iv : rank.intervals) {
      w.start = min(w.start, iv.start);
      w.end = max(w.end, iv.end);
    }
  if (w.end < w.start) w.start = w.end;
  return w;
}

Throughput throughput_of(const ReportInputs& in, double step_s) {
  Throughput t;
  if (step_s <= 0) return t;
  t.tokens_per_s = in.tokens_per_step / step_s;
  t.samples_per_s = in.samples_per_step / step_s;
  if (in.gpus > 0) t.tflops_per_gpu = in.model_flops_per_step / step_s / in.gpus * 1e-12;
  if (in.gpus > 0) t.hardware_tflops_per_gpu = in.hardware_flops_per_step / step_s / in.gpus * 1e-12;
  if (in.peak_flops_per_gpu.positive()) {
    t.mfu = t.tflops_per_gpu / in.peak_flops_per_gpu.tflops();
    t.hfu = t.hardware_tflops_per_gpu / in.peak_flops_per_gpu.tflops();
  }
  return t;
}

Breakdown breakdown_of(const WindowMetrics& m) {
  Breakdown b;
  b.compute = m.compute;
  b.exposed_comm = m.exposed;
  b.bubble = m.bubble;
  b.optimizer = m.optimizer;
  b.other = m.memory_only + m.idle;
  return b;
}

void add_metrics(Report& r, const WindowMetrics& m) {
  r.breakdown_s = breakdown_of(m);
  r.comm_s = m.busy;
  r.overlap.hidden_fraction = m.hidden_fraction();
  if (r.step_time_s > 0) r.overlap.exposed_fraction_of_step = r.breakdown_s.exposed_total() / r.step_time_s;
}

// While an NCCL kernel runs, compute advances at 1 / (1 + s) of its speed, so of the time
// they overlap a fraction s / (1 + s) is the extra time the slowdown cost.
double slowdown_of(const WindowMetrics& m, double comm_slowdown) {
  return comm_slowdown > 0 ? m.slowing * comm_slowdown / (1.0 + comm_slowdown) : 0.0;
}

// With the slowdown derived from what each NCCL kernel takes, the engine measured it as the
// rank's compute ran (the one step it simulates).
double slowdown_of(const WindowMetrics& m, const RankTimeline& rank, const ReportInputs& in) {
  return in.derived_slowdown ? static_cast<double>(rank.compute_slowed.ps()) / 1e12 : slowdown_of(m, in.comm_slowdown);
}

CostReport cost_of(const ReportInputs& in, double step_s) {
  CostReport c;
  c.gpu_power_w = in.gpu_power_w;
  c.gpu_hour_price = in.gpu_hour_price;
  const double gpu_seconds = step_s * in.gpus;
  c.energy_per_step_j = in.gpu_power_w * gpu_seconds;
  c.cost_per_step = in.gpu_hour_price * gpu_seconds / 3600.0;
  if (in.tokens_per_step > 0) {
    c.energy_per_mtoken_kwh = c.energy_per_step_j / in.tokens_per_step * 1e6 / 3.6e6;
    c.cost_per_mtoken = c.cost_per_step / in.tokens_per_step * 1e6;
  }
  return c;
}

// Each stage measured on the first simulated rank that stands for it.
std::vector<StageReport> stages_of(const Timeline& timeline, const ReportInputs& in, const StepWindow& window) {
  std::vector<StageReport> stages;
  for (std::size_t i = 0; i < timeline.ranks.size() && i < in.stage_of_rank.size(); ++i) {
    const int stage = in.stage_of_rank[i];
    if (stage < 0 || static_cast<std::size_t>(stage) < stages.size()) continue;
    if (static_cast<std::size_t>(stage) > stages.size()) continue;  // stages come in order
    const WindowMetrics m = measure(timeline.ranks[i], window.start, window.end);
    StageReport st;
    st.stage = stage;
    st.rank = rank_title(timeline.ranks[i]);
    st.step_time_s = m.length;
    st.breakdown_s = breakdown_of(m);
    st.compute_slowdown_s = slowdown_of(m, timeline.ranks[i], in);
    st.comm_s = m.busy;
    if (static_cast<std::size_t>(stage) < in.stage_memory.size()) st.memory_bytes = in.stage_memory[stage];
    stages.push_back(st);
  }
  return stages;
}

// The host figures of the pipeline stage whose GPU waits longest for its CPU, the measured
// rank's stage measured on it and each other stage on the first simulated rank that stands for
// it (as stages_of measures them); the measured rank where no stage waits longer. The stage
// that waits on its host holds back the others, whose compute streams then idle for want of its
// activations (bubble, not host).
void add_host(Report& r, const Timeline& timeline, const ReportInputs& in, int measured, const StepWindow& window) {
  const auto at = [&](int i) {
    return measure_host(timeline.ranks[static_cast<std::size_t>(i)], window.start, window.end);
  };
  const HostMetrics own = at(measured);
  HostMetrics worst = own;
  int worst_rank = measured;
  std::vector<bool> seen;
  const auto mark = [&seen](int stage) {
    if (static_cast<std::size_t>(stage) >= seen.size()) seen.resize(static_cast<std::size_t>(stage) + 1, false);
    const bool before = seen[static_cast<std::size_t>(stage)];
    seen[static_cast<std::size_t>(stage)] = true;
    return before;
  };
  const auto own_stage = static_cast<std::size_t>(measured);
  if (own_stage < in.stage_of_rank.size() && in.stage_of_rank[own_stage] >= 0) mark(in.stage_of_rank[own_stage]);
  for (int i = 0; i < static_cast<int>(std::min(timeline.ranks.size(), in.stage_of_rank.size())); ++i) {
    const int stage = in.stage_of_rank[static_cast<std::size_t>(i)];
    if (stage < 0 || mark(stage)) continue;
    const HostMetrics m = at(i);
    if (m.gpu_wait <= worst.gpu_wait) continue;
    worst = m;
    worst_rank = i;
  }
  r.host.rank = rank_title(timeline.ranks[static_cast<std::size_t>(worst_rank)]);
  r.host.cpu_issue_s = worst.issue;
  r.host.gpu_wait_s = worst.gpu_wait;
  r.host.breakdown_gpu_wait_s = own.gpu_wait;
  r.offload_wait_s = own.copy_wait;
  if (r.step_time_s > 0) r.host.gpu_wait_fraction_of_step = worst.gpu_wait / r.step_time_s;
}

}  // namespace

Time last_activity(const RankTimeline& rank, const StepWindow& window) {
  Time last = window.start;
  for (const Interval& iv : rank.intervals) {
    if (iv.activity == Activity::bubble || iv.start >= window.end || iv.end <= window.start) continue;
    last = max(last, min(iv.end, window.end));
  }
  return last;
}

std::string rank_title(const RankTimeline& rank) {
  return rank.label.empty() ? fmt::format("rank {}", rank.rank) : rank.label;
}

StepWindow report_window(const Timeline& timeline) {
  if (!timeline.steps.empty()) return timeline.steps.front();
  return span_of(timeline);
}

int critical_rank(const Timeline& timeline, const StepWindow& window) {
  int best = -1;
  Time best_end = Time::zero();
  for (std::size_t i = 0; i < timeline.ranks.size(); ++i) {
    const Time end = last_activity(timeline.ranks[i], window);
    if (best < 0 || end > best_end) {
      best = static_cast<int>(i);
      best_end = end;
    }
  }
  return best;
}

Report make_report(const Timeline& timeline, const ReportInputs& inputs) {
  Report r;
  r.stepsim_version = inputs.version;
  r.gpus = inputs.gpus;
  r.config_json = inputs.config_json.empty() ? "{}" : inputs.config_json;
  r.notes = inputs.notes;
  r.memory_bytes = inputs.memory;
  const StepWindow window = report_window(timeline);
  r.step_time_s = static_cast<double>((window.end - window.start).ps()) / 1e12;  // nearest double
  r.throughput = throughput_of(inputs, r.step_time_s);
  const int chosen = inputs.representative >= 0 ? inputs.representative : critical_rank(timeline, window);
  STEPSIM_CHECK(chosen < static_cast<int>(timeline.ranks.size()), "representative rank out of range");
  if (chosen >= 0) {
    const RankTimeline& rank = timeline.ranks[static_cast<std::size_t>(chosen)];
    const WindowMetrics m = measure(rank, window.start, window.end);
    add_metrics(r, m);
    r.compute_slowdown_s = slowdown_of(m, rank, inputs);
    add_host(r, timeline, inputs, chosen, window);
    if (timeline.ranks.size() > 1) r.notes.push_back(fmt::format("breakdown measured on {}", rank_title(rank)));
  }
  if (!r.memory_bytes.modelled) r.notes.push_back("memory not modelled: memory_bytes are zero");
  r.stages = stages_of(timeline, inputs, window);
  r.ranks = inputs.ranks ? *inputs.ranks : ranks_report(timeline, window);
  r.cost = cost_of(inputs, r.step_time_s);
  r.flop_convention = inputs.flop_convention;
  r.provenance = inputs.provenance;
  return r;
}

}  // namespace stepsim::report
