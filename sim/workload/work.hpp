// The model as work: per-layer forward and backward ops with FLOPs, bytes, parameters and
// activations, already sharded by tensor (and sequence) parallelism.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepsim/scenario.hpp"
#include "stepsim/units.hpp"

namespace stepsim::workload {

enum class OpClass : std::uint8_t { gemm, attention, elementwise, norm, embedding, loss, optimizer };

// Where an op sits in a Megatron transformer layer; the tensor-parallel strategy places its
// collectives by role (Megatron-LM's layers).
enum class Role : std::uint8_t {
  input_norm,
  qkv,
  attention_core,
  attn_proj,
  attn_residual,
  post_norm,
  fc1,
  activation,
  fc2,
  mlp_residual,
  embedding,
  final_norm,
  lm_head,
  loss,
  optimizer
};

enum class Pass : std::uint8_t { forward, backward_data, backward_weight, backward };

struct OpCost {
  std::string name;  // "fc1", "attention core"
  Role role = Role::qkv;
  Pass pass = Pass::forward;
  OpClass cls = OpClass::gemm;
  double flops = 0;               // per GPU
  Bytes bytes{0};                 // HBM traffic per GPU
  long long m = 0, n = 0, k = 0;  // GEMM shape per GPU (gemm only)
};

struct LayerWork {
  std::vector<OpCost> forward;    // execution order
  std::vector<OpCost> recompute;  // re-run before backward (selective: attention core; full: all)
  std::vector<OpCost> backward;   // execution order; each GEMM's dgrad before its wgrad
  Bytes params{0};                // parameter bytes per GPU (training precision)
  long long param_count = 0;      // parameters per GPU
  Bytes activations{0};           // activation memory kept per micro-batch (Korthikanti)
  Bytes tp_message{0};            // b·s·h elements of the precision: one TP collective's S
};

struct ModelWork {
  LayerWork layer;                  // every transformer layer is the same
  LayerWork pre;                    // embedding (first stage)
  LayerWork post;                   // final norm, LM head, loss (last stage)
  OpCost optimizer;                 // one optimizer step over this GPU's parameters (before DP sharding)
  double model_flops_per_step = 0;  // whole model, whole global batch, no recompute
  long long params_total = 0;       // whole model
};

// The work of one micro-batch of `scenario` on one GPU. SwiGLU models follow Llama (RMSNorm,
// no biases or dropout, rotary positions), GeLU models GPT (LayerNorm, biases, dropout,
// learned positions). MoE dimensions are accepted but the MLP is modelled as dense ffn_hidden.
ModelWork build_work(const Scenario& scenario);

// One Adam step over `params` parameters (memory-bound; bytes per parameter in work.cpp).
OpCost optimizer_step(long long params, Precision precision);

}  // namespace stepsim::workload
