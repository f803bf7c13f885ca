// compare's like-for-like definitions: a collective's wait for its slowest member counts as
// communication on both sides, as a real NCCL kernel runs through it, and shows apart; a
// pipeline transfer's wait for the neighbouring stage is the bubble, as in the report.
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "analysis/like_for_like.hpp"
#include "cli/run_stepsim.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"

using namespace stepsim;

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// Two pipeline stages: each stage's SendRecv waits at its rendezvous for the other stage, and
// under 5 % kernel jitter each DP AllReduce the expected time for its slowest member.
const std::vector<std::string> kPipeline{"parallel.pp=2", "parallel.dp=4", "model.layers=8",
                                         "simulation.variation.jitter.distribution=normal",
                                         "simulation.variation.jitter.sigma=0.05"};

SimulationResult pipeline() { return simulate(io::load_scenario("ddp-1.3b-64xa100", kPipeline)); }

// What a rank's intervals waited at their rendezvous, of pipeline transfers or of the others.
Time waited(const RankTimeline& rank, bool pp) {
  Time sum;
  for (const Interval& iv : rank.intervals)
    if (iv.activity == Activity::comm && (iv.kind == CommKind::pp) == pp) sum += iv.waited;
  return sum;
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
  // The simulation's own report counts a collective's wait as its communication and a
  // pipeline transfer's wait as the bubble: the prediction is the report's split, and the wait
  // shown apart is the AllReduces' alone, though the transfers waited far longer.
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    CHECK(lf.predicted.comm_s[k] == Approx(sim.report.comm_s[k]).epsilon(1e-9).margin(1e-12));
    CHECK(lf.predicted.breakdown_s.exposed_comm[k] ==
          Approx(sim.report.breakdown_s.exposed_comm[k]).epsilon(1e-9).margin(1e-12));
  }
  CHECK(lf.predicted.breakdown_s.bubble == Approx(sim.report.breakdown_s.bubble).epsilon(1e-9));
  const RankTimeline& rank = sim.timeline.ranks[critical(sim)];
  CHECK(lf.predicted_wait_s == Approx(waited(rank, false).seconds()).epsilon(1e-9));
  CHECK(waited(rank, true) > waited(rank, false) * 10);
}

TEST_CASE("compare of a simulated pipeline trace with its own scenario gives the simulate report's numbers") {
  const SimulationResult sim = pipeline();
  const testing::Scratch scratch("compare-pipeline");
  {
    // stepsim's own format: its Kineto-format trace does not carry the waits.
    std::ofstream out(scratch.file("trace.json"));
    report::write_trace(sim.timeline, out);
  }
  // Both sides on the rank the report is measured on.
  std::string args = " --rank " + std::to_string(sim.timeline.ranks[critical(sim)].rank);
  for (const std::string& s : kPipeline) args += " --set " + s;
  const testing::Run run = scratch.run("compare trace.json ddp-1.3b-64xa100" + args + " --json -");
  INFO(run.err);
  REQUIRE(run.status == 0);
  const json::value v = json::parse(run.out);
  const std::size_t pp = static_cast<std::size_t>(CommKind::pp);
  REQUIRE(sim.report.ranks.rendezvous_wait_s[pp] > 0);
  for (const char* side : {"measured", "predicted"}) {
    INFO(side);
    const json::value& o = v.at(side);
    CHECK(o.at("step_time_s").to_number<double>() == Approx(sim.report.step_time_s).epsilon(1e-6));
    for (std::size_t k = 0; k < kCommKinds; ++k) {
      const char* kind = k + 1 < kCommKinds ? to_string(static_cast<CommKind>(k)) : "other";
      INFO(kind);
      CHECK(o.at("exposed_comm_s").at(kind).to_number<double>() ==
            Approx(sim.report.breakdown_s.exposed_comm[k]).epsilon(1e-6).margin(1e-9));
      CHECK(o.at("comm_s").at(kind).to_number<double>() == Approx(sim.report.comm_s[k]).epsilon(1e-6).margin(1e-9));
    }
    // Of the waits only the AllReduces': the report's rank's, summed by hand.
    CHECK(o.at("wait_s").to_number<double>() ==
          Approx(waited(sim.timeline.ranks[critical(sim)], false).seconds()).epsilon(1e-6));
  }
}

TEST_CASE("a real trace's wait is inside its NCCL kernels and left unknown") {
  const SimulationResult sim = pipeline();
  const analysis::Analysis a = analysis::analyze_trace(
      std::string(STEPSIM_TEST_DATA) + "/traces/resnet50-ddp-a100-rank0of2.json.gz", std::nullopt, std::nullopt);
  const analysis::LikeForLike lf = analysis::like_for_like(a, sim);
  CHECK_FALSE(lf.measured_wait_s.has_value());
  CHECK(lf.measured.step_time_s == a.mean.step_time_s);
}
