// measure(): every instant of a window classified by the definitions of docs/report.md.
#include <catch2/catch.hpp>
#include <random>

#include "report/report_io.hpp"
#include "timeline_builder.hpp"

namespace stepsim {
namespace {

using test::bubble_us;
using test::comm_us;
using test::compute_us;
using test::memory_us;
using test::rank_of;

double us(double seconds) { return seconds * 1e6; }
double of(const PerKind& v, CommKind k) { return v[static_cast<std::size_t>(k)]; }

report::WindowMetrics measure_us(const RankTimeline& r, double begin, double end) {
  return report::measure(r, Time::from_us(begin), Time::from_us(end));
}

TEST_CASE("communication under compute is hidden and the rest is exposed") {
  const auto m = measure_us(rank_of({compute_us(0, 10), comm_us(5, 20, CommKind::dp)}), 0, 20);
  CHECK(us(m.length) == Approx(20));
  CHECK(us(m.compute) == Approx(10));
  CHECK(us(of(m.exposed, CommKind::dp)) == Approx(10));
  CHECK(us(of(m.busy, CommKind::dp)) == Approx(15));
  CHECK(us(m.comm_union) == Approx(15));
  CHECK(us(m.overlap) == Approx(5));
  CHECK(m.hidden_fraction() == Approx(1.0 / 3.0));
  CHECK(m.idle == 0);
}

// A collective that waited 4 us at its rendezvous (compute 0-10, arrival at 6, the last peer
// at 10, data 10-14): the engine marks 6-10 a bubble, but NCCL's kernel spins through that
// wait, so it is dp communication, hidden under compute; a pipeline transfer's wait stays
// the bubble.
TEST_CASE("a collective's wait at its rendezvous is communication of its kind, a pipeline transfer's a bubble") {
  Interval dp = comm_us(10, 14, CommKind::dp);
  dp.waited = Time::from_us(4);
  const auto m = measure_us(rank_of({compute_us(0, 8), bubble_us(8, 10), dp}), 0, 14);
  CHECK(us(of(m.busy, CommKind::dp)) == Approx(8));
  CHECK(us(of(m.exposed, CommKind::dp)) == Approx(6));
  CHECK(us(m.overlap) == Approx(2));
  CHECK(m.bubble == 0);
  Interval pp = comm_us(10, 14, CommKind::pp);
  pp.waited = Time::from_us(4);
  const auto p = measure_us(rank_of({compute_us(0, 8), bubble_us(8, 10), pp}), 0, 14);
  CHECK(us(of(p.busy, CommKind::pp)) == Approx(4));
  CHECK(us(p.bubble) == Approx(2));
}

TEST_CASE("two kinds exposed at once share the time equally") {
  const auto m = measure_us(rank_of({comm_us(0, 10, CommKind::tp, 2), comm_us(5, 15, CommKind::dp)}), 0, 15);
  CHECK(us(of(m.exposed, CommKind::tp)) == Approx(7.5));
  CHECK(us(of(m.exposed, CommKind::dp)) == Approx(7.5));
  CHECK(us(of(m.busy, CommKind::tp)) == Approx(10));
  CHECK(us(of(m.busy, CommKind::dp)) == Approx(10));
  CHECK(us(m.comm_union) == Approx(15));
  CHECK(m.overlap == 0);
}

TEST_CASE("two collectives of one kind at once count once") {
  const auto m = measure_us(rank_of({comm_us(0, 10, CommKind::dp), comm_us(5, 15, CommKind::dp, 2)}), 0, 15);
  CHECK(us(of(m.exposed, CommKind::dp)) == Approx(15));
  CHECK(us(of(m.busy, CommKind::dp)) == Approx(15));
}

TEST_CASE("optimizer kernels are their own class but still hide communication") {
  const auto m = measure_us(rank_of({compute_us(0, 4, Phase::optimizer), comm_us(2, 6, CommKind::dp)}), 0, 6);
  CHECK(us(m.optimizer) == Approx(4));
  CHECK(m.compute == 0);
  CHECK(us(of(m.exposed, CommKind::dp)) == Approx(2));
  CHECK(us(m.overlap) == Approx(2));
  CHECK(m.hidden_fraction() == Approx(0.5));
}

TEST_CASE("compute wins over optimizer when both run") {
  const auto m = measure_us(rank_of({compute_us(0, 4), compute_us(2, 6, Phase::optimizer, 2)}), 0, 6);
  CHECK(us(m.compute) == Approx(4));
  CHECK(us(m.optimizer) == Approx(2));
}

TEST_CASE("a bubble marker counts only while nothing else runs") {
  const auto r = rank_of({bubble_us(0, 10), compute_us(2, 4), memory_us(5, 6), comm_us(8, 9, CommKind::pp)});
  const auto m = measure_us(r, 0, 12);
  CHECK(us(m.bubble) == Approx(6));
  CHECK(us(m.compute) == Approx(2));
  CHECK(us(m.memory_only) == Approx(1));
  CHECK(us(of(m.exposed, CommKind::pp)) == Approx(1));
  CHECK(us(m.idle) == Approx(2));
}

TEST_CASE("intervals are clipped to the window") {
  const auto m = measure_us(rank_of({compute_us(-5, 5), comm_us(8, 30, CommKind::dp), compute_us(40, 50)}), 0, 10);
  CHECK(us(m.length) == Approx(10));
  CHECK(us(m.compute) == Approx(5));
  CHECK(us(of(m.exposed, CommKind::dp)) == Approx(2));
  CHECK(us(of(m.busy, CommKind::dp)) == Approx(2));
  CHECK(us(m.idle) == Approx(3));
}

TEST_CASE("an empty window measures nothing") {
  const auto m = measure_us(rank_of({compute_us(0, 5)}), 5, 5);
  CHECK(m.length == 0);
  CHECK(m.compute == 0);
}

double classified(const report::WindowMetrics& m) {
  double sum = m.compute + m.optimizer + m.bubble + m.memory_only + m.idle;
  for (double e : m.exposed) sum += e;
  return sum;
}

RankTimeline random_rank(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> start(0, 1'000'000'000), len(1, 50'000);
  std::uniform_int_distribution<int> pick(0, 9);
  RankTimeline r;
  r.intervals.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Time s = Time::from_ps(start(rng) * 1000);
    Interval iv{s, s + Time::from_ps(len(rng) * 1000)};
    const int p = pick(rng);
    iv.activity = p < 4 ? Activity::compute : p < 8 ? Activity::comm : p < 9 ? Activity::memory : Activity::bubble;
    iv.phase = p == 0 ? Phase::optimizer : Phase::backward;
    iv.kind = static_cast<CommKind>(p % 6);
    r.intervals.push_back(iv);
  }
  return r;
}

TEST_CASE("every instant of a large timeline lands in exactly one class") {
  const RankTimeline r = random_rank(300'000, 7);
  const auto m = report::measure(r, Time::from_us(100), Time::from_ms(900));
  CHECK(classified(m) == Approx(m.length).epsilon(1e-9));
  double busy_sum = 0;
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    CHECK(m.exposed[k] <= m.busy[k] * (1 + 1e-12));
    busy_sum += m.busy[k];
  }
  CHECK(m.comm_union <= busy_sum * (1 + 1e-12));
  CHECK(m.overlap <= m.comm_union);
  CHECK(m.overlap <= m.compute + m.optimizer + m.comm_union);
  CHECK(m.comm_union - m.overlap ==
        Approx(m.exposed[0] + m.exposed[1] + m.exposed[2] + m.exposed[3] + m.exposed[4] + m.exposed[5] + m.exposed[6])
            .epsilon(1e-9));
}

}  // namespace
}  // namespace stepsim
