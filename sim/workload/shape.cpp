// Derives the per-GPU layer dimensions and rejects models that tensor parallelism cannot split.
#include "workload/shape.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"

namespace stepsim::workload {
namespace {

void require(const Scenario& sc, bool ok, const char* where, const std::string& message) {
  if (!ok) throw scenario_error(sc, where, message);
}

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

void validate(const Scenario& sc, long long kv_heads, long long ffn) {
  const ModelSpec& m = sc.model;
  const long long t = sc.parallel.tp;
  require(sc, m.layers > 0 && m.hidden > 0 && m.heads > 0 && m.seq_len > 0 && m.vocab > 0, "/model",
          "layers, hidden, heads, seq_len and vocab must be positive");
  require(sc, t > 0 && sc.training.micro_batch > 0, "/parallel/tp", "tp and training.micro_batch must be positive");
  require(sc, m.head_dim > 0 || m.hidden % m.heads == 0, "/model/heads",
          fmt::format("hidden {} is not a multiple of heads {}", m.hidden, m.heads));
  require(sc, m.heads % t == 0, "/parallel/tp",
          fmt::format("tp {} does not divide the {} attention heads", t, m.heads));
  require(sc, m.heads % kv_heads == 0 && kv_heads % t == 0, "/model/kv_heads",
          fmt::format("kv_heads {} must divide heads {} and be divisible by tp {}", kv_heads, m.heads, t));
  require(sc, ffn % t == 0, "/model/ffn_hidden", fmt::format("tp {} does not divide ffn_hidden {}", t, ffn));
  require(sc, !sc.parallel.sequence_parallel || m.seq_len % t == 0, "/parallel/sequence_parallel",
          fmt::format("sequence parallelism needs seq_len {} to be a multiple of tp {}", m.seq_len, t));
}

// The share of the routed copies the experts keep, over all EP ranks: capacity drops what
// exceeds capacity_factor times an expert's even share, and a dropped copy skips the experts
// (the residual carries its token). `imbalance` gives only the busiest rank's load, so the
// other ranks are taken to share the rest evenly, the spread that drops least.
double kept_load(const MoeSpec& moe, int ep) {
  if (moe.capacity_factor <= 0) return 1.0;
  if (ep <= 1) return std::min(1.0, moe.capacity_factor);
  const double others = std::max(0.0, (ep - moe.imbalance) / (ep - 1));
  const double kept = std::min(moe.imbalance, moe.capacity_factor) + (ep - 1) * std::min(others, moe.capacity_factor);
  return kept / ep;
}

}  // namespace

long long LayerShape::routed_tokens() const {
  return std::llround(static_cast<double>(norm_tokens() * top_k) * routed_load);
}

LayerShape weight_shape(const ModelSpec& m, int tp, int ep, int etp) {
  // The io layer fills these defaults; scenarios built in code may leave them zero.
  const long long kv_heads = m.kv_heads > 0 ? m.kv_heads : m.heads;
  const long long ffn = m.ffn_hidden > 0 ? m.ffn_hidden : 4 * m.hidden;
  LayerShape s;
  s.hidden = m.hidden;
  s.tp = tp;
  s.head_dim = m.head_dim > 0 ? m.head_dim : m.hidden / m.heads;
  s.qk_norm = m.qk_norm && !m.latent_attention();
  s.q_heads = m.heads / s.tp;
  s.kv_heads = kv_heads / s.tp;  // TP splits them, never replicates them (io/validate.cpp)
  if (m.latent_attention()) {
    s.q_lora = m.mla.q_lora_rank;
    s.kv_lora = m.mla.kv_lora_rank;
    s.qk_rope = m.mla.qk_rope_head_dim;
    s.v_dim = m.mla.v_head_dim;
    s.head_dim = m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim;
  }
  s.ffn = ffn / s.tp;
  s.llama_style = m.mlp == MlpKind::swiglu;
  s.fc1_out = s.llama_style ? 2 * s.ffn : s.ffn;
  s.vocab = ceil_div(m.vocab, s.tp);
  if (m.moe.experts > 0) {
    s.experts = m.moe.experts;
    s.local_experts = std::max<long long>(m.moe.experts / std::max(ep, 1), 1);
    s.top_k = m.moe.top_k;
    s.etp = std::max(etp, 1);
    s.expert_ffn = (m.moe.expert_ffn_hidden > 0 ? m.moe.expert_ffn_hidden : ffn) / s.etp;
    s.expert_fc1_out = s.llama_style ? 2 * s.expert_ffn : s.expert_ffn;
    // Megatron-Core's SharedExpertMLP is one MLP moe_shared_expert_intermediate_size wide (every
    // shared expert's width together), tensor-parallel like the dense MLP (its fc1 column- and
    // its fc2 row-parallel over the TP group; io checks that tp divides the width).
    const long long shared_width = m.moe.shared_experts * (s.expert_ffn * s.etp);
    s.shared_experts = m.moe.shared_experts > 0 ? 1 : 0;
    s.shared_ffn = shared_width / s.tp;
    s.shared_fc1_out = s.llama_style ? 2 * s.shared_ffn : s.shared_ffn;
    s.expert_bias = m.linear_bias;
  }
  return s;
}

LayerShape as_dense(const LayerShape& moe) {
  LayerShape s = moe;
  s.experts = 0;
  s.local_experts = 0;
  s.top_k = 1;
  s.expert_ffn = 0;
  s.expert_fc1_out = 0;
  s.shared_experts = 0;
  s.expert_bias = false;
  s.etp = 1;
  s.routed_load = 1.0;
  s.kept_load = 1.0;
  return s;
}

LayerShape layer_shape(const Scenario& sc) {
  const ModelSpec& m = sc.model;
  validate(sc, m.kv_heads > 0 ? m.kv_heads : m.heads, m.ffn_hidden > 0 ? m.ffn_hidden : 4 * m.hidden);
  LayerShape s = weight_shape(m, sc.parallel.tp, sc.parallel.ep, sc.parallel.etp);
  s.batch = sc.training.micro_batch;
  // Context parallelism gives each rank 2 of 2·cp chunks of the sequence (io checks that
  // seq_len divides): every token-proportional op and activation shrinks by cp.
  s.cp = std::max(sc.parallel.cp, 1);
  s.seq = m.seq_len / s.cp;
  s.sequence_parallel = sc.parallel.sequence_parallel && s.tp > 1;
  s.dtensor_tp = !regathers_inputs(sc.training.framework);
  s.attention = sc.training.attention;
  s.eager = sc.training.fusion == Fusion::eager;
  s.clamps_swiglu = m.swiglu_limit > 0;
  s.unfused_rope = m.yarn_factor > 1;
  s.autocast = runs_autocast(sc);
  s.separate_linears = s.llama_style && !s.mla() && sc.training.framework != Framework::unspecified &&
                       !traits_of(sc.training.framework).megatron_core;
  s.cached_weights = traits_of(sc.training.framework).megatron_core;
  s.weighs_in_experts = traits_of(sc.training.framework).megatron_core;
  s.repeats_kv = traits_of(sc.training.framework).torchtitan_attention && !s.mla();
  s.weighs_in_fp32 = torchtitan(sc.training.framework) && s.eager;
  s.unfused_loss = sc.training.cross_entropy == CrossEntropy::unfused;
  s.loss = s.eager && !s.unfused_loss ? CrossEntropy::eager : sc.training.cross_entropy;
  s.precision = sc.training.precision;
  s.fp8_scaling = sc.training.fp8_scaling;
  s.fp8_transpose = sc.cluster.gpu.arch != GpuArch::blackwell || torchtitan(sc.training.framework);
  s.act_bytes = low_precision(s.precision) ? 2 : element_bytes(s.precision);
  s.saved_input_bytes = s.act_bytes;
  if (traits_of(sc.training.framework).megatron_core && low_precision(s.precision)) {
    s.saved_input_bytes = s.precision == Precision::mxfp8   ? 1.0 + 1.0 / 32.0
                          : s.precision == Precision::nvfp4 ? 0.5 + 1.0 / 16.0
                                                            : 1.0;
  }
  s.main_grad_bytes = element_bytes(sc.training.main_grad);
  s.main_grad_hook = traits_of(sc.training.framework).megatron_core;
  // The busiest EP rank sets the pace: it takes `imbalance` times the mean of the routed
  // tokens, but no expert more than capacity_factor times its share (the rest are dropped).
  const MoeSpec& moe = m.moe;
  s.routed_load = sc.parallel.ep > 1 ? moe.imbalance : 1.0;
  if (moe.capacity_factor > 0) s.routed_load = std::min(s.routed_load, moe.capacity_factor);
  s.kept_load = kept_load(moe, sc.parallel.ep);
  s.sorts_chunks = s.moe() && s.local_experts > 1 && moe.dispatcher == MoeDispatcher::alltoall &&
                   traits_of(sc.training.framework).megatron_core;
  s.fused_permutation =
      s.moe() && moe.dispatcher == MoeDispatcher::alltoall && traits_of(sc.training.framework).megatron_core;
  s.counts_tokens = s.fused_permutation && sc.parallel.ep > 1;
  s.balancing = moe.load_balancing;
  s.router_counts_bias = moe.expert_bias;
  s.random_router = moe.force_balance;
  s.drops_tokens = s.moe() && moe.capacity_factor > 0 && traits_of(sc.training.framework).megatron_core;
  if (!sc.training.recompute_modules.empty()) {
    s.recompute_modules = 0;
    for (RecomputeModule r : sc.training.recompute_modules) s.recompute_modules |= 1U << static_cast<unsigned>(r);
  }
  return s;
}

}  // namespace stepsim::workload
