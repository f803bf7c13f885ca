#include "parallelism/communicators.hpp"

#include "parallelism/data_parallel.hpp"
#include "parallelism/grad_buckets.hpp"
#include "parallelism/pipeline_schedule.hpp"

namespace stepsim::parallelism {

std::vector<RankCommunicator> rank_communicators(const Scenario& s, int rank) {
  const ParallelSpec& p = s.parallel;
  std::vector<RankCommunicator> out;
  if (p.tp > 1) out.push_back({CommKind::tp, "tp", group_of(p, rank, Dim::tp)});
  if (p.cp > 1) out.push_back({CommKind::cp, "cp", group_of(p, rank, Dim::cp)});
  for (const DpCommunicator& c : data_parallel_communicators(gradient_scenario(s), rank))
    out.push_back({c.kind, c.name, c.members});
  if (s.model.moe.experts == 0) return out;
  // Under the flex dispatcher with etp > 1 the all-to-alls run over the expert block, and the
  // ETP group runs nothing (dispatches_over_block).
  if (p.ep > 1) out.push_back({CommKind::ep, "ep", dispatch_group(s, rank)});
  if (p.etp > 1 && !dispatches_over_block(s))
    out.push_back({CommKind::ep, "etp", expert_tp_group(p, rank), RankCommunicator::Use::expert_tp});
  // Under HSDP the routed experts' own group is their shard group; their replicas all-reduce
  // over the dense replica group.
  if (expert_shard_ranks(s) > 1)
    out.push_back({CommKind::dp, "dp experts", expert_shard_group(s, rank), RankCommunicator::Use::expert_dp});
  return out;
}

bool has_embedding_group(const Scenario& s, int stage) {
  const ParallelSpec& p = s.parallel;
  const bool outer = stage == 0 || stage == p.pp - 1;
  return s.model.tied_embeddings && p.pp > 1 && outer && !bidirectional(p.schedule);
}

bool has_mirror_group(const Scenario& s) { return bidirectional(s.parallel.schedule); }

int communicator_count(const Scenario& s, int rank) {
  const int stage = coord_of(s.parallel, rank).pp;
  int count = static_cast<int>(rank_communicators(s, rank).size());
  if (s.parallel.pp > 1) ++count;
  if (has_embedding_group(s, stage)) ++count;
  if (has_mirror_group(s)) ++count;
  return count;
}

}  // namespace stepsim::parallelism
