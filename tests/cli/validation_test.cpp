// Published measurements reproduced end to end (docs/validation.md, Korthikanti et al. 2022,
// Table 4): one transformer layer of the 22B GPT on 8 A100 with TP 8, micro-batch 4.
#include <catch2/catch.hpp>

#include <cmath>

#include "cli/simulate_support.hpp"

namespace stepsim {
namespace {

struct LayerTimes {
  double forward_ms;
  double backward_ms;
};

bool is_forward(const Interval& iv) { return iv.phase == Phase::forward; }
bool is_backward(const Interval& iv) { return iv.phase == Phase::backward || iv.phase == Phase::recompute; }

// A middle layer's forward is the time from L10's first forward op to L11's; its backward
// (with its recompute) from L10's first backward-side op to L9's, layers running in reverse.
LayerTimes layer_times(const SimulationResult& r) {
  const Time f10 = test::first_start(r, "L10 ", is_forward);
  const Time f11 = test::first_start(r, "L11 ", is_forward);
  const Time b10 = test::first_start(r, "L10 ", is_backward);
  const Time b9 = test::first_start(r, "L9 ", is_backward);
  return {(f11 - f10).ms(), (b9 - b10).ms()};
}

struct Table4Row {
  const char* experiment;
  const char* sequence_parallel;
  const char* recompute;
  double forward_ms;
  double backward_ms;
};

constexpr Table4Row kTable4[] = {
    {"baseline, no recompute", "false", "none", 7.7, 11.9},
    {"sequence parallelism", "true", "none", 7.2, 11.8},
    {"full recompute", "false", "full", 7.7, 19.5},
    {"selective recompute", "false", "selective", 7.7, 13.2},
    {"selective + sequence parallelism", "true", "selective", 7.2, 13.1},
};

}  // namespace

// The README and docs/validation.md claim 2.1 % (the largest, the selective + SP backward, is
// 1.4 % fast):
// the test holds exactly that, so that it fails when the fit drifts.
TEST_CASE("one 22B layer's forward and backward match Korthikanti Table 4 within 2.1 percent") {
  for (const Table4Row& row : kTable4) {
    const auto result = test::run("korthikanti-22b", {test::set("parallel.sequence_parallel", row.sequence_parallel),
                                                      test::set("training.recompute", row.recompute)});
    const LayerTimes t = layer_times(result);
    INFO(row.experiment << ": forward " << t.forward_ms << " ms (measured " << row.forward_ms << "), backward "
                        << t.backward_ms << " ms (measured " << row.backward_ms << ")");
    CHECK(std::abs(t.forward_ms / row.forward_ms - 1.0) <= 0.021);
    CHECK(std::abs(t.backward_ms / row.backward_ms - 1.0) <= 0.021);
  }
}

TEST_CASE("the 22B layer's forward TP AllReduces are exposed and backward ones mostly hidden") {
  const auto result = test::run("korthikanti-22b");
  const Report& r = result.report;
  const double tp_exposed = r.breakdown_s.exposed_comm[static_cast<int>(CommKind::tp)];
  const double tp_busy = r.comm_s[static_cast<int>(CommKind::tp)];
  // Four AllReduces of b·s·h bf16 per layer; the two forward ones exposed, the two backward
  // ones beside the weight-gradient GEMMs: about half the TP time is hidden.
  CHECK(tp_busy > 0);
  CHECK(tp_exposed / tp_busy == Approx(0.5).margin(0.1));
}

}  // namespace stepsim
