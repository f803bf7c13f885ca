// Waiting at a rendezvous counted as communication on both sides; see like_for_like.hpp.
#include "analysis/like_for_like.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analysis/step_analysis.hpp"
#include "report/report_io.hpp"

namespace stepsim::analysis {
namespace {

// As report::measure() counts it: a collective's wait is its communication, while a pipeline
// transfer's wait for the neighbouring stage is the bubble (docs/report.md).
bool wait_is_comm(const Interval& iv) { return iv.activity == Activity::comm && iv.kind != CommKind::pp; }

// The waits of the communication that starts within [begin, end).
Time waits_in(const RankTimeline& rank, Time begin, Time end) {
  Time sum;
  for (const Interval& iv : rank.intervals)
    if (wait_is_comm(iv) && iv.start >= begin && iv.start < end) sum += iv.waited;
  return sum;
}

// The index in `t` of global rank `rank` when the simulation kept its intervals; else the
// critical-path rank, the one the report measures. -1 when the timeline has no ranks.
int prediction_rank(const Timeline& t, const StepWindow& window, int rank) {
  const auto it = std::find_if(t.ranks.begin(), t.ranks.end(),
                               [rank](const RankTimeline& r) { return r.rank == rank && !r.intervals.empty(); });
  if (rank >= 0 && it != t.ranks.end()) return static_cast<int>(it - t.ranks.begin());
  return report::critical_rank(t, window);
}

// HolisticTraceAnalysis' host wait on the compute stream of `rank`, the stream with the most
// kernels (the first such stream on ties), as measured_host_wait() reads it from the rank's
// Kineto trace: each kernel of the stream, taken in start order, whose launch began after the
// kernel before it ended (kernel_launches(), where write_kineto_trace() puts the launch) waited
// its gap for the host. A collective's kernel starts when its rank reached it, as in the trace.
// None when the timeline did not record the host's issues (SimulateOptions::host_issues).
std::optional<double> hta_host_wait(const Timeline& t, const RankTimeline& rank, const StepWindow& window) {
  if (rank.issues.size() != rank.intervals.size()) return std::nullopt;
  struct Kernel {
    std::uint16_t stream;
    Time start, end;
    std::optional<Time> launch;
  };
  const std::vector<report::KernelLaunch> launches = report::kernel_launches(t, rank, window);
  std::vector<Kernel> kernels;
  std::vector<std::size_t> per_stream(rank.streams.size() + 1, 0);
  for (std::size_t i = 0; i < rank.intervals.size(); ++i) {
    const Interval& iv = rank.intervals[i];
    if (iv.activity == Activity::bubble) continue;
    const bool spins = iv.activity == Activity::comm && iv.kind != CommKind::pp;
    kernels.push_back({iv.stream, spins ? iv.start - iv.waited : iv.start, iv.end, launches[i].at});
    if (iv.stream >= per_stream.size()) per_stream.resize(iv.stream + 1U, 0);
    ++per_stream[iv.stream];
  }
  if (kernels.empty()) return 0;
  const auto compute =
      static_cast<std::uint16_t>(std::max_element(per_stream.begin(), per_stream.end()) - per_stream.begin());
  std::erase_if(kernels, [compute](const Kernel& k) { return k.stream != compute; });
  std::stable_sort(kernels.begin(), kernels.end(), [](const Kernel& a, const Kernel& b) { return a.start < b.start; });
  Time wait;
  for (std::size_t k = 1; k < kernels.size(); ++k)
    if (kernels[k].launch && *kernels[k].launch > kernels[k - 1].end) wait += kernels[k].start - kernels[k - 1].end;
  return wait.seconds();
}

// The report's fields as report::make_report measures them, on the same window and on the
// rank prediction_rank() picks for global rank `rank`.
Report remeasured(const Report& base, const Timeline& t, int rank, double& wait_s, double& host_wait_s,
                  int& chosen_rank, std::string& chosen_label) {
  Report r = base;
  const StepWindow window = report::report_window(t);
  const int chosen = prediction_rank(t, window, rank);
  if (chosen < 0) return r;
  const RankTimeline& measured = t.ranks[static_cast<std::size_t>(chosen)];
  chosen_rank = measured.rank;
  chosen_label = measured.label;
  wait_s = waits_in(measured, window.start, window.end).seconds();
  // The host figures of this rank too, not of the rank that waits longest for its host.
  const report::HostMetrics host = report::measure_host(measured, window.start, window.end);
  host_wait_s = hta_host_wait(t, measured, window).value_or(host.gpu_wait);
  r.host.rank = report::rank_title(measured);
  r.host.cpu_issue_s = host.issue;
  r.host.gpu_wait_s = host.gpu_wait;
  r.host.breakdown_gpu_wait_s = host.gpu_wait;
  r.host.gpu_wait_fraction_of_step = r.step_time_s > 0 ? r.host.gpu_wait_s / r.step_time_s : 0.0;
  const Timeline counted = waits_as_comm(t);
  const report::WindowMetrics m =
      report::measure(counted.ranks[static_cast<std::size_t>(chosen)], window.start, window.end);
  r.breakdown_s.compute = m.compute;
  r.breakdown_s.optimizer = m.optimizer;
  r.breakdown_s.bubble = m.bubble;
  r.breakdown_s.other = m.memory_only + m.idle;
  r.breakdown_s.exposed_comm = m.exposed;
  r.comm_s = m.busy;
  r.overlap.hidden_fraction = m.hidden_fraction();
  if (r.step_time_s > 0) r.overlap.exposed_fraction_of_step = r.breakdown_s.exposed_total() / r.step_time_s;
  return r;
}

using SizesByKind = std::array<std::set<int>, kCommKinds>;

// The sizes of the groups of more than one rank, of a known kind, that `rank` runs
// communication on (every group of `t` when `rank` is null).
SizesByKind group_sizes(const Timeline& t, const RankTimeline* rank) {
  std::vector<bool> used(t.groups.size(), rank == nullptr);
  if (rank != nullptr)
    for (const Interval& iv : rank->intervals)
      if (iv.activity == Activity::comm && iv.group >= 0 && static_cast<std::size_t>(iv.group) < used.size())
        used[static_cast<std::size_t>(iv.group)] = true;
  SizesByKind out;
  for (std::size_t g = 0; g < t.groups.size(); ++g)
    if (used[g] && t.groups[g].kind != CommKind::other && t.groups[g].size > 1)
      out[static_cast<std::size_t>(t.groups[g].kind)].insert(t.groups[g].size);
  return out;
}

std::string sizes_text(const std::set<int>& sizes) {
  std::string out;
  for (int s : sizes) out += fmt::format("{}{}", out.empty() ? "" : " or ", s);
  return out;
}

}  // namespace

std::vector<std::string> group_size_differences(const Analysis& measured, const SimulationResult& predicted,
                                                int pipeline_stages) {
  const SizesByKind stated =
      group_sizes(measured.trace.timeline, &measured.trace.timeline.ranks[measured.metrics.rank_index]);
  SizesByKind simulated = group_sizes(predicted.timeline, nullptr);
  if (pipeline_stages > 1) simulated[static_cast<std::size_t>(CommKind::pp)].insert(pipeline_stages);
  std::vector<std::string> out;
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    const std::set<int>& trace = stated[k];
    const std::set<int>& scenario = simulated[k];
    if (std::all_of(trace.begin(), trace.end(), [&scenario](int s) { return scenario.contains(s); })) continue;
    const char* kind = to_string(static_cast<CommKind>(k));
    out.push_back(fmt::format("{} process groups: the trace's have {} ranks, {}; they are different layouts", kind,
                              sizes_text(trace),
                              scenario.empty() ? fmt::format("the scenario has no {} communicator", kind)
                                               : fmt::format("the scenario's {}", sizes_text(scenario))));
  }
  return out;
}

std::vector<std::string> job_differences(const Analysis& measured, const Scenario& scenario,
                                         const SimulationResult& predicted) {
  std::vector<std::string> out;
  // A trace stepsim wrote holds the ranks it simulated (one per pipeline stage in
  // representative mode); its distributedInfo gives the job's world size, and one written
  // before it did gives none (0): there the compute check below decides.
  const ParallelSpec& p = scenario.parallel;
  const int world = measured.trace.dist[measured.metrics.rank_index].world_size;
  if (world > 0 && world != p.gpus())
    out.push_back(
        fmt::format("world size: the trace is of {} ranks, the scenario of {} GPUs (tp {} x pp {} x dp {} "
                    "x cp {}); they are different jobs",
                    world, p.gpus(), p.tp, p.pp, p.dp, p.cp));
  for (std::string& d : group_size_differences(measured, predicted, p.pp)) out.push_back(std::move(d));
  const double m = measured.mean.breakdown_s.compute + measured.mean.breakdown_s.optimizer;
  const double s = predicted.report.breakdown_s.compute + predicted.report.breakdown_s.optimizer;
  if (m > 0 && s > 0 && (s / m > 2.0 || m / s > 2.0))
    out.push_back(
        fmt::format("model: the scenario computes {:.1f}x the trace's compute per step ({:.3f} s against "
                    "{:.3f} s), more than hardware differences explain: check the model ({}), batch and "
                    "sequence length",
                    s / m, s, m, scenario.model.name));
  return out;
}

Timeline waits_as_comm(Timeline t) {
  for (RankTimeline& rank : t.ranks)
    for (Interval& iv : rank.intervals)
      if (wait_is_comm(iv) && iv.waited > Time::zero()) {
        iv.start = iv.start - iv.waited;
        iv.waited = Time::zero();
      }
  return t;
}

std::optional<double> measured_host_wait(const HtaMetrics& h) {
  if (!h.available || h.idle_breakdown.launched() == 0 || h.idle_breakdown.streams.empty()) return std::nullopt;
  const HtaIdleBreakdown& b = h.idle_breakdown_exact ? *h.idle_breakdown_exact : h.idle_breakdown;
  const auto compute =
      std::max_element(b.streams.begin(), b.streams.end(),
                       [](const HtaStreamIdle& x, const HtaStreamIdle& y) { return x.kernels < y.kernels; });
  return compute->host_wait.seconds() / static_cast<double>(std::max<std::size_t>(1, h.steps));
}

std::optional<double> measured_host_wait(const HtaMetrics& h, const std::string& step) {
  if (!measured_host_wait(h)) return std::nullopt;
  Time wait;
  for (const StepHostWait& s : h.step_host_wait)
    if (s.step == step) wait += s.host_wait;
  return wait.seconds();
}

LikeForLike like_for_like(const Analysis& measured, const SimulationResult& predicted) {
  LikeForLike out;
  out.measured_rank = measured.trace.dist[measured.metrics.rank_index].rank;
  out.predicted = remeasured(predicted.report, predicted.timeline, out.measured_rank, out.predicted_wait_s,
                             out.predicted_host_wait_s, out.predicted_rank, out.predicted_label);
  // One step of several (--step): that step's wait, not the mean of HTA's window.
  const HtaMetrics& hta = measured.trace.hta[measured.metrics.rank_index];
  const bool one_step = measured.metrics.steps.size() == 1 && measured.trace.timeline.steps.size() > 1;
  out.measured_host_wait_s =
      one_step ? measured_host_wait(hta, measured.metrics.steps.front().name) : measured_host_wait(hta);
  out.measured = measured.mean;
  if (!measured.trace.simulated) return out;  // a real kernel already holds its wait
  const RankTimeline& rank = measured.trace.timeline.ranks[measured.metrics.rank_index];
  Time wait;
  for (const StepMetrics& s : measured.metrics.steps) wait += waits_in(rank, s.start, s.end);
  const double n = static_cast<double>(std::max<std::size_t>(1, measured.metrics.steps.size()));
  out.measured_wait_s = wait.seconds() / n;
  const Timeline counted = waits_as_comm(measured.trace.timeline);
  std::optional<std::string> step;
  if (measured.metrics.steps.size() == 1 && measured.trace.timeline.steps.size() > 1)
    step = measured.metrics.steps.front().name;
  const TraceMetrics m = measure_steps(counted, measured.metrics.rank_index, step,
                                       measured.trace.dist[measured.metrics.rank_index].world_size);
  const std::string version = out.measured.stepsim_version;
  out.measured = mean_report(m, measured.mean.gpus);
  out.measured.stepsim_version = version;
  return out;
}

}  // namespace stepsim::analysis
