// DDP's gradient buckets: caps, order, and readiness in bucket order.
#include <algorithm>

#include <catch2/catch.hpp>

#include "parallelism/data_parallel.hpp"
#include "parallelism/grad_buckets.hpp"
#include "stepsim/error.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
using stepsim::Bytes;
using stepsim::CommKind;
using stepsim::workload::Pass;
using stepsim::workload::Role;

namespace {

std::vector<sp::GradTensor> tensors(const std::vector<long long>& elements) {
  std::vector<sp::GradTensor> out;
  for (long long e : elements) out.push_back({"t", e, 0, Role::qkv});
  return out;
}

std::vector<int> in_order(std::size_t n) {
  std::vector<int> order;
  for (std::size_t i = 0; i < n; ++i) order.push_back(static_cast<int>(i));
  return order;
}

const std::string& last_name(const sp::BucketLayout& layout, const sp::Bucket& b) {
  return layout.tensors[static_cast<std::size_t>(b.tensors.back())].name;
}

}  // namespace

TEST_CASE("the first bucket closes once it reaches first_bucket_mb") {
  const auto t = tensors(std::vector<long long>(10, 160 * 1024));  // 320 KiB each in bf16
  const auto buckets = sp::assign_buckets(t, in_order(t.size()), 2, Bytes::mib(1), Bytes::kib(1536));
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0].tensors.size() == 4);  // 1.25 MiB: the fourth tensor crosses 1 MiB
  CHECK(buckets[0].size == Bytes::kib(1280));
  CHECK(buckets[1].tensors.size() == 5);  // 1600 KiB: the fifth crosses 1536 KiB
  CHECK(buckets[2].tensors.size() == 1);  // the rest, below the cap
}

TEST_CASE("a bucket exceeds its cap by at most its last tensor") {
  const auto s = sp::test::small_scenario(1, 4, 1);
  const auto layout = sp::bucket_layout(s);
  for (std::size_t k = 0; k + 1 < layout.buckets.size(); ++k) {
    const auto& b = layout.buckets[k];
    const Bytes cap = k == 0 ? Bytes::mib(1) : Bytes::mib(25);
    const auto& last = layout.tensors[static_cast<std::size_t>(b.tensors.back())];
    CHECK(b.size >= cap);
    CHECK(b.size - Bytes(last.elements * 2) < cap);
  }
}

TEST_CASE("buckets take gradients in reverse registration order") {
  const auto layout = sp::bucket_layout(sp::test::small_scenario(1, 4, 1));
  int previous = static_cast<int>(layout.tensors.size());
  for (const auto& b : layout.buckets) {
    for (int t : b.tensors) {
      CHECK(t == previous - 1);
      previous = t;
    }
  }
  CHECK(previous == 0);
}

TEST_CASE("the small GPT has three buckets: LM head, a layer and a half, the rest") {
  const auto layout = sp::bucket_layout(sp::test::small_scenario(1, 4, 1));
  REQUIRE(layout.buckets.size() == 3);
  CHECK(last_name(layout, layout.buckets[0]) == "head lm_head.weight");
  CHECK(layout.buckets[0].size == Bytes(32000LL * 1024 * 2));
  CHECK(last_name(layout, layout.buckets[1]) == "L0 fc2.weight");
  CHECK(last_name(layout, layout.buckets[2]) == "embedding word.weight");
  long long elements = 0;
  for (const auto& t : layout.tensors) elements += t.elements;
  // 12h² + 13h per layer, two embeddings and the head, final norm.
  const long long h = 1024;
  CHECK(elements == 2 * (12 * h * h + 13 * h) + 2 * 32000 * h + 2048 * h + 2 * h);
}

TEST_CASE("tensor parallelism shards the column- and row-parallel weights") {
  const auto full = sp::gradient_tensors(sp::test::small_scenario(1, 1, 1).model, {});
  stepsim::ParallelSpec p;
  p.tp = 4;
  const auto sharded = sp::gradient_tensors(sp::test::small_scenario(4, 1, 1).model, p);
  REQUIRE(full.size() == sharded.size());
  for (std::size_t i = 0; i < full.size(); ++i) {
    if (full[i].name.find("weight") == std::string::npos || full[i].name.find("norm") != std::string::npos) continue;
    if (full[i].name == "embedding position.weight") continue;
    CHECK(sharded[i].elements * 4 == full[i].elements);
  }
}

TEST_CASE("a late gradient holds back later buckets") {
  const auto s = sp::test::small_scenario(1, 4, 1);
  const sp::test::FixedCosts costs;
  stepsim::engine::Program program;
  program.ranks.emplace_back();
  sp::BuildState state(program, costs);
  sp::StepBuilder b(state, 0);
  b.add_communicator(CommKind::dp, {0, 1, {4, 1, 4}});
  auto ddp = sp::make_data_parallel(s);
  auto produce = [&](int block, Role role, Pass pass) {
    stepsim::workload::OpCost cost;
    cost.name = "x";
    cost.role = role;
    cost.pass = pass;
    const sp::OpSite site{block, &cost, stepsim::Phase::backward, true};
    const auto op = b.compute(cost, stepsim::Phase::backward, "x");
    ddp->after_backward_op(b, site, op);
    return op;
  };
  // Bucket 1 (final norm, layer 1, layer 0's fc2) completes before bucket 0 (the LM head).
  produce(3, Role::final_norm, Pass::backward);
  for (Role r : {Role::fc2, Role::fc1, Role::post_norm, Role::attn_proj, Role::qkv, Role::input_norm}) {
    produce(2, r, Pass::backward_weight);
  }
  const auto bucket1_ready = produce(1, Role::fc2, Pass::backward_weight);
  CHECK(sp::test::collectives_of(program, CommKind::dp).empty());
  const auto head = produce(3, Role::lm_head, Pass::backward_weight);
  const auto dp = sp::test::collectives_of(program, CommKind::dp);
  REQUIRE(dp.size() == 2);
  const auto& ops = program.ranks[0].ops();
  const auto waits = [&](stepsim::engine::OpIndex o) {
    const auto w = program.ranks[0].waits_of(o);
    return std::vector<stepsim::engine::OpIndex>(w.begin(), w.end());
  };
  CHECK(waits(dp[0]) == std::vector<stepsim::engine::OpIndex>{head});
  CHECK(waits(dp[1]) == std::vector<stepsim::engine::OpIndex>{bucket1_ready});
  CHECK(dp[0] > head);
  CHECK(program.names[ops[dp[0]].name] == "AllReduce dp bucket 0, 62.5 MiB");
}

TEST_CASE("every data-parallel kind has a strategy and communicators") {
  auto s = sp::test::small_scenario(1, 4, 1);
  for (const sp::DataParallelKind& k : sp::data_parallel_kinds()) {
    INFO(stepsim::to_string(k.kind));
    s.data_parallel.kind = k.kind;
    CHECK(sp::make_data_parallel(s) != nullptr);
    CHECK_FALSE(sp::data_parallel_communicators(s, 0).empty());
  }
}

// With 16 heads, 8 kv heads and TP 8 each GPU's qkv has 2 query heads and 1 kv head,
// (2 + 2·1)·64 = 256 rows of h = 1024. The gradients and the workload's parameters count the
// same layer.
TEST_CASE("gradient tensors and the workload agree on a layer's parameters with one kv head per TP rank") {
  stepsim::Scenario s = sp::test::small_scenario(8, 1, 1);
  s.model.kv_heads = 8;
  const auto tensors = sp::gradient_tensors(s.model, s.parallel);
  long long qkv = 0;
  long long layer = 0;
  for (const sp::GradTensor& t : tensors) {
    if (t.block != 1) continue;
    layer += t.elements;
    if (t.role == Role::qkv) qkv += t.elements;
  }
  CHECK(qkv == 256 * 1024 + 256);  // weight and bias (GeLU models have biases)
  CHECK(layer == stepsim::workload::build_work(s).layer.param_count);
}

TEST_CASE("FP8 gathers a Linear layer's weights at 1 byte and its norms and biases at 2") {
  const auto s = sp::test::small_scenario(1, 1, 1);  // hidden 1024, ffn 4096, GeLU: biases
  long long bytes = 0;
  for (const sp::GradTensor& t : sp::gradient_tensors(s.model, s.parallel)) {
    if (t.block == 1) bytes += t.elements * sp::gathered_bytes(t, stepsim::Precision::fp8);
  }
  // qkv 1024·3072, proj 1024², fc1 and fc2 1024·4096 at 1 byte; their biases 3072 + 1024 +
  // 4096 + 1024 and two LayerNorms' scale and shift, 4·1024, at 2.
  const long long weights = 1024LL * 3072 + 1024LL * 1024 + 2 * 1024LL * 4096;
  CHECK(bytes == weights + 2 * (3072 + 1024 + 4096 + 1024 + 4 * 1024));
  // The embedding stays BF16; MXFP8 and NVFP4 gather everything in BF16, fp32 training in fp32.
  const auto tensors = sp::gradient_tensors(s.model, s.parallel);
  CHECK(sp::gathered_bytes(tensors.front(), stepsim::Precision::fp8) == 2);
  const auto qkv = std::find_if(tensors.begin(), tensors.end(), [](const sp::GradTensor& t) { return t.quantized; });
  REQUIRE(qkv != tensors.end());
  CHECK(qkv->name == "L0 qkv.weight");
  // MXFP8 is gathered in BF16 through the gradient buffer, then quantized.
  CHECK(sp::gathered_bytes(*qkv, stepsim::Precision::mxfp8) == 2);
  CHECK(sp::gathered_bytes(*qkv, stepsim::Precision::nvfp4) == 2);
  CHECK(sp::gathered_bytes(*qkv, stepsim::Precision::fp32) == 4);
}

TEST_CASE("Megatron's bucket holds max(4e7, 1e6·dp) parameters") {
  CHECK(sp::megatron_bucket_elements(sp::test::small_scenario(1, 8, 1)) == 40'000'000);
  CHECK(sp::megatron_bucket_elements(sp::test::small_scenario(1, 64, 1)) == 64'000'000);
}

// Megatron-Core's DDP (training.framework megatron or nemo) makes its buckets as its distributed
// optimizer does: 4e7 parameters at dp 4, no small first bucket. The small GPT in reverse
// registration order: the head (32000 h) and final norm (2h), then layer 1's fc2 (4h² + h)
// and fc1 (4h² + 4h) reach 41,163,776; the rest (layer 1's attention and norms, layer 0, the
// embeddings) is the second. PyTorch's DDP keeps its three MiB-sized buckets.
TEST_CASE("Megatron-Core's DDP sizes its buckets in parameters, PyTorch's in MiB") {
  auto s = sp::test::small_scenario(1, 4, 1);
  s.training.framework = stepsim::Framework::megatron;
  const auto megatron = sp::bucket_layout(s);
  REQUIRE(megatron.buckets.size() == 2);
  CHECK(last_name(megatron, megatron.buckets[0]) == "L1 fc1.weight");
  CHECK(sp::bucket_elements(megatron, megatron.buckets[0]) == 41'163'776);
  CHECK(last_name(megatron, megatron.buckets[1]) == "embedding word.weight");
  s.data_parallel.bucket_parameters = 100'000'000;
  CHECK(sp::bucket_layout(s).buckets.size() == 1);
  s.training.framework = stepsim::Framework::pytorch;
  CHECK(sp::bucket_layout(s).buckets.size() == 3);
}
