// Layer-to-stage assignment: which transformer layers each model chunk of each pipeline stage
// holds, the embedding on the first and the LM head and loss on the last virtual stage.
#pragma once

#include <vector>

#include "stepsim/scenario.hpp"

namespace stepsim::parallelism {

// One model chunk: virtual stage chunk·p + stage, in model order.
struct ChunkLayers {
  int first_layer = 0;
  int layers = 0;
  bool pre = false;   // holds the embedding
  bool post = false;  // holds the final norm, LM head and loss
};

// Per virtual stage, in model order. parallel.stage_layers, when given, has pp·virtual_stages
// entries in that order (virtual stage c·p + s is chunk c of stage s); otherwise the layers
// are split evenly (the first virtual stages take one more when they do not divide).
std::vector<ChunkLayers> chunk_layers(const ParallelSpec& parallel, int layers);

// Model chunks per stage: virtual_stages, or two under a bidirectional schedule (DualPipe).
int chunks_per_stage(const ParallelSpec& parallel);

// Model chunk `chunk` of pipeline stage `stage`: virtual stage chunk·p + stage, or under
// DualPipe virtual stage `stage` (chunk 0) and p − 1 − stage (chunk 1) of p.
const ChunkLayers& chunk_of(const std::vector<ChunkLayers>& chunks, const ParallelSpec& parallel, int stage, int chunk);

// Whether `stage` holds OpSite block `block` (0 embedding, 1..layers, layers+1 head).
bool stage_holds_block(const ParallelSpec& parallel, int layers, int stage, int block);
// The same with chunk_layers(parallel, layers) computed once by a caller that asks often.
bool stage_holds_block(const std::vector<ChunkLayers>& chunks, const ParallelSpec& parallel, int layers, int stage,
                       int block);

}  // namespace stepsim::parallelism
