// HolisticTraceAnalysis' overlap and breakdowns by its rules; see hta_metrics.hpp.
#include "analysis/hta_metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <unordered_map>

namespace stepsim::analysis {
namespace {

struct Span {
  std::int64_t start;  // ps
  std::int64_t end;
};

struct GroupEdge {
  std::int64_t at;
  int delta;
};

// hta/utils/utils.py, merge_kernel_intervals: a new group when an interval starts after the
// latest end so far. Rounding can leave an interval ending before it starts; HTA keeps it,
// so its group may count negative time, and so does this.
std::vector<Span> merge_like_hta(std::vector<Span> spans) {
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  std::vector<Span> groups;
  std::int64_t latest_end = 0;
  for (const Span& s : spans) {
    if (groups.empty() || s.start > latest_end) {
      groups.push_back(s);
      latest_end = s.end;
      continue;
    }
    groups.back().end = std::max(groups.back().end, s.end);
    latest_end = std::max(latest_end, s.end);
  }
  return groups;
}

std::int64_t total(const std::vector<Span>& groups) {
  std::int64_t sum = 0;
  for (const Span& g : groups) sum += g.end - g.start;
  return sum;
}

void add_edges(const std::vector<Span>& groups, int value, std::vector<GroupEdge>& edges) {
  for (const Span& g : groups) {
    edges.push_back({g.start, value});
    edges.push_back({g.end, -value});
  }
}

// Calls visit(running, from, to) for each stretch between distinct times, with the sum of
// the values of the groups running (HTA's cumulative "status" column).
template <typename Visit>
void sweep(std::vector<GroupEdge> edges, Visit&& visit) {
  std::stable_sort(edges.begin(), edges.end(), [](const GroupEdge& a, const GroupEdge& b) { return a.at < b.at; });
  int running = 0;
  for (std::size_t i = 0; i < edges.size();) {
    const std::int64_t at = edges[i].at;
    for (; i < edges.size() && edges[i].at == at; ++i) running += edges[i].delta;
    if (i < edges.size()) visit(running, at, edges[i].at);
  }
}

constexpr std::int64_t kPsPerUs = 1000000;

// A decimal number of microseconds, whole and picoseconds, as the nearest double: what
// Python's float() makes of the trace's text (which had no more digits than picoseconds).
double nearest_double(std::int64_t whole_us, std::int64_t frac_ps) {
  char text[48];
  char* end = whole_us < 0 && frac_ps > 0 ? fmt::format_to(text, "-{}.{:06}", -(whole_us + 1), kPsPerUs - frac_ps)
                                          : fmt::format_to(text, "{}.{:06}", whole_us, frac_ps);
  double v = 0;
  std::from_chars(text, end, v);
  return v;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0) ? 1 : 0); }

// HTA's inward rounding (trace_parser.py, round_down_time_stamps): ceil(ts) and
// floor(ts + dur) of the doubles Python read, in whole microseconds from the origin.
struct Rounder {
  std::int64_t origin_us;

  double absolute(Time t) const {
    const std::int64_t ps = t.ps();
    const std::int64_t whole = floor_div(ps, kPsPerUs);
    return nearest_double(origin_us + whole, ps - whole * kPsPerUs);
  }
  double duration(Time d) const { return nearest_double(d.ps() / kPsPerUs, d.ps() % kPsPerUs); }
  Time relative_us(double us) const { return Time::from_ps((static_cast<std::int64_t>(us) - origin_us) * kPsPerUs); }
  Time start(Time t) const { return relative_us(std::ceil(absolute(t))); }
  Time end(Time start, Time end) const { return relative_us(std::floor(absolute(start) + duration(end - start))); }
};

// Which activities HTA keeps, and their times as HTA's table has them: rounded inward where
// HTA rounds (`round`), exact otherwise.
class Selection {
 public:
  Selection(const HtaView& view, const std::vector<Launch>& launches, bool round)
      : view_(view), launches_(launches), round_(round), rounder_{view.origin_us} {
    excluded_ = view_.step_names.size() >= 2 && view_.cpu_rows > 0;
    // No CPU ProfilerStep: HTA takes the first CPU event's start, before which nothing starts.
    none_ = excluded_ && !view_.cpu_step;
    last_ = start_of(view_.last_step);
    if (excluded_)
      for (const Launch& l : launches_)
        if (start_of(l.at) < last_) launched_.push_back(l.correlation);
    std::sort(launched_.begin(), launched_.end());
  }

  bool last_step_excluded() const { return excluded_; }
  Time start_of(Time t) const { return round_ ? rounder_.start(t) : t; }
  Time start(const HtaActivity& a) const { return start_of(a.start); }
  Time end(const HtaActivity& a) const { return round_ ? rounder_.end(a.start, a.end) : a.end; }

  bool keeps(const HtaActivity& a) const {
    if (none_) return false;
    if (!excluded_) return true;
    return a.gpu_row ? std::binary_search(launched_.begin(), launched_.end(), a.correlation) : start(a) < last_;
  }

  // A CPU event of HTA's table that HTA keeps: before the last step's start when it is left out.
  bool keeps(const Launch& l) const { return !none_ && (!excluded_ || start_of(l.at) < last_); }

  // The activities HTA keeps, as spans in ps, by kernel type (index: HtaKernelType).
  std::array<std::vector<Span>, 4> select() const {
    std::array<std::vector<Span>, 4> by_type;
    for (const HtaActivity& a : view_.activities)
      if (keeps(a)) by_type[static_cast<std::size_t>(a.type)].push_back({start(a).ps(), end(a).ps()});
    return by_type;
  }

 private:
  const HtaView& view_;
  const std::vector<Launch>& launches_;
  bool round_;
  Rounder rounder_;
  bool excluded_ = false, none_ = false;
  Time last_;
  std::vector<std::int64_t> launched_;
};

void overlap(const std::vector<Span>& comm, const std::vector<Span>& comp, HtaMetrics& m) {
  std::vector<GroupEdge> edges;
  add_edges(comm, 1, edges);
  add_edges(comp, 2, edges);
  std::int64_t both = 0;
  sweep(std::move(edges), [&](int running, std::int64_t from, std::int64_t to) {
    if (running == 3) both += to - from;
  });
  m.comm = Time::from_ps(total(comm));
  m.overlap = Time::from_ps(both);
  if (m.comm > Time::zero())
    m.overlap_pct = hta_round(100.0 * static_cast<double>(both) / static_cast<double>(total(comm)), 2);
}

// hta/analyzers/breakdown_analysis.py, _get_gpu_kernel_type_time with memory kernels (the
// default of TraceAnalysis.get_gpu_kernel_breakdown): computation 1, communication 2, memory 4.
void kernel_types(const std::vector<Span>& comp, const std::vector<Span>& comm, const std::vector<Span>& memory,
                  HtaMetrics& m) {
  constexpr std::array<const char*, 3> kNames{"COMPUTATION", "COMMUNICATION", "MEMORY"};
  std::vector<GroupEdge> edges;
  add_edges(comp, 1, edges);
  add_edges(comm, 2, edges);
  add_edges(memory, 4, edges);
  std::array<std::int64_t, 8> by_bits{};
  sweep(std::move(edges), [&](int running, std::int64_t from, std::int64_t to) {
    if (running > 0) by_bits[static_cast<std::size_t>(running & 7)] += to - from;
  });
  for (std::size_t bits = 1; bits < by_bits.size(); ++bits) {
    if (by_bits[bits] == 0) continue;
    std::string label;
    for (std::size_t b = 0; b < kNames.size(); ++b)
      if ((bits >> b) & 1U) label += (label.empty() ? "" : " overlapping ") + std::string(kNames[b]);
    m.kernel_types.push_back({label, Time::from_ps(by_bits[bits])});
  }
  std::stable_sort(m.kernel_types.begin(), m.kernel_types.end(),
                   [](const HtaKernelTypeTime& a, const HtaKernelTypeTime& b) { return a.time > b.time; });
}

// hta/analyzers/breakdown_analysis.py, get_temporal_breakdown over every kept activity.
void temporal(const std::array<std::vector<Span>, 4>& by_type, const std::vector<Span>& comp, HtaMetrics& m) {
  std::vector<Span> all;
  for (const auto& spans : by_type) all.insert(all.end(), spans.begin(), spans.end());
  m.activities = all.size();
  const std::vector<Span> groups = merge_like_hta(std::move(all));
  if (groups.empty()) return;
  const std::int64_t span = groups.back().end - groups.front().start;
  const std::int64_t idle = span - total(groups);
  const std::int64_t compute = total(comp);
  m.kernel_time = Time::from_ps(span);
  m.idle = Time::from_ps(idle);
  m.compute = Time::from_ps(compute);
  m.non_compute = Time::from_ps(span - compute - idle);
}

// hta/analyzers/breakdown_analysis.py, get_idle_time_breakdown; see hta_metrics.hpp.
HtaIdleBreakdown idle_breakdown(const HtaView& view, const std::vector<Launch>& launches, bool round) {
  const Selection sel(view, launches, round);
  HtaIdleBreakdown b;
  b.rounded = round;
  // Each correlation id's launch: the last CPU row with it in the file, if HTA keeps it.
  std::unordered_map<std::int64_t, std::optional<Time>> launch_of;
  for (const Launch& l : launches)
    if (l.hta_row) launch_of[l.correlation] = sel.keeps(l) ? std::optional<Time>(sel.start_of(l.at)) : std::nullopt;
  struct Kernel {
    std::int64_t stream;
    Time start, end;
    std::optional<Time> launch;
  };
  std::vector<Kernel> kernels;
  for (const HtaActivity& a : view.activities) {
    if (!a.kernel_category || a.stream == -1 || !sel.keeps(a)) continue;
    std::optional<Time> launch;
    if (a.gpu_row)
      if (const auto it = launch_of.find(a.correlation); it != launch_of.end()) launch = it->second;
    kernels.push_back({a.stream, sel.start(a), sel.end(a), launch});
  }
  std::stable_sort(kernels.begin(), kernels.end(), [](const Kernel& x, const Kernel& y) {
    return x.stream != y.stream ? x.stream < y.stream : x.start < y.start;
  });
  b.total.stream = -1;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const Kernel& k = kernels[i];
    const bool first = i == 0 || kernels[i - 1].stream != k.stream;
    if (first) b.streams.emplace_back().stream = k.stream;
    HtaStreamIdle& s = b.streams.back();
    ++s.kernels;
    if (k.launch) ++s.launched;
    if (first) continue;
    const Time previous_end = kernels[i - 1].end;
    const Time gap = k.start - previous_end;
    if (k.launch && *k.launch > previous_end)
      s.host_wait += gap;
    else if (gap < kHtaConsecutiveKernelDelay)
      s.kernel_wait += gap;
    else
      s.other += gap;
  }
  for (const HtaStreamIdle& s : b.streams) {
    b.total.kernels += s.kernels;
    b.total.launched += s.launched;
    b.total.host_wait += s.host_wait;
    b.total.kernel_wait += s.kernel_wait;
    b.total.other += s.other;
  }
  return b;
}

}  // namespace

std::vector<StepHostWait> step_host_wait(const KinetoTrace& trace) {
  std::vector<StepHostWait> out;
  for (const CpuSpan& s : trace.steps) out.push_back({trace.strings[s.name], Time::zero()});
  // Each correlation id's launch: the last CPU row with it in the file, as HTA joins them.
  std::unordered_map<std::int64_t, Time> launch_of;
  for (const Launch& l : trace.launches)
    if (l.hta_row) launch_of[l.correlation] = l.at;
  std::unordered_map<std::int64_t, std::size_t> per_stream;
  for (const HtaActivity& a : trace.hta.activities)
    if (a.kernel_category && a.stream != -1) ++per_stream[a.stream];
  if (per_stream.empty()) return out;
  // The compute stream: the most activities, the lowest stream id on ties (as by stream id).
  std::int64_t compute = -1;
  std::size_t most = 0;
  for (const auto& [stream, n] : per_stream)
    if (n > most || (n == most && stream < compute)) {
      compute = stream;
      most = n;
    }
  struct Kernel {
    Time start, end;
    std::optional<Time> launch;
  };
  std::vector<Kernel> kernels;
  for (const HtaActivity& a : trace.hta.activities) {
    if (!a.kernel_category || a.stream != compute) continue;
    std::optional<Time> launch;
    if (a.gpu_row)
      if (const auto it = launch_of.find(a.correlation); it != launch_of.end()) launch = it->second;
    kernels.push_back({a.start, a.end, launch});
  }
  std::stable_sort(kernels.begin(), kernels.end(), [](const Kernel& x, const Kernel& y) { return x.start < y.start; });
  // The steps by start; a launch is in the latest step that started at or before it, if it
  // has not ended (as the step table assigns activities to steps).
  std::vector<std::size_t> by_start(trace.steps.size());
  for (std::size_t s = 0; s < by_start.size(); ++s) by_start[s] = s;
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](std::size_t a, std::size_t b) { return trace.steps[a].start < trace.steps[b].start; });
  for (std::size_t k = 1; k < kernels.size(); ++k) {
    const std::optional<Time> launch = kernels[k].launch;
    if (!launch || *launch <= kernels[k - 1].end) continue;
    const auto it = std::upper_bound(by_start.begin(), by_start.end(), *launch,
                                     [&](Time at, std::size_t s) { return at < trace.steps[s].start; });
    if (it == by_start.begin()) continue;
    const std::size_t s = *std::prev(it);
    if (*launch < trace.steps[s].end) out[s].host_wait += kernels[k].start - kernels[k - 1].end;
  }
  return out;
}

double hta_round(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::nearbyint(value * scale) / scale;
}

HtaMetrics measure_hta(const HtaView& view, const std::vector<Launch>& launches) {
  HtaMetrics m;
  m.available = true;
  m.rounded = view.fractional_ts;
  const Selection selection(view, launches, m.rounded);
  m.last_step_excluded = selection.last_step_excluded();
  const auto by_type = selection.select();
  const std::vector<Span> comm = merge_like_hta(by_type[static_cast<std::size_t>(HtaKernelType::communication)]);
  const std::vector<Span> comp = merge_like_hta(by_type[static_cast<std::size_t>(HtaKernelType::computation)]);
  const std::vector<Span> memory = merge_like_hta(by_type[static_cast<std::size_t>(HtaKernelType::memory)]);
  overlap(comm, comp, m);
  kernel_types(comp, comm, memory, m);
  temporal(by_type, comp, m);
  m.idle_breakdown = idle_breakdown(view, launches, m.rounded);
  if (m.rounded) m.idle_breakdown_exact = idle_breakdown(view, launches, false);
  const std::size_t named = view.step_names.size();
  m.steps = m.last_step_excluded ? named - 1 : std::max<std::size_t>(1, named);
  return m;
}

}  // namespace stepsim::analysis
