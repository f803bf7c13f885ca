// Execution semantics of the engine (docs/model.md) with exact integer-time expectations.
#include <catch2/catch.hpp>

#include <array>
#include <functional>

#include "engine/engine.hpp"
#include "program_builder.hpp"
#include "stepsim/error.hpp"

namespace Catch {
template <>
struct StringMaker<stepsim::Time> {
  static std::string convert(stepsim::Time t) { return std::to_string(t.ps()) + " ps"; }
};
}  // namespace Catch

namespace {

using stepsim::Activity;
using stepsim::Bandwidth;
using stepsim::Bytes;
using stepsim::CollOp;
using stepsim::CommKind;
using stepsim::Interval;
using stepsim::Time;
using stepsim::Timeline;
using stepsim::engine::run;
using stepsim::engine::testing::call;
using stepsim::engine::testing::interval;
using stepsim::engine::testing::ProgramBuilder;
using stepsim::engine::testing::us;

const Bandwidth k100GBps = Bandwidth::gbytes_per_s(100);
const Bytes kMB{1'000'000};

std::vector<Interval> of_activity(const Timeline& t, int rank, Activity a) {
  std::vector<Interval> out;
  for (const Interval& i : t.ranks[static_cast<std::size_t>(rank)].intervals) {
    if (i.activity == a) out.push_back(i);
  }
  return out;
}

// A collective of no bytes taking 1 us (a barrier) on rank r's compute stream.
void barrier(ProgramBuilder& b, int r, std::int32_t group, const std::string& name) {
  b.collective(r, 0, name, group, call(Bytes{0}, us(1)));
}

// Running the program fails with a program bug whose message contains `message`.
void require_program_bug(const stepsim::engine::Program& program, const std::string& message) {
  REQUIRE_THROWS_AS(run(program), stepsim::InternalError);
  REQUIRE_THROWS_WITH(run(program), Catch::Contains(message));
}

// Two ranks sharing one op list, whose ops `add` writes on rank 0 given a group of both and a
// "dp" stream; communication slows their compute by half (comm_slowdown 0.5).
stepsim::engine::Program two_ranks_one_list(
    const std::function<void(ProgramBuilder&, std::int32_t, stepsim::engine::StreamIndex)>& add) {
  ProgramBuilder b(2);
  b.program().comm_slowdown = 0.5;
  const auto g = b.group("dp", {0, 1});
  const auto comm = b.stream(0, "dp");
  b.stream(1, "dp");
  add(b, g, comm);
  b.program().ranks[1].list = b.program().ranks[0].list;
  b.program().ranks[1].calls = b.program().ranks[0].calls;
  return b.program();
}

}  // namespace

TEST_CASE("ops on one stream run one after another") {
  ProgramBuilder b(1);
  b.compute(0, 0, "a", us(10));
  b.compute(0, 0, "b", us(20));
  const Timeline t = run(b.program());
  CHECK(interval(t, 0, "a").start == us(0));
  CHECK(interval(t, 0, "a").end == us(10));
  CHECK(interval(t, 0, "b").start == us(10));
  CHECK(interval(t, 0, "b").end == us(30));
  REQUIRE(t.steps.size() == 1);
  CHECK(t.steps[0].name == "step");
  CHECK(t.steps[0].end == us(30));
}

TEST_CASE("ops on different streams run concurrently unless an event orders them") {
  ProgramBuilder b(1);
  const auto side = b.stream(0, "side");
  const auto a = b.compute(0, 0, "a", us(10));
  b.compute(0, side, "free", us(3));
  b.compute(0, side, "after a", us(5), {a});
  const Timeline t = run(b.program());
  CHECK(interval(t, 0, "free").start == us(0));
  CHECK(interval(t, 0, "free").end == us(3));
  CHECK(interval(t, 0, "after a").start == us(10));
  CHECK(interval(t, 0, "after a").end == us(15));
  CHECK(interval(t, 0, "after a").stream == side);
}

TEST_CASE("ranks with more streams than their state holds inline keep each stream in order") {
  // Twelve streams (the rank's state holds eight heads; more go to a separate array): a chain
  // across all of them, each op waiting on the one before on the previous stream, and a
  // second op on each stream that waits only for its stream.
  ProgramBuilder b(2);
  for (int r = 0; r < 2; ++r) {
    std::vector<stepsim::engine::StreamIndex> streams{0};
    for (int s = 1; s < 12; ++s) streams.push_back(b.stream(r, "s" + std::to_string(s)));
    stepsim::engine::OpIndex last = 0;
    for (int s = 0; s < 12; ++s) {
      const auto waits = s == 0 ? std::vector<stepsim::engine::OpIndex>{} : std::vector{last};
      last = b.compute(r, streams[static_cast<std::size_t>(s)], "chain" + std::to_string(s), us(r + 1), waits);
      b.compute(r, streams[static_cast<std::size_t>(s)], "then" + std::to_string(s), us(1));
    }
  }
  const Timeline t = run(b.program());
  for (int r = 0; r < 2; ++r) {
    for (int s = 0; s < 12; ++s) {
      CHECK(interval(t, r, "chain" + std::to_string(s)).end == us((r + 1) * (s + 1)));
      CHECK(interval(t, r, "then" + std::to_string(s)).start == interval(t, r, "chain" + std::to_string(s)).end);
      CHECK(interval(t, r, "then" + std::to_string(s)).stream == s);
    }
  }
}

TEST_CASE("the host launch cost delays tiny kernels") {
  ProgramBuilder b(1, us(5));
  b.compute(0, 0, "a", us(1));
  b.compute(0, 0, "b", us(1));
  b.compute(0, 0, "c", us(1));
  const Timeline t = run(b.program());
  CHECK(interval(t, 0, "a").start == us(5));
  CHECK(interval(t, 0, "b").start == us(10));
  CHECK(interval(t, 0, "c").start == us(15));
  CHECK(t.steps[0].end == us(16));
}

TEST_CASE("a host-blocking op holds back the issue of every later op") {
  ProgramBuilder b(1, us(5));
  const auto a = b.compute(0, 0, "a", us(10));
  b.compute(0, 0, "sync", us(1), {a});
  b.op(0, 1).host_blocks = true;
  b.compute(0, 0, "c", us(1));
  const Timeline t = run(b.program());
  CHECK(interval(t, 0, "a").end == us(15));
  CHECK(interval(t, 0, "sync").start == us(20));
  CHECK(interval(t, 0, "c").start == us(25));
}

TEST_CASE("ops issued before the host blocked keep their launch times once it issues again") {
  ProgramBuilder b(1, us(5));
  const auto side = b.stream(0, "side");
  const auto c0 = b.compute(0, 0, "c0", us(1));      // launched at 5, ends at 6
  b.compute(0, side, "p", us(2));                    // launched at 10, runs 10-12
  b.compute(0, side, "s0", us(1));                   // launched at 15: waits for it after p ends at 12
  const auto h = b.compute(0, 0, "h", us(1), {c0});  // blocks the host until 6: launched at 15 + 5
  b.op(0, h).host_blocks = true;
  b.compute(0, side, "x", us(1));  // the host's new run: 25
  const Timeline t = run(b.program());
  CHECK(interval(t, 0, "c0").end == us(6));
  CHECK(interval(t, 0, "p").end == us(12));
  CHECK(interval(t, 0, "s0").start == us(15));
  CHECK(interval(t, 0, "h").start == us(20));
  CHECK(interval(t, 0, "x").start == us(25));
}

TEST_CASE("each op costs the host its own issue time, and a kernel waits until it is issued") {
  ProgramBuilder b(1, us(5));
  b.program().host_costs = {us(20), Time::zero()};
  b.compute(0, 0, "a", us(1));  // 20: a framework's dispatch and launch
  b.op(0, 0).host = 1;
  b.compute(0, 0, "b", us(1));  // 5: the kernel launch alone
  b.compute(0, 0, "c", us(1));  // replayed by a CUDA graph: nothing more
  b.op(0, 2).host = 2;
  const Timeline t = run(b.program());
  CHECK(interval(t, 0, "a").start == us(20));
  CHECK(interval(t, 0, "b").start == us(25));
  CHECK(interval(t, 0, "c").start == us(26));  // issued at 25, after b ends at 26
  CHECK(t.steps[0].end == us(27));
  REQUIRE(t.ranks[0].host.size() == 1);
  // The CPU issued a and b; c, which a graph replays, is not one of its ops.
  CHECK(t.ranks[0].host[0] == stepsim::HostRun{Time::zero(), us(25), 2});
}

TEST_CASE("the host's runs of launches end where it blocks on the GPU and start again once it may go on") {
  ProgramBuilder b(1, us(5));
  const auto a = b.compute(0, 0, "a", us(100));           // issued at 5, runs to 105
  const auto sync = b.compute(0, 0, "sync", us(1), {a});  // the host waits for a: an .item()
  b.op(0, sync).host_blocks = true;
  b.compute(0, 0, "c", us(1));
  const Timeline t = run(b.program());
  REQUIRE(t.ranks[0].host.size() == 2);
  CHECK(t.ranks[0].host[0] == stepsim::HostRun{Time::zero(), us(5), 1});
  CHECK(t.ranks[0].host[1] == stepsim::HostRun{us(105), us(115), 2});
  CHECK(interval(t, 0, "sync").start == us(110));  // the GPU idles 5 us waiting for the host
}

// The same hand computations as the two tests above, asked of each op: when the host was done
// issuing it, at what cost, and whether a CUDA graph replayed it.
TEST_CASE("the timeline records how the host issued each op when the program asks for it") {
  ProgramBuilder b(1, us(5));
  b.program().host_costs = {us(20), Time::zero()};
  const auto a = b.compute(0, 0, "a", us(100));  // 20: a framework's dispatch and launch
  b.op(0, a).host = 1;
  const auto sync = b.compute(0, 0, "sync", us(1), {a});  // the host waits for a, ending at 120
  b.op(0, sync).host_blocks = true;
  const auto c = b.compute(0, 0, "c", us(1));  // replayed by a CUDA graph
  b.op(0, c).host = 2;
  b.program().record_host_issues = true;
  const Timeline t = run(b.program());
  const stepsim::RankTimeline& r = t.ranks[0];
  REQUIRE(r.issues.size() == r.intervals.size());
  for (std::size_t i = 0; i < r.intervals.size(); ++i) {
    const std::string name = t.names[r.intervals[i].name];
    const stepsim::HostIssue& h = r.issues[i];
    INFO(name);
    if (r.intervals[i].activity == stepsim::Activity::bubble) {
      CHECK_FALSE(h.op);
      continue;
    }
    CHECK(h.op);
    if (name == "a") CHECK(h == stepsim::HostIssue{us(20), us(20), 0, true, false});
    if (name == "sync") CHECK(h == stepsim::HostIssue{us(125), us(5), 1, true, false});
    if (name == "c") CHECK(h == stepsim::HostIssue{us(125), Time::zero(), 2, true, true});
  }
  // Not asked for: nothing recorded.
  b.program().record_host_issues = false;
  CHECK(run(b.program()).ranks[0].issues.empty());
}

TEST_CASE("a duration that overflows while the op states are prepared is an error on either thread") {
  for (const auto preparation : {stepsim::engine::SecondThread::by_size, stepsim::engine::SecondThread::always}) {
    ProgramBuilder b(2);
    for (int r = 0; r < 2; ++r) {
      for (int k = 0; k < 100; ++k) b.compute(r, 0, "op", Time::from_s(1.0));
    }
    b.program().variation.speed = {1.0, 1e-8};  // rank 1's kernels would take 1e8 s each
    CHECK_THROWS_AS(stepsim::engine::Engine(b.program(), preparation).run(), stepsim::RangeOverflow);
  }
}

TEST_CASE("a second thread preparing the op states and writing the intervals changes nothing") {
  // 64 ranks in 8 groups, each rank a compute and a communication stream, hundreds of rows of
  // op states, kernel jitter, and an op that blocks the host half way.
  constexpr int kRanks = 64;
  ProgramBuilder b(kRanks, us(2));
  std::vector<std::int32_t> groups;
  for (int g = 0; g < kRanks / 8; ++g) {
    std::vector<int> members;
    for (int m = 0; m < 8; ++m) members.push_back(g * 8 + m);
    groups.push_back(b.group("tp" + std::to_string(g), members, CommKind::tp));
  }
  const auto link = b.link(k100GBps);
  for (int r = 0; r < kRanks; ++r) {
    const auto comm = b.stream(r, "comm");
    stepsim::engine::OpIndex last = 0;
    for (int k = 0; k < 1000; ++k) {
      const auto c =
          b.compute(r, 0, "gemm", us(10 + k % 7),
                    k == 0 ? std::vector<stepsim::engine::OpIndex>{} : std::vector<stepsim::engine::OpIndex>{last});
      last = b.collective(r, comm, "ar", groups[static_cast<std::size_t>(r / 8)],
                          call(kMB, us(3), k100GBps, {{link, 1.0}}), {c});
      if (k == 500) b.op(r, c).host_blocks = true;
    }
  }
  b.program().variation.jitter = stepsim::engine::JitterDraw::normal;
  b.program().variation.sigma = 0.05;
  b.program().variation.seed = 11;
  const Timeline one = stepsim::engine::Engine(b.program()).run();
  stepsim::engine::Engine engine(b.program(), stepsim::engine::SecondThread::always);
  const Timeline two = engine.run();
  CHECK(engine.stats().prepare_s > 0);
  REQUIRE(two.ranks.size() == one.ranks.size());
  std::size_t differ = 0;
  for (std::size_t r = 0; r < one.ranks.size(); ++r) {
    if (two.ranks[r].intervals != one.ranks[r].intervals) ++differ;
  }
  CHECK(differ == 0);
  CHECK(two.steps[0].end == one.steps[0].end);

  // An observer sees the ranks in order, from both threads in turn.
  struct EvenRanks final : stepsim::engine::IntervalObserver {
    void begin(const stepsim::StepWindow&) override {}
    bool observe(Timeline& t, std::size_t r) override {
      seen.push_back(r);
      sizes.push_back(t.ranks[r].intervals.size());
      return r % 2 == 0;
    }
    std::vector<std::size_t> seen;
    std::vector<std::size_t> sizes;
  } even;
  const Timeline observed = stepsim::engine::Engine(b.program(), stepsim::engine::SecondThread::always).run(&even);
  std::vector<std::size_t> in_order(one.ranks.size());
  std::vector<std::size_t> sizes;
  for (std::size_t r = 0; r < one.ranks.size(); ++r) {
    in_order[r] = r;
    sizes.push_back(one.ranks[r].intervals.size());
  }
  CHECK(even.seen == in_order);
  CHECK(even.sizes == sizes);
  CHECK(observed.ranks[2].intervals == one.ranks[2].intervals);
  CHECK(observed.ranks[3].intervals.empty());
  CHECK(observed.ranks[3].dropped == one.ranks[3].intervals.size());
}

TEST_CASE("a collective starts when its slowest member reaches it") {
  ProgramBuilder b(2);
  const auto g = b.group("dp", {0, 1});
  for (int r = 0; r < 2; ++r) {
    const auto comm = b.stream(r, "dp");
    const auto work = b.compute(r, 0, "work", us(r == 0 ? 10 : 30));
    b.collective(r, comm, "allreduce", g, call(Bytes{0}, us(2)), {work});
  }
  const Timeline t = run(b.program());
  for (int r = 0; r < 2; ++r) {
    const Interval& ar = interval(t, r, "allreduce");
    CHECK(ar.start == us(30));
    CHECK(ar.end == us(32));
    CHECK(ar.activity == Activity::comm);
    CHECK(ar.kind == CommKind::dp);
    CHECK(ar.op == CollOp::allreduce);
    CHECK(ar.group == g);
  }
}

TEST_CASE("the compute stream waiting for a peer is a bubble") {
  ProgramBuilder b(2);
  const auto g = b.group("pp", {0, 1}, CommKind::pp);
  for (int r = 0; r < 2; ++r) {
    const auto comm = b.stream(r, "pp");
    const auto work = b.compute(r, 0, "work", us(r == 0 ? 10 : 30));
    const auto recv = b.collective(r, comm, "sendrecv", g, call(kMB, us(2)), {work});
    b.compute(r, 0, "next", us(1), {recv});
  }
  const Timeline t = run(b.program());
  const auto bubbles = of_activity(t, 0, Activity::bubble);
  REQUIRE(bubbles.size() == 1);
  CHECK(bubbles[0].start == us(10));
  CHECK(bubbles[0].end == us(30));
  CHECK(bubbles[0].stream == 0);
  CHECK(t.names[bubbles[0].name] == "bubble");
  // The slower member never waits, and waiting on the transfer itself is no bubble.
  CHECK(of_activity(t, 1, Activity::bubble).empty());
  CHECK(interval(t, 0, "sendrecv").end == us(42));
  CHECK(interval(t, 0, "next").start == us(42));
}

// Stage 0's rank computes 10 us, stage 1's two ranks 4 us and 6 us: the step ends at 10 us.
// Stage 1's first rank waits on its stage's other rank from 4 to 6 us (idle), then both wait on
// stage 0 to the step's end: the drain, a bubble of 4 us each. Stage 0's rank ends the step.
TEST_CASE("a stage done before the step ends waits on another stage to its end: a bubble") {
  ProgramBuilder b(3);
  b.program().ranks[1].stage = 1;
  b.program().ranks[2].stage = 1;
  b.compute(0, 0, "work", us(10));
  b.compute(1, 0, "work", us(4));
  b.compute(2, 0, "work", us(6));
  const Timeline t = run(b.program());
  REQUIRE(t.steps.size() == 1);
  CHECK(t.steps[0].end == us(10));
  CHECK(of_activity(t, 0, Activity::bubble).empty());
  for (int r = 1; r < 3; ++r) {
    INFO("rank " << r);
    const auto bubbles = of_activity(t, r, Activity::bubble);
    REQUIRE(bubbles.size() == 1);
    CHECK(bubbles[0].start == us(6));
    CHECK(bubbles[0].end == us(10));
    CHECK(bubbles[0].stream == 0);
    CHECK(t.ranks[static_cast<std::size_t>(r)].intervals.back().activity == Activity::bubble);
  }
  // Ranks of one stage alone: waiting on a peer of the same stage at the step's end is no
  // bubble.
  ProgramBuilder one(2);
  one.compute(0, 0, "work", us(10));
  one.compute(1, 0, "work", us(4));
  const Timeline u = run(one.program());
  CHECK(u.steps[0].end == us(10));
  CHECK(of_activity(u, 1, Activity::bubble).empty());
}

TEST_CASE("a long run of compute ops ends under one event per 256 ops") {
  // 300 ops of 1 us back to back: the first 256 (a head and 255 chained behind it) end under
  // one event, the other 44 under a second.
  ProgramBuilder b(1);
  for (int k = 0; k < 300; ++k) b.compute(0, 0, "op" + std::to_string(k), us(1));
  stepsim::engine::RunStats stats;
  const Timeline t = run(b.program(), nullptr, &stats);
  CHECK(stats.events == 2);
  CHECK(stats.chained == 298);
  for (int k = 0; k < 300; ++k) {
    CHECK(interval(t, 0, "op" + std::to_string(k)).start == us(k));
    CHECK(interval(t, 0, "op" + std::to_string(k)).end == us(k + 1));
  }
}

TEST_CASE("a rank's bubbles are kept in the order they ended, however many there are") {
  // A hundred barriers that rank 0 reaches 1 us before rank 1: a bubble of 1 us each time,
  // more than two chunks' worth of them.
  ProgramBuilder b(2);
  const auto g = b.group("pp", {0, 1}, CommKind::pp);
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < 100; ++k) {
      b.compute(r, 0, "work" + std::to_string(k), us(r + 1));
      barrier(b, r, g, "barrier" + std::to_string(k));
    }
  }
  const Timeline t = run(b.program());
  const auto bubbles = of_activity(t, 0, Activity::bubble);
  REQUIRE(bubbles.size() == 100);
  for (int k = 0; k < 100; ++k) {
    CHECK(bubbles[static_cast<std::size_t>(k)].start == us(3 * k + 1));
    CHECK(bubbles[static_cast<std::size_t>(k)].end == us(3 * k + 2));
  }
  CHECK(of_activity(t, 1, Activity::bubble).empty());
  CHECK(t.ranks[0].intervals.size() == 300);
}

TEST_CASE("compute slows down while communication of its rank runs") {
  ProgramBuilder b(1);
  b.program().comm_slowdown = 0.5;
  const auto g = b.group("tp", {0}, CommKind::tp);
  const auto comm = b.stream(0, "tp");
  b.compute(0, 0, "gemm", us(100));
  const auto lead = b.compute(0, comm, "lead", us(20));
  b.collective(0, comm, "allreduce", g, call(Bytes{0}, us(30)), {lead});
  const Timeline t = run(b.program());
  // 20 us at full speed, 30 us at 1/1.5 speed (20 us of work), then the last 60 us.
  CHECK(interval(t, 0, "allreduce").start == us(20));
  CHECK(interval(t, 0, "allreduce").end == us(50));
  CHECK(interval(t, 0, "gemm").end == us(110));
}

TEST_CASE("a transfer outside NCCL leaves the compute beside it at full speed, an NCCL call beside both slows it") {
  ProgramBuilder b(1);
  b.program().comm_slowdown = 0.5;
  const auto tp = b.group("tp", {0}, CommKind::tp);
  const auto dp = b.group("dp", {0});
  const auto comm = b.stream(0, "tp");
  const auto nccl = b.stream(0, "dp");
  b.compute(0, 0, "gemm", us(100));
  stepsim::engine::CollectiveCall copy = call(Bytes{0}, us(30));
  copy.slows_compute = false;
  b.collective(0, comm, "copy", tp, copy);
  const auto lead = b.compute(0, nccl, "lead", us(40));
  b.collective(0, nccl, "allreduce", dp, call(Bytes{0}, us(15)), {lead});
  const Timeline t = run(b.program());
  // 40 us at full speed beside the copy (0–30) and alone, 15 us at 1/1.5 speed beside the
  // AllReduce (10 us of work), then the last 50 us.
  CHECK(interval(t, 0, "copy").end == us(30));
  CHECK(interval(t, 0, "allreduce").start == us(40));
  CHECK(interval(t, 0, "gemm").end == us(105));
}

TEST_CASE("a lone collective moves its bytes at its algorithm bandwidth") {
  ProgramBuilder b(1);
  const auto link = b.link(Bandwidth::gbytes_per_s(400));
  const auto g = b.group("dp", {0});
  b.collective(0, 0, "allreduce", g, call(kMB, us(3), k100GBps, {{link, 1.0}}));
  const Timeline t = run(b.program());
  CHECK(interval(t, 0, "allreduce").end == us(13));
  CHECK(interval(t, 0, "allreduce").bytes == kMB);
}

TEST_CASE("a collective takes the longest latency and the lowest bandwidth of its members' views") {
  // Three members see the call with different latencies and bandwidths: 1 MB moves after the
  // longest latency (5 us) at the lowest bandwidth (50 GB/s: 20 us), on every member.
  ProgramBuilder b(3);
  const auto g = b.group("dp", {2, 0, 1});
  b.collective(0, 0, "allreduce", g, call(kMB, us(1), k100GBps));
  b.collective(1, 0, "allreduce", g, call(kMB, us(5), Bandwidth::gbytes_per_s(200)));
  b.collective(2, 0, "allreduce", g, call(kMB, us(2), Bandwidth::gbytes_per_s(50)));
  const Timeline t = run(b.program());
  for (int r = 0; r < 3; ++r) CHECK(interval(t, r, "allreduce").end == us(25));
}

TEST_CASE("members that see one collective with different sizes are a program bug") {
  ProgramBuilder b(2);
  const auto g = b.group("dp", {0, 1});
  b.collective(0, 0, "allreduce", g, call(kMB, us(1)));
  b.collective(1, 0, "allreduce", g, call(Bytes{2'000'000}, us(1)));
  require_program_bug(b.program(), "group 'dp' call 0 has different sizes on its members");
}

TEST_CASE("two concurrent collectives sharing one link take longer than one") {
  ProgramBuilder b(1);
  const auto link = b.link(k100GBps);
  const auto g1 = b.group("dp", {0});
  const auto g2 = b.group("tp", {0}, CommKind::tp);
  const auto s1 = b.stream(0, "dp");
  const auto s2 = b.stream(0, "tp");
  b.collective(0, s1, "first", g1, call(kMB, Time::zero(), k100GBps, {{link, 1.0}}));
  const auto lead = b.compute(0, s2, "lead", us(5));
  b.collective(0, s2, "second", g2, call(kMB, Time::zero(), k100GBps, {{link, 1.0}}), {lead});
  const Timeline t = run(b.program());
  // Alone for 5 us (half its bytes), then 50 GB/s each: first ends at 15 us; the second
  // has half its bytes left then and gets the whole link back.
  CHECK(interval(t, 0, "first").end == us(15));
  CHECK(interval(t, 0, "second").start == us(5));
  CHECK(interval(t, 0, "second").end == us(20));
}

// A copy engine's copy to host memory over the GPU's PCIe link (64 GB/s each way), beside an
// AllReduce whose NIC traffic crosses the same link (NCCL's 48 GB/s path). By hand: both
// start at 0 and the link splits max-min fairly, 32 GB/s each (below both caps); the 16 MB
// AllReduce ends at 500 us, when the copy has moved 16 of its 64 MB; the other 48 MB go at
// the copy's whole 64 GB/s, 750 us: it ends at 1250 us, not the 1000 us it takes alone. A
// GEMM waiting for the AllReduce then runs beside the copy at full speed: a copy engine's
// copy is no NCCL kernel.
TEST_CASE("a host copy shares the GPU's PCIe link with its NIC traffic, as a memory copy that slows no compute") {
  ProgramBuilder b(1);
  b.program().comm_slowdown = 0.5;
  const auto pcie = b.link(Bandwidth::gbytes_per_s(64));
  const auto copies = b.group("offload to host", {0}, CommKind::other);
  const auto dp = b.group("dp", {0});
  const auto to_host = b.stream(0, "offload to host");
  const auto nccl = b.stream(0, "dp");
  stepsim::engine::CollectiveCall copy =
      call(Bytes{64'000'000}, Time::zero(), Bandwidth::gbytes_per_s(64), {{pcie, 1}});
  copy.host_copy = true;
  copy.slows_compute = false;
  b.collective(0, to_host, "copy", copies, copy);
  const auto reduce = b.collective(0, nccl, "allreduce", dp,
                                   call(Bytes{16'000'000}, Time::zero(), Bandwidth::gbytes_per_s(48), {{pcie, 1}}));
  b.compute(0, 0, "gemm", us(100), {reduce});
  const Timeline t = run(b.program());
  CHECK(interval(t, 0, "allreduce").end == us(500));
  CHECK(interval(t, 0, "copy").start == Time::zero());
  CHECK(interval(t, 0, "copy").end == us(1250));
  CHECK(interval(t, 0, "copy").activity == Activity::memory);
  CHECK(interval(t, 0, "copy").bytes == Bytes{64'000'000});
  CHECK(interval(t, 0, "allreduce").activity == Activity::comm);
  CHECK(interval(t, 0, "gemm").start == us(500));
  CHECK(interval(t, 0, "gemm").end == us(600));
}

TEST_CASE("every member of a collective finishes at the same time") {
  ProgramBuilder b(2);
  const auto slow = b.link(Bandwidth::gbytes_per_s(50));
  const auto fast = b.link(Bandwidth::gbytes_per_s(500));
  const auto g = b.group("dp", {0, 1});
  b.collective(0, 0, "allreduce", g, call(kMB, Time::zero(), k100GBps, {{slow, 1.0}}));
  b.collective(1, 0, "allreduce", g, call(kMB, Time::zero(), k100GBps, {{fast, 1.0}}));
  const Timeline t = run(b.program());
  CHECK(interval(t, 0, "allreduce").end == us(20));
  CHECK(interval(t, 1, "allreduce").end == us(20));
}

TEST_CASE("a group's collectives load the links of the calls their members make, whichever repeat") {
  // Two members call four collectives in turn: "a" loads each member's slow link, "b" its
  // fast one, "a again" makes call "a" again on both, and "mixed" has rank 0 make call "b" and
  // rank 1 call "a". A collective moves 1 MB at the slowest link it loads (capped at 100 GB/s):
  // 20 us on a slow link, 10 us on a fast one. A link no flow loads is declared first.
  ProgramBuilder b(2);
  b.link(Bandwidth::gbytes_per_s(1));
  const std::array fast{b.link(Bandwidth::gbytes_per_s(500)), b.link(Bandwidth::gbytes_per_s(500))};
  const std::array slow{b.link(Bandwidth::gbytes_per_s(50)), b.link(Bandwidth::gbytes_per_s(50))};
  const auto g = b.group("dp", {0, 1});
  std::vector<stepsim::engine::OpIndex> ops[2];
  for (int r = 0; r < 2; ++r) {
    const auto own = static_cast<std::size_t>(r);
    ops[r].push_back(b.collective(r, 0, "a", g, call(kMB, Time::zero(), k100GBps, {{slow[own], 1.0}})));
    ops[r].push_back(b.collective(r, 0, "b", g, call(kMB, Time::zero(), k100GBps, {{fast[own], 1.0}})));
    ops[r].push_back(b.collective(r, 0, "a again", g, call(kMB, Time::zero(), k100GBps, {{fast[own], 1.0}})));
    ops[r].push_back(b.collective(r, 0, "mixed", g, call(kMB, Time::zero(), k100GBps, {{fast[own], 1.0}})));
    b.op(r, ops[r][2]).call = b.op(r, ops[r][0]).call;  // the call of "a", made again
  }
  b.op(0, ops[0][3]).call = b.op(0, ops[0][1]).call;  // rank 0: "b"
  b.op(1, ops[1][3]).call = b.op(1, ops[1][0]).call;  // rank 1: "a"
  const Timeline t = run(b.program());
  for (int r = 0; r < 2; ++r) {
    CHECK(interval(t, r, "a").end == us(20));
    CHECK(interval(t, r, "b").end == us(30));
    CHECK(interval(t, r, "a again").end == us(50));
    CHECK(interval(t, r, "mixed").end == us(70));
  }
}

TEST_CASE("the memory counter follows the ops' allocations") {
  ProgramBuilder b(1);
  b.program().ranks[0].memory_base = Bytes::gib(1);
  b.compute(0, 0, "forward", us(10));
  b.op(0, 0).memory_delta = Bytes::mib(100);
  b.compute(0, 0, "backward", us(10));
  b.op(0, 1).memory_delta = Bytes{0} - Bytes::mib(60);
  b.compute(0, 0, "idle", us(10));
  const Timeline t = run(b.program());
  const auto& memory = t.ranks[0].memory;
  REQUIRE(memory.size() == 3);
  CHECK(memory[0].at == us(0));
  CHECK(memory[0].value == Bytes::gib(1));
  CHECK(memory[1].at == us(10));
  CHECK(memory[1].value == Bytes::gib(1) + Bytes::mib(100));
  CHECK(memory[2].at == us(20));
  CHECK(memory[2].value == Bytes::gib(1) + Bytes::mib(40));
}

TEST_CASE("the timeline carries ranks, streams and groups of the program") {
  ProgramBuilder b(2);
  b.program().ranks[1].multiplicity = 8;
  const auto g = b.group("dp", {0, 1});
  b.program().groups[0].size = 16;
  b.program().groups[0].ranks = "[0, 8]";
  for (int r = 0; r < 2; ++r) b.collective(r, b.stream(r, "dp"), "allreduce", g, call(Bytes{0}, us(1)));
  const Timeline t = run(b.program());
  REQUIRE(t.ranks.size() == 2);
  CHECK(t.ranks[1].rank == 1);
  CHECK(t.ranks[1].multiplicity == 8);
  CHECK(t.ranks[1].label == "r1");
  CHECK(t.ranks[1].streams == std::vector<std::string>{"compute", "dp"});
  REQUIRE(t.groups.size() == 1);
  CHECK(t.groups[0].name == "dp");
  CHECK(t.groups[0].size == 16);
  CHECK(t.groups[0].ranks == "[0, 8]");
}

TEST_CASE("two runs of one program give identical timelines") {
  ProgramBuilder b(3, us(2));
  b.program().comm_slowdown = 0.3;
  const auto link = b.link(Bandwidth::gbytes_per_s(80));
  const auto g = b.group("dp", {0, 1, 2});
  for (int r = 0; r < 3; ++r) {
    const auto comm = b.stream(r, "dp");
    b.compute(r, 0, "fwd", us(7 + r));
    stepsim::engine::OpIndex last = 0;
    for (int k = 0; k < 5; ++k) {
      last = b.compute(r, 0, "bwd", us(3 + k));
      b.collective(r, comm, "allreduce", g, call(Bytes{300'017}, us(1), k100GBps, {{link, 0.7}}), {last});
    }
    b.compute(r, 0, "step", us(4), {last});
  }
  const Timeline first = run(b.program());
  const Timeline second = run(b.program());
  REQUIRE(first.ranks.size() == second.ranks.size());
  for (std::size_t r = 0; r < first.ranks.size(); ++r) {
    const auto& x = first.ranks[r].intervals;
    const auto& y = second.ranks[r].intervals;
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      CHECK(x[i].start == y[i].start);
      CHECK(x[i].end == y[i].end);
      CHECK(x[i].name == y[i].name);
      CHECK(x[i].stream == y[i].stream);
    }
  }
  CHECK(first.steps[0].end == second.steps[0].end);
}

TEST_CASE("ops that wait on each other are reported as a deadlock") {
  ProgramBuilder b(1);
  const auto side = b.stream(0, "side");
  b.compute(0, 0, "a", us(1), {1});
  b.compute(0, side, "b", us(1), {0});
  REQUIRE_THROWS_WITH(run(b.program()),
                      Catch::Contains("deadlock: rank 0 (r0) stream 0 'compute' op 0 'a' waits on op 1 'b'"));
}

TEST_CASE("collectives called in different orders are reported as a deadlock") {
  ProgramBuilder b(2);
  const auto x = b.group("x", {0, 1});
  const auto y = b.group("y", {0, 1});
  barrier(b, 0, x, "first");
  barrier(b, 0, y, "second");
  barrier(b, 1, y, "second");
  barrier(b, 1, x, "first");
  require_program_bug(b.program(), "waits at the rendezvous of group 'x' call 0 (1 of 2");
}

TEST_CASE("the k-th calls of groups that make different numbers of calls are matched") {
  // Three groups of three ranks each with 3, 1 and 2 calls, called in different orders: each
  // call of a group meets the same call of the group on every member.
  ProgramBuilder b(3);
  const auto x = b.group("x", {0, 1, 2});
  const auto y = b.group("y", {2, 0, 1});
  const auto z = b.group("z", {1, 2, 0});
  const auto call_of = [&](int r, std::int32_t g, const std::string& name, double latency_us) {
    b.collective(r, 0, name, g, call(Bytes{0}, us(latency_us)));
  };
  for (int r = 0; r < 3; ++r) {
    call_of(r, x, "x0", 1);
    if (r == 1) b.compute(r, 0, "late", us(10));
    call_of(r, z, "z0", 2);
    call_of(r, x, "x1", 3);
    call_of(r, y, "y0", 4);
    call_of(r, z, "z1", 5);
    call_of(r, x, "x2", 6);
  }
  stepsim::engine::RunStats stats;
  const Timeline t = run(b.program(), nullptr, &stats);
  CHECK(stats.collectives == 6);
  for (int r = 0; r < 3; ++r) {
    CHECK(interval(t, r, "x0").end == us(1));
    CHECK(interval(t, r, "z0").start == us(11));  // rank 1's late op holds every member back
    CHECK(interval(t, r, "z0").end == us(13));
    CHECK(interval(t, r, "x1").end == us(16));
    CHECK(interval(t, r, "y0").end == us(20));
    CHECK(interval(t, r, "z1").end == us(25));
    CHECK(interval(t, r, "x2").end == us(31));
  }
}

TEST_CASE(
    "a member that makes fewer calls of a group, a rank listed twice, or a rank outside the group, is a program bug") {
  struct Case {
    std::vector<int> members;                        // of group 'x'
    std::vector<std::pair<int, std::string>> calls;  // rank, op name: a barrier on 'x'
    std::string message;
  };
  const std::vector<Case> cases{
      {{0, 1}, {{0, "a"}, {0, "b"}, {1, "a"}}, "group 'x' call 1 never reaches member 1"},
      // A rank listed twice makes each call once: its second place is never reached.
      {{0, 1, 0}, {{0, "a"}, {1, "a"}}, "group 'x' call 0 never reaches member 0"},
      {{1, 0, 1}, {{0, "a"}, {1, "a"}, {0, "b"}, {1, "b"}}, "group 'x' call 0 never reaches member 1"},
      {{0}, {{0, "a"}, {1, "a"}}, "rank 1 calls group 'x' without being a member"},
  };
  for (const Case& c : cases) {
    ProgramBuilder b(2);
    const auto x = b.group("x", c.members);
    for (const auto& [r, name] : c.calls) barrier(b, r, x, name);
    require_program_bug(b.program(), c.message);
  }
}

TEST_CASE("a host blocked on work that never ends is reported as a deadlock") {
  ProgramBuilder b(1);
  const auto side = b.stream(0, "side");
  const auto g = b.group("pp", {0});
  b.compute(0, side, "late", us(1), {2});
  b.compute(0, 0, "sync", us(1), {0});
  b.op(0, 1).host_blocks = true;
  b.collective(0, 0, "never issued", g, call(Bytes{0}, us(1)));
  REQUIRE_THROWS_WITH(run(b.program()), Catch::Contains("is never issued: the host blocks before op 1 'sync'"));
}

TEST_CASE("a broken op list or call is a program bug named by rank and op") {
  // Two ranks share one list; what the list says alone is reported in the first rank's name,
  // what differs between the ranks (streams, calls) in the name of the rank it is wrong for.
  const auto two_ranks = [](const std::function<void(ProgramBuilder&)>& breaks) {
    ProgramBuilder b(2);
    const auto g = b.group("dp", {0, 1});
    for (int r = 0; r < 2; ++r) {
      const auto side = b.stream(r, "dp");
      b.compute(r, 0, "gemm", us(1));
      b.collective(r, side, "allreduce", g, call(kMB, us(1)), {0});
    }
    b.program().ranks[1].share_ops_with(b.program().ranks[0]);
    REQUIRE(b.program().ranks[1].list == b.program().ranks[0].list);
    breaks(b);
    return b;
  };
  const auto fails = [](ProgramBuilder& b, const std::string& message) {
    CHECK_THROWS_WITH(run(b.program()), Catch::Contains(message));
  };
  auto b = two_ranks([](ProgramBuilder& p) { p.op(0, 0).duration = us(-1); });
  fails(b, "rank 0 op 0: negative duration");
  b = two_ranks([](ProgramBuilder& p) { p.program().ranks[0].list->waits[0] = 1; });
  fails(b, "rank 0 op 1: bad wait");
  b = two_ranks([](ProgramBuilder& p) { p.op(0, 1).name = 99; });
  fails(b, "rank 0 op 1: unknown name");
  b = two_ranks([](ProgramBuilder& p) { p.program().ranks[1].streams.pop_back(); });
  fails(b, "rank 1 op 1: unknown stream");
  b = two_ranks([](ProgramBuilder& p) { p.program().ranks[1].calls.clear(); });
  fails(b, "rank 1 op 1: unknown call");
  b = two_ranks([](ProgramBuilder& p) { p.program().ranks[1].calls[0].group = 5; });
  fails(b, "rank 1 op 1: unknown group");
  b = two_ranks([](ProgramBuilder& p) { p.program().ranks[1].calls[0].algbw = Bandwidth{}; });
  fails(b, "rank 1 op 1: data without bandwidth");
  b = two_ranks([](ProgramBuilder&) {});
  CHECK_NOTHROW(run(b.program()));
}

TEST_CASE("a collective naming an unknown link is a program bug") {
  ProgramBuilder b(1);
  const auto g = b.group("dp", {0});
  b.collective(0, 0, "allreduce", g, call(kMB, us(1), k100GBps, {{7, 1.0}}));
  REQUIRE_THROWS_WITH(run(b.program()), Catch::Contains("rank 0 op 0: unknown resource"));
}

namespace {

// Keeps every other rank, and once the last rank is written drops rank 0, which it kept.
class EveryOtherRank final : public stepsim::engine::IntervalObserver {
 public:
  void begin(const stepsim::StepWindow& step) override { step_end = step.end; }
  bool observe(Timeline& timeline, std::size_t r) override {
    sizes.push_back(timeline.ranks[r].intervals.size());
    if (r + 1 == timeline.ranks.size()) {
      timeline.ranks[0].dropped = timeline.ranks[0].intervals.size();
      timeline.ranks[0].intervals = {};
    }
    return r % 2 == 0;
  }
  Time step_end;
  std::vector<std::size_t> sizes;
};

}  // namespace

TEST_CASE("an observer sees every rank's intervals and the timeline keeps only those it keeps") {
  ProgramBuilder b(4, us(2));
  const auto link = b.link(Bandwidth::gbytes_per_s(80));
  const auto g = b.group("dp", {0, 1, 2, 3});
  for (int r = 0; r < 4; ++r) {
    const auto comm = b.stream(r, "dp");
    const auto last = b.compute(r, 0, "bwd", us(3 + 2 * r));
    b.collective(r, comm, "allreduce", g, call(Bytes{300'017}, us(1), k100GBps, {{link, 0.7}}), {last});
    b.compute(r, 0, "step", us(4), {last});
  }
  const Timeline all = run(b.program());
  EveryOtherRank observer;
  const Timeline some = run(b.program(), &observer);
  CHECK(observer.step_end == all.steps[0].end);
  CHECK(some.steps[0].end == all.steps[0].end);
  REQUIRE(observer.sizes.size() == 4);
  for (std::size_t r = 0; r < 4; ++r) {
    CHECK(observer.sizes[r] == all.ranks[r].intervals.size());
    const bool kept = r == 2;
    CHECK(some.ranks[r].intervals.size() == (kept ? all.ranks[r].intervals.size() : 0));
    CHECK(some.ranks[r].dropped == (kept ? 0 : all.ranks[r].intervals.size()));
  }
  CHECK(some.ranks[2].intervals == all.ranks[2].intervals);
}

TEST_CASE("the run's statistics count the program and every event, superseded ones apart") {
  // Two ranks share one op list: on each, a GEMM beside a short op and the AllReduce after it,
  // which slows the GEMM while it runs (comm_slowdown 0.5).
  const auto program = [](Time allreduce) {
    return two_ranks_one_list([allreduce](ProgramBuilder& b, std::int32_t g, stepsim::engine::StreamIndex comm) {
      b.compute(0, 0, "gemm", us(100));
      const auto lead = b.compute(0, comm, "lead", us(20));
      b.collective(0, comm, "allreduce", g, call(Bytes{0}, allreduce), {lead});
    });
  };
  stepsim::engine::RunStats stats;
  SECTION("an AllReduce that ends before the GEMM") {
    const stepsim::engine::Program p = program(us(30));
    const Timeline t = run(p, nullptr, &stats);
    CHECK(stats.ops == 6);
    CHECK(stats.op_lists == 1);
    CHECK(stats.collectives == 1);
    // Per rank: the short op's end and two ends of the GEMM: at 100 us as first scheduled
    // (superseded: the GEMM slowed down at 20 us, which queues nothing, and sped up at 50 us,
    // which queues its end at 20 + 30 + (100 - 20 - 30 / 1.5) = 110 us); and the AllReduce's
    // latency, once.
    CHECK(stats.events == 7);
    CHECK(stats.stale == 2);
    CHECK(stats.rate_solves == 0);  // no bytes, no flow
    CHECK(stats.setup_s >= 0);
    CHECK(stats.loop_s >= 0);
    CHECK(stats.write_s >= 0);
    CHECK(interval(t, 1, "gemm").end == us(110));
  }
  SECTION("an AllReduce that outlasts the GEMM") {
    const stepsim::engine::Program p = program(us(200));
    const Timeline t = run(p, nullptr, &stats);
    // The GEMM's end at 100 us finds it slowed down since 20 us and queues it again for
    // 20 + 80 · 1.5 = 140 us: nothing is superseded.
    CHECK(stats.events == 7);
    CHECK(stats.stale == 0);
    CHECK(interval(t, 0, "gemm").end == us(140));
    CHECK(interval(t, 1, "gemm").end == us(140));
  }
}

TEST_CASE("back-to-back compute ops end under one event, and a collective's slowdown splits them exactly") {
  // Two ranks share one op list: three GEMMs back to back on the compute stream, none waited
  // on, and beside them a short op and an AllReduce after it, which slows the GEMMs while it
  // runs (comm_slowdown 0.5). The GEMMs share one end event, the third's, once the short op
  // the third waits on is done.
  const auto program = [](Time allreduce) {
    return two_ranks_one_list([allreduce](ProgramBuilder& b, std::int32_t g, stepsim::engine::StreamIndex comm) {
      const auto lead = b.compute(0, comm, "lead", us(20));
      b.compute(0, 0, "gemm1", us(100));
      b.compute(0, 0, "gemm2", us(50));
      b.compute(0, 0, "gemm3", us(30), {lead});
      b.collective(0, comm, "allreduce", g, call(Bytes{0}, allreduce), {lead});
    });
  };
  stepsim::engine::RunStats stats;
  const auto ends = [](const Timeline& t, int r) {
    return std::vector<Time>{interval(t, r, "gemm1").end, interval(t, r, "gemm2").end, interval(t, r, "gemm3").end};
  };
  SECTION("without the AllReduce's slowdown") {
    stepsim::engine::Program p = program(us(30));
    p.comm_slowdown = 0;
    const Timeline t = run(p, nullptr, &stats);
    // Per rank: the short op's end, the first two GEMMs' (the third waited on it when they
    // started) and the third's; the AllReduce's latency, once.
    CHECK(stats.events == 7);
    CHECK(stats.stale == 0);
    CHECK(stats.chained == 2);  // the first GEMM's end, on each rank
    CHECK(ends(t, 0) == std::vector<Time>{us(100), us(150), us(180)});
    CHECK(interval(t, 1, "gemm2").start == us(100));
    CHECK(interval(t, 1, "gemm3").start == us(150));
  }
  SECTION("an AllReduce within the first GEMM") {
    const Timeline t = run(program(us(30)), nullptr, &stats);
    // Slowed from 20 to 50 us: the first GEMM has 100 - 20 - 30 / 1.5 = 60 us left at 50 us.
    // Its speed-up queues the three GEMMs' end at 50 + 60 + 50 + 30 = 190 us; the first two's
    // at 150 us is superseded.
    CHECK(stats.events == 7);
    CHECK(stats.stale == 2);
    CHECK(stats.chained == 4);  // the first two GEMMs' ends, on each rank
    for (int r : {0, 1}) CHECK(ends(t, r) == std::vector<Time>{us(110), us(160), us(190)});
  }
  SECTION("an AllReduce that ends within the second GEMM") {
    const Timeline t = run(program(us(130)), nullptr, &stats);
    // Slowed from 20 us: the first GEMM ends at 20 + 80 · 1.5 = 140 us; the second, started
    // then, has done 10 / 1.5 us of work at 150 us, when the AllReduce ends: it ends at
    // 150 + 50 - 6.666667 us, the third 30 us later. The first two's end at 150 us (queued
    // first, it runs before the AllReduce's) finds them slowed and queues the last two's for
    // 215 + 45 = 260 us, superseded at the speed-up.
    CHECK(stats.events == 9);
    CHECK(stats.stale == 2);
    const Time second = us(150) + us(50) - Time::from_ps(6'666'667);
    for (int r : {0, 1}) CHECK(ends(t, r) == std::vector<Time>{us(140), second, second + us(30)});
    CHECK(interval(t, 0, "gemm2").start == us(140));
  }
  SECTION("an AllReduce that outlasts the GEMMs") {
    const Timeline t = run(program(us(300)), nullptr, &stats);
    // The first two's end queued for 150 us finds them slowed since 20 us: the first ended at
    // 140 us, the second ends at 140 + 75 = 215 us, the third (its short op done) at
    // 215 + 45 = 260 us. Nothing is superseded.
    CHECK(stats.events == 7);
    CHECK(stats.stale == 0);
    for (int r : {0, 1}) CHECK(ends(t, r) == std::vector<Time>{us(140), us(215), us(260)});
  }
}

// The slowdown derived from what NCCL's kernels take (Program::derived_slowdown): a GEMM of
// 1,000 us beside an AllReduce of 16 channels on an H100's 132 SMs, which runs 132 us.
namespace {

stepsim::engine::Program beside_allreduce(bool memory_bound, std::vector<int> channels, double hbm_share = 0.25) {
  ProgramBuilder b(1);
  b.program().derived_slowdown = true;
  b.program().comm_slowdown = 0.5;  // not in force: the shares are
  b.op(0, b.compute(0, 0, "gemm", us(1000))).memory_bound = memory_bound;
  for (std::size_t k = 0; k < channels.size(); ++k) {
    const auto g = b.group("dp" + std::to_string(k), {0});
    const auto comm = b.stream(0, "dp" + std::to_string(k));
    stepsim::engine::CollectiveCall c = call(Bytes{0}, us(132));
    c.sm_share = channels[k] / 132.0;
    c.hbm_share = hbm_share;
    b.collective(0, comm, "allreduce" + std::to_string(k), g, c);
  }
  return b.program();
}

}  // namespace

TEST_CASE(
    "a compute-bound op slows by the SMs the NCCL channels beside it take, a memory-bound one by their HBM share") {
  // 132 us on 116 of 132 SMs do 116 us of the GEMM's work; the other 884 us follow.
  const Timeline gemm = run(beside_allreduce(false, {16}));
  CHECK(interval(gemm, 0, "gemm").end == us(1016));
  CHECK(gemm.ranks[0].compute_slowed == us(16));
  // 132 us at three quarters of the HBM bandwidth do 99 us; the other 901 us follow.
  const Timeline copy = run(beside_allreduce(true, {16}));
  CHECK(interval(copy, 0, "gemm").end == us(1033));
  CHECK(copy.ranks[0].compute_slowed == us(33));
  // Two AllReduces of 16 channels at once take 32 SMs: 132 us do 100 us of work (to the
  // picosecond the shares' rounding leaves).
  const Timeline two = run(beside_allreduce(false, {16, 16}));
  CHECK(std::abs((interval(two, 0, "gemm").end - us(1032)).ps()) <= 1);
}

TEST_CASE("more NCCL channels beside a GEMM never make it end sooner") {
  Time before = Time::zero();
  for (int channels = 0; channels <= 64; ++channels) {
    const Timeline t = run(beside_allreduce(false, {channels, channels}));
    const Time end = interval(t, 0, "gemm").end;
    CHECK(end >= before);
    CHECK(end >= us(1000));
    before = end;
  }
  // No channels, no slowdown; every SM taken still leaves the GEMM a tenth of the GPU.
  CHECK(interval(run(beside_allreduce(false, {0}, 0)), 0, "gemm").end == us(1000));
  const Time all = interval(run(beside_allreduce(false, {132, 132})), 0, "gemm").end;
  CHECK(static_cast<double>(all.ps()) == Approx(1e6 * (1000 + 132 * 0.9)).epsilon(1e-9));
}

// The log's events per second: a slow loop (a representative run under jitter, some ten
// thousand events a second) printed "0.0 M/s"; each rate shows its digits in its own unit.
TEST_CASE("the loop's event rate is printed in the unit that shows its digits") {
  stepsim::engine::RunStats stats;
  stats.events = 43528;
  stats.loop_s = 1.18;
  CHECK(stats.event_rate() == "36.9 k/s");  // 43,528 / 1.18 s = 36,888 a second
  stats.events = 5'000'000;
  stats.loop_s = 0.5;
  CHECK(stats.event_rate() == "10.0 M/s");
  stats.events = 950;
  stats.loop_s = 1;
  CHECK(stats.event_rate() == "950/s");
  stats.loop_s = 0;
  CHECK(stats.event_rate() == "-");
}
