// Per-tensor gradients and DDP bucket assignment. Tensor shapes follow Megatron-Core's GPT:
// column-parallel qkv/fc1 split their output rows by TP, row-parallel proj/fc2 their input
// columns (their biases are whole), the vocabulary-parallel embedding splits the vocabulary.
#include "parallelism/grad_buckets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <string_view>

#include "parallelism/stage_layout.hpp"
#include "stepsim/framework.hpp"
#include "workload/op_builder.hpp"
#include "workload/shape.hpp"

namespace stepsim::parallelism {

namespace {

using workload::Role;

struct LayerShape {
  long long hidden, qkv_out, attn, fc1_out, ffn;  // per GPU, after TP
  bool gelu;
  long long vocab;  // per GPU: the vocabulary-parallel share
  workload::LayerShape work;
};

// Names are joined by hand, not formatted: every rank of an all-ranks run lists its tensors.
void add(std::vector<GradTensor>& out, const std::string& prefix, const std::string& name, long long elements,
         int block, Role role) {
  std::string full;
  full.reserve(prefix.size() + 1 + name.size());
  full.append(prefix).append(" ").append(name);
  out.push_back({std::move(full), elements, block, role});
}

// A Linear layer's weight: gathered quantized in FP8 training (gathered_bytes).
void add_weight(std::vector<GradTensor>& out, const std::string& prefix, const std::string& name, long long elements,
                int block, Role role) {
  add(out, prefix, name, elements, block, role);
  out.back().quantized = true;
}

void add_norm(std::vector<GradTensor>& out, const std::string& prefix, const char* name, const LayerShape& s, int block,
              Role role) {
  add(out, prefix, std::string(name) + ".weight", s.hidden, block, role);
  if (s.gelu) add(out, prefix, std::string(name) + ".bias", s.hidden, block, role);
}

void add_linear(std::vector<GradTensor>& out, const std::string& prefix, const char* name, long long weight,
                long long bias, const LayerShape& s, int block, Role role) {
  add_weight(out, prefix, std::string(name) + ".weight", weight, block, role);
  if (s.gelu || s.work.expert_bias) add(out, prefix, std::string(name) + ".bias", bias, block, role);
}

// The weights' local widths come from the workload's shape, so parameters and GEMMs agree
// (one replicated kv head per GPU when TP exceeds the kv heads, a padded vocabulary).
LayerShape layer_shape(const ModelSpec& m, int tp, int ep, int etp) {
  const workload::LayerShape w = workload::weight_shape(m, tp, ep, etp);
  return {w.hidden, w.qkv_width(), w.q_heads * w.value_dim(), w.fc1_out, w.ffn, !w.llama_style, w.vocab, w};
}

// An MoE layer's MLP: the router, the GPU's routed experts (one tensor per weight kind, as
// Megatron's grouped GEMM holds them) and the shared experts.
void add_moe(std::vector<GradTensor>& out, const LayerShape& s, const std::string& p, int block) {
  const workload::LayerShape& w = s.work;
  const long long h = s.hidden;
  add(out, p, "router.weight", w.experts * h, block, Role::router);
  out.push_back(
      {p + " experts.fc1.weight", w.local_experts * w.expert_fc1_out * h, block, Role::expert_fc1, true, true});
  out.push_back({p + " experts.fc2.weight", w.local_experts * w.expert_ffn * h, block, Role::expert_fc2, true, true});
  if (w.expert_bias) {  // model.linear_bias (gpt-oss)
    add(out, p, "router.bias", w.experts, block, Role::router);
    out.push_back({p + " experts.fc1.bias", w.local_experts * w.expert_fc1_out, block, Role::expert_fc1, true});
    out.push_back({p + " experts.fc2.bias", w.local_experts * h, block, Role::expert_fc2, true});
  }
  if (w.shared_experts == 0) return;
  add_weight(out, p, "shared_experts.fc1.weight", w.shared_experts * w.shared_fc1_out * h, block, Role::shared_fc1);
  add_weight(out, p, "shared_experts.fc2.weight", w.shared_experts * w.shared_ffn * h, block, Role::shared_fc2);
}

// Multi-head latent attention's projections and latent norms (its output projection is the
// standard one, v_dim per head wide): the down projections whole on every TP rank, the up
// projections split by heads.
void add_latent_attention(std::vector<GradTensor>& out, const workload::LayerShape& w, const std::string& p,
                          int block) {
  const long long h = w.hidden;
  const long long q = w.q_heads * w.head_dim;
  if (w.q_lora > 0) {
    add_weight(out, p, "q_down.weight", h * w.q_lora, block, Role::q_down);
    add(out, p, "q_norm.weight", w.q_lora, block, Role::input_norm);
    add_weight(out, p, "q_up.weight", w.q_lora * q, block, Role::qkv);
  } else {
    add_weight(out, p, "q.weight", h * q, block, Role::qkv);
  }
  add_weight(out, p, "kv_down.weight", h * (w.kv_lora + w.qk_rope), block, Role::kv_down);
  add(out, p, "kv_norm.weight", w.kv_lora, block, Role::input_norm);
  add_weight(out, p, "kv_up.weight", w.kv_lora * w.q_heads * (w.head_dim - w.qk_rope + w.v_dim), block, Role::qkv);
}

// A transformer layer's tensors under `p` in `block`; a dense layer of a stack that mixes dense
// and MoE layers has the dense MLP.
void add_layer(std::vector<GradTensor>& out, const LayerShape& s, const std::string& p, int block, bool moe) {
  const long long h = s.hidden;
  add_norm(out, p, "input_norm", s, block, Role::input_norm);
  if (s.work.mla()) {
    add_latent_attention(out, s.work, p, block);
  } else {
    add_linear(out, p, "qkv", s.qkv_out * h, s.qkv_out, s, block, Role::qkv);
  }
  add_linear(out, p, "proj", s.attn * h, h, s, block, Role::attn_proj);
  add_norm(out, p, "post_norm", s, block, Role::post_norm);
  if (moe) {
    add_moe(out, s, p, block);
    return;
  }
  add_linear(out, p, "fc1", s.fc1_out * h, s.fc1_out, s, block, Role::fc1);
  add_linear(out, p, "fc2", s.ffn * h, h, s, block, Role::fc2);
}

// One multi-token prediction depth on the last stage: the embedding it looks the next tokens
// up in (a copy when the stage does not hold the first), its two input norms, the projection,
// its transformer layer (MoE in an MoE model) and its final norm; the output head is shared.
void add_mtp(std::vector<GradTensor>& out, const LayerShape& s, const ModelSpec& m, int depth, bool embedding_copy) {
  const std::string p = "mtp" + std::to_string(depth);
  const int block = m.layers + 1;
  if (embedding_copy) add(out, p, "embedding.weight", s.vocab * m.hidden, block, Role::mtp);
  add_norm(out, p, "enorm", s, block, Role::mtp);
  add_norm(out, p, "hnorm", s, block, Role::mtp);
  add(out, p, "projection.weight", 2 * m.hidden * s.work.hidden / s.work.tp, block, Role::mtp_projection);
  add_layer(out, s, p, block, s.work.moe());
  add_norm(out, p, "final_norm", s, block, Role::mtp);
}

}  // namespace

std::vector<GradTensor> gradient_tensors(const ModelSpec& m, const ParallelSpec& p) {
  const LayerShape s = layer_shape(m, p.tp, p.ep, p.etp);
  std::vector<GradTensor> out;
  out.reserve(static_cast<std::size_t>(m.layers) * 16 + 8);
  // A stage's layers only: the others would be listed and dropped again.
  const std::vector<ChunkLayers> chunks = p.stage < 0 ? std::vector<ChunkLayers>{} : chunk_layers(p, m.layers);
  const auto held = [&](int block) { return p.stage < 0 || stage_holds_block(chunks, p, m.layers, p.stage, block); };
  // The tied word embedding's gradient is complete only after the embedding's backward.
  add(out, "embedding", "word.weight", s.vocab * m.hidden, 0, Role::embedding);
  if (s.gelu) add(out, "embedding", "position.weight", m.seq_len * m.hidden, 0, Role::embedding);
  for (int l = 0; l < m.layers; ++l) {
    if (held(l + 1)) add_layer(out, s, "L" + std::to_string(l), l + 1, s.work.moe() && m.moe_layer(l));
  }
  add_norm(out, "head", "final_norm", s, m.layers + 1, Role::final_norm);
  // With pipeline stages the last one keeps its own copy of a tied embedding.
  if (!m.tied_embeddings || p.pp > 1) {
    add(out, "head", "lm_head.weight", s.vocab * m.hidden, m.layers + 1, Role::lm_head);
  }
  for (int d = 0; d < m.mtp_layers; ++d) add_mtp(out, s, m, d, p.pp > 1 && d == 0);
  if (p.stage < 0) return out;
  std::erase_if(out, [&](const GradTensor& t) { return !held(t.block); });
  return out;
}

int parameters_of(const GradTensor& tensor, bool separate_linears) {
  return separate_linears ? workload::weight_parameters(tensor.role, false) : 1;
}

std::vector<Bucket> assign_buckets(const std::vector<GradTensor>& tensors, const std::vector<int>& order,
                                   int element_bytes, Bytes first_cap, Bytes cap, bool at_most) {
  std::vector<Bucket> buckets;
  Bucket current;
  for (int t : order) {
    const Bytes size{tensors[static_cast<std::size_t>(t)].elements * element_bytes};
    if (at_most && !current.tensors.empty() && current.size + size > (buckets.empty() ? first_cap : cap)) {
      buckets.push_back(std::move(current));
      current = Bucket{};
    }
    current.size += size;
    current.tensors.push_back(t);
    if (current.size >= (buckets.empty() ? first_cap : cap)) {
      buckets.push_back(std::move(current));
      current = Bucket{};
    }
  }
  if (!current.tensors.empty()) buckets.push_back(std::move(current));
  return buckets;
}

namespace {

// No cap: without overlap the whole gradient is reduced in one pass after the backward, one
// bucket, as Megatron-LM's DistributedDataParallel does.
constexpr Bytes kUnbounded{std::numeric_limits<std::int64_t>::max() / 4};

// Buckets over this stage's gradients (the experts' or the others) in reverse registration
// order (≈ gradient-ready order).
BucketLayout reverse_order_layout(const Scenario& scenario, Bytes first_cap, Bytes cap, bool experts = false) {
  BucketLayout layout;
  layout.tensors = gradient_tensors(scenario.model, scenario.parallel);
  std::erase_if(layout.tensors, [&](const GradTensor& t) { return t.expert != experts; });
  std::vector<int> order(layout.tensors.size());
  std::iota(order.rbegin(), order.rend(), 0);
  const int bytes = element_bytes(scenario.data_parallel.grad_reduce_dtype);
  layout.buckets = assign_buckets(layout.tensors, order, bytes, first_cap, cap);
  return layout;
}

// Megatron-Core's buckets: only the first model chunk of the first pipeline stage is split
// into buckets of `cap_elements` parameters; each later chunk (interleaved schedules) and every
// chunk of a later stage reduces as one bucket, its reduction being off the critical path
// (Megatron-Core's DistributedDataParallel sets no bucket size when pp_rank > 0, and
// Megatron-LM's model set-up disables bucketing for model_chunk_idx > 0). zero2, which
// Megatron-Core's DDP does not run, fills and reduces its buckets on every stage and in every
// chunk, as DeepSpeed's ZeRO-2 fills its ipg buffer (stage_1_and_2.py: the gradient hook
// reduces the bucket whenever the next gradient would take it past reduce_bucket_size,
// whatever the stage, with overlap_comm or without: overlap_comm only picks the stream the
// reduction runs on and a second buffer). Without overlap_grad_reduce Megatron-Core's chunks
// are each one bucket; DeepSpeed's ZeRO-1 still fills buckets of reduce_bucket_size, all
// reduced after the backward. Buckets follow reverse registration order, which visits the chunks from
// the last to the first.
BucketLayout chunked_layout(const Scenario& scenario, long long cap_elements, bool experts) {
  const ParallelSpec& p = scenario.parallel;
  BucketLayout layout;
  layout.tensors = gradient_tensors(scenario.model, p);
  std::erase_if(layout.tensors, [&](const GradTensor& t) { return t.expert != experts; });
  const int bytes = element_bytes(scenario.data_parallel.grad_reduce_dtype);
  const Bytes cap{cap_elements * bytes};
  const int layers = scenario.model.layers;
  const int chunks = p.stage < 0 ? 1 : chunks_per_stage(p);
  const std::vector<ChunkLayers> all = p.stage < 0 ? std::vector<ChunkLayers>{} : chunk_layers(p, layers);
  // The stage's chunk holding `block` (0 embedding, 1..layers, layers + 1 head and MTP).
  const auto chunk_holding = [&](int block) {
    for (int c = 0; c < chunks; ++c) {
      const ChunkLayers& k = chunk_of(all, p, std::max(p.stage, 0), c);
      if ((block == 0 && k.pre) || (block == layers + 1 && k.post) ||
          (block >= k.first_layer + 1 && block <= k.first_layer + k.layers))
        return c;
    }
    return 0;
  };
  std::vector<std::vector<int>> order(static_cast<std::size_t>(chunks));
  for (int t = static_cast<int>(layout.tensors.size()) - 1; t >= 0; --t) {
    const int c = chunks == 1 ? 0 : chunk_holding(layout.tensors[static_cast<std::size_t>(t)].block);
    order[static_cast<std::size_t>(c)].push_back(t);
  }
  // Chunks in the order their backward ends: the one holding the later layers first.
  std::vector<int> by_position(static_cast<std::size_t>(chunks));
  std::iota(by_position.begin(), by_position.end(), 0);
  if (chunks > 1) {
    std::sort(by_position.begin(), by_position.end(), [&](int a, int b) {
      return chunk_of(all, p, p.stage, a).first_layer > chunk_of(all, p, p.stage, b).first_layer;
    });
  }
  const bool overlap = scenario.data_parallel.overlap_grad_reduce;
  // DeepSpeed's ZeRO reduces its bucket before a gradient would take it past
  // reduce_bucket_size (stage_1_and_2.py, reduce_independent_p_g_buckets_and_remove_grads); a
  // gradient larger than that is reduced alone. Megatron-Core closes a bucket once it holds at
  // least its size.
  const bool at_most = scenario.training.framework == Framework::deepspeed;
  const bool every_chunk = scenario.data_parallel.kind == DpKind::zero2;
  for (int c : by_position) {
    // DeepSpeed (one chunk, pp 1: its pipeline engine has its own layout) fills its ipg buffer
    // to reduce_bucket_size with overlap_comm or without: without it, stage 1's reduce_gradients
    // walks every parameter after the backward and reduces the buffer each time it would
    // overflow, so its buckets run one after another (stage_1_and_2.py).
    const bool bucketed = every_chunk || at_most || (overlap && c == 0 && p.stage <= 0);
    const Bytes chunk_cap = bucketed ? cap : kUnbounded;
    for (Bucket& b :
         assign_buckets(layout.tensors, order[static_cast<std::size_t>(c)], bytes, chunk_cap, chunk_cap, at_most))
      layout.buckets.push_back(std::move(b));
  }
  return layout;
}

}  // namespace

BucketLayout bucket_layout(const Scenario& scenario) {
  if (megatron_buckets(DpKind::ddp, scenario.training.framework)) return megatron_bucket_layout(scenario);
  const DataParallelSpec& dp = scenario.data_parallel;
  if (!dp.overlap_grad_reduce && scenario.training.framework == Framework::deepspeed)
    return deepspeed_engine_layout(scenario);
  if (!dp.overlap_grad_reduce) return reverse_order_layout(scenario, kUnbounded, kUnbounded);
  return reverse_order_layout(scenario, Bytes::mib(dp.first_bucket_mb), Bytes::mib(dp.bucket_cap_mb));
}

BucketLayout megatron_bucket_layout(const Scenario& scenario) {
  return chunked_layout(scenario, megatron_bucket_elements(scenario), false);
}

BucketLayout deepspeed_engine_layout(const Scenario& scenario) {
  const Bytes buffer{500'000'000LL * element_bytes(scenario.data_parallel.grad_reduce_dtype)};
  return reverse_order_layout(scenario, buffer, buffer);
}

int expert_dp_size(const Scenario& s) {
  if (s.model.moe.experts == 0) return 1;
  return s.parallel.tp * s.parallel.cp * s.parallel.dp / (std::max(s.parallel.ep, 1) * std::max(s.parallel.etp, 1));
}

BucketLayout dense_layout(const Scenario& scenario, BucketLayout layout) {
  if (scenario.parallel.dp <= 1) return {};
  return layout;
}

BucketLayout expert_bucket_layout(const Scenario& scenario, bool megatron) {
  const DataParallelSpec& dp = scenario.data_parallel;
  if (megatron) return chunked_layout(scenario, megatron_bucket_elements(scenario), true);
  if (!dp.overlap_grad_reduce) return reverse_order_layout(scenario, kUnbounded, kUnbounded, true);
  return reverse_order_layout(scenario, Bytes::mib(dp.first_bucket_mb), Bytes::mib(dp.bucket_cap_mb), true);
}

long long megatron_bucket_elements(const Scenario& scenario) {
  // --ddp-bucket-size, or max(4e7, 1e6·dp) parameters per bucket (Megatron-Core's
  // DistributedDataParallel when its config gives no bucket size). Under DeepSpeed's ZeRO
  // stages 1 and 2 the bucket is reduce_bucket_size elements, 5e8 by default
  // (deepspeed/runtime/zero/config.py: ZERO_REDUCE_BUCKET_SIZE_DEFAULT).
  if (scenario.data_parallel.bucket_parameters > 0) return scenario.data_parallel.bucket_parameters;
  if (scenario.training.framework == Framework::deepspeed) return kDeepSpeedBucketElements;
  return std::max(40'000'000LL, 1'000'000LL * scenario.parallel.dp);
}

std::string megatron_bucket_text(const Scenario& scenario) {
  const long long n = megatron_bucket_elements(scenario);
  if (n < 1'000'000) return fmt::format("{} parameters", n);
  return fmt::format("{:g} M parameters", static_cast<double>(n) / 1e6);
}

long long bucket_elements(const BucketLayout& layout, const Bucket& bucket) {
  long long n = 0;
  for (int t : bucket.tensors) n += layout.tensors[static_cast<std::size_t>(t)].elements;
  return n;
}

int gathered_bytes(const GradTensor& tensor, Precision precision) {
  if (!low_precision(precision)) return element_bytes(precision);
  return precision == Precision::fp8 && tensor.quantized ? 1 : 2;
}

bool weight_decayed(const GradTensor& tensor) {
  const std::string_view name = tensor.name;
  return !name.ends_with(".bias") && !name.ends_with("norm.weight");
}

Bytes bucket_gather_bytes(const BucketLayout& layout, const Bucket& bucket, Precision precision) {
  Bytes n{0};
  for (int t : bucket.tensors) {
    const GradTensor& tensor = layout.tensors[static_cast<std::size_t>(t)];
    n += Bytes(tensor.elements * gathered_bytes(tensor, precision));
  }
  return n;
}

}  // namespace stepsim::parallelism
