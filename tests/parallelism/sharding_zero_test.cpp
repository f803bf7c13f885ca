// The distributed optimizer (zero1, zero2): Megatron's buckets reduce-scattered in the last
// micro-batch (zero2: in every micro-batch), and the parameter AllGather before the forward
// (overlap_param_gather) or after the optimizer step.
#include <algorithm>
#include <string>

#include <catch2/catch.hpp>

#include "parallelism/grad_buckets.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/program_builder.hpp"
#include "stepsim/error.hpp"
#include "support.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::Bytes;
using stepsim::CollOp;
using stepsim::CommKind;
using stepsim::DpKind;
using stepsim::Scenario;
using stepsim::engine::OpIndex;
using stepsim::engine::Program;

namespace {

Scenario zero(bool overlap_param_gather, DpKind kind = DpKind::zero1) {
  Scenario s = spt::small_scenario(1, 4, 2);
  s.data_parallel.kind = kind;
  s.data_parallel.overlap_param_gather = overlap_param_gather;
  return s;
}

Program zero_program(const Scenario& s) {
  const spt::FixedCosts costs;
  return sp::build_program(s, spt::small_work(s), costs);
}

long first_with_prefix(const Program& p, const std::string& prefix) {
  const auto names = spt::op_names(p);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i].rfind(prefix, 0) == 0) return static_cast<long>(i);
  }
  INFO(prefix);
  FAIL("no op starts with the prefix");
  return -1;
}

bool op_waits_on(const Program& p, long i, long on) {
  const auto w = p.ranks[0].waits_of(static_cast<OpIndex>(i));
  return std::find(w.begin(), w.end(), static_cast<OpIndex>(on)) != w.end();
}

std::vector<CollOp> dp_ops(const Program& p) {
  std::vector<CollOp> out;
  for (OpIndex i : spt::collectives_of(p, CommKind::dp)) {
    out.push_back(p.ranks[0].calls[static_cast<std::size_t>(p.ranks[0].ops()[i].call)].op);
  }
  return out;
}

}  // namespace

TEST_CASE("Megatron's buckets hold max(4e7, 1e6 dp) parameters") {
  // ~92.9M parameters per GPU, the last ones the 32.8M-parameter word embedding.
  Scenario s = zero(false);
  const auto small = sp::megatron_bucket_layout(s);
  REQUIRE(small.buckets.size() == 2);
  CHECK(sp::bucket_elements(small, small.buckets[0]) >= 40'000'000);
  CHECK(sp::bucket_elements(small, small.buckets[0]) < 45'000'000);
  s.parallel.dp = 64;  // a 64M cap: the embedding crosses it, one bucket
  CHECK(sp::megatron_bucket_layout(s).buckets.size() == 1);
  s.parallel.dp = 4;
  s.data_parallel.overlap_grad_reduce = false;
  CHECK(sp::megatron_bucket_layout(s).buckets.size() == 1);
}

TEST_CASE("bucket_parameters sizes Megatron's buckets as --ddp-bucket-size does") {
  // The same ~92.9M parameters a GPU in buckets of at least 2e7: each closes at the tensor that
  // takes it to 2e7 or more, so all but the last hold 2e7 up to one tensor more.
  Scenario s = zero(false);
  s.data_parallel.bucket_parameters = 20'000'000;
  const auto layout = sp::megatron_bucket_layout(s);
  REQUIRE(layout.buckets.size() > 2);
  long long total = 0;
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const long long n = sp::bucket_elements(layout, layout.buckets[b]);
    total += n;
    const long long last = layout.tensors[static_cast<std::size_t>(layout.buckets[b].tensors.back())].elements;
    CHECK(n - last < 20'000'000);
    if (b + 1 < layout.buckets.size()) CHECK(n >= 20'000'000);
  }
  CHECK(total == sp::bucket_elements(sp::megatron_bucket_layout(zero(false)),
                                     sp::megatron_bucket_layout(zero(false)).buckets[0]) +
                     sp::bucket_elements(sp::megatron_bucket_layout(zero(false)),
                                         sp::megatron_bucket_layout(zero(false)).buckets[1]));
  // A size past every parameter of the rank: one bucket, as at dp 64 by default above.
  s.data_parallel.bucket_parameters = 1'000'000'000;
  CHECK(sp::megatron_bucket_layout(s).buckets.size() == 1);
  // The program reduce-scatters as many buckets as the layout has.
  s.data_parallel.bucket_parameters = 20'000'000;
  const Program p = zero_program(s);
  CHECK(spt::collectives_of(p, CommKind::dp).size() == 2 * layout.buckets.size());
}

TEST_CASE("under DeepSpeed ZeRO's buckets hold reduce_bucket_size's 5e8 elements unless bucket_parameters says") {
  // The same ~92.9M parameters a GPU, under 5e8: one bucket, where Megatron's 4e7 makes two.
  Scenario s = zero(false, DpKind::zero2);
  s.training.framework = stepsim::Framework::deepspeed;
  CHECK(sp::megatron_bucket_elements(s) == 500'000'000);
  REQUIRE(sp::megatron_bucket_layout(s).buckets.size() == 1);
  // zero2 all-reduces it in each of the two micro-batches (DeepSpeed's multi-rank bucket
  // all-reduce) and gathers each of its two parameter groups once.
  const Program p = zero_program(s);
  CHECK(dp_ops(p) == std::vector<CollOp>{CollOp::allreduce, CollOp::allreduce, CollOp::allgather, CollOp::allgather});
  // DeepSpeed closes a bucket before a gradient would take it past the size. Reverse
  // registration order, by hand: the head (32,768,000), the final norm (2,048), layer 1's fc2
  // bias and weight (1,024 + 4,194,304) and fc1 bias (4,096) make 36,969,472; its fc1 weight
  // would pass 4e7 and opens the next, which takes the rest of the layers (4,194,304 + 2,048 +
  // 1,049,600 + 3,148,800 + 2,048 + 12,596,224) and the position embedding (2,097,152):
  // 23,090,176; the word embedding (32,768,000) is the third. Megatron's "at least" makes two.
  s.data_parallel.bucket_parameters = 40'000'000;
  const sp::BucketLayout layout = sp::megatron_bucket_layout(s);
  REQUIRE(layout.buckets.size() == 3);
  CHECK(sp::bucket_elements(layout, layout.buckets[0]) == 36'969'472);
  CHECK(sp::bucket_elements(layout, layout.buckets[1]) == 23'090'176);
  CHECK(sp::bucket_elements(layout, layout.buckets[2]) == 32'768'000);
  s.training.framework = stepsim::Framework::megatron;
  CHECK(sp::megatron_bucket_layout(s).buckets.size() == 2);
}

TEST_CASE("DeepSpeed's ZeRO copies each gradient into two buffers of reduce_bucket_size elements") {
  Scenario s = zero(false);
  s.training.framework = stepsim::Framework::deepspeed;
  // Two BF16 buffers of 5e8 elements with overlap_comm (setup_buckets), whatever the model's size.
  CHECK(sp::deepspeed_ipg_buffers(s));
  CHECK(sp::ipg_buffers(s) == Bytes(2'000'000'000));
  s.data_parallel.overlap_grad_reduce = false;
  CHECK(sp::ipg_buffers(s) == Bytes(1'000'000'000));
  s.data_parallel.overlap_grad_reduce = true;
  // One copy per gradient tensor in the last micro-batch (ZeRO-1), named ZeRO's.
  const auto names = spt::op_names(zero_program(s));
  const auto copies = std::count_if(names.begin(), names.end(), [](const std::string& n) {
    return n.rfind("ZeRO ", 0) == 0 && n.find(" into bucket ") != std::string::npos;
  });
  CHECK(copies > 0);
  CHECK(static_cast<std::size_t>(copies) <= sp::megatron_bucket_layout(s).tensors.size());
  // Two micro-batches: the first backward's ops all come before the first copy.
  const Program p = zero_program(s);
  const long first_copy = first_with_prefix(p, "ZeRO ");
  CHECK(first_copy > spt::find_op(p, "L0 fc1 wgrad"));
  CHECK(spt::find_op(p, "L0 fc1 wgrad", static_cast<std::size_t>(first_copy)) > first_copy);
  s.training.framework = stepsim::Framework::megatron;  // Megatron-Core's buffer is the bucket
  CHECK_FALSE(sp::deepspeed_ipg_buffers(s));
  s.training.framework = stepsim::Framework::deepspeed;
  s.parallel.pp = 2;  // the pipeline engine's ZeRO-1 is its BF16 optimizer's
  CHECK_FALSE(sp::deepspeed_ipg_buffers(s));
}

TEST_CASE("Megatron splits only the first stage's first model chunk into buckets") {
  // 8 GELU layers of h = 4096 (12h² + 13h = 201,379,840 parameters each, biases and
  // LayerNorms included), 2 stages of 2 interleaved chunks of 2 layers: stage 0 holds the
  // embedding with layers 0-1 and layers 4-5, stage 1 layers 2-3 and layers 6-7 with the
  // final norm (2h) and the untied head (32000 h = 131,072,000). dp 4: 4e7-parameter buckets.
  Scenario s = zero(false);
  s.model.layers = 8;
  s.model.hidden = 4096;
  s.model.heads = 32;
  s.model.kv_heads = 32;
  s.model.ffn_hidden = 16384;
  s.parallel.pp = 2;
  s.parallel.virtual_stages = 2;
  constexpr long long layer = 201'379'840;
  const auto blocks_of = [](const sp::BucketLayout& l, const sp::Bucket& b) {
    std::vector<int> out;
    for (int t : b.tensors) out.push_back(l.tensors[static_cast<std::size_t>(t)].block);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  };

  s.parallel.stage = 1;  // a later stage: each chunk one bucket, the later chunk first
  const auto later = sp::megatron_bucket_layout(s);
  REQUIRE(later.buckets.size() == 2);
  CHECK(blocks_of(later, later.buckets[0]) == std::vector<int>{7, 8, 9});
  CHECK(sp::bucket_elements(later, later.buckets[0]) == 2 * layer + 8192 + 131'072'000);
  CHECK(blocks_of(later, later.buckets[1]) == std::vector<int>{3, 4});
  CHECK(sp::bucket_elements(later, later.buckets[1]) == 2 * layer);

  s.parallel.stage = 0;  // the first stage: its second chunk one bucket, its first in 4e7 pieces
  const auto first = sp::megatron_bucket_layout(s);
  REQUIRE(first.buckets.size() > 2);
  CHECK(blocks_of(first, first.buckets[0]) == std::vector<int>{5, 6});
  CHECK(sp::bucket_elements(first, first.buckets[0]) == 2 * layer);
  for (std::size_t b = 1; b + 1 < first.buckets.size(); ++b) {
    const long long n = sp::bucket_elements(first, first.buckets[b]);
    const long long last = first.tensors[static_cast<std::size_t>(first.buckets[b].tensors.back())].elements;
    CHECK(n >= 40'000'000);
    CHECK(n - last < 40'000'000);
    for (int block : blocks_of(first, first.buckets[b])) CHECK(block <= 2);
  }

  s.data_parallel.overlap_grad_reduce = false;  // one bucket per chunk everywhere
  CHECK(sp::megatron_bucket_layout(s).buckets.size() == 2);
}

TEST_CASE("under DeepSpeed's pipeline engine ZeRO-1 all-reduces each stage's gradients after its last backward") {
  // deepspeed/runtime/pipe: the BF16 optimizer's gradients all-reduced in 5e8-element buffers
  // once the schedule has ended (io/validate.cpp makes overlap_grad_reduce false there).
  Scenario s = zero(false);
  s.training.framework = stepsim::Framework::deepspeed;
  s.parallel.pp = 2;
  s.data_parallel.overlap_grad_reduce = false;
  const Program p = zero_program(s);
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    INFO("rank " << r);
    const auto names = spt::op_names(p, r);
    long last_backward = -1;
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i].find("backward") != std::string::npos || names[i].find("grad") != std::string::npos)
        if (names[i].rfind("AllReduce", 0) != 0 && names[i].rfind("ReduceScatter", 0) != 0)
          last_backward = static_cast<long>(i);
    const auto dp = spt::collectives_of(p, CommKind::dp, r);
    // One buffer of gradients (under 5e8 elements), then the gathers of the parameters with
    // weight decay and of those without.
    REQUIRE(dp.size() == 3);
    const auto& rank = p.ranks[r];
    CHECK(rank.calls[static_cast<std::size_t>(rank.ops()[dp[0]].call)].op == CollOp::allreduce);
    CHECK(rank.calls[static_cast<std::size_t>(rank.ops()[dp[1]].call)].op == CollOp::allgather);
    CHECK(rank.calls[static_cast<std::size_t>(rank.ops()[dp[2]].call)].op == CollOp::allgather);
    CHECK(static_cast<long>(dp[0]) > last_backward);
  }
}

// DeepSpeed's ZeRO-1 without overlap_comm registers no gradient hooks: after the backward
// reduce_gradients walks every parameter and reduces its ipg buffer each time the next gradient
// would take it past reduce_bucket_size (stage_1_and_2.py), so the buckets are those it fills
// with overlap_comm, all reduced after the last backward op, one after another.
TEST_CASE("without overlap DeepSpeed's ZeRO-1 all-reduces the buckets of overlap_comm after the backward") {
  Scenario s = zero(false);
  s.training.framework = stepsim::Framework::deepspeed;
  s.data_parallel.bucket_parameters = 20'000'000;
  s.data_parallel.overlap_grad_reduce = true;
  const Program overlapped = zero_program(s);
  s.data_parallel.overlap_grad_reduce = false;
  const Program p = zero_program(s);
  const auto sizes = [](const Program& program) {
    std::vector<double> out;
    for (OpIndex c : spt::collectives_of(program, CommKind::dp)) {
      const auto& call = program.ranks[0].calls[static_cast<std::size_t>(program.ranks[0].ops()[c].call)];
      if (call.op == CollOp::allreduce) out.push_back(call.size.as_double());
    }
    return out;
  };
  // The small model's 91 M parameters in buckets of at most 20 M, the 32.8 M embedding and LM
  // head each alone: more than one bucket.
  REQUIRE(sizes(p).size() >= 3);
  CHECK(sizes(p) == sizes(overlapped));
  const auto names = spt::op_names(p);
  long last_backward = -1;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i].find("backward") != std::string::npos || names[i].find("grad") != std::string::npos)
      if (names[i].rfind("AllReduce", 0) != 0 && names[i].rfind("AllGather", 0) != 0)
        last_backward = static_cast<long>(i);
  for (OpIndex c : spt::collectives_of(p, CommKind::dp)) CHECK(static_cast<long>(c) > last_backward);
}

TEST_CASE("ZeRO reduce-scatters gradient buckets in the last micro-batch only") {
  const Program p = zero_program(zero(false));
  const long first = first_with_prefix(p, "ReduceScatter dp bucket 0");
  CHECK(first > first_with_prefix(p, "L1 mlp residual backward"));
  // Two micro-batches: the first backward's ops come before every ReduceScatter.
  CHECK(first > spt::find_op(p, "L0 fc1 wgrad"));
  CHECK(spt::find_op(p, "L0 fc1 wgrad", static_cast<std::size_t>(first)) > first);
}

TEST_CASE("without overlap_param_gather every parameter AllGather follows the optimizer") {
  const Program p = zero_program(zero(false));
  const long optimizer = first_with_prefix(p, "optimizer step");
  const auto ops = dp_ops(p);
  REQUIRE(ops.size() == 4);  // two buckets reduced, two gathered
  CHECK(ops == std::vector<CollOp>{CollOp::reducescatter, CollOp::reducescatter, CollOp::allgather, CollOp::allgather});
  const long gather = first_with_prefix(p, "AllGather dp bucket 1 params");
  CHECK(gather > optimizer);
  CHECK(op_waits_on(p, gather, optimizer));
}

// DeepSpeed's ZeRO gathers each parameter group's flat buffer in one all_gather_into_tensor
// after the optimizer step (runtime/utils.py, all_gather_into_tensor_dp_groups), whatever its
// buckets: Megatron-DeepSpeed's two groups, with weight decay and without (norms, biases). By
// hand for the small GPT (hidden 1024, FFN 4096, vocabulary 32000, sequence 2048, 2 layers,
// biases): decayed, the word embedding 32,768,000, the positions 2,097,152, per layer QKV
// 3,145,728 + projection 1,048,576 + fc1 4,194,304 + fc2 4,194,304 = 12,582,912, and the head
// 32,768,000: 92,798,976 elements; not decayed, per layer the biases 3072 + 1024 + 4096 + 1024
// and two norms' weight and bias 4096, 13,312, and the final norm's 2048: 28,672. In BF16.
TEST_CASE("DeepSpeed's ZeRO gathers each parameter group in one AllGather after the optimizer") {
  Scenario s = zero(false);
  s.training.framework = stepsim::Framework::deepspeed;
  s.data_parallel.bucket_parameters = 20'000'000;  // several gradient buckets
  const Program p = zero_program(s);
  const long optimizer = first_with_prefix(p, "optimizer step");
  std::vector<double> gathered;
  for (OpIndex c : spt::collectives_of(p, CommKind::dp)) {
    const auto& call = p.ranks[0].calls[static_cast<std::size_t>(p.ranks[0].ops()[c].call)];
    if (call.op != CollOp::allgather) continue;
    gathered.push_back(call.size.as_double());
    CHECK(op_waits_on(p, static_cast<long>(c), optimizer));
  }
  CHECK(gathered == std::vector<double>{92'798'976.0 * 2, 28'672.0 * 2});
  const std::vector<CollOp> ops = dp_ops(p);
  CHECK(std::count(ops.begin(), ops.end(), CollOp::allreduce) >= 3);
}

TEST_CASE("with overlap_param_gather the forward dispatches the next bucket's AllGather") {
  const Program p = zero_program(zero(true));
  const long embedding = spt::find_op(p, "embedding fwd");
  const long first = first_with_prefix(p, "AllGather dp bucket 1 params");   // embedding .. L1 fc1
  const long second = first_with_prefix(p, "AllGather dp bucket 0 params");  // the rest of L1, head
  CHECK(first < embedding);
  CHECK(second < embedding);
  CHECK(op_waits_on(p, embedding, first));
  CHECK_FALSE(op_waits_on(p, embedding, second));
  CHECK(op_waits_on(p, spt::find_op(p, "L1 input norm fwd"), second));
  CHECK(first_with_prefix(p, "optimizer step") == static_cast<long>(p.ranks[0].ops().size()) - 1);
}

// ZeRO-2 keeps only its shard of the gradients between micro-batches, so it reduce-scatters
// them in every micro-batch's backward (DeepSpeed's stage 2); zero1 (Megatron's distributed
// optimizer) only in the last one's. Two and three micro-batches of the same step: zero2
// issues each of zero1's ReduceScatters once per micro-batch, and the AllGathers once.
TEST_CASE("zero2 reduce-scatters every micro-batch's gradients, zero1 only the last's") {
  const auto count = [](const Program& p, CollOp op) {
    const auto ops = dp_ops(p);
    return std::count(ops.begin(), ops.end(), op);
  };
  for (bool overlap : {false, true}) {
    for (int micro_batches : {2, 3}) {
      INFO("overlap " << overlap << ", " << micro_batches << " micro-batches");
      Scenario one = zero(false);
      one.training.global_batch = 4LL * micro_batches;
      one.data_parallel.overlap_grad_reduce = overlap;
      Scenario two = one;
      two.data_parallel.kind = DpKind::zero2;
      const Program p1 = zero_program(one);
      const Program p2 = zero_program(two);
      // zero1: the layout's two buckets, one collective without overlap; zero2 reduces its two
      // buckets in every micro-batch either way (DeepSpeed's hook reduces its buffer as it fills).
      CHECK(count(p1, CollOp::reducescatter) == (overlap ? 2 : 1));
      CHECK(count(p2, CollOp::reducescatter) == micro_batches * 2);
      // The parameters are gathered bucket by bucket after the optimizer step.
      CHECK(count(p2, CollOp::allgather) == 2);
      CHECK(count(p1, CollOp::allgather) == count(p1, CollOp::reducescatter));
      // zero2's first micro-batch's ReduceScatters come before the second micro-batch's forward;
      // zero1's after.
      const auto names = spt::op_names(p2);
      long second_forward = -1;
      int embeddings = 0;
      for (std::size_t i = 0; i < names.size() && second_forward < 0; ++i)
        if (names[i] == "embedding fwd" && ++embeddings == 2) second_forward = static_cast<long>(i);
      REQUIRE(second_forward > 0);
      const long first = first_with_prefix(p2, "ReduceScatter dp bucket");
      CHECK(first < second_forward);
      CHECK(first_with_prefix(p1, "ReduceScatter dp bucket") > second_forward);
      // Without overlap DeepSpeed reduces on the compute stream: the next compute op waits for
      // the last bucket of the micro-batch.
      const long last = first_with_prefix(p2, "ReduceScatter dp bucket 1");
      CHECK(last < second_forward);
      const auto& ops = p2.ranks[0].ops();
      long next = last + 1;
      while (next < static_cast<long>(ops.size()) && ops[static_cast<std::size_t>(next)].call >= 0) ++next;
      REQUIRE(next < static_cast<long>(ops.size()));
      CHECK(op_waits_on(p2, next, last) == !overlap);
    }
  }
}

// DeepSpeed's ZeRO-2 without overlap_comm (stage_1_and_2.py) reduces in its gradient hook: once
// the next gradient would take the buffer past reduce_bucket_size it reduces the buffer, on the
// current stream (average_tensor), so the backward goes on only after it. The small GPT's
// buckets of at least 4e7 parameters, by hand in reverse registration order: the head
// (32,768,000), the final norm (2,048), layer 1's fc2 (4,194,304 + 1,024) and fc1 (4,194,304 +
// 4,096) pass 4e7, so bucket 0 is complete at layer 1's fc1 weight gradient, before any of layer
// 0's; bucket 1 is the rest.
TEST_CASE("without overlap zero2 reduces each bucket as the backward fills it, and the backward waits for it") {
  Scenario s = zero(false, DpKind::zero2);
  s.data_parallel.overlap_grad_reduce = false;
  const Program p = zero_program(s);
  // Two buckets in each of the two micro-batches, as with overlap: the same collectives, sizes
  // and order.
  const auto sizes = [](const Program& program) {
    std::vector<double> out;
    for (OpIndex c : spt::collectives_of(program, CommKind::dp))
      out.push_back(program.ranks[0].calls[static_cast<std::size_t>(program.ranks[0].ops()[c].call)].size.as_double());
    return out;
  };
  Scenario overlapped = s;
  overlapped.data_parallel.overlap_grad_reduce = true;
  CHECK(dp_ops(p) == std::vector<CollOp>{CollOp::reducescatter, CollOp::reducescatter, CollOp::reducescatter,
                                         CollOp::reducescatter, CollOp::allgather, CollOp::allgather});
  CHECK(sizes(p) == sizes(zero_program(overlapped)));
  // Bucket 0 of the first micro-batch is reduced inside its backward, before layer 0's weight
  // gradients, and the next compute op waits for it.
  const long bucket = first_with_prefix(p, "ReduceScatter dp bucket 0");
  CHECK(bucket > spt::find_op(p, "L1 fc1 wgrad"));
  CHECK(bucket < spt::find_op(p, "L0 fc1 wgrad"));
  const auto& ops = p.ranks[0].ops();
  long next = bucket + 1;
  while (next < static_cast<long>(ops.size()) && ops[static_cast<std::size_t>(next)].call >= 0) ++next;
  REQUIRE(next < static_cast<long>(ops.size()));
  CHECK(op_waits_on(p, next, bucket));
  // With overlap_comm the reduction runs beside the backward, which does not wait.
  const Program q = zero_program(overlapped);
  const long beside = first_with_prefix(q, "ReduceScatter dp bucket 0");
  CHECK_FALSE(op_waits_on(q, beside + 1, beside));
}

namespace {

// Every compute op lasts one picosecond per byte it moves.
class ByteCosts final : public sp::Costs {
 public:
  stepsim::Time compute(const stepsim::workload::OpCost& op) const override {
    return stepsim::Time::from_ps(op.bytes.count());
  }
  sp::CollectiveCost collective(const stepsim::collectives::Request&) const override {
    return {stepsim::Time::from_us(10.0), stepsim::Bandwidth::gbytes_per_s(100.0), {1.0, 0.0}};
  }
  stepsim::Time kernel_launch() const override { return stepsim::Time::from_us(5.0); }
  double comm_slowdown() const override { return 0.0; }
};

}  // namespace

// Megatron-Core's train_step zeroes each model chunk's whole gradient buffer before the
// forward (zero_grad_buffer: grad_data.zero_()), the FP32 main gradient of every parameter
// the rank holds, not the optimizer's 1/dp shard. The small GPT: 2 layers of 12h² + 13h,
// the embedding and the output layer (32,000 × 1024 each), 2,048 learned positions, the final
// LayerNorm's 2h.
TEST_CASE("under Megatron the step zeroes the rank's whole main-gradient buffer") {
  Scenario s = zero(true);
  const auto optimizer_ps = [&](stepsim::Framework f) {
    s.training.framework = f;
    const ByteCosts costs;
    const Program p = sp::build_program(s, stepsim::workload::build_work(s), costs);
    return p.ranks[0].ops()[static_cast<std::size_t>(first_with_prefix(p, "optimizer step"))].duration.ps();
  };
  const long long h = 1024;
  const long long params = 2 * (12 * h * h + 13 * h) + 2 * 32000 * h + 2048 * h + 2 * h;
  CHECK(optimizer_ps(stepsim::Framework::megatron) - optimizer_ps(stepsim::Framework::torchtitan) == params * 4);
}

// TP 2 with expert tensor parallelism 1 and no EP on 2 GPUs: dp 1, but each TP rank runs the
// whole experts over its own half of the sequence, so the expert-dp group is tp·dp / (ep·etp)
// = 2 ranks, over which Megatron-Core's DDP and distributed optimizer reduce their expert
// buffers (expert_data_parallel_group), whatever dp is. The dense gradients, the same on both
// TP ranks' shards, are reduced over no one. Two layers of 8 experts (GELU, h 1024, expert FFN
// 4096, no biases): 2 · 8 · (1024·4096 + 4096·1024) = 134,217,728 expert parameters.
TEST_CASE("at dp 1 a mixture of experts still reduces its experts over the expert-dp group") {
  Scenario s = spt::small_scenario(2, 1, 1);
  s.parallel.sequence_parallel = true;
  s.parallel.ep = 1;
  s.parallel.etp = 1;
  s.model.moe = {8, 2, 4096};
  s.data_parallel.grad_reduce_dtype = stepsim::Precision::fp32;
  constexpr long long experts = 134'217'728;
  for (const DpKind kind : {DpKind::ddp, DpKind::zero1, DpKind::zero2}) {
    INFO(stepsim::to_string(kind));
    s.data_parallel.kind = kind;
    const spt::FixedCosts costs;
    const Program p = sp::build_program(s, stepsim::workload::build_work(s), costs);
    long long reduced = 0;
    long long gathered = 0;
    for (const OpIndex i : spt::collectives_of(p, CommKind::dp)) {
      const auto& call = p.ranks[0].calls[static_cast<std::size_t>(p.ranks[0].ops()[i].call)];
      CHECK(p.groups[static_cast<std::size_t>(call.group)].size == 2);
      (call.op == CollOp::allgather ? gathered : reduced) += call.size.count();
    }
    // Once a step, but zero2's in each of its micro-batches (one here).
    CHECK(reduced == experts * 4);
    CHECK(gathered == (kind == DpKind::ddp ? 0 : experts * 2));
  }
}
