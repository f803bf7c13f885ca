// The registry of pipeline schedules. Adding one: a file with its order function, one row.
#include "parallelism/pipeline_schedule.hpp"

#include <algorithm>
#include <array>

#include "stepsim/error.hpp"

namespace stepsim::parallelism {

namespace {

constexpr std::array<ScheduleKind, 3> kSchedules{{
    {Schedule::gpipe, "gpipe", gpipe_order},
    {Schedule::one_f_one_b, "1f1b", one_f_one_b_order},
    {Schedule::interleaved, "interleaved", interleaved_order},
}};

}  // namespace

std::span<const ScheduleKind> pipeline_schedules() { return kSchedules; }

std::vector<PipelineOp> stage_order(Schedule schedule, const PipelineShape& shape, int stage) {
  for (const ScheduleKind& k : kSchedules) {
    if (k.schedule == schedule) return k.order(shape, stage);
  }
  STEPSIM_CHECK(false, "schedule missing from the registry");
  return {};
}

int warmup_forwards(const std::vector<PipelineOp>& order) {
  const auto first_backward =
      std::find_if(order.begin(), order.end(), [](const PipelineOp& op) { return !op.forward; });
  return static_cast<int>(first_backward - order.begin());
}

}  // namespace stepsim::parallelism
