// Activations a pipeline stage keeps: the Korthikanti per-layer bytes (workload layer) of
// every model-chunk forward its schedule has run but not yet backpropagated, and under a
// zero-bubble schedule what a weight-gradient pass still needs after its B pass; each pass
// replayed op by op as the program issues it, with what each op allocates and frees.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <tuple>

#include "parallelism/activation_offload.hpp"
#include "parallelism/expert_parallel.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/pipeline_comm.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "parallelism/stage_layout.hpp"
#include "parallelism/step_builder.hpp"
#include "stepsim/framework.hpp"
#include "workload/layer.hpp"
#include "workload/shape.hpp"

namespace stepsim::parallelism {

namespace {

// Under sequence parallelism these GEMMs' inputs are kept sharded and gathered again for
// the weight gradient.
bool gathered_input(workload::Role role) { return role == workload::Role::qkv || role == workload::Role::fc1; }

// Context parallelism's buffers during a layer's attention backward, beyond the rank's own K and
// V (which the layer keeps) and the dQ, dK and dV a single GPU's attention kernel returns (the
// step's attention piece's, which no model of a backward counts). With kv one rank's K/V block
// (b·s/cp tokens, as the attention takes them) in their precision and q its queries' bytes:
// - Transformer Engine's ring (AttnFuncWithCPAndKVP2P.backward, bf16/fp16 attention): two
//   p2p_comm_buffers of twice the block in the K/V's dtype, each the K/V and the partial dK/dV a
//   step sends or receives in one message (4 kv), and the dQ it accumulates into
//   (dq_buffer = empty_like(q): q).
// - Transformer Engine's gather (AttnFuncWithCPAndKVAllGather.backward, sbhd): at its peak,
//   while the last of the two index_selects that put the whole sequence's dK and dV back in rank
//   order runs, it holds the gathered K and V reordered (cp kv), the dK and dV of the whole
//   sequence (cp kv, one of them still before its reorder, cp/2 kv) and reordered (cp kv), the
//   two steps' dK/dV kept in dk_per_step and dv_per_step ((rank + 1)/2 + (2cp − rank)/2 =
//   cp + 1/2 kv) and dQ with the two steps' halves of it (2 q): less the kernel's returns (q
//   and kv), q + (3.5 cp − 0.5) kv.
// - PyTorch's _templated_ring_attention_backward (torchtitan and pytorch, convert_to_f32): the dK/dV in
//   float32 (f = 2 kv a block), three of them from the second step on (the accumulated ones in
//   hand, the ones sent and the ones arriving), dQ's float32 accumulator (2 q), and the K/V: with
//   the allgather rotater the gathered sequence (cp kv) and the concatenated copy of the block in
//   hand (next_kv, kept from the step before at the last step): cp + 1 kv; with alltoall the block
//   in hand, its concatenated copy being sent and the block arriving (3 kv, each middle step),
//   at cp 2 the block in hand and the copy the first step sent, still referenced (2 kv).
Bytes cp_attention_buffers(const Scenario& s, const workload::ModelWork& w) {
  const int cp = std::max(s.parallel.cp, 1);
  if (cp == 1) return Bytes(0);
  const workload::LayerShape shape = workload::layer_shape(s);
  const Bytes kv = w.layer.kv_block;
  const bool gather = s.context_parallel.comm == CpComm::all_gather;
  if (pytorch_context_parallel(s.training.framework)) {
    const Bytes dq_f32 = Bytes(shape.tokens() * shape.q_width() * 4);
    const long long kv_blocks = gather ? cp + 1LL : (cp >= 3 ? 3LL : 2LL);
    return w.layer.kv_grad_block_f32 * 3 + kv * kv_blocks + dq_f32;
  }
  const Bytes q = Bytes(shape.tokens() * shape.q_width() * shape.act_bytes);
  if (gather) return q + Bytes((kv.count() * (7LL * cp - 1) + 1) / 2);
  return q + kv * 4;
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
  // Each buffer holds what crosses the boundary (PipelineStage in PyTorch's stage.py): the
  // SendRecv message.
  return Bytes(buffers * m * pipeline_message(s).count());
}

// forward_one_chunk appends the chunk's output to output_chunks, which the schedule merges
// only after the last backward: the last stage's logits (b·s·V/t under loss_parallel), every
// other stage's output as PyTorch did before 2.8 (pytorch/pytorch#153383 keeps the last
// stage's only). A chunk that is not the model's first runs on the tensor in its activation
// receive buffer, which its first layer saves as its input rather than a copy.
ChunkPipelineBytes pipeline_chunk_bytes(const Scenario& s, const workload::ModelWork& w, const ChunkLayers& c) {
  if (!pytorch_pipelining(s)) return {};
  const workload::LayerShape shape = workload::layer_shape(s);
  const Bytes boundary = pipeline_message(s);
  ChunkPipelineBytes out;
  out.output = c.post ? Bytes(shape.tokens() * shape.vocab * shape.act_bytes) : boundary;
  if (!c.pre && c.layers > 0) out.in_buffer = std::min(boundary, w.block(c.first_layer).activations);
  return out;
}

namespace {

// One piece of a pass as the program builder issues it (StepWriter's forward, backward and
// weight_pass; under the combined 1F1B each op in three pieces, its communication before,
// itself, and what follows it, between the block's data-parallel hooks), with what it
// allocates.
struct Piece {
  Bytes delta{0};
  bool dispatch = false;    // it issues an EP dispatch all-to-all (forward, or its backward)
  bool all_to_all = false;  // it issues an EP all-to-all
};

class PassPieces {
 public:
  PassPieces(const Scenario& s, const workload::ModelWork& w)
      // Only where the all-to-alls stand is read here, which is the same on every stage.
      : s_(s), w_(w), memory_(s, w), ep_(s, w, 0), split_(splits_backward(s.parallel.schedule)) {}

  std::vector<Piece> forward(const ChunkLayers& c) const {
    std::vector<Piece> out;
    if (c.pre) ops(out, w_.pre.forward, 0, Phase::forward);
    for (int l = c.first_layer; l < c.first_layer + c.layers; ++l) ops(out, w_.block(l).forward, l + 1, Phase::forward);
    if (c.post) ops(out, w_.post.forward, s_.model.layers + 1, Phase::forward);
    return out;
  }

  // The whole backward, or under a zero-bubble schedule its B pass.
  std::vector<Piece> backward(const ChunkLayers& c) const {
    std::vector<Piece> out;
    const Passes passes = split_ ? Passes::input : Passes::all;
    if (c.post) ops(out, w_.post.backward, s_.model.layers + 1, Phase::backward);
    for (int l = c.first_layer + c.layers - 1; l >= c.first_layer; --l) {
      ops(out, w_.block(l).recompute, l + 1, Phase::recompute);
      ops(out, w_.block(l).backward, l + 1, Phase::backward, passes);
    }
    if (c.pre) ops(out, w_.pre.backward, 0, Phase::backward);
    return out;
  }

  std::vector<Piece> weight(const ChunkLayers& c) const {
    std::vector<Piece> out;
    for (int l = c.first_layer + c.layers - 1; l >= c.first_layer; --l)
      ops(out, w_.block(l).backward, l + 1, Phase::backward, Passes::weight);
    return out;
  }

 private:
  enum class Passes : std::uint8_t { all, input, weight };

  static bool selected(const workload::OpCost& cost, Passes passes) {
    const bool wgrad = cost.pass == workload::Pass::backward_weight;
    return passes == Passes::all || (passes == Passes::weight) == wgrad;
  }

  void ops(std::vector<Piece>& out, const std::vector<workload::OpCost>& list, int block, Phase phase,
           Passes passes = Passes::all) const {
    if (std::none_of(list.begin(), list.end(), [&](const workload::OpCost& c) { return selected(c, passes); })) return;
    out.push_back({});  // the data-parallel strategy's hook before the block
    for (const workload::OpCost& cost : list) {
      if (!selected(cost, passes)) continue;
      const OpSite site{block, &cost, phase};
      out.push_back({Bytes(0), ep_.dispatches_before(site), ep_.all_to_all_before(site)});
      out.push_back({memory_.of(block, cost, phase)});
      out.push_back({Bytes(0), ep_.dispatches_after(site), ep_.all_to_all_after(site)});
    }
    out.push_back({});  // and after it
  }

  const Scenario& s_;
  const workload::ModelWork& w_;
  OpMemory memory_;
  ExpertParallel ep_;
  bool split_;
};

// What a pass, or a combined pair of passes, does to the allocated bytes: the change over it,
// and the most they rise above where they started at any moment of it.
struct PassMemory {
  Bytes net{0};
  Bytes rise{0};
};

PassMemory replay(const std::vector<Piece>& pieces) {
  PassMemory m;
  for (const Piece& p : pieces) {
    m.net += p.delta;
    m.rise = std::max(m.rise, m.net);
  }
  return m;
}

PassMemory replay_combined(const std::array<std::vector<Piece>, 2>& lanes) {
  PassMemory m;
  combined_order(
      {lanes[0].size(), lanes[1].size()},
      [&lanes](int lane, std::size_t i) { return lanes[static_cast<std::size_t>(lane)][i].dispatch; },
      [&lanes, &m](int lane, std::size_t i) {
        const Piece& p = lanes[static_cast<std::size_t>(lane)][i];
        m.net += p.delta;
        m.rise = std::max(m.rise, m.net);
        return p.all_to_all;
      });
  return m;
}

}  // namespace

KeptActivations kept_activations(const Scenario& s, const workload::ModelWork& w, int stage) {
  const ParallelSpec& p = s.parallel;
  const std::vector<ChunkLayers> layout = chunk_layers(p, s.model.layers);
  const std::vector<PipelineOp> order = stage_order(p.schedule, pipeline_shape(s), stage);
  const PassPieces pieces(s, w);
  // Per pass kind (forward, backward, weight, combined) and chunks, each replayed once.
  std::map<std::tuple<int, int, int>, PassMemory> passes;
  const auto pass = [&](int kind, int chunk, int paired) -> const PassMemory& {
    const auto [it, inserted] = passes.try_emplace({kind, chunk, paired});
    if (!inserted) return it->second;
    const ChunkLayers& c = chunk_of(layout, p, stage, chunk);
    if (kind == 0) it->second = replay(pieces.forward(c));
    if (kind == 1) it->second = replay(pieces.backward(c));
    if (kind == 2) it->second = replay(pieces.weight(c));
    if (kind == 3)
      it->second = replay_combined({pieces.forward(c), pieces.backward(chunk_of(layout, p, stage, paired))});
    return it->second;
  };
  const Offloaded on_host = offloaded(s, w);
  Bytes stored{0};
  long long chunks = 0;
  KeptActivations peak;
  const auto at = [&peak](Bytes bytes, long long in_flight) {
    if (bytes > peak.bytes) peak = {bytes, in_flight};
  };
  for (std::size_t i = 0; i < order.size(); ++i) {
    const PipelineOp& op = order[i];
    if (op.weight) {
      stored += pass(2, op.chunk, 0).net;  // a W pass frees what it needed
      continue;
    }
    if (op.forward && op.overlapped && s.model.moe.a2a_overlap) {
      // Megatron-Core's combined pair: the backward frees its layers as the forward allocates
      // its own (stage_order puts the backward right after its forward).
      const PassMemory& pair = pass(3, op.chunk, order[++i].chunk);
      at(stored + pair.rise, chunks + 1);
      stored += pair.net;
      continue;
    }
    if (op.forward) {
      const PassMemory& f = pass(0, op.chunk, 0);
      ++chunks;
      if (on_host.all == Bytes(0)) {
        at(stored + f.rise, chunks);
        stored += f.net;
        continue;
      }
      stored += f.net - on_host.all;
      at(stored, chunks);
      const ChunkLayers& c = chunk_of(layout, p, stage, op.chunk);
      at(stored - (c.post ? w.post.activations : Bytes(0)) + on_host.in_transit, chunks);
      continue;
    }
    const PassMemory& b = pass(1, op.chunk, 0);
    at(stored + b.rise, chunks);
    stored += b.net + on_host.all;
    --chunks;
  }
  return peak;
}

}  // namespace stepsim::parallelism
