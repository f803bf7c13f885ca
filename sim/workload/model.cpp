// Whole-model work: embedding (first stage), final norm, LM head and loss (last stage), the
// optimizer step, model FLOPs and parameter totals.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "stepsim/framework.hpp"
#include "workload/autocast.hpp"
#include "workload/layer.hpp"
#include "workload/op_builder.hpp"

namespace stepsim::workload {
namespace {

// Adam per parameter: ~10 FLOPs, memory-bound (optimizer_step below).
constexpr double adam_flops = 10.0;
constexpr double master = 4.0;  // the fp32 master (main) weight

// HBM bytes per parameter of one fused kernel (FusedAdam, FusedSGD, torch.optim's fused=True):
// read the gradient, read and write the master weight and each moment once.
double fused_bytes(double gradient, double state, bool sgd) {
  const double moments = sgd ? 1.0 : 2.0;  // momentum, or Adam's m and v
  return gradient + 2.0 * master + moments * 2.0 * state;
}

// HBM bytes per parameter of torch.optim's foreach path, one multi-tensor kernel per operator
// over every parameter (g: the gradient, s: a moment, p: the master weight):
// - Adam (_multi_tensor_adam, not capturable): _foreach_lerp_(m, g) 2s + g,
//   _foreach_mul_(v) 2s, _foreach_addcmul_(v, g, g) 2s + g (g read once), _foreach_sqrt(v)
//   into a new list 2s, _foreach_div_ and _foreach_add_ on it 2s each,
//   _foreach_addcdiv_(p, m, sqrt) 2p + 2s: 14s + 2g + 2p, 72 B in fp32, in 7 operators;
//   AdamW's decoupled weight decay first multiplies the weights (_foreach_mul_(p), 2p): 80 B,
//   8 operators. (Adam's own weight_decay defaults to 0 in torch.optim, adding nothing.)
// - SGD with momentum (_multi_tensor_sgd): _foreach_mul_(buf) 2s, _foreach_add_(buf, g) 2s + g,
//   _foreach_add_(p, buf) 2p + s: 5s + g + 2p, 32 B in fp32, 3 operators.
struct Passes {
  double bytes;
  int operators;
};
Passes foreach_passes(const std::string& optimizer, double gradient, double state) {
  if (optimizer == "sgd") return {5.0 * state + gradient + 2.0 * master, 3};
  const Passes adam{14.0 * state + 2.0 * gradient + 2.0 * master, 7};
  if (optimizer == "adamw") return {adam.bytes + 2.0 * master, 8};
  return adam;
}

bool learned_positions(const LayerShape& s) { return !s.llama_style; }

// HBM bytes per logit of the loss's forward. Fused: read the logits, write the fp32 softmax.
// Eager (torchtitan: logits.float() before cross_entropy): the upcast (read, write fp32),
// then log-softmax (read, write fp32). Unfused (Megatron's vocab-parallel cross entropy):
// the upcast, max (read), subtract, exp and divide in place (read, write each) and the sum
// (read). Transformer Engine's (te) is charged as the fused one: its two passes read the bf16
// logits twice and write the gradient once, the fused loss's 6 bytes a bf16 logit; its
// backward scales that gradient in place by the per-token loss gradient (read and write each
// logit once: loss_op).
double loss_bytes(const LayerShape& s) {
  constexpr double fp32 = 4.0;
  const double a = s.act_bytes;
  if (s.unfused_loss) return (a + fp32) + fp32 + 2.0 * fp32 + 2.0 * fp32 + fp32 + 2.0 * fp32;
  if (s.loss == CrossEntropy::eager) return a + 3.0 * fp32;
  return a + fp32;
}

// The loss over `logits` local logits. Eager (F.cross_entropy on logits.float()) is a chain
// of PyTorch operators: the upcast, log_softmax and nll_loss, 3 kernels; autograd's backward
// the seed gradient (loss.backward()'s ones), nll_loss_backward's zeroed gradient and its
// kernel, log_softmax's backward and the cast back, 5.
OpCost loss_op(const std::string& name, long long logits, const LayerShape& s) {
  OpCost op = elementwise(name, Role::loss, OpClass::loss, logits, loss_bytes(s), 6.0);
  // Transformer Engine's backward (triton/cross_entropy.py, cross_entropy_backward) runs
  // element_mul_kernel over the logits that hold the gradient: Megatron-Core's per-token losses
  // give a gradient of one value per token, never the scalar 1.0 for which it skips the kernel.
  if (s.loss == CrossEntropy::te)
    op.backward_bytes = Bytes(std::llround(static_cast<double>(logits) * 2.0 * s.act_bytes));
  if (s.loss == CrossEntropy::eager) {
    op.operators = 3;
    op.backward_operators = 5;
  }
  // Megatron-Core's unfused vocab-parallel cross entropy (tensor_parallel/cross_entropy.py,
  // _VocabParallelCrossEntropy) is PyTorch operators too. Forward: the fp32 copy and the max
  // (calculate_logits_max); the subtraction, the target mask's <, >= and |, the target's clone
  // and shift, its masked fill, arange, the predicted logits' gather, clone and masked fill, exp
  // and sum (calculate_predicted_logits); log, the subtraction and the division
  // (calculate_cross_entropy_loss): 18, beside the three TP AllReduces. Backward: arange, the
  // mask's float and 1 - it, the gathered gradient's index, subtraction and index_put, the product
  // with the loss gradient (calculate_gradients), and the fp32 copy's cast back: 8.
  if (s.loss == CrossEntropy::unfused) {
    op.operators = 18;
    op.backward_operators = 8;
  }
  return op;
}

// Bytes per local logit the loss keeps from its forward for its backward, and what its
// backward allocates on top of them while it runs (the ops' own buffers, as PyTorch runs them):
// - fused, unfused (Megatron): the fp32 softmax is kept and turned into the gradient in place;
//   the cast of that gradient back to the logits' precision is the extra;
// - eager (F.cross_entropy on logits.float()): log_softmax keeps its fp32 output; the backward
//   holds it with nll_loss's fp32 gradient and log_softmax's fp32 input gradient at once. With
//   TP, DTensor's loss_parallel computes the softmax gradient in separate ops (exp of the
//   output, its product with the gradient's sum, the difference): one more fp32 buffer;
// - compiled (torch.compile): the kernels keep the logits themselves and recompute the
//   softmax in the backward, writing the gradient in the logits' precision;
// - te (Transformer Engine's parallel_cross_entropy, Megatron-Core's cross_entropy_fusion_impl
//   "te"): CrossEntropyFunction.forward writes the gradient into the logits in place
//   (triton/cross_entropy.py, cross_entropy_forward) and saves them; its backward scales them
//   in place (cross_entropy_backward): the logits alone are kept, nothing is added.
struct LossMemory {
  double kept = 0;
  double backward = 0;
};

LossMemory loss_memory(const LayerShape& s) {
  constexpr double fp32 = 4.0;
  const double a = s.act_bytes;
  switch (s.loss) {
    case CrossEntropy::eager:
      return {fp32, s.tp > 1 ? 3.0 * fp32 : 2.0 * fp32};
    case CrossEntropy::compiled:
      return {a, a};
    case CrossEntropy::te:
      return {a, 0.0};
    case CrossEntropy::fused:
    case CrossEntropy::unfused:
      break;
  }
  return {fp32, a};
}

LayerWork build_pre(const LayerShape& s) {
  // Vocab-parallel lookup: each TP rank writes b·s·h (zeros outside its shard) before the TP
  // reduction; GPT adds learned positions and dropout on top. Under autocast the table is fp32
  // and so is the lookup (embedding is on none of autocast's lists), the residual stream's start.
  const double per_element = (learned_positions(s) ? 4.0 : 2.0) * s.stream_bytes();
  LayerWork w;
  w.forward.push_back(
      elementwise("embedding", Role::embedding, OpClass::embedding, s.tokens() * s.hidden, per_element, 1.0));
  append_backward(w.forward.back(), s, w.backward);
  w.param_count = s.vocab * s.hidden + (learned_positions(s) ? s.full_seq() * s.hidden : 0);
  // The lookup's gradient is dense: PyTorch's embedding_dense_backward_cuda zeroes a gradient
  // of the whole local table (at::zeros) and sums the tokens' rows into it; Megatron-Core's
  // DDP hook (_make_param_hook: param.main_grad.add_(param.grad.data)) then reads it and
  // reads and writes the main gradient. 1.1 ms per micro-batch for a 131k × 2048 BF16 table
  // with an FP32 main gradient on an H100.
  // The table's gradient is in the table's precision: fp32 under autocast.
  const double table = s.autocast ? 4.0 : s.act_bytes;
  const double table_element = table + (s.main_grad_hook ? s.act_bytes + 2.0 * s.main_grad_bytes : 0.0);
  w.backward.back().bytes += Bytes(std::llround(static_cast<double>(w.param_count) * table_element));
  w.params = Bytes(w.param_count * s.act_bytes);
  w.activations = Bytes(s.dropout() ? s.norm_tokens() * s.hidden : 0);  // dropout mask
  w.tp_message = Bytes(s.tokens() * s.hidden * s.act_bytes);
  return w;
}

LayerWork build_post(const LayerShape& s, bool holds_output_weight) {
  // Vocab-parallel cross-entropy reads the logits and keeps fp32 softmax for the backward.
  const long long logits = s.tokens() * s.vocab;
  LayerWork w;
  w.forward.push_back(stream_norm(s.llama_style ? "final rmsnorm" : "final layernorm", Role::final_norm, s));
  w.forward.push_back(gemm("lm head", Role::lm_head, Pass::forward, s.tokens(), s.vocab, s.hidden, s));
  w.forward.push_back(loss_op("cross entropy", logits, s));
  for (auto it = w.forward.rbegin(); it != w.forward.rend(); ++it) {
    append_backward(*it, s, w.backward);
  }
  // Autocast casts the head's weight (the embedding's where tied) each micro-batch.
  w.forward = with_autocast_casts(w.forward, s);
  w.backward = with_autocast_gradient_casts(w.backward, s);
  // Unfused, the backward scales the saved fp32 softmax in place (read, write) and casts it
  // back to the logits' precision (read fp32, write): not twice the forward's six passes.
  for (OpCost& op : w.backward) {
    if (op.role == Role::loss && s.unfused_loss)
      op.bytes = Bytes(std::llround(static_cast<double>(logits) * (12.0 + s.act_bytes)));
  }
  const long long norm_params = s.llama_style ? s.hidden : 2 * s.hidden;
  w.param_count = norm_params + (holds_output_weight ? s.vocab * s.hidden : 0);
  w.params = Bytes(w.param_count * s.act_bytes);
  const LossMemory loss = loss_memory(s);
  // The final norm's input (the residual stream's precision), and the head's input (the norm's
  // output), which the head's Linear saves for its weight gradient: Megatron's
  // ColumnParallelLinear the rank's rows as they came (LinearWithGradAccumulationAndAsyncCommunication
  // saves its input before the all-gather of sequence parallelism), torchtitan's nn.Linear the
  // tensor it all-gathered, whole.
  const long long head_input = s.keeps_gathered_inputs() ? s.tokens() : s.norm_tokens();
  w.activations = Bytes((s.norm_tokens() * s.stream_bytes() + head_input * s.act_bytes) * s.hidden +
                        std::llround(static_cast<double>(logits) * loss.kept));
  w.backward_working = Bytes(std::llround(static_cast<double>(logits) * loss.backward));
  w.tp_message = Bytes(s.tokens() * s.hidden * s.act_bytes);
  return w;
}

// Multi-token prediction (DeepSeek-AI 2024 §2.2; Megatron-Core's MultiTokenPredictionBlock) on the
// last stage, after the main head. Per depth: the vocabulary-parallel embedding lookup of the
// tokens one further (reduced over TP like the model's, to s/t rows under sequence parallelism),
// RMSNorms of them and of the previous depth's hidden state on the rank's rows, the
// column-parallel projection of the two concatenated (eh_proj, 2h → h/t over the gathered
// sequence; its output gathered along h), one transformer layer like the model's (its MoE layer
// in an MoE model), a final norm, and the shared output head and loss. The backward runs the
// depths last first, before the main head's. The last stage holds the embedding for the lookup
// unless it also holds the first stage (pp 1).
//
// The depth's layer is a TransformerLayer of the model's config, so it recomputes as the model's
// layers do. Selective recompute re-runs the same modules before the layer's backward. Full
// recompute checkpoints the projection, the layer and the final norm together
// (MultiTokenPredictionLayer._checkpointed_forward under recompute_granularity full with the
// uniform method, one layer a chunk): the head's and the loss's backward run first, then those
// three forward again, then their backward.
void add_mtp(LayerWork& post, const LayerShape& s, const LayerWork& layer, Recompute recompute, int depths,
             bool copies_embedding) {
  const long long t = s.tokens();
  const long long rows = s.norm_tokens();
  const long long logits = t * s.vocab;
  const char* norm_name = s.llama_style ? "final rmsnorm" : "final layernorm";
  const bool full = recompute == Recompute::full;
  const auto named = [](const std::string& p, OpCost op, bool recomputed) {
    op.name = p + op.name;
    op.recomputed = recomputed;
    return op;
  };
  std::vector<OpCost> backward;
  for (int d = 0; d < depths; ++d) {
    const std::string p = "mtp" + std::to_string(d) + " ";
    std::vector<OpCost> head;  // the ops before the layer, each with its own backward
    head.push_back(
        elementwise(p + "embedding", Role::embedding, OpClass::embedding, t * s.hidden, 2.0 * s.act_bytes, 1.0));
    head.push_back(with_norm_operators(
        elementwise(p + "norms", Role::mtp, OpClass::norm, 2 * rows * s.hidden, norm_bytes(s), 8.0), s, 2));
    const OpCost projection =
        gemm(p + "projection", Role::mtp_projection, Pass::forward, t, s.hidden / s.tp, 2 * s.hidden, s);
    const OpCost final_norm = with_norm_operators(
        elementwise(p + norm_name, Role::mtp, OpClass::norm, rows * s.hidden, norm_bytes(s), 8.0), s);
    std::vector<OpCost> tail;  // the ops after the final norm
    tail.push_back(gemm(p + "lm head", Role::lm_head, Pass::forward, t, s.vocab, s.hidden, s));
    tail.push_back(loss_op(p + "cross entropy", logits, s));
    std::vector<OpCost> depth_backward;
    for (auto it = tail.rbegin(); it != tail.rend(); ++it) append_backward(*it, s, depth_backward);
    if (full) {  // the layer's recompute is its whole forward
      depth_backward.push_back(named("", projection, true));
      for (const OpCost& op : layer.recompute) depth_backward.push_back(named(p, op, true));
      depth_backward.push_back(named("", final_norm, true));
    }
    append_backward(final_norm, s, depth_backward);
    if (!full) {
      for (const OpCost& op : layer.recompute) depth_backward.push_back(named(p, op, true));
    }
    for (const OpCost& op : layer.backward) depth_backward.push_back(named(p, op, false));
    append_backward(projection, s, depth_backward);
    for (auto it = head.rbegin(); it != head.rend(); ++it) append_backward(*it, s, depth_backward);
    for (OpCost& op : head) post.forward.push_back(std::move(op));
    post.forward.push_back(projection);
    for (const OpCost& op : layer.forward) post.forward.push_back(named(p, op, false));
    post.forward.push_back(final_norm);
    for (OpCost& op : tail) post.forward.push_back(std::move(op));
    backward.insert(backward.begin(), depth_backward.begin(), depth_backward.end());
  }
  for (OpCost& op : backward) {
    if (op.role == Role::loss && s.unfused_loss)
      op.bytes = Bytes(std::llround(static_cast<double>(logits) * (12.0 + s.act_bytes)));
  }
  post.backward.insert(post.backward.begin(), backward.begin(), backward.end());
  const long long norm_params = s.llama_style ? s.hidden : 2 * s.hidden;
  post.param_count += depths * (layer.param_count + 2 * s.hidden * (s.hidden / s.tp) + 3 * norm_params) +
                      (copies_embedding ? s.vocab * s.hidden : 0);
  post.params = Bytes(post.param_count * s.act_bytes);
  post.expert_param_count += depths * layer.expert_param_count;
  post.linear_param_count += depths * layer.linear_param_count;  // eh_proj runs in BF16 (fp8_linear)
  const long long head_input = s.keeps_gathered_inputs() ? t : rows;
  const double loss_kept = static_cast<double>(logits) * loss_memory(s).kept;
  const double element = static_cast<double>(s.hidden * s.act_bytes);
  // Per depth, kept until its backward: the two norms' inputs, the shared head's input (the final
  // norm's output, kept as the main head keeps its own) and what the loss keeps (the fp32
  // softmax); without full recompute also the projection's input (2h, kept on the rank's rows and
  // gathered again for the weight gradient), the layer's activations as its recompute mode keeps
  // them and the final norm's input; under full recompute instead the checkpoint's inputs, the two
  // norms' outputs (2h). What a depth's recompute makes again is held only during its backward
  // (mtp_recompute_working): under full recompute all the layer keeps without recompute (its
  // input, the projection's output, among it), the projection's input and the final norm's
  // input; under selective recompute what the layer keeps without recompute but not with it.
  const double kept = full ? static_cast<double>(4 * rows + head_input) * element + loss_kept
                           : static_cast<double>(5 * rows + head_input) * element + loss_kept +
                                 static_cast<double>(layer.activations.count());
  post.activations += Bytes(std::llround(kept)) * depths;
  const Bytes without_recompute = layer_activations(s, Recompute::none);
  if (full) {
    post.mtp_recompute_working = without_recompute + Bytes(std::llround(3.0 * static_cast<double>(rows) * element));
  } else if (!layer.recompute.empty()) {
    post.mtp_recompute_working = std::max(without_recompute - layer.activations, Bytes(0));
  }
}

// Layers of a mixed stack that are dense (none when every layer is alike).
long long dense_layers(const ModelSpec& m) {
  if (!m.mixed_layers()) return 0;
  long long n = 0;
  for (int l = 0; l < m.layers; ++l) n += m.moe_layer(l) ? 0 : 1;
  return n;
}

// Layers whose attention is windowed.
long long windowed_layers(const ModelSpec& m) {
  long long n = 0;
  for (int l = 0; l < m.layers; ++l) n += m.windowed_layer(l) ? 1 : 0;
  return n;
}

// Weight elements of one layer's GEMMs in the whole (unsharded) model.
double layer_gemm_weights(const ModelSpec& m, const LayerShape& s) {
  const double t = static_cast<double>(s.tp);
  const double h = static_cast<double>(m.hidden);
  const double kv = static_cast<double>(m.kv_heads > 0 ? m.kv_heads : m.heads);
  const double d = static_cast<double>(s.head_dim);
  const double q = static_cast<double>(m.heads) * d;
  double attention = h * (q + 2.0 * kv * d) + q * h;
  if (s.mla()) {
    LayerShape whole = s;
    whole.q_heads = m.heads;
    attention = static_cast<double>(attention_param_count(whole) - whole.q_lora - whole.kv_lora);  // less the norms
  }
  if (s.moe()) {
    // Active weights: the router, the top_k routed experts less the copies capacity drops,
    // and the shared ones per token.
    const double etp = static_cast<double>(s.etp);  // the whole expert, not this GPU's 1/etp
    const double expert = etp * (h * static_cast<double>(s.expert_fc1_out) + static_cast<double>(s.expert_ffn) * h);
    const double routed = static_cast<double>(s.top_k) * s.kept_load;
    return attention + h * static_cast<double>(s.experts) + (routed + static_cast<double>(s.shared_experts)) * expert;
  }
  const double ffn = static_cast<double>(s.ffn) * t;
  const double fc1 = static_cast<double>(s.fc1_out) * t;
  return attention + h * fc1 + ffn * h;
}

// Per query head, QKᵀ over head_dim and P·V over the value width: 2·head_dim for standard heads.
double attention_width(const ModelSpec& m, const LayerShape& s) {
  return static_cast<double>(m.heads * (s.head_dim + s.value_dim()));
}

// 6·tokens·(GEMM weights) + 6·B·s²·l·(heads·head_dim). Attention is counted causal: a causal
// model attends to s(s+1)/2 ≈ s²/2 query-key pairs, and that half is the work the flash
// kernels do, so MFU stays at or below what the kernels achieve. Megatron's papers count the
// full s² (for GPT with a 4h MLP, 72·B·l·s·h²·(1 + s/(6h) + V/(12·h·l))); this count is the
// same with s/(12h) in place of s/(6h).
double model_flops(const Scenario& sc, const LayerShape& s) {
  const ModelSpec& m = sc.model;
  const double batch = static_cast<double>(sc.training.global_batch);
  const double seq = static_cast<double>(m.seq_len);
  const double layers = static_cast<double>(m.layers);
  const double h = static_cast<double>(m.hidden);
  const double qk_v = attention_width(m, s);
  const double vocab = static_cast<double>(m.vocab);
  const double dense = static_cast<double>(dense_layers(m));
  const double gemm_weights =
      (layers - dense) * layer_gemm_weights(m, s) + dense * layer_gemm_weights(m, as_dense(s)) + h * vocab;
  // Multi-token prediction: per depth one more layer, the 2h → h projection and the head.
  const double mtp = static_cast<double>(m.mtp_layers);
  const double mtp_weights = mtp * (layer_gemm_weights(m, s) + 2.0 * h * h + h * vocab);
  const double flops =
      6.0 * batch * seq * (gemm_weights + mtp_weights) + 3.0 * batch * seq * seq * (layers + mtp) * qk_v;
  // A windowed layer attends to s·w − w²/2 query-key pairs, not s²/2.
  const double windowed = static_cast<double>(windowed_layers(m));
  const double w = static_cast<double>(m.sliding_window);
  return flops - 3.0 * batch * windowed * (seq * seq - (2.0 * seq * w - w * w)) * qk_v;
}

}  // namespace

std::string flop_convention(const ModelSpec& m) {
  // Per query head: QKᵀ over the query/key width and P·V over the value width, equal (3 · 2 ·
  // head_dim = 6 · head_dim) but under latent attention.
  const bool latent = m.mla.kv_lora_rank > 0;
  const auto per_head = [latent](const std::string& span) {
    return latent ? fmt::format("3 x {} x heads x (qk_head_dim + v_head_dim)", span)
                  : fmt::format("6 x {} x heads x head_dim", span);
  };
  std::string weights = "LM head included, input embedding lookup left out";
  if (m.moe.experts > 0) {
    const std::string routed = m.moe.capacity_factor > 0
                                   ? "top_k routed experts less the copies the capacity factor drops"
                                   : "top_k routed experts";
    weights +=
        m.moe.shared_experts > 0
            ? fmt::format("; of a mixture of experts those a token runs through: the router, {} and the shared experts",
                          routed)
            : fmt::format("; of a mixture of experts those a token runs through: the router and {}", routed);
  }
  if (m.mtp_layers > 0) {
    weights += fmt::format(
        "; per multi-token prediction depth ({} here) its layer, its 2h x h projection and the LM head again",
        m.mtp_layers);
  }
  std::string attention =
      per_head(m.mtp_layers > 0 ? "tokens x seq_len x (layers + MTP depths)" : "tokens x seq_len x layers");
  attention += latent ? " (latent attention, qk_head_dim = qk_nope_head_dim + qk_rope_head_dim; half the s^2 "
                        "Megatron's papers count)"
                      : " (half the s^2 Megatron's papers count)";
  const long long windowed = windowed_layers(m);
  if (windowed > 0) {
    attention += fmt::format(
        ", of which each of the {} of {} layers with a sliding window of w = {} tokens counts the window's s x w - "
        "w^2/2 query-key pairs a sequence instead of s^2/2, {} in place of its causal share",
        windowed, m.layers, m.sliding_window, per_head("tokens x (2w - w^2/s)"));
  }
  return fmt::format(
      "model FLOPs = 6 x tokens x GEMM weights ({}) + causal attention {}; MFU divides them by the dense peak, HFU "
      "adds the recomputed FLOPs, counted the same way (docs/report.md)",
      weights, attention);
}

namespace {

bool routed_expert(Role role) {
  return role == Role::expert_fc1 || role == Role::expert_activation || role == Role::expert_fc2;
}

bool recomputes_attention_core(const LayerWork& layer) {
  return std::any_of(layer.recompute.begin(), layer.recompute.end(),
                     [](const OpCost& op) { return op.role == Role::attention_core; });
}

// The FLOPs the recompute adds to the model FLOPs, counted as model FLOPs are, so that HFU and
// MFU differ by the recompute alone: each layer's recomputed GEMMs for every micro-batch of the
// step on all tp·cp GPUs that share the layer (the routed experts' those of the busiest EP rank;
// over the EP ranks the experts recompute the copies they keep), and where a layer recomputes
// its attention core, that core's forward as model FLOPs count it, causal (or the window's
// query-key pairs), whatever its kernel executes: unfused attention's full s² in the forward and
// the backward is left out of both. Element-wise work (softmax, dropout, norms) is in neither.
double recompute_flops(const Scenario& sc, const LayerShape& s, const ModelWork& w) {
  const double expert_share = s.routed_load > 0 ? s.kept_load / s.routed_load : 1.0;
  const auto gemms = [&](const LayerWork& layer) {
    double f = 0;
    for (const OpCost& op : layer.recompute) {
      if (op.cls != OpClass::gemm || op.role == Role::attention_core) continue;
      f += routed_expert(op.role) ? op.flops * expert_share : op.flops;
    }
    return f;
  };
  const ModelSpec& m = sc.model;
  const double batch = static_cast<double>(sc.training.global_batch);
  const double seq = static_cast<double>(m.seq_len);
  const double window = static_cast<double>(m.sliding_window);
  const double qk_v = attention_width(m, s);
  double layer_gemms = 0, attention = 0;
  for (int l = 0; l < m.layers; ++l) {
    const LayerWork& layer = w.block(l);
    layer_gemms += gemms(layer);
    if (!recomputes_attention_core(layer)) continue;
    // Per sequence 2·(query-key pairs)·(heads·(qk + v)): s²/2 pairs causal, s·w − w²/2 in a window.
    attention += batch * qk_v * (m.windowed_layer(l) ? 2.0 * seq * window - window * window : seq * seq);
  }
  // Multi-token prediction's depths recompute in the head's block (add_mtp) what the model's
  // layer does, their attention over the whole sequence, and under full recompute the projection.
  for (const OpCost& op : w.post.backward) {
    if (op.recomputed && op.cls == OpClass::gemm && op.role != Role::attention_core)
      layer_gemms += routed_expert(op.role) ? op.flops * expert_share : op.flops;
  }
  if (recomputes_attention_core(w.layer)) attention += batch * qk_v * seq * seq * m.mtp_layers;
  const double passes = batch / static_cast<double>(sc.training.micro_batch);
  return layer_gemms * sc.parallel.tp * sc.parallel.cp * passes + attention;
}

long long params_total(const ModelSpec& m, const LayerShape& s) {
  LayerShape whole = s;
  whole.tp = 1;
  whole.q_heads = m.heads;
  whole.kv_heads = m.kv_heads > 0 ? m.kv_heads : m.heads;
  whole.ffn = s.ffn * s.tp;
  whole.fc1_out = s.fc1_out * s.tp;
  whole.vocab = m.vocab;
  whole.local_experts = whole.experts;
  whole.expert_ffn = s.expert_ffn * s.etp;
  whole.expert_fc1_out = s.expert_fc1_out * s.etp;
  whole.etp = 1;
  const long long output = m.tied_embeddings ? 0 : m.vocab * m.hidden;
  const long long dense = dense_layers(m);
  // Multi-token prediction shares the embedding and the output head.
  const long long norm = whole.llama_style ? m.hidden : 2 * m.hidden;
  const long long mtp = m.mtp_layers * (layer_param_count(whole) + 2 * m.hidden * m.hidden + 3 * norm);
  return (m.layers - dense) * layer_param_count(whole) + dense * layer_param_count(as_dense(whole)) +
         build_pre(whole).param_count + build_post(whole, false).param_count + output + mtp;
}

// Parameters of the `count` transformer layers that hold the most: the most loaded stage.
long long largest_layers_params(const ModelSpec& m, const ModelWork& w, long long count) {
  const long long dense = dense_layers(m);
  const long long moe = m.layers - dense;
  long long big = w.layer.param_count, small = w.dense_layer.param_count;
  long long big_count = moe;
  if (dense > 0 && small > big) {
    std::swap(big, small);
    big_count = dense;
  }
  const long long first = std::min(count, big_count);
  return first * big + (count - first) * small;
}

// The windowed variants of the layers (the same weights, activations and op names; only the
// attention core differs) and which layers use them.
void add_windowed_layers(ModelWork& w, const Scenario& sc, const LayerShape& s) {
  LayerShape windowed = s;
  windowed.window = sc.model.sliding_window;
  w.windowed_layer = build_layer(windowed, sc.training.recompute);
  if (!w.dense.empty()) w.windowed_dense_layer = build_layer(as_dense(windowed), sc.training.recompute);
  w.windowed.resize(static_cast<std::size_t>(sc.model.layers));
  for (int l = 0; l < sc.model.layers; ++l) w.windowed[static_cast<std::size_t>(l)] = sc.model.windowed_layer(l);
}

}  // namespace

OpCost optimizer_step(long long params, const TrainingSpec& t) {
  const double gradient = element_bytes(t.main_grad);
  const double state = element_bytes(t.optimizer_state);
  const bool sgd = t.optimizer == "sgd";
  const bool foreach = optimizer_kernels(t.framework, t.optimizer) == OptimizerKernels::foreach;
  const Passes passes =
      foreach ? foreach_passes(t.optimizer, gradient, state) : Passes{fused_bytes(gradient, state, sgd), 1};
  // Mixed precision copies the updated master weights into the 16-bit model weights after the
  // step: read 4, write 2 (Megatron's _copy_main_params_to_model_params, DeepSpeed's copy of
  // the fp32 partition into the bit16 one); fp8 runs keep a bf16 model copy too.
  const double model_copy = element_bytes(t.precision) < 4 ? master + 2.0 : 0.0;
  // Clipping by global norm: the L2 norm reads every gradient of the shard, the clip scales
  // them in place (read, write). The norm's all-reduce of one float across the job takes
  // tens of microseconds and is left out.
  const double clip = t.grad_clip ? 3.0 * gradient : 0.0;
  OpCost op = elementwise(sgd ? "sgd" : "adam", Role::optimizer, OpClass::optimizer, params,
                          passes.bytes + model_copy + clip, adam_flops);
  op.operators = passes.operators;
  // PyTorch's clip_grad_norm_ (eager PyTorch's and torchtitan's clipping, on its foreach path)
  // issues 8 operators: _foreach_norm, stack, vector_norm of the norms, total_norm + 1e-6,
  // max_norm / it (reciprocal, mul), clamp to 1, _foreach_mul_ of the gradients.
  if (t.grad_clip && (t.framework == Framework::pytorch || torchtitan(t.framework))) op.operators += 8;
  return op;
}

OpCost overflow_check(long long params, const TrainingSpec& t) {
  const double gradient = element_bytes(t.main_grad);
  switch (loss_scaling(t.framework)) {
    case LossScaling::megatron_core:
    case LossScaling::grad_scaler:
      return elementwise("unscale and check gradients", Role::optimizer, OpClass::optimizer, params, 2.0 * gradient,
                         1.0);
    case LossScaling::deepspeed: {
      OpCost op = elementwise("check gradients for overflow", Role::optimizer, OpClass::optimizer, params,
                              gradient + 2.0 * master, 1.0);
      op.operators = 2;  // x.float(), .sum()
      return op;
    }
    case LossScaling::none:
      break;
  }
  return elementwise("no loss scaling", Role::optimizer, OpClass::optimizer, 0, 0.0, 0.0);
}

OpCost gradient_norm(long long params, const TrainingSpec& t) {
  return elementwise("gradient norm", Role::optimizer, OpClass::optimizer, params, element_bytes(t.main_grad), 2.0);
}

GemmShape one_gemm(const OpCost& op) {
  const long long groups = std::max(op.groups, 1LL);
  if (op.pass == Pass::backward_weight) return {op.m, op.n, op.k / groups};
  return {op.m / groups, op.n, op.k};
}

long long model_parameters(const ModelSpec& m) {
  LayerShape s = weight_shape(m, 1);
  s.seq = m.seq_len;  // a learned position table has a row per position
  return params_total(m, s);
}

ModelWork build_work(const Scenario& sc) {
  const LayerShape s = layer_shape(sc);
  const int pp = std::max(sc.parallel.pp, 1);
  ModelWork w;
  w.layer = build_layer(s, sc.training.recompute);
  if (sc.model.mixed_layers()) {
    w.dense_layer = build_layer(as_dense(s), sc.training.recompute);
    w.dense.resize(static_cast<std::size_t>(sc.model.layers));
    for (int l = 0; l < sc.model.layers; ++l) w.dense[static_cast<std::size_t>(l)] = !sc.model.moe_layer(l);
  }
  if (sc.model.sliding_window > 0) add_windowed_layers(w, sc, s);
  w.pre = build_pre(s);
  // The last stage holds the output weight unless it shares the first stage's embedding.
  w.post = build_post(s, !sc.model.tied_embeddings || pp > 1);
  if (sc.model.mtp_layers > 0) add_mtp(w.post, s, w.layer, sc.training.recompute, sc.model.mtp_layers, pp > 1);
  // The most loaded stage: ⌈l/p⌉ layers plus the embedding (and the head when p = 1).
  const long long stage_layers = (sc.model.layers + pp - 1) / pp;
  const long long stage_params =
      largest_layers_params(sc.model, w, stage_layers) + w.pre.param_count + (pp == 1 ? w.post.param_count : 0);
  w.optimizer = optimizer_step(stage_params, sc.training);
  w.optimizer_params = stage_params;
  w.model_flops_per_step = model_flops(sc, s);
  w.recompute_flops_per_step = recompute_flops(sc, s, w);
  w.params_total = model_parameters(sc.model);
  return w;
}

}  // namespace stepsim::workload
