// ranks_report(): per-rank spread, rendezvous waits per kind and the straggler, on
// hand-made timelines with the figures worked out by hand.
#include <catch2/catch.hpp>

#include "report/report_io.hpp"
#include "timeline_builder.hpp"

using namespace stepsim;
using namespace stepsim::test;

namespace {

Interval waited(Interval iv, double us, std::int32_t group = 0) {
  iv.waited = Time::from_us(us);
  iv.group = group;
  return iv;
}

// Three DP ranks: rank 2 computes 30 us longer, so ranks 0 and 1 wait 30 us at the
// AllReduce (ranks 0 also waits 10 us at a TP collective of its own group).
Timeline three_ranks() {
  Timeline t;
  t.ranks.push_back(rank_of({compute_us(0, 100), waited(comm_us(100, 150, CommKind::dp), 30),
                             waited(comm_us(150, 160, CommKind::tp, 2), 10, 1)},
                            0));
  t.ranks.push_back(rank_of({compute_us(0, 100), waited(comm_us(100, 150, CommKind::dp), 30)}, 1));
  t.ranks.push_back(rank_of({compute_us(0, 130), waited(comm_us(130, 150, CommKind::dp), 0)}, 2));
  t.steps.push_back({"step", Time::zero(), Time::from_us(160)});
  return t;
}

double wait_of(const PerKind& v, CommKind k) { return v[static_cast<std::size_t>(k)]; }

}  // namespace

TEST_CASE("the rank that arrived last is the straggler, charged with its peers' longest wait") {
  const RanksReport r = report::ranks_report(three_ranks(), {"step", Time::zero(), Time::from_us(160)});
  CHECK(r.simulated == 3);
  CHECK(r.straggler.rank == 2);
  CHECK(r.straggler.caused_wait_s == Approx(30e-6));
  // Rank 0's TP collective has no other simulated member: it charges nobody.
}

TEST_CASE("rendezvous waits are per kind, the mean over ranks and the largest") {
  const RanksReport r = report::ranks_report(three_ranks(), {"step", Time::zero(), Time::from_us(160)});
  CHECK(wait_of(r.rendezvous_wait_s, CommKind::dp) == Approx(20e-6));
  CHECK(wait_of(r.rendezvous_wait_max_s, CommKind::dp) == Approx(30e-6));
  CHECK(wait_of(r.rendezvous_wait_s, CommKind::tp) == Approx(10e-6 / 3));
  CHECK(wait_of(r.rendezvous_wait_s, CommKind::pp) == 0);
}

// FSDP's AllGather waiting 40..100 us and its ReduceScatter waiting 30..120 us on a stream of
// its own overlap: the rank waited 90 us (30 to 120), not their 150 us sum. A stage's posted
// pipeline transfers sit at their rendezvous while it computes: they are left out.
TEST_CASE("waits that overlap in time count once, and pipeline transfers not at all") {
  Timeline t;
  t.ranks.push_back(rank_of(
      {compute_us(0, 30), waited(comm_us(100, 110, CommKind::dp), 60), waited(comm_us(120, 130, CommKind::dp), 90),
       waited(comm_us(130, 135, CommKind::pp), 100), compute_us(130, 140)},
      0));
  t.steps.push_back({"step", Time::zero(), Time::from_us(140)});
  const RanksReport r = report::ranks_report(t, t.steps.front());
  CHECK(wait_of(r.rendezvous_wait_s, CommKind::dp) == Approx(90e-6));
  CHECK(wait_of(r.rendezvous_wait_max_s, CommKind::dp) == Approx(90e-6));
  CHECK(wait_of(r.rendezvous_wait_s, CommKind::pp) == 0);
}

TEST_CASE("step and compute time spread over the ranks with the ranks at the extremes") {
  const RanksReport r = report::ranks_report(three_ranks(), {"step", Time::zero(), Time::from_us(160)});
  CHECK(r.step_time_s.min == Approx(150e-6));
  CHECK(r.step_time_s.median == Approx(150e-6));
  CHECK(r.step_time_s.max == Approx(160e-6));
  CHECK(r.step_time_s.max_rank == 0);
  CHECK(r.compute_s.min == Approx(100e-6));
  CHECK(r.compute_s.max == Approx(130e-6));
  CHECK(r.compute_s.max_rank == 2);
}

TEST_CASE("ranks that arrive together name no straggler") {
  Timeline t;
  t.ranks.push_back(rank_of({compute_us(0, 100), waited(comm_us(100, 150, CommKind::dp), 0)}, 0));
  t.ranks.push_back(rank_of({compute_us(0, 100), waited(comm_us(100, 150, CommKind::dp), 0)}, 1));
  const RanksReport r = report::ranks_report(t, {"step", Time::zero(), Time::from_us(150)});
  CHECK(r.straggler.rank == -1);
  CHECK(r.straggler.caused_wait_s == 0);
}

TEST_CASE("waits under a nanosecond, the rounding of durations to picoseconds, name no straggler") {
  Timeline t;
  Interval late = comm_us(100, 150, CommKind::dp);
  late.group = 0;
  late.waited = Time::from_ps(4);
  t.ranks.push_back(rank_of({compute_us(0, 100), late}, 0));
  t.ranks.push_back(rank_of({compute_us(0, 100), waited(comm_us(100, 150, CommKind::dp), 0)}, 1));
  const RanksReport r = report::ranks_report(t, {"step", Time::zero(), Time::from_us(150)});
  CHECK(r.straggler.rank == -1);
  CHECK(r.straggler.caused_wait_s == 0);
}
