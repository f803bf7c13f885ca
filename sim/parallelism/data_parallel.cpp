// The registry of data-parallel strategies. Adding one: a file with its factory and its
// communicators, one row.
#include "parallelism/data_parallel.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "parallelism/grad_buckets.hpp"
#include "parallelism/mesh.hpp"
#include "stepsim/error.hpp"

namespace stepsim::parallelism {

namespace {

// dp = 1: no gradient synchronisation at all.
class NoDataParallel final : public DataParallel {
 public:
  void after_backward_op(StepBuilder&, const OpSite&, OpIndex) override {}
  void end_backward(StepBuilder&) override {}
  std::vector<OpIndex> optimizer_waits() const override { return {}; }
};

// DDP and the distributed optimizer use one communicator over the whole DP dimension.
std::vector<DpCommunicator> whole_dp_group(const Scenario& scenario, int rank) {
  return {{CommKind::dp, "dp", group_of(scenario.parallel, rank, Dim::dp)}};
}

// The program builder describes DDP's buckets itself.
std::string no_notes(const Scenario&) { return {}; }

constexpr std::array<DataParallelKind, 5> kKinds{{
    {DpKind::ddp, make_ddp, whole_dp_group, no_notes},
    {DpKind::zero1, make_zero, whole_dp_group, zero_notes},
    {DpKind::zero2, make_zero, whole_dp_group, zero_notes},
    {DpKind::fsdp, make_fsdp, fsdp_communicators, fsdp_notes},
    {DpKind::hsdp, make_hsdp, hsdp_communicators, hsdp_notes},
}};

const DataParallelKind& row(DpKind kind) {
  for (const DataParallelKind& k : kKinds) {
    if (k.kind == kind) return k;
  }
  STEPSIM_CHECK(false, "data_parallel.kind missing from the registry");
  return kKinds.front();
}

}  // namespace

std::span<const DataParallelKind> data_parallel_kinds() { return kKinds; }

Scenario gradient_scenario(const Scenario& scenario) {
  Scenario out = scenario;
  out.parallel.dp = scenario.parallel.dp * std::max(scenario.parallel.cp, 1);
  out.parallel.folded_cp = scenario.parallel.folded_cp * std::max(scenario.parallel.cp, 1);
  out.parallel.cp = 1;
  return out;
}

// A mixture of experts whose expert-dp group is larger than one (tp·cp·dp / (ep·etp): tp > 1
// with etp < tp) reduces its experts' gradients over that group even at dp·cp = 1, as
// Megatron-Core's DDP reduces its expert buffers over expert_data_parallel_group: the kind
// then runs with no dense group (dense_layout).
std::unique_ptr<DataParallel> make_data_parallel(const Scenario& scenario) {
  if (scenario.parallel.dp <= 1 && expert_dp_size(scenario) <= 1) return std::make_unique<NoDataParallel>();
  return row(scenario.data_parallel.kind).make(scenario);
}

std::vector<DpCommunicator> data_parallel_communicators(const Scenario& scenario, int rank) {
  if (scenario.parallel.dp <= 1) return {};
  return row(scenario.data_parallel.kind).communicators(scenario, rank);
}

std::string data_parallel_notes(const Scenario& scenario) {
  if (scenario.parallel.dp <= 1) return {};
  return row(scenario.data_parallel.kind).notes(scenario);
}

workload::OpCost sharded_optimizer(const workload::OpCost& whole, int shards) {
  STEPSIM_CHECK(shards >= 1, "an optimizer shard count below one");
  workload::OpCost op = whole;
  op.flops /= shards;
  op.bytes = whole.bytes / shards;
  return op;
}

workload::OpCost sharded_optimizer(const workload::OpCost& whole, long long dense, int shards, long long experts,
                                   int expert_shards) {
  if (experts == 0) return sharded_optimizer(whole, shards);
  STEPSIM_CHECK(shards >= 1 && expert_shards >= 1, "an optimizer shard count below one");
  const double all = static_cast<double>(dense + experts);
  const double share = (static_cast<double>(dense) / shards + static_cast<double>(experts) / expert_shards) / all;
  workload::OpCost op = whole;
  op.flops = whole.flops * share;
  op.bytes = Bytes(std::llround(whole.bytes.as_double() * share));
  return op;
}

}  // namespace stepsim::parallelism
