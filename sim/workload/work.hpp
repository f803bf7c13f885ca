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
  optimizer,
  // Mixture-of-experts layers, in place of fc1, activation and fc2.
  router,
  // Megatron-Core's all-to-all dispatcher's count of the tokens per expert before the
  // permutation, whose split sizes the EP group gathers and the host reads: forward only.
  moe_counts,
  moe_permute,
  // Megatron-Core's all-to-all dispatcher's sort of the received tokens into runs by local
  // expert (moe_sort) and of the experts' output back by source rank (moe_unsort).
  moe_sort,
  expert_fc1,
  expert_activation,
  expert_fc2,
  moe_unsort,
  moe_unpermute,
  shared_fc1,
  shared_activation,
  shared_fc2,
  // A GEMM's casts: a low-precision GEMM's input quantization (with its amax and transposed
  // copy), or autocast's bf16 copies of a Linear layer's weights and their gradients' fp32 casts.
  fp8_cast,
  rotary,   // rotary position embedding of the queries and keys (Llama-style models)
  qk_norm,  // each head's query and key RMS-normalized before the rotary embedding (Qwen3)
  // Multi-token prediction's own work beside its transformer layer: the next tokens' embedding
  // lookup and the norms (mtp), the projection of the two normed streams (mtp_projection).
  mtp,
  mtp_projection,
  // Multi-head latent attention's down projections of the hidden state to the query latent
  // (q_down) and to the key/value latent with the shared rotary key (kv_down): whole on every
  // TP rank (Megatron-Core's duplicated TELinear), over the rank's own tokens.
  q_down,
  kv_down,
  // The routed experts' fc2 bias, which Megatron-Core's TEGroupedMLP adds expert by expert
  // after the grouped GEMM (gpt-oss: model.linear_bias).
  expert_bias
};

enum class Pass : std::uint8_t { forward, backward_data, backward_weight, backward };

struct OpCost {
  std::string name;  // "fc1", "attention core"
  Role role = Role::qkv;
  Role cast_of = Role::fp8_cast;  // a cast (Role::fp8_cast): the role of the GEMM it casts for
  Pass pass = Pass::forward;
  OpClass cls = OpClass::gemm;
  double flops = 0;               // per GPU
  Bytes bytes{0};                 // HBM traffic per GPU
  long long m = 0, n = 0, k = 0;  // GEMM shape per GPU (gemm only)
  // A low-precision GEMM: the Linear layers' forward, dgrad and wgrad under FP8, MXFP8 or
  // NVFP4 training (Transformer Engine, torchao Float8Linear), in training.precision's format;
  // attention, the LM head and element-wise work stay BF16.
  bool fp8 = false;
  // Fused attention run by FlashAttention-2 (training.attention "flash2").
  bool flash2 = false;
  // A grouped GEMM (the local experts' GEMMs in one kernel): this many GEMMs of equal shares
  // of the m rows, each as efficient as a GEMM of its own size.
  long long groups = 1;
  // Kernels the host launches for the op, beside its one dispatch (a GEMM: one per group; a
  // low-precision cast: one per quantize kernel of each tensor it quantizes).
  long long launches = 1;
  // An element-wise op whose backward autograd runs as kernels of other traffic than twice the
  // forward's (eager chains of PyTorch operators): their HBM bytes; zero: twice the forward's.
  Bytes backward_bytes{0};
  // PyTorch operators the host issues for it, each at the framework's cost per operator (an
  // eager chain or a Python loop of them); its backward's where that differs (0: the same).
  int operators = 1;
  int backward_operators = 0;
  // The host waits for the GPU's stream before it issues the op (a synchronising copy).
  bool host_sync = false;
  // A weight-gradient GEMM (or a bias's gradient) under autocast: what it writes is in the GEMM's
  // precision, and the cast after it (Role::fp8_cast, cast_of its role) makes the fp32 gradient
  // of the parameter, so that cast, not this op, produces it.
  bool gradient_cast_follows = false;
  // A recomputed row-parallel GEMM whose reduce-scattered output the checkpoint saved
  // (torchtitan's per-op selective checkpointing keeps reduce_scatter_tensor's output): its
  // ReduceScatter is not issued again.
  bool reduced_output_saved = false;
  // A forward op re-run inside its block's backward list, before the backward that needs what it
  // makes (a multi-token-prediction depth's recomputed layer, which runs in the head's block).
  bool recomputed = false;
};

struct LayerWork {
  std::vector<OpCost> forward;  // execution order
  // The forward of each model chunk's first micro-batch in a step, where it differs (empty
  // otherwise): its low-precision casts also quantize the weights, which the framework then
  // reuses until the optimizer step (LayerShape::cached_weights).
  std::vector<OpCost> first_forward;
  std::vector<OpCost> recompute;     // re-run before backward (selective: attention core; full: all)
  std::vector<OpCost> backward;      // execution order; each GEMM's dgrad before its wgrad
  Bytes params{0};                   // parameter bytes per GPU (training precision)
  long long param_count = 0;         // parameters per GPU
  Bytes activations{0};              // activation memory kept per micro-batch (Korthikanti)
  Bytes backward_working{0};         // allocated beside `activations` while its backward runs (the loss's)
  // The head's block: what each multi-token-prediction depth's recompute makes again, held from its
  // last recomputed op to its last backward op.
  Bytes mtp_recompute_working{0};
  Bytes tp_message{0};               // b·s·h elements of the precision: one TP collective's S
  Bytes rope_message{0};             // latent attention's shared rotary key of b·s tokens: its SP AllGather's S
  Bytes kv_block{0};                 // K and V of this rank's b·s/cp tokens: one CP ring step's message
  Bytes kv_grad_block_f32{0};        // their gradients in float32, as PyTorch's context_parallel passes them
  long long expert_param_count = 0;  // of param_count: routed experts' weights (reduced over expert DP)
  long long linear_param_count = 0;  // of param_count: Linear layers' weights (layer_linear_param_count)
  Bytes dispatch_message{0};         // routed tokens the busiest EP rank receives: one all-to-all's S
  Bytes expert_tp_message{0};        // those of its ETP group, gathered: one ETP AllGather's S
};

struct ModelWork {
  LayerWork layer;          // a transformer layer: an MoE layer in a mixture-of-experts model
  LayerWork dense_layer;    // the dense layers of a stack that mixes them with MoE layers
  std::vector<bool> dense;  // per layer, whether it is a dense_layer; empty: every layer is `layer`
  // Sliding-window attention: the layers above with a windowed attention core, and which are.
  LayerWork windowed_layer;
  LayerWork windowed_dense_layer;
  std::vector<bool> windowed;           // empty: no layer is windowed
  LayerWork pre;                        // embedding (first stage)
  LayerWork post;                       // final norm, LM head, loss (last stage)
  OpCost optimizer;                     // one optimizer step over this GPU's parameters (before DP sharding)
  long long optimizer_params = 0;       // the parameters it covers: the most loaded stage's
  double model_flops_per_step = 0;      // whole model, whole global batch, no recompute
  double recompute_flops_per_step = 0;  // what the GPUs execute beyond the model FLOPs
  long long params_total = 0;           // whole model

  // The work of transformer layer `index` (counted from 0).
  const LayerWork& block(int index) const {
    const auto i = static_cast<std::size_t>(index);
    const bool is_dense = !dense.empty() && dense[i];
    if (!windowed.empty() && windowed[i]) return is_dense ? windowed_dense_layer : windowed_layer;
    return is_dense ? dense_layer : layer;
  }
};

// The shape of one GEMM of a GEMM op: of a grouped GEMM one group's, whose tokens are a
// `groups` share of M in the forward and the data gradient and of K in the weight gradient
// (what a measured table times, and what `calibrate plan` names); else the op's own.
struct GemmShape {
  long long m = 0, n = 0, k = 0;
};
GemmShape one_gemm(const OpCost& op);

// The work of one micro-batch of `scenario` on one GPU. SwiGLU models follow Llama (RMSNorm,
// no biases or dropout, rotary positions), GeLU models GPT (LayerNorm, biases, dropout,
// learned positions). MoE layers route each token to top_k of the experts (router, permute,
// grouped expert GEMMs, unpermute) plus any shared experts, in place of the dense MLP.
ModelWork build_work(const Scenario& scenario);

// The whole model's parameters as the simulator counts them (ModelWork::params_total): every
// layer's, the embedding's and the head's, multi-token prediction's depths. `model` may leave
// kv_heads and ffn_hidden 0 (their defaults).
long long model_parameters(const ModelSpec& model);

// How ModelWork::model_flops_per_step counts a model's FLOPs (the report's flop_convention):
// the convention for every model, with what the model's own layers add to it (a mixture of
// experts' active weights, latent attention's head widths, multi-token prediction's depths,
// sliding-window layers' query-key pairs), so that MFU can be reproduced from the text.
std::string flop_convention(const ModelSpec& model);

// One optimizer step (Adam, or SGD with momentum) over `params` parameters: memory-bound, its
// bytes per parameter from the precisions of the main gradient and the moments (model.cpp).
OpCost optimizer_step(long long params, const TrainingSpec& training);

// Under fp16 mixed precision, the framework's check of `params` gradients for overflow before
// the optimizer step (LossScaling, stepsim/framework.hpp): Megatron-Core's and GradScaler's
// _amp_foreach_non_finite_check_and_unscale_ reads and writes each gradient; DeepSpeed's
// _has_inf_or_nan casts each to fp32 (read, write 4 B) and sums it (read 4 B). No bytes where
// the framework does not scale the loss.
OpCost overflow_check(long long params, const TrainingSpec& training);

// The first of gradient clipping's passes (the read of every gradient for the global norm),
// which optimizer_step counts among its own.
OpCost gradient_norm(long long params, const TrainingSpec& training);

}  // namespace stepsim::workload
