// Interleaved 1F1B (Narayanan et al. 2021, Megatron's schedule with virtual pipeline stages):
// each stage holds v model chunks; micro-batches go through the chunks in groups of p, so the
// warm-up is 2(p − stage − 1) + (v − 1)·p passes and the bubble shrinks to (p − 1)/(m·v).
// PyTorch's ScheduleInterleaved1F1B orders the passes alike, without Megatron's rule for m = p.
#include <algorithm>

#include "parallelism/pipeline_schedule.hpp"

namespace stepsim::parallelism {

namespace {

// The k-th forward (or backward) pass of a stage, numbered as Megatron numbers virtual
// micro-batches: groups of p micro-batches go through chunk 0, then chunk 1, ... (backward
// from the last chunk down).
PipelineOp virtual_op(const PipelineShape& s, int k, bool forward) {
  const int group = s.stages * s.chunks;
  const int in_group = k % group;
  const int chunk = in_group / s.stages;
  const int micro_batch = (k / group) * s.stages + k % s.stages;
  return {micro_batch, forward ? chunk : s.chunks - 1 - chunk, forward};
}

}  // namespace

std::vector<PipelineOp> interleaved_order(const PipelineShape& shape, int stage) {
  const int total = shape.micro_batches * shape.chunks;
  // With exactly p micro-batches Megatron runs every forward first; PyTorch does not. Megatron-
  // Core's tunable schedule (November 2024) replaced that rule with a cap on each stage's
  // warm-up at the m·v passes, and the EP all-to-all overlap came later (August 2025): under it
  // every stage keeps its own warm-up.
  const bool all_first = shape.all_forwards_first_at_p && !shape.a2a_overlap && shape.micro_batches == shape.stages;
  // Under the EP all-to-all overlap one more forward warms up, so that each combined forward
  // and backward of the steady state are of different micro-batches (schedules.py,
  // get_pp_rank_microbatches: overlap_moe_expert_parallel_comm adds one).
  const int extra = shape.a2a_overlap ? 1 : 0;
  const int warmup =
      all_first ? total : std::min(2 * (shape.stages - stage - 1) + (shape.chunks - 1) * shape.stages + extra, total);
  std::vector<PipelineOp> order;
  for (int k = 0; k < warmup; ++k) order.push_back(virtual_op(shape, k, true));
  for (int k = 0; k < total - warmup; ++k) {
    // Under the overlap only the steady state's forward and backward run as one combined step
    // (forward_backward_helper_wrapper given both); the warm-up's forwards and the cool-down's
    // backwards run alone. A stage whose warm-up holds every forward combines none
    // (are_all_microbatches_in_warmup): pairing its last forward with its first backward would
    // hold that forward's output until a gradient came from the next stage, which may need
    // that output first.
    PipelineOp forward = virtual_op(shape, warmup + k, true);
    forward.overlapped = shape.a2a_overlap;
    order.push_back(forward);
    order.push_back(virtual_op(shape, k, false));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(virtual_op(shape, k, false));
  return order;
}

}  // namespace stepsim::parallelism
