// Activations a pipeline stage keeps: the Korthikanti per-layer bytes (workload layer) of
// every model-chunk forward its schedule has run but not yet backpropagated.
#include <algorithm>

#include "parallelism/memory_model.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "parallelism/stage_layout.hpp"
#include "workload/layer.hpp"

namespace stepsim::parallelism {

namespace {

Bytes chunk_activations(const workload::ModelWork& w, const ChunkLayers& c) {
  Bytes kept = w.layer.activations * c.layers;
  if (c.pre) kept += w.pre.activations;
  if (c.post) kept += w.post.activations;
  return kept;
}

// Just before a chunk's first layer recompute: its head's activations (the fp32 logits) are
// already freed by the head's backward, the layer's working set is allocated.
Bytes backward_transient(const workload::ModelWork& w, const ChunkLayers& c, Bytes working) {
  if (c.layers == 0) return Bytes(0);
  return working - (c.post ? w.post.activations : Bytes(0));
}

}  // namespace

Bytes recompute_working_set(const Scenario& s, const workload::ModelWork& w) {
  if (s.training.recompute == Recompute::none || w.layer.recompute.empty()) return Bytes(0);
  const Bytes all = workload::layer_activations(workload::layer_shape(s), Recompute::none);
  return std::max(all - w.layer.activations, Bytes(0));
}

KeptActivations kept_activations(const Scenario& s, const workload::ModelWork& w, int stage) {
  const ParallelSpec& p = s.parallel;
  const std::vector<ChunkLayers> layout = chunk_layers(p, s.model.layers);
  const PipelineShape shape{std::max(p.pp, 1), static_cast<int>(s.training.micro_batches(p.dp)),
                            std::max(p.virtual_stages, 1)};
  const Bytes working = recompute_working_set(s, w);
  Bytes stored{0};
  long long chunks = 0;
  KeptActivations peak;
  for (const PipelineOp& op : stage_order(p.schedule, shape, stage)) {
    const ChunkLayers& c = chunk_of(layout, p, stage, op.chunk);
    if (op.forward) {
      stored += chunk_activations(w, c);
      ++chunks;
      if (stored > peak.bytes) peak = {stored, chunks};
      continue;
    }
    const Bytes during = stored + backward_transient(w, c, working);
    if (during > peak.bytes) peak = {during, chunks};
    stored = stored - chunk_activations(w, c);
    --chunks;
  }
  return peak;
}

}  // namespace stepsim::parallelism
