// How much of the step the GPU waited for the CPU that issues its kernels, and for its copies.
// Where the timeline records when the host issued each op (RankTimeline::issues): in each
// stretch where no compute or communication kernel of the rank ran, the part before the host had
// issued the kernel that ended it (HolisticTraceAnalysis' host wait: the kernel was not launched
// yet). A stretch whose next kernel was issued before it began is not the host's: a copy, a
// dependency, a peer; of it, the time a copy ran is the GPU waiting for its copies. Without
// those times (a profiler trace read without its launches): the CPU's runs of launches
// (RankTimeline::host) against the time any kernel ran.
#include <algorithm>
#include <vector>

#include "report/report_io.hpp"

namespace stepsim::report {
namespace {

struct Span {
  Time start;
  Time end;
  Time issued;  // when the host had issued its op (with RankTimeline::issues)
};

// The union of the kernels the host issues work to (a collective from when it reached its
// rendezvous: the NCCL kernel runs through the wait), sorted by start. A copy engine's
// memcpy (activation offload's copies to and from host memory) is left out: the compute and
// communication streams wait for the CPU while it runs just the same.
std::vector<Span> kernel_spans(const RankTimeline& rank) {
  const bool issued = rank.issues.size() == rank.intervals.size();
  std::vector<Span> spans;
  for (std::size_t k = 0; k < rank.intervals.size(); ++k) {
    const Interval& i = rank.intervals[k];
    if (i.activity == Activity::bubble || i.activity == Activity::memory) continue;
    spans.push_back({i.activity == Activity::comm ? i.start - i.waited : i.start, i.end,
                     issued ? rank.issues[k].issued : Time::zero()});
  }
  std::ranges::sort(spans, {}, &Span::start);
  return spans;
}

// Those spans merged where they overlap.
std::vector<Span> merged_spans(const std::vector<Span>& spans) {
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

// The copies (Activity::memory) of the rank, merged where they overlap, sorted by start.
std::vector<Span> copy_spans(const RankTimeline& rank) {
  std::vector<Span> spans;
  for (const Interval& i : rank.intervals)
    if (i.activity == Activity::memory) spans.push_back({i.start, i.end, Time::zero()});
  std::ranges::sort(spans, {}, &Span::start);
  return merged_spans(spans);
}

// The time in [from, to) that one of the merged `copies` covers.
double copying(const std::vector<Span>& copies, Time from, Time to) {
  double s = 0;
  for (const Span& c : copies) {
    if (c.start >= to) break;
    const Time a = max(c.start, from), b = min(c.end, to);
    if (b > a) s += (b - a).seconds();
  }
  return s;
}

// The stretches in [begin, end) where no kernel ran: each up to when the host had issued the
// kernel (of those starting first after it, the earliest issued) that ended it is the host's;
// of the rest, and of the stretch after the last kernel, the time a copy ran is the copies'.
void idle_waits(const std::vector<Span>& spans, const std::vector<Span>& copies, Time begin, Time end, HostMetrics& m) {
  Time idle_from = begin;
  for (std::size_t k = 0; k < spans.size() && spans[k].start < end;) {
    const Time at = spans[k].start;
    Time issued = spans[k].issued;
    Time busy_to = spans[k].end;
    for (++k; k < spans.size() && spans[k].start == at; ++k) {
      issued = min(issued, spans[k].issued);
      busy_to = max(busy_to, spans[k].end);
    }
    if (at > idle_from) {
      const Time waited_to = max(idle_from, min(issued, at));
      m.gpu_wait += (waited_to - idle_from).seconds();
      m.copy_wait += copying(copies, waited_to, at);
    }
    idle_from = max(idle_from, busy_to);
  }
  if (end > idle_from) m.copy_wait += copying(copies, idle_from, end);
}

}  // namespace

HostMetrics measure_host(const RankTimeline& rank, Time begin, Time end) {
  HostMetrics m;
  const bool issued = !rank.issues.empty() && rank.issues.size() == rank.intervals.size();
  const std::vector<Span> spans = kernel_spans(rank);
  idle_waits(spans, copy_spans(rank), begin, end, m);
  if (!issued) m.gpu_wait = 0;  // from the CPU's runs of launches instead, below
  const std::vector<Span> busy = merged_spans(spans);
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
    if (!issued) m.gpu_wait += (to - from - covered).seconds();
  }
  return m;
}

}  // namespace stepsim::report
