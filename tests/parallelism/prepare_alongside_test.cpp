// A large all-ranks run prepares its ops' states (durations drawn, collectives noted) on a
// thread of its own while the loop starts, the loop preparing a row itself when it gets there
// first. On real programs, that gives exactly the timeline that preparing them during setup
// gives, whichever thread wins each row.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "hardware/gpu_model.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/costs.hpp"
#include "parallelism/program_builder.hpp"
#include "workload/work.hpp"

namespace se = stepsim::engine;
namespace sp = stepsim::parallelism;

namespace {

se::Program build(const stepsim::Scenario& s) {
  const stepsim::hardware::GpuModel gpu(s.cluster.gpu, s.training.precision);
  const sp::ModelCosts costs(s, gpu);
  return sp::build_program(s, stepsim::workload::build_work(s), costs);
}

void check_same(const stepsim::Timeline& alongside, const stepsim::Timeline& in_setup) {
  REQUIRE(alongside.steps.size() == 1);
  REQUIRE(in_setup.steps.size() == 1);
  CHECK(alongside.steps[0].end == in_setup.steps[0].end);
  REQUIRE(alongside.ranks.size() == in_setup.ranks.size());
  std::size_t mismatched = 0;
  for (std::size_t r = 0; r < in_setup.ranks.size(); ++r) {
    const auto& a = alongside.ranks[r];
    const auto& b = in_setup.ranks[r];
    if (a.intervals != b.intervals || a.memory.size() != b.memory.size()) ++mismatched;
  }
  CHECK(mismatched == 0);
}

}  // namespace

TEST_CASE("preparing the op states alongside the loop gives the timeline that preparing them in setup gives") {
  const std::vector<std::string> all{"simulation.ranks=\"all\"", "simulation.variation.jitter.distribution=\"normal\"",
                                     "simulation.variation.jitter.sigma=0.05", "simulation.variation.jitter.seed=3"};
  const std::vector<std::vector<std::string>> jobs{
      // 3D, interleaved: 64 ranks, 16 op lists, thousands of collectives.
      {"gpt3-175b-selene", "parallel.dp=2", "training.global_batch=16",
       R"(simulation.variation.gpu_speed=[{"rank": 9, "factor": 0.8}])"},
      // FSDP: ops that block the host (the launch times of a host run that ends early).
      {"fsdp-llama3-70b"},
      // Experts and context parallelism.
      {"mixtral-8x7b-ep8-64xh100"},
      {"llama3-70b-cp2-64xh100"},
  };
  for (const auto& job : jobs) {
    DYNAMIC_SECTION(job.front()) {
      std::vector<std::string> sets = all;
      sets.insert(sets.end(), job.begin() + 1, job.end());
      const stepsim::Scenario s = stepsim::io::load_scenario(job.front(), sets);
      const se::Program program = build(s);
      se::Engine in_setup(program);
      const stepsim::Timeline expected = in_setup.run();
      CHECK(in_setup.stats().prepare_s == 0);  // small: prepared during setup
      se::Engine alongside(program, se::Preparation::alongside);
      check_same(alongside.run(), expected);
      CHECK(alongside.stats().prepare_s > 0);
    }
  }
}
