// Context parallelism and TP communication overlap on whole scenarios: Llama 3 70B on 64
// H100 and Korthikanti's GPT 22B, through the scenario loader and simulate().
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "parallelism/grad_buckets.hpp"
#include "parallelism/memory_model.hpp"
#include "stepsim/report.hpp"
#include "workload/work.hpp"

using stepsim::CommKind;

namespace {

stepsim::Report report_of(const std::string& example, const std::vector<std::string>& sets = {}) {
  return stepsim::simulate(stepsim::io::load_scenario(example, sets)).report;
}

double exposed(const stepsim::Report& r, CommKind kind) {
  return r.breakdown_s.exposed_comm[static_cast<std::size_t>(kind)];
}

double busy(const stepsim::Report& r, CommKind kind) { return r.comm_s[static_cast<std::size_t>(kind)]; }

const char* const kCp = "llama3-70b-cp2-64xh100";

}  // namespace

TEST_CASE("Llama 3 70B with cp 2 on 64 H100 runs and reports its CP time") {
  const stepsim::Report r = report_of(kCp);
  CHECK(r.gpus == 64);
  CHECK(r.step_time_s > 0);
  CHECK(busy(r, CommKind::cp) > 0);
  // The ring overlaps most of its K/V traffic with attention.
  CHECK(exposed(r, CommKind::cp) > 0);
  CHECK(exposed(r, CommKind::cp) < busy(r, CommKind::cp) / 2);
}

TEST_CASE("Llama 3 70B at 16384 tokens with cp 2 hides its whole K/V ring behind attention") {
  // Each message of Transformer Engine's ring, the backward's last dK/dV included, runs beside
  // a step's attention (half the rank's attention a step; a message is the K/V of the rank's
  // 8,192 tokens at its 1 K/V head, 4 MiB, over NVLink): no cp time is left exposed.
  const stepsim::Report r = report_of(kCp, {"training.recompute=none", "model.seq_len=16384"});
  CHECK(busy(r, CommKind::cp) > 0);
  CHECK(exposed(r, CommKind::cp) == 0);
}

TEST_CASE("context parallelism halves the activations a rank keeps and shards optimizer state over dp·cp") {
  const stepsim::Report cp2 = report_of(kCp);
  const stepsim::Report cp1 = report_of(kCp, {"parallel.cp=1", "parallel.dp=8"});
  CHECK(cp2.memory_bytes.activations == Approx(cp1.memory_bytes.activations / 2).epsilon(0.01));
  CHECK(cp2.memory_bytes.optimizer == Approx(cp1.memory_bytes.optimizer).epsilon(1e-6));
}

TEST_CASE("gathering K/V whole leaves more CP time exposed than the overlapped ring") {
  const stepsim::Report ring = report_of(kCp);
  const stepsim::Report gathered = report_of(kCp, {"context_parallel.comm=all_gather"});
  CHECK(exposed(gathered, CommKind::cp) > exposed(ring, CommKind::cp));
}

TEST_CASE("TP communication overlap lowers the exposed TP time of GPT 22B and of Llama 3 70B at TP 8") {
  const std::vector<std::string> sp{"parallel.sequence_parallel=true"};
  const stepsim::Report gpt = report_of("korthikanti-22b", sp);
  const stepsim::Report gpt_overlap = report_of("korthikanti-22b", {sp[0], "tensor_parallel.comm_overlap=true"});
  CHECK(exposed(gpt_overlap, CommKind::tp) < 0.25 * exposed(gpt, CommKind::tp));
  CHECK(gpt_overlap.step_time_s < gpt.step_time_s);

  const std::vector<std::string> tp8{"parallel.cp=1", "parallel.dp=8"};
  const stepsim::Report llama = report_of(kCp, tp8);
  const stepsim::Report llama_overlap = report_of(kCp, {tp8[0], tp8[1], "tensor_parallel.comm_overlap=true"});
  CHECK(exposed(llama_overlap, CommKind::tp) < 0.25 * exposed(llama, CommKind::tp));
  CHECK(llama_overlap.step_time_s < llama.step_time_s);
}

TEST_CASE("Mixtral 8x7B with EP 8 on 64 H100 runs and reports its all-to-all time as ep") {
  const stepsim::Report r = report_of("mixtral-8x7b-ep8-64xh100");
  CHECK(r.gpus == 64);
  CHECK(busy(r, CommKind::ep) > 0);
  CHECK(exposed(r, CommKind::ep) > 0);
  CHECK(r.memory_bytes.fits);
}

TEST_CASE("DeepSeek-V3 with EP 64 across 8 nodes runs, its all-to-all over InfiniBand") {
  const stepsim::Report r = report_of("deepseek-v3-ep64-512xh100");
  CHECK(r.gpus == 512);
  CHECK(exposed(r, CommKind::ep) > 0);
  // Across nodes the all-to-all is slower than Mixtral's inside one, per byte and per layer.
  CHECK(busy(r, CommKind::ep) > busy(report_of("mixtral-8x7b-ep8-64xh100"), CommKind::ep));
}

// Dropped tokens skip the experts: neither the GPUs nor the model do their FLOPs, so no
// capacity factor can lift HFU above the GPU's peak, nor MFU above HFU.
TEST_CASE("HFU stays at or below 100 % and MFU at or below HFU however small the capacity factor") {
  for (const char* recompute : {"full", "selective", "none"}) {
    for (const char* capacity : {"0.01", "0.1", "0.25", "0.5", "1", "1.25"}) {
      for (const char* imbalance : {"1", "2"}) {
        const stepsim::Report r =
            report_of("mixtral-8x7b-ep8-64xh100", {std::string("model.moe.capacity_factor=") + capacity,
                                                   std::string("model.moe.imbalance=") + imbalance,
                                                   std::string("training.recompute=") + recompute});
        INFO("recompute " << recompute << ", capacity factor " << capacity << ", imbalance " << imbalance);
        CHECK(r.throughput.hfu <= 1.0);
        CHECK(r.throughput.mfu <= r.throughput.hfu);
      }
    }
  }
}

TEST_CASE("token imbalance across EP ranks makes the step slower, monotonically") {
  double previous = 0;
  for (const char* imbalance : {"1", "1.25", "1.5", "2", "3"}) {
    const stepsim::Report r = report_of("mixtral-8x7b-ep8-64xh100", {std::string("model.moe.imbalance=") + imbalance});
    CHECK(r.step_time_s > previous);
    previous = r.step_time_s;
  }
}

namespace {

stepsim::Timeline run_timeline(const std::string& example) {
  return stepsim::simulate(stepsim::io::load_scenario(example)).timeline;
}

// Whether some interval of the run has a name that contains `part`.
bool ran(const stepsim::Timeline& t, const std::string& part) {
  for (const stepsim::RankTimeline& rank : t.ranks) {
    for (const stepsim::Interval& i : rank.intervals)
      if (t.names[i.name].find(part) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("the dense layers of a mixed stack run the dense MLP and send no all-to-all") {
  const auto mixed =
      stepsim::simulate(stepsim::io::load_scenario("mixtral-8x7b-ep8-64xh100", {"model.moe.first_dense_layers=16"}));
  CHECK(ran(mixed.timeline, "L15 fc1 fwd"));
  CHECK_FALSE(ran(mixed.timeline, "L15 expert fc1"));
  CHECK_FALSE(ran(mixed.timeline, "L15 dispatch"));
  CHECK(ran(mixed.timeline, "L16 expert fc1 fwd"));
  CHECK(ran(mixed.timeline, "L16 dispatch"));
  // Half the layers send the same all-to-alls: half the EP time.
  const stepsim::Report all_moe = report_of("mixtral-8x7b-ep8-64xh100");
  CHECK(busy(mixed.report, CommKind::ep) == Approx(busy(all_moe, CommKind::ep) / 2).epsilon(0.02));
  // A dense layer of 14336 holds 3·4096·14336 MLP weights, one expert's worth, where an MoE
  // layer at EP 8 holds one expert and the router: 16 · 8 · 4096 router weights fewer, in bf16
  // parameters (2 bytes) sharded by ZeRO-1 only in the optimizer state.
  CHECK(all_moe.memory_bytes.params - mixed.report.memory_bytes.params == Approx(16.0 * 8 * 4096 * 2));
}

TEST_CASE("multi-token prediction runs its MoE layer on the last stage, with its all-to-alls") {
  const auto mtp = stepsim::simulate(stepsim::io::load_scenario("deepseek-v3-ep64-512xh100", {"model.mtp_layers=1"}));
  CHECK(ran(mtp.timeline, "mtp0 expert fc1 fwd"));
  CHECK(ran(mtp.timeline, "mtp0 cross entropy fwd"));
  // Its all-to-alls are named after the depth, as its compute ops are, not after a 62nd layer.
  CHECK(ran(mtp.timeline, "mtp0 dispatch"));
  CHECK(ran(mtp.timeline, "mtp0 combine backward"));
  CHECK_FALSE(ran(mtp.timeline, "L61 "));
  CHECK_FALSE(ran(run_timeline("deepseek-v3-ep64-512xh100"), "mtp0 dispatch"));
  CHECK(mtp.report.step_time_s > report_of("deepseek-v3-ep64-512xh100").step_time_s);
}

namespace {

// What one depth of multi-token prediction adds to the last stage's activations of
// DeepSeek-V3's example (8 stages) under the recompute of `sets`.
stepsim::Bytes mtp_activations(std::vector<std::string> sets) {
  std::vector<stepsim::Bytes> last;
  for (const char* depths : {"model.mtp_layers=0", "model.mtp_layers=1"}) {
    std::vector<std::string> with = sets;
    with.emplace_back(depths);
    const stepsim::Scenario s = stepsim::io::load_scenario("deepseek-v3-ep64-512xh100", with);
    last.push_back(
        stepsim::parallelism::estimate_memory(s, stepsim::workload::build_work(s)).stages.back().activations);
  }
  return last[1] - last[0];
}

}  // namespace

// Megatron-Core builds the depth's layer from the model's config, so it recomputes as the
// model's layers do: under full recompute MultiTokenPredictionLayer checkpoints the projection,
// the layer and the final norm (the depth then keeps less than without recompute), under
// selective recompute the layer re-runs the listed modules (mla_up_proj: latent attention's up
// projections, whose outputs it no longer keeps).
TEST_CASE("the multi-token-prediction layer recomputes as the model's layers do") {
  const stepsim::Bytes none = mtp_activations({"training.recompute=none"});
  CHECK(none.count() > 0);
  CHECK(mtp_activations({"training.recompute=full"}) < none);
  CHECK(mtp_activations({"training.recompute=selective", R"(training.recompute_modules=["mla_up_proj"])"}) < none);
  const auto full = stepsim::simulate(
      stepsim::io::load_scenario("deepseek-v3-ep64-512xh100", {"model.mtp_layers=1", "training.recompute=full"}));
  CHECK(ran(full.timeline, "mtp0 expert fc1 fwd"));
  CHECK(ran(full.timeline, "L60 expert fc1 recompute"));
  CHECK(ran(full.timeline, "mtp0 expert fc1 recompute"));
  CHECK(ran(full.timeline, "mtp0 projection recompute"));
  CHECK(ran(full.timeline, "mtp0 final rmsnorm recompute"));
  const auto selective = stepsim::simulate(stepsim::io::load_scenario(
      "deepseek-v3-ep64-512xh100",
      {"model.mtp_layers=1", "training.recompute=selective", R"(training.recompute_modules=["mla_up_proj"])"}));
  CHECK(ran(selective.timeline, "mtp0 q up projection recompute"));
  CHECK_FALSE(ran(selective.timeline, "mtp0 projection recompute"));
  CHECK_FALSE(ran(selective.timeline, "mtp0 expert fc1 recompute"));
}

// The gradient tensors marked as Linear weights (gathered quantized) and the workload's count of
// them (held quantized) are one set of weights: latent attention, routed and shared experts
// with and without biases, a dense layer of a mixed stack.
TEST_CASE("the Linear weights the gathers quantize are the ones the memory model holds quantized") {
  for (const std::string model : {"deepseek-v3", "gpt-oss-120b", "mixtral-8x7b", "llama3-8b"}) {
    INFO(model);
    const std::string ep = model == "llama3-8b" ? "1" : "8";
    const std::string text = R"({ "model": ")" + model + R"(", "cluster": "dgx-h100-ndr",
                             "parallel": { "tp": 2, "dp": 8, "ep": )" +
                             ep + R"(, "sequence_parallel": true },
                             "training": { "global_batch": 8, "micro_batch": 1 } })";
    const stepsim::Scenario s = stepsim::io::load_scenario_text(text, "s.json");
    const auto work = stepsim::workload::build_work(s);
    for (int layer = 0; layer < s.model.layers; ++layer) {
      long long quantized = 0;
      for (const auto& t : stepsim::parallelism::gradient_tensors(s.model, s.parallel)) {
        if (t.block == layer + 1 && t.quantized) quantized += t.elements;
      }
      CHECK(quantized == work.block(layer).linear_param_count);
    }
  }
}

namespace {

// DeepSeek-V3's example on 8 stages: stage 0 holds the 3 dense layers, stage 1 MoE layers only.
std::vector<stepsim::Bytes> stage_activations(const std::vector<std::string>& modules) {
  std::vector<std::string> sets = {"training.recompute=selective"};
  sets.push_back("training.recompute_modules=[" + modules.front() + "]");
  if (modules.front().empty()) sets = {"training.recompute=none"};
  const stepsim::Scenario s = stepsim::io::load_scenario("deepseek-v3-ep64-512xh100", sets);
  std::vector<stepsim::Bytes> out;
  for (const auto& stage : stepsim::parallelism::estimate_memory(s, stepsim::workload::build_work(s)).stages)
    out.push_back(stage.activations);
  return out;
}

}  // namespace

// Megatron-Core's "mlp" recompute module leaves MoE layers out (TransformerLayer sets
// recompute_mlp only when the layer is not a MoE layer), so a stage of MoE layers alone keeps
// exactly what it keeps without recompute; the stage holding the dense layers keeps less.
TEST_CASE("recomputing the dense MLPs leaves a stage of MoE layers alone as it is") {
  const auto none = stage_activations({""});
  const auto mlp = stage_activations({"\"mlp\""});
  REQUIRE(none.size() == 8);
  REQUIRE(mlp.size() == 8);
  CHECK(mlp[0] < none[0]);
  for (std::size_t stage = 1; stage < 7; ++stage) {
    INFO("stage " << stage);
    CHECK(mlp[stage] == none[stage]);
  }
}

// The interleaved schedule's rule on the micro-batches per replica is validation's, as every
// other rule on the scenario: loading refuses it, a value a --set assignment gave named by --set
// and its key.
TEST_CASE("the interleaved schedule's micro-batch rule is refused on loading, naming --set for a value it gave") {
  // Interleaving needs the micro-batches per replica to be a multiple of pp: a batch of 24 in
  // micro-batches of 2 over 4 replicas is 3 each, at pp 2.
  const std::string text = R"({ "model": "gpt-1.3b", "cluster": "dgx-h100-ndr",
    "parallel": { "tp": 2, "pp": 2, "dp": 4, "schedule": "interleaved", "virtual_stages": 2 },
    "training": { "global_batch": 24, "micro_batch": 2 } })";
  const std::string message =
      "training.global_batch: the interleaved schedule needs the micro-batches per replica (3) to be a multiple of pp "
      "(2)";
  CHECK_THROWS_WITH(stepsim::io::load_scenario_text(text, "s.json", {"training.global_batch=24"}), "--set: " + message);
  CHECK_THROWS_WITH(stepsim::io::load_scenario_text(text, "s.json", {"training.micro_batch=2"}),
                    "s.json: /training/global_batch: the interleaved schedule needs the micro-batches per replica (3) "
                    "to be a multiple of pp (2)");
  // 4 micro-batches per replica, a multiple of pp: loads.
  CHECK_NOTHROW(stepsim::io::load_scenario_text(text, "s.json", {"training.global_batch=32"}));
}

// Megatron-Core's SharedExpertMLP is an MLP over the TP group (super().__init__ with the TP
// process group): its fc1 column-parallel, its fc2 row-parallel, with the dense MLP's
// sequence-parallel AllGather and ReduceScatter. Mixtral's dimensions with one shared expert
// at TP 2: 3 · 4,096 · 14,336 / 2 BF16 weights a rank, and b·s·h = 4,096 × 4,096 BF16 (32 MiB)
// a collective.
TEST_CASE("the shared experts are split over TP and gather and reduce-scatter as the dense MLP") {
  std::vector<std::string> sets{"model.layers=1",
                                "cluster.nodes=1",
                                "training.global_batch=4",
                                "parallel.dp=4",
                                "parallel.ep=4",
                                "parallel.tp=2",
                                "parallel.sequence_parallel=true",
                                "training.recompute=none",
                                "data_parallel.overlap_param_gather=false"};
  const auto none = stepsim::simulate(stepsim::io::load_scenario("mixtral-8x7b-ep8-64xh100", sets));
  sets.emplace_back("model.moe.shared_experts=1");
  const auto shared = stepsim::simulate(stepsim::io::load_scenario("mixtral-8x7b-ep8-64xh100", sets));
  CHECK(shared.report.memory_bytes.params - none.report.memory_bytes.params == Approx(3.0 * 4096 * 14336 / 2 * 2));
  for (const char* collective :
       {"AllGather tp L0 shared expert fc1 fwd, 32.0 MiB", "ReduceScatter tp L0 shared expert fc2 fwd, 32.0 MiB",
        "AllGather tp L0 shared expert fc2 output grad, 32.0 MiB",
        "ReduceScatter tp L0 shared expert fc1 dgrad, 32.0 MiB"}) {
    INFO(collective);
    CHECK(ran(shared.timeline, collective));
    CHECK_FALSE(ran(none.timeline, collective));
  }
}
