// training.recompute_modules through the command line: the modules Megatron-Core recomputes
// add backward work and take activation memory off, and what Megatron-Core refuses, what it
// would accept and ignore, and what is not simulated yet are refused with exit status 2.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cli/run_stepsim.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"

namespace {

// A small DeepSeek-like model: latent attention, a first dense layer and MoE layers, on one
// GB200 compute tray (EP 4).
const std::string kModel = R"({
  "model": {"name": "mla-moe-small", "layers": 4, "hidden": 1024, "heads": 8, "ffn_hidden": 2048, "vocab": 32000,
            "seq_len": 2048, "mlp": "swiglu",
            "mla": {"q_lora_rank": 256, "kv_lora_rank": 128, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
                    "v_head_dim": 64},
            "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 512, "first_dense_layers": 1}},
  "cluster": "gb200-nvl72",
  "parallel": {"tp": 1, "pp": 1, "dp": 4, "ep": 4},
  "training": {"framework": "megatron", "global_batch": 8, "micro_batch": 1, "recompute": "selective"},
  "data_parallel": {"kind": "ddp"}
})";

// The same without latent attention, and without experts either.
const std::string kGqaMoe = R"({
  "model": {"name": "moe-small", "layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 2, "ffn_hidden": 2048,
            "vocab": 32000, "seq_len": 2048, "mlp": "swiglu", "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 512}},
  "cluster": "gb200-nvl72",
  "parallel": {"tp": 1, "pp": 1, "dp": 4, "ep": 4},
  "training": {"framework": "megatron", "global_batch": 8, "micro_batch": 1, "recompute": "selective"},
  "data_parallel": {"kind": "ddp"}
})";
const std::string kDense = R"({
  "model": {"name": "dense-small", "layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 2, "ffn_hidden": 2048,
            "vocab": 32000, "seq_len": 2048, "mlp": "swiglu"},
  "cluster": "gb200-nvl72",
  "parallel": {"tp": 1, "pp": 1, "dp": 4},
  "training": {"framework": "megatron", "global_batch": 8, "micro_batch": 1, "recompute": "selective"},
  "data_parallel": {"kind": "ddp"}
})";

stepsim::SimulationResult run_model(const std::vector<std::string>& sets) {
  return stepsim::simulate(stepsim::io::load_scenario_text(kModel, "s.json", sets));
}

}  // namespace

TEST_CASE("Each recomputed module adds backward work and keeps activations off the GPU") {
  const stepsim::SimulationResult base = run_model({});
  for (const char* modules : {R"(["core_attn","mla_up_proj"])", R"(["core_attn","mlp"])", R"(["core_attn","moe_act"])",
                              R"(["core_attn","layernorm"])"}) {
    INFO(modules);
    const stepsim::SimulationResult more = run_model({std::string("training.recompute_modules=") + modules});
    // Re-running forward work never shortens the step, nor keeps more.
    CHECK(more.report.step_time_s > base.report.step_time_s);
    CHECK(more.report.memory_bytes.activations < base.report.memory_bytes.activations);
  }
  // The default list is core_attn alone.
  const stepsim::SimulationResult listed = run_model({R"(training.recompute_modules=["core_attn"])"});
  CHECK(listed.report.step_time_s == base.report.step_time_s);
  CHECK(listed.report.memory_bytes.peak == base.report.memory_bytes.peak);
}

TEST_CASE("recompute_modules is refused where Megatron-Core refuses it or would recompute nothing") {
  stepsim::testing::Scratch scratch("recompute-modules-refusals");
  scratch.write("s.json", kModel);
  scratch.write("gqa-moe.json", kGqaMoe);
  scratch.write("dense.json", kDense);
  const auto refused_in = [&](const std::string& file, const std::string& sets, const std::string& where,
                              const std::string& message) {
    INFO(file << " " << sets);
    // Each list comes from a --set assignment, which the refusal names.
    CHECK(refusal(scratch.run("simulate " + file + " " + sets), "--set: " + where + ": " + message) == "");
  };
  const auto refused = [&](const std::string& sets, const std::string& where, const std::string& message) {
    refused_in("s.json", sets, where, message);
  };
  const std::string key = "--set 'training.recompute_modules=";
  refused(key + "[\"mlp\"]' --set training.recompute=full", "training.recompute_modules",
          "the modules to recompute are Megatron-Core's selective recompute");
  refused(key + "[\"mlp\"]' --set training.recompute=none", "training.recompute_modules",
          "the modules to recompute are Megatron-Core's selective recompute");
  // A name Megatron-Core does not know (its assert lists the allowed ones).
  const auto unknown = scratch.run("simulate s.json " + key + "[\"attention\"]'");
  CHECK(unknown.status == 2);
  CHECK(unknown.err.find("--set: training.recompute_modules[0]: unknown value 'attention' (expected one of core_attn, "
                         "moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts)") != std::string::npos);
  // A module listed twice is a slip (Megatron-Core would recompute it once), not a second request.
  const auto twice =
      scratch.run("simulate s.json " + key + "[\"core_attn\",\"mlp\",\"mlp\"]' --set training.recompute=selective");
  CHECK(twice.status == 2);
  CHECK(twice.err.find("--set: training.recompute_modules[2]: 'mlp' is listed twice") != std::string::npos);
  refused(key + "[\"moe\"]'", "training.recompute_modules",
          "recompute of \"moe\" and \"shared_experts\" is not simulated yet");
  refused(key + "[\"shared_experts\"]'", "training.recompute_modules",
          "recompute of \"moe\" and \"shared_experts\" is not simulated yet");
  refused_in("gqa-moe.json", key + "[\"mla_up_proj\"]'", "training.recompute_modules",
             "\"mla_up_proj\" needs latent attention (model.mla)");
  refused_in("dense.json", key + "[\"moe_act\"]'", "training.recompute_modules",
             "\"moe_act\" needs a mixture-of-experts model");
  refused(key + "[\"mlp\"]' --set model.moe.first_dense_layers=0", "training.recompute_modules",
          "\"mlp\" recomputes dense MLPs and every layer of this model is a mixture of experts");
  refused_in("dense.json", key + "[\"layernorm\"]'", "training.recompute_modules",
             "\"layernorm\" recomputes norms that are not fused into the next Linear");
  refused(key + "[\"moe_act\"]' --set training.precision=fp8", "training.recompute_modules",
          "Megatron-Core refuses \"moe_act\" and \"layernorm\" recompute with FP8 delayed scaling");
  refused(key + "[\"layernorm\"]' --set training.precision=fp8", "training.recompute_modules",
          "Megatron-Core refuses \"moe_act\" and \"layernorm\" recompute with FP8 delayed scaling");
  refused(key + "[\"mlp\"]' --set training.framework=torchtitan", "training.framework",
          "training.recompute_modules is Megatron-Core's (megatron or nemo), not torchtitan's");
}

TEST_CASE("The --best search runs a scenario with recompute_modules, the list going with selective recompute") {
  stepsim::testing::Scratch scratch("recompute-modules-best");
  scratch.write("s.json", kModel);
  const auto r =
      scratch.run("sweep s.json --best 1 --gpus 4 --set 'training.recompute_modules=[\"core_attn\",\"mlp\"]'");
  CHECK(r.status == 0);
  CHECK(r.out.find("66 refused by validation") == std::string::npos);
  CHECK(r.out.find("no configuration fits") == std::string::npos);
}
