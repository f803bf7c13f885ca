// compare's like-for-like definitions: a collective's wait for its slowest member counts as
// communication on both sides, as a real NCCL kernel runs through it, and shows apart.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "analysis/like_for_like.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"

using namespace stepsim;

namespace {

namespace fs = std::filesystem;

// Two pipeline stages: each stage's SendRecv waits at its rendezvous for the other stage.
SimulationResult pipeline() {
  return simulate(io::load_scenario("ddp-1.3b-64xa100", {"parallel.pp=2", "parallel.dp=4", "model.layers=8"}));
}

analysis::Analysis read_back(const SimulationResult& sim, std::size_t index) {
  const fs::path path = fs::temp_directory_path() / ("stepsim-like-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(path);
    report::write_trace(sim.timeline, out);
  }
  analysis::Analysis a = analysis::analyze_trace(path.string(), sim.timeline.ranks[index].rank, std::nullopt);
  fs::remove(path);
  return a;
}

std::size_t critical(const SimulationResult& sim) {
  return static_cast<std::size_t>(report::critical_rank(sim.timeline, report::report_window(sim.timeline)));
}

}  // namespace

TEST_CASE("the simulator records how long each collective waits at its rendezvous") {
  const SimulationResult sim = pipeline();
  Time waited;
  for (const RankTimeline& r : sim.timeline.ranks)
    for (const Interval& iv : r.intervals) {
      if (iv.activity != Activity::comm) CHECK(iv.waited == Time::zero());
      CHECK(iv.waited >= Time::zero());
      waited += iv.waited;
    }
  CHECK(waited > Time::zero());
}

TEST_CASE("a simulated trace compared with its own simulation differs in nothing, waits counted as comm") {
  const SimulationResult sim = pipeline();
  const analysis::Analysis a = read_back(sim, critical(sim));
  const analysis::LikeForLike lf = analysis::like_for_like(a, sim);
  REQUIRE(lf.measured_wait_s.has_value());
  CHECK(lf.predicted_wait_s > 0);
  CHECK(*lf.measured_wait_s == Approx(lf.predicted_wait_s).epsilon(1e-6));
  CHECK(lf.measured.step_time_s == Approx(lf.predicted.step_time_s).epsilon(1e-6));
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    CHECK(lf.measured.comm_s[k] == Approx(lf.predicted.comm_s[k]).epsilon(1e-6).margin(1e-9));
    CHECK(lf.measured.breakdown_s.exposed_comm[k] ==
          Approx(lf.predicted.breakdown_s.exposed_comm[k]).epsilon(1e-6).margin(1e-9));
  }
  CHECK(lf.measured.overlap.hidden_fraction == Approx(lf.predicted.overlap.hidden_fraction).epsilon(1e-6));
  // The wait now counts as pipeline communication: more than the simulation's own report says,
  // at most by the wait (waits on two streams may overlap each other).
  const auto pp = static_cast<std::size_t>(CommKind::pp);
  CHECK(lf.predicted.comm_s[pp] > sim.report.comm_s[pp] + 0.5 * lf.predicted_wait_s);
  CHECK(lf.predicted.comm_s[pp] <= sim.report.comm_s[pp] + lf.predicted_wait_s + 1e-9);
  CHECK(lf.predicted.breakdown_s.bubble <= sim.report.breakdown_s.bubble);
}

TEST_CASE("a real trace's wait is inside its NCCL kernels and left unknown") {
  const SimulationResult sim = pipeline();
  const analysis::Analysis a = analysis::analyze_trace(
      std::string(STEPSIM_TEST_DATA) + "/traces/resnet50-ddp-a100-rank0of2.json.gz", std::nullopt, std::nullopt);
  const analysis::LikeForLike lf = analysis::like_for_like(a, sim);
  CHECK_FALSE(lf.measured_wait_s.has_value());
  CHECK(lf.measured.step_time_s == a.mean.step_time_s);
}
