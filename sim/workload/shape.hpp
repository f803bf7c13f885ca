// The per-GPU dimensions of one transformer layer once tensor and sequence parallelism have
// split it; every op, parameter and activation count of the workload derives from these.
#pragma once

#include "stepsim/scenario.hpp"

namespace stepsim::workload {

struct LayerShape {
  long long batch = 1;   // micro-batch b
  long long seq = 1;     // this rank's share of the sequence: s / cp
  long long cp = 1;      // context-parallel ranks sharing the sequence
  long long hidden = 1;  // h
  long long tp = 1;      // t
  bool sequence_parallel = false;
  long long head_dim = 1;  // model.head_dim, or h / heads
  bool qk_norm = false;    // model.qk_norm: each head's query and key normed (not under MLA)
  long long q_heads = 1;   // local query heads: heads / t
  long long kv_heads = 1;  // local key/value heads: kv_heads / t (t divides them)
  // Multi-head latent attention (kv_lora 0: standard attention): the latents' widths, each
  // head's query/key width qk_nope + qk_rope (head_dim) and value width v_dim.
  long long q_lora = 0;
  long long kv_lora = 0;
  long long qk_rope = 0;
  long long v_dim = 0;
  long long window = 0;   // sliding-window attention: keys per query at most; 0: the causal prefix
  long long ffn = 1;      // local ffn hidden: ffn_hidden / t
  long long fc1_out = 1;  // local fc1 width: ffn (GeLU) or 2·ffn (SwiGLU gate and up fused)
  long long vocab = 1;    // local vocabulary: ⌈V / t⌉ (vocab-parallel embedding and LM head)
  // SwiGLU models follow Llama (RMSNorm, no biases, no dropout, rotary positions);
  // GeLU models follow GPT (LayerNorm, biases, dropout 0.1, learned positions).
  bool llama_style = false;
  // The model code runs Llama's attention and MLP projections as Linear layers of their own
  // (wq, wk and wv; w1 and w3: torchtitan's Llama, Hugging Face's under DeepSpeed, Llama's
  // reference code under eager PyTorch), which stepsim runs as one QKV and one fc1 GEMM: the host
  // issues each (OpCost::operators). Megatron-Core fuses them (linear_qkv, linear_fc1), as does the
  // unspecified framework's Transformer Engine layout; MLA's projections are stepsim's own GEMMs.
  bool separate_linears = false;
  AttentionKind attention = AttentionKind::flash;
  bool eager = false;  // element-wise work as PyTorch eager runs it (training.fusion)
  // gpt-oss's layer as Megatron-Core runs it: the experts' SwiGLU inputs clamped
  // (model.swiglu_limit), their fc2 bias added expert by expert (model.linear_bias), the rotary
  // embedding unfused because YaRN scales it (model.yarn_factor).
  bool clamps_swiglu = false;
  bool expert_bias = false;
  bool unfused_rope = false;
  // torch.autocast over an fp32 model (stepsim::runs_autocast): every micro-batch's forward casts
  // each Linear layer's fp32 weight to bf16 for its GEMM, and the backward casts the weight's
  // gradient back to fp32 (workload/autocast.hpp).
  bool autocast = false;
  // One element of the residual stream (the embedding's output, the residual adds, the norms'
  // inputs): under autocast fp32, since the embedding's fp32 table gives fp32, the norms run in
  // fp32 and a bf16 branch added to the fp32 stream promotes to it.
  int stream_bytes() const { return autocast ? 4 : act_bytes; }
  // Quantized weights reused after a step's first micro-batch (the framework's
  // megatron_core): LayerWork::first_forward quantizes them, forward does not.
  bool cached_weights = false;
  // Megatron-Core weighs each routed copy by its router probability inside the experts (the
  // framework's megatron_core; Megatron-LM 2659630721, 2025-04-09, "Memory efficient token
  // permutation": TEGroupedMLP's weighted activation) and sums the expert outputs unweighted,
  // so the combine keeps no expert output for the probabilities' gradient.
  bool weighs_in_experts = false;
  // torchtitan's MoE weighs the routed copies by their scores in fp32,
  // `(routed_output.to(torch.float32) * top_scores_experts_sorted.reshape(-1, 1)).to(x.dtype)`
  // (routed_input alike with score_before_experts), and eager autograd's product keeps its fp32
  // operand: 4 bytes a weighted element. Compiled, the partitioner keeps the bf16 tensor and
  // recomputes the cast.
  bool weighs_in_fp32 = false;
  bool unfused_loss = false;  // Megatron's unfused vocab-parallel cross entropy (training.cross_entropy)
  // How the loss runs: training.cross_entropy, eager whenever the element-wise work is.
  CrossEntropy loss = CrossEntropy::fused;
  // Mixture of experts (experts 0: a dense MLP). Experts stay whole on a GPU (expert tensor
  // parallelism 1, Megatron's MoE parallel folding) and are spread over the EP group.
  long long experts = 0;
  long long local_experts = 0;  // experts / ep
  long long top_k = 1;
  long long etp = 1;             // expert tensor parallelism: ranks one expert is split over
  long long expert_ffn = 0;      // one expert's ffn hidden on this GPU: expert_ffn_hidden / etp
  long long expert_fc1_out = 0;  // its fc1 width: expert_ffn (GeLU) or 2·expert_ffn (SwiGLU)
  long long shared_experts = 0;  // 1 where tokens go through shared experts: one MLP, all of their widths
  long long shared_ffn = 0;      // its ffn hidden on this rank: the shared experts' together over tp
  long long shared_fc1_out = 0;  // its fc1 width
  // Megatron-Core's all-to-all dispatcher sorts the tokens the dispatch brought by local expert,
  // and back before the combine, when a rank holds several experts (sort_chunks_by_idxs).
  bool sorts_chunks = false;
  // Megatron-Core's all-to-all dispatcher permutes the rank's own tokens into their routed copies
  // before the dispatch, and back after the combine, with Transformer Engine's fused mask-map
  // kernels (moe_permute_fusion).
  bool fused_permutation = false;
  // Its preprocessing counts the tokens per expert and the EP group gathers the counts before
  // the dispatch (ep > 1): MoEAlltoAllTokenDispatcher.preprocess.
  bool counts_tokens = false;
  // The router beside its GEMM (model.moe.load_balancing, expert_bias, force_balance).
  MoeBalancingLoss balancing = MoeBalancingLoss::none;
  bool router_counts_bias = false;
  bool random_router = false;
  // Megatron-Core's router drops what exceeds each expert's capacity (model.moe.capacity_factor:
  // moe_utils.apply_router_token_dropping).
  bool drops_tokens = false;
  double routed_load = 1.0;  // tokens this GPU's experts take per routed token (imbalance, capacity)
  double kept_load = 1.0;    // routed copies the experts keep, per routed copy, over all EP ranks (capacity)
  int act_bytes = 2;         // one activation element (fp8 training keeps activations in bf16)
  // One element of a Linear layer's input as the layer keeps it for its weight gradient:
  // act_bytes, but under Megatron-Core in a low precision Transformer Engine keeps the input it
  // quantized (_Linear, _LayerNormLinear and _GroupedLinear save the quantized tensor with its
  // column-wise usage only): 1 byte in FP8, 1 + 1/32 in MXFP8 (an E8M0 scale per 32 elements),
  // 1/2 + 1/16 in NVFP4 (an FP8 scale per 16).
  double saved_input_bytes = 2.0;
  // The training precision: fp8, mxfp8 and nvfp4 run the Linear layers' GEMMs in that format,
  // each input quantized by a kernel whose traffic depends on the recipe (fp8_scaling).
  Precision precision = Precision::bf16;
  Fp8Scaling fp8_scaling = Fp8Scaling::delayed;
  // Whether a per-tensor FP8 cast also writes the transposed copy the other GEMMs read:
  // Transformer Engine does before compute capability 10.0 only (its FP8 GEMMs take the TN
  // layout alone there, nvte_is_non_tn_fp8_gemm_supported); torchao (torchtitan) always does.
  bool fp8_transpose = true;
  int main_grad_bytes = 4;  // one main-gradient element, which weight-gradient GEMMs accumulate into
  // Megatron-Core's DDP (training.framework megatron, nemo) adds each gradient that autograd
  // returns (the embedding's, where no GEMM accumulates into the main gradient) into it.
  bool main_grad_hook = false;

  // What training.recompute "selective" re-runs, one bit per RecomputeModule (Megatron-Core's
  // default: the attention core).
  unsigned recompute_modules = 1U << static_cast<unsigned>(RecomputeModule::core_attn);
  bool recomputes(RecomputeModule m) const { return ((recompute_modules >> static_cast<unsigned>(m)) & 1U) != 0; }

  long long tokens() const { return batch * seq; }
  long long full_seq() const { return seq * cp; }
  // torchtitan's attention repeats the K/V heads to the query heads before the attention
  // kernel (repeat_kv), which then reads, and context parallelism moves, them repeated.
  bool repeats_kv = false;
  // Eager, the repeated K and V (repeat_kv's expand and reshape copy them) are what
  // scaled_dot_product_attention saves for its backward, so a layer keeps them as wide as the
  // queries; compiled, the partitioner saves the narrower K/V and repeats them again in the
  // backward (expand and clone are recomputable ops).
  bool keeps_repeated_kv() const { return repeats_kv && eager; }
  // K and V of this rank's tokens as the attention kernel takes them: what one CP ring step
  // passes on.
  long long kv_block_elements() const { return tokens() * 2 * (repeats_kv ? q_width() : kv_width()); }
  // Rows seen by norms, dropouts and residual adds: s/t of them with sequence parallelism.
  long long norm_tokens() const { return sequence_parallel ? batch * seq / tp : batch * seq; }
  // PyTorch's DTensor tensor parallelism (torchtitan's; stepsim::regathers_inputs false) with
  // sequence parallelism: a Linear saves the input it all-gathered whole, where Megatron-Core
  // saves its shard and gathers it again for the backward.
  bool dtensor_tp = false;
  bool keeps_gathered_inputs() const { return tp > 1 && sequence_parallel && dtensor_tp; }
  long long q_width() const { return q_heads * head_dim; }
  long long kv_width() const { return kv_heads * head_dim; }
  long long qkv_width() const { return q_width() + 2 * kv_width(); }
  bool dropout() const { return !llama_style; }
  bool mla() const { return kv_lora > 0; }
  // Query heads' value width: what the attention writes and the projection reads, per head.
  long long value_dim() const { return mla() ? v_dim : head_dim; }
  bool moe() const { return experts > 0; }
  // Tokens this GPU routes (its sequence-parallel share) and token copies its experts compute.
  long long routed_tokens() const;
};

// The local shape of `scenario`'s layers; throws InputError when TP does not divide them.
LayerShape layer_shape(const Scenario& scenario);

// The dense layer of a stack that mixes dense and MoE layers: `moe`'s shape with the dense
// MLP (model.ffn_hidden, split by TP) in place of the experts.
LayerShape as_dense(const LayerShape& moe);

// The local widths of `model`'s weights under TP `tp` (heads, kv heads, ffn, vocabulary),
// the one place parameter shapes come from; the batch fields keep their defaults. Does not
// validate (layer_shape does).
LayerShape weight_shape(const ModelSpec& model, int tp, int ep = 1, int etp = 1);

}  // namespace stepsim::workload
