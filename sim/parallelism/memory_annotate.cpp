// What each compute op allocates and frees, by the op's identity, and the trace's memory
// counter from it: each rank starts the step with its stage's states allocated; forward ops
// allocate the activations their layer keeps and backward ops free them.
#include <algorithm>
#include <iterator>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "parallelism/memory_model.hpp"
#include "parallelism/mesh.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "parallelism/stage_layout.hpp"
#include "parallelism/step_builder.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"

namespace stepsim::parallelism {

OpMemory::OpMemory(const Scenario& s, const workload::ModelWork& w) : layers_(s.model.layers) {
  const bool split = splits_backward(s.parallel.schedule);
  for (int l = 0; l < layers_; ++l) {
    const workload::LayerWork& block = w.block(l);
    add_block(l + 1, block, block.activations, layer_working_set(s, w, l));
    add_attention_buffers(l + 1, block, attention_backward_buffers(s, w));
    if (split) add_weight_pass(l + 1, block, weight_pass_inputs(s, block));  // embedding, head: whole in B
  }
  add_block(0, w.pre, w.pre.activations, Bytes(0));
  // Multi-token prediction's depths run inside the head's block, whose activations count what
  // they keep; what a depth's recompute makes again is its own change.
  add_block(layers_ + 1, w.post, w.post.activations, Bytes(0));
  add_loss_working(w.post);
  add_mtp_recompute_working(w.post);
  add_pipeline_chunks(s, w);
}

Bytes OpMemory::of(int block, const workload::OpCost& cost, Phase phase) const {
  const auto it = deltas_.find({block, &cost, phase});
  return it == deltas_.end() ? Bytes(0) : it->second;
}

void OpMemory::add(int block, const workload::OpCost& cost, Phase phase, Bytes bytes) {
  deltas_[{block, &cost, phase}] += bytes;
}

// A block's kept activations: allocated by its last forward op (also on a chunk's first
// micro-batch, whose forward quantizes the weights too), its recompute working set by its last
// recompute op, both freed by its last backward op.
void OpMemory::add_block(int block, const workload::LayerWork& work, Bytes kept, Bytes working) {
  if (work.forward.empty() || work.backward.empty()) return;
  add(block, work.forward.back(), Phase::forward, kept);
  if (!work.first_forward.empty()) add(block, work.first_forward.back(), Phase::forward, kept);
  if (!work.recompute.empty()) add(block, work.recompute.back(), Phase::recompute, working);
  add(block, work.backward.back(), Phase::backward, Bytes(0) - kept - working);
}

// The attention backward's buffers (attention_backward_buffers): allocated by the layer's
// backward op before its attention core's (the last that is not a weight-gradient GEMM, which
// a zero-bubble schedule defers), freed by the attention core's last backward op.
void OpMemory::add_attention_buffers(int block, const workload::LayerWork& work, Bytes buffers) {
  if (buffers == Bytes(0)) return;
  const std::vector<workload::OpCost>& ops = work.backward;
  const auto core = [](const workload::OpCost& op) { return op.role == workload::Role::attention_core; };
  const auto first = std::find_if(ops.begin(), ops.end(), core);
  if (first == ops.end()) return;
  const auto last = std::find_if(ops.rbegin(), ops.rend(), core);
  const auto before = std::find_if(std::make_reverse_iterator(first), ops.rend(), [](const workload::OpCost& op) {
    return op.pass != workload::Pass::backward_weight;
  });
  if (before != ops.rend()) {
    add(block, *before, Phase::backward, buffers);
  } else if (!work.recompute.empty()) {
    add(block, work.recompute.back(), Phase::recompute, buffers);
  } else {
    return;
  }
  add(block, *last, Phase::backward, Bytes(0) - buffers);
}

// Under a zero-bubble schedule the B pass (ending with the block's last backward op) keeps
// what the W pass needs, and the W pass's last wgrad GEMM frees it.
void OpMemory::add_weight_pass(int block, const workload::LayerWork& work, Bytes kept) {
  const auto last = std::find_if(work.backward.rbegin(), work.backward.rend(),
                                 [](const workload::OpCost& op) { return op.pass == workload::Pass::backward_weight; });
  if (work.forward.empty() || last == work.backward.rend()) return;
  add(block, work.backward.back(), Phase::backward, kept);
  add(block, *last, Phase::backward, Bytes(0) - kept);
}

// Each multi-token-prediction depth's recompute (workload::add_mtp): what it makes again from its
// last recomputed op until the depth's backward ends with its embedding lookup's.
void OpMemory::add_mtp_recompute_working(const workload::LayerWork& post) {
  if (post.mtp_recompute_working == Bytes(0)) return;
  bool held = false;
  for (std::size_t i = 0; i < post.backward.size(); ++i) {
    const workload::OpCost& op = post.backward[i];
    if (op.recomputed && (i + 1 == post.backward.size() || !post.backward[i + 1].recomputed)) {
      add(layers_ + 1, op, Phase::backward, post.mtp_recompute_working);
      held = true;
    } else if (held && op.role == workload::Role::embedding) {
      add(layers_ + 1, op, Phase::backward, Bytes(0) - post.mtp_recompute_working);
      held = false;
    }
  }
}

// The loss's backward buffers: allocated by the head's first backward op, freed once the next
// op of its backward has consumed the gradient.
void OpMemory::add_loss_working(const workload::LayerWork& post) {
  if (post.backward.size() < 2 || post.backward_working == Bytes(0)) return;
  add(layers_ + 1, post.backward[0], Phase::backward, post.backward_working);
  add(layers_ + 1, post.backward[1], Phase::backward, Bytes(0) - post.backward_working);
}

// Under PyTorch's pipelining a chunk's last forward op leaves its output until the step ends,
// and a chunk's first layer keeps its input in the receive buffer the stage's states hold.
void OpMemory::add_pipeline_chunks(const Scenario& s, const workload::ModelWork& w) {
  if (!pytorch_pipelining(s)) return;
  // A block's last op of a pass, where it has one (a work description may leave a pass empty).
  const auto at_last = [&](int block, const std::vector<workload::OpCost>& ops, Phase phase, Bytes delta) {
    if (!ops.empty()) add(block, ops.back(), phase, delta);
  };
  for (const ChunkLayers& c : chunk_layers(s.parallel, s.model.layers)) {
    const ChunkPipelineBytes bytes = pipeline_chunk_bytes(s, w, c);
    if (bytes.in_buffer > Bytes(0)) {
      const workload::LayerWork& first = w.block(c.first_layer);
      at_last(c.first_layer + 1, first.forward, Phase::forward, Bytes(0) - bytes.in_buffer);
      at_last(c.first_layer + 1, first.first_forward, Phase::forward, Bytes(0) - bytes.in_buffer);
      at_last(c.first_layer + 1, first.backward, Phase::backward, bytes.in_buffer);
    }
    if (c.post) {
      at_last(layers_ + 1, w.post.forward, Phase::forward, bytes.output);
    } else if (c.layers > 0) {
      const int last = c.first_layer + c.layers - 1;
      const workload::LayerWork& block = w.block(last);
      at_last(last + 1, block.forward, Phase::forward, bytes.output);
      at_last(last + 1, block.first_forward, Phase::forward, bytes.output);
    }
  }
}

// The program knows an op by its name, which op_name makes from its identity: every op of
// every block named once, and two ops of one name (a chunk's first forward and the others'
// last op) must change the counter alike.
std::unordered_map<std::string, Bytes> OpMemory::by_name(const workload::ModelWork& w) const {
  std::unordered_map<std::string, Bytes> names;
  const auto name_all = [&](int block, const std::vector<workload::OpCost>& ops, Phase phase) {
    for (const workload::OpCost& cost : ops) {
      const Bytes delta = of(block, cost, phase);
      const auto [it, inserted] = names.try_emplace(op_name(OpSite{block, &cost, phase}, layers_), delta);
      STEPSIM_CHECK(inserted || it->second == delta, "two ops named alike change the memory counter differently");
    }
  };
  const auto name_block = [&](int block, const workload::LayerWork& work) {
    name_all(block, work.forward, Phase::forward);
    name_all(block, work.first_forward, Phase::forward);
    name_all(block, work.recompute, Phase::recompute);
    name_all(block, work.backward, Phase::backward);
  };
  name_block(0, w.pre);
  for (int l = 0; l < layers_; ++l) name_block(l + 1, w.block(l));
  name_block(layers_ + 1, w.post);
  return names;
}

void annotate_memory(engine::Program& program, const Scenario& s, const workload::ModelWork& w) {
  const MemoryEstimate estimate = estimate_memory(s, w);
  const std::unordered_map<std::string, Bytes> deltas = OpMemory(s, w).by_name(w);
  std::vector<Bytes> by_name;
  by_name.reserve(program.names.size());
  for (const std::string& name : program.names) {
    const auto it = deltas.find(name);
    by_name.push_back(it == deltas.end() ? Bytes(0) : it->second);
  }
  std::unordered_set<const engine::OpList*> annotated;  // ranks of a stage share one op list
  for (engine::RankProgram& rank : program.ranks) {
    const auto stage = static_cast<std::size_t>(coord_of(s.parallel, rank.rank).pp);
    rank.memory_base = estimate.stages[stage].states();
    if (!annotated.insert(rank.list.get()).second) continue;
    for (engine::Op& op : rank.ops()) {
      if (op.kind == engine::OpKind::compute) op.memory_delta = by_name[op.name];
    }
  }
}

}  // namespace stepsim::parallelism
