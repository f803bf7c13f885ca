// Activations a pipeline stage keeps: the Korthikanti per-layer bytes (workload layer) of
// every model-chunk forward its schedule has run but not yet backpropagated, and under a
// zero-bubble schedule what a weight-gradient pass still needs after its B pass.
#include <algorithm>
#include <cmath>

#include "parallelism/activation_offload.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "parallelism/stage_layout.hpp"
#include "workload/layer.hpp"
#include "workload/shape.hpp"

namespace stepsim::parallelism {

namespace {

Bytes chunk_activations(const workload::ModelWork& w, const ChunkLayers& c) {
  Bytes kept{0};
  for (int l = c.first_layer; l < c.first_layer + c.layers; ++l) kept += w.block(l).activations;
  if (c.pre) kept += w.pre.activations;
  if (c.post) kept += w.post.activations;
  return kept;
}

// Only transformer layers defer their wgrad GEMMs (the embedding and head run whole in B).
Bytes chunk_weight_inputs(const Scenario& s, const workload::ModelWork& w, const ChunkLayers& c) {
  Bytes kept{0};
  for (int l = c.first_layer; l < c.first_layer + c.layers; ++l) kept += weight_pass_inputs(s, w.block(l));
  return kept;
}

// Under sequence parallelism these GEMMs' inputs are kept sharded and gathered again for
// the weight gradient.
bool gathered_input(workload::Role role) { return role == workload::Role::qkv || role == workload::Role::fc1; }

// Context parallelism's K/V buffers during a layer's attention backward, beyond the rank's own
// K and V (which the layer keeps): around the ring (p2p), the block in hand and the one
// arriving, and the partial dK/dV in hand and in flight, each of one rank's K/V block
// (Transformer Engine's AttnFuncWithCPAndKVP2P double-buffers both); gathered (all_gather),
// the whole sequence's K/V and its dK/dV until they are reduce-scattered.
Bytes cp_attention_buffers(const Scenario& s, const workload::ModelWork& w) {
  const int cp = std::max(s.parallel.cp, 1);
  if (cp == 1) return Bytes(0);
  return w.layer.kv_block * (s.context_parallel.comm == CpComm::all_gather ? 2LL * cp : 4LL);
}

// torchtitan's repeat_kv during a layer's attention backward: the attention kernel takes K and
// V repeated to the query heads and returns their gradients as wide, which repeat_kv's backward
// then sums back to the K/V heads; beyond K, V and their gradients at the K/V heads' width, the
// extra width of dK and dV, and of K and V where the layer (or its recompute) did not keep them
// repeated (compiled: the backward repeats them again).
Bytes repeated_kv_buffers(const workload::LayerShape& shape) {
  if (!shape.repeats_kv) return Bytes(0);
  const long long tensors = shape.keeps_repeated_kv() ? 2 : 4;
  return Bytes(tensors * shape.tokens() * (shape.q_width() - shape.kv_width()) * shape.act_bytes);
}

// On top of what a chunk keeps, at the worst moment of its backward: the loss's backward
// buffers while the head still holds what it kept, or, once the head's activations are
// freed, a layer's recomputed working set with context parallelism's buffers of its attention.
Bytes backward_transient(const workload::ModelWork& w, const ChunkLayers& c, Bytes working) {
  const Bytes loss = c.post ? w.post.backward_working : Bytes(0);
  if (c.layers == 0) return loss;
  return std::max(loss, working - (c.post ? w.post.activations : Bytes(0)));
}

// A stage's input and output as torch.distributed.pipelining passes them between stages
// (PipelineStage in PyTorch's stage.py): one micro-batch's residual stream, s·b·h/t
// elements under sequence parallelism.
Bytes stage_boundary(const workload::LayerShape& shape) {
  return Bytes(shape.norm_tokens() * shape.hidden * shape.act_bytes);
}

// Activation offload (pp 1, so one chunk holds every layer): the offloaded layers'
// activations are in host memory at the peak, all but the one in transit, which is on the GPU
// only while the head's are not: Transformer Engine's last window ends with the last layer's
// forward, whose copy the head's forward waits for, and the last group's reload starts after
// the head's backward.
struct Offloaded {
  Bytes all{0};
  Bytes in_transit{0};  // the largest offloaded layer's
};

Offloaded offloaded(const Scenario& s, const workload::ModelWork& w) {
  Offloaded o;
  for (int l = 0; l < s.training.activation_offload_layers; ++l) {
    o.all += offloaded_bytes(w, l);
    o.in_transit = std::max(o.in_transit, offloaded_bytes(w, l));
  }
  return o;
}

}  // namespace

// dW = Xᵀ·dY: the wgrad GEMM is k-by-n over the m tokens, X is m·k and dY m·n elements. For
// a GPT layer without sequence parallelism that is Qi et al.'s 32·sbh of the 34·sbh + 5·as²b
// a forward keeps.
Bytes weight_pass_inputs(const Scenario& s, const workload::LayerWork& block) {
  const bool sharded = s.parallel.sequence_parallel && s.parallel.tp > 1;
  double elements = 0.0;
  for (const workload::OpCost& op : block.backward) {
    if (op.pass != workload::Pass::backward_weight) continue;
    const double input = static_cast<double>(op.k) * static_cast<double>(op.m);
    const double output_grad = static_cast<double>(op.k) * static_cast<double>(op.n);
    elements += (sharded && gathered_input(op.role) ? input / s.parallel.tp : input) + output_grad;
  }
  return Bytes(std::llround(elements * workload::layer_shape(s).act_bytes));
}

namespace {

// What the recomputed layer holds until its backward: all it keeps without recompute (under
// torchtitan's sequence parallelism its attention and MLP inputs whole as they were gathered)
// but what it kept anyway.
Bytes working_set(const Scenario& s, const workload::LayerWork& layer, const workload::LayerShape& shape) {
  if (s.training.recompute == Recompute::none || layer.recompute.empty()) return Bytes(0);
  const Bytes all = workload::layer_activations(shape, Recompute::none);
  return std::max(all - layer.activations, Bytes(0));
}

}  // namespace

Bytes layer_working_set(const Scenario& s, const workload::ModelWork& w, int layer) {
  const workload::LayerShape shape = workload::layer_shape(s);
  if (w.dense.empty() || !w.dense[static_cast<std::size_t>(layer)]) return working_set(s, w.layer, shape);
  return working_set(s, w.dense_layer, workload::as_dense(shape));
}

// The largest of the chunk's layers': in a stack that mixes dense and MoE layers, a stage of
// MoE layers alone never re-runs a dense layer's MLP.
Bytes recompute_working_set(const Scenario& s, const workload::ModelWork& w, const ChunkLayers& c) {
  Bytes most{0};
  if (c.layers == 0) return most;
  if (w.dense.empty()) return layer_working_set(s, w, c.first_layer);
  bool seen[2] = {false, false};  // a MoE layer, a dense one: each kind's set once
  for (int l = c.first_layer; l < c.first_layer + c.layers; ++l) {
    bool& seen_kind = seen[w.dense[static_cast<std::size_t>(l)] ? 1 : 0];
    if (seen_kind) continue;
    seen_kind = true;
    most = std::max(most, layer_working_set(s, w, l));
  }
  return most;
}

Bytes attention_backward_buffers(const Scenario& s, const workload::ModelWork& w) {
  return cp_attention_buffers(s, w) + repeated_kv_buffers(workload::layer_shape(s));
}

Bytes pipeline_buffers(const Scenario& s, int stage) {
  if (!pytorch_pipelining(s)) return Bytes(0);
  const ParallelSpec& p = s.parallel;
  const std::vector<ChunkLayers> layout = chunk_layers(p, s.model.layers);
  long long buffers = 0;
  for (int k = 0; k < chunks_per_stage(p); ++k) {
    const ChunkLayers& c = chunk_of(layout, p, stage, k);
    buffers += (c.pre ? 0 : 1) + (c.post ? 0 : 1);
  }
  const long long m = s.training.micro_batches(p.dp);
  return Bytes(buffers * m * stage_boundary(workload::layer_shape(s)).count());
}

// forward_one_chunk appends the chunk's output to output_chunks, which the schedule merges
// only after the last backward: the last stage's logits (b·s·V/t under loss_parallel), every
// other stage's output as PyTorch did before 2.8 (pytorch/pytorch#153383 keeps the last
// stage's only). A chunk that is not the model's first runs on the tensor in its activation
// receive buffer, which its first layer saves as its input rather than a copy.
ChunkPipelineBytes pipeline_chunk_bytes(const Scenario& s, const workload::ModelWork& w, const ChunkLayers& c) {
  if (!pytorch_pipelining(s)) return {};
  const workload::LayerShape shape = workload::layer_shape(s);
  const Bytes boundary = stage_boundary(shape);
  ChunkPipelineBytes out;
  out.output = c.post ? Bytes(shape.tokens() * shape.vocab * shape.act_bytes) : boundary;
  if (!c.pre && c.layers > 0) out.in_buffer = std::min(boundary, w.block(c.first_layer).activations);
  return out;
}

KeptActivations kept_activations(const Scenario& s, const workload::ModelWork& w, int stage) {
  const ParallelSpec& p = s.parallel;
  const std::vector<ChunkLayers> layout = chunk_layers(p, s.model.layers);
  const PipelineShape shape{std::max(p.pp, 1), static_cast<int>(s.training.micro_batches(p.dp)), chunks_per_stage(p),
                            !pytorch_pipelining(s), s.model.moe.a2a_overlap};
  const Bytes attention = attention_backward_buffers(s, w);
  const Offloaded on_host = offloaded(s, w);
  Bytes stored{0};
  long long chunks = 0;
  KeptActivations peak;
  const bool split = splits_backward(p.schedule);
  for (const PipelineOp& op : stage_order(p.schedule, shape, stage)) {
    const ChunkLayers& c = chunk_of(layout, p, stage, op.chunk);
    if (op.weight) {
      stored = stored - chunk_weight_inputs(s, w, c);
      continue;
    }
    const ChunkPipelineBytes pipeline = pipeline_chunk_bytes(s, w, c);
    const Bytes in_buffer = pipeline.in_buffer;
    if (op.forward) {
      stored += chunk_activations(w, c) - in_buffer - on_host.all + pipeline.output;  // the output until the step ends
      ++chunks;
      if (stored > peak.bytes) peak = {stored, chunks};
      const Bytes transit = stored - (c.post ? w.post.activations : Bytes(0)) + on_host.in_transit;
      if (on_host.all > Bytes(0) && transit > peak.bytes) peak = {transit, chunks};
      continue;
    }
    const Bytes during = stored + backward_transient(w, c, recompute_working_set(s, w, c) + attention);
    if (during > peak.bytes) peak = {during, chunks};
    stored = stored - (chunk_activations(w, c) - in_buffer - on_host.all);
    // A B pass frees what only it needed; the W pass's inputs stay until the W pass.
    if (split) stored += chunk_weight_inputs(s, w, c);
    if (split && stored > peak.bytes) peak = {stored, chunks - 1};
    --chunks;
  }
  return peak;
}

}  // namespace stepsim::parallelism
