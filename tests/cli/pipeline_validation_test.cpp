// Korthikanti et al. 2022, Table 5 (docs/validation.md): whole iterations of GPT 22B to 1T on
// Selene with TP 8 and pipeline parallelism, both columns, without per-case tuning.
#include <catch2/catch.hpp>

#include <cmath>

#include "cli/simulate_support.hpp"

namespace stepsim {
namespace {

struct Table5Row {
  const char* scenario;
  double full_recompute_s;  // no sequence parallelism, full recompute
  double selective_s;       // sequence parallelism + selective recompute
};

constexpr Table5Row kTable5[] = {
    {"korthikanti-22b", 1.42, 1.10},
    {"gpt3-175b-selene", 18.13, 13.75},
    {"gpt-530b-selene", 49.05, 37.83},
    {"gpt-1t-selene", 94.42, 71.49},
};

double step_time(const char* scenario, const char* sequence_parallel, const char* recompute) {
  return test::run(scenario, {test::set("parallel.sequence_parallel", sequence_parallel),
                              test::set("training.recompute", recompute)})
      .report.step_time_s;
}

}  // namespace

// The README and docs/validation.md claim 8 % for Table 5 and 16 % for BLOOM: the tests hold
// exactly those, so that they fail when the model drifts.
TEST_CASE("Table 5 iteration times of GPT 22B to 1T are predicted within 8 percent", "[slow]") {
  for (const Table5Row& row : kTable5) {
    const double full = step_time(row.scenario, "false", "full");
    const double selective = step_time(row.scenario, "true", "selective");
    INFO(row.scenario << ": full recompute " << full << " s (measured " << row.full_recompute_s << "), SP + selective "
                      << selective << " s (measured " << row.selective_s << ")");
    CHECK(std::abs(full / row.full_recompute_s - 1.0) <= 0.08);
    CHECK(std::abs(selective / row.selective_s - 1.0) <= 0.08);
  }
}

TEST_CASE("the 175B pipeline leaves a bubble near (p - 1)/(m v) of the step") {
  const auto result = test::run("gpt3-175b-selene");
  const Report& r = result.report;
  // p 8, m 64, v 3: 7/192 of the ideal time; communication and the outer stages add a little.
  const double bubble = r.breakdown_s.bubble / r.step_time_s;
  CHECK(bubble > 0.5 * 7.0 / 192.0);
  CHECK(bubble < 3.0 * 7.0 / 192.0);
}

}  // namespace stepsim

namespace stepsim {

TEST_CASE("BLOOM-176B's iteration is predicted within 16 percent of the measured 104.7 s") {
  // Le Scao et al. 2022 (BLOOM): TP 4, PP 12 (5, 6 × 10, 5 layers), ZeRO-1 over DP 8, 128 micro-batches,
  // 4 × 100 Gb/s Omni-Path per node; predicted, not fitted (docs/validation.md).
  const Report r = test::run("bloom-176b").report;
  CHECK(r.gpus == 384);
  CHECK(std::abs(r.step_time_s / 104.7 - 1.0) <= 0.16);
}

}  // namespace stepsim
