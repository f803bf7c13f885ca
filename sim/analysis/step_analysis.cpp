// Step-by-step measurement of a (real or simulated) timeline; see step_analysis.hpp.
#include "analysis/step_analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "collectives/collective.hpp"
#include "stepsim/error.hpp"

namespace stepsim::analysis {
namespace {

constexpr std::size_t kNoKey = static_cast<std::size_t>(-1);

struct Edge {
  std::int64_t at;
  std::size_t key;  // kNoKey: compute
  int delta;
};

// The exposed-communication sweep of report::measure(), keyed by `key_of` instead of by
// CommKind. Memory activity neither hides nor exposes anything. A collective's wait at its
// rendezvous is its communication there too, a pipeline transfer's the bubble, so that the
// keys share out the same exposed time as the kinds.
std::vector<double> exposed_by(const RankTimeline& rank, Time begin, Time end, std::size_t keys,
                               const std::function<std::size_t(const Interval&)>& key_of) {
  std::vector<Edge> edges;
  for (const Interval& iv : rank.intervals) {
    const bool spins = iv.activity == Activity::comm && iv.kind != CommKind::pp;
    const Time s = max(spins ? iv.start - iv.waited : iv.start, begin);
    const Time e = min(iv.end, end);
    if (e <= s || iv.activity == Activity::memory || iv.activity == Activity::bubble) continue;
    const std::size_t key = iv.activity == Activity::comm ? key_of(iv) : kNoKey;
    edges.push_back({s.ps(), key, 1});
    edges.push_back({e.ps(), key, -1});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
  std::vector<int> running(keys, 0);
  int computing = 0;
  std::vector<double> exposed(keys, 0.0);
  std::int64_t now = begin.ps();
  for (std::size_t i = 0; i < edges.size();) {
    const auto active = static_cast<double>(std::count_if(running.begin(), running.end(), [](int r) { return r > 0; }));
    if (computing == 0 && active > 0)
      for (std::size_t k = 0; k < keys; ++k)
        if (running[k] > 0) exposed[k] += static_cast<double>(edges[i].at - now) * 1e-12 / active;
    now = edges[i].at;
    for (; i < edges.size() && edges[i].at == now; ++i) {
      if (edges[i].key == kNoKey)
        computing += edges[i].delta;
      else
        running[edges[i].key] += edges[i].delta;
    }
  }
  return exposed;
}

bool names_step(const std::string& window, const std::string& wanted) {
  return window == wanted || window == "ProfilerStep#" + wanted;
}

void add(report::WindowMetrics& sum, const report::WindowMetrics& m) {
  sum.length += m.length;
  sum.compute += m.compute;
  sum.optimizer += m.optimizer;
  sum.comm_union += m.comm_union;
  sum.overlap += m.overlap;
  sum.bubble += m.bubble;
  sum.memory_only += m.memory_only;
  sum.idle += m.idle;
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    sum.exposed[k] += m.exposed[k];
    sum.busy[k] += m.busy[k];
  }
}

void add(StepMetrics& sum, const StepMetrics& s) {
  add(sum.metrics, s.metrics);
  for (std::size_t k = 0; k < sum.exposed_by_op.size(); ++k) sum.exposed_by_op[k] += s.exposed_by_op[k];
  sum.exposed_by_group.resize(s.exposed_by_group.size(), 0.0);
  for (std::size_t g = 0; g < s.exposed_by_group.size(); ++g) sum.exposed_by_group[g] += s.exposed_by_group[g];
}

StepMetrics measure_window(const Timeline& timeline, const RankTimeline& rank, const StepWindow& w) {
  StepMetrics s;
  s.name = w.name;
  s.start = w.start;
  s.end = w.end;
  s.metrics = report::measure(rank, w.start, w.end);
  s.exposed_by_op = exposed_by_op(rank, w.start, w.end);
  s.exposed_by_group = exposed_by_group(rank, timeline.groups.size(), w.start, w.end);
  return s;
}

void add_collectives(const Timeline& timeline, const RankTimeline& rank, const StepWindow& w, int world,
                     std::vector<CollectiveRecord>& out) {
  for (const Interval& iv : rank.intervals) {
    if (iv.activity != Activity::comm || iv.start < w.start || iv.start >= w.end) continue;
    CollectiveRecord r = collective_record(timeline, iv, world);
    r.step = w.name;
    out.push_back(r);
  }
}

}  // namespace

PerOp exposed_by_op(const RankTimeline& rank, Time begin, Time end) {
  const std::vector<double> v =
      exposed_by(rank, begin, end, PerOp{}.size(), [](const Interval& iv) { return static_cast<std::size_t>(iv.op); });
  PerOp out{};
  std::copy(v.begin(), v.end(), out.begin());
  return out;
}

std::vector<double> exposed_by_group(const RankTimeline& rank, std::size_t groups, Time begin, Time end) {
  return exposed_by(rank, begin, end, groups + 1, [groups](const Interval& iv) {
    return iv.group >= 0 && static_cast<std::size_t>(iv.group) < groups ? static_cast<std::size_t>(iv.group) : groups;
  });
}

CollectiveRecord collective_record(const Timeline& timeline, const Interval& iv, int world_size) {
  CollectiveRecord r;
  r.name = iv.name;
  r.op = iv.op;
  r.group = iv.group;
  r.ranks = iv.group >= 0 ? timeline.groups[static_cast<std::size_t>(iv.group)].size : 0;
  if (r.ranks <= 0) r.ranks = std::max(0, world_size);
  r.bytes = iv.bytes;
  r.start = iv.start;
  r.arrival = iv.start - iv.waited;
  r.duration = iv.end - iv.start;
  if (r.duration > Time::zero() && r.bytes.count() > 0) {
    r.algbw = Bandwidth::bytes_per_s(r.bytes.as_double() / r.duration.seconds());
    if (r.ranks > 0) r.busbw = r.algbw->scaled(collectives::bus_factor(r.op, r.ranks));
  }
  return r;
}

TraceMetrics measure_steps(const Timeline& timeline, std::size_t rank_index, const std::optional<std::string>& step,
                           int world_size, const std::string& source) {
  STEPSIM_CHECK(rank_index < timeline.ranks.size(), "rank index out of range");
  const RankTimeline& rank = timeline.ranks[rank_index];
  TraceMetrics out;
  out.rank_index = rank_index;
  out.total.name = "total";
  Time first = Time::max(), last = Time::zero();
  for (const Interval& iv : rank.intervals) {
    first = min(first, iv.start);
    last = max(last, iv.end);
  }
  if (first < last) out.whole_trace_hidden_fraction = report::measure(rank, first, last).hidden_fraction();
  for (const StepWindow& w : timeline.steps) {
    if (step && !names_step(w.name, *step)) continue;
    out.steps.push_back(measure_window(timeline, rank, w));
    add(out.total, out.steps.back());
    add_collectives(timeline, rank, w, world_size, out.collectives);
  }
  if (step && out.steps.empty()) {
    std::string known;
    for (const StepWindow& w : timeline.steps) known += (known.empty() ? "" : ", ") + w.name;
    throw InputError("--step", *step,
                     fmt::format("no such step in {} (it has: {})", source.empty() ? "the trace" : source, known));
  }
  return out;
}

Report mean_report(const TraceMetrics& m, int gpus) {
  Report r;
  r.gpus = gpus;
  r.config_json = "{}";
  if (m.steps.empty()) return r;
  const double n = static_cast<double>(m.steps.size());
  const report::WindowMetrics& t = m.total.metrics;
  r.step_time_s = t.length / n;
  r.breakdown_s.compute = t.compute / n;
  r.breakdown_s.optimizer = t.optimizer / n;
  r.breakdown_s.bubble = t.bubble / n;
  r.breakdown_s.other = (t.memory_only + t.idle) / n;
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    r.breakdown_s.exposed_comm[k] = t.exposed[k] / n;
    r.comm_s[k] = t.busy[k] / n;
  }
  r.overlap.hidden_fraction = t.hidden_fraction();
  if (r.step_time_s > 0) r.overlap.exposed_fraction_of_step = r.breakdown_s.exposed_total() / r.step_time_s;
  return r;
}

}  // namespace stepsim::analysis
