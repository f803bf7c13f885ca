// How much of the step the GPU waited for the CPU that issues its kernels: the CPU's runs of
// launches (RankTimeline::host) against the time any compute or communication kernel of the
// rank ran.
#include <algorithm>
#include <vector>

#include "report/report_io.hpp"

namespace stepsim::report {
namespace {

struct Span {
  Time start;
  Time end;
};

// The union of the kernels the host issues work to (a collective from when it reached its
// rendezvous: the NCCL kernel runs through the wait), sorted and merged. A copy engine's
// memcpy (activation offload's copies to and from host memory) is left out: the compute and
// communication streams wait for the CPU while it runs just the same.
std::vector<Span> gpu_busy(const RankTimeline& rank) {
  std::vector<Span> spans;
  for (const Interval& i : rank.intervals) {
    if (i.activity == Activity::bubble || i.activity == Activity::memory) continue;
    spans.push_back({i.activity == Activity::comm ? i.start - i.waited : i.start, i.end});
  }
  std::ranges::sort(spans, {}, &Span::start);
  std::vector<Span> merged;
  for (const Span& s : spans) {
    if (!merged.empty() && s.start <= merged.back().end) {
      merged.back().end = max(merged.back().end, s.end);
    } else {
      merged.push_back(s);
    }
  }
  return merged;
}

}  // namespace

HostMetrics measure_host(const RankTimeline& rank, Time begin, Time end) {
  HostMetrics m;
  const std::vector<Span> busy = gpu_busy(rank);
  auto next = busy.begin();
  for (const HostRun& run : rank.host) {
    const Time from = max(run.start, begin);
    const Time to = min(run.end, end);
    if (to <= from) continue;
    m.issue += (to - from).seconds();
    Time covered = Time::zero();
    while (next != busy.end() && next->end <= from) ++next;
    for (auto b = next; b != busy.end() && b->start < to; ++b)
      covered = covered + (min(b->end, to) - max(b->start, from));
    m.gpu_wait += (to - from - covered).seconds();
  }
  return m;
}

}  // namespace stepsim::report
