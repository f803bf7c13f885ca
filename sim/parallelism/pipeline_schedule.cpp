// The registry of pipeline schedules. Adding one: a file with its order function, one row.
#include "parallelism/pipeline_schedule.hpp"

#include <algorithm>
#include <array>

#include "stepsim/error.hpp"

namespace stepsim::parallelism {

namespace {

constexpr std::array<ScheduleKind, 6> kSchedules{{
    {Schedule::gpipe, "gpipe", gpipe_order},
    {Schedule::one_f_one_b, "1f1b", one_f_one_b_order},
    {Schedule::interleaved, "interleaved", interleaved_order},
    {Schedule::zb_h1, "zb-h1", zb_h1_order, true},
    {Schedule::zb_h2, "zb-h2", zb_h2_order, true},
    {Schedule::dualpipe, "dualpipe", dualpipe_order, true, true},
}};

}  // namespace

std::span<const ScheduleKind> pipeline_schedules() { return kSchedules; }

bool pytorch_pipelining(const Scenario& s) {
  const DpKind kind = s.data_parallel.kind;
  return s.parallel.pp > 1 && (kind == DpKind::fsdp || kind == DpKind::hsdp);
}

std::vector<PipelineOp> stage_order(Schedule schedule, const PipelineShape& shape, int stage) {
  for (const ScheduleKind& k : kSchedules) {
    if (k.schedule == schedule) return k.order(shape, stage);
  }
  STEPSIM_CHECK(false, "schedule missing from the registry");
  return {};
}

bool splits_backward(Schedule schedule) {
  for (const ScheduleKind& k : kSchedules) {
    if (k.schedule == schedule) return k.split_backward;
  }
  return false;
}

bool bidirectional(Schedule schedule) {
  for (const ScheduleKind& k : kSchedules) {
    if (k.schedule == schedule) return k.bidirectional;
  }
  return false;
}

int chunk_micro_batches(Schedule schedule, const PipelineShape& shape) {
  return bidirectional(schedule) ? shape.micro_batches / 2 : shape.micro_batches;
}

int warmup_forwards(const std::vector<PipelineOp>& order) {
  const auto first_backward =
      std::find_if(order.begin(), order.end(), [](const PipelineOp& op) { return !op.forward; });
  return static_cast<int>(first_backward - order.begin());
}

}  // namespace stepsim::parallelism
