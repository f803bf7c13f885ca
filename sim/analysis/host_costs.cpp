// The CPU's cost per operator in a profiler trace: a sweep over each thread's operators and
// kernel launches in time order, the innermost open operator around each launch.
#include "analysis/host_costs.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "analysis/trace_timeline.hpp"

namespace stepsim::analysis {
namespace {

// The middle value; of an even count, the mean of the two middle ones (to the picosecond).
Time median(std::vector<Time> values) {
  if (values.empty()) return Time::zero();
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  if (values.size() % 2 == 1) return *mid;
  const Time below = *std::max_element(values.begin(), mid);
  return below + Time::from_ps((*mid - below).ps() / 2);
}

// Per thread, its operators sorted by start, an enclosing one before those it encloses.
std::map<std::int64_t, std::vector<CpuEvent>> operators_by_thread(const std::vector<CpuEvent>& ops) {
  std::map<std::int64_t, std::vector<CpuEvent>> by_thread;
  for (const CpuEvent& e : ops) by_thread[e.tid].push_back(e);
  for (auto& [tid, list] : by_thread)
    std::ranges::sort(list, [](const CpuEvent& a, const CpuEvent& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
  return by_thread;
}

struct Pooled {
  std::vector<Time> operators;
  std::vector<Time> dispatches;  // per operator, its duration less its own launches'
  std::vector<Time> launches;
  std::size_t cpu_ops = 0;
  std::size_t cpu_ops_left_out = 0;
};

void add(const KinetoTrace& trace, Pooled& out) {
  out.cpu_ops += trace.cpu_ops.size();
  out.cpu_ops_left_out += trace.cpu_ops_left_out;
  const auto ops = operators_by_thread(trace.cpu_ops);
  std::map<std::int64_t, std::vector<CpuEvent>> launches;
  for (const CpuEvent& l : trace.kernel_launches) {
    launches[l.tid].push_back(l);
    out.launches.push_back(l.end - l.start);
  }
  for (auto& [tid, list] : launches) {
    const auto it = ops.find(tid);
    if (it == ops.end()) continue;
    const std::vector<CpuEvent>& thread_ops = it->second;
    std::ranges::sort(list, {}, &CpuEvent::start);
    std::vector<std::size_t> open;  // operators open at the sweep's time, innermost last
    std::vector<Time> launched(thread_ops.size(), Time::zero());  // per operator, its own launches' time
    std::vector<std::size_t> counted;                             // operators around a launch, in order
    std::vector<bool> seen(thread_ops.size(), false);
    std::size_t next = 0;
    for (const CpuEvent& launch : list) {
      for (; next < thread_ops.size() && thread_ops[next].start <= launch.start; ++next) {
        while (!open.empty() && thread_ops[open.back()].end <= thread_ops[next].start) open.pop_back();
        open.push_back(next);
      }
      while (!open.empty() && thread_ops[open.back()].end < launch.end) open.pop_back();
      if (open.empty()) continue;
      const std::size_t op = open.back();
      launched[op] = launched[op] + (launch.end - launch.start);
      if (seen[op]) continue;
      seen[op] = true;
      counted.push_back(op);
    }
    for (const std::size_t op : counted) {
      const Time duration = thread_ops[op].end - thread_ops[op].start;
      out.operators.push_back(duration);
      out.dispatches.push_back(duration - launched[op]);
    }
  }
}

HostCosts summarise(const Pooled& p) {
  return {p.operators.size(),  p.launches.size(),  p.cpu_ops,           p.cpu_ops_left_out,
          median(p.operators), median(p.launches), median(p.dispatches)};
}

}  // namespace

HostFit fit_host(const HostCosts& h) {
  const auto us = [](Time t) { return std::round(t.us() * 10) / 10; };
  HostFit out;
  if (h.launches > 0 && h.launch_median > Time::zero()) out.launch_us = us(h.launch_median);
  if (h.operators > 0) out.operator_us = us(h.operator_median);
  if (out.operator_us && out.launch_us) out.dispatch_us = std::max(0.0, us(h.dispatch_median));
  return out;
}

HostCosts host_costs(const KinetoTrace& trace) {
  Pooled p;
  add(trace, p);
  return summarise(p);
}

HostCosts host_costs(const std::vector<KinetoTrace>& traces) {
  Pooled p;
  for (const KinetoTrace& t : traces) add(t, p);
  return summarise(p);
}

HostCosts host_costs(const std::string& path) {
  Pooled p;
  for (const std::string& file : trace_files(path)) {
    TimeOrigin origin;
    add(read_kineto(file, origin), p);
  }
  return summarise(p);
}

}  // namespace stepsim::analysis
