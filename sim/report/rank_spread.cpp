// ranks_report(): how the simulated ranks differ, from the timeline alone. A collective's
// members are matched by their group and its call count; the member that waited least
// arrived last, and the longest wait of the others is charged to it.
#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "report/report_io.hpp"
#include "stepsim/error.hpp"

namespace stepsim::report {
namespace {

double seconds(Time t) { return t.seconds(); }

}  // namespace

// RankTally::State holds these, and RankTally is declared in a header: a type of an anonymous namespace
// in it would make GCC warn (-Wsubobject-linkage) wherever this file is not the main file (a unity
// build), so they have a namespace of their own, used by this file alone.
namespace rank_spread_detail {

struct RankFigures {
  int rank = 0;
  double step_s = 0;
  double compute_s = 0;
};

// One collective as its members saw it.
struct Meeting {
  Time longest;  // the longest any member waited
  Time shortest = Time::max();
  int last = -1;  // the member that waited least: it arrived last
  int members = 0;
};

// Every collective of every group, found by the group and its call count: a rank belongs to
// a handful of groups, so its counts are a short list, and the meetings are one vector per
// group (a map of tens of millions of collectives at 16,384 ranks would cost far more).
class Meetings {
 public:
  explicit Meetings(std::size_t groups) : by_group_(groups) {}

  void start_rank() { calls_.clear(); }

  // A pipeline SendRecv waits for the neighbouring stage by design (the bubble), so it
  // charges nobody.
  void meet(const Interval& iv, int rank) {
    if (iv.group < 0 || iv.kind == CommKind::pp) return;
    const auto g = static_cast<std::size_t>(iv.group);
    if (g >= by_group_.size()) by_group_.resize(g + 1);
    std::vector<Meeting>& meetings = by_group_[g];
    const std::uint32_t k = next_call(iv.group);
    if (k >= meetings.size()) meetings.resize(k + 1);
    Meeting& m = meetings[k];
    ++m.members;
    m.longest = max(m.longest, iv.waited);
    if (iv.waited < m.shortest) {
      m.shortest = iv.waited;
      m.last = rank;
    }
  }

  // The rank charged with the most waiting of its peers; collectives of one simulated member
  // (representative mode) wait for nobody simulated and charge nobody. Nor do waits under a
  // nanosecond: members whose work is the same arrive a few picoseconds apart where their
  // durations were rounded to picoseconds, which is no late arrival.
  Straggler straggler() const {
    std::unordered_map<int, double> charged;
    for (const auto& meetings : by_group_)
      for (const Meeting& m : meetings)
        if (m.members > 1 && m.longest >= Time::from_ns(1)) charged[m.last] += seconds(m.longest);
    Straggler s;
    for (const auto& [rank, wait] : charged)
      if (wait > s.caused_wait_s || (wait == s.caused_wait_s && rank < s.rank)) {
        s.rank = rank;
        s.caused_wait_s = wait;
      }
    return s;
  }

 private:
  std::uint32_t next_call(std::int32_t group) {
    for (auto& [g, count] : calls_)
      if (g == group) return count++;
    calls_.emplace_back(group, 1);
    return 0;
  }

  std::vector<std::vector<Meeting>> by_group_;
  std::vector<std::pair<std::int32_t, std::uint32_t>> calls_;  // the current rank's collectives per group
};

}  // namespace rank_spread_detail

using rank_spread_detail::Meetings;
using rank_spread_detail::RankFigures;

namespace {

RankSpread spread_of(std::vector<RankFigures> ranks, double RankFigures::*figure) {
  RankSpread s;
  if (ranks.empty()) return s;
  const auto less = [figure](const RankFigures& a, const RankFigures& b) { return a.*figure < b.*figure; };
  const auto [lo, hi] = std::minmax_element(ranks.begin(), ranks.end(), less);
  s.min = (*lo).*figure;
  s.min_rank = lo->rank;
  s.max = (*hi).*figure;
  s.max_rank = hi->rank;
  const auto mid = ranks.begin() + static_cast<std::ptrdiff_t>(ranks.size() / 2);
  std::nth_element(ranks.begin(), mid, ranks.end(), less);
  s.median = (*mid).*figure;
  return s;
}

}  // namespace

struct RankTally::State {
  State(std::size_t groups, std::size_t count, const StepWindow& step)
      : window(step), ranks(static_cast<double>(count)), meetings(groups) {}
  StepWindow window;
  double ranks;  // the mean waits' divisor
  RanksReport out;
  std::vector<RankFigures> figures;
  Meetings meetings;
};

RankTally::RankTally(std::size_t groups, std::size_t ranks, const StepWindow& window)
    : state_(std::make_unique<State>(groups, ranks, window)) {}
RankTally::~RankTally() = default;

void RankTally::add(const RankTimeline& rank) {
  State& s = *state_;
  RankFigures f{rank.rank, 0, 0};
  // Each kind's waits as spans of the step, whose union the rank waited (FSDP's AllGather and
  // ReduceScatter wait on streams of their own at once). A pipeline transfer is left out: it
  // is posted ahead and sits at its rendezvous while the stage computes, and what the stage
  // waits for its neighbour is the bubble.
  std::array<std::vector<std::pair<Time, Time>>, kCommKinds> spans;
  s.meetings.start_rank();
  std::optional<Time> drain;  // the start of a bubble that lasts to the step's end
  for (const Interval& iv : rank.intervals) {
    if (iv.activity == Activity::bubble && iv.end >= s.window.end && iv.start < s.window.end)
      drain = drain ? max(*drain, iv.start) : iv.start;
    if (iv.activity == Activity::bubble || iv.start >= s.window.end || iv.end <= s.window.start) continue;
    f.step_s = std::max(f.step_s, seconds(min(iv.end, s.window.end) - s.window.start));
    if (iv.activity == Activity::compute) f.compute_s += seconds(iv.end - iv.start);
    if (iv.activity != Activity::comm) continue;
    const Time from = max(iv.start - iv.waited, s.window.start);
    if (iv.kind != CommKind::pp && from < iv.start)
      spans[static_cast<std::size_t>(iv.kind)].emplace_back(from, iv.start);
    s.meetings.meet(iv, rank.rank);
  }
  PerKind waits{};
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    std::sort(spans[k].begin(), spans[k].end());
    Time covered = s.window.start;  // the end of the union so far
    Time total;
    for (const auto& [from, to] : spans[k]) {
      if (to <= covered) continue;
      total += to - max(from, covered);
      covered = to;
    }
    waits[k] = seconds(total);
  }
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    s.out.rendezvous_wait_s[k] += waits[k] / s.ranks;
    s.out.rendezvous_wait_max_s[k] = std::max(s.out.rendezvous_wait_max_s[k], waits[k]);
  }
  // A simulated rank standing for several real ones (representative mode) is done when the
  // slowest of them is: under jitter the engine waits the expected time for it after the rank's
  // own last op, before the drain bubble to the step's end (or up to the end when there is
  // none), and so does the step.
  if (rank.multiplicity > 1) {
    const Time done = drain && seconds(*drain - s.window.start) >= f.step_s ? *drain : s.window.end;
    f.step_s = std::max(f.step_s, seconds(done - s.window.start));
  }
  s.figures.push_back(f);
}

RanksReport RankTally::result() const {
  const State& s = *state_;
  STEPSIM_CHECK(static_cast<double>(s.figures.size()) == s.ranks, "a rank tally saw a different count of ranks");
  RanksReport out = s.out;
  out.simulated = static_cast<int>(s.figures.size());
  out.step_time_s = spread_of(s.figures, &RankFigures::step_s);
  out.compute_s = spread_of(s.figures, &RankFigures::compute_s);
  out.straggler = s.meetings.straggler();
  return out;
}

RanksReport ranks_report(const Timeline& timeline, const StepWindow& window) {
  RankTally tally(timeline.groups.size(), timeline.ranks.size(), window);
  for (const RankTimeline& rank : timeline.ranks) tally.add(rank);
  return tally.result();
}

}  // namespace stepsim::report
