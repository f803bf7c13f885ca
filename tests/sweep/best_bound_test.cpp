// The lower bound that orders and prunes the best-configuration search: below every layout's
// simulated step whatever the pipeline schedule (a virtual-stage count fixed with --set, the
// zero-bubble schedules, DualPipe), so that pruning never leaves out the fastest layout.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"
#include "sweep/best.hpp"
#include "sweep/search_helpers.hpp"

using stepsim::sweep::BestResult;
using stepsim::sweep::enumerate_layouts;
using stepsim::sweep::search_best;
using stepsim::sweep::SearchSpace;
using stepsim::sweep::step_lower_bound;
using stepsim::sweep::SweepSpec;
using stepsim::testing::spec_of;

namespace {

// The step time of the fastest configuration the search ranks, keeping the `keep` fastest.
double fastest(const SweepSpec& spec, std::size_t keep) {
  SearchSpace space;
  space.keep = keep;
  const BestResult result = search_best(spec, 2, false, space);
  REQUIRE_FALSE(result.ranked.empty());
  return result.ranked.front().second.step_time_s;
}

}  // namespace

// Every layout enumerated, simulated as it is with no recompute (the least work the search
// runs it with), takes at least its bound.
TEST_CASE("the search's lower bound is below every layout's simulated step, whatever the schedule", "[slow]") {
  const std::vector<SweepSpec> specs = {
      // The virtual-stage count --set fixes is left off the layouts: the bound takes it from
      // the scenario (v = 4, not 1).
      spec_of(
          {"model=llama3-8b", "parallel.schedule=interleaved", "parallel.virtual_stages=4", "training.global_batch=16"},
          64),
      // TP1 PP4 CP1 DP16, micro-batch 1: simulated 0.836 s where a 1F1B fill and drain gave
      // a bound of 0.752 / 4 · (2 + 3) = 0.940 s.
      spec_of({"model=llama3-8b", "parallel.schedule=zb-h1", "training.global_batch=32", "parallel.tp=1",
               "parallel.pp=4", "parallel.cp=1"},
              64),
      spec_of({"model=llama3-8b", "parallel.schedule=zb-h2", "training.global_batch=32", "parallel.tp=1",
               "parallel.pp=4", "parallel.cp=1"},
              64),
      spec_of({"model=gpt-1.3b", "parallel.schedule=dualpipe", "training.global_batch=16"}, 8),
  };
  for (const SweepSpec& spec : specs) {
    BestResult result;
    const auto layouts = enumerate_layouts(spec, {}, result);
    REQUIRE_FALSE(layouts.empty());
    int simulated = 0;
    for (const auto& layout : layouts) {
      auto sets = spec.sets;
      sets.insert(sets.end(), layout.sets.begin(), layout.sets.end());
      sets.emplace_back("training.recompute=none");
      sets.emplace_back("training.recompute_modules=[]");
      double step = 0;
      try {
        step =
            stepsim::simulate(stepsim::io::load_scenario(spec.scenario, sets), stepsim::SimulateOptions::report_only())
                .report.step_time_s;
      } catch (const stepsim::InputError&) {
        continue;  // refused: the search ranks it nowhere either
      }
      const double bound = step_lower_bound(spec, layout);
      INFO(spec.sets.at(1) << ": " << fmt::format("{}", fmt::join(layout.sets, " ")) << ": bound " << bound
                           << " s, step " << step << " s");
      CHECK(bound > 0);
      CHECK(bound <= step);
      ++simulated;
    }
    CHECK(simulated > 0);
  }
}

// The fastest the search finds keeping one equals the fastest it finds pruning nothing (keeping
// more than there are layouts).
TEST_CASE("the search keeping the fastest alone finds the fastest of every layout, whatever the schedule", "[slow]") {
  // Interleaved, four virtual stages fixed, 64 GPUs, global batch 16: TP1 PP2 CP4 DP8 (0.271 s)
  // had a bound of 0.1933 / 2 · (2 + 1) = 0.290 s, above TP2 PP2 CP4 DP4's 0.274 s.
  const SweepSpec interleaved = spec_of(
      {"model=llama3-8b", "parallel.schedule=interleaved", "parallel.virtual_stages=4", "training.global_batch=16"},
      64);
  CHECK(fastest(interleaved, 1) == fastest(interleaved, std::numeric_limits<std::size_t>::max()));
  // DualPipe on 8 GPUs, global batch 16: the fastest (0.091 s) was left out for 0.094 s.
  const SweepSpec dualpipe = spec_of({"model=gpt-1.3b", "parallel.schedule=dualpipe", "training.global_batch=16"}, 8);
  CHECK(fastest(dualpipe, 1) == fastest(dualpipe, std::numeric_limits<std::size_t>::max()));
}
