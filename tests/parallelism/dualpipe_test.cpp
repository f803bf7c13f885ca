// DualPipe: each stage's pass order against the reference implementation's eight steps, the
// bubble against the DeepSeek-V3 report's formula, the two copies of each stage in memory,
// and a DeepSeek-V3-like layer's all-to-alls hidden behind the paired pass's compute; the
// figures the README and the user guide quote for DualPipe on the DeepSeek-V3 example.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "doc_text.hpp"
#include "engine/engine.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "parallelism/program_builder.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::CommKind;
using stepsim::Schedule;
using stepsim::Time;
using stepsim::workload::Pass;

namespace {

// "F0 F1 f0 b0 w0 F3& b1 w1 ...": upper case the forward direction's chunk, lower case the
// reverse one's, & a forward overlapped with the backward after it.
std::string letters(int p, int m, int stage) {
  std::string out;
  for (const sp::PipelineOp& op : sp::stage_order(Schedule::dualpipe, {p, m, 1}, stage)) {
    if (!out.empty()) out += ' ';
    const char c = op.forward ? 'F' : op.weight ? 'W' : 'B';
    out += op.chunk == 0 ? c : static_cast<char>(c - 'A' + 'a');
    out += std::to_string(op.micro_batch);
    if (op.overlapped) out += '&';
  }
  return out;
}

// Every micro-batch of both directions passes F, B and W once each, in that order.
bool complete(int p, int m, int stage) {
  std::set<std::tuple<int, int, int>> seen;  // (chunk, micro-batch, pass: 0 F, 1 B, 2 W)
  for (const sp::PipelineOp& op : sp::stage_order(Schedule::dualpipe, {p, m, 1}, stage)) {
    const int pass = op.forward ? 0 : op.weight ? 2 : 1;
    if (op.micro_batch >= m / 2) return false;
    if (pass > 0 && seen.count({op.chunk, op.micro_batch, pass - 1}) == 0) return false;
    if (!seen.insert({op.chunk, op.micro_batch, pass}).second) return false;
  }
  return seen.size() == static_cast<std::size_t>(3 * m);
}

}  // namespace

TEST_CASE("DualPipe orders each stage's passes as the reference implementation does") {
  // p 4, m 8 (4 per direction). Stage 0 is 2 stages from the middle: two forwards of its own
  // direction, a forward of each, B W F of the reverse one, then F&B pairs; it defers the W of
  // its last two backwards.
  CHECK(letters(4, 8, 0) == "F0 F1 F2 f0 b0 w0 f1 F3& b1 w1 f2& B0 W0 b2 w2 f3& B1 W1 b3 w3 B2 W2 B3 W3");
  // Stage 3 mirrors it with the directions swapped.
  CHECK(letters(4, 8, 3) == "f0 f1 f2 F0 B0 W0 F1 f3& B1 W1 F2& b0 w0 B2 W2 F3& b1 w1 B3 W3 b2 w2 b3 w3");
  // A middle stage runs its first forward and backward of the steady state apart.
  CHECK(letters(4, 8, 1) == "F0 f0 F1 f1 F2 b0 w0 f2& B0 W0 F3& b1 w1 f3& B1 W1 b2 w2 B2 W2 b3 B3 w3 W3");
  for (const int p : {2, 4, 8}) {
    for (const int m : {2 * p, 2 * p + 2, 4 * p}) {
      for (int stage = 0; stage < p; ++stage) {
        INFO("p " << p << ", m " << m << ", stage " << stage);
        CHECK(complete(p, m, stage));
      }
    }
  }
}

namespace {

// The largest stage bubble, in µs: a stage's span from its first to its last compute minus
// its compute time.
double bubble_us(const stepsim::Scenario& s, double f, double b, double w) {
  const auto work = spt::small_work(s);
  const spt::PassCosts costs(work.layer, f, b, w);
  return spt::largest_bubble_us(stepsim::engine::run(sp::build_program(s, work, costs)));
}

}  // namespace

TEST_CASE("DualPipe's bubble is (pp/2 - 1)(F&B + B - 3W) as in the DeepSeek-V3 report") {
  // Table 2 of the report, with B the whole backward (input and weight gradients) and F&B a
  // forward and a backward run as a pair (F + B with free communication). As the reference
  // implementation does, a pair starts once both its inputs have arrived and sends both
  // outputs at its end. With F, B and W of one micro-batch's layer pass 1 µs each the
  // reference's order leaves exactly the formula's bubble on the outer stages.
  for (const auto& [p, m] : {std::pair{4, 8}, std::pair{4, 16}, std::pair{8, 16}, std::pair{8, 32}}) {
    const double formula = (p / 2 - 1) * ((1.0 + 2.0) + 2.0 - 3.0);
    const double dualpipe = bubble_us(spt::pipeline_scenario(Schedule::dualpipe, p, m), 1.0, 1.0, 1.0);
    const double one_f_one_b = bubble_us(spt::pipeline_scenario(Schedule::one_f_one_b, p, m), 1.0, 1.0, 1.0);
    INFO("p " << p << ", m " << m << ": DualPipe " << dualpipe << " µs, 1F1B " << one_f_one_b << " µs");
    CHECK(dualpipe == Approx(formula).epsilon(0.01));
    CHECK(one_f_one_b == Approx(3.0 * (p - 1)).epsilon(0.01));
  }
  // Other ratios: the table's figure bounds the bubble; the reference's order, replayed by
  // hand pass by pass, leaves 2 µs (p 4) and 10 µs (p 8) for F 1, B 2 + 1, and 2 µs and 7 µs
  // for F 1, B 1 + 0.5 (formula: 4, 12, 2.5 and 7.5 µs).
  CHECK(bubble_us(spt::pipeline_scenario(Schedule::dualpipe, 4, 8), 1.0, 2.0, 1.0) == Approx(2.0).epsilon(0.01));
  CHECK(bubble_us(spt::pipeline_scenario(Schedule::dualpipe, 8, 16), 1.0, 2.0, 1.0) == Approx(10.0).epsilon(0.01));
  CHECK(bubble_us(spt::pipeline_scenario(Schedule::dualpipe, 4, 8), 1.0, 1.0, 0.5) == Approx(2.0).epsilon(0.01));
  CHECK(bubble_us(spt::pipeline_scenario(Schedule::dualpipe, 8, 16), 1.0, 1.0, 0.5) == Approx(7.0).epsilon(0.01));
}

TEST_CASE("a DualPipe stage holds the parameters of its stage and of its mirror image") {
  const int p = 4;
  const auto dual = spt::uniform_pipeline_scenario(Schedule::dualpipe, p, 2 * p);
  const auto single = spt::uniform_pipeline_scenario(Schedule::one_f_one_b, p, 2 * p);
  const auto d = sp::estimate_memory(dual, stepsim::workload::build_work(dual));
  const auto o = sp::estimate_memory(single, stepsim::workload::build_work(single));
  REQUIRE(d.stages.size() == static_cast<std::size_t>(p));
  long long dual_total = 0, single_total = 0;
  for (int s = 0; s < p; ++s) {
    const auto i = static_cast<std::size_t>(s);
    const auto mirror = static_cast<std::size_t>(p - 1 - s);
    CHECK(d.stages[i].param_count == o.stages[i].param_count + o.stages[mirror].param_count);
    CHECK(d.stages[i].params == o.stages[i].params + o.stages[mirror].params);
    dual_total += d.stages[i].param_count;
    single_total += o.stages[i].param_count;
  }
  CHECK(dual_total == 2 * single_total);
}

TEST_CASE("DualPipe keeps the activations of pp + 1 model chunks at its peak") {
  for (const int p : {4, 8}) {
    const auto s = spt::uniform_pipeline_scenario(Schedule::dualpipe, p, 2 * p);
    const auto work = stepsim::workload::build_work(s);
    long long most = 0;
    for (int stage = 0; stage < p; ++stage) most = std::max(most, sp::kept_activations(s, work, stage).chunks);
    CHECK(most == p + 1);
  }
}

TEST_CASE("DualPipe sends each direction's activations and gradients over links of their own") {
  const auto s = spt::pipeline_scenario(Schedule::dualpipe, 4, 8);
  const spt::FixedCosts costs;
  const auto program = sp::build_program(s, spt::small_work(s), costs);
  std::vector<std::string> groups;
  for (const auto& g : program.groups) groups.push_back(g.name + " " + g.ranks);
  // Stage 1's activations go to stage 2 in the forward direction and to stage 0 in the
  // reverse one; each stage sums its gradients with its mirror image's.
  for (const char* g :
       {"pp fwd [1, 2]", "pp fwd [1, 0]", "pp bwd [2, 1]", "pp bwd [0, 1]", "pp mirror [0, 3]", "pp mirror [1, 2]"}) {
    INFO(g);
    CHECK(std::find(groups.begin(), groups.end(), g) != groups.end());
  }
  // The first stage holds the embedding and the head: nothing to tie across stages.
  CHECK(
      std::none_of(groups.begin(), groups.end(), [](const std::string& g) { return g.rfind("pp embedding", 0) == 0; }));
}

namespace {

stepsim::Report run(const std::vector<std::string>& sets) {
  return stepsim::simulate(stepsim::io::load_scenario("deepseek-v3-ep64-512xh100", sets)).report;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

double exposed(const stepsim::Report& r, CommKind kind) {
  return r.breakdown_s.exposed_comm[static_cast<std::size_t>(kind)];
}

}  // namespace

TEST_CASE("DualPipe hides most of a DeepSeek-V3 layer's all-to-all behind the paired pass's compute") {
  // The embedded DeepSeek-V3 example with 64 micro-batches per pipeline, so that pairs make up
  // most of the schedule, and DeepSeek's own balance of all-to-all and compute: EP 8 inside a
  // node, recomputing only cheap ops. (At EP 64 across nodes this model's all-to-alls take
  // 1.8 times its compute, and no schedule can hide more than the compute beside them.)
  const std::vector<std::string> scenario{"parallel.ep=8", "training.global_batch=4096",
                                          "training.recompute=selective"};
  const stepsim::Report one_f_one_b = run(scenario);
  const stepsim::Report dualpipe = run(with(scenario, {"parallel.schedule=dualpipe"}));
  INFO("exposed ep: 1F1B " << exposed(one_f_one_b, CommKind::ep) << " s, DualPipe " << exposed(dualpipe, CommKind::ep)
                           << " s");
  CHECK(exposed(one_f_one_b, CommKind::ep) > 0);
  CHECK(exposed(dualpipe, CommKind::ep) < 0.3 * exposed(one_f_one_b, CommKind::ep));
  // Two copies of every stage.
  CHECK(dualpipe.memory_bytes.params > 1.5 * one_f_one_b.memory_bytes.params);
}

namespace {

double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

double exposed_dp_and_pp(const stepsim::Report& r) { return exposed(r, CommKind::dp) + exposed(r, CommKind::pp); }

}  // namespace

// The README (Scenario files, DualPipe) and the user guide quote the DeepSeek-V3 example under
// 1F1B and DualPipe, as shipped and with EP 8: each figure they state is the program's, so that a
// change that moves one fails here rather than leaving the page behind (as the memory figures
// were, 149, 225 and 357 GiB, once a layout that does not fit stopped counting the allocator's
// reserve: 141, 213 and 338 GiB).
TEST_CASE("the README and the user guide quote the DualPipe figures the program gives") {
  const stepsim::Report f = run({});
  const stepsim::Report d = run({"parallel.schedule=dualpipe"});
  const std::vector<std::string> variant{"parallel.ep=8", "training.global_batch=4096", "training.recompute=selective"};
  const stepsim::Report vf = run(variant);
  const stepsim::Report vd = run(with(variant, {"parallel.schedule=dualpipe"}));
  const auto ep_busy = [](const stepsim::Report& r) { return r.comm_s[static_cast<std::size_t>(CommKind::ep)]; };
  // Stage 1 holds MoE layers alone (stage 0 the three dense ones).
  REQUIRE(f.stages.size() == 8);
  const stepsim::StageReport& moe_stage = f.stages[1];
  // One step time for the variant under both schedules, as the README says it stays.
  REQUIRE(fmt::format("{:.1f}", vf.step_time_s) == fmt::format("{:.1f}", vd.step_time_s));

  const std::string readme = stepsim::test::doc_one_line("README.md");
  for (const std::string& figure : {
           fmt::format("({:.1f} s against {:.1f} s a step on a stage of MoE layers alone, under 1F1B)",
                       moe_stage.comm_s[static_cast<std::size_t>(CommKind::ep)], moe_stage.breakdown_s.compute),
           fmt::format("Rank 0 exposes {:.2f} s of its {:.2f} s of all-to-all, against {:.2f} s under 1F1B; "
                       "the step goes from {:.2f} to {:.2f} s",
                       exposed(d, CommKind::ep), ep_busy(d), exposed(f, CommKind::ep), f.step_time_s, d.step_time_s),
           fmt::format("the two copies of each stage need {:.0f} GiB per GPU", gib(d.memory_bytes.device)),
           fmt::format("the exposed `ep` goes from {:.2f} s to {:.2f} s; the step stays at {:.1f} s",
                       exposed(vf, CommKind::ep), exposed(vd, CommKind::ep), vd.step_time_s),
           fmt::format("grow by {:.1f} s", exposed_dp_and_pp(vd) - exposed_dp_and_pp(vf)),
           fmt::format("neither run fits in memory ({:.0f} and {:.0f} GiB)", gib(vf.memory_bytes.device),
                       gib(vd.memory_bytes.device)),
       }) {
    INFO(figure);
    CHECK(readme.find(figure) != std::string::npos);
  }
  const std::string guide = stepsim::test::doc_one_line("docs/user-guide.md");
  for (const std::string& figure : {
           fmt::format("the `ep` line grows, {:.2f} → {:.2f} s of {:.2f} s busy", exposed(f, CommKind::ep),
                       exposed(d, CommKind::ep), ep_busy(d)),
           fmt::format("the step shortens from {:.2f} to {:.2f} s", f.step_time_s, d.step_time_s),
           fmt::format("the job no longer fits ({:.0f} GiB per GPU)", gib(d.memory_bytes.device)),
           fmt::format("exposed `ep` {:.2f} → {:.2f} s", exposed(vf, CommKind::ep), exposed(vd, CommKind::ep)),
       }) {
    INFO(figure);
    CHECK(guide.find(figure) != std::string::npos);
  }
}

TEST_CASE("DualPipe refuses an odd pipeline and too few micro-batches") {
  const auto error_of = [](const std::vector<std::string>& sets) {
    try {
      run(sets);
    } catch (const stepsim::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of({"parallel.schedule=dualpipe", "parallel.pp=7", "parallel.stage_layers=[9,9,9,9,9,8,8]"}) ==
        "--set: parallel.pp: the DualPipe schedule needs an even pp >= 2, "
        "got 7");
  CHECK(error_of({"parallel.schedule=dualpipe", "training.global_batch=512"}) ==
        "--set: training.global_batch: the DualPipe schedule needs an even "
        "number of "
        "micro-batches per replica, at least 2·pp (16), got 8");
}
