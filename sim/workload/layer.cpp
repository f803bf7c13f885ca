// The ops of one transformer layer (Megatron-LM order): norm, QKV, attention core, projection,
// residual, norm, fc1, activation, fc2, residual; and their backward and recomputation.
#include "workload/layer.hpp"

#include <algorithm>
#include <cmath>

#include "workload/autocast.hpp"
#include "workload/op_builder.hpp"

namespace stepsim::workload {
namespace {

// Vector FLOPs per element; small next to the bytes, they only keep the roofline honest.
constexpr double norm_flops = 8.0;
constexpr double softmax_flops = 5.0;
constexpr double activation_flops = 8.0;

// Bytes per element of a norm of the residual stream under autocast (r = 4 bytes in, a = 2):
// PyTorch's LayerNorm on autocast's fp32 list reads and writes fp32, 2r; eager RMSNorm on the
// fp32 stream has no casts to make (x.float() and type_as(x) return x), so pow (2r), mean (r),
// the product by rsqrt (2r) and the product by the fp32 weight (2r), 7r; a fused kernel
// (torch.compile) writes the bf16 copy its Linear layers take, r + a, the cast fused into it.
double autocast_norm_bytes(const LayerShape& s) {
  const double r = s.stream_bytes();
  if (!s.eager) return r + s.act_bytes;
  return s.llama_style ? 7.0 * r : 2.0 * r;
}

OpCost residual(const char* name, Role role, const LayerShape& s) {
  // Fused bias-dropout-add: read the branch and the residual, write the sum (and a 1-byte
  // dropout mask when the model trains with dropout). Under autocast the stream (r bytes) is
  // fp32 and the branch (a) bf16.
  const double a = s.act_bytes;
  const double r = s.stream_bytes();
  const double mask = s.dropout() ? 1.0 : 0.0;
  const auto e = static_cast<double>(s.norm_tokens() * s.hidden);
  OpCost op = elementwise(name, role, OpClass::elementwise, s.norm_tokens() * s.hidden, a + 2.0 * r + mask, 2.0);
  if (s.eager && !s.dropout() && s.autocast) {
    // Backward: the add's gradient passes through; the autograd engine casts the bf16 branch's
    // (validate_outputs: a gradient is made its input's dtype), r + a; the stream's input, read
    // by the add and by the next norm, gets its two gradients summed (InputBuffer::add), 3r.
    op.backward_bytes = Bytes(std::llround(e * (4.0 * r + a)));
    op.backward_operators = 2;
  }
  if (!(s.eager && s.dropout())) return op;
  // Eager runs Megatron's unfused bias-dropout-add: the bias add (read, write), the dropout
  // (read, write, mask) and the add (two reads, a write), three operators and kernels. Autograd
  // runs three too: the add's gradient passes through, the dropout's is the gradient times
  // the mask (native_dropout_backward: both read, the gradient written), the bias's the sum of
  // the gradient over the rows (the engine's sum_to to the broadcast bias's shape: a read), and
  // the residual stream's input, used by the add and by the next norm, gets its two gradients
  // summed (InputBuffer::add: two reads, a write). Under autocast the bias is fp32, so the bias
  // add already writes fp32 (type promotion), and the engine casts the branch's gradient to
  // bf16, one more kernel (r + a).
  op.bytes = Bytes(std::llround(e * (a + 6.0 * r + 1.0)));
  op.backward_bytes = Bytes(std::llround(e * (6.0 * r + 1.0 + (s.autocast ? r + a : 0.0))));
  op.operators = 3;
  op.backward_operators = s.autocast ? 4 : 3;
  return op;
}

// The gradient of a Linear layer's bias where eager autograd computes it apart: the output
// gradient summed over the rows (AddmmBackward0's gradient for the broadcast bias, reduced by
// the engine's sum_to; Megatron's unfused linear_with_grad_accumulation: grad_output.sum(0)),
// one kernel reading the gradient. The attention projection's and fc2's biases are the eager
// residual's own bias add, and their gradients its backward's.
OpCost bias_gradient(const OpCost& gemm_op, const LayerShape& s) {
  OpCost op = elementwise(gemm_op.name + " bias gradient", gemm_op.role, OpClass::elementwise, gemm_op.m * gemm_op.n,
                          s.act_bytes, 1.0);
  op.pass = Pass::backward;
  return op;
}

// The biased Linear layers whose bias no other op adds: qkv and fc1 of an eager GeLU (GPT)
// layer. Fused kernels (Transformer Engine's, Inductor's) fold the bias gradient into theirs.
bool separate_bias_gradient(const OpCost& op, const LayerShape& s) {
  if (!s.eager || s.llama_style || op.cls != OpClass::gemm) return false;
  return op.role == Role::qkv || op.role == Role::fc1;
}

OpCost activation(const LayerShape& s, const char* prefix, Role role, long long elements) {
  // GeLU reads and writes ffn elements (one kernel in eager mode too); fused SwiGLU reads gate
  // and up (2·ffn) and writes ffn; eager runs silu (read, write) and the product (two reads,
  // a write) apart.
  double bytes = (s.llama_style ? 3.0 : 2.0) * s.act_bytes;
  if (s.eager && s.llama_style) bytes = 5.0 * s.act_bytes;
  OpCost op = elementwise(std::string(prefix) + (s.llama_style ? "swiglu" : "gelu"), role, OpClass::elementwise,
                          elements, bytes, activation_flops);
  if (s.eager && s.llama_style) {
    // F.silu(gate) * up: silu and mul; autograd's mul backward makes both factors' gradients
    // (two products) and silu_backward the gate's.
    op.operators = 2;
    op.backward_operators = 3;
  }
  return op;
}

// YaRN's rotary embedding as Megatron-Core applies it: cos and sin scaled by the attention factor
// 0.1·ln(factor) + 1, which Transformer Engine's fused RoPE does not take, so apply_rotary_pos_emb
// runs _apply_rotary_pos_emb_bshd in PyTorch operators (rope_utils.py) on the queries and on the
// keys. Per element (a bytes each): t·cos (2a), the negated half (a) and the rotated
// concatenation (2a), ·sin (2a), the sum (3a) and the final concatenation with the empty
// unrotated part (2a), 12a; autograd runs ·sin (2a), the negation (a), the halves' concatenation
// (2a), ·cos (2a), the sum of the two branches' gradients (3a) and the two slices' backward, each
// a zeroed full-size tensor (the empty unrotated one's added in, 4a; the rotated one's copied
// into, 3a): 17a.
OpCost yarn_rotary(const LayerShape& s, long long width) {
  const double a = s.act_bytes;
  OpCost op =
      elementwise("rotary embedding (unfused)", Role::rotary, OpClass::elementwise, s.tokens() * width, 12.0 * a, 6.0);
  op.backward_bytes = Bytes(std::llround(static_cast<double>(s.tokens() * width) * 17.0 * a));
  // On the queries and on the keys: cos and sin each computed, scaled and cast (6), the six
  // operators above (12 per tensor); autograd's ten per tensor.
  op.operators = 2 * (6 + 6);
  op.backward_operators = 2 * 10;
  return op;
}

// Rotary position embedding of the queries and keys (Llama-style models): a fused kernel
// reads and writes each element once; eager PyTorch (Llama's reference code, torchtitan's
// apply_rotary_emb) upcasts to fp32, multiplies as complex numbers and casts back, three
// kernels.
OpCost rotary(const LayerShape& s, long long width) {
  constexpr double fp32 = 4.0;
  const double a = s.act_bytes;
  if (s.unfused_rope && !s.eager) return yarn_rotary(s, width);
  const double bytes = s.eager ? (a + fp32) + 2.0 * fp32 + (fp32 + a) : 2.0 * a;
  OpCost op = elementwise("rotary embedding", Role::rotary, OpClass::elementwise, s.tokens() * width, bytes, 6.0);
  if (s.eager) {
    // Per tensor, the queries and the keys: x.float() (reshape and view_as_complex are views),
    // the complex product with freqs_cis (view_as_real and flatten views), type_as: 3 kernels.
    // Autograd's: the gradient cast to fp32, the product with freqs_cis.conj() (mul has no
    // conjugate-bit kernel, so PyTorch's conjugate fallback first copies the small freqs_cis
    // resolved) and the cast back: 4.
    op.operators = 2 * 3;
    op.backward_operators = 2 * 4;
  }
  return op;
}

// Megatron-Core's all-to-all dispatcher receives the routed tokens grouped by source rank and
// sorts them into runs by local expert before the experts (dispatch_postprocess), and the
// experts' output back by source rank before the combine (combine_preprocess), both by
// sort_chunks_by_idxs: with moe_permute_fusion Transformer Engine's moe_sort_chunks_by_index,
// whose sort_chunks_by_map kernel reads and writes each routed token, the dispatch's sort with
// its router probability. After an ETP gather it sorts the group's tokens. Forward, a Triton
// kernel maps the chunks to their rows first (make_chunk_sort_map, a few bytes a token): two
// kernels, each launched from Python at the framework's cost per operator; backward the sort
// alone, over the saved map.
OpCost chunk_sort(const char* name, Role role, long long routed, const LayerShape& s) {
  const double a = s.act_bytes;
  const double probs = role == Role::moe_sort ? 2.0 * a / static_cast<double>(s.hidden) : 0.0;
  OpCost op = elementwise(name, role, OpClass::elementwise, routed * s.hidden, 2.0 * a + probs, 0.0);
  op.operators = 2;
  op.backward_operators = 1;
  return op;
}

// Qwen3's per-head norms of the queries and keys (Megatron-Core's qk_layernorm:
// SelfAttention.get_query_key_value_tensors runs q_layernorm, then k_layernorm, each a
// Transformer Engine RMSNorm over the head width) on every token of the local heads, after the
// QKV projection and before the rotary embedding. Their 2·head_dim weights are left out of the
// parameters.
void append_qk_norms(const LayerShape& s, std::vector<OpCost>& ops) {
  ops.push_back(with_norm_operators(
      elementwise("q rmsnorm", Role::qk_norm, OpClass::norm, s.tokens() * s.q_width(), norm_bytes(s), norm_flops), s));
  ops.push_back(with_norm_operators(
      elementwise("k rmsnorm", Role::qk_norm, OpClass::norm, s.tokens() * s.kv_width(), norm_bytes(s), norm_flops), s));
}

// gpt-oss's clamp of the experts' SwiGLU inputs (model.swiglu_limit), as Megatron-Core's
// weighted_bias_quick_geglu_impl runs it before its fused activation (fused_bias_geglu.py):
// PyTorch's clamp of the gate half from above and of the linear half both ways, then their
// concatenation, per element of fc1's output (a bytes each) 2a + 2a. Autograd's clamp_backward
// is a where over comparison masks (1 byte each): the gate half's ≤ (a + 1) and where (2a + 1),
// the linear half's ≥ and ≤ (2a + 2), their logical_and (3) and where (2a + 1); then the chunk's
// concatenation of the halves' gradients (2a): 5.5a + 4 per element. Under moe_act recompute it
// is re-run with the activation (role expert_activation).
OpCost swiglu_clamp(const LayerShape& s, long long elements) {
  const double a = s.act_bytes;
  OpCost op =
      elementwise("expert activation clamp", Role::expert_activation, OpClass::elementwise, elements, 4.0 * a, 1.0);
  op.backward_bytes = Bytes(std::llround(static_cast<double>(elements) * (5.5 * a + 4.0)));
  op.operators = 3;           // two clamps, the concatenation
  op.backward_operators = 7;  // ≤ and where; ≥, ≤, logical_and and where; the concatenation
  return op;
}

// The routed experts' fc2 bias (model.linear_bias): Megatron-Core's TEGroupedMLP keeps it out of
// the grouped GEMM (skip_bias_add) and adds it weighted by the router's probability in a Python
// loop over the local experts (_apply_bias: t + b·p per expert, then torch.cat), per element of
// the experts' output bias·prob (a), the sum (3a) and the concatenation (2a); autograd runs the
// bias's gradient (grad·p, 2a, summed over the rows, a), the probability's (grad·b, 2a, summed
// along the row, a) and the split's concatenation of the experts' gradients (2a), 8a. The fc1
// bias rides in the grouped GEMM's epilogue and its gradient in the wgrad GEMM's (Transformer
// Engine's GroupedLinear): no kernel of its own.
OpCost expert_fc2_bias(const LayerShape& s, long long elements) {
  const double a = s.act_bytes;
  OpCost op = elementwise("expert fc2 bias", Role::expert_bias, OpClass::elementwise, elements, 6.0 * a, 2.0);
  op.backward_bytes = Bytes(std::llround(static_cast<double>(elements) * 8.0 * a));
  const int experts = static_cast<int>(s.local_experts);
  op.operators = 2 * experts + 1;           // b·p and the sum per expert, the concatenation
  op.backward_operators = 4 * experts + 1;  // two products and two sums per expert, the concatenation
  return op;
}

// The router's work beside its GEMM, as Megatron-Core's TopKRouter runs it with
// --moe-router-fusion (Transformer Engine's fused router kernels, which the Megatron-Bridge MoE
// recipes set; megatron/core/transformer/moe/router.py and moe_utils.py): forward, the fused
// top-k with its score function (the logits read in fp32, the probabilities and the routing map
// written: 9 bytes a score); with a load-balancing loss the fused scores for it (9 more), the
// tokens per expert, the fused loss and its logged copy (a division and an add into the layer's
// tracker): 5 operators, and per sequence (seq_aux_loss) the division by the batch too; with
// the expert bias the tokens per expert summed into its count (2); with random logits
// (force_balance) their clone and normal_ (2, 12 bytes a score). Backward: the top-k's (8 bytes
// a score) and with a loss the auto-scaler's ones_like and product, the loss's and the scores'
// backward and the sum of the logits' two gradients (5 more, 20 bytes a score; one more per
// sequence). With a capacity factor Megatron-Core's router then drops what exceeds each expert's
// capacity (moe_utils.apply_router_token_dropping, drop policy "probs"): torch.topk of the
// probabilities over the tokens (dim 0, k the capacity; the t·E scores read in fp32), a zeroed
// mask (written), the top indices scattered into it, its cast to bool (read, a byte written),
// the routing map's and (two bytes read, one written) and the probabilities' product by it (4 + 1
// read, 4 written): 6 operators, 25 bytes a score; backward the product's, the gradient times
// the mask (4 + 1 read, 4 written).
OpCost router_routing(const LayerShape& s, long long tokens) {
  const bool loss = s.balancing != MoeBalancingLoss::none;
  const int per_sequence = s.balancing == MoeBalancingLoss::seq_aux_loss ? 1 : 0;
  const double bytes = 9.0 + (loss ? 9.0 : 0.0) + (s.router_counts_bias ? 1.0 : 0.0) + (s.random_router ? 12.0 : 0.0) +
                       (s.drops_tokens ? 25.0 : 0.0);
  OpCost op = elementwise("router top-k", Role::router, OpClass::elementwise, tokens * s.experts, bytes, 4.0);
  op.backward_bytes = Bytes(
      std::llround(static_cast<double>(tokens * s.experts) * ((loss ? 28.0 : 8.0) + (s.drops_tokens ? 9.0 : 0.0))));
  op.operators = 1 + (loss ? 5 + per_sequence : 0) + (s.router_counts_bias ? 2 : 0) + (s.random_router ? 2 : 0) +
                 (s.drops_tokens ? 6 : 0);
  op.backward_operators = 1 + (loss ? 5 + per_sequence : 0) + (s.drops_tokens ? 1 : 0);
  return op;
}

// The permutation of the routed copies by expert before the dispatch (moe_permute) and its
// inverse after the combine (moe_unpermute), per element of the copies (a bytes each). Under
// Megatron-Core's all-to-all dispatcher (moe_permute_fusion, which every Megatron-Bridge MoE
// recipe sets) Transformer Engine's mask-map kernels run them over the rank's own tokens
// (transformer_engine/common/triton/permutation.py): the permute kernel loads each token's row
// once and stores it to each of its k destinations, the unpermute kernel loads each copy and
// stores one fp32-accumulated row per token, so each reads or writes a token's row once and its
// k copies once, (1 + 1/k)·a; the permutation carries the copy's router probability along (a few
// bytes a copy, left out). Their backward is the other kernel over the gradients, the same
// traffic: Megatron-Core weighs the copies inside the experts and unpermutes without merging
// probabilities (moe_utils.unpermute from MoEAlltoAllTokenDispatcher.combine_postprocess).
// Before the permute kernel make_row_id_map's three Triton kernels turn the t·E routing map into
// each token's destination rows (a block cumsum per expert reading the map, a byte a score, and
// writing int32 row ids; their global offsets, reading and writing them; each token's rows
// sorted, reading them: 17 bytes a score), four kernels forward, each launched from Python at
// the framework's cost per operator; the backward and the unpermute reuse the map, a kernel each.
// Otherwise 2a and 3a forward, twice that backward.
OpCost permutation(const char* name, Role role, const LayerShape& s) {
  const long long copies = s.norm_tokens() * s.top_k;
  const double a = s.act_bytes;
  const bool permute = role == Role::moe_permute;
  if (!s.fused_permutation) {
    return elementwise(name, role, OpClass::elementwise, copies * s.hidden, (permute ? 2.0 : 3.0) * a,
                       permute ? 0.0 : 2.0);
  }
  const double fused = (1.0 + 1.0 / static_cast<double>(s.top_k)) * a;
  OpCost op = elementwise(name, role, OpClass::elementwise, copies * s.hidden, fused, permute ? 0.0 : 1.0);
  op.backward_bytes = op.bytes;
  if (permute) {
    op.bytes += Bytes(17 * s.norm_tokens() * s.experts);
    op.operators = 4;
    op.backward_operators = 1;
  }
  return op;
}

// Megatron-Core's all-to-all dispatcher's preprocessing before the permutation, dropless at
// ep > 1 (token_dispatcher.py, MoEAlltoAllTokenDispatcher.preprocess): the tokens per expert
// (routing_map.sum over the tokens: the t·E routing map read, a byte a score), the input splits
// (their sum per EP rank), then, after the EP group's AllGather of the counts
// (parallelism/expert_parallel), the local experts' slice made contiguous and three sums of it
// (the tokens from each rank, the output splits over TP, the tokens per local expert): six
// kernels; and _maybe_dtoh_and_synchronize("before_permutation_1") copies the tokens per local
// expert and the three split sizes to the host on a side stream (four non-blocking copies,
// each an operator, and no shorter on the GPU than a kernel), which the host waits for before
// the dispatch. Ten operators; no gradient.
OpCost token_counts(const LayerShape& s) {
  OpCost op = elementwise("moe tokens per expert", Role::moe_counts, OpClass::elementwise, s.norm_tokens() * s.experts,
                          1.0, 1.0);
  op.operators = 6 + 4;
  // With a capacity factor the permutation's size is the kept copies' count, summed on the GPU
  // and copied to the host too (num_out_tokens).
  if (s.drops_tokens) op.operators += 2;
  return op;
}

// A mixture-of-experts MLP on this GPU's tokens (its sequence-parallel share): the router
// scores every expert, the permutation groups the top_k copies of each token by expert,
// the grouped GEMMs of the local experts run over the tokens the EP all-to-all brought
// (one kernel, each expert's GEMM over its share of them), and the unpermutation sums each token's copies
// weighted by the router. Shared experts see every token.
void append_moe(const LayerShape& s, std::vector<OpCost>& ops) {
  const long long n = s.norm_tokens();
  // With expert tensor parallelism the ETP group's tokens are gathered: each rank runs its
  // 1/etp of every local expert over etp times the tokens the all-to-all brought it.
  const long long routed = s.routed_tokens() * s.etp;
  ops.push_back(gemm("router", Role::router, Pass::forward, n, s.experts, s.hidden, s));
  ops.push_back(router_routing(s, n));
  if (s.counts_tokens) ops.push_back(token_counts(s));
  ops.push_back(permutation("moe permute", Role::moe_permute, s));
  if (s.sorts_chunks) ops.push_back(chunk_sort("moe sort chunks", Role::moe_sort, routed, s));
  ops.push_back(gemm("expert fc1", Role::expert_fc1, Pass::forward, routed, s.expert_fc1_out, s.hidden, s));
  ops.back().groups = s.local_experts;
  if (s.clamps_swiglu) ops.push_back(swiglu_clamp(s, routed * s.expert_fc1_out));
  ops.push_back(activation(s, "expert ", Role::expert_activation, routed * s.expert_ffn));
  // weighted_bias_quick_geglu_impl makes its linear offset a GPU tensor from a Python float
  // (torch.tensor(..., device=...), a copy without non_blocking: PyTorch's memcpy_and_sync),
  // so the host waits for the stream before it issues the fused activation.
  ops.back().host_sync = s.clamps_swiglu;
  ops.push_back(gemm("expert fc2", Role::expert_fc2, Pass::forward, routed, s.hidden, s.expert_ffn, s));
  ops.back().groups = s.local_experts;
  if (s.sorts_chunks) ops.push_back(chunk_sort("moe unsort chunks", Role::moe_unsort, routed, s));
  ops.push_back(permutation("moe unpermute", Role::moe_unpermute, s));
  // Megatron-Core adds the fc2 bias before the EP combine; issued here, after the combine and
  // the unpermutation that wait for it (parallelism/expert_parallel places the combine right
  // after the fc2 GEMM), it takes the same time on the compute stream and leaves the host the
  // same lead over the GPU, and its backward runs after the combine's backward as it does there.
  if (s.expert_bias) ops.push_back(expert_fc2_bias(s, routed * s.hidden));
  if (s.shared_experts == 0) return;
  // Column- then row-parallel over TP, as the dense MLP: over every token, gathered under
  // sequence parallelism (parallelism/tensor_parallel.cpp).
  const long long t = s.tokens();
  ops.push_back(gemm("shared expert fc1", Role::shared_fc1, Pass::forward, t, s.shared_fc1_out, s.hidden, s));
  if (s.separate_linears) ops.back().operators = 2;  // w1, w3
  ops.push_back(activation(s, "shared expert ", Role::shared_activation, t * s.shared_ffn));
  ops.push_back(gemm("shared expert fc2", Role::shared_fc2, Pass::forward, t, s.hidden, s.shared_ffn, s));
}

// An RMSNorm over `width` elements of each of the rank's rows (MLA's latents, normed before
// they are gathered: s/t rows under sequence parallelism).
OpCost latent_norm(const char* name, const LayerShape& s, long long width) {
  return with_norm_operators(
      elementwise(name, Role::input_norm, OpClass::norm, s.norm_tokens() * width, norm_bytes(s), norm_flops), s);
}

// Multi-head latent attention's projections before the attention core (Megatron-Core's
// MLASelfAttention, DeepSeek-AI 2024 §2.1.1): the query latent (h → q_lora) and one latent per
// token for keys and values (h → kv_lora + qk_rope), both by down projections whole on every TP
// rank (TELinear, parallel_mode "duplicated") over the rank's own rows; each latent normed and
// projected up, column-parallel over the gathered sequence, to the local heads' queries and to
// their keys (qk_nope) and values (v_dim); the rotary embedding of the queries' qk_rope part and
// of the one shared rotary key (gathered whole).
void append_latent_projections(const LayerShape& s, std::vector<OpCost>& ops) {
  const long long t = s.tokens();
  const long long rows = s.norm_tokens();
  const long long q = s.q_heads * s.head_dim;
  if (s.q_lora > 0) ops.push_back(gemm("q down projection", Role::q_down, Pass::forward, rows, s.q_lora, s.hidden, s));
  ops.push_back(gemm("kv down projection", Role::kv_down, Pass::forward, rows, s.kv_lora + s.qk_rope, s.hidden, s));
  if (s.q_lora > 0) {
    ops.push_back(latent_norm("q latent rmsnorm", s, s.q_lora));
    ops.push_back(gemm("q up projection", Role::qkv, Pass::forward, t, q, s.q_lora, s));
  } else {
    ops.push_back(gemm("q projection", Role::qkv, Pass::forward, t, q, s.hidden, s));
  }
  ops.push_back(latent_norm("kv latent rmsnorm", s, s.kv_lora));
  const long long kv_up = s.q_heads * (s.head_dim - s.qk_rope + s.v_dim);
  ops.push_back(gemm("kv up projection", Role::qkv, Pass::forward, t, kv_up, s.kv_lora, s));
  ops.push_back(rotary(s, s.q_heads * s.qk_rope + s.qk_rope));
}

std::vector<OpCost> unfused_attention(const LayerShape& s) {
  // Megatron 2022: baddbmm QKᵀ, fused scale-mask-softmax, dropout, bmm ·V, per local head,
  // over the full s×s scores (the causal mask is applied, not skipped).
  const long long heads = s.batch * s.q_heads;
  const long long scores = heads * s.seq * s.seq;
  const double ab = s.act_bytes;
  std::vector<OpCost> ops;
  ops.push_back(gemm("attention scores", Role::attention_core, Pass::forward, s.seq, s.seq, s.head_dim, s, heads));
  ops.push_back(
      elementwise("attention softmax", Role::attention_core, OpClass::elementwise, scores, 2.0 * ab, softmax_flops));
  if (s.dropout()) {
    ops.push_back(
        elementwise("attention dropout", Role::attention_core, OpClass::elementwise, scores, 2.0 * ab + 1.0, 1.0));
  }
  ops.push_back(gemm("attention values", Role::attention_core, Pass::forward, s.seq, s.head_dim, s.seq, s, heads));
  return ops;
}

// Query-key pairs a fused kernel computes for one head under a sliding window of w keys (a
// query at i sees keys i − w to i). cuDNN, FlashAttention-3 and -4 walk the grid in tiles of
// query rows by key columns, skip the tiles the mask leaves empty and compute the rest whole,
// masking inside them; with w ≪ s a query tile reaches about 1 + w/tile key tiles, where the
// window itself is s·w − w²/2 pairs. Tiles of 128 by 128: FlashAttention-4's on Blackwell
// (flash_attn/cute, its forward 128 or 2 × 128 rows by 128 keys, backward 128 by 128);
// FlashAttention-3 on Hopper takes 192 by 128 at head dim 64 (hopper/tile_size.h,
// tile_size_fwd_sm90), cuDNN does not publish its own. The tiles a window reaches are some of
// those the causal mask reaches, so the count is at most what causal attention is costed at,
// s²/2 (flash_attention): a window of s − 128 keys or more reaches every tile the causal kernel
// does and is costed as it. (Counted tile by tile, the two could not agree: causal attention
// counts half of each diagonal tile, while the window's first query tile, which reaches the same
// one diagonal tile, counts it whole; halving the window's diagonal tiles as well would take a
// quarter off w = 128.)
double window_tile_pairs(long long seq, long long window) {
  constexpr long long tile = 128;
  double pairs = 0;
  for (long long first = 0; first < seq; first += tile) {
    const long long last = std::min(first + tile, seq) - 1;
    const long long key_tiles = last / tile - std::max(0LL, first - window) / tile + 1;
    pairs += static_cast<double>(key_tiles * tile * (last - first + 1));
  }
  return std::min(pairs, 0.5 * static_cast<double>(seq) * static_cast<double>(seq));
}

OpCost flash_attention(const LayerShape& s) {
  // One fused kernel: Q, K, V read and O written once, plus fp32 log-sum-exp per row. Causal
  // tiles above the diagonal are skipped, so it executes half of the 4·b·s²·h/t FLOPs that
  // the model-FLOPs formula counts. With context parallelism the rank's s/cp queries (two
  // chunks of 2·cp, one early and one late) meet on average half of all s keys, so every
  // CP rank does 1/cp of that work and reads the keys and values of the whole sequence.
  OpCost op;
  op.name = "flash attention";
  op.role = Role::attention_core;
  op.cls = OpClass::attention;
  op.flash2 = s.attention == AttentionKind::flash2;
  op.m = s.seq;
  op.n = s.full_seq();
  op.k = s.head_dim;
  const double heads = static_cast<double>(s.batch * s.q_heads);
  const double seq = static_cast<double>(s.seq);
  // QKᵀ over the query/key width, then P·V over the value width (the same width but under
  // latent attention).
  const double widths = static_cast<double>(s.head_dim + s.value_dim());
  op.flops = 0.5 * 2.0 * heads * seq * static_cast<double>(s.full_seq()) * widths;
  // A sliding window (io refuses CP): the kernel computes whole every tile of the query-key
  // grid that its window reaches (window_tile_pairs).
  if (s.window > 0) op.flops = 2.0 * heads * window_tile_pairs(s.seq, s.window) * widths;
  double io = static_cast<double>(s.tokens() * 2 * s.q_width() + s.kv_block_elements() * s.cp);
  // Latent attention: Q and O, and every head's own K and V of the sequence.
  if (s.mla()) io = static_cast<double>(2 * s.tokens() * s.q_heads) * widths;
  op.bytes = Bytes(std::llround(io * s.act_bytes + heads * seq * 4.0));
  return op;
}

// Bytes per element of a BF16 tensor that one quantization of it moves, as Transformer Engine
// runs each recipe (a = act_bytes read per pass; the rowwise copy the GEMM reads and the
// columnwise copy the other backward GEMM reads are both written, with their scales):
// - fp8, delayed scaling: the fused cast-transpose takes the amax as it casts: a + 1 + 1.
//   Current scaling reads the tensor once more for its amax before the cast: 2a + 2.
//   On Blackwell Transformer Engine writes no transpose (fp8_transpose): a + 1 and 2a + 1.
//   Eager (torchao without torch.compile) runs amax, cast and transpose apart: 2a + 3.
// - mxfp8: each 32-element block's E8M0 scale is its own amax, so there is no amax pass;
//   rowwise and columnwise blocks run along different axes, so both copies are quantized from
//   BF16 in one kernel: a + 2·(1 + 1/32).
// - nvfp4 (NVFP4BlockScaling): the per-tensor FP32 scale needs the amax first (one pass, which
//   also takes the amax after the random Hadamard transform); activations and gradients are
//   then quantized rowwise (1-D blocks of 16, E4M3 scales) and, in a kernel of its own,
//   columnwise through the 16×16 random Hadamard transform that only the wgrad GEMM's inputs
//   get: 3a + 2·(1/2 + 1/16). Weights use 2-D 16×16 blocks (one scale per 256, no transform),
//   both copies from one pass: 2a + 2·(1/2 + 1/256). Stochastic rounding of the gradients
//   draws its random bits in registers (Blackwell's cvt.rs): no traffic. The transform's 16
//   multiply-adds per element run on the tensor cores inside the cast: the kernel stays
//   memory-bound.
double quantize_bytes(const LayerShape& s, bool weight) {
  const double a = s.act_bytes;
  switch (s.precision) {
    case Precision::mxfp8:
      return a + 2.0 * operand_bytes(Precision::mxfp8);
    case Precision::nvfp4:
      return weight ? 2.0 * a + 2.0 * (0.5 + 1.0 / 256.0) : 3.0 * a + 2.0 * operand_bytes(Precision::nvfp4);
    default:
      if (s.eager) return 2.0 * a + 3.0;
      const double written = s.fp8_transpose ? 2.0 : 1.0;
      return s.fp8_scaling == Fp8Scaling::current ? 2.0 * a + written : a + written;
  }
}

// Kernels Transformer Engine launches to quantize one tensor: current scaling takes the amax,
// the scale from it, then casts (Float8CurrentScalingQuantizer::quantize:
// nvte_compute_amax_with_config, nvte_compute_scale_from_amax, nvte_quantize_v2); the other
// recipes one.
long long quantize_kernels(const LayerShape& s) {
  return s.precision == Precision::fp8 && s.fp8_scaling == Fp8Scaling::current ? 3 : 1;
}

// Launches of one GEMM's input cast (with_fp8_casts). A grouped GEMM's input is quantized by
// tex.split_quantize (transformer_engine/pytorch/csrc/extensions/cast.cpp): under FP8 delayed
// scaling one fused kernel for every expert's rows (nvte_multi_cast_transpose), and NVFP4's
// fused split kernel, otherwise each expert's rows by their own quantizer
// (multi_tensor_quantize_impl). The weights are a tensor per expert, each quantized alone.
long long cast_launches(const OpCost& gemm, const LayerShape& s, bool weight) {
  const bool fused_split =
      s.precision == Precision::nvfp4 || (s.precision == Precision::fp8 && s.fp8_scaling == Fp8Scaling::delayed);
  const long long inputs = fused_split ? 1 : gemm.groups;
  return quantize_kernels(s) * (inputs + (weight ? gemm.groups : 0));
}

// Before each low-precision GEMM, its BF16 inputs are quantized (quantize_bytes): forward
// quantizes the activation and, when `weights` says so, the weight; dgrad the output
// gradient; wgrad reuses the columnwise copies. The weight's rowwise and columnwise copies
// are made together, so dgrad reads the forward's.
std::vector<OpCost> with_fp8_casts(const std::vector<OpCost>& ops, const LayerShape& s, bool weights = true) {
  std::vector<OpCost> out;
  for (const OpCost& op : ops) {
    if (op.fp8 && op.pass != Pass::backward_weight) {
      const bool weight = weights && op.pass == Pass::forward;
      const double bytes = static_cast<double>(op.m * op.k) * quantize_bytes(s, false) +
                           (weight ? static_cast<double>(op.k * op.n) * quantize_bytes(s, true) : 0.0);
      const long long elements = op.m * op.k + (weight ? op.k * op.n : 0);
      OpCost cast = elementwise(op.name + " " + to_string(s.precision) + " cast", Role::fp8_cast, OpClass::elementwise,
                                elements, bytes / static_cast<double>(elements), 2.0);
      cast.pass = op.pass;
      cast.cast_of = op.role;
      cast.launches = cast_launches(op, s, weight);
      out.push_back(std::move(cast));
    }
    out.push_back(op);
  }
  return out;
}

// torchtitan's per-op selective checkpointing (_get_custom_policy) saves the attention output
// and the output of every odd-numbered aten.mm of a block (wq, wv, w1, w2 of wq, wk, wv, wo,
// w1, w3, w2) and recomputes the rest: wk, wo and w3 (in the fused layout: the K share of the
// qkv GEMM, the projection and half of fc1) and the element-wise work between them. It saves
// the output of reduce_scatter_tensor too: under sequence parallelism the projection's
// ReduceScatter is not run again, and torch.compile's partitioner, which recomputes only what
// the backward reads, does without the projection (its output feeds that ReduceScatter alone);
// eager checkpointing replays every op it did not save, the projection with them.
std::vector<OpCost> per_op_recompute(const std::vector<OpCost>& forward, const LayerShape& s) {
  std::vector<OpCost> out;
  for (const OpCost& op : forward) {
    if (op.cls == OpClass::attention || op.role == Role::attention_core) continue;
    if (op.cls != OpClass::gemm && op.role != Role::fp8_cast) {
      out.push_back(op);
    } else if (op.role == Role::qkv) {
      const OpCost k = gemm("k projection", Role::qkv, Pass::forward, op.m, s.kv_width(), op.k, s);
      OpCost share = op;
      share.name = op.name + " (K share)";
      share.n = k.n;
      share.flops = k.flops;
      share.bytes = k.bytes;
      share.operators = 1;  // wk alone
      out.push_back(std::move(share));
    } else if (op.role == Role::attn_proj && !s.sequence_parallel) {
      out.push_back(op);
    } else if (op.role == Role::attn_proj && s.eager) {
      out.push_back(op);
      out.back().reduced_output_saved = true;
    } else if (op.role == Role::fc1) {
      OpCost half = op;
      half.name = op.name + " (up half)";
      half.flops = op.flops / 2;
      half.bytes = op.bytes / 2;
      half.operators = 1;  // w3 alone
      out.push_back(std::move(half));
    }
  }
  return out;
}

// Which of Megatron-Core's recompute_modules re-runs forward op i, or none (-1); a GEMM's
// input quantization goes with its GEMM. Under Transformer Engine a norm that a Linear follows
// is fused into it (TELayerNormColumnParallelLinear) and recomputed with it: the norm before a
// dense MLP with "mlp", MLA's latent norms with "mla_up_proj"; the norms that stand alone (the
// input norm before MLA's down projections, the norm before a MoE layer) with "layernorm".
int recompute_module_of(const std::vector<OpCost>& forward, std::size_t i, const LayerShape& s) {
  const OpCost& op = forward[i].role == Role::fp8_cast && i + 1 < forward.size() ? forward[i + 1] : forward[i];
  const auto module = [](RecomputeModule m) { return static_cast<int>(m); };
  switch (op.role) {
    case Role::attention_core:
      return module(RecomputeModule::core_attn);
    case Role::input_norm:
      if (&op == &forward.front()) return s.mla() ? module(RecomputeModule::layernorm) : -1;
      return module(RecomputeModule::mla_up_proj);  // a latent's norm
    case Role::qkv:
    case Role::rotary:
      return s.mla() ? module(RecomputeModule::mla_up_proj) : -1;
    case Role::post_norm:
      return module(s.moe() ? RecomputeModule::layernorm : RecomputeModule::mlp);
    case Role::fc1:
    case Role::activation:
    case Role::fc2:
      return module(RecomputeModule::mlp);
    case Role::expert_activation:
      return module(RecomputeModule::moe_act);
    default:
      return -1;
  }
}

// Megatron-Core's selective recompute of the listed modules, in forward order: the attention
// core under tensor_parallel.checkpoint (_checkpointed_attention_forward), a dense layer's MLP
// under it too (TransformerLayer._forward_mlp, recompute_mlp), and under CheckpointWithoutOutput
// the standalone norms (recompute_input_layernorm, recompute_pre_mlp_layernorm), MLA's up
// projections with their latents' norms and the rotary embedding (qkv_up_proj_and_rope_apply)
// and the experts' activation (TEGroupedMLP, activation_recompute). Each is re-run in the
// layer's backward, all of them before it here, where Megatron-Core runs each when its output's
// gradient arrives.
std::vector<OpCost> selective_recompute(const std::vector<OpCost>& forward, const LayerShape& s) {
  std::vector<OpCost> out;
  bool attention_done = false;
  for (std::size_t i = 0; i < forward.size(); ++i) {
    const int m = recompute_module_of(forward, i, s);
    if (m < 0 || !s.recomputes(static_cast<RecomputeModule>(m))) continue;
    if (m != static_cast<int>(RecomputeModule::core_attn)) {
      out.push_back(forward[i]);
      // Megatron-Core re-runs the experts' activation when fc2's backward asks for its output,
      // after the host has issued the layer's backward up to there, so its synchronising copy
      // drains a queue that fc2's grouped GEMM refills at once; issued here, at the backward's
      // start, the sync would instead idle the GPU while the host issues the layer's backward.
      out.back().host_sync = false;
    } else if (!attention_done) {
      for (OpCost& op : attention_core_forward(s)) out.push_back(std::move(op));
      attention_done = true;
    }
  }
  return out;
}

}  // namespace

double norm_bytes(const LayerShape& s) {
  // Fused LayerNorm or RMSNorm: read x, write y (the per-row statistics are negligible).
  // PyTorch's LayerNorm is one kernel in eager mode too; eager RMSNorm (Llama's reference
  // code, torchtitan, torch.nn.RMSNorm) runs x.float(), pow, mean, the multiply by rsqrt,
  // the cast back and the multiply by the weight as separate kernels over fp32 copies.
  constexpr double fp32 = 4.0;
  const double a = s.act_bytes;
  if (!(s.eager && s.llama_style)) return 2.0 * a;
  return (a + fp32) + 2.0 * fp32 + fp32 + 2.0 * fp32 + (fp32 + a) + 2.0 * a;
}

// Eager RMSNorm is the chain of PyTorch operators that Llama's reference RMSNorm runs, and
// F.rms_norm (torch.nn.RMSNorm, torchtitan's norm) as PyTorch decomposes it
// (aten/src/ATen/native/layer_norm.cpp, rms_norm_symint) where no fused kernel takes it
// (PyTorch's own fused CUDA kernel, aten::_fused_rms_norm, came after the releases the
// validated torchtitan runs used): x.float(), pow(2), mean, + eps, rsqrt, the product, type_as
// and the product with the weight, 8 kernels. Autograd's backward nodes (derivatives.yaml):
// the weight product's two products and the weight gradient's sum over the rows (3), the cast's
// (1), the product's two products and the sum of the rsqrt factor's gradient over the row (3),
// rsqrt's -0.5·grad·result³ (3), mean's division of the expanded gradient (1), pow's
// grad·2·x^1 (x.pow(1) a copy, 3), the sum of x.float()'s two gradients (1) and the cast back
// (1): 16. PyTorch's LayerNorm is one kernel each way, eager or not.
OpCost with_norm_operators(OpCost op, const LayerShape& s, int norms) {
  if (!(s.eager && s.llama_style)) return op;
  op.operators = 8 * norms;
  op.backward_operators = 16 * norms;
  return op;
}

OpCost stream_norm(const std::string& name, Role role, const LayerShape& s) {
  // The norm runs on s/t rows with SP.
  const long long elements = s.norm_tokens() * s.hidden;
  OpCost op = with_norm_operators(elementwise(name, role, OpClass::norm, elements, norm_bytes(s), norm_flops), s);
  if (!s.autocast) return op;
  op.bytes = Bytes(std::llround(static_cast<double>(elements) * autocast_norm_bytes(s)));
  if (s.eager && s.llama_style) {
    // The chain less x.float() and type_as(x), and backward less their nodes: 6 and 14.
    op.operators = 6;
    op.backward_operators = 14;
  }
  return op;
}

std::vector<OpCost> attention_core_forward(const LayerShape& s) {
  if (s.attention == AttentionKind::unfused) return unfused_attention(s);
  return {flash_attention(s)};
}

std::vector<OpCost> layer_forward(const LayerShape& s) {
  const long long t = s.tokens();
  std::vector<OpCost> ops;
  ops.push_back(stream_norm(s.llama_style ? "input rmsnorm" : "input layernorm", Role::input_norm, s));
  if (s.mla()) {
    append_latent_projections(s, ops);
  } else {
    ops.push_back(gemm("qkv", Role::qkv, Pass::forward, t, s.qkv_width(), s.hidden, s));
    if (s.separate_linears) ops.back().operators = 3;  // wq, wk, wv
    if (s.qk_norm) append_qk_norms(s, ops);
    if (s.llama_style) ops.push_back(rotary(s, s.q_width() + s.kv_width()));
  }
  for (OpCost& op : attention_core_forward(s)) ops.push_back(std::move(op));
  ops.push_back(
      gemm("attention projection", Role::attn_proj, Pass::forward, t, s.hidden, s.q_heads * s.value_dim(), s));
  ops.push_back(residual("attention residual", Role::attn_residual, s));
  ops.push_back(stream_norm(s.llama_style ? "post-attention rmsnorm" : "post-attention layernorm", Role::post_norm, s));
  if (s.moe()) {
    append_moe(s, ops);
  } else {
    ops.push_back(gemm("fc1", Role::fc1, Pass::forward, t, s.fc1_out, s.hidden, s));
    if (s.separate_linears) ops.back().operators = 2;  // w1, w3
    ops.push_back(activation(s, "", Role::activation, t * s.ffn));
    ops.push_back(gemm("fc2", Role::fc2, Pass::forward, t, s.hidden, s.ffn, s));
  }
  ops.push_back(residual("mlp residual", Role::mlp_residual, s));
  return ops;
}

std::vector<OpCost> layer_backward(const LayerShape& s) {
  const std::vector<OpCost> fwd = layer_forward(s);
  std::vector<OpCost> ops;
  for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
    append_backward(*it, s, ops);
    // Flash attention's backward recomputes QKᵀ inside the kernel: five GEMMs against the
    // forward's two, 2.5× its FLOPs.
    if (it->cls == OpClass::attention) ops.back().flops = 2.5 * it->flops;
    if (separate_bias_gradient(*it, s)) ops.push_back(bias_gradient(*it, s));
  }
  return ops;
}

LayerWork build_layer(const LayerShape& s, Recompute recompute) {
  LayerWork w;
  // Every micro-batch quantizes the weights, unless the framework keeps the first one's
  // copies: then only the first micro-batch of each chunk does (first_forward), and a full
  // recompute reuses them as well. Autocast casts them every micro-batch and in a recompute.
  w.forward = with_autocast_casts(with_fp8_casts(layer_forward(s), s, !s.cached_weights), s);
  if (s.cached_weights && low_precision(s.precision)) w.first_forward = with_fp8_casts(layer_forward(s), s);
  if (recompute == Recompute::selective) w.recompute = selective_recompute(w.forward, s);
  if (recompute == Recompute::full) w.recompute = w.forward;
  if (recompute == Recompute::selective_op) w.recompute = per_op_recompute(w.forward, s);
  w.backward = with_autocast_gradient_casts(with_fp8_casts(layer_backward(s), s), s);
  w.param_count = layer_param_count(s);
  w.params = Bytes(w.param_count * s.act_bytes);
  w.activations = layer_activations(s, recompute);
  w.tp_message = Bytes(s.tokens() * s.hidden * s.act_bytes);
  w.rope_message = Bytes(s.mla() ? s.tokens() * s.qk_rope * s.act_bytes : 0);
  w.kv_block = Bytes(s.kv_block_elements() * s.act_bytes);
  w.kv_grad_block_f32 = Bytes(s.kv_block_elements() * 4);
  w.expert_param_count = layer_expert_param_count(s);
  w.linear_param_count = layer_linear_param_count(s);
  w.dispatch_message = Bytes(s.routed_tokens() * s.hidden * s.act_bytes);
  w.expert_tp_message = w.dispatch_message * s.etp;
  return w;
}

}  // namespace stepsim::workload
