// HSDP (FSDP's HYBRID_SHARD, torch/distributed/fsdp): FSDP inside shard groups of
// data_parallel.shard_group DP ranks (default: the DP ranks of one NVLink domain: a node, or an
// NVL72 rack), each with its whole CP group, and each unit's gradient shard all-reduced across
// the groups on the dp communicator after its ReduceScatter.
#include <algorithm>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "parallelism/data_parallel.hpp"
#include "parallelism/mesh.hpp"

namespace stepsim::parallelism {

// DP ranks per shard group: data_parallel.shard_group, or the DP ranks of one NVLink domain
// (the node, or the rack cluster.nvlink_domain joins: FSDP's gathers then stay on NVLink).
// Ranks are placed TP and CP innermost, so a domain holds domain_gpus / (tp·cp) consecutive DP
// ranks (at least one: a TP group wider than a domain spreads over several); when that does
// not divide dp, the largest group inside a domain that does (their greatest common divisor),
// as the (replicas, shard) device mesh must tile the DP ranks. A group of one shards
// nothing: each unit's gradient is then all-reduced whole across the replicas.
//
// CP ranks hold the same weights, so FSDP shards over them too, over DP × CP, as torchtitan's
// HSDP does on its flattened dp_shard_cp mesh (replicating over dp_replicate): a shard group of
// the gradient scenario, whose DP group is the job's DP × CP with each DP rank's CP group
// consecutive in it, is that many DP ranks' whole CP groups.
int hsdp_shard_ranks(const Scenario& s) {
  const int folded = std::max(s.parallel.folded_cp, 1);
  if (s.data_parallel.shard_group > 0) return s.data_parallel.shard_group * folded;
  const int inner = s.parallel.tp * s.parallel.cp * folded;
  const int per_domain = std::max(s.cluster.domain_gpus() / inner, 1);
  return std::gcd(per_domain, std::max(s.parallel.dp / folded, 1)) * folded;
}

std::unique_ptr<DataParallel> make_hsdp(const Scenario& scenario) {
  return make_sharded_fsdp(scenario, hsdp_shard_ranks(scenario));
}

std::string hsdp_notes(const Scenario& scenario) {
  const int shard = hsdp_shard_ranks(scenario);
  const int cp = std::max(scenario.parallel.folded_cp, 1);
  const std::string group =
      cp == 1 ? fmt::format("{} DP ranks", shard)
              : fmt::format("{} DP ranks with their CP groups of {} ({} GPUs)", shard / cp, cp, shard);
  return fmt::format("HSDP: shard groups of {}, gradient shards all-reduced across {} groups; {}", group,
                     scenario.parallel.dp / shard, sharded_fsdp_notes(scenario, shard));
}

// The shard group: consecutive ranks of the DP group (whole CP groups in the gradient
// scenario's); the replica group: the ranks at the same place in every shard group. Both are
// arithmetic in the DP group (no list of its ranks).
std::vector<DpCommunicator> hsdp_communicators(const Scenario& scenario, int rank) {
  const RankGroup dp = group_of(scenario.parallel, rank, Dim::dp);
  const int shard = hsdp_shard_ranks(scenario);
  const int position = coord_of(scenario.parallel, rank).dp;
  std::vector<DpCommunicator> out;
  if (shard > 1) {
    const auto first = static_cast<int>(dp.at(position - position % shard));
    out.push_back({CommKind::fsdp, "fsdp", {first, dp.stride, shard}});
  }
  if (shard == scenario.parallel.dp) return out;
  const auto first = static_cast<int>(dp.at(position % shard));
  out.push_back({CommKind::dp, "dp", {first, dp.stride * shard, scenario.parallel.dp / shard}});
  return out;
}

}  // namespace stepsim::parallelism
