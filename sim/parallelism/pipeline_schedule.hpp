// Pipeline schedules (GPipe, 1F1B, Megatron-LM's interleaved schedule, zero bubble, DualPipe): each stage's ordered
// list of forward and backward passes of (micro-batch, model chunk). One file per schedule, one row in the registry.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "stepsim/scenario.hpp"

namespace stepsim::parallelism {

// One pass of one micro-batch through one model chunk of a stage.
struct PipelineOp {
  int micro_batch = 0;
  int chunk = 0;  // model chunk (virtual stage) of the stage: 0..chunks-1
  bool forward = true;
  // Of a backward: only the weight-gradient (W) pass, in schedules that split the backward;
  // there a backward without it is the input-gradient (B) pass.
  bool weight = false;
  // Of a forward: it runs overlapped with the backward after it (and that backward's W pass,
  // when one follows at once), DualPipe's F&B or Megatron-Core's combined 1F1B under
  // model.moe.a2a_overlap: one's communication behind the other's compute.
  bool overlapped = false;
  friend bool operator==(const PipelineOp&, const PipelineOp&) = default;
};

struct PipelineShape {
  int stages = 1;         // p
  int micro_batches = 1;  // m, per pipeline replica and step (both directions of DualPipe)
  int chunks = 1;         // v, model chunks per stage
  // Megatron-Core's EP all-to-all overlap (model.moe.a2a_overlap): each steady-state forward
  // runs merged with the backward after it, and without a pipeline the backward of each
  // micro-batch waits for the next one's forward (combined_1f1b.py).
  bool a2a_overlap = false;
};

using ScheduleOrder = std::vector<PipelineOp> (*)(const PipelineShape& shape, int stage);

struct ScheduleKind {
  Schedule schedule;
  const char* name;  // the parallel.schedule value
  ScheduleOrder order;
  bool split_backward = false;  // backwards are B and W passes (zero-bubble schedules)
  // Micro-batches enter at both ends, half each; stage i holds virtual stages i and p − 1 − i.
  bool bidirectional = false;
};

std::span<const ScheduleKind> pipeline_schedules();

// The scenario's pipeline: its stages, micro-batches per replica and step, model chunks per
// stage, and whether Megatron-Core's combined 1F1B runs it (model.moe.a2a_overlap).
PipelineShape pipeline_shape(const Scenario& s);

// Whether Megatron-Core's EP all-to-all overlap, on or off in `s`, has passes to pair in its
// step: some stage runs a forward merged with another micro-batch's backward. The combined
// 1F1B pairs the forward of micro-batch i + 1 with the backward of i, which takes 2
// micro-batches per replica or more without a pipeline; under the interleaved schedule a
// stage's steady state, which the later stages have from as many micro-batches as stages.
bool ep_overlap_pairs(const Scenario& s);

// The passes of `stage` in execution order under `schedule`.
std::vector<PipelineOp> stage_order(Schedule schedule, const PipelineShape& shape, int stage);

// Whether `schedule` runs each backward as an input-gradient and a weight-gradient pass.
bool splits_backward(Schedule schedule);

// Whether `schedule` feeds the pipeline from both ends (DualPipe).
bool bidirectional(Schedule schedule);

// The micro-batches that pass through each model chunk: m, or m / 2 in each direction.
int chunk_micro_batches(Schedule schedule, const PipelineShape& shape);

// Forwards a stage runs before its first backward.
int warmup_forwards(const std::vector<PipelineOp>& order);

// Megatron-Core's combined forward and backward of one layer pair
// (TransformerLayerSchedulePlan.run in models/common/model_chunk_schedule_plan.py): the
// backward's combine all-to-all, the forward's attention, the backward's MLP, the forward's
// dispatch, the backward's dispatch, the forward's MLP and combine, the backward's attention.
// So the backward (lane 1) goes first, and a pass hands over after each all-to-all it issues
// and before each dispatch (unless it has just been handed the turn): every all-to-all runs
// on the one ep stream under the other pass's compute, in Megatron's order. Runs the pieces of
// the forward (lane 0, `pieces[0]` of them) and the backward (lane 1) in that order:
// `dispatch(lane, i)` says whether piece i of a lane issues an EP dispatch all-to-all (the
// forward's, or its backward), `run(lane, i)` runs it and says whether it issued any EP
// all-to-all. The program builder issues a combined pair by it, the memory model replays the
// pair's allocations by it.
void combined_order(std::array<std::size_t, 2> pieces, const std::function<bool(int, std::size_t)>& dispatch,
                    const std::function<bool(int, std::size_t)>& run);

// The schedules (one file each).
std::vector<PipelineOp> gpipe_order(const PipelineShape& shape, int stage);
std::vector<PipelineOp> one_f_one_b_order(const PipelineShape& shape, int stage);
std::vector<PipelineOp> interleaved_order(const PipelineShape& shape, int stage);
std::vector<PipelineOp> zb_h1_order(const PipelineShape& shape, int stage);
std::vector<PipelineOp> zb_h2_order(const PipelineShape& shape, int stage);
std::vector<PipelineOp> dualpipe_order(const PipelineShape& shape, int stage);

}  // namespace stepsim::parallelism
