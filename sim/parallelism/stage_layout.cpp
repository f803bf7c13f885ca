// Layer-to-stage assignment. Uneven splits are the scenario's to give (BLOOM: 5, 6 × 10, 5;
// Llama 3 405B: 7, 8 × 14, 7), since the embedding and head weigh on the outer stages.
#include "parallelism/stage_layout.hpp"

#include <algorithm>

#include "parallelism/pipeline_schedule.hpp"
#include "stepsim/error.hpp"

namespace stepsim::parallelism {

namespace {

std::vector<int> layer_counts(const ParallelSpec& p, int layers) {
  const int virtual_stages = std::max(p.pp, 1) * std::max(p.virtual_stages, 1);
  if (static_cast<int>(p.stage_layers.size()) == virtual_stages) return p.stage_layers;
  std::vector<int> counts(static_cast<std::size_t>(virtual_stages), layers / virtual_stages);
  for (int i = 0; i < layers % virtual_stages; ++i) ++counts[static_cast<std::size_t>(i)];
  return counts;
}

}  // namespace

std::vector<ChunkLayers> chunk_layers(const ParallelSpec& parallel, int layers) {
  std::vector<ChunkLayers> out;
  int first = 0;
  for (int count : layer_counts(parallel, layers)) {
    out.push_back({first, count, out.empty(), false});
    first += count;
  }
  out.back().post = true;
  return out;
}

int chunks_per_stage(const ParallelSpec& parallel) {
  return bidirectional(parallel.schedule) ? 2 : std::max(parallel.virtual_stages, 1);
}

const ChunkLayers& chunk_of(const std::vector<ChunkLayers>& chunks, const ParallelSpec& parallel, int stage,
                            int chunk) {
  const int pp = std::max(parallel.pp, 1);
  int virtual_stage = chunk * pp + stage;
  if (bidirectional(parallel.schedule)) virtual_stage = chunk == 0 ? stage : pp - 1 - stage;
  const auto index = static_cast<std::size_t>(virtual_stage);
  STEPSIM_CHECK(index < chunks.size(), "model chunk outside the stage layout");
  return chunks[index];
}

bool stage_holds_block(const ParallelSpec& parallel, int layers, int stage, int block) {
  return stage_holds_block(chunk_layers(parallel, layers), parallel, layers, stage, block);
}

bool stage_holds_block(const std::vector<ChunkLayers>& chunks, const ParallelSpec& parallel, int layers, int stage,
                       int block) {
  for (int c = 0; c < chunks_per_stage(parallel); ++c) {
    const ChunkLayers& k = chunk_of(chunks, parallel, stage, c);
    if (block == 0 && k.pre) return true;
    if (block == layers + 1 && k.post) return true;
    if (block >= k.first_layer + 1 && block <= k.first_layer + k.layers) return true;
  }
  return false;
}

}  // namespace stepsim::parallelism
