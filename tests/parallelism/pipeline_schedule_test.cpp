// Pipeline schedules as Megatron orders them: warm-up counts per stage, one forward and one
// backward of every (micro-batch, chunk), and the interleaved schedule's chunk order.
#include <algorithm>
#include <set>
#include <tuple>

#include <catch2/catch.hpp>

#include "parallelism/pipeline_schedule.hpp"

namespace sp = stepsim::parallelism;
using stepsim::Schedule;

namespace {

// Every (micro-batch, chunk) passes forward once and backward once, forward first.
bool complete(const std::vector<sp::PipelineOp>& order, const sp::PipelineShape& shape) {
  std::set<std::tuple<int, int, bool>> seen;
  for (const sp::PipelineOp& op : order) {
    if (!op.forward && seen.count({op.micro_batch, op.chunk, true}) == 0) return false;
    if (!seen.insert({op.micro_batch, op.chunk, op.forward}).second) return false;
  }
  return seen.size() == static_cast<std::size_t>(2 * shape.micro_batches * shape.chunks);
}

}  // namespace

TEST_CASE("1F1B warms up with p - rank - 1 forwards on each stage") {
  const sp::PipelineShape shape{4, 8, 1};
  for (int stage = 0; stage < 4; ++stage) {
    const auto order = sp::stage_order(Schedule::one_f_one_b, shape, stage);
    CHECK(sp::warmup_forwards(order) == 4 - stage);  // the warm-up plus the first steady forward
    CHECK(complete(order, shape));
  }
  // The last stage alternates from the start.
  const auto last = sp::stage_order(Schedule::one_f_one_b, shape, 3);
  CHECK(last[0] == sp::PipelineOp{0, 0, true});
  CHECK(last[1] == sp::PipelineOp{0, 0, false});
  CHECK(last[2] == sp::PipelineOp{1, 0, true});
}

TEST_CASE("1F1B with fewer micro-batches than stages runs every forward first") {
  const sp::PipelineShape shape{8, 2, 1};
  const auto order = sp::stage_order(Schedule::one_f_one_b, shape, 0);
  CHECK(sp::warmup_forwards(order) == 2);
  CHECK(complete(order, shape));
}

TEST_CASE("GPipe runs every forward, then every backward") {
  const sp::PipelineShape shape{4, 6, 1};
  for (int stage = 0; stage < 4; ++stage) {
    const auto order = sp::stage_order(Schedule::gpipe, shape, stage);
    CHECK(sp::warmup_forwards(order) == 6);
    CHECK(complete(order, shape));
  }
}

TEST_CASE("interleaved 1F1B warms up with 2(p - rank - 1) + (v - 1)p forwards") {
  const sp::PipelineShape shape{4, 8, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const auto order = sp::stage_order(Schedule::interleaved, shape, stage);
    CHECK(sp::warmup_forwards(order) == 2 * (4 - stage - 1) + 2 * 4 + 1);
    CHECK(complete(order, shape));
  }
}

TEST_CASE("interleaved forwards take p micro-batches through each chunk in turn") {
  const sp::PipelineShape shape{2, 4, 2};
  const auto order = sp::stage_order(Schedule::interleaved, shape, 0);
  std::vector<sp::PipelineOp> forwards;
  std::copy_if(order.begin(), order.end(), std::back_inserter(forwards),
               [](const sp::PipelineOp& op) { return op.forward; });
  const std::vector<sp::PipelineOp> expected{{0, 0, true}, {1, 0, true}, {0, 1, true}, {1, 1, true},
                                             {2, 0, true}, {3, 0, true}, {2, 1, true}, {3, 1, true}};
  CHECK(forwards == expected);
  // Backwards start from the last chunk.
  const auto first_backward =
      std::find_if(order.begin(), order.end(), [](const sp::PipelineOp& op) { return !op.forward; });
  REQUIRE(first_backward != order.end());
  CHECK(*first_backward == sp::PipelineOp{0, 1, false});
}

TEST_CASE("interleaved with exactly p micro-batches runs every forward first") {
  const sp::PipelineShape shape{4, 4, 2};
  const auto order = sp::stage_order(Schedule::interleaved, shape, 3);
  CHECK(sp::warmup_forwards(order) == 8);
  CHECK(complete(order, shape));
}

// torch.distributed.pipelining's ScheduleInterleaved1F1B (torchtitan) has no such rule: its
// warm-up is (v − 1)·p + 2(p − rank − 1) forwards, capped at m·v, whatever m is; the last stage
// then runs one forward and one backward in turn from its (v − 1)·p + 1-th forward.
TEST_CASE("PyTorch's interleaved schedule with exactly p micro-batches warms up as with more") {
  sp::PipelineShape shape{4, 4, 2};
  shape.all_forwards_first_at_p = false;
  const auto last = sp::stage_order(Schedule::interleaved, shape, 3);
  CHECK(sp::warmup_forwards(last) == 4 + 1);
  CHECK(complete(last, shape));
  const auto first = sp::stage_order(Schedule::interleaved, shape, 0);
  CHECK(sp::warmup_forwards(first) == 8);  // min(4 + 2·3, 8): every forward
  CHECK(complete(first, shape));
}

TEST_CASE("every schedule has a registry row") {
  for (Schedule s : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved}) {
    const auto rows = sp::pipeline_schedules();
    CHECK(std::count_if(rows.begin(), rows.end(), [&](const sp::ScheduleKind& k) { return k.schedule == s; }) == 1);
  }
}
