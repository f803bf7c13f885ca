// A large all-ranks run takes a second thread: it prepares the ops' states (durations drawn,
// collectives noted) while the loop starts, the loop preparing a row itself when it gets there
// first, and it writes every other rank's intervals afterwards, the two threads showing the
// ranks to an observer in turn. On real programs, that gives exactly the timeline one thread
// gives, whichever thread wins each row, and the observer sees the ranks in order.
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

se::Program program_of(const stepsim::Scenario& s) {
  const stepsim::hardware::GpuModel gpu(s.cluster.gpu, s.training.precision);
  const sp::ModelCosts costs(s, gpu);
  return sp::build_program(s, stepsim::workload::build_work(s), costs);
}

// Keeps the even ranks, and notes the order it saw them in.
class EvenRanks final : public se::IntervalObserver {
 public:
  void begin(const stepsim::StepWindow&) override {}
  bool observe(stepsim::Timeline&, std::size_t r) override {
    seen.push_back(r);
    return r % 2 == 0;
  }
  std::vector<std::size_t> seen;
};

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

TEST_CASE("preparing the op states alongside the loop gives the timeline that preparing them in setup gives",
          "[slow]") {
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
      const se::Program program = program_of(s);
      se::Engine in_setup(program);
      const stepsim::Timeline expected = in_setup.run();
      CHECK(in_setup.stats().prepare_s == 0);  // small: prepared during setup
      se::Engine alongside(program, se::SecondThread::always);
      check_same(alongside.run(), expected);
      CHECK(alongside.stats().prepare_s > 0);

      EvenRanks even;
      const stepsim::Timeline observed = se::Engine(program, se::SecondThread::always).run(&even);
      REQUIRE(even.seen.size() == expected.ranks.size());
      std::size_t out_of_order = 0;
      std::size_t wrong = 0;
      for (std::size_t r = 0; r < expected.ranks.size(); ++r) {
        if (even.seen[r] != r) ++out_of_order;
        const auto& got = observed.ranks[r];
        const auto& want = expected.ranks[r];
        const bool right = r % 2 == 0 ? got.intervals == want.intervals && got.dropped == 0
                                      : got.intervals.empty() && got.dropped == want.intervals.size();
        if (!right) ++wrong;
      }
      CHECK(out_of_order == 0);
      CHECK(wrong == 0);
    }
  }
}
