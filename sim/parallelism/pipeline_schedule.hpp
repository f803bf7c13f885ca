// Pipeline schedules (GPipe, 1F1B and Megatron-LM's interleaved schedule): each stage's ordered list of forward and backward
// passes of (micro-batch, model chunk). One file per schedule, one row in the registry.
#pragma once

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
  friend bool operator==(const PipelineOp&, const PipelineOp&) = default;
};

struct PipelineShape {
  int stages = 1;         // p
  int micro_batches = 1;  // m, per pipeline replica and step
  int chunks = 1;         // v, model chunks per stage
};

using ScheduleOrder = std::vector<PipelineOp> (*)(const PipelineShape& shape, int stage);

struct ScheduleKind {
  Schedule schedule;
  const char* name;  // the parallel.schedule value
  ScheduleOrder order;
  bool split_backward = false;  // backwards are B and W passes (zero-bubble schedules)
};

std::span<const ScheduleKind> pipeline_schedules();

// The passes of `stage` in execution order under `schedule`.
std::vector<PipelineOp> stage_order(Schedule schedule, const PipelineShape& shape, int stage);

// Whether `schedule` runs each backward as an input-gradient and a weight-gradient pass.
bool splits_backward(Schedule schedule);

// Forwards a stage runs before its first backward.
int warmup_forwards(const std::vector<PipelineOp>& order);

// The schedules (one file each).
std::vector<PipelineOp> gpipe_order(const PipelineShape& shape, int stage);
std::vector<PipelineOp> one_f_one_b_order(const PipelineShape& shape, int stage);
std::vector<PipelineOp> interleaved_order(const PipelineShape& shape, int stage);
std::vector<PipelineOp> zb_h1_order(const PipelineShape& shape, int stage);
std::vector<PipelineOp> zb_h2_order(const PipelineShape& shape, int stage);

}  // namespace stepsim::parallelism
