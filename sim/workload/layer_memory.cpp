// Parameters and stored activations of one transformer layer on one GPU.
#include <cmath>

#include "workload/layer.hpp"

namespace stepsim::workload {

long long attention_param_count(const LayerShape& s) {
  const long long h = s.hidden;
  if (!s.mla()) return h * s.qkv_width() + s.q_width() * h;
  const long long q = s.q_heads * s.head_dim;
  const long long queries = s.q_lora > 0 ? h * s.q_lora + s.q_lora + s.q_lora * q : h * q;
  const long long kv =
      h * (s.kv_lora + s.qk_rope) + s.kv_lora + s.kv_lora * s.q_heads * (s.head_dim - s.qk_rope + s.v_dim);
  return queries + kv + s.q_heads * s.v_dim * h;
}

long long layer_expert_param_count(const LayerShape& s) {
  const long long biases = s.expert_bias ? s.expert_fc1_out + s.hidden : 0;
  return s.local_experts * (s.hidden * s.expert_fc1_out + s.expert_ffn * s.hidden + biases);
}

long long layer_linear_param_count(const LayerShape& s) {
  const long long h = s.hidden;
  // attention_param_count holds the latents' norm scales (q_lora and kv_lora elements).
  const long long norms = s.mla() ? (s.q_lora > 0 ? s.q_lora : 0) + s.kv_lora : 0;
  const long long attention = attention_param_count(s) - norms;
  if (!s.moe()) return attention + h * s.fc1_out + s.ffn * h;
  const long long experts = s.local_experts * (h * s.expert_fc1_out + s.expert_ffn * h);
  const long long shared = s.shared_experts * (h * s.shared_fc1_out + s.shared_ffn * h);
  return attention + experts + shared;
}

namespace {

// An MoE layer: attention, the router, the local routed experts and the shared experts
// (GeLU experts without biases), two norms.
long long moe_layer_param_count(const LayerShape& s) {
  const long long h = s.hidden;
  const long long attention = attention_param_count(s);
  const long long shared = s.shared_experts * (h * s.shared_fc1_out + s.shared_ffn * h);
  const long long norms = s.llama_style ? 2 * h : 4 * h;
  // GeLU models' and model.linear_bias's attention biases (q, k, v and the projection); the
  // latter also the router's, one per expert.
  const long long biases = !s.llama_style || s.expert_bias ? s.qkv_width() + h : 0;
  const long long router = s.experts * h + (s.expert_bias ? s.experts : 0);
  return attention + biases + router + layer_expert_param_count(s) + shared + norms;
}

}  // namespace

long long layer_param_count(const LayerShape& s) {
  if (s.moe()) return moe_layer_param_count(s);
  const long long h = s.hidden;
  const long long weights = attention_param_count(s) + h * s.fc1_out + s.ffn * h;
  if (s.llama_style) return weights + 2 * h;  // two RMSNorm scales, no biases
  // Column-parallel biases are split, row-parallel ones (projection, fc2) and the two
  // LayerNorms (scale and shift) are replicated on every TP rank.
  const long long biases = s.qkv_width() + s.fc1_out + 2 * h;
  return weights + biases + 4 * h;
}

namespace {

// Eager PyTorch's SwiGLU, silu(gate) * up (torchtitan's FeedForward, `w2(F.silu(w1(x)) * w3(x))`,
// and its GroupedExperts; Llama's reference code; Megatron's unfused glu): silu saves its input,
// the gate, and the product saves both its operands, so silu's output is kept beside the gate
// and the up projection, `rows` of `width` elements. A fused SwiGLU (Transformer Engine's,
// Megatron's bias_swiglu, torch.compile's) keeps the gate and the up projection alone and
// recomputes silu in its backward.
double eager_silu_output(const LayerShape& s, double rows, long long width) {
  if (!s.eager || !s.llama_style) return 0.0;
  return rows * static_cast<double>(width) * s.act_bytes;
}

// What a dense layer's MLP keeps past its input: fc1's output, fc2's input as fc2 keeps it, and
// under eager PyTorch silu's output. Megatron's `mlp` recompute drops it with the input.
double dense_mlp_activations(const LayerShape& s) {
  const double tokens = static_cast<double>(s.tokens());
  return tokens * (static_cast<double>(s.fc1_out) * s.act_bytes + static_cast<double>(s.ffn) * s.saved_input_bytes) +
         eager_silu_output(s, tokens, s.ffn);
}

// The clamped copy of the routed experts' fc1 output (model.swiglu_limit), which the fused
// activation saves beside the fc1 output the clamps save (fused_bias_geglu.py).
double clamped_fc1(const LayerShape& s) {
  if (!s.clamps_swiglu) return 0.0;
  return static_cast<double>(s.routed_tokens() * s.etp * s.expert_fc1_out) * s.act_bytes;
}

// The activation's output that ungated experts keep for the product with the probabilities
// when Megatron-Core weighs the copies in the experts (below); gated experts weigh them in
// the fused activation, which keeps no output.
double weighted_output(const LayerShape& s) {
  const bool gated = s.expert_fc1_out > s.expert_ffn;
  if (!s.weighs_in_experts || gated) return 0.0;
  return static_cast<double>(s.routed_tokens() * s.etp * s.expert_ffn) * static_cast<double>(s.act_bytes);
}

// What weighing the routed copies by their router probabilities keeps. Megatron-Core weighs
// them in the experts (Megatron-LM 2659630721, 2025-04-09; TEGroupedMLP.bias_act_func at
// 4415119414, 2026-05): gated experts in the fused activation (weighted_bias_swiglu_impl and
// weighted_bias_quick_geglu_impl, whose WeightedSwiGLUFunction saves its input, counted with
// the experts, and the fp32 probabilities), others by multiplying the activation's output by
// the probabilities (which keeps that output and the probabilities); the unpermutation then
// sums the expert outputs unweighted (moe_utils.unpermute without probs: only its index map
// is saved). Elsewhere the expert outputs are weighted in the combine, which keeps them, top_k
// copies of each token's hidden state, in fp32 under eager torchtitan (weighs_in_fp32).
double routing_weights(const LayerShape& s) {
  constexpr double fp32 = 4.0;
  const double routed = static_cast<double>(s.routed_tokens() * s.etp);
  if (!s.weighs_in_experts) {
    const double bytes = s.weighs_in_fp32 ? fp32 : static_cast<double>(s.act_bytes);
    return static_cast<double>(s.norm_tokens() * s.top_k * s.hidden) * bytes;
  }
  return routed * fp32 + weighted_output(s);
}

// What an MoE MLP keeps for its backward: the router's fp32 probabilities, each routed copy's
// expert input, activation input (and its clamped copy) and fc2 input, what weighing the
// copies by their probabilities keeps (routing_weights), and the shared experts' fc1 output
// and fc2 input.
double moe_activations(const LayerShape& s) {
  const double ab = s.act_bytes;
  const double in = s.saved_input_bytes;  // the expert GEMMs' inputs, as their Linear layers keep them
  const double n = static_cast<double>(s.norm_tokens());
  const double routed = static_cast<double>(s.routed_tokens() * s.etp);
  const double h = static_cast<double>(s.hidden);
  const double experts =
      routed * (h * in + static_cast<double>(s.expert_fc1_out) * ab + static_cast<double>(s.expert_ffn) * in) +
      clamped_fc1(s) + eager_silu_output(s, routed, s.expert_ffn);
  const double combine = routing_weights(s);
  const double shared_rows = static_cast<double>(s.tokens() * s.shared_experts);
  const double shared =
      shared_rows * (static_cast<double>(s.shared_fc1_out) * ab + static_cast<double>(s.shared_ffn) * in) +
      eager_silu_output(s, shared_rows, s.shared_ffn);
  return n * static_cast<double>(s.experts) * 4.0 + experts + combine + shared;
}

// What Megatron-Core's selective recompute of the listed modules keeps off the layer's stored
// activations (each module's inputs stay: they are its checkpoint's). layernorm: the output of
// each standalone norm (before MLA's down projections; before a MoE layer's router and
// dispatch). mla_up_proj: the normed latents the fused up projections save and the queries,
// keys and values (core_attn_out's hook frees them, the attention's saved copies with them).
// mlp (dense layers): fc1's input, activation input and fc2's input. moe_act: the routed
// experts' activation output, fc2's input (TE's fc2 saves it unquantized for this,
// set_save_original_input), the clamped copy of fc1's output and ungated experts' weighted
// activation output (weighted_output).
double selective_savings(const LayerShape& s) {
  const double ab = s.act_bytes;
  const double in = s.saved_input_bytes;
  const double rows = static_cast<double>(s.norm_tokens());
  const double tokens = static_cast<double>(s.tokens());
  const double h = static_cast<double>(s.hidden);
  double saved = 0.0;
  // The norm before latent attention feeds its down projections (kept as they keep inputs);
  // the one before a MoE layer feeds the router, which keeps it in bf16.
  if (s.recomputes(RecomputeModule::layernorm)) saved += ((s.mla() ? in : 0.0) + (s.moe() ? ab : 0.0)) * rows * h;
  if (s.recomputes(RecomputeModule::mla_up_proj) && s.mla()) {
    saved += rows * static_cast<double>(s.q_lora + s.kv_lora) * in;
    saved += tokens * static_cast<double>(s.q_heads * (2 * s.head_dim + s.v_dim)) * ab;
  }
  if (s.recomputes(RecomputeModule::mlp) && !s.moe()) saved += rows * h * in + dense_mlp_activations(s);
  if (s.recomputes(RecomputeModule::moe_act) && s.moe()) {
    const double routed = static_cast<double>(s.routed_tokens() * s.etp);
    saved += routed * static_cast<double>(s.expert_ffn) * in + clamped_fc1(s) + weighted_output(s) +
             eager_silu_output(s, routed, s.expert_ffn);
  }
  return saved;
}

}  // namespace

Bytes layer_activations(const LayerShape& s, Recompute recompute) {
  // Korthikanti et al. 2022 §4: with A bytes per element, per layer
  //   replicated over TP (split s/t with SP): two norm inputs, QKV and fc1 inputs, two
  //   1-byte dropout masks — 10·sbh for GPT;
  //   split by TP: Q, K, V, projection input, activation input, fc2 input — 24·sbh/t;
  //   attention scores: softmax output, dropout mask and output — 5·a·s²·b/t.
  const double ab = s.act_bytes;
  const double rs = s.stream_bytes();  // the residual stream's: fp32 under autocast
  const double rows = static_cast<double>(s.norm_tokens());
  const double tokens = static_cast<double>(s.tokens());
  const double h = static_cast<double>(s.hidden);
  if (recompute == Recompute::full) return Bytes(std::llround(rows * h * rs));  // layer input
  if (recompute == Recompute::selective_op) {
    // torchtitan's per-op selective checkpointing keeps the block input, the attention output
    // with its log-sum-exp, and the outputs of wq, wv, w1 (half of fc1) and w2; the rest is
    // recomputed from them. Compiled (fused element-wise work), the partitioner saves only what
    // the backward reads, and no backward reads w2's output (the residual add needs nothing).
    const double kept_widths = static_cast<double>(s.q_width() + s.kv_width() + s.q_width() + s.fc1_out / 2);
    const double lse = static_cast<double>(s.batch * s.q_heads * s.seq) * 4.0;
    const double hidden_bytes = rs + (s.eager ? ab : 0.0);  // the block input, and eager w2's output
    return Bytes(std::llround(hidden_bytes * rows * h + tokens * kept_widths * ab + lse));
  }
  const double masks = s.dropout() ? 2.0 : 0.0;
  // Norm inputs in the residual stream's precision; the QKV input and the MLP's (a dense fc1's as
  // its Linear keeps it; a MoE layer's router keeps its input in bf16).
  const double in = s.saved_input_bytes;
  double replicated = rows * h * (2.0 * rs + in + (s.moe() ? ab : in) + masks);
  // torchtitan's sequence parallelism all-gathers the attention's and the MLP's inputs
  // (PrepareModuleInput: Shard(1) to Replicate()) and their nn.Linear layers save the gathered
  // tensors for the weight gradient: both inputs kept whole, s·b·h each rather than s·b·h/t (in
  // the GEMMs' precision: FP8 all-gathers FP8). Selective recompute of the attention core keeps
  // them too; full and per-op selective recompute return above (the all-gathers are re-run).
  if (s.keeps_gathered_inputs())
    replicated += 2.0 * (tokens - rows) * h * static_cast<double>(element_bytes(s.precision));
  // Q, K, V and the attention output; torchtitan's eager attention keeps K and V repeated to
  // the query heads.
  const long long kept_kv_width = s.keeps_repeated_kv() ? s.q_width() : s.kv_width();
  double attention_widths = static_cast<double>(s.q_width() + 2 * kept_kv_width + s.q_width());
  // Latent attention keeps its latents (each before and after its norm) on the rank's rows, as
  // the up projections keep their inputs before the gather; Q and K of qk_nope + qk_rope per
  // head, V and the attention output of v_dim per head on every token.
  double latents = 0.0;
  if (s.mla()) {
    attention_widths = static_cast<double>(s.q_heads * (2 * s.head_dim + 2 * s.v_dim));
    latents = rows * (static_cast<double>(s.q_lora + s.kv_lora + s.qk_rope) * ab +
                      static_cast<double>(s.q_lora + s.kv_lora) * in);
  }
  // The attention keeps its output for its backward; a quantizing projection keeps its own
  // quantized copy besides.
  const double projection_copy = in < ab ? tokens * static_cast<double>(s.q_heads * s.value_dim()) * in : 0.0;
  const double mlp = s.moe() ? moe_activations(s) : dense_mlp_activations(s);
  // model.qk_norm: Megatron-Core's q_layernorm and k_layernorm (Transformer Engine's RMSNorm,
  // which saves its input made contiguous and the fp32 inverse RMS of each row for its
  // backward): each head's query and key before the norm, copies of their own rather than
  // views of the QKV output (the query's reshape across the groups copies it, the key's slice is
  // not contiguous), and one fp32 figure per token and head.
  const double qk_norms = s.qk_norm ? tokens * (static_cast<double>(s.q_width() + s.kv_width()) * ab +
                                                static_cast<double>(s.q_heads + s.kv_heads) * 4.0)
                                    : 0.0;
  const double split = tokens * attention_widths * ab + projection_copy + latents + qk_norms + mlp;
  const double heads = static_cast<double>(s.batch * s.q_heads);
  const double seq = static_cast<double>(s.seq);
  double attention = 0.0;
  if (fused_attention(s.attention)) {
    attention = heads * seq * 4.0;  // fp32 log-sum-exp per row; scores never stored
  } else if (recompute == Recompute::none || !s.recomputes(RecomputeModule::core_attn)) {
    attention = heads * seq * seq * (s.dropout() ? 2.0 * ab + 1.0 : ab);
  }
  const double saved = recompute == Recompute::selective ? selective_savings(s) : 0.0;
  return Bytes(std::llround(replicated + split + attention - saved));
}

}  // namespace stepsim::workload
