// training.cuda_graph_scope: the parts of each layer Megatron-Core's Transformer Engine CUDA
// graphs replay cost the CPU nothing to issue, the rest is issued op by op; what Megatron-Core
// refuses, what would capture nothing and what is not simulated yet exit with status 2.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cli/run_stepsim.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/program_builder.hpp"
#include "stepsim/report.hpp"
#include "workload/work.hpp"

namespace {

// A small mixture-of-experts model at TP 2 with sequence parallelism, EP 2 on 4 GPUs.
const std::string kGraphMoe = R"({
  "model": {"name": "moe-small", "layers": 2, "hidden": 1024, "heads": 8, "kv_heads": 2, "ffn_hidden": 2048,
            "vocab": 32000, "seq_len": 2048, "mlp": "swiglu", "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 512}},
  "cluster": "dgx-h100-ndr",
  "parallel": {"tp": 2, "pp": 1, "dp": 2, "ep": 2, "sequence_parallel": true},
  "training": {"framework": "megatron", "global_batch": 4, "micro_batch": 1, "cuda_graphs": true},
  "data_parallel": {"kind": "ddp"}
})";
const std::string kGraphDense = R"({
  "model": {"name": "dense-small", "layers": 2, "hidden": 1024, "heads": 8, "kv_heads": 2, "ffn_hidden": 2048,
            "vocab": 32000, "seq_len": 2048, "mlp": "swiglu"},
  "cluster": "dgx-h100-ndr",
  "parallel": {"tp": 2, "pp": 1, "dp": 2, "sequence_parallel": true},
  "training": {"framework": "megatron", "global_batch": 4, "micro_batch": 1, "cuda_graphs": true},
  "data_parallel": {"kind": "ddp"}
})";

struct Costs {
  double attention = 0, router = 0, permute = 0, experts = 0;  // host seconds of layer 0's ops, forward and backward
  double qkv_gather = 0, experts_dispatch = 0;                // host seconds of layer 0's TP gather and EP dispatch
};

// What the CPU pays to issue layer 0's ops of each kind, read from the program itself.
Costs host_costs(const std::vector<std::string>& sets, const std::string& text = kGraphMoe) {
  const stepsim::Scenario s = stepsim::io::load_scenario_text(text, "s.json", sets);
  const auto work = stepsim::workload::build_work(s);
  const stepsim::hardware::GpuModel gpu(s.cluster.gpu, s.training.precision);
  const auto p = stepsim::parallelism::build_program(s, work, gpu);
  Costs c;
  for (const auto& op : p.ranks[0].ops()) {
    const std::string& name = p.names[op.name];
    if (name.find("L0 ") == std::string::npos) continue;
    const double host = p.host_cost(op).seconds();
    if (name.find("flash attention") != std::string::npos) c.attention += host;
    if (name.find("L0 router") != std::string::npos) c.router += host;
    if (name.find("moe permute") != std::string::npos) c.permute += host;
    if (name.find("expert fc") != std::string::npos) c.experts += host;
    if (name.find("AllGather tp L0 qkv fwd") != std::string::npos) c.qkv_gather += host;
    if (name.find("AllToAll ep L0 dispatch,") != std::string::npos) c.experts_dispatch += host;
  }
  return c;
}

}  // namespace

TEST_CASE("A CUDA graph scope replays its part of each layer and leaves the rest to the CPU") {
  // Whole layers (of a dense model: a MoE layer's whole graph is refused, below): nothing of
  // layer 0 costs the CPU.
  const Costs whole = host_costs({}, kGraphDense);
  CHECK(whole.attention == 0);
  CHECK(whole.qkv_gather == 0);
  // Attention only: its kernels and its TP gather are replayed; the router, the permutation,
  // the experts and the EP all-to-all are issued, each at the framework's cost (17 us a
  // kernel, more for the grouped GEMMs).
  const Costs attn = host_costs({R"(training.cuda_graph_scope=["attn"])"});
  CHECK(attn.attention == 0);
  CHECK(attn.qkv_gather == 0);
  // The router's GEMM forward, input and weight gradients and its top-k forward and backward
  // (no balancing loss: one operator each) in each of the 2 micro-batches.
  CHECK(attn.router == Approx(2 * 5 * 17e-6));
  CHECK(attn.permute > 0);
  CHECK(attn.experts > 0);
  CHECK(attn.experts_dispatch > 0);
  // The router and the dispatcher's preprocessing: those two replayed, the attention issued.
  const Costs router = host_costs({R"(training.cuda_graph_scope=["moe_router","moe_preprocess"])"});
  CHECK(router.router == 0);
  CHECK(router.permute == 0);
  // The attention's forward and backward kernels, 5 us launch and 12 us dispatch each, in
  // each of the 2 micro-batches.
  CHECK(router.attention == Approx(2 * 2 * 17e-6));
  CHECK(router.qkv_gather > 0);
  CHECK(router.experts == Approx(attn.experts));
}

TEST_CASE("cuda_graph_scope is refused where Megatron-Core refuses it or it would capture nothing") {
  stepsim::testing::Scratch scratch("cuda-graph-scope-refusals");
  scratch.write("moe.json", kGraphMoe);
  scratch.write("dense.json", kGraphDense);
  const auto refused = [&](const std::string& file, const std::string& sets, const std::string& where,
                           const std::string& message) {
    INFO(file << " " << sets);
    // A JSON pointer is the file's key, a dotted key a --set assignment's.
    const std::string source = where.starts_with("/") ? file : "--set";
    CHECK(refusal(scratch.run("simulate " + file + " " + sets), source + ": " + where + ": " + message) == "");
  };
  const std::string key = "--set 'training.cuda_graph_scope=";
  refused("moe.json", key + "[\"attn\"]' --set training.cuda_graphs=false", "training.cuda_graph_scope",
          "the parts of each layer CUDA graphs capture: set training.cuda_graphs to true");
  refused("moe.json", key + "[\"moe\"]'", "training.cuda_graph_scope", "\"moe\" (the whole MoE block in a graph");
  // Megatron-Core's CUDA graph guide: a whole layer does not capture a MoE layer's varying token
  // counts. Its TransformerConfig: no full recompute with per-layer graphs.
  refused("moe.json", "", "/training/cuda_graph_scope",
          "empty (the whole layer in one graph) with a mixture of experts: Megatron-Core cannot capture a MoE layer "
          "whose token counts vary; name the parts to capture, for instance [\"attn\", \"moe_router\", "
          "\"moe_preprocess\"]");
  refused("dense.json", "--set training.recompute=full", "training.recompute",
          "\"full\" with training.cuda_graphs: Megatron-Core refuses full recompute with per-layer CUDA graphs (only "
          "a full-iteration graph, which stepsim does not simulate, takes it); use selective recompute or no CUDA "
          "graphs");
  CHECK(scratch.run("simulate dense.json --set training.recompute=selective").status == 0);
  refused("moe.json", "--set training.framework=pytorch", "/training/cuda_graphs",
          "whole layers in CUDA graphs with a mixture of experts: a MoE layer's token counts vary, and a graph replays "
          "fixed shapes");
  CHECK(scratch.run("simulate dense.json --set training.recompute=full --set training.cuda_graphs=false").status == 0);
  refused("moe.json", key + "[\"moe_preprocess\"]'", "training.cuda_graph_scope",
          "\"moe_preprocess\" is captured with \"moe_router\" only");
  refused("moe.json", key + "[\"mlp\"]'", "training.cuda_graph_scope",
          "\"mlp\" captures dense MLP blocks and every layer of this model is a mixture of experts");
  // Megatron-Core's TransformerConfig: no moe_preprocess graph for the all-to-all dispatcher with
  // a capacity factor; the flex dispatcher, or dropless routing, keeps it.
  refused("moe.json", key + "[\"moe_router\",\"moe_preprocess\"]' --set model.moe.capacity_factor=1.25",
          "training.cuda_graph_scope",
          "\"moe_preprocess\" with the alltoall dispatcher and a capacity factor (1.25): Megatron-Core does not "
          "capture that preprocessing in a graph");
  CHECK(scratch.run("simulate moe.json " + key + "[\"moe_router\",\"moe_preprocess\"]'").status == 0);
  refused("dense.json", key + "[\"moe_router\"]'", "training.cuda_graph_scope",
          "\"moe_router\" needs a mixture-of-experts model");
  refused("dense.json", key + "[\"attn\"]' --set training.framework=pytorch", "training.framework",
          "training.cuda_graph_scope is Megatron-Core's (megatron or nemo), not pytorch's");
  const auto unknown = scratch.run("simulate dense.json " + key + "[\"full\"]'");
  CHECK(unknown.status == 2);
  CHECK(unknown.err.find("--set: training.cuda_graph_scope[0]: unknown value 'full' (expected one of attn, mlp, moe, "
                         "moe_router, moe_preprocess)") != std::string::npos);
  const auto twice = scratch.run("simulate dense.json " + key + "[\"attn\",\"attn\"]'");
  CHECK(twice.status == 2);
  CHECK(twice.err.find("--set: training.cuda_graph_scope[1]: 'attn' is listed twice") != std::string::npos);
  // What is allowed runs: a dense model's attention and MLP.
  CHECK(scratch.run("simulate dense.json " + key + "[\"attn\",\"mlp\"]'").status == 0);
}

namespace {

// The dense model above with GPT's GeLU MLP, which trains with dropout 0.1 on the attention
// probabilities and on each block's output.
std::string gelu_dense() {
  std::string text = kGraphDense;
  const std::string swiglu = R"("mlp": "swiglu")";
  text.replace(text.find(swiglu), swiglu.size(), R"("mlp": "gelu")");
  return text;
}

}  // namespace

// Megatron-LM's TransformerConfig.__post_init__ (d98e8a64, transformer_config.py), with per-layer
// graphs and selective recompute: "full_cudagraph" is an empty scope (the whole layer);
//   attention_dropout != 0: assert (not full_cudagraph and attn not in scope) or "core_attn" not
//     in recompute_modules, "attention dropout is not supported with graphed attention
//     recomputation";
//   hidden_dropout != 0: assert (not full_cudagraph and mlp not in scope) or "mlp" not in
//     recompute_modules, "hidden dropout is not supported with graphed MLP/MoE recomputation".
// recompute_modules defaults to ["core_attn"]. A model without dropout (SwiGLU, Llama's) passes.
TEST_CASE("Selective recompute of a graphed module is refused beside dropout, as Megatron-Core refuses it") {
  stepsim::testing::Scratch scratch("cuda-graph-recompute");
  scratch.write("gelu.json", gelu_dense());
  scratch.write("swiglu.json", kGraphDense);
  const std::string attention =
      "--set: training.recompute: \"selective\" recompute of the attention core (\"core_attn\"";
  const std::string attention_refused =
      "Megatron-Core refuses it with attention dropout (\"attention dropout is not supported with graphed attention "
      "recomputation\")";
  const std::string mlp_refused =
      "--set: training.recompute: \"selective\" recompute of \"mlp\" inside CUDA graphs (training.cuda_graph_scope "
      "with \"mlp\"): Megatron-Core refuses it with hidden dropout (\"hidden dropout is not supported with graphed "
      "MLP/MoE recomputation\")";
  const std::string selective = " --set training.recompute=selective";
  const std::string scope = " --set 'training.cuda_graph_scope=";
  const std::string modules = " --set 'training.recompute_modules=";
  // The whole layer in a graph, with the default module or core_attn named.
  const auto whole = scratch.run("simulate gelu.json" + selective);
  CHECK(refusal(whole, attention + ", the default module) inside CUDA graphs (whole layers, training.cuda_graph_scope "
                                   "empty)") == "");
  CHECK(refusal(whole, attention_refused) == "");
  CHECK(refusal(scratch.run("simulate gelu.json" + selective + modules + "[\"core_attn\"]'"),
                attention + ") inside CUDA graphs (whole layers") == "");
  CHECK(refusal(scratch.run("simulate gelu.json" + selective + modules + "[\"mlp\"]'"), "recompute of \"mlp\"") == "");
  // The attention block in a graph and its core recomputed; the MLP in a graph and recomputed.
  CHECK(refusal(scratch.run("simulate gelu.json" + selective + scope + "[\"attn\"]'"),
                attention + ", the default module) inside CUDA graphs (training.cuda_graph_scope with \"attn\")") ==
        "");
  CHECK(refusal(scratch.run("simulate gelu.json" + selective + scope + "[\"mlp\"]'" + modules + "[\"mlp\"]'"),
                mlp_refused) == "");
  // A recomputed module outside the graphs runs: the core beside graphed MLPs, the MLP beside
  // graphed attention.
  CHECK(scratch.run("simulate gelu.json" + selective + scope + "[\"mlp\"]'").status == 0);
  CHECK(scratch.run("simulate gelu.json" + selective + scope + "[\"attn\"]'" + modules + "[\"mlp\"]'").status == 0);
  // No dropout: every combination runs.
  CHECK(scratch.run("simulate swiglu.json" + selective).status == 0);
  CHECK(scratch.run("simulate swiglu.json" + selective + scope + "[\"mlp\"]'" + modules + "[\"mlp\"]'").status == 0);
  // The rule is Megatron-Core's: PyTorch's make_graphed_callables is not refused by it.
  CHECK(scratch.run("simulate gelu.json" + selective + " --set training.framework=pytorch").status == 0);
}
