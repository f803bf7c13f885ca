// Interleaved 1F1B (Narayanan et al. 2021, Megatron's schedule with virtual pipeline stages):
// each stage holds v model chunks; micro-batches go through the chunks in rounds of N, so the
// warm-up is 2(p − stage − 1) + (v − 1)·N passes and the bubble shrinks to (p − 1)/(m·v).
// Megatron-Core's rounds are of p micro-batches (microbatch_group_size_per_vp_stage), m a
// multiple of p; PyTorch's ScheduleInterleaved1F1B takes max(1, m // p) rounds of m / rounds.
#include <algorithm>

#include "parallelism/pipeline_schedule.hpp"

namespace stepsim::parallelism {

namespace {

// The micro-batches of one round: PyTorch's microbatches_per_round, m // max(1, m // p), which
// is p whenever m is a multiple of p, the only micro-batch counts Megatron-Core runs.
int round_size(const PipelineShape& s) { return s.micro_batches / std::max(1, s.micro_batches / s.stages); }

// The k-th forward (or backward) pass of a stage, numbered as Megatron's schedule table and
// PyTorch's forward_stage_index number them: rounds of N micro-batches go through chunk 0, then
// chunk 1, ... (backward from the last chunk down).
PipelineOp virtual_op(const PipelineShape& s, int k, bool forward) {
  const int n = round_size(s);
  const int round = n * s.chunks;
  const int chunk = k % round / n;
  const int micro_batch = k / round * n + k % n;
  return {micro_batch, forward ? chunk : s.chunks - 1 - chunk, forward};
}

}  // namespace

std::vector<PipelineOp> interleaved_order(const PipelineShape& shape, int stage) {
  const int total = shape.micro_batches * shape.chunks;
  // Megatron-Core's get_pp_rank_microbatches and PyTorch's _get_warmup_ops: capped at the m·v
  // passes. (Megatron-Core before its tunable schedule of November 2024 ran every forward first
  // when m = p.) Under the EP all-to-all overlap one more forward warms up, so that each
  // combined forward and backward of the steady state are of different micro-batches
  // (overlap_moe_expert_parallel_comm adds one).
  const int extra = shape.a2a_overlap ? 1 : 0;
  const int warmup = std::min(2 * (shape.stages - stage - 1) + (shape.chunks - 1) * round_size(shape) + extra, total);
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
