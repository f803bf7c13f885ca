// HSDP (FSDP's HYBRID_SHARD, REFERENCE.md §4): FSDP inside shard groups of
// data_parallel.shard_group DP ranks (default: the DP ranks of one node), and each unit's
// gradient shard all-reduced across the groups on the dp communicator after its
// ReduceScatter.
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "parallelism/data_parallel.hpp"
#include "parallelism/mesh.hpp"
#include "stepsim/error.hpp"

namespace stepsim::parallelism {

namespace {

// DP ranks per shard group. Ranks are placed TP and CP innermost, so a node holds
// gpus_per_node / (tp·cp) consecutive DP ranks.
int shard_ranks(const Scenario& s) {
  const int dp = s.parallel.dp;
  if (s.data_parallel.shard_group > 0) return s.data_parallel.shard_group;
  const int inner = s.parallel.tp * s.parallel.cp;
  const int per_node = std::max(s.cluster.gpus_per_node / inner, 1);
  const int shard = std::min(per_node, dp);
  if (dp % shard != 0) {
    throw InputError(s.source, "/data_parallel/shard_group",
                     fmt::format("one node's {} DP ranks do not divide dp ({}); set shard_group", shard, dp));
  }
  return shard;
}

}  // namespace

std::unique_ptr<DataParallel> make_hsdp(const Scenario& scenario) {
  return make_sharded_fsdp(scenario, shard_ranks(scenario));
}

std::string hsdp_notes(const Scenario& scenario) {
  const int shard = shard_ranks(scenario);
  return fmt::format(
      "HSDP: shard groups of {} DP ranks, gradient shards all-reduced across {} "
      "groups; {}",
      shard, scenario.parallel.dp / shard, sharded_fsdp_notes(scenario, shard));
}

// The shard group: consecutive DP ranks; the replica group: the DP ranks at the same place
// in every shard group.
std::vector<DpCommunicator> hsdp_communicators(const Scenario& scenario, int rank) {
  const std::vector<int> dp = group_ranks(scenario.parallel, rank, Dim::dp);
  const int shard = shard_ranks(scenario);
  const int position = coord_of(scenario.parallel, rank).dp;
  std::vector<DpCommunicator> out{{CommKind::fsdp, "fsdp", {}}};
  const int first = position - position % shard;
  for (int i = first; i < first + shard; ++i) out[0].members.push_back(dp[static_cast<std::size_t>(i)]);
  if (shard == scenario.parallel.dp) return out;
  DpCommunicator replicas{CommKind::dp, "dp", {}};
  for (int i = position % shard; i < scenario.parallel.dp; i += shard) {
    replicas.members.push_back(dp[static_cast<std::size_t>(i)]);
  }
  out.push_back(std::move(replicas));
  return out;
}

}  // namespace stepsim::parallelism
