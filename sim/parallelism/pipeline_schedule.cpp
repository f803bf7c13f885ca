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

namespace {

// Megatron-Core's combined 1F1B (pipeline_parallel/combined_1f1b.py), which the EP all-to-all
// overlap runs. Without a pipeline (combined_1f1b_schedule_for_no_pipelining) the first forward
// runs alone, then the forward of micro-batch i + 1 with the backward of i, then the last
// backward alone. Under the interleaved schedule each steady-state iteration's forward and
// backward run as one combined step (combined_1f1b_schedule_for_interleaved_pipelining);
// warm-up forwards and cool-down backwards run alone. A stage whose forwards all warm up (as
// many micro-batches as stages: Megatron runs every forward first) has no steady state, and its
// last warm-up forward, followed by the first cool-down backward, is not combined with it.
std::vector<PipelineOp> combined_1f1b(std::vector<PipelineOp> order, int stages) {
  if (stages == 1) {
    std::vector<PipelineOp> forwards, backwards;
    for (const PipelineOp& op : order) (op.forward ? forwards : backwards).push_back(op);
    STEPSIM_CHECK(forwards.size() == backwards.size() && !forwards.empty(), "an unbalanced pipeline order");
    std::vector<PipelineOp> out{forwards[0]};
    for (std::size_t i = 1; i < forwards.size(); ++i) {
      out.push_back(forwards[i]);
      out.back().overlapped = true;
      out.push_back(backwards[i - 1]);
    }
    out.push_back(backwards.back());
    return out;
  }
  const auto first_backward =
      std::find_if(order.begin(), order.end(), [](const PipelineOp& op) { return !op.forward; });
  if (std::none_of(first_backward, order.end(), [](const PipelineOp& op) { return op.forward; })) return order;
  for (std::size_t i = 0; i + 1 < order.size(); ++i) {
    const PipelineOp& b = order[i + 1];
    if (!order[i].forward || b.forward || b.weight) continue;
    STEPSIM_CHECK(b.micro_batch != order[i].micro_batch || b.chunk != order[i].chunk,
                  "a combined forward and backward of the same micro-batch and chunk");
    order[i].overlapped = true;
  }
  return order;
}

}  // namespace

std::vector<PipelineOp> stage_order(Schedule schedule, const PipelineShape& shape, int stage) {
  for (const ScheduleKind& k : kSchedules) {
    if (k.schedule != schedule) continue;
    if (shape.a2a_overlap) return combined_1f1b(k.order(shape, stage), shape.stages);
    return k.order(shape, stage);
  }
  STEPSIM_CHECK(false, "schedule missing from the registry");
  return {};
}

PipelineShape pipeline_shape(const Scenario& s) {
  return {s.parallel.pp, static_cast<int>(s.training.micro_batches(s.parallel.dp)), s.parallel.virtual_stages,
          !pytorch_pipelining(s), s.model.moe.a2a_overlap};
}

bool ep_overlap_pairs(const Scenario& s) {
  PipelineShape shape = pipeline_shape(s);
  shape.a2a_overlap = true;
  if (shape.micro_batches < 1) return false;
  // The last stage warms up least: where any stage pairs passes, it does, and is asked first.
  for (int stage = shape.stages - 1; stage >= 0; --stage)
    for (const PipelineOp& op : stage_order(s.parallel.schedule, shape, stage))
      if (op.overlapped) return true;
  return false;
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
