// FSDP and HSDP programs: which AllGather each prefetch setting issues before which compute
// op, the rate limiter's host blocking, resharding, FSDP2's waits, and HSDP's groups.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/engine.hpp"
#include "parallelism/data_parallel.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/program_builder.hpp"
#include "stepsim/framework.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::BackwardPrefetch;
using stepsim::Bytes;
using stepsim::CollOp;
using stepsim::CommKind;
using stepsim::DpKind;
using stepsim::Precision;
using stepsim::Scenario;
using stepsim::engine::OpIndex;
using stepsim::engine::Program;

namespace {

// Two layers on 4 GPUs, one micro-batch, FSDP1 defaults.
Scenario fsdp(int dp = 4) {
  Scenario s = spt::small_scenario(1, dp, 1);
  s.data_parallel.kind = DpKind::fsdp;
  return s;
}

Program build(const Scenario& s) {
  const spt::FixedCosts costs;
  return sp::build_program(s, spt::small_work(s), costs);
}

// Position of the op named `name`; fails the test when it is missing.
long at(const Program& p, const std::string& name) {
  const long i = spt::find_op(p, name);
  INFO(name);
  REQUIRE(i >= 0);
  return i;
}

// Position of the first op whose name starts with `prefix`.
long starting(const Program& p, const std::string& prefix) {
  const auto names = spt::op_names(p);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i].rfind(prefix, 0) == 0) return static_cast<long>(i);
  }
  INFO(prefix);
  FAIL("no op starts with the prefix");
  return -1;
}

const stepsim::engine::Op& op(const Program& p, long i) { return p.ranks[0].ops()[static_cast<std::size_t>(i)]; }

bool waits_on(const Program& p, long i, long on) {
  const auto w = p.ranks[0].waits_of(static_cast<OpIndex>(i));
  return std::find(w.begin(), w.end(), static_cast<OpIndex>(on)) != w.end();
}

const stepsim::engine::CollectiveCall& call(const Program& p, long i) {
  return p.ranks[0].calls[static_cast<std::size_t>(op(p, i).call)];
}

// Compute far slower than the host: 100 µs a kernel against 1 µs to issue it, so the host
// runs ahead of the GPU; every collective 10 µs + size at 100 GB/s.
class SlowCompute final : public sp::Costs {
 public:
  stepsim::Time compute(const stepsim::workload::OpCost&) const override { return stepsim::Time::from_us(100.0); }
  sp::CollectiveCost collective(const stepsim::collectives::Request&) const override {
    return {stepsim::Time::from_us(10.0), stepsim::Bandwidth::gbytes_per_s(100.0), {1.0, 0.0}};
  }
  stepsim::Time kernel_launch() const override { return stepsim::Time::from_us(1.0); }
  double comm_slowdown() const override { return 0.0; }
};

// The first interval of rank 0 whose name starts with `prefix`.
const stepsim::Interval& interval(const stepsim::Timeline& t, const std::string& prefix) {
  for (const stepsim::Interval& iv : t.ranks[0].intervals) {
    if (t.names[iv.name].rfind(prefix, 0) == 0) return iv;
  }
  INFO(prefix);
  FAIL("no interval starts with the prefix");
  return t.ranks[0].intervals.front();
}

Scenario with_prefetch(BackwardPrefetch prefetch) {
  Scenario s = fsdp();
  s.data_parallel.backward_prefetch = prefetch;
  return s;
}

}  // namespace

TEST_CASE("FSDP gathers every unit before its forward and backward and reduce-scatters after") {
  const Program p = build(fsdp());
  CHECK(spt::collectives_of(p, CommKind::fsdp).size() == 3 + 2 + 3);  // root once, layers twice
  CHECK(spt::collectives_of(p, CommKind::dp).empty());
  const long gather = starting(p, "AllGather fsdp L0 forward");
  CHECK(call(p, gather).op == CollOp::allgather);
  CHECK(waits_on(p, at(p, "L0 input norm fwd"), gather));
  CHECK(at(p, "embedding fwd") > starting(p, "AllGather fsdp root forward"));
  const long rs = starting(p, "ReduceScatter fsdp L1");
  CHECK(waits_on(p, rs, at(p, "L1 input norm backward")));
  CHECK(rs < at(p, "L0 mlp residual backward"));
  CHECK(starting(p, "ReduceScatter fsdp root") > at(p, "embedding backward"));
  CHECK(waits_on(p, at(p, "optimizer step"), starting(p, "ReduceScatter fsdp root")));
}

TEST_CASE("gathers use the training precision and reductions grad_reduce_dtype") {
  Scenario s = fsdp();
  s.data_parallel.grad_reduce_dtype = Precision::fp32;
  const Program p = build(s);
  // Layer: qkv 3h², proj h², fc1 and fc2 4h² each, biases and two LayerNorms (h = 1024).
  const long long h = 1024;
  const long long layer = 12 * h * h + 3 * h + h + 4 * h + h + 4 * h;
  CHECK(call(p, starting(p, "AllGather fsdp L0 forward")).size == Bytes(layer * 2));
  CHECK(call(p, starting(p, "ReduceScatter fsdp L0")).size == Bytes(layer * 4));
}

TEST_CASE("FSDP1 gathers its flat parameter in BF16 under FP8 and FSDP2 each Linear weight at 1 byte") {
  // FSDP1's FlatParameter is all-gathered in its param_dtype; torchao's float8 all-gather works
  // only through FSDP2's fsdp_pre_all_gather hooks. Layer (h = 1024): the Linear weights
  // 12h², and 13h of biases and LayerNorm parameters that stay BF16 in any case.
  const long long h = 1024;
  const long long linear = 12 * h * h;
  const long long rest = 3 * h + h + 4 * h + h + 4 * h;
  Scenario s = fsdp();
  s.training.precision = Precision::fp8;
  const Program fsdp1 = build(s);
  CHECK(call(fsdp1, starting(fsdp1, "AllGather fsdp L0 forward")).size == Bytes((linear + rest) * 2));
  CHECK(s.data_parallel.flat_parameter());
  s.data_parallel.fsdp_version = 2;
  const Program fsdp2 = build(s);
  CHECK(call(fsdp2, starting(fsdp2, "AllGather fsdp L0 forward")).size == Bytes(linear + rest * 2));
  CHECK_FALSE(s.data_parallel.flat_parameter());
  // Megatron-FSDP, timed as FSDP1's in-place gathers, gathers FP8 weights (fp8_param_gather).
  s.data_parallel.fsdp_version = 1;
  s.data_parallel.fsdp_impl = stepsim::FsdpImpl::megatron;
  const Program megatron = build(s);
  CHECK(call(megatron, starting(megatron, "AllGather fsdp L0 forward")).size == Bytes(linear + rest * 2));
}

TEST_CASE("backward_prefetch pre issues the next unit's AllGather before the current backward") {
  const Program p = build(with_prefetch(BackwardPrefetch::pre));
  const long next = starting(p, "AllGather fsdp L0 backward");
  CHECK(next < at(p, "L1 mlp residual backward"));
  CHECK(next < starting(p, "ReduceScatter fsdp L1"));
  CHECK(p.ranks[0].waits_of(static_cast<OpIndex>(next)).empty());
  // The first layer of the backward is prefetched when the head's backward starts.
  CHECK(starting(p, "AllGather fsdp L1 backward") < at(p, "loss backward"));
}

TEST_CASE("backward_prefetch post issues it after the current backward, before its ReduceScatter") {
  const Program p = build(with_prefetch(BackwardPrefetch::post));
  const long next = starting(p, "AllGather fsdp L0 backward");
  const long last = at(p, "L1 input norm backward");
  CHECK(next > last);
  // FSDP1's _post_backward_hook reshards (recording L1's free event on the compute stream),
  // prefetches L0 on the unshard stream, which does not wait for the compute stream, and only
  // then issues L1's ReduceScatter. The AllGather's one GPU-side gate is the rate limiter: at
  // two in flight the host waits for the older of the two pending free events, L1's after its
  // forward (L0's was taken by L1's own backward AllGather), not for L1's backward.
  CHECK_FALSE(waits_on(p, next, last));
  CHECK(op(p, next).host_blocks);
  const auto waits = p.ranks[0].waits_of(static_cast<OpIndex>(next));
  CHECK(waits.size() == 1);
  CHECK(waits_on(p, next, at(p, "L1 mlp residual fwd")));
  CHECK(next < starting(p, "ReduceScatter fsdp L1"));
  // Nothing prefetches the first layer of the backward.
  CHECK(starting(p, "AllGather fsdp L1 backward") > at(p, "final norm backward"));
}

TEST_CASE("backward_prefetch post gathers the next unit while the current backward still runs") {
  // The host issues L1's backward kernels long before the GPU has run them, and its
  // post-backward hook issues L0's AllGather right after them on the unshard stream, which no
  // compute event gates: the gather runs beside L1's backward, not after its last kernel.
  const SlowCompute costs;
  const Scenario s = with_prefetch(BackwardPrefetch::post);
  const stepsim::Timeline t = stepsim::engine::run(sp::build_program(s, spt::small_work(s), costs));
  const stepsim::Interval& gather = interval(t, "AllGather fsdp L0 backward");
  const stepsim::Interval& last = interval(t, "L1 input norm backward");
  CHECK(gather.start < last.start);
  CHECK(gather.end < last.end);
  // It queues on the NCCL stream before L1's ReduceScatter, which waits for L1's last kernel.
  CHECK(gather.end <= interval(t, "ReduceScatter fsdp L1").start);
}

TEST_CASE("backward_prefetch none queues each AllGather behind the previous ReduceScatter") {
  const Program p = build(with_prefetch(BackwardPrefetch::none));
  const long gather = starting(p, "AllGather fsdp L0 backward");
  CHECK(gather > starting(p, "ReduceScatter fsdp L1"));
  CHECK(gather < at(p, "L0 mlp residual backward"));
  CHECK(waits_on(p, at(p, "L0 mlp residual backward"), gather));
}

TEST_CASE("forward_prefetch issues the next unit's AllGather before the current forward") {
  Scenario s = fsdp();
  const Program plain = build(s);
  CHECK(starting(plain, "AllGather fsdp L1 forward") > at(plain, "L0 mlp residual fwd"));
  s.data_parallel.forward_prefetch = true;
  const Program p = build(s);
  CHECK(starting(p, "AllGather fsdp L0 forward") < at(p, "embedding fwd"));
  CHECK(starting(p, "AllGather fsdp L1 forward") < at(p, "L0 input norm fwd"));
  CHECK(waits_on(p, at(p, "L1 input norm fwd"), starting(p, "AllGather fsdp L1 forward")));
}

// Megatron-FSDP's pre-forward hook gathers the next layer with the current one
// (megatron_fsdp.py, prefetch in forward-pass order), without forward_prefetch.
TEST_CASE("Megatron-FSDP gathers the next layer ahead in the forward") {
  Scenario s = fsdp();
  s.training.framework = stepsim::Framework::nemo;
  s.data_parallel.fsdp_impl = stepsim::FsdpImpl::megatron;
  const Program p = build(s);
  CHECK(starting(p, "AllGather fsdp L1 forward") < at(p, "L0 input norm fwd"));
  CHECK(waits_on(p, at(p, "L1 input norm fwd"), starting(p, "AllGather fsdp L1 forward")));
}

TEST_CASE("the AllGather limit blocks the host on the oldest unit still gathered") {
  Scenario s = fsdp();
  s.data_parallel.max_inflight_all_gathers = 1;
  const Program one = build(s);
  const long gather = starting(one, "AllGather fsdp L1 forward");
  CHECK(op(one, gather).host_blocks);
  CHECK(waits_on(one, gather, at(one, "L0 mlp residual fwd")));
  s.data_parallel.max_inflight_all_gathers = 2;
  const Program two = build(s);
  CHECK_FALSE(op(two, starting(two, "AllGather fsdp L1 forward")).host_blocks);
  // In the backward two layers' free events are pending: the prefetch waits for the older.
  const long prefetch = starting(two, "AllGather fsdp L1 backward");
  CHECK(op(two, prefetch).host_blocks);
  CHECK(waits_on(two, prefetch, at(two, "L0 mlp residual fwd")));
}

TEST_CASE("without reshard_after_forward the backward gathers nothing") {
  Scenario s = fsdp();
  s.data_parallel.reshard_after_forward = false;
  const Program p = build(s);
  CHECK(spt::collectives_of(p, CommKind::fsdp).size() == 3 + 3);
  CHECK(spt::find_op(p, "AllGather fsdp L0 backward, 24.1 MiB") < 0);
}

TEST_CASE("every micro-batch gathers and reduce-scatters again") {
  Scenario s = spt::small_scenario(1, 4, 3);
  s.data_parallel.kind = DpKind::fsdp;
  CHECK(spt::collectives_of(build(s), CommKind::fsdp).size() == 3 * 8);
}

TEST_CASE("FSDP2 prefetches one unit ahead on the GPU and serialises ReduceScatters") {
  Scenario s = fsdp();
  s.model.layers = 3;
  s.data_parallel.fsdp_version = 2;
  s.data_parallel.backward_prefetch = BackwardPrefetch::none;  // FSDP1 knobs do not apply
  const Program p = build(s);
  const long ahead = starting(p, "AllGather fsdp L2 forward");
  CHECK(ahead < at(p, "L1 input norm fwd"));
  CHECK(waits_on(p, ahead, at(p, "L0 mlp residual fwd")));  // two gathered buffers at most
  CHECK_FALSE(op(p, ahead).host_blocks);
  const long back = starting(p, "AllGather fsdp L0 backward");
  CHECK(back < at(p, "L1 mlp residual backward"));
  CHECK(waits_on(p, back, at(p, "L2 input norm backward")));
  // Before L0's ReduceScatter the compute stream waits for L1's: its copy into L0's
  // ReduceScatter buffer is the first compute op that waits.
  CHECK(waits_on(p, at(p, "FSDP L0 reduce-scatter copy-in"), starting(p, "ReduceScatter fsdp L1")));
}

TEST_CASE("a sharded optimizer step does 1/n of the work") {
  stepsim::workload::OpCost whole;
  whole.flops = 1e9;
  whole.bytes = Bytes(4000);
  const auto shard = sp::sharded_optimizer(whole, 4);
  CHECK(shard.flops == Approx(2.5e8));
  CHECK(shard.bytes == Bytes(1000));
}

TEST_CASE("HSDP shards inside a node and all-reduces the shard across nodes") {
  Scenario s = fsdp(16);
  s.data_parallel.kind = DpKind::hsdp;
  const Program p = build(s);
  REQUIRE(p.groups.size() == 2);
  CHECK(p.groups[0].kind == CommKind::fsdp);
  CHECK(p.groups[0].size == 8);
  CHECK(p.groups[0].ranks == "[0, 1, 2, 3, 4, 5, 6, 7]");
  CHECK(p.groups[1].kind == CommKind::dp);
  CHECK(p.groups[1].size == 2);
  CHECK(p.groups[1].ranks == "[0, 8]");
  const long rs = starting(p, "ReduceScatter fsdp L1");
  const long ar = starting(p, "AllReduce dp L1 shard");
  CHECK(waits_on(p, ar, rs));
  CHECK(call(p, ar).size == call(p, rs).size / 8);
  s.data_parallel.shard_group = 4;
  const Program four = build(s);
  CHECK(four.groups[0].size == 4);
  CHECK(four.groups[1].ranks == "[0, 4, 8, 12]");
}

// TP 8 fills each 8-GPU node, so a node holds one DP rank: HSDP's shard group is that one
// rank, which holds every unit whole; each unit's gradient is all-reduced whole across the
// nodes and nothing is gathered or reduce-scattered.
TEST_CASE("HSDP with one DP rank per node all-reduces whole units and gathers nothing") {
  Scenario s = fsdp(2);
  s.parallel.tp = 8;
  s.cluster.nodes = 2;
  s.data_parallel.kind = DpKind::hsdp;
  CHECK(stepsim::hsdp_shard_ranks(s) == 1);
  const Program p = build(s);
  CHECK(spt::collectives_of(p, CommKind::fsdp).empty());
  REQUIRE(std::count_if(p.groups.begin(), p.groups.end(), [](const auto& g) { return g.kind == CommKind::dp; }) == 1);
  const long ar = starting(p, "AllReduce dp L1 shard");
  const long root = starting(p, "AllReduce dp root shard");
  CHECK(call(p, ar).size > call(p, root).size / 1000);      // a whole layer, not a shard of one
  CHECK(spt::collectives_of(p, CommKind::dp).size() == 3);  // root and two layers
}

// FSDP2 keeps each parameter a tensor of its own: once a unit's AllGather has ended, the
// compute stream copies the parameters out of the gathered buffer before the unit runs
// (FSDPParamGroup.wait_for_unshard, foreach_all_gather_copy_out). A layer of the small GPT
// holds 2·1,024 + 1,024·3,072 + 3,072 + 1,024² + 1,024 + 2·1,024 + 1,024·4,096 + 4,096 +
// 4,096·1,024 + 1,024 = 12,596,224 parameters, gathered in BF16 and read and written once.
TEST_CASE("FSDP2 copies a unit's parameters out of its AllGather before the unit runs") {
  Scenario s = fsdp();
  s.data_parallel.fsdp_version = 2;
  const Program p = build(s);
  const long gather = starting(p, "AllGather fsdp L1 forward");
  const long copy = at(p, "FSDP L1 all-gather copy-out");
  CHECK(waits_on(p, copy, gather));
  CHECK(copy + 1 == starting(p, "L1 "));  // right before the layer's first op
  CHECK(p.work.at(op(p, copy).name).bytes == Bytes(2LL * 2 * 12'596'224));
  // Resharded after the forward, gathered again, and copied out again, for the backward.
  const long again = spt::find_op(p, "FSDP L1 all-gather copy-out", static_cast<std::size_t>(copy + 1));
  REQUIRE(again > copy);
  CHECK(waits_on(p, again, starting(p, "AllGather fsdp L1 backward")));
  // FSDP1's parameters are views of its gathered flat parameter: no copy.
  const auto names = spt::op_names(build(fsdp()));
  CHECK(std::none_of(names.begin(), names.end(), [](const std::string& n) { return n.rfind("FSDP ", 0) == 0; }));
}

// Before a unit's ReduceScatter FSDP2's compute stream copies its gradients into one buffer in
// the reduction's precision (foreach_reduce, foreach_reduce_scatter_copy_in), once it has
// waited for the previous ReduceScatter: BF16 gradients read (2 bytes) and FP32 written (4).
TEST_CASE("FSDP2 copies a unit's gradients into its ReduceScatter's buffer on the compute stream") {
  Scenario s = fsdp();
  s.data_parallel.fsdp_version = 2;
  s.data_parallel.grad_reduce_dtype = Precision::fp32;
  const Program p = build(s);
  const long l1 = at(p, "FSDP L1 reduce-scatter copy-in");
  const long rs1 = starting(p, "ReduceScatter fsdp L1,");
  CHECK(waits_on(p, rs1, l1));
  CHECK(p.work.at(op(p, l1).name).bytes == Bytes(6LL * 12'596'224));
  // The next unit's copy waits for this ReduceScatter, as FSDP2's post-backward makes it.
  CHECK(waits_on(p, at(p, "FSDP L0 reduce-scatter copy-in"), rs1));
  const auto names = spt::op_names(build(fsdp()));
  CHECK(std::none_of(names.begin(), names.end(),
                     [](const std::string& n) { return n.find("reduce-scatter copy-in") != std::string::npos; }));
}

// A mixture of experts under FSDP2, as torchtitan wraps it (apply_fsdp: fully_shard on each
// block's moe.experts over the dp_shard_mod_ep mesh, then on the block): two MoE layers of 8
// experts (top 2, expert FFN 4096, GELU, h = 1024) at EP 4 over DP 8, so each GPU holds 2
// experts, sharded over an expert-dp group of 8 / 4 = 2 ranks, and the rest of the layer over
// the 8 FSDP ranks.
//   experts: 2 · (1024·4096 + 4096·1024) = 16,777,216 parameters (no expert biases);
//   the rest: qkv 3h² + 3h, projection h² + h, two LayerNorms 4h, router 8h = 4,210,688.
TEST_CASE("FSDP of a mixture of experts gathers and reduces the routed experts over the expert-dp group") {
  Scenario s = spt::small_scenario(1, 8, 1);
  s.model.moe = {8, 2, 4096};
  s.parallel.ep = 4;
  s.data_parallel.kind = DpKind::fsdp;
  s.data_parallel.fsdp_version = 2;
  s.data_parallel.grad_reduce_dtype = Precision::fp32;
  const spt::FixedCosts costs;
  const Program p = sp::build_program(s, stepsim::workload::build_work(s), costs);
  constexpr long long experts = 16'777'216;
  constexpr long long rest = 4'210'688;
  const long dense = starting(p, "AllGather fsdp L0 forward");
  const long expert = starting(p, "AllGather fsdp experts L0 forward");
  CHECK(call(p, dense).size == Bytes(rest * 2));
  CHECK(call(p, expert).size == Bytes(experts * 2));
  CHECK(p.groups[static_cast<std::size_t>(call(p, dense).group)].size == 8);
  CHECK(p.groups[static_cast<std::size_t>(call(p, expert).group)].size == 2);
  // One all-gather stream for every FSDP state: the experts' AllGather follows the layer's.
  CHECK(waits_on(p, expert, dense));
  // Each state copies its parameters out of its own buffer before the layer runs.
  const long copy = at(p, "FSDP L0 experts all-gather copy-out");
  CHECK(waits_on(p, copy, expert));
  CHECK(p.work.at(op(p, copy).name).bytes == Bytes(2 * experts * 2));
  CHECK(copy < starting(p, "L0 "));
  // Reduced in fp32 over their groups.
  const long expert_rs = starting(p, "ReduceScatter fsdp experts L0,");
  const long dense_rs = starting(p, "ReduceScatter fsdp L0,");
  CHECK(call(p, expert_rs).size == Bytes(experts * 4));
  CHECK(call(p, dense_rs).size == Bytes(rest * 4));
  CHECK(p.groups[static_cast<std::size_t>(call(p, expert_rs).group)].size == 2);
  // The experts' state reduces as soon as their backward has every gradient (after fc1's
  // weight gradient), while the router's and attention's backward still run; the rest of the
  // layer after its last op, once the experts' ReduceScatter is done (FSDP2's one
  // reduce-scatter stream).
  const long expert_copy = at(p, "FSDP L0 experts reduce-scatter copy-in");
  CHECK(waits_on(p, expert_rs, expert_copy));
  CHECK(expert_copy > at(p, "L0 expert fc1 wgrad"));
  CHECK(expert_rs < at(p, "L0 router dgrad"));
  CHECK(expert_rs < at(p, "L0 qkv dgrad"));
  CHECK(dense_rs > at(p, "L0 input layernorm backward"));
  CHECK(waits_on(p, at(p, "FSDP L0 reduce-scatter copy-in"), expert_rs));
  // Reported as FSDP traffic, none as the distributed optimizer's.
  CHECK(spt::collectives_of(p, CommKind::dp).empty());
}

// Adam runs on 1/8 of the parameters outside the routed experts and 1/2 of theirs. The
// optimizer op stands for the whole model; its shard is the parameter-weighted mean.
TEST_CASE("FSDP's optimizer step of a mixture of experts covers 1/dp of the rest and 1/edp of the experts") {
  Scenario s = spt::small_scenario(1, 8, 1);
  s.model.moe = {8, 2, 4096};
  s.parallel.ep = 4;
  s.data_parallel.kind = DpKind::fsdp;
  const spt::FixedCosts costs;
  const auto work = stepsim::workload::build_work(s);
  const Program p = sp::build_program(s, work, costs);
  // Two layers as above; word embedding 32000·1024 and the learned position table 2048·1024,
  // final LayerNorm 2h, head 32000·1024: 109,611,008 parameters in all.
  const double experts = 2.0 * 16'777'216;
  const double rest = 2.0 * 4'210'688 + 2.0 * 32'768'000 + 2048 * 1024 + 2048;
  REQUIRE(work.optimizer_params == 109'611'008);
  const double share = (rest / 8 + experts / 2) / (rest + experts);
  CHECK(p.work.at(op(p, at(p, "optimizer step")).name).flops == Approx(work.optimizer.flops * share));
}

// torchtitan's HSDP of a mixture of experts: 16 DP ranks on two 8-GPU nodes, shard groups of
// one node's 8, EP 4. The routed experts are sharded over the expert-dp ranks inside a shard
// group, 16 / 4 / 2 replicas = 2 of them (rank 0 and rank 4, which hold the same experts), and
// their gradient shard is all-reduced across the replicas with the rest's: ranks 0 and 8. Each
// rank holds 2 experts of 2 · 1,024 · 4,096 weights a layer, 16,777,216 parameters, and
// 4,210,688 others (as above): the experts' shard reduced in fp32 is 16,777,216 · 4 / 2 =
// 33,554,432 bytes, the rest's 4,210,688 · 4 / 8 = 2,105,344.
TEST_CASE("HSDP of a mixture of experts shards the experts inside a shard group and all-reduces them across") {
  Scenario s = spt::small_scenario(1, 16, 1);
  s.model.moe = {8, 2, 4096};
  s.parallel.ep = 4;
  s.training.framework = stepsim::Framework::torchtitan;
  s.data_parallel.kind = DpKind::hsdp;
  s.data_parallel.fsdp_version = 2;
  s.data_parallel.grad_reduce_dtype = Precision::fp32;
  REQUIRE(stepsim::hsdp_shard_ranks(s) == 8);
  CHECK(sp::expert_shard_ranks(s) == 2);
  CHECK(sp::expert_shard_group(s, 13) == sp::RankGroup{9, 4, 2});  // [9, 13] in the second node
  const spt::FixedCosts costs;
  const auto work = stepsim::workload::build_work(s);
  const Program p = sp::build_program(s, work, costs);
  constexpr long long experts = 16'777'216;
  constexpr long long rest = 4'210'688;
  const auto group = [&](long i) { return p.groups[static_cast<std::size_t>(call(p, i).group)]; };
  const long gather = starting(p, "AllGather fsdp experts L0 forward");
  CHECK(call(p, gather).size == Bytes(experts * 2));
  CHECK(group(gather).ranks == "[0, 4]");
  CHECK(group(starting(p, "AllGather fsdp L0 forward")).ranks == "[0, 1, 2, 3, 4, 5, 6, 7]");
  const long expert_rs = starting(p, "ReduceScatter fsdp experts L0,");
  const long expert_ar = starting(p, "AllReduce dp L0 experts shard");
  CHECK(call(p, expert_rs).size == Bytes(experts * 4));
  CHECK(call(p, expert_ar).size == Bytes(33'554'432));
  CHECK(group(expert_ar).ranks == "[0, 8]");
  CHECK(waits_on(p, expert_ar, expert_rs));
  // Both from the experts' own post-backward hook, while the router's backward still runs.
  CHECK(expert_ar < at(p, "L0 router dgrad"));
  const long dense_ar = starting(p, "AllReduce dp L0 shard");
  CHECK(call(p, dense_ar).size == Bytes(2'105'344));
  CHECK(group(dense_ar).ranks == "[0, 8]");
  // Adam over 1/8 of the rest and 1/2 of the experts (the model of the test above).
  const double all_experts = 2.0 * experts;
  const double all_rest = 2.0 * rest + 2.0 * 32'768'000 + 2048 * 1024 + 2048;
  const double share = (all_rest / 8 + all_experts / 2) / (all_rest + all_experts);
  CHECK(p.work.at(op(p, at(p, "optimizer step")).name).flops == Approx(work.optimizer.flops * share));
  // The memory model shards the experts' states as the program does: Adam's two fp32 moments.
  const auto memory = sp::estimate_memory(s, work).stages.front();
  CHECK(memory.optimizer == Bytes(static_cast<long long>(8 * (all_rest / 8 + all_experts / 2))));
}

TEST_CASE("under DeepSpeed the FSDP notes say that ZeRO-3 is simulated with FSDP's layer units") {
  Scenario s = fsdp();
  const std::string caveat = "this stands for DeepSpeed's ZeRO-3 as FSDP runs it";
  CHECK(sp::fsdp_notes(s).find(caveat) == std::string::npos);
  s.training.framework = stepsim::Framework::deepspeed;
  const std::string note = sp::fsdp_notes(s);
  CHECK(note.find(caveat) != std::string::npos);
  CHECK(note.find("stage3_prefetch_bucket_size") != std::string::npos);
  CHECK(note.find("reduce_bucket_size") != std::string::npos);
}

namespace {

// Every collective half over NVLink, half over the NIC, so that its calls load both.
class SplitCosts final : public stepsim::parallelism::Costs {
 public:
  stepsim::Time compute(const stepsim::workload::OpCost&) const override { return stepsim::Time::from_us(1.0); }
  sp::CollectiveCost collective(const stepsim::collectives::Request&) const override {
    return {stepsim::Time::from_us(10.0), stepsim::Bandwidth::gbytes_per_s(100.0), {0.5, 0.5}};
  }
  stepsim::Time kernel_launch() const override { return stepsim::Time::from_us(5.0); }
  double comm_slowdown() const override { return 0.1; }
};

bool loads(const Program& p, const stepsim::engine::CollectiveCall& c, const std::string& resource) {
  return std::ranges::any_of(c.uses, [&](const auto& u) { return p.resources[u.resource].name == resource; });
}

}  // namespace

// TP 8 x FSDP 28 on 56 trays of 4 GPUs in NVLink domains of 20: eleven domains and 4 GPUs of a
// twelfth. TP groups of 8 straddle domains at 20, 60, ..., 220, 4 members on each side; the
// first of them, ranks 16 to 23, is how representative mode costs its rank's TP communicator.
// DP groups stride 8: those starting at 4 to 7 end at 220 to 223, alone on the twelfth domain
// (costed as 28 domains of 1), the rank's DP communicator's cost; those starting at 0 to 3
// hold 2 or 3 members in each of domains 0 to 10 (costed as 14 domains of 2). Ranks 20 to 23
// of the TP group are in the former, 16 to 19 in the latter: rank 16 (tray 4, GPU 0, NIC 0)
// carries its own DP group's collectives, [0, 8, ..., 216], which the rank's TP calls share
// its NIC with. So the rank's TP calls load tray 4's NIC 0 beside its own (tray 0's), and each
// of its FSDP calls is made again, with the same waits, on a stand-in group costed as 14
// domains of 2 over rank 16's links only.
TEST_CASE("representative mode loads the NIC of a straddling TP group's member whose DP group is placed otherwise") {
  Scenario s = spt::small_scenario(8, 28, 1);
  s.cluster.gpus_per_node = 4;
  s.cluster.nodes = 56;
  s.cluster.nvlink_domain = 20;
  s.cluster.inter_node.nics_per_node = 4;
  s.data_parallel.kind = DpKind::fsdp;
  const SplitCosts costs;
  const Program p = sp::build_program(s, spt::small_work(s), costs);
  std::vector<std::size_t> stand_ins;
  for (std::size_t g = 0; g < p.groups.size(); ++g)
    if (p.groups[g].stand_in) stand_ins.push_back(g);
  REQUIRE(stand_ins.size() == 1);
  const stepsim::engine::Group& stand_in = p.groups[stand_ins[0]];
  CHECK(stand_in.kind == CommKind::fsdp);
  CHECK(stand_in.ranks == "[0, 8, 16, 24, 32, 40, 48, ..., 216]");
  CHECK(stand_in.nodes == 14);
  CHECK(stand_in.ranks_per_node == 2);
  const std::vector<OpIndex> tp = spt::collectives_of(p, CommKind::tp);
  REQUIRE(!tp.empty());
  for (const OpIndex o : tp) {
    const auto& c = call(p, o);
    CHECK(loads(p, c, "node 0 nic 0 tx"));
    CHECK(loads(p, c, "node 4 nic 0 tx"));
    CHECK(loads(p, c, "node 4 nic 0 rx"));
  }
  long made = 0, again = 0;
  const auto& ops = p.ranks[0].ops();
  for (std::size_t o = 0; o < ops.size(); ++o) {
    if (ops[o].kind != stepsim::engine::OpKind::collective) continue;
    const auto& c = p.ranks[0].calls[static_cast<std::size_t>(ops[o].call)];
    if (c.kind != CommKind::fsdp) continue;
    if (c.group != static_cast<std::int32_t>(stand_ins[0])) {
      ++made;
      CHECK(p.groups[static_cast<std::size_t>(c.group)].nodes == 28);
      continue;
    }
    ++again;
    CHECK(loads(p, c, "node 4 nic 0 tx"));
    CHECK(!loads(p, c, "node 0 nic 0 tx"));
    CHECK(!c.slows_compute);
    const auto& before = p.ranks[0].calls[static_cast<std::size_t>(ops[o - 1].call)];
    CHECK(before.kind == CommKind::fsdp);
    CHECK(p.ranks[0].waits_of(static_cast<OpIndex>(o)).size() ==
          p.ranks[0].waits_of(static_cast<OpIndex>(o - 1)).size());
  }
  CHECK(made > 0);
  CHECK(again == made);
  // All-ranks mode simulates every member as it is placed: no stand-in.
  s.simulation.ranks = stepsim::RankMode::all;
  const Program all = sp::build_program(s, spt::small_work(s), costs);
  CHECK(std::ranges::none_of(all.groups, [](const stepsim::engine::Group& g) { return g.stand_in; }));
}
