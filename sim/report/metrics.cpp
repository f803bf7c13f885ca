// measure(): one sweep over a rank's intervals that classifies every instant of a window
// by the definitions of docs/report.md (compute, optimizer, exposed comm, memory, bubble, idle).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "report/report_io.hpp"

namespace stepsim::report {
namespace {

// Counter slots: one per CommKind, then the non-communication classes.
constexpr std::size_t kCompute = kCommKinds;
constexpr std::size_t kOptimizer = kCommKinds + 1;
constexpr std::size_t kMemory = kCommKinds + 2;
constexpr std::size_t kBubble = kCommKinds + 3;
constexpr std::size_t kSlowing = kCommKinds + 4;  // NCCL kernels, whichever their kind
constexpr std::size_t kSlots = kCommKinds + 5;

// An interval's start (+1) or end (-1) in one counter slot.
struct Edge {
  std::int64_t at;
  std::uint8_t slot;
  std::int8_t delta;
};

std::size_t slot_of(const Interval& iv) {
  switch (iv.activity) {
    case Activity::compute:
      return iv.phase == Phase::optimizer ? kOptimizer : kCompute;
    case Activity::comm:
      return static_cast<std::size_t>(iv.kind);
    case Activity::memory:
      return kMemory;
    case Activity::bubble:
      return kBubble;
  }
  return kCompute;
}

// Time accumulated per class, in picoseconds; exposed time is split, hence double.
struct Totals {
  std::int64_t compute = 0, optimizer = 0, memory = 0, bubble = 0, idle = 0;
  std::int64_t comm_union = 0, overlap = 0, slowing = 0;
  std::array<std::int64_t, kCommKinds> busy{};
  std::array<double, kCommKinds> exposed{};
};

void classify(const std::array<int, kSlots>& running, std::int64_t dt, Totals& t) {
  int kinds = 0;
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    if (running[k] == 0) continue;
    ++kinds;
    t.busy[k] += dt;
  }
  const bool computing = running[kCompute] > 0 || running[kOptimizer] > 0;
  if (kinds > 0) t.comm_union += dt;
  if (kinds > 0 && computing) t.overlap += dt;
  if (running[kSlowing] > 0 && computing) t.slowing += dt;
  if (running[kCompute] > 0) {
    t.compute += dt;
  } else if (running[kOptimizer] > 0) {
    t.optimizer += dt;
  } else if (kinds > 0) {
    const double share = static_cast<double>(dt) / kinds;
    for (std::size_t k = 0; k < kCommKinds; ++k)
      if (running[k] > 0) t.exposed[k] += share;
  } else if (running[kMemory] > 0) {
    t.memory += dt;
  } else if (running[kBubble] > 0) {
    t.bubble += dt;
  } else {
    t.idle += dt;
  }
}

std::vector<Edge> clipped_edges(const RankTimeline& rank, Time begin, Time end) {
  const auto slowing = std::count_if(rank.intervals.begin(), rank.intervals.end(), [](const Interval& iv) {
    return iv.activity == Activity::comm && iv.slows_compute;
  });
  std::vector<Edge> edges;
  edges.reserve(2 * (rank.intervals.size() + static_cast<std::size_t>(slowing)));
  for (const Interval& iv : rank.intervals) {
    // A collective's wait at its rendezvous is NCCL's kernel already running, spinning for the
    // last member: communication of its kind, as a profiler trace shows it. A pipeline
    // transfer's wait for the neighbouring stage stays the bubble it is by design.
    const bool spins = iv.activity == Activity::comm && iv.kind != CommKind::pp;
    const Time s = max(spins ? iv.start - iv.waited : iv.start, begin);
    const Time e = min(iv.end, end);
    if (e <= s) continue;
    const auto slot = static_cast<std::uint8_t>(slot_of(iv));
    edges.push_back({s.ps(), slot, 1});
    edges.push_back({e.ps(), slot, -1});
    if (iv.activity != Activity::comm || !iv.slows_compute) continue;
    const Time slowing_from = max(iv.start, begin);  // NCCL's SM use once the data moves
    if (e <= slowing_from) continue;
    edges.push_back({slowing_from.ps(), static_cast<std::uint8_t>(kSlowing), 1});
    edges.push_back({e.ps(), static_cast<std::uint8_t>(kSlowing), -1});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
  return edges;
}

// Division (not multiplication by 1e-12) gives the double nearest to the exact value.
double to_s(double ps) { return ps / 1e12; }

WindowMetrics to_metrics(const Totals& t, Time begin, Time end) {
  WindowMetrics m;
  m.length = to_s(static_cast<double>((end - begin).ps()));
  m.compute = to_s(static_cast<double>(t.compute));
  m.optimizer = to_s(static_cast<double>(t.optimizer));
  m.memory_only = to_s(static_cast<double>(t.memory));
  m.bubble = to_s(static_cast<double>(t.bubble));
  m.idle = to_s(static_cast<double>(t.idle));
  m.comm_union = to_s(static_cast<double>(t.comm_union));
  m.overlap = to_s(static_cast<double>(t.overlap));
  m.slowing = to_s(static_cast<double>(t.slowing));
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    m.busy[k] = to_s(static_cast<double>(t.busy[k]));
    m.exposed[k] = to_s(t.exposed[k]);
  }
  return m;
}

}  // namespace

WindowMetrics measure(const RankTimeline& rank, Time begin, Time end) {
  if (end <= begin) return {};
  const std::vector<Edge> edges = clipped_edges(rank, begin, end);
  std::array<int, kSlots> running{};
  Totals totals;
  std::int64_t now = begin.ps();
  // All edges at one instant are applied before the next stretch is classified, so the
  // order among equal times does not matter.
  for (std::size_t i = 0; i < edges.size();) {
    classify(running, edges[i].at - now, totals);
    now = edges[i].at;
    for (; i < edges.size() && edges[i].at == now; ++i) running[edges[i].slot] += edges[i].delta;
  }
  classify(running, end.ps() - now, totals);
  return to_metrics(totals, begin, end);
}

}  // namespace stepsim::report
