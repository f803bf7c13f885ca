// Zero-bubble schedules: each stage's pass order against the reference generators, the
// bubble against Qi et al.'s formulas when F, B and W take the same time, activation memory
// against 1F1B's, and gradient buckets launched only after the weight-gradient passes.
#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include <catch2/catch.hpp>

#include "engine/engine.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "parallelism/program_builder.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::Schedule;
using stepsim::Time;
using stepsim::workload::Pass;

namespace {

// "F0 B0 W0 ..." for a stage's order.
std::string letters(Schedule schedule, int p, int m, int stage) {
  std::string out;
  for (const sp::PipelineOp& op : sp::stage_order(schedule, {p, m, 1}, stage)) {
    if (!out.empty()) out += ' ';
    out += op.forward ? 'F' : op.weight ? 'W' : 'B';
    out += std::to_string(op.micro_batch);
  }
  return out;
}

// Every micro-batch passes F, B and W once each, in that order.
bool complete(Schedule schedule, int p, int m, int stage) {
  std::set<std::tuple<int, int>> seen;  // (micro-batch, pass: 0 F, 1 B, 2 W)
  for (const sp::PipelineOp& op : sp::stage_order(schedule, {p, m, 1}, stage)) {
    const int pass = op.forward ? 0 : op.weight ? 2 : 1;
    if (pass > 0 && seen.count({op.micro_batch, pass - 1}) == 0) return false;
    if (!seen.insert({op.micro_batch, pass}).second) return false;
  }
  return seen.size() == static_cast<std::size_t>(3 * m);
}

// The largest stage bubble, in µs, as Qi et al. count it: a stage's span from its first to its
// last compute (its first forward to its last W) minus its compute time. A single step also
// waits (p − 1)·T_F for the first activation to reach the last stage; under ZB-H2 that fill
// is not idle time of any stage and overlaps the previous step's tail in a training run.
double bubble_us(const stepsim::Scenario& s) {
  const auto work = spt::small_work(s);
  const spt::PassCosts costs(work.layer, 1.0, 1.0, 1.0);  // T_F = T_B = T_W
  return spt::largest_bubble_us(stepsim::engine::run(sp::build_program(s, work, costs)));
}

}  // namespace

TEST_CASE("ZB-H1 orders each stage's passes as the reference generator does") {
  // The handcrafted ZB-H1 of Qi et al.'s repository (p 4, m 6): 1F1B's warm-up, i deferred W
  // passes on stage i, run after its last B.
  CHECK(letters(Schedule::zb_h1, 4, 6, 0) == "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5");
  CHECK(letters(Schedule::zb_h1, 4, 6, 1) == "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 B4 W3 B5 W4 W5");
  CHECK(letters(Schedule::zb_h1, 4, 6, 2) == "F0 F1 B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 B5 W3 W4 W5");
  CHECK(letters(Schedule::zb_h1, 4, 6, 3) == "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5");
  for (int stage = 0; stage < 4; ++stage) CHECK(complete(Schedule::zb_h1, 4, 6, stage));
  // Fewer micro-batches than stages: the warm-up and the deferral shrink with m.
  CHECK(letters(Schedule::zb_h1, 4, 2, 3) == "F0 B0 F1 B1 W0 W1");
  CHECK(letters(Schedule::zb_h1, 4, 2, 0) == "F0 F1 B0 W0 B1 W1");
}

TEST_CASE("ZB-H2 warms up with 2(p - i) - 1 forwards and defers W by 2i micro-batches") {
  // Shardy's ZeroBubbleH2 order without transfer latency (p 3, m 6).
  CHECK(letters(Schedule::zb_h2, 3, 6, 0) == "F0 F1 F2 F3 F4 B0 W0 F5 B1 W1 B2 W2 B3 W3 B4 W4 B5 W5");
  CHECK(letters(Schedule::zb_h2, 3, 6, 1) == "F0 F1 F2 B0 F3 B1 F4 B2 W0 F5 B3 W1 B4 W2 B5 W3 W4 W5");
  CHECK(letters(Schedule::zb_h2, 3, 6, 2) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 W0 F5 B5 W1 W2 W3 W4 W5");
  for (int stage = 0; stage < 3; ++stage) CHECK(complete(Schedule::zb_h2, 3, 6, stage));
}

TEST_CASE("ZB-H1's bubble is a third of 1F1B's when F, B and W take the same time") {
  // Qi et al. 2024, with T_F = T_B = T_W = T: 1F1B idles (p − 1)(T_F + T_B + T_W) = 3(p − 1)T
  // per stage, ZB-H1 (p − 1)(T_F + T_B − T_W) = (p − 1)T. Communication is free and the costs
  // are exact, so the only slack is picosecond rounding of the 1/n µs op times: 1 %.
  for (const auto& [p, m] : {std::pair{4, 8}, std::pair{4, 16}, std::pair{8, 24}}) {
    const double one_f_one_b = bubble_us(spt::pipeline_scenario(Schedule::one_f_one_b, p, m));
    const double zb_h1 = bubble_us(spt::pipeline_scenario(Schedule::zb_h1, p, m));
    INFO("p " << p << ", m " << m << ": 1F1B " << one_f_one_b << " µs, ZB-H1 " << zb_h1 << " µs");
    CHECK(one_f_one_b == Approx(3.0 * (p - 1)).epsilon(0.01));
    CHECK(zb_h1 == Approx(1.0 * (p - 1)).epsilon(0.01));
    CHECK(zb_h1 / one_f_one_b == Approx(1.0 / 3.0).epsilon(0.01));
  }
}

TEST_CASE("ZB-H2 leaves close to no bubble when F, B and W take the same time") {
  // With at least 2p − 1 micro-batches the warm-up forwards fill the start and the deferred W
  // passes the end: the formula's bubble is zero; allow 1 % of 1F1B's for rounding.
  for (const auto& [p, m] : {std::pair{4, 8}, std::pair{4, 16}, std::pair{8, 24}}) {
    const double one_f_one_b = bubble_us(spt::pipeline_scenario(Schedule::one_f_one_b, p, m));
    const double zb_h2 = bubble_us(spt::pipeline_scenario(Schedule::zb_h2, p, m));
    INFO("p " << p << ", m " << m << ": 1F1B " << one_f_one_b << " µs, ZB-H2 " << zb_h2 << " µs");
    CHECK(zb_h2 < 0.01 * one_f_one_b);
  }
}

namespace {

stepsim::Bytes kept(Schedule schedule, int stage, int p = 4, int m = 8) {
  const auto s = spt::uniform_pipeline_scenario(schedule, p, m);
  return sp::kept_activations(s, stepsim::workload::build_work(s), stage).bytes;
}

}  // namespace

TEST_CASE("ZB-H1 keeps 1F1B's peak activations and ZB-H2 more") {
  // Stage 0 defers no W pass: exactly 1F1B's p micro-batches. Stage i keeps p − i micro-batches
  // and what its i deferred W passes need, less than a micro-batch's activations each, so no
  // stage exceeds stage 0 (the LM head runs whole in B and defers nothing).
  for (int stage = 0; stage < 4; ++stage) {
    INFO("stage " << stage << ": 1F1B " << kept(Schedule::one_f_one_b, stage).count() << ", ZB-H1 "
                  << kept(Schedule::zb_h1, stage).count());
    CHECK(kept(Schedule::zb_h1, stage) <= kept(Schedule::one_f_one_b, 0));
  }
  CHECK(kept(Schedule::zb_h1, 0) == kept(Schedule::one_f_one_b, 0));
  CHECK(std::max({kept(Schedule::zb_h1, 0), kept(Schedule::zb_h1, 1), kept(Schedule::zb_h1, 2),
                  kept(Schedule::zb_h1, 3)}) == kept(Schedule::one_f_one_b, 0));
  CHECK(kept(Schedule::zb_h1, 2) > kept(Schedule::one_f_one_b, 2));
  // ZB-H2's first stage holds 2p − 1 micro-batches in flight.
  const auto s = spt::uniform_pipeline_scenario(Schedule::zb_h2, 4, 8);
  CHECK(sp::kept_activations(s, stepsim::workload::build_work(s), 0).chunks == 7);
  CHECK(kept(Schedule::zb_h2, 0) > kept(Schedule::one_f_one_b, 0));
}

TEST_CASE("a W pass keeps each wgrad GEMM's input and output gradient until it runs") {
  // GPT without TP: X and dY of the QKV (h → 3h), projection (h → h), fc1 (h → 4h) and fc2
  // (4h → h) GEMMs, 2 bytes each: (7 + 9)·sbh elements, Qi et al.'s 32·sbh bytes.
  const auto s = spt::pipeline_scenario(Schedule::zb_h1, 4, 8);
  const std::int64_t small_sbh = 2048LL * 1 * 1024;
  CHECK(sp::weight_pass_inputs(s, stepsim::workload::build_work(s).layer).count() == 32 * small_sbh);
}

TEST_CASE("under ZB-H1 gradient buckets are reduced only after the weight-gradient passes") {
  // The last stage runs B of the last micro-batch before its deferred W passes: every bucket
  // waits for the W pass of the last micro-batch, the stage's last backward compute.
  auto s = spt::pipeline_scenario(Schedule::zb_h1, 4, 4);
  s.parallel.dp = 2;
  s.training.global_batch = 8;
  s.cluster.nodes = 1;
  const spt::FixedCosts costs;
  const auto program = sp::build_program(s, spt::small_work(s), costs);
  const std::size_t last = program.ranks.size() - 1;
  const auto& ops = program.ranks[last].ops();
  // The start of the last W pass: the wgrad GEMMs of the last stage's one layer.
  const auto work = spt::small_work(s);
  const auto& layer = work.layer.backward;
  const auto weight_ops = static_cast<std::size_t>(
      std::count_if(layer.begin(), layer.end(), [](const auto& op) { return op.pass == Pass::backward_weight; }));
  std::vector<std::size_t> backward;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == stepsim::engine::OpKind::compute && ops[i].phase == stepsim::Phase::backward)
      backward.push_back(i);
  }
  REQUIRE(backward.size() > weight_ops);
  const std::size_t last_w_start = backward[backward.size() - weight_ops];
  const auto buckets = spt::collectives_of(program, stepsim::CommKind::dp, last);
  REQUIRE(!buckets.empty());
  // The first bucket holds the LM head's and final norm's gradients, which B computes whole.
  INFO("last W pass from op " << last_w_start);
  for (std::size_t k = 1; k < buckets.size(); ++k) CHECK(buckets[k] > last_w_start);
  CHECK(buckets.size() > 1);
}
