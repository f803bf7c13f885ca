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

namespace {

// Megatron-Core's combined 1F1B without a pipeline (pipeline_parallel/combined_1f1b.py,
// combined_1f1b_schedule_for_no_pipelining), which the EP all-to-all overlap runs: the first
// forward alone, then the forward of micro-batch i + 1 with the backward of i, then the last
// backward alone. With a pipeline the schedule's own order marks the forwards it combines
// (interleaved: its steady state's), for only it knows where its warm-up ends.
std::vector<PipelineOp> combined_1f1b(const std::vector<PipelineOp>& order) {
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

// A combined forward is followed by a backward of another micro-batch or chunk.
void check_combined(const std::vector<PipelineOp>& order) {
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!order[i].forward || !order[i].overlapped) continue;
    STEPSIM_CHECK(i + 1 < order.size() && !order[i + 1].forward && !order[i + 1].weight,
                  "a combined forward without a backward after it");
    STEPSIM_CHECK(order[i + 1].micro_batch != order[i].micro_batch || order[i + 1].chunk != order[i].chunk,
                  "a combined forward and backward of the same micro-batch and chunk");
  }
}

}  // namespace

std::vector<PipelineOp> stage_order(Schedule schedule, const PipelineShape& shape, int stage) {
  for (const ScheduleKind& k : kSchedules) {
    if (k.schedule != schedule) continue;
    if (shape.a2a_overlap && shape.stages == 1) return combined_1f1b(k.order(shape, stage));
    std::vector<PipelineOp> order = k.order(shape, stage);
    if (shape.a2a_overlap) check_combined(order);
    return order;
  }
  STEPSIM_CHECK(false, "schedule missing from the registry");
  return {};
}

PipelineShape pipeline_shape(const Scenario& s) {
  return {s.parallel.pp, static_cast<int>(s.training.micro_batches(s.parallel.dp)), s.parallel.virtual_stages,
          s.model.moe.a2a_overlap};
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

void combined_order(std::array<std::size_t, 2> pieces, const std::function<bool(int, std::size_t)>& dispatch,
                    const std::function<bool(int, std::size_t)>& run) {
  std::array<std::size_t, 2> next{0, 0};
  int lane = 1;
  bool handed = true;
  const auto hand_over = [&] {
    lane ^= 1;
    handed = true;
  };
  while (next[0] < pieces[0] || next[1] < pieces[1]) {
    const auto l = static_cast<std::size_t>(lane);
    if (next[l] == pieces[l]) {
      hand_over();
      continue;
    }
    if (dispatch(lane, next[l]) && !handed) {
      hand_over();
      continue;
    }
    const bool all_to_all = run(lane, next[l]++);
    handed = false;
    if (all_to_all) hand_over();
  }
}

int warmup_forwards(const std::vector<PipelineOp>& order) {
  const auto first_backward =
      std::find_if(order.begin(), order.end(), [](const PipelineOp& op) { return !op.forward; });
  return static_cast<int>(first_backward - order.begin());
}

}  // namespace stepsim::parallelism
