// Memory counter of the trace: each rank starts the step with its stage's states allocated;
// forward ops allocate the activations their layer keeps and backward ops free them.
#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "parallelism/memory_model.hpp"
#include "parallelism/mesh.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "parallelism/stage_layout.hpp"

namespace stepsim::parallelism {

namespace {

// Allocation changes keyed by the op-name ending they attach to. Ops are named after the
// workload's ops ("L3 mlp residual fwd", "L3 input layernorm backward", "cross entropy fwd"),
// whatever prefix the schedule puts before them.
using DeltaTable = std::map<std::string, Bytes>;

void add_block(DeltaTable& table, const workload::LayerWork& block, Bytes kept, Bytes working,
               const std::string& prefix = "") {
  if (block.forward.empty() || block.backward.empty()) return;
  table[prefix + block.forward.back().name + " fwd"] += kept;
  if (!block.recompute.empty()) table[prefix + block.recompute.back().name + " recompute"] += working;
  table[prefix + block.backward.back().name] += Bytes(0) - kept - working;
}

// The attention backward's buffers (attention_backward_buffers): allocated by the layer's
// backward op before its attention core's (the last that is not a weight-gradient GEMM, which
// a zero-bubble schedule defers), freed by the attention core's last backward op.
void add_attention_buffers(DeltaTable& table, const workload::LayerWork& block, Bytes buffers,
                           const std::string& prefix = "") {
  if (buffers == Bytes(0)) return;
  const std::vector<workload::OpCost>& ops = block.backward;
  const auto core = [](const workload::OpCost& op) { return op.role == workload::Role::attention_core; };
  const auto first = std::find_if(ops.begin(), ops.end(), core);
  if (first == ops.end()) return;
  const auto last = std::find_if(ops.rbegin(), ops.rend(), core);
  const auto before = std::find_if(std::make_reverse_iterator(first), ops.rend(), [](const workload::OpCost& op) {
    return op.pass != workload::Pass::backward_weight;
  });
  if (before != ops.rend()) {
    table[prefix + before->name] += buffers;
  } else if (!block.recompute.empty()) {
    table[prefix + block.recompute.back().name + " recompute"] += buffers;
  } else {
    return;
  }
  table[prefix + last->name] += Bytes(0) - buffers;
}

// Under a zero-bubble schedule the B pass (ending with the block's last backward op) keeps
// what the W pass needs, and the W pass's last wgrad GEMM frees it.
void add_weight_pass(DeltaTable& table, const Scenario& s, const workload::LayerWork& block,
                     const std::string& prefix = "") {
  const auto last = std::find_if(block.backward.rbegin(), block.backward.rend(),
                                 [](const workload::OpCost& op) { return op.pass == workload::Pass::backward_weight; });
  if (block.forward.empty() || last == block.backward.rend()) return;
  const Bytes kept = weight_pass_inputs(s, block);
  table[prefix + block.backward.back().name] += kept;
  table[prefix + last->name] += Bytes(0) - kept;
}

// The dense layers of a stack that mixes them with MoE layers end with ops of the same names
// as the MoE layers': their entries carry the layer ("L2 mlp residual fwd"), which the
// longest-key match prefers.
void add_dense_layers(DeltaTable& table, const Scenario& s, const workload::ModelWork& w) {
  for (int l = 0; l < static_cast<int>(w.dense.size()); ++l) {
    if (!w.dense[static_cast<std::size_t>(l)]) continue;
    const std::string prefix = "L" + std::to_string(l) + " ";
    add_block(table, w.dense_layer, w.dense_layer.activations, layer_working_set(s, w, l), prefix);
    add_attention_buffers(table, w.dense_layer, attention_backward_buffers(s, w), prefix);
    if (splits_backward(s.parallel.schedule)) add_weight_pass(table, s, w.dense_layer, prefix);
  }
}

// The loss's backward buffers: allocated by its backward op, freed once the next op of the
// head's backward has consumed the gradient.
void add_loss_working(DeltaTable& table, const workload::LayerWork& post) {
  if (post.backward.size() < 2 || post.backward_working == Bytes(0)) return;
  table[post.backward[0].name] += post.backward_working;
  table[post.backward[1].name] += Bytes(0) - post.backward_working;
}

// Multi-token prediction's layer runs inside the head's block, whose activations count it:
// its ops ("mtp0 mlp residual fwd") take no delta of their own.
void add_mtp_layers(DeltaTable& table, const Scenario& s, const workload::ModelWork& w) {
  for (int d = 0; d < s.model.mtp_layers; ++d) {
    const std::string prefix = "mtp" + std::to_string(d) + " ";
    for (const workload::OpCost& op : w.layer.forward) table[prefix + op.name + " fwd"] = Bytes(0);
    for (const workload::OpCost& op : w.layer.backward) table[prefix + op.name] = Bytes(0);
  }
}

Bytes delta_of(const DeltaTable& table, const std::string& name);

// Adds `bytes` to what op `name` allocates, over the longest key it matched so far.
void add_to(DeltaTable& table, const std::string& name, Bytes bytes) { table[name] = delta_of(table, name) + bytes; }

std::string layer_op(int layer, const std::string& op) { return "L" + std::to_string(layer) + " " + op; }

// Under PyTorch's pipelining a chunk's last forward op leaves its output until the step ends,
// and a chunk's first layer keeps its input in the receive buffer the stage's states hold.
void add_pipeline_chunks(DeltaTable& table, const Scenario& s, const workload::ModelWork& w) {
  if (!pytorch_pipelining(s)) return;
  for (const ChunkLayers& c : chunk_layers(s.parallel, s.model.layers)) {
    const ChunkPipelineBytes bytes = pipeline_chunk_bytes(s, w, c);
    if (bytes.in_buffer > Bytes(0)) {
      const workload::LayerWork& first = w.block(c.first_layer);
      add_to(table, layer_op(c.first_layer, first.forward.back().name + " fwd"), Bytes(0) - bytes.in_buffer);
      add_to(table, layer_op(c.first_layer, first.backward.back().name), bytes.in_buffer);
    }
    if (c.post) {
      add_to(table, w.post.forward.back().name + " fwd", bytes.output);
    } else if (c.layers > 0) {
      const int last = c.first_layer + c.layers - 1;
      add_to(table, layer_op(last, w.block(last).forward.back().name + " fwd"), bytes.output);
    }
  }
}

DeltaTable delta_table(const Scenario& s, const workload::ModelWork& w) {
  DeltaTable table;
  const int moe_layer = static_cast<int>(std::find(w.dense.begin(), w.dense.end(), false) - w.dense.begin());
  add_block(table, w.layer, w.layer.activations, layer_working_set(s, w, moe_layer));
  add_attention_buffers(table, w.layer, attention_backward_buffers(s, w));
  add_block(table, w.pre, w.pre.activations, Bytes(0));
  add_block(table, w.post, w.post.activations, Bytes(0));
  add_loss_working(table, w.post);
  if (splits_backward(s.parallel.schedule)) add_weight_pass(table, s, w.layer);  // embedding, head: whole in B
  add_dense_layers(table, s, w);
  add_mtp_layers(table, s, w);
  add_pipeline_chunks(table, s, w);
  return table;
}

bool ends_with_word(const std::string& name, const std::string& key) {
  if (name.size() < key.size()) return false;
  if (name.compare(name.size() - key.size(), key.size(), key) != 0) return false;
  return name.size() == key.size() || name[name.size() - key.size() - 1] == ' ';
}

// The delta of the longest key that `name` ends with, as a word; zero if none.
Bytes delta_of(const DeltaTable& table, const std::string& name) {
  std::size_t best = 0;
  Bytes delta{0};
  for (const auto& [key, bytes] : table) {
    if (key.size() <= best || !ends_with_word(name, key)) continue;
    best = key.size();
    delta = bytes;
  }
  return delta;
}

}  // namespace

void annotate_memory(engine::Program& program, const Scenario& s, const workload::ModelWork& w) {
  const MemoryEstimate estimate = estimate_memory(s, w);
  const DeltaTable table = delta_table(s, w);
  std::vector<Bytes> by_name;
  by_name.reserve(program.names.size());
  for (const std::string& name : program.names) by_name.push_back(delta_of(table, name));
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
