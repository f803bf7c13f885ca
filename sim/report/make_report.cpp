// make_report(): the Report of a timeline's step window, measured on the rank whose work
// ends last (the critical path), plus throughput from the job's facts.
#include <fmt/format.h>

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

// When the rank's last non-bubble activity ends inside the window.
Time last_activity(const RankTimeline& rank, const StepWindow& window) {
  Time last = window.start;
  for (const Interval& iv : rank.intervals) {
    if (iv.activity == Activity::bubble || iv.start >= window.end || iv.end <= window.start) continue;
    last = max(last, min(iv.end, window.end));
  }
  return last;
}

Throughput throughput_of(const ReportInputs& in, double step_s) {
  Throughput t;
  if (step_s <= 0) return t;
  t.tokens_per_s = in.tokens_per_step / step_s;
  t.samples_per_s = in.samples_per_step / step_s;
  if (in.gpus > 0) t.tflops_per_gpu = in.model_flops_per_step / step_s / in.gpus * 1e-12;
  if (in.peak_flops_per_gpu.positive()) t.mfu = t.tflops_per_gpu / in.peak_flops_per_gpu.tflops();
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

}  // namespace

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
    add_metrics(r, measure(rank, window.start, window.end));
    if (timeline.ranks.size() > 1) r.notes.push_back(fmt::format("breakdown measured on {}", rank_title(rank)));
  }
  if (!r.memory_bytes.modelled) r.notes.push_back("memory not modelled: memory_bytes are zero");
  return r;
}

}  // namespace stepsim::report
