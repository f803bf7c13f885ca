// Ranks that differ in the engine: compute speeds, counter-based kernel jitter, and the
// expected wait for a representative collective's slowest member.
#include <catch2/catch.hpp>

#include <cmath>

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

TEST_CASE("a representative collective starts the expected skew after its work was ready") {
  ProgramBuilder b(1);
  const auto g = b.group("dp", {0});
  b.program().groups[0].size = 64;  // one simulated rank stands for 64
  const auto dp = b.stream(0, "dp");
  const auto w = b.compute(0, 0, "backward", us(100));
  const auto c = b.collective(0, dp, "allreduce", g, call(stepsim::Bytes{0}, us(10)), {w});
  b.program().ranks[0].skews = {{c, us(7)}};
  const auto t = run(b.program());
  CHECK(interval(t, 0, "allreduce").start == us(107));
  CHECK(interval(t, 0, "allreduce").waited == us(7));
  CHECK(interval(t, 0, "allreduce").end == us(117));
}

TEST_CASE("a skew shorter than the time a busy stream held the collective adds nothing") {
  ProgramBuilder b(1);
  const auto g = b.group("dp", {0});
  b.program().groups[0].size = 64;
  const auto dp = b.stream(0, "dp");
  const auto w = b.compute(0, 0, "backward", us(10));
  b.collective(0, dp, "first", g, call(stepsim::Bytes{0}, us(50)));
  const auto c = b.collective(0, dp, "second", g, call(stepsim::Bytes{0}, us(10)), {w});
  b.program().ranks[0].skews = {{c, us(20)}};
  const auto t = run(b.program());
  // Ready at 10 us, expected last member at 30 us; the stream frees at 50 us.
  CHECK(interval(t, 0, "second").start == us(50));
  CHECK(interval(t, 0, "second").waited == Time::zero());
}
