// The data-parallel strategy interface and its registry: one row per data_parallel.kind,
// one file per strategy (data_parallel_ddp.cpp, data_parallel_zero.cpp, ...).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "parallelism/mesh.hpp"
#include "parallelism/step_builder.hpp"
#include "stepsim/scenario.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

// Where a block's ops start or end in the step, for strategies that act per module (FSDP
// units, ZeRO's parameter buckets). Blocks are numbered as in OpSite.
struct BlockSite {
  int block = 0;
  Phase phase = Phase::forward;  // forward, recompute or backward
  long long micro_batch = 0;
  int chunk = 0;                  // model chunk of the stage (interleaved schedule)
  bool last_micro_batch = false;  // this chunk's last pass of this phase in the step
};

// One rank's gradient synchronisation. The program builder calls after_backward_op for
// every backward compute op of the step's last micro-batch (earlier ones run under
// no_sync()), and the block hooks around every block of every micro-batch.
class DataParallel {
 public:
  virtual ~DataParallel() = default;
  // Each backward op of the last micro-batch, or of every micro-batch where
  // reduces_every_micro_batch().
  virtual void after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) = 0;
  // Gradients reduced in every micro-batch's backward (ZeRO-2), not only in the last one's.
  virtual bool reduces_every_micro_batch() const { return false; }
  // The last micro-batch's backward has been issued.
  virtual void end_backward(StepBuilder& b) = 0;
  // The optimizer step waits for these.
  virtual std::vector<OpIndex> optimizer_waits() const = 0;

  // Before the first op of a block's forward, recompute or backward, and after its last.
  virtual void before_block(StepBuilder&, const BlockSite&) {}
  virtual void after_block(StepBuilder&, const BlockSite&) {}
  // The optimizer step this rank runs: sharded strategies update only their shard.
  virtual workload::OpCost optimizer_op(const workload::OpCost& whole) const { return whole; }
  virtual void after_optimizer(StepBuilder&, OpIndex) {}
};

// A communicator the strategy needs on one rank: its kind, stream name and global ranks.
struct DpCommunicator {
  CommKind kind = CommKind::dp;
  const char* name = "dp";
  RankGroup members;
};

using DataParallelFactory = std::unique_ptr<DataParallel> (*)(const Scenario&);
using DataParallelComms = std::vector<DpCommunicator> (*)(const Scenario&, int rank);
using DataParallelNotes = std::string (*)(const Scenario&);

struct DataParallelKind {
  DpKind kind;  // its data_parallel.kind value is to_string(kind)
  DataParallelFactory make;
  DataParallelComms communicators;
  DataParallelNotes notes;  // a sentence for the report ("" when the caller says it)
};

std::span<const DataParallelKind> data_parallel_kinds();

// The scenario as the data-parallel strategies see it: gradients are reduced (and ZeRO or
// FSDP state sharded) over DP × CP, as Megatron does, since CP ranks hold the same weights.
// With TP innermost, then CP, then DP, the dp·cp ranks of one such group are the DP group of
// a scenario with dp·cp in place of dp and cp 1, numbered exactly alike.
Scenario gradient_scenario(const Scenario& scenario);

// The strategy of scenario.data_parallel.kind for one rank; nothing to do when dp = 1.
std::unique_ptr<DataParallel> make_data_parallel(const Scenario& scenario);

// The communicators of the data-parallel dimension for global rank `rank` (none when
// dp = 1); the program builder creates their groups and streams.
std::vector<DpCommunicator> data_parallel_communicators(const Scenario& scenario, int rank);

// What the strategy does, in a sentence for the report notes ("" for none).
std::string data_parallel_notes(const Scenario& scenario);

// The strategies (one file each).
std::unique_ptr<DataParallel> make_ddp(const Scenario& scenario);
std::unique_ptr<DataParallel> make_zero(const Scenario& scenario);
std::unique_ptr<DataParallel> make_fsdp(const Scenario& scenario);
std::unique_ptr<DataParallel> make_hsdp(const Scenario& scenario);
std::vector<DpCommunicator> fsdp_communicators(const Scenario& scenario, int rank);
std::vector<DpCommunicator> hsdp_communicators(const Scenario& scenario, int rank);
std::string zero_notes(const Scenario& scenario);
std::string fsdp_notes(const Scenario& scenario);
std::string hsdp_notes(const Scenario& scenario);

// FSDP over shard groups of `shard_ranks` DP ranks; with more than one group (HSDP) each
// unit's gradient shard is also all-reduced across the groups on the dp communicator.
std::unique_ptr<DataParallel> make_sharded_fsdp(const Scenario& scenario, int shard_ranks);
std::string sharded_fsdp_notes(const Scenario& scenario, int shard_ranks);

// The ranks over which the routed experts' states are sharded: the expert-dp group, or under
// HSDP its ranks inside the rank's shard group (the expert-dp group spans the replicas too),
// and the rank's group of them.
int expert_shard_ranks(const Scenario& scenario);
RankGroup expert_shard_group(const Scenario& scenario, int rank);

// Divides an optimizer step's work by `shards` (each rank updates 1/shards of it).
workload::OpCost sharded_optimizer(const workload::OpCost& whole, int shards);
// The step over 1/`shards` of `dense` parameters and 1/`expert_shards` of the routed experts'
// `experts` (a mixture of experts' states sharded over its expert-dp group): `whole` scaled by
// the parameter-weighted share.
workload::OpCost sharded_optimizer(const workload::OpCost& whole, long long dense, int shards, long long experts,
                                   int expert_shards);

}  // namespace stepsim::parallelism
