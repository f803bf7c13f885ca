// The model's structure keys refused where they cannot describe a model: a head width the
// fused attention kernels do not take, dense/MoE layer patterns that do not match the stack,
// latent attention where its widths do not fit or it is not simulated yet, and multi-token
// prediction where it is not simulated yet.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;

namespace {

constexpr const char* kTp1Base = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": { "tp": 1, "dp": 8 },
  "training": { "global_batch": 8, "micro_batch": 1 } })";

std::string error_for(std::vector<std::string> sets) {
  try {
    io::load_scenario_text(kTp1Base, "s.json", sets);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// Mixtral 8x7B, 32 layers, at EP 8.
std::vector<std::string> moe(std::vector<std::string> more) {
  std::vector<std::string> sets{"model=mixtral-8x7b", "parallel.ep=8"};
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

std::string pattern(int dense, int moe_layers) {
  std::string p = "model.moe.layer_pattern=[";
  for (int i = 0; i < dense + moe_layers; ++i) p += std::string(i > 0 ? "," : "") + (i < dense ? "0" : "1");
  return p + "]";
}

}  // namespace

TEST_CASE("a head width the fused attention kernels do not take is refused") {
  CHECK(error_for({"model.head_dim=128"}) == "no error");
  CHECK(error_for({"model.head_dim=256"}) == "no error");
  CHECK(error_for({"model.head_dim=264"}) ==
        "--set: model.head_dim: must be at most 256 for fused attention (training.attention \"flash\"), got 264: "
        "FlashAttention and cuDNN's fused attention take head dimensions up to 256");
  CHECK(error_for({"model.head_dim=320", "training.attention=flash2"}) ==
        "--set: model.head_dim: must be at most 256 for fused attention (training.attention \"flash2\"), got 320: "
        "FlashAttention and cuDNN's fused attention take head dimensions up to 256");
  // Unfused attention runs batched GEMMs of any width.
  CHECK(error_for({"model.head_dim=320", "training.attention=unfused"}) == "no error");
  CHECK(error_for({"model.head_dim=5000"}) == "--set: model.head_dim: must be between 0 and 4096, got 5000");
}

TEST_CASE("heads that do not divide hidden need model.head_dim") {
  CHECK(error_for({"model.heads=24", "model.kv_heads=8"}) ==
        "--set: model.heads: hidden (4096) is not divisible by heads (24); give model.head_dim when heads·head_dim "
        "differs from hidden");
  CHECK(error_for({"model.heads=24", "model.kv_heads=8", "model.head_dim=128"}) == "no error");
}

TEST_CASE("dense layers that leave no MoE layer, or a layer pattern unlike the stack, are refused") {
  CHECK(error_for(moe({"model.moe.first_dense_layers=31"})) == "no error");
  CHECK(error_for(moe({"model.moe.first_dense_layers=32"})) ==
        "--set: model.moe.first_dense_layers: leaves no MoE layer among the 32 layers, got 32 (a dense model has "
        "model.moe.experts 0)");
  CHECK(error_for(moe({pattern(2, 30)})) == "no error");
  CHECK(error_for(moe({pattern(2, 29)})) ==
        "--set: model.moe.layer_pattern: has 31 entries but model.layers is 32: one entry per layer, 1 for MoE and 0 "
        "for dense");
  CHECK(error_for(moe({pattern(32, 0)})) ==
        "--set: model.moe.layer_pattern: has no MoE layer (a dense model has model.moe.experts 0)");
  std::string two = pattern(1, 31);
  two[two.find("0")] = '2';
  CHECK(error_for(moe({two})) ==
        "--set: model.moe.layer_pattern: entry 0 must be 1 (an MoE layer) or 0 (a dense layer), got 2");
  CHECK(error_for(moe({pattern(2, 30), "model.moe.first_dense_layers=2"})) ==
        "--set: model.moe.layer_pattern: and model.moe.first_dense_layers (2) both say which layers are dense: give "
        "one of them");
}

TEST_CASE("layer patterns and a token dispatcher of a dense model are refused") {
  const std::string message =
      "s.json: /model/moe: top_k, expert_ffn_hidden, capacity_factor, dispatcher, imbalance, shared_experts, "
      "first_dense_layers, layer_pattern, load_balancing, expert_bias and force_balance need model.moe.experts > 0 "
      "(the model is dense)";
  CHECK(error_for({"model.moe.first_dense_layers=1"}) == message);
  CHECK(error_for({pattern(1, 31)}) == message);
  // A dense model dispatches no tokens: the flex dispatcher would do nothing.
  CHECK(error_for({"model.moe.dispatcher=flex"}) == message);
  CHECK(error_for({"model.moe.dispatcher=alltoall"}) == "no error");
}

TEST_CASE("per-head query and key norms are refused beside latent attention or as a non-boolean") {
  CHECK(error_for({"model.qk_norm=true"}) == "no error");
  // Megatron-Core's qk_layernorm under MLA normalizes the latents, which latent attention
  // always runs: the key would change nothing.
  CHECK(error_for({"model=deepseek-v3", "model.qk_norm=true"}) ==
        "--set: model.qk_norm: per-head query and key norms are not those of latent attention (model.mla), whose "
        "latent norms always run; leave it false");
  CHECK(error_for({"model.qk_norm=2"}) == "--set: model.qk_norm: expected true or false, got a number (2)");
}

TEST_CASE("latent attention is refused where its widths do not fit or it is not simulated yet") {
  const std::vector<std::string> ds = {"model=deepseek-v3"};
  auto with = [&](const std::string& more) {
    std::vector<std::string> sets = ds;
    sets.push_back(more);
    return sets;
  };
  CHECK(error_for(ds) == "no error");
  CHECK(error_for(with("model.mla.kv_lora_rank=0")) ==
        "--set: model.mla: q_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim need "
        "model.mla.kv_lora_rank > 0 (latent attention)");
  CHECK(error_for(with("model.head_dim=128")) ==
        "--set: model.head_dim: must be 0 with latent attention, got 128: model.mla gives the heads' widths");
  CHECK(error_for(with("model.kv_heads=8")) ==
        "--set: model.kv_heads: must equal heads (128) with latent attention, got 8: every head has its own key and "
        "value");
  CHECK(error_for(with("model.mla.qk_nope_head_dim=256")) ==
        "--set: model.mla: heads of 320 (query, key) and 128 (value) are wider than the 256 fused attention takes");
  CHECK(error_for({"model=deepseek-v3", "parallel.tp=2", "parallel.sequence_parallel=true"}) == "no error");
  CHECK(error_for({"model=deepseek-v3", "parallel.tp=2", "parallel.sequence_parallel=true",
                   "tensor_parallel.comm_overlap=true"}) ==
        "--set: tensor_parallel.comm_overlap: latent attention (model.mla) with TP communication overlap is not "
        "simulated yet");
  CHECK(error_for(with("parallel.cp=2")) ==
        "--set: parallel.cp: latent attention (model.mla) with cp > 1 is not simulated yet");
  CHECK(error_for(with("training.attention=unfused")) ==
        "--set: training.attention: latent attention (model.mla) with unfused attention is not simulated yet");
}

TEST_CASE("multi-token prediction beside context parallelism is refused as not simulated yet") {
  CHECK(error_for({"model.mtp_layers=1"}) == "no error");
  CHECK(error_for({"model.mtp_layers=1", "parallel.tp=2"}) == "no error");
  CHECK(error_for({"model.mtp_layers=1", "parallel.tp=2", "parallel.sequence_parallel=true"}) == "no error");
  // eh_proj is column-parallel: TP splits its h outputs.
  CHECK(
      error_for({"model.mtp_layers=1", "model.hidden=4100", "model.head_dim=128", "parallel.tp=8", "parallel.dp=1"}) ==
      "--set: parallel.tp: tp 8 does not divide hidden 4100 (multi-token prediction's projection is split by TP)");
  CHECK(error_for({"model.mtp_layers=1", "parallel.cp=2"}) ==
        "--set: parallel.cp: multi-token prediction (model.mtp_layers) with cp > 1 is not simulated yet");
  CHECK(error_for({"model.mtp_layers=17"}) == "--set: model.mtp_layers: must be between 0 and 16, got 17");
}

TEST_CASE("a sliding window as long as the sequence, or a skip frequency without a window, is refused") {
  CHECK(error_for({"model.sliding_window=4096", "model.window_skip_freq=2"}) == "no error");
  CHECK(error_for({"model.sliding_window=8192"}) ==
        "--set: model.sliding_window: must be below model.seq_len (8192), got 8192: a window as long as the sequence "
        "is causal attention");
  CHECK(error_for({"model.window_skip_freq=2"}) ==
        "--set: model.window_skip_freq: needs model.sliding_window > 0 (the layers it leaves unwindowed are all "
        "layers without one), got 2");
  CHECK(error_for({"model.sliding_window=128", "parallel.cp=2"}) ==
        "--set: parallel.cp: sliding-window attention with cp > 1 is not simulated yet");
  CHECK(error_for({"model.sliding_window=128", "training.attention=unfused"}) ==
        "--set: training.attention: sliding-window attention with unfused attention is not simulated yet");
}

TEST_CASE("gpt-oss's clamp, biases and YaRN are refused where they are not simulated") {
  CHECK(error_for(moe({"model.swiglu_limit=7", "model.linear_bias=true", "model.yarn_factor=32"})) == "no error");
  CHECK(error_for({"model.swiglu_limit=7"}) ==
        "--set: model.swiglu_limit: is simulated in the routed experts of a stack of MoE layers only (no dense "
        "layers, no shared experts)");
  CHECK(error_for({"model.linear_bias=true"}) ==
        "--set: model.linear_bias: is simulated in the routed experts of a stack of MoE layers only (no dense "
        "layers, no shared experts)");
  CHECK(error_for(moe({"model.swiglu_limit=7", pattern(2, 30)})) ==
        "--set: model.swiglu_limit: is simulated in the routed experts of a stack of MoE layers only (no dense "
        "layers, no shared experts)");
  CHECK(error_for(moe({"model.linear_bias=true", "model.moe.shared_experts=1"})) ==
        "--set: model.linear_bias: is simulated in the routed experts of a stack of MoE layers only (no dense "
        "layers, no shared experts)");
  CHECK(error_for(moe({"model.swiglu_limit=-1"})) ==
        "--set: model.swiglu_limit: must be between 0 and 1000000, got -1");
  CHECK(error_for(moe({"model.mlp=gelu", "model.swiglu_limit=7"})) ==
        "--set: model.swiglu_limit: clamps SwiGLU's inputs: needs model.mlp \"swiglu\"");
  CHECK(error_for(moe({"model.mlp=gelu", "model.linear_bias=true"})) ==
        "--set: model.linear_bias: is for SwiGLU models: GeLU models (model.mlp \"gelu\") have their biases already");
  CHECK(error_for({"model.yarn_factor=1"}) ==
        "--set: model.yarn_factor: must be above 1 (YaRN extends the context by that factor) or 0 for plain RoPE, "
        "got 1");
  CHECK(error_for({"model.yarn_factor=2000"}) == "--set: model.yarn_factor: must be between 0 and 1024, got 2000");
  CHECK(error_for({"model.mlp=gelu", "model.yarn_factor=32"}) ==
        "--set: model.yarn_factor: scales the rotary embedding: needs model.mlp \"swiglu\" (GeLU models learn "
        "their positions)");
  CHECK(error_for({"model=deepseek-v3", "parallel.ep=8", "model.yarn_factor=40"}) ==
        "--set: model.yarn_factor: with latent attention (model.mla) is not simulated yet");
  CHECK(error_for({"model.yarn_factor=32", "training.framework=torchtitan"}) ==
        "--set: training.framework: model.swiglu_limit, linear_bias and yarn_factor are simulated as Megatron-Core "
        "runs them (megatron or nemo), not torchtitan");
}
