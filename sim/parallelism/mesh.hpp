// Rank placement (Megatron order: TP innermost, then CP, DP, PP outermost), the shape of
// each communicator over the cluster, and the ranks that are actually simulated.
#pragma once

#include <string>
#include <vector>

#include "collectives/collective.hpp"
#include "stepsim/scenario.hpp"
#include "stepsim/timeline.hpp"

namespace stepsim::parallelism {

// The dimensions of the mesh, innermost first (Megatron's tp-cp-ep-dp-pp with EP folded
// into DP, as Megatron carves expert groups out of the data-parallel ranks).
enum class Dim { tp, cp, dp, pp };

struct Coord {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};

int global_rank(const ParallelSpec& p, const Coord& c);
Coord coord_of(const ParallelSpec& p, int rank);
int dim_size(const ParallelSpec& p, Dim d);

// The global ranks of one communicator: with Megatron's placement every group is an
// arithmetic progression, so it is held as one (a DP group of 2^31 ranks costs nothing).
struct RankGroup {
  int first = 0;
  long long stride = 1;
  int size = 1;
  long long at(long long i) const { return first + i * stride; }
  std::vector<int> ranks() const;  // for small groups only
  friend bool operator==(const RankGroup&, const RankGroup&) = default;
};

// Expert groups (Megatron-Core's MoE parallel folding, ETP innermost, then EP, then expert
// DP): the tp·cp·dp ranks of a pipeline stage are cut into blocks of ep·etp consecutive
// ranks; the etp consecutive ranks of a block split each expert (expert_tp_group), the ep
// ranks of a block at the same place in their ETP groups exchange tokens (expert_group, the
// all-to-all), and the ranks at the same place of every block form the expert-data-parallel
// group over which expert gradients are reduced.
RankGroup expert_group(const ParallelSpec& p, int rank);
RankGroup expert_tp_group(const ParallelSpec& p, int rank);
RankGroup expert_data_group(const ParallelSpec& p, int rank);
// The ep·etp consecutive ranks of a block (Megatron-Core's expert tensor and model parallel
// group, its dispatchers' tp_ep_group).
RankGroup expert_block(const ParallelSpec& p, int rank);

// Whether the EP all-to-alls run over the expert block rather than the EP group: Megatron-Core's
// flex dispatcher (MoEFlexTokenDispatcher) dispatches over tp_ep_group with the routing map
// repeated over the expert-TP ranks, every token going to each ETP rank of its experts, and runs
// no ETP AllGather or ReduceScatter; with etp 1 the block is the EP group.
bool dispatches_over_block(const Scenario& s);
// The group a rank's EP all-to-alls run over: its expert block where dispatches_over_block, its
// EP group otherwise.
RankGroup dispatch_group(const Scenario& s, int rank);

// The `d` communicator that contains `rank`, in group order.
RankGroup group_of(const ParallelSpec& p, int rank, Dim d);
// Its global ranks (for small groups only).
std::vector<int> group_ranks(const ParallelSpec& p, int rank, Dim d);
// How a group spreads over NVLink domains of `domain_gpus` consecutive GPUs (the node unless
// NVLink reaches across nodes), as the collective cost model takes it (an even spread; see
// mesh.cpp for uneven ones).
collectives::GroupShape shape_of(const RankGroup& group, int domain_gpus);
collectives::GroupShape shape_of(const std::vector<int>& ranks, int domain_gpus);

// The groups of one kind in a pipeline stage of `stage_ranks` ranks: `group` translated by
// a + step·b for every a below `across` and b below `repeats`. Megatron's placement tiles a
// stage with each kind's groups (stage_translates: a TP group steps by its size, a DP group
// one rank at a time up to its stride); a pipeline link between two stages is translated
// one rank at a time across the stage ({stage_ranks, stage_ranks, 1}).
struct Translates {
  long long across = 1;
  long long step = 1;
  long long repeats = 1;
};
Translates stage_translates(const RankGroup& group, long long stage_ranks);
RankGroup translated(const RankGroup& group, long long by);

// Groups of one kind are placed differently when a stage's size is no multiple of the NVLink
// domain (TP groups of 16 on 72-GPU racks: ranks 64 to 79 straddle two racks) or a group's
// members spread unevenly over domains. The translation of `group` among `t`'s whose group is
// costed slowest over domains of `domain_gpus` GPUs (see mesh.cpp): 0, the group itself,
// unless another is strictly slower; the smallest of the slowest otherwise.
long long slowest_translation(const RankGroup& group, const Translates& t, int domain_gpus);

// "[0, 8, 16, 24]", abbreviated with "..." beyond eight members.
std::string group_string(const RankGroup& group);
std::string ranks_string(const std::vector<int>& ranks);

struct SimulatedRank {
  int rank = 0;          // the global rank it stands for (the first of its class)
  int multiplicity = 1;  // real ranks it represents
  int stage = 0;         // pipeline stage
  std::string label;     // "rank 0 (stage 0)"
};

// One simulated rank per pipeline stage (representative), or every rank (all).
std::vector<SimulatedRank> simulated_ranks(const ParallelSpec& p, RankMode mode);

// One sentence per communicator for the report notes.
std::string placement_description(const Scenario& scenario);

}  // namespace stepsim::parallelism
