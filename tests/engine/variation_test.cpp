// Ranks that differ in the engine: compute speeds, counter-based kernel jitter, and what
// the engine asks and tells the arrival model of representative mode under jitter.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/engine.hpp"
#include "engine/variation.hpp"
#include "program_builder.hpp"

namespace {

using stepsim::Time;
using stepsim::engine::ComputeVariation;
using stepsim::engine::JitterDraw;
using stepsim::engine::run;
using stepsim::engine::testing::call;
using stepsim::engine::testing::interval;
using stepsim::engine::testing::ProgramBuilder;
using stepsim::engine::testing::us;

ComputeVariation jitter(JitterDraw draw, double sigma, std::uint64_t seed = 1) {
  ComputeVariation v;
  v.jitter = draw;
  v.sigma = sigma;
  v.seed = seed;
  return v;
}

struct Moments {
  double mean = 0;
  double sd = 0;
  double lowest = 1;
};

Moments moments(const ComputeVariation& v, int rank_count, int ops) {
  double sum = 0, sum2 = 0;
  Moments m;
  for (int r = 0; r < rank_count; ++r)
    for (int o = 0; o < ops; ++o) {
      const double x = v.jitter_factor(r, static_cast<std::uint32_t>(o));
      sum += x;
      sum2 += x * x;
      m.lowest = std::min(m.lowest, x);
    }
  const double n = static_cast<double>(rank_count) * ops;
  m.mean = sum / n;
  m.sd = std::sqrt(sum2 / n - m.mean * m.mean);
  return m;
}

}  // namespace

TEST_CASE("a kernel's jitter is a pure function of seed, rank and op") {
  const ComputeVariation a = jitter(JitterDraw::normal, 0.05, 7);
  const ComputeVariation b = jitter(JitterDraw::normal, 0.05, 7);
  const ComputeVariation c = jitter(JitterDraw::normal, 0.05, 8);
  CHECK(a.jitter_factor(3, 11) == b.jitter_factor(3, 11));
  CHECK(a.jitter_factor(3, 11) != c.jitter_factor(3, 11));
  CHECK(a.jitter_factor(3, 11) != a.jitter_factor(4, 11));
  CHECK(a.jitter_factor(3, 11) != a.jitter_factor(3, 12));
}

TEST_CASE("every jitter distribution has mean 1 and the configured relative standard deviation") {
  for (JitterDraw draw : {JitterDraw::normal, JitterDraw::lognormal, JitterDraw::uniform}) {
    INFO(static_cast<int>(draw));
    const Moments m = moments(jitter(draw, 0.1), 64, 4000);
    CHECK(m.mean == Approx(1.0).margin(0.002));
    CHECK(m.sd == Approx(0.1).epsilon(0.02));
    CHECK(m.lowest > 0);
  }
  // A uniform draw of standard deviation 0.1 spans 1 ± 0.1·√3.
  CHECK(moments(jitter(JitterDraw::uniform, 0.1), 8, 4000).lowest >= 1 - 0.1 * std::sqrt(3.0));
}

TEST_CASE("a rank at 0.8x speed runs every compute op 1.25 times as long") {
  ProgramBuilder b(2);
  b.compute(0, 0, "gemm", us(100));
  b.compute(1, 0, "gemm", us(100));
  b.program().variation.speed = {1.0, 0.8};
  const auto t = run(b.program());
  CHECK(interval(t, 0, "gemm").end == us(100));
  CHECK(interval(t, 1, "gemm").end == us(125));
}

TEST_CASE("a collective waits for its slower member, and the wait is recorded") {
  ProgramBuilder b(2);
  const auto g = b.group("dp", {0, 1});
  for (int r = 0; r < 2; ++r) {
    const auto dp = b.stream(r, "dp");
    const auto w = b.compute(r, 0, "backward", us(80));
    b.collective(r, dp, "allreduce", g, call(stepsim::Bytes{0}, us(10)), {w});
  }
  b.program().variation.speed = {1.0, 0.8};
  const auto t = run(b.program());
  CHECK(interval(t, 0, "allreduce").start == us(100));
  CHECK(interval(t, 0, "allreduce").waited == us(20));
  CHECK(interval(t, 1, "allreduce").waited == Time::zero());
}

namespace {

using stepsim::engine::OpIndex;

// A stand-in for the arrival model of representative mode under jitter: fixed answers, and a
// record of what the engine asked and told it.
class FixedArrivals final : public stepsim::engine::ArrivalModel {
 public:
  struct Seen {
    std::vector<std::pair<OpIndex, Time>> lags;            // per arrival: op, lag
    std::vector<std::tuple<OpIndex, OpIndex, Time>> held;  // op, collective, slack
  };
  // Its answers for collective op `only` (any collective op when none), zero for the others.
  FixedArrivals(Time mean, Time last, Time finish, std::optional<OpIndex> only, std::shared_ptr<Seen> seen)
      : mean_(mean), last_(last), finish_(finish), only_(only), seen_(std::move(seen)) {}

  std::unique_ptr<Run> start() const override { return std::make_unique<FixedRun>(*this); }

 private:
  class FixedRun final : public Run {
   public:
    explicit FixedRun(const FixedArrivals& m) : m_(m) {}
    Arrival arrival(std::size_t, OpIndex o, Time lag) override {
      m_.seen_->lags.emplace_back(o, lag);
      if (m_.only_ && *m_.only_ != o) return {};
      return {m_.mean_, m_.last_};
    }
    void held_back(std::size_t, OpIndex o, OpIndex collective, Time slack) override {
      m_.seen_->held.emplace_back(o, collective, slack);
    }
    Time finish(std::size_t) override { return m_.finish_; }

   private:
    const FixedArrivals& m_;
  };

  Time mean_, last_, finish_;
  std::optional<OpIndex> only_;
  std::shared_ptr<Seen> seen_;
};

std::shared_ptr<FixedArrivals::Seen> use_arrivals(ProgramBuilder& b, Time mean, Time last, Time finish = Time::zero(),
                                                  std::optional<OpIndex> only = std::nullopt) {
  auto seen = std::make_shared<FixedArrivals::Seen>();
  b.program().arrivals = std::make_shared<const FixedArrivals>(mean, last, finish, only, seen);
  return seen;
}

}  // namespace

TEST_CASE("a representative collective starts when its last real member arrives after its work was ready") {
  ProgramBuilder b(1);
  const auto g = b.group("dp", {0});
  b.program().groups[0].size = 64;  // one simulated rank stands for 64
  const auto dp = b.stream(0, "dp");
  const auto w = b.compute(0, 0, "backward", us(100));
  b.collective(0, dp, "allreduce", g, call(stepsim::Bytes{0}, us(10)), {w});
  const auto seen = use_arrivals(b, us(3), us(7));
  const auto t = run(b.program());
  // The mean member arrives 3 us after the work was ready, the last 7 us after it: the wait a
  // real rank sees is the 4 us between the two.
  CHECK(interval(t, 0, "allreduce").start == us(107));
  CHECK(interval(t, 0, "allreduce").waited == us(4));
  CHECK(interval(t, 0, "allreduce").end == us(117));
  // The stream was free from the start, 100 us before the work was ready.
  REQUIRE(seen->lags.size() == 1);
  CHECK(seen->lags[0].second == Time::zero() - us(100));
}

TEST_CASE("the arrival model hears how long a busy stream held a representative collective") {
  ProgramBuilder b(1);
  const auto g = b.group("dp", {0});
  b.program().groups[0].size = 64;
  const auto dp = b.stream(0, "dp");
  const auto w = b.compute(0, 0, "backward", us(10));
  b.collective(0, dp, "first", g, call(stepsim::Bytes{0}, us(50)));
  const auto c = b.collective(0, dp, "second", g, call(stepsim::Bytes{0}, us(10)), {w});
  const auto seen = use_arrivals(b, us(40), us(45), Time::zero(), c);
  const auto t = run(b.program());
  // Ready at 10 us, the stream free at 50 us: 40 us later. The last member at 55 us.
  REQUIRE(seen->lags.size() == 2);
  CHECK(seen->lags[1] == std::pair{c, us(40)});
  CHECK(interval(t, 0, "second").start == us(55));
  CHECK(interval(t, 0, "second").waited == us(5));
}

TEST_CASE("a compute op tells the arrival model whether a collective held it back and by how much") {
  ProgramBuilder b(1);
  const auto g = b.group("tp", {0});
  b.program().groups[0].size = 8;
  const auto tp = b.stream(0, "tp");
  const auto dgrad = b.compute(0, 0, "dgrad", us(100));
  const auto held = b.collective(0, tp, "allreduce held", g, call(stepsim::Bytes{0}, us(30)), {dgrad});
  b.compute(0, 0, "layer norm", us(5), {held});  // waits 30 us for the AllReduce
  const auto dgrad2 = b.compute(0, 0, "dgrad 2", us(100));
  const auto hidden = b.collective(0, tp, "allreduce hidden", g, call(stepsim::Bytes{0}, us(30)), {dgrad2});
  b.compute(0, 0, "wgrad", us(50));
  const auto after = b.compute(0, 0, "layer norm 2", us(5), {hidden});  // the AllReduce ended 20 us before
  const auto seen = use_arrivals(b, Time::zero(), Time::zero());
  run(b.program());
  REQUIRE(seen->held.size() == 2);
  CHECK(std::get<1>(seen->held[0]) == held);
  CHECK(std::get<2>(seen->held[0]) == us(30));
  CHECK(seen->held[1] == std::tuple{after, hidden, Time::zero() - us(20)});
}

TEST_CASE("a representative step ends when the slowest real rank the model expects is done") {
  ProgramBuilder b(1);
  b.compute(0, 0, "optimizer", us(100));
  use_arrivals(b, Time::zero(), Time::zero(), us(9));
  const auto t = run(b.program());
  REQUIRE(t.steps.size() == 1);
  CHECK(t.steps[0].end == us(109));
}
