// Pipeline schedules as Megatron orders them: warm-up counts per stage, one forward and one
// backward of every (micro-batch, chunk), and the interleaved schedule's chunk order, with
// PyTorch's rounds where the micro-batches are not a multiple of p.
#include <algorithm>
#include <iterator>
#include <set>
#include <string>
#include <tuple>
#include <vector>

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

// Megatron-Core's get_pp_rank_microbatches (since its tunable schedule, 4295be1a6c of November
// 2024) and PyTorch's ScheduleInterleaved1F1B (_get_warmup_ops) alike: the warm-up is
// (v − 1)·p + 2(p − rank − 1) forwards, capped at m·v, whatever m is; the last stage then runs
// one forward and one backward in turn from its (v − 1)·p + 1-th forward. (Megatron-Core before
// it ran every forward first when m = p.)
TEST_CASE("the interleaved schedule with exactly p micro-batches warms up as with more") {
  const sp::PipelineShape shape{4, 4, 2};
  const auto last = sp::stage_order(Schedule::interleaved, shape, 3);
  CHECK(sp::warmup_forwards(last) == 4 + 1);
  CHECK(complete(last, shape));
  const auto first = sp::stage_order(Schedule::interleaved, shape, 0);
  CHECK(sp::warmup_forwards(first) == 8);  // min(4 + 2·3, 8): every forward
  CHECK(complete(first, shape));
}

namespace {

// "F0.1" for micro-batch 0's forward through chunk 1, "B2.0" for micro-batch 2's backward
// through chunk 0.
std::vector<std::string> passes(const std::vector<sp::PipelineOp>& order) {
  std::vector<std::string> out;
  for (const sp::PipelineOp& op : order)
    out.push_back((op.forward ? "F" : "B") + std::to_string(op.micro_batch) + "." + std::to_string(op.chunk));
  return out;
}

}  // namespace

// PyTorch's ScheduleInterleaved1F1B with m not a multiple of p: max(1, m // p) rounds of
// m / rounds micro-batches (microbatches_per_round). p 2, m 3, v 2: one round of 3. Rank 1 warms
// up (v − 1)·3 + 2(p − 1 − 1) = 3 forwards (_get_warmup_ops), then _get_1f1b_rank_ops runs
// forward k and backward k − 3 in turn: forward_stage_index(k) = (k // 3) % 2, backward_stage_
// index(k) = 1 − ((k − 3) // 3) % 2, each chunk's micro-batches counted in order.
TEST_CASE("PyTorch's interleaved schedule runs m not a multiple of p in rounds of m / max(1, m // p)") {
  const sp::PipelineShape three{2, 3, 2};
  CHECK(passes(sp::stage_order(Schedule::interleaved, three, 1)) ==
        std::vector<std::string>{"F0.0", "F1.0", "F2.0", "F0.1", "B0.1", "F1.1", "B1.1", "F2.1", "B2.1", "B0.0", "B1.0",
                                 "B2.0"});
  // Rank 0: min(3 + 2, 6) = 5 warm-up forwards, one forward and backward, five cool-down
  // backwards.
  CHECK(passes(sp::stage_order(Schedule::interleaved, three, 0)) ==
        std::vector<std::string>{"F0.0", "F1.0", "F2.0", "F0.1", "F1.1", "F2.1", "B0.1", "B1.1", "B2.1", "B0.0", "B1.0",
                                 "B2.0"});
  // p 4, m 10: 2 rounds of 5, forwards through chunk 0 then chunk 1 five micro-batches at a time;
  // rank 0 warms up 5 + 6 = 11 forwards, rank 3 five.
  const sp::PipelineShape ten{4, 10, 2};
  const auto first = sp::stage_order(Schedule::interleaved, ten, 0);
  std::vector<sp::PipelineOp> forwards;
  std::copy_if(first.begin(), first.end(), std::back_inserter(forwards),
               [](const sp::PipelineOp& op) { return op.forward; });
  std::vector<std::string> expected;
  for (const int round : {0, 5})
    for (const int chunk : {0, 1})
      for (int mb = round; mb < round + 5; ++mb)
        expected.push_back("F" + std::to_string(mb) + "." + std::to_string(chunk));
  CHECK(passes(forwards) == expected);
  CHECK(sp::warmup_forwards(first) == 11 + 1);
  CHECK(sp::warmup_forwards(sp::stage_order(Schedule::interleaved, ten, 3)) == 5 + 1);
  for (int stage = 0; stage < 4; ++stage) CHECK(complete(sp::stage_order(Schedule::interleaved, ten, stage), ten));
}

TEST_CASE("every schedule has a registry row") {
  for (Schedule s : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved}) {
    const auto rows = sp::pipeline_schedules();
    CHECK(std::count_if(rows.begin(), rows.end(), [&](const sp::ScheduleKind& k) { return k.schedule == s; }) == 1);
  }
}
