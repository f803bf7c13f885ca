// Megatron-Core's EP all-to-all overlap (model.moe.a2a_overlap): the combined 1F1B order
// against combined_1f1b.py and schedules.py, a merged forward and backward whose step is worked
// out by hand, the bound that the overlap never slows the step, and the refusals where
// Megatron-Core refuses the overlap.
#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/engine.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "parallelism/program_builder.hpp"
#include "simulation/advice.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::CollOp;
using stepsim::Schedule;
using stepsim::Time;

namespace {

// "F0.1 F1.1& B0.1": pass, micro-batch, model chunk, & a forward combined with the backward
// after it.
std::string letters(Schedule schedule, int p, int m, int v, int stage) {
  std::string out;
  for (const sp::PipelineOp& op : sp::stage_order(schedule, {p, m, v, true}, stage)) {
    if (!out.empty()) out += ' ';
    out += op.forward ? 'F' : 'B';
    out += std::to_string(op.micro_batch);
    if (v > 1) out += "." + std::to_string(op.chunk);
    if (op.overlapped) out += '&';
  }
  return out;
}

}  // namespace

TEST_CASE("the all-to-all overlap combines each forward with the backward of an earlier micro-batch") {
  // Without a pipeline (combined_1f1b_schedule_for_no_pipelining): the first forward alone,
  // then forward i + 1 with backward i, then the last backward alone.
  CHECK(letters(Schedule::one_f_one_b, 1, 4, 1, 0) == "F0 F1& B0 F2& B1 F3& B2 B3");
  CHECK(letters(Schedule::one_f_one_b, 1, 1, 1, 0) == "F0 B0");
  // Interleaved, p 2, v 2, m 4: Megatron numbers virtual micro-batches in groups of p per
  // chunk (forward 0..7: 0.0 1.0 0.1 1.1 2.0 3.0 2.1 3.1; backward from the last chunk: 0.1
  // 1.1 0.0 1.0 2.1 3.1 2.0 3.0). The last stage warms up (v - 1)·p = 2 forwards plus the one
  // the overlap adds (get_pp_rank_microbatches), so that no forward is combined with its own
  // backward; then forward k + 3 with backward k; then the cool-down backwards.
  CHECK(letters(Schedule::interleaved, 2, 4, 2, 1) ==
        "F0.0 F1.0 F0.1 F1.1& B0.1 F2.0& B1.1 F3.0& B0.0 F2.1& B1.0 F3.1& B2.1 B3.1 B2.0 B3.0");
  // The first stage: 2(p - 1) + (v - 1)·p + 1 = 5 warm-up forwards.
  CHECK(letters(Schedule::interleaved, 2, 4, 2, 0) ==
        "F0.0 F1.0 F0.1 F1.1 F2.0 F3.0& B0.1 F2.1& B1.1 F3.1& B0.0 B1.0 B2.1 B3.1 B2.0 B3.0");
}

TEST_CASE("with as many micro-batches as stages the all-to-all overlap combines only steady-state passes") {
  // Megatron-Core's get_pp_rank_microbatches has no rule for m = p any more: each stage warms
  // up min(2(p − rank − 1) + (v − 1)·p + 1, m·v) forwards, the one added for the overlap
  // included; combined steps are the steady state's alone (forward_backward_helper_wrapper is
  // given a forward and a backward only there). p 2, v 2, m 2: the first stage warms up
  // min(5, 4) = 4, every forward (are_all_microbatches_in_warmup), and combines nothing; the
  // last warms up 3, then combines its fourth forward with its first backward.
  CHECK(letters(Schedule::interleaved, 2, 2, 2, 0) == "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
  CHECK(letters(Schedule::interleaved, 2, 2, 2, 1) == "F0.0 F1.0 F0.1 F1.1& B0.1 B1.1 B0.0 B1.0");
  // p 4, v 2, m 4: warm-ups min(2(3 − rank) + 5, 8) = 8, 8, 7 and 5.
  const std::string all_first = "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 B0.1 B1.1 B2.1 B3.1 B0.0 B1.0 B2.0 B3.0";
  CHECK(letters(Schedule::interleaved, 4, 4, 2, 0) == all_first);
  CHECK(letters(Schedule::interleaved, 4, 4, 2, 1) == all_first);
  CHECK(letters(Schedule::interleaved, 4, 4, 2, 2) ==
        "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1& B0.1 B1.1 B2.1 B3.1 B0.0 B1.0 B2.0 B3.0");
  CHECK(letters(Schedule::interleaved, 4, 4, 2, 3) ==
        "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1& B0.1 F2.1& B1.1 F3.1& B2.1 B3.1 B0.0 B1.0 B2.0 B3.0");
}

namespace {

// Every compute op 1 µs; each EP all-to-all `a2a` µs, every other collective free; no host
// cost: the merged passes' arithmetic alone.
class A2aCosts final : public sp::Costs {
 public:
  explicit A2aCosts(double a2a_us) : a2a_(Time::from_us(a2a_us)) {}
  Time compute(const stepsim::workload::OpCost&) const override { return Time::from_us(1.0); }
  sp::CollectiveCost collective(const stepsim::collectives::Request& r) const override {
    return {r.op == CollOp::alltoall ? a2a_ : Time::zero(), stepsim::Bandwidth::gbytes_per_s(1e12), {0.0, 0.0}};
  }
  Time kernel_launch() const override { return Time::zero(); }
  double comm_slowdown() const override { return 0.0; }

 private:
  Time a2a_;
};

// Two MoE layers (8 experts, top 2) at EP 4, one micro-batch of one sequence per pass.
stepsim::Scenario moe_scenario(int micro_batches, bool overlap) {
  stepsim::Scenario s = spt::small_scenario(1, 4, micro_batches);
  s.model.moe = {8, 2, 4096};
  s.model.moe.a2a_overlap = overlap;
  s.parallel.ep = 4;
  return s;
}

struct Run {
  double step_us = 0;
  long long compute_ops = 0;
  long long all_to_alls = 0;
};

Run run_program(const stepsim::Scenario& s, double a2a_us) {
  const A2aCosts costs(a2a_us);
  const auto program = sp::build_program(s, stepsim::workload::build_work(s), costs);
  Run out;
  for (const auto& op : program.ranks[0].ops()) {
    if (op.kind == stepsim::engine::OpKind::compute) ++out.compute_ops;
  }
  out.all_to_alls = static_cast<long long>(spt::collectives_of(program, stepsim::CommKind::ep).size());
  Time end = Time::zero();
  for (const auto& rank : stepsim::engine::run(program).ranks) {
    for (const auto& iv : rank.intervals) end = std::max(end, iv.end);
  }
  out.step_us = end.us();
  return out;
}

}  // namespace

TEST_CASE("a combined forward and backward hides each one's all-to-alls under the other's compute") {
  // Two micro-batches: F0, then F1 combined with B0, then B1. Each pass of a 2-layer MoE stack
  // sends 4 all-to-alls (dispatch and combine per layer, forward or backward) of 2 µs, each
  // shorter than the compute the other pass runs beside it (attention 6 µs and more, the
  // experts' 3 forward and 5 backward GEMMs and activations), and one compute stream runs
  // every op at 1 µs. Without the overlap the 16 all-to-alls of the four passes are exposed
  // one after the other: the step is the compute plus 16 · 2 µs. With it only F0's and B1's 8
  // run with nothing beside them: the compute plus 8 · 2 µs.
  const Run apart = run_program(moe_scenario(2, false), 2.0);
  const Run merged = run_program(moe_scenario(2, true), 2.0);
  REQUIRE(apart.all_to_alls == 16);
  REQUIRE(merged.all_to_alls == 16);
  REQUIRE(merged.compute_ops == apart.compute_ops);
  const double compute = static_cast<double>(apart.compute_ops);
  CHECK(apart.step_us == Approx(compute + 16 * 2.0));
  CHECK(merged.step_us == Approx(compute + 8 * 2.0));
}

TEST_CASE("a combined all-to-all longer than the compute beside it is exposed by the difference") {
  // One micro-batch pair as above with all-to-alls of 20 µs: more than any compute of the
  // other pass beside them. The ep stream then runs the pair's eight all-to-alls back to
  // back (combine backward, dispatch, dispatch backward, combine, per layer), each one
  // waiting only for its own pass's compute, which the other pass's runs beside: the
  // merged pair cannot end before its eight all-to-alls, 160 µs, and never later than the
  // two passes apart (compute + 8 · 20 µs).
  const Run apart = run_program(moe_scenario(2, false), 20.0);
  const Run merged = run_program(moe_scenario(2, true), 20.0);
  const double compute = static_cast<double>(apart.compute_ops);
  CHECK(apart.step_us == Approx(compute + 16 * 20.0));
  CHECK(merged.step_us <= apart.step_us);
  // F0's and B1's all-to-alls alone are 160 µs; the pair's all-to-alls another 160 µs.
  CHECK(merged.step_us >= 8 * 20.0 + 8 * 20.0);
}

TEST_CASE("the all-to-all overlap never makes the step slower") {
  for (const double a2a : {0.0, 0.5, 2.0, 5.0, 20.0, 100.0}) {
    for (const int m : {1, 2, 3, 8}) {
      INFO("all-to-all " << a2a << " us, " << m << " micro-batches");
      CHECK(run_program(moe_scenario(m, true), a2a).step_us <= run_program(moe_scenario(m, false), a2a).step_us);
    }
  }
}

namespace {

stepsim::Report simulate_run(const std::string& run, bool overlap) {
  const std::string path = std::string(STEPSIM_SOURCE_DIR) + "/configs/validation/blackwell/" + run + ".json";
  return stepsim::simulate(
             stepsim::io::load_scenario(path, {std::string("model.moe.a2a_overlap=") + (overlap ? "true" : "false")}))
      .report;
}

}  // namespace

TEST_CASE("the two Megatron-Bridge runs with the all-to-all overlap are not slower with it", "[slow]") {
  for (const char* run : {"mb260401-b200-dsv3-mxfp8", "mb260401-h100-qwen3-235b-fp8"}) {
    INFO(run);
    const stepsim::Report apart = simulate_run(run, false);
    const stepsim::Report merged = simulate_run(run, true);
    CHECK(merged.step_time_s <= apart.step_time_s);
    const auto ep = static_cast<std::size_t>(stepsim::CommKind::ep);
    CHECK(merged.breakdown_s.exposed_comm[ep] < apart.breakdown_s.exposed_comm[ep]);
  }
}

namespace {

constexpr const char* kBase = R"({ "model": "mixtral-8x7b", "cluster": "dgx-h100-ndr",
  "parallel": { "tp": 2, "pp": 1, "dp": 8, "ep": 8, "sequence_parallel": true },
  "training": { "global_batch": 64, "micro_batch": 1 } })";

std::string error_of(const std::vector<std::string>& sets) {
  std::vector<std::string> all{"model.moe.a2a_overlap=true"};
  all.insert(all.end(), sets.begin(), sets.end());
  try {
    stepsim::io::load_scenario_text(kBase, "s.json", all);
  } catch (const stepsim::InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("the all-to-all overlap is refused where Megatron-Core refuses it") {
  CHECK(error_of({}) == "no error");
  CHECK(error_of({"parallel.ep=1"}) ==
        "--set: model.moe.a2a_overlap: needs expert parallelism (model.moe.experts > 0 and parallel.ep > 1, got ep "
        "1): there is no EP all-to-all to overlap");
  CHECK(error_of({"parallel.pp=2", "parallel.dp=4", "parallel.ep=4"}) ==
        "s.json: /parallel/schedule: model.moe.a2a_overlap with pp 2 needs \"schedule\": \"interleaved\" "
        "(Megatron-Core requires virtual pipeline stages)");
  CHECK(error_of({"parallel.pp=2", "parallel.dp=4", "parallel.ep=4", "parallel.schedule=interleaved",
                  "parallel.virtual_stages=2"}) == "no error");
  CHECK(error_of({"parallel.schedule=gpipe", "parallel.pp=2", "parallel.dp=4", "parallel.ep=4"}) ==
        "--set: parallel.schedule: model.moe.a2a_overlap with pp 2 needs \"schedule\": \"interleaved\" "
        "(Megatron-Core requires virtual pipeline stages)");
  CHECK(error_of({"training.recompute=full"}) ==
        "--set: training.recompute: \"full\" recompute with model.moe.a2a_overlap: Megatron-Core refuses full "
        "recomputation with the EP all-to-all overlap");
  CHECK(error_of({"training.precision=fp32"}) ==
        "--set: training.precision: fp32 with model.moe.a2a_overlap: Megatron-Core runs the overlap only with a "
        "bf16 or fp16 model");
  CHECK(error_of({"model.mtp_layers=2", "parallel.tp=1", "parallel.sequence_parallel=false", "parallel.dp=16",
                  "parallel.ep=8"}) ==
        "--set: model.mtp_layers: 2 with model.moe.a2a_overlap: Megatron-Core overlaps at most one "
        "multi-token-prediction layer");
  CHECK(error_of({"training.framework=torchtitan"}) ==
        "--set: training.framework: model.moe.a2a_overlap is Megatron-Core's (megatron or nemo), not torchtitan's");
  // FSDP of a mixture of experts runs, but not through the merged passes.
  CHECK(error_of({"data_parallel.kind=fsdp"}) ==
        "--set: data_parallel.kind: fsdp with model.moe.a2a_overlap is not simulated yet (use zero1)");
}

namespace {

// Interleaved pipelines of two stages with an EP group and one micro-batch per replica, so as
// many micro-batches per replica as stages, as the command line gives them (the default
// scenario and --set): Mixtral 8x7B on 64 H100 and Llama 4 Maverick on 256 B300.
const std::vector<std::string> kMixtral{
    "model=mixtral-8x7b",        "parallel.tp=1",  "parallel.pp=2", "parallel.schedule=interleaved",
    "parallel.virtual_stages=2", "parallel.dp=32", "parallel.ep=8", "training.micro_batch=1",
    "training.global_batch=64"};
const std::vector<std::string> kMaverick{"model=llama4-maverick",
                                         "cluster=dgx-b300",
                                         "cluster.nodes=32",
                                         "parallel.tp=1",
                                         "parallel.pp=2",
                                         "parallel.schedule=interleaved",
                                         "parallel.virtual_stages=6",
                                         "parallel.cp=2",
                                         "parallel.dp=64",
                                         "parallel.ep=128",
                                         "training.micro_batch=1",
                                         "data_parallel.kind=zero1",
                                         "data_parallel.bucket_parameters=256000000",
                                         "training.precision=mxfp8"};

}  // namespace

TEST_CASE("an interleaved pipeline of as many micro-batches as stages runs with the all-to-all overlap") {
  for (const auto* layout : {&kMixtral, &kMaverick}) {
    for (const bool overlap : {false, true}) {
      std::vector<std::string> sets = *layout;
      sets.push_back(std::string("model.moe.a2a_overlap=") + (overlap ? "true" : "false"));
      INFO(sets.front() << ", a2a_overlap " << overlap);
      const stepsim::Scenario s = stepsim::io::load_scenario("", sets);
      REQUIRE(s.training.micro_batches(s.parallel.dp) == s.parallel.pp);
      stepsim::SimulationResult r = stepsim::simulate(s, stepsim::SimulateOptions::report_only());
      CHECK(r.report.step_time_s > 0);
      // The advice plain `simulate` gives (the EP all-to-alls are exposed) simulates the
      // overlap where it is off: the change that failed. Mixtral needs the distributed
      // optimizer beside it to fit.
      stepsim::advise({{"", {}}, sets, false, {}}, s, r);
      CHECK(stepsim::advice_bugs(r.report).empty());
      const auto tried = std::find_if(r.report.advice.begin(), r.report.advice.end(), [](const stepsim::Advice& a) {
        return a.change.find("model.moe.a2a_overlap=true") != std::string::npos;
      });
      if (!overlap) {
        REQUIRE(tried != r.report.advice.end());
        CHECK(tried->status == "ok");
      }
    }
  }
}

namespace {

// A mixture of experts small enough to simulate a thousand layouts in seconds: 24 layers (a
// multiple of every stage and chunk count below), 8 experts, 8 GPUs per stage.
constexpr const char* kTinyMoe = R"({ "model": { "name": "tiny-moe", "layers": 24, "hidden": 256, "heads": 4,
    "ffn_hidden": 512, "vocab": 1024, "seq_len": 256, "mlp": "swiglu",
    "moe": { "experts": 8, "top_k": 2, "expert_ffn_hidden": 512 } },
  "cluster": "dgx-h100-ndr", "parallel": { "tp": 1, "dp": 8 }, "training": { "micro_batch": 1 } })";

}  // namespace

TEST_CASE("every small pipeline layout with or without the all-to-all overlap simulates or is refused") {
  int simulated = 0, refused = 0, combined_at_p = 0;
  for (const char* schedule : {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "dualpipe"}) {
    for (const int pp : {1, 2, 4}) {
      for (const int v : {1, 2, 3}) {
        for (const int m : {1, 2, 3, 4, 6, 8}) {
          for (const bool overlap : {false, true}) {
            for (const int ep : {1, 2, 8}) {
              const std::vector<std::string> sets{std::string("parallel.schedule=") + schedule,
                                                  "parallel.pp=" + std::to_string(pp),
                                                  "parallel.virtual_stages=" + std::to_string(v),
                                                  "training.global_batch=" + std::to_string(8 * m),
                                                  std::string("model.moe.a2a_overlap=") + (overlap ? "true" : "false"),
                                                  "parallel.ep=" + std::to_string(ep),
                                                  "cluster.nodes=" + std::to_string(pp)};
              try {
                const stepsim::Scenario s = stepsim::io::load_scenario_text(kTinyMoe, "tiny.json", sets);
                const double step = stepsim::simulate(s, stepsim::SimulateOptions::report_only()).report.step_time_s;
                CHECK(step > 0);
                ++simulated;
                if (overlap && pp > 1 && m == pp) ++combined_at_p;
              } catch (const stepsim::InputError&) {
                ++refused;  // bad input, in validation or before the program is built: exit status 2
              } catch (const stepsim::InternalError& e) {
                std::string layout;
                for (const std::string& set : sets) layout += set + " ";
                FAIL_CHECK(layout << e.what());
              }
            }
          }
        }
      }
    }
  }
  // The sweep reaches what it is for: the overlap with pipelines of m = p simulated.
  CHECK(combined_at_p >= 4);
  CHECK(simulated > 100);
  CHECK(refused > 0);
}
