// Tables and JSON of `analyze` and `compare`. Times print in milliseconds, sizes in MiB,
// bandwidths in GB/s as nccl-tests does.
#include "analysis/analysis_output.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <tuple>
#include <utility>

#include "analysis/idle_output.hpp"
#include "analysis/like_for_like.hpp"
#include "collectives/collective.hpp"
#include "report/json_text.hpp"
#include "stepsim/error.hpp"

namespace stepsim::analysis {
namespace {

namespace json = boost::json;

// What the collectives table prints for a value the trace does not give (the JSON: null).
constexpr const char* kUnknown = "-";

// The label of communication on no process group the trace names, in the tables and the JSON.
constexpr const char* kNoGroup = "unnamed";

// One label per process group, then `none` for communication without one, distinct among
// the groups `rank` communicates in: a group's name, or where two of them share it (stepsim's
// "pp fwd" to the next stage and from the one before, a real job's groups named alike) the
// name and its ranks, so that neither the tables nor the JSON's keys merge two groups into
// one. Other ranks' groups of the same name (every stage's "tp") are not printed and add
// nothing.
std::vector<std::string> group_labels(const Timeline& t, const RankTimeline& rank, const std::string& none) {
  std::vector<bool> used(t.groups.size(), false);
  for (const Interval& iv : rank.intervals)
    if (iv.activity == Activity::comm && iv.group >= 0 && static_cast<std::size_t>(iv.group) < used.size())
      used[static_cast<std::size_t>(iv.group)] = true;
  std::map<std::string, int> named{{none, 1}};
  for (std::size_t i = 0; i < t.groups.size(); ++i)
    if (used[i]) ++named[t.groups[i].name];
  std::vector<std::string> labels;
  std::set<std::string> taken{none};
  for (std::size_t i = 0; i < t.groups.size(); ++i) {
    const ProcessGroup& g = t.groups[i];
    std::string label = used[i] && named[g.name] > 1 && !g.ranks.empty() ? g.name + " " + g.ranks : g.name;
    // Two groups alike in name and ranks too (a timeline not read from a trace, whose reader
    // merges those) are told apart by their place.
    if (used[i] && taken.contains(label)) label += fmt::format(" (group {})", i);
    if (used[i]) taken.insert(label);
    labels.push_back(std::move(label));
  }
  labels.push_back(none);
  return labels;
}

const std::string& group_label(const std::vector<std::string>& labels, std::int32_t g) {
  return g >= 0 && static_cast<std::size_t>(g) + 1 < labels.size() ? labels[static_cast<std::size_t>(g)]
                                                                   : labels.back();
}

const RankTimeline& measured_rank(const Analysis& a) { return a.trace.timeline.ranks[a.metrics.rank_index]; }

std::string source_line(const Analysis& a) {
  const DistributedInfo& d = a.trace.dist[a.metrics.rank_index];
  std::string who = d.rank < 0         ? "rank unknown"
                    : d.world_size > 0 ? fmt::format("rank {} of {}", d.rank, d.world_size)
                                       : fmt::format("rank {}", d.rank);
  if (!d.backend.empty()) who += ", " + d.backend;
  if (!d.nccl_version.empty()) who += " " + d.nccl_version;
  return fmt::format("trace {} ({}), {} step{}", a.trace.files[a.metrics.rank_index], who, a.metrics.steps.size(),
                     a.metrics.steps.size() == 1 ? "" : "s");
}

void write_step_row(std::ostream& out, const std::string& name, const report::WindowMetrics& m, double n) {
  fmt::print(out, "{:<20} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>8.1f}%\n", name,
             m.length / n * 1e3, (m.compute + m.optimizer) / n * 1e3, m.comm_union / n * 1e3,
             m.exposed_total() / n * 1e3, m.memory_only / n * 1e3, (m.idle + m.bubble) / n * 1e3,
             m.hidden_fraction() * 100);
}

void write_steps(const Analysis& a, std::ostream& out) {
  fmt::print(out, "{:<20} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}\n", "step", "time ms", "compute", "comm busy",
             "exposed", "mem only", "idle", "hidden");
  for (const StepMetrics& s : a.metrics.steps) write_step_row(out, s.name, s.metrics, 1.0);
  if (a.metrics.steps.size() > 1)
    write_step_row(out, "mean", a.metrics.total.metrics, static_cast<double>(a.metrics.steps.size()));
}

void write_exposure(const Analysis& a, std::ostream& out) {
  const double n = static_cast<double>(std::max<std::size_t>(1, a.metrics.steps.size()));
  const StepMetrics& t = a.metrics.total;
  std::string ops, groups, kinds;
  for (std::size_t k = 0; k < t.exposed_by_op.size(); ++k)
    if (t.exposed_by_op[k] > 0)
      ops += fmt::format("  {} {:.3f}", nccl_name(static_cast<CollOp>(k)), t.exposed_by_op[k] / n * 1e3);
  const std::vector<std::string> labels = group_labels(a.trace.timeline, measured_rank(a), kNoGroup);
  for (std::size_t g = 0; g < t.exposed_by_group.size(); ++g)
    if (t.exposed_by_group[g] > 0)
      groups += fmt::format("  {} {:.3f}", group_label(labels, static_cast<std::int32_t>(g)),
                            t.exposed_by_group[g] / n * 1e3);
  for (std::size_t k = 0; k < kCommKinds; ++k)
    if (t.metrics.exposed[k] > 0)
      kinds += fmt::format("  {} {:.3f}", to_string(static_cast<CommKind>(k)), t.metrics.exposed[k] / n * 1e3);
  fmt::print(out, "\nexposed communication, ms per step\n");
  fmt::print(out, "  by collective:    {}\n", ops.empty() ? "  none" : ops);
  fmt::print(out, "  by process group: {}\n", groups.empty() ? "  none" : groups);
  fmt::print(out, "  by kind:          {}\n", kinds.empty() ? "  none" : kinds);
  fmt::print(out, "hidden fraction over the whole trace (every step, every activity): {:.1f}%\n",
             a.metrics.whole_trace_hidden_fraction * 100);
}

std::string hta_rules(const HtaMetrics& h) {
  std::string rules = h.last_step_excluded ? "last ProfilerStep excluded" : "every step (fewer than two ProfilerSteps)";
  if (h.rounded) rules += ", timestamps rounded inward to whole us";
  return rules;
}

// The kernel-type shares as HTA prints them: of the summed times, to one decimal.
std::vector<std::pair<std::string, double>> kernel_type_shares(const HtaMetrics& h) {
  Time sum;
  for (const HtaKernelTypeTime& k : h.kernel_types) sum += k.time;
  std::vector<std::pair<std::string, double>> out;
  for (const HtaKernelTypeTime& k : h.kernel_types) out.emplace_back(k.label, hta_round(percent_of(k.time, sum), 1));
  return out;
}

void write_hta(const Analysis& a, std::ostream& out) {
  const HtaMetrics& h = a.trace.hta[a.metrics.rank_index];
  if (!h.available) {
    fmt::print(out,
               "\nHolisticTraceAnalysis' figures: n/a (a trace in stepsim's own format, which HTA does not read; "
               "'stepsim simulate --trace-format kineto' writes one it reads)\n");
    return;
  }
  fmt::print(out, "\nHolisticTraceAnalysis' figures ({}; {} GPU activities)\n", hta_rules(h), h.activities);
  if (h.overlap_pct)
    fmt::print(out, "  comm-comp overlap:  {:.2f}%  ({:.3f} ms of {:.3f} ms communication with computation)\n",
               *h.overlap_pct, h.overlap.seconds() * 1e3, h.comm.seconds() * 1e3);
  else
    fmt::print(out, "  comm-comp overlap:  n/a (no communication kernel)\n");
  fmt::print(out,
             "  temporal breakdown: idle {:.2f}%  compute {:.2f}%  non-compute {:.2f}%  of {:.3f} ms kernel span\n",
             hta_round(percent_of(h.idle, h.kernel_time), 2), hta_round(percent_of(h.compute, h.kernel_time), 2),
             hta_round(percent_of(h.non_compute, h.kernel_time), 2), h.kernel_time.seconds() * 1e3);
  fmt::print(out, "  kernel types:      ");
  for (const auto& [label, pct] : kernel_type_shares(h)) fmt::print(out, "  {} {:.1f}%", label, pct);
  fmt::print(out, "\n");
  write_idle_breakdown(h, out);
}

// Collectives grouped by (op, group, size) in order of first appearance: DDP's buckets. The
// bandwidths are of the kernels that took time (`timed`, `timed_s`): a kernel of 0 us moved
// its bytes in no measurable time, and would make the mean time, and so algbw, meaningless.
struct CollectiveRow {
  std::size_t first = 0;
  int count = 0, ranks = 0, timed = 0;
  double seconds = 0, min_s = 0, max_s = 0, timed_s = 0;
};

std::string readable_size(std::int64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < 1048576) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (bytes < 1073741824) return fmt::format("{:.2f} MiB", b / 1048576.0);
  return fmt::format("{:.2f} GiB", b / 1073741824.0);
}

void write_collectives(const Analysis& a, std::ostream& out) {
  if (a.metrics.collectives.empty()) return;
  std::map<std::tuple<CollOp, std::int32_t, std::int64_t>, CollectiveRow> rows;
  for (std::size_t i = 0; i < a.metrics.collectives.size(); ++i) {
    const CollectiveRecord& c = a.metrics.collectives[i];
    const double s = c.duration.seconds();
    auto [it, fresh] = rows.try_emplace({c.op, c.group, c.bytes.count()}, CollectiveRow{i, 0, c.ranks, 0, 0, s, s, 0});
    CollectiveRow& r = it->second;
    ++r.count;
    r.seconds += s;
    r.min_s = std::min(r.min_s, s);
    r.max_s = std::max(r.max_s, s);
    if (c.duration > Time::zero()) {
      ++r.timed;
      r.timed_s += s;
    }
  }
  std::vector<std::pair<std::tuple<CollOp, std::int32_t, std::int64_t>, CollectiveRow>> ordered(rows.begin(),
                                                                                                rows.end());
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& x, const auto& y) { return x.second.first < y.second.first; });
  const double steps = static_cast<double>(std::max<std::size_t>(1, a.metrics.steps.size()));
  const std::vector<std::string> labels = group_labels(a.trace.timeline, measured_rank(a), kNoGroup);
  fmt::print(out, "\ncollectives (grouped by op, process group and size; algbw and busbw in GB/s as nccl-tests)\n");
  fmt::print(out, "{:<14} {:<18} {:>5} {:>9} {:>12} {:>14} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "op", "group",
             "ranks", "per step", "size", "bytes", "mean us", "min us", "max us", "algbw", "busbw");
  int untimed = 0;
  for (const auto& [key, r] : ordered) {
    const auto [op, group, bytes] = key;
    const double mean = r.seconds / r.count;
    untimed += r.count - r.timed;
    const std::string size = bytes > 0 ? readable_size(bytes) : kUnknown;
    // nccl-tests' algbw = S / t over the kernels that took time; busbw needs the group's size.
    const bool timed = bytes > 0 && r.timed > 0;
    const double algbw = timed ? static_cast<double>(bytes) / (r.timed_s / r.timed) * 1e-9 : 0;
    const std::string alg = timed ? fmt::format("{:.2f}", algbw) : kUnknown;
    const std::string bus =
        timed && r.ranks > 0 ? fmt::format("{:.2f}", algbw * collectives::bus_factor(op, r.ranks)) : kUnknown;
    const std::string exact = bytes > 0 ? fmt::format("{}", bytes) : kUnknown;
    const std::string ranks = r.ranks > 0 ? fmt::format("{}", r.ranks) : kUnknown;
    fmt::print(out, "{:<14} {:<18} {:>5} {:>9.2f} {:>12} {:>14} {:>10.1f} {:>10.1f} {:>10.1f} {:>10} {:>10}\n",
               nccl_name(op), group_label(labels, group), ranks, r.count / steps, size, exact, mean * 1e6,
               r.min_s * 1e6, r.max_s * 1e6, alg, bus);
  }
  if (untimed > 0)
    fmt::print(out, "{} kernel{} of 0 us left out of algbw and busbw (counted in the times)\n", untimed,
               untimed == 1 ? "" : "s");
}

json::object per_kind(const PerKind& v, double scale) {
  json::object o;
  for (std::size_t k = 0; k + 1 < kCommKinds; ++k) o[to_string(static_cast<CommKind>(k))] = v[k] * scale;
  o["other"] = v[kCommKinds - 1] * scale;
  return o;
}

json::object breakdown_json(const report::WindowMetrics& m, double n) {
  json::object b;
  b["compute"] = m.compute / n;
  b["exposed_comm"] = per_kind(m.exposed, 1.0 / n);
  b["bubble"] = m.bubble / n;
  b["optimizer"] = m.optimizer / n;
  b["other"] = (m.memory_only + m.idle) / n;
  return b;
}

json::object step_json(const Timeline& t, const RankTimeline& rank, const StepMetrics& s, double n) {
  const report::WindowMetrics& m = s.metrics;
  json::object o;
  o["name"] = s.name;
  o["step_time_s"] = m.length / n;
  o["breakdown_s"] = breakdown_json(m, n);
  o["comm_s"] = per_kind(m.busy, 1.0 / n);
  o["comm_union_s"] = m.comm_union / n;
  o["memory_only_s"] = m.memory_only / n;
  o["idle_s"] = m.idle / n;
  json::object overlap;
  overlap["hidden_fraction"] = m.hidden_fraction();
  overlap["exposed_fraction_of_step"] = m.length > 0 ? m.exposed_total() / m.length : 0.0;
  o["overlap"] = overlap;
  json::object by_op;
  for (std::size_t k = 0; k < s.exposed_by_op.size(); ++k)
    if (s.exposed_by_op[k] > 0) by_op[to_string(static_cast<CollOp>(k))] = s.exposed_by_op[k] / n;
  o["exposed_by_collective_s"] = by_op;
  json::object by_group;
  const std::vector<std::string> labels = group_labels(t, rank, kNoGroup);
  for (std::size_t g = 0; g < s.exposed_by_group.size(); ++g)
    if (s.exposed_by_group[g] > 0)
      by_group[group_label(labels, static_cast<std::int32_t>(g))] = s.exposed_by_group[g] / n;
  o["exposed_by_group_s"] = by_group;
  return o;
}

json::value hta_json(const HtaMetrics& h) {
  if (!h.available) return nullptr;
  json::object o;
  o["comm_comp_overlap_pctg"] = h.overlap_pct ? json::value(*h.overlap_pct) : json::value(nullptr);
  o["last_profiler_step_excluded"] = h.last_step_excluded;
  o["timestamps_rounded_to_us"] = h.rounded;
  o["gpu_activities"] = h.activities;
  o["comm_time_us"] = h.comm.seconds() * 1e6;
  o["overlap_time_us"] = h.overlap.seconds() * 1e6;
  json::object t;
  t["idle_time_us"] = h.idle.seconds() * 1e6;
  t["compute_time_us"] = h.compute.seconds() * 1e6;
  t["non_compute_time_us"] = h.non_compute.seconds() * 1e6;
  t["kernel_time_us"] = h.kernel_time.seconds() * 1e6;
  t["idle_time_pctg"] = hta_round(percent_of(h.idle, h.kernel_time), 2);
  t["compute_time_pctg"] = hta_round(percent_of(h.compute, h.kernel_time), 2);
  t["non_compute_time_pctg"] = hta_round(percent_of(h.non_compute, h.kernel_time), 2);
  o["temporal_breakdown"] = std::move(t);
  json::array kinds;
  const auto shares = kernel_type_shares(h);
  for (std::size_t i = 0; i < h.kernel_types.size(); ++i) {
    json::object k;
    k["kernel_type"] = h.kernel_types[i].label;
    k["sum_us"] = h.kernel_types[i].time.seconds() * 1e6;
    k["percentage"] = shares[i].second;
    kinds.push_back(std::move(k));
  }
  o["kernel_type_breakdown"] = std::move(kinds);
  o["idle_time_breakdown"] = idle_breakdown_json(h);
  return o;
}

json::array collectives_json(const Analysis& a) {
  json::array arr;
  const std::vector<std::string> labels = group_labels(a.trace.timeline, measured_rank(a), kNoGroup);
  const auto gbps = [](const std::optional<Bandwidth>& b) {
    return b ? json::value(b->gbytes_per_s()) : json::value(nullptr);
  };
  for (const CollectiveRecord& c : a.metrics.collectives) {
    json::object o;
    o["step"] = c.step;
    o["op"] = to_string(c.op);
    o["group"] = group_label(labels, c.group);
    o["ranks"] = c.ranks > 0 ? json::value(c.ranks) : json::value(nullptr);
    o["bytes"] = c.bytes.count();
    o["start_s"] = (c.start - a.metrics.steps.front().start).seconds();
    o["duration_s"] = c.duration.seconds();
    o["algbw_GBps"] = gbps(c.algbw);
    o["busbw_GBps"] = gbps(c.busbw);
    o["kernel"] = a.trace.timeline.names[c.name];
    arr.push_back(std::move(o));
  }
  return arr;
}

// Relative difference of the prediction; undefined (nullopt) when nothing was measured.
std::optional<double> relative(double predicted, double measured) {
  if (measured == 0) return predicted == 0 ? std::optional<double>(0.0) : std::nullopt;
  return (predicted - measured) / measured;
}

std::string relative_text(double predicted, double measured) {
  const auto rel = relative(predicted, measured);
  if (!rel) return fmt::format("{:>10}", "n/a");
  // Rounded to the printed digit first, so that a difference that rounds to zero is "+0.0%".
  const double percent = std::round(*rel * 1000.0) / 10.0 + 0.0;
  return fmt::format("{:>+9.1f}%", percent);
}

// A difference of two fractions in percentage points: 12.0 % against 2.0 % is +10.0 pp,
// not +500 %.
std::string points_text(double predicted, double measured) {
  const double points = std::round((predicted - measured) * 1000.0) / 10.0 + 0.0;
  return fmt::format("{:>+8.1f}pp", points);
}

struct Row {
  std::string what;
  double measured, predicted;
  bool fraction;
  bool known = true;  // false: not measurable from this trace (measured is 0)
  const char* unknown = "in kernels";  // what the measured column says when not known
};

std::vector<Row> comparison_rows(const LikeForLike& lf) {
  const Report& m = lf.measured;
  const Report& p = lf.predicted;
  std::vector<Row> rows{{"step time", m.step_time_s, p.step_time_s, false},
                        {"exposed comm", m.breakdown_s.exposed_total(), p.breakdown_s.exposed_total(), false}};
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    const double a = m.breakdown_s.exposed_comm[k], b = p.breakdown_s.exposed_comm[k];
    if (a > 0 || b > 0) rows.push_back({fmt::format("  exposed {}", to_string(static_cast<CommKind>(k))), a, b, false});
  }
  double mc = 0, pc = 0;
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    mc += m.comm_s[k];
    pc += p.comm_s[k];
  }
  rows.push_back({"comm busy (sum of kinds)", mc, pc, false});
  rows.push_back({"  waiting for peers", lf.measured_wait_s.value_or(0.0), lf.predicted_wait_s, false,
                  lf.measured_wait_s.has_value()});
  rows.push_back({"compute", m.breakdown_s.compute + m.breakdown_s.optimizer,
                  p.breakdown_s.compute + p.breakdown_s.optimizer, false});
  rows.push_back({"GPU waiting for the host", lf.measured_host_wait_s.value_or(0.0), lf.predicted_host_wait_s, false,
                  lf.measured_host_wait_s.has_value(), "n/a"});
  rows.push_back({"hidden fraction", m.overlap.hidden_fraction, p.overlap.hidden_fraction, true});
  rows.push_back(
      {"exposed fraction of step", m.overlap.exposed_fraction_of_step, p.overlap.exposed_fraction_of_step, true});
  return rows;
}

json::object side_json(const Report& r, std::optional<double> wait_s, std::optional<double> host_wait_s) {
  json::object o;
  o["step_time_s"] = r.step_time_s;
  o["exposed_comm_s"] = per_kind(r.breakdown_s.exposed_comm, 1.0);
  o["comm_s"] = per_kind(r.comm_s, 1.0);
  o["wait_s"] = wait_s ? json::value(*wait_s) : json::value(nullptr);
  o["host_wait_s"] = host_wait_s ? json::value(*host_wait_s) : json::value(nullptr);
  o["hidden_fraction"] = r.overlap.hidden_fraction;
  return o;
}

// "rank 2", "ranks 2 and 3", "ranks 0 to 7", "ranks 0, 2, 3, 5, 6, 7, 8, 9, ... and 62".
std::string ranks_text(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  if (ranks.size() == 1) return fmt::format("rank {}", ranks.front());
  if (ranks.size() > 2 && ranks.back() - ranks.front() + 1 == static_cast<int>(ranks.size()))
    return fmt::format("ranks {} to {}", ranks.front(), ranks.back());
  constexpr std::size_t kShown = 8;
  const std::size_t shown = std::min(kShown, ranks.size() - 1);
  std::string listed;
  for (std::size_t i = 0; i < shown; ++i) listed += fmt::format("{}{}", i == 0 ? "" : ", ", ranks[i]);
  if (shown + 1 < ranks.size()) listed += ", ...";
  return fmt::format("ranks {} and {}", listed, ranks.back());
}

// The index into the timeline's ranks of global rank `rank`; the lowest rank without one.
std::size_t rank_index_of(const LoadedTrace& t, const std::string& path, std::optional<int> rank) {
  std::vector<int> held;
  for (const RankTimeline& r : t.timeline.ranks) held.push_back(r.rank);
  if (!rank) return static_cast<std::size_t>(std::min_element(held.begin(), held.end()) - held.begin());
  const auto it = std::find(held.begin(), held.end(), *rank);
  if (it != held.end()) return static_cast<std::size_t>(it - held.begin());
  const bool named = std::all_of(t.dist.begin(), t.dist.end(), [](const DistributedInfo& d) { return d.rank >= 0; });
  throw InputError("<command line>", "--rank",
                   fmt::format("{} holds no rank {}: it holds {} ({})", path, *rank, ranks_text(held),
                               named ? "as its distributedInfo says"
                                     : "a file without distributedInfo is numbered by its place among the files"));
}

// Why the two sides of a comparison are measured on different ranks; "" when they are not.
std::string rank_note(const LikeForLike& lf) {
  if (lf.same_rank() || lf.predicted_rank < 0) return "";
  const std::string why =
      lf.measured_rank < 0
          ? "the trace does not say its rank, so the prediction"
          : fmt::format(
                "the prediction does not simulate rank {} (simulation.ranks \"all\" simulates every GPU, "
                "representative mode one rank per pipeline stage), so it",
                lf.measured_rank);
  return fmt::format("{} is measured on {}, its report's rank (the critical path), not on the trace's", why,
                     lf.predicted_label);
}

}  // namespace

Analysis analyze_trace(const std::string& path, std::optional<int> rank, const std::optional<std::string>& step) {
  return analyze_loaded(load_trace(path), path, rank, step);
}

Analysis analyze_loaded(LoadedTrace trace, const std::string& path, std::optional<int> rank,
                        const std::optional<std::string>& step) {
  Analysis a;
  a.trace = std::move(trace);
  const std::size_t rank_index = rank_index_of(a.trace, path, rank);
  // The rank is measured over its own steps, as a folder's ranks each are without --rank.
  a.trace.timeline.steps = a.trace.rank_steps[rank_index];
  const int world = a.trace.dist[rank_index].world_size;
  a.metrics = measure_steps(a.trace.timeline, rank_index, step, world);
  a.mean = mean_report(a.metrics, world > 0 ? world : static_cast<int>(a.trace.timeline.ranks.size()));
  return a;
}

void write_analysis_table(const Analysis& a, std::ostream& out) {
  fmt::print(out, "{}, measured on {}\n\n", source_line(a), a.trace.timeline.ranks[a.metrics.rank_index].label);
  write_steps(a, out);
  write_exposure(a, out);
  write_hta(a, out);
  write_collectives(a, out);
}

void write_analysis_json(const Analysis& a, std::ostream& out) {
  const double n = static_cast<double>(std::max<std::size_t>(1, a.metrics.steps.size()));
  const DistributedInfo& d = a.trace.dist[a.metrics.rank_index];
  json::object o;
  o["stepsim_version"] = a.mean.stepsim_version;
  o["source"] = a.trace.files[a.metrics.rank_index];
  o["rank"] = report::rank_json(d.rank);
  o["world_size"] = d.world_size;
  o["backend"] = d.backend;
  o["nccl_version"] = d.nccl_version;
  o["gpus"] = a.mean.gpus;
  o["steps"] = a.metrics.steps.size();
  json::object mean = step_json(a.trace.timeline, measured_rank(a), a.metrics.total, n);
  for (auto& kv : mean)
    if (kv.key() != "name") o[kv.key()] = kv.value();
  o["whole_trace_hidden_fraction"] = a.metrics.whole_trace_hidden_fraction;
  o["hta"] = hta_json(a.trace.hta[a.metrics.rank_index]);
  json::array steps;
  for (const StepMetrics& s : a.metrics.steps) steps.push_back(step_json(a.trace.timeline, measured_rank(a), s, 1.0));
  o["per_step"] = std::move(steps);
  o["collectives"] = collectives_json(a);
  report::write_pretty_json(o, out);
}

void write_comparison_table(const Analysis& measured, const SimulationResult& predicted, std::ostream& out) {
  const LikeForLike lf = like_for_like(measured, predicted);
  fmt::print(out, "{}, measured on {}; prediction for {} GPUs, measured on {}\n", source_line(measured),
             measured.trace.timeline.ranks[measured.metrics.rank_index].label, predicted.report.gpus,
             lf.predicted_label.empty() ? "no rank" : lf.predicted_label);
  if (const std::string note = rank_note(lf); !note.empty()) fmt::print(out, "note: {}\n", note);
  fmt::print(out,
             "communication includes the time a collective waits for its slowest member, on both sides (as a real "
             "NCCL kernel runs meanwhile); a pipeline transfer's wait for the neighbouring stage is the bubble\n\n");
  fmt::print(out, "{:<26} {:>12} {:>12} {:>10}\n", "", "measured", "predicted", "diff");
  for (const Row& r : comparison_rows(lf)) {
    const double scale = r.fraction ? 100.0 : 1e3;
    const char* unit = r.fraction ? "%" : "ms";
    const std::string m =
        r.known ? fmt::format("{:>10.3f}{:<2}", r.measured * scale, unit) : fmt::format("{:>12}", r.unknown);
    const std::string d = !r.known     ? fmt::format("{:>10}", "-")
                          : r.fraction ? points_text(r.predicted, r.measured)
                                       : relative_text(r.predicted, r.measured);
    fmt::print(out, "{:<26} {} {:>10.3f}{:<2} {}\n", r.what, m, r.predicted * scale, unit, d);
  }
}

void write_comparison_json(const Analysis& measured, const SimulationResult& predicted, std::ostream& out) {
  const LikeForLike lf = like_for_like(measured, predicted);
  json::object o;
  o["stepsim_version"] = predicted.report.stepsim_version;
  o["source"] = measured.trace.files[measured.metrics.rank_index];
  o["measured_rank"] = report::rank_json(lf.measured_rank);
  o["predicted_rank"] = report::rank_json(lf.predicted_rank);
  o["same_rank"] = lf.same_rank();
  const std::string note = rank_note(lf);
  o["rank_note"] = note.empty() ? json::value(nullptr) : json::value(note);
  o["waits_counted_as_comm"] = true;
  json::array rows;
  for (const Row& r : comparison_rows(lf)) {
    json::object row;
    row["what"] = r.what.substr(r.what.find_first_not_of(' '));
    row["measured"] = r.known ? json::value(r.measured) : json::value(nullptr);
    row["predicted"] = r.predicted;
    const auto rel = relative(r.predicted, r.measured);
    row["relative_difference"] = rel && r.known ? json::value(*rel) : json::value(nullptr);
    if (r.fraction) row["difference_points"] = 100.0 * (r.predicted - r.measured);
    rows.push_back(std::move(row));
  }
  o["comparison"] = std::move(rows);
  o["measured"] = side_json(lf.measured, lf.measured_wait_s, lf.measured_host_wait_s);
  o["predicted"] = side_json(lf.predicted, lf.predicted_wait_s, lf.predicted_host_wait_s);
  report::write_pretty_json(o, out);
}

}  // namespace stepsim::analysis
