// The structure of the step program: TP collectives per layer, DP buckets in the last
// micro-batch, the optimizer's waits, and representative against all-ranks mode.
#include <algorithm>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "parallelism/program_builder.hpp"
#include "workload/work.hpp"
#include "support.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::Bytes;
using stepsim::CollOp;
using stepsim::CommKind;
using stepsim::engine::OpIndex;
using stepsim::engine::Program;

namespace {

Program program_of(const stepsim::Scenario& s) {
  const spt::FixedCosts costs;
  return sp::build_program(s, spt::small_work(s), costs);
}

// Collectives of `kind` named with `prefix` ("L0 "), as (op, size) pairs in issue order.
std::vector<CollOp> ops_named(const Program& p, CommKind kind, const std::string& prefix, const std::string& suffix) {
  std::vector<CollOp> out;
  for (OpIndex i : spt::collectives_of(p, kind)) {
    const std::string& name = p.names[p.ranks[0].ops()[i].name];
    if (name.find(prefix) == std::string::npos || name.find(suffix) == std::string::npos) continue;
    out.push_back(p.ranks[0].calls[static_cast<std::size_t>(p.ranks[0].ops()[i].call)].op);
  }
  return out;
}

bool waits_for(const Program& p, long op, OpIndex on) {
  const auto w = p.ranks[0].waits_of(static_cast<OpIndex>(op));
  return std::find(w.begin(), w.end(), on) != w.end();
}

}  // namespace

TEST_CASE("without sequence parallelism a layer has two TP AllReduces each way") {
  const Program p = program_of(spt::small_scenario(2, 1, 1));
  using V = std::vector<CollOp>;
  CHECK(ops_named(p, CommKind::tp, "tp L0 ", "fwd") == V{CollOp::allreduce, CollOp::allreduce});
  CHECK(ops_named(p, CommKind::tp, "tp L0 ", "dgrad,") == V{CollOp::allreduce, CollOp::allreduce});
  CHECK(ops_named(p, CommKind::tp, "tp L0 ", "") == V(4, CollOp::allreduce));
  for (OpIndex i : spt::collectives_of(p, CommKind::tp)) {
    const auto& call = p.ranks[0].calls[static_cast<std::size_t>(p.ranks[0].ops()[i].call)];
    const std::string& name = p.names[p.ranks[0].ops()[i].name];
    const bool loss = name.find("loss") != std::string::npos;
    const bool pair = name.find("loss sum") != std::string::npos;  // the fused cross entropy's second
    CHECK(call.size == (loss ? Bytes(2048 * 4 * (pair ? 2 : 1)) : Bytes(2048 * 1024 * 2)));
  }
}

TEST_CASE("forward TP AllReduces are exposed, backward ones overlap the weight gradient") {
  const Program p = program_of(spt::small_scenario(2, 1, 1));
  const long fc2 = spt::find_op(p, "L1 fc2 fwd");
  const long ar = spt::find_op(p, "AllReduce tp L1 fc2 fwd, 4.0 MiB");
  REQUIRE(ar == fc2 + 1);
  CHECK(waits_for(p, ar, static_cast<OpIndex>(fc2)));
  CHECK(waits_for(p, spt::find_op(p, "L1 mlp residual fwd"), static_cast<OpIndex>(ar)));
  const long dgrad = spt::find_op(p, "L1 fc1 dgrad");
  const long bar = spt::find_op(p, "AllReduce tp L1 fc1 dgrad, 4.0 MiB");
  REQUIRE(bar == dgrad + 1);
  CHECK(p.ranks[0].waits_of(static_cast<OpIndex>(bar + 1)).empty());  // fc1 wgrad
  CHECK(waits_for(p, spt::find_op(p, "L1 post norm backward"), static_cast<OpIndex>(bar)));
}

TEST_CASE("with sequence parallelism a layer all-gathers and reduce-scatters") {
  auto s = spt::small_scenario(4, 1, 1);
  s.parallel.sequence_parallel = true;
  const Program p = program_of(s);
  using V = std::vector<CollOp>;
  const auto AG = CollOp::allgather;
  const auto RS = CollOp::reducescatter;
  CHECK(ops_named(p, CommKind::tp, "tp L0 ", "fwd") == V{AG, RS, AG, RS});
  CHECK(ops_named(p, CommKind::tp, "tp L0 ", "") == V{AG, RS, AG, RS, AG, AG, RS, AG, AG, RS});
  const long regather = spt::find_op(p, "AllGather tp L0 fc1 wgrad input, 4.0 MiB");
  REQUIRE(regather >= 0);
  CHECK(p.ranks[0].waits_of(static_cast<OpIndex>(regather)).empty());
  CHECK(waits_for(p, spt::find_op(p, "L0 fc1 wgrad"), static_cast<OpIndex>(regather)));
  CHECK_FALSE(waits_for(p, spt::find_op(p, "L0 fc1 dgrad"), static_cast<OpIndex>(regather)));
}

namespace {

// Layer 0's TP collectives by the collective and what it is for ("AllGather qkv fwd"): bytes.
std::map<std::string, long long> tp_sizes(const stepsim::Scenario& s) {
  const spt::FixedCosts costs;
  const Program p = sp::build_program(s, stepsim::workload::build_work(s), costs);
  std::map<std::string, long long> out;
  for (OpIndex i : spt::collectives_of(p, CommKind::tp)) {
    const std::string& name = p.names[p.ranks[0].ops()[i].name];
    const auto at = name.find(" L0 ");
    if (at == std::string::npos) continue;
    const std::string what = name.substr(0, name.find(' ')) + " " + name.substr(at + 4, name.rfind(',') - at - 4);
    out[what] = p.ranks[0].calls[static_cast<std::size_t>(p.ranks[0].ops()[i].call)].size.count();
  }
  return out;
}

}  // namespace

// Transformer Engine gathers a low-precision GEMM's operand quantized: the column-parallel
// input forward and again for the weight gradient (gather_along_first_dim with the input
// quantizer), and the row-parallel GEMM's output gradient (with the gradient's quantizer);
// what is reduce-scattered stays BF16. torchao's Float8 tensor parallelism quantizes the
// column-parallel input before its gather (PrepareFloat8ModuleInput) and nothing else. The
// small model's hidden state is 2,048 tokens × 1,024 = 2 Mi elements, 4 MiB in BF16.
TEST_CASE("under FP8 the TP all-gathers move the quantized operand, the reduce-scatters BF16") {
  auto s = spt::small_scenario(4, 1, 1);
  s.parallel.sequence_parallel = true;
  s.model.mlp = stepsim::MlpKind::gelu;
  s.training.framework = stepsim::Framework::megatron;
  constexpr long long kElements = 2048LL * 1024;
  const auto bf16 = tp_sizes(s);
  CHECK(bf16.at("AllGather qkv fwd") == 2 * kElements);
  s.training.precision = stepsim::Precision::fp8;
  auto fp8 = tp_sizes(s);
  CHECK(fp8.size() == bf16.size());
  for (const char* gathered : {"AllGather qkv fwd", "AllGather fc1 fwd", "AllGather qkv wgrad input",
                               "AllGather fc1 wgrad input", "AllGather fc2 output grad",
                               "AllGather attention projection output grad"}) {
    INFO(gathered);
    CHECK(fp8.at(gathered) == kElements);  // one byte an element
  }
  for (const char* reduced : {"ReduceScatter attention projection fwd", "ReduceScatter fc2 fwd",
                              "ReduceScatter fc1 dgrad", "ReduceScatter qkv dgrad"}) {
    INFO(reduced);
    CHECK(fp8.at(reduced) == 2 * kElements);
  }
  s.training.precision = stepsim::Precision::mxfp8;
  CHECK(tp_sizes(s).at("AllGather fc1 fwd") == kElements + kElements / 32);  // E8M0 scale per 32
  s.training.precision = stepsim::Precision::nvfp4;
  CHECK(tp_sizes(s).at("AllGather fc1 fwd") == kElements / 2 + kElements / 16);  // FP8 scale per 16
  s.training.precision = stepsim::Precision::fp8;
  s.training.framework = stepsim::Framework::torchtitan;
  fp8 = tp_sizes(s);
  CHECK(fp8.at("AllGather fc1 fwd") == kElements);
  CHECK(fp8.at("AllGather fc2 output grad") == 2 * kElements);
}

TEST_CASE("tp 1 issues no TP collectives") {
  const Program p = program_of(spt::small_scenario(1, 2, 1));
  CHECK(spt::collectives_of(p, CommKind::tp).empty());
  CHECK(p.ranks[0].streams == std::vector<std::string>{"compute", "dp"});
}

TEST_CASE("DP AllReduces come only in the last micro-batch") {
  const Program p = program_of(spt::small_scenario(2, 4, 4));
  const auto dp = spt::collectives_of(p, CommKind::dp);
  REQUIRE(dp.size() == 3);
  long last_forward = -1;
  for (long i = 0; (i = spt::find_op(p, "loss fwd", static_cast<std::size_t>(i))) >= 0; ++i) {
    last_forward = i;
  }
  CHECK(dp.front() > last_forward);
  CHECK(p.names[p.ranks[0].ops()[dp[0]].name] == "AllReduce dp bucket 0, 31.2 MiB");
}

TEST_CASE("DP buckets overlap the backward and the optimizer waits for all of them") {
  const Program p = program_of(spt::small_scenario(1, 4, 1));
  const auto dp = spt::collectives_of(p, CommKind::dp);
  const long embedding = spt::find_op(p, "embedding backward");
  CHECK(static_cast<long>(dp[0]) < embedding);
  const auto& optimizer = p.ranks[0].ops().back();
  CHECK(p.names[optimizer.name] == "optimizer step");
  CHECK(optimizer.phase == stepsim::Phase::optimizer);
  for (OpIndex d : dp) CHECK(waits_for(p, static_cast<long>(p.ranks[0].ops().size() - 1), d));
}

TEST_CASE("without overlap every DP AllReduce comes after the backward") {
  auto s = spt::small_scenario(1, 4, 2);
  s.data_parallel.overlap_grad_reduce = false;
  const Program p = program_of(s);
  const auto dp = spt::collectives_of(p, CommKind::dp);
  const long embedding = spt::find_op(p, "embedding backward", static_cast<std::size_t>(dp.front()) - 1);
  REQUIRE(embedding >= 0);
  for (OpIndex d : dp) CHECK(waits_for(p, static_cast<long>(d), static_cast<OpIndex>(embedding)));
  CHECK(static_cast<long>(dp.front()) == embedding + 1);
}

TEST_CASE("all-ranks mode repeats the representative rank's program on TP 2 x DP 2") {
  auto s = spt::small_scenario(2, 2, 2);
  const Program one = program_of(s);
  s.simulation.ranks = stepsim::RankMode::all;
  const Program all = program_of(s);
  REQUIRE(one.ranks.size() == 1);
  CHECK(one.ranks[0].multiplicity == 4);
  REQUIRE(all.ranks.size() == 4);
  CHECK(all.groups.size() == 4);
  for (const auto& g : all.groups) CHECK(g.members.size() == 2);
  for (const auto& rank : all.ranks) {
    REQUIRE(rank.ops().size() == one.ranks[0].ops().size());
    for (std::size_t i = 0; i < rank.ops().size(); ++i) {
      CHECK(all.names[rank.ops()[i].name] == one.names[one.ranks[0].ops()[i].name]);
      const auto w = rank.waits_of(static_cast<OpIndex>(i));
      const auto w_one = one.ranks[0].waits_of(static_cast<OpIndex>(i));
      CHECK(std::equal(w.begin(), w.end(), w_one.begin(), w_one.end()));
      CHECK(rank.ops()[i].duration == one.ranks[0].ops()[i].duration);
    }
  }
}

TEST_CASE("groups carry the real size and the ranks of rank 0's communicator") {
  const Program p = program_of(spt::small_scenario(2, 4, 1));
  REQUIRE(p.groups.size() == 2);
  CHECK(p.groups[0].name == "tp");
  CHECK(p.groups[0].size == 2);
  CHECK(p.groups[1].ranks == "[0, 2, 4, 6]");
  CHECK(p.groups[1].members == std::vector<int>{0});
  // Rank 0's NVLink port and its NIC, each a resource per direction.
  std::vector<std::string> resources;
  for (const auto& r : p.resources) resources.push_back(r.name);
  std::sort(resources.begin(), resources.end());
  CHECK(resources == std::vector<std::string>{"node 0 gpu 0 nvlink rx", "node 0 gpu 0 nvlink tx", "node 0 nic 0 rx",
                                              "node 0 nic 0 tx"});
}

// Oversubscription narrows the leaf uplinks, a resource of their own; the NIC resources the
// flows share stay at the line rate, or the fabric would be counted twice wherever flows
// contend for it.
TEST_CASE("a GPU's NIC resource is its share of the line rate whatever the oversubscription") {
  auto s = spt::small_scenario(1, 16, 1);
  s.cluster.inter_node.topology = stepsim::InterTopology::fat_tree;
  s.cluster.inter_node.nics_per_node = 8;
  s.cluster.inter_node.oversubscription = 2;
  const Program p = program_of(s);
  for (const char* name : {"node 0 nic 0 tx", "node 0 nic 0 rx"}) {
    const auto nic =
        std::find_if(p.resources.begin(), p.resources.end(), [&](const auto& r) { return r.name == name; });
    REQUIRE(nic != p.resources.end());
    CHECK(nic->capacity.gbytes_per_s() == Approx(s.cluster.inter_node.nic_bandwidth.gbytes_per_s()));
  }
}

// PyTorch's DTensor sequence parallelism (torchtitan's plan, parallelize_module) gathers a
// column-parallel input once (PrepareModuleInput, ColwiseParallel(input_layouts=Shard(1))) and
// F.linear saves the gathered tensor for the weight gradient; the backward of that
// redistribute is the gradient's ReduceScatter alone. So a layer's backward has 4 collectives,
// not Megatron-Core's 6, and the LM head gathers nothing again.
TEST_CASE("under DTensor sequence parallelism the backward gathers no input again") {
  using V = std::vector<CollOp>;
  const auto AG = CollOp::allgather;
  const auto RS = CollOp::reducescatter;
  for (const auto f :
       {stepsim::Framework::torchtitan, stepsim::Framework::torchtitan_compile, stepsim::Framework::pytorch}) {
    INFO(static_cast<int>(f));
    auto s = spt::small_scenario(4, 1, 1);
    s.parallel.sequence_parallel = true;
    s.training.framework = f;
    const Program p = program_of(s);
    CHECK(ops_named(p, CommKind::tp, "tp L0 ", "") == V{AG, RS, AG, RS, AG, RS, AG, RS});
    CHECK(ops_named(p, CommKind::tp, "", "wgrad input").empty());
  }
}

// Under sequence parallelism the vocab-parallel embedding ends with a ReduceScatter to the
// rank's s/t rows (Megatron's reduce_scatter_to_sequence_parallel_region, torchtitan's
// RowwiseParallel(output_layouts=Shard(1))), whose backward all-gathers the gradient back to
// every token (_ReduceScatterToSequenceParallelRegion.backward: _gather_along_first_dim) before
// the lookup's backward: b·s·h = 2,048 × 1,024 BF16, 4 MiB. Without it the AllReduce's
// backward is the identity.
TEST_CASE("under sequence parallelism the embedding's gradient is gathered back to every token") {
  auto s = spt::small_scenario(4, 1, 1);
  s.parallel.sequence_parallel = true;
  const Program p = program_of(s);
  const long gather = spt::find_op(p, "AllGather tp embedding backward grad, 4.0 MiB");
  REQUIRE(gather >= 0);
  CHECK(waits_for(p, spt::find_op(p, "embedding backward"), static_cast<OpIndex>(gather)));
  s.parallel.sequence_parallel = false;
  CHECK(ops_named(program_of(s), CommKind::tp, "embedding backward", "").empty());
}

namespace {

// The loss's TP collectives, as (op, bytes) in issue order.
std::vector<std::pair<CollOp, long long>> loss_collectives(stepsim::CrossEntropy ce) {
  auto s = spt::small_scenario(4, 1, 1);
  s.training.cross_entropy = ce;
  const Program p = program_of(s);
  std::vector<std::pair<CollOp, long long>> out;
  for (OpIndex i : spt::collectives_of(p, CommKind::tp)) {
    if (p.names[p.ranks[0].ops()[i].name].find("tp loss") == std::string::npos) continue;
    const auto& call = p.ranks[0].calls[static_cast<std::size_t>(p.ranks[0].ops()[i].call)];
    out.emplace_back(call.op, call.size.count());
  }
  return out;
}

}  // namespace

// 2,048 tokens, one fp32 each: 8 KiB. Megatron's VocabParallelCrossEntropy (unfused) and
// DTensor's loss_parallel (eager, compiled) all-reduce the max, the predicted logit and the sum
// of exponentials; the fused one (fused_vocab_parallel_cross_entropy) the max, then the other
// two concatenated ("batched to invoke a single AllReduce call"); Transformer Engine's
// parallel_cross_entropy all-gathers each rank's max, sum and target logit (3 fp32 a token) once.
TEST_CASE("the cross entropy's TP collectives are those its implementation makes") {
  using V = std::vector<std::pair<CollOp, long long>>;
  const auto AR = CollOp::allreduce;
  for (const auto ce : {stepsim::CrossEntropy::unfused, stepsim::CrossEntropy::eager, stepsim::CrossEntropy::compiled})
    CHECK(loss_collectives(ce) == V{{AR, 8192}, {AR, 8192}, {AR, 8192}});
  CHECK(loss_collectives(stepsim::CrossEntropy::fused) == V{{AR, 8192}, {AR, 2 * 8192}});
  CHECK(loss_collectives(stepsim::CrossEntropy::te) == V{{CollOp::allgather, 4 * 3 * 8192}});
}

// torchtitan's per-op selective checkpointing saves reduce_scatter_tensor's output (its
// _save_list), so the attention projection's ReduceScatter is not run again; compiled, the
// partitioner drops the projection too (its output feeds that ReduceScatter alone), eager
// checkpointing replays it. Without sequence parallelism the AllReduce is not saved: the
// projection and its AllReduce run again.
TEST_CASE("per-op selective recompute does not reduce-scatter the saved attention output again") {
  auto s = spt::small_scenario(4, 1, 1);
  s.model.mlp = stepsim::MlpKind::swiglu;
  s.parallel.sequence_parallel = true;
  s.training.recompute = stepsim::Recompute::selective_op;
  s.training.framework = stepsim::Framework::torchtitan_compile;
  const auto program = [&] {
    const spt::FixedCosts costs;
    return sp::build_program(s, stepsim::workload::build_work(s), costs);
  };
  Program p = program();
  CHECK(ops_named(p, CommKind::tp, "L0 attention projection", "fwd") == std::vector{CollOp::reducescatter});
  CHECK(spt::find_op(p, "L0 attention projection recompute") < 0);
  s.training.framework = stepsim::Framework::torchtitan;
  s.training.fusion = stepsim::Fusion::eager;
  p = program();
  CHECK(ops_named(p, CommKind::tp, "L0 attention projection", "fwd") == std::vector{CollOp::reducescatter});
  CHECK(spt::find_op(p, "L0 attention projection recompute") >= 0);
  s.parallel.sequence_parallel = false;
  p = program();
  CHECK(ops_named(p, CommKind::tp, "L0 attention projection", "fwd") == std::vector(2, CollOp::allreduce));
}
