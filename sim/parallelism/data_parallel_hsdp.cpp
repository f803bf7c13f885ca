// HSDP (FSDP's HYBRID_SHARD, torch/distributed/fsdp): FSDP inside shard groups of
// data_parallel.shard_group DP ranks (default: the DP ranks of one NVLink domain: a node, or an
// NVL72 rack), each with its whole CP group, and each unit's gradient shard all-reduced across
// the groups on the dp communicator after its ReduceScatter.
#include <algorithm>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "parallelism/data_parallel.hpp"
#include "parallelism/grad_buckets.hpp"
#include "parallelism/mesh.hpp"

namespace stepsim::parallelism {

// A mixture of experts under HSDP (torchtitan's fully_shard of moe.experts on its
// (dp_replicate, dp_shard_mod_ep) mesh): EP borrows ranks inside a shard group, so the routed
// experts are sharded over the expert-dp ranks of the shard group and replicated across the
// shard groups, whose ranks at one place hold the same experts: the replica group is the dense
// one. io/validate.cpp refuses an expert block (ep·etp ranks) that does not tile a shard group.
int expert_shard_ranks(const Scenario& s) {
  const int edp = expert_dp_size(s);
  if (s.data_parallel.kind != DpKind::hsdp || s.model.moe.experts == 0) return edp;
  return std::max(edp / std::max(s.parallel.dp / hsdp_shard_ranks(s), 1), 1);
}

// The expert-dp group cut to the rank's shard group: a shard group is tp·cp·(its DP ranks)
// consecutive ranks of the stage, which whole blocks of ep·etp ranks tile.
RankGroup expert_shard_group(const Scenario& s, int rank) {
  const RankGroup all = expert_data_group(s.parallel, rank);
  if (s.data_parallel.kind != DpKind::hsdp || s.model.moe.experts == 0) return all;
  const int span = expert_shard_ranks(s) * std::max(s.parallel.ep, 1) * std::max(s.parallel.etp, 1);
  const int block = s.parallel.ep * s.parallel.etp;
  const int stage = s.parallel.tp * s.parallel.cp * s.parallel.dp;
  const int base = rank - rank % stage;
  const int shard_base = base + (rank % stage) / span * span;
  return {shard_base + (rank - shard_base) % block, block, span / block};
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
