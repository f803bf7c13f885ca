// Rank placement and communicator shapes. Ranks are numbered TP-fastest so that a TP group
// of at most gpus_per_node GPUs stays inside one node (NVLink), as Megatron places them.
#include "parallelism/mesh.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace stepsim::parallelism {

int dim_size(const ParallelSpec& p, Dim d) {
  switch (d) {
    case Dim::tp:
      return p.tp;
    case Dim::cp:
      return p.cp;
    case Dim::dp:
      return p.dp;
    case Dim::pp:
      return p.pp;
  }
  return 1;
}

int global_rank(const ParallelSpec& p, const Coord& c) { return c.tp + p.tp * (c.cp + p.cp * (c.dp + p.dp * c.pp)); }

Coord coord_of(const ParallelSpec& p, int rank) {
  Coord c;
  c.tp = rank % p.tp;
  rank /= p.tp;
  c.cp = rank % p.cp;
  rank /= p.cp;
  c.dp = rank % p.dp;
  c.pp = rank / p.dp;
  return c;
}

namespace {

int& coordinate(Coord& c, Dim d) {
  switch (d) {
    case Dim::tp:
      return c.tp;
    case Dim::cp:
      return c.cp;
    case Dim::dp:
      return c.dp;
    case Dim::pp:
      return c.pp;
  }
  return c.tp;
}

}  // namespace

std::vector<int> group_ranks(const ParallelSpec& p, int rank, Dim d) {
  Coord c = coord_of(p, rank);
  std::vector<int> ranks;
  for (int i = 0; i < dim_size(p, d); ++i) {
    coordinate(c, d) = i;
    ranks.push_back(global_rank(p, c));
  }
  return ranks;
}

collectives::GroupShape shape_of(const std::vector<int>& ranks, int gpus_per_node) {
  std::map<int, int> per_node;
  for (int r : ranks) ++per_node[r / gpus_per_node];
  int most = 0;
  for (const auto& [node, count] : per_node) most = std::max(most, count);
  return {static_cast<int>(ranks.size()), static_cast<int>(per_node.size()), most};
}

std::string ranks_string(const std::vector<int>& ranks) {
  constexpr std::size_t kShown = 8;
  if (ranks.size() <= kShown) return fmt::format("[{}]", fmt::join(ranks, ", "));
  std::vector<int> head(ranks.begin(), ranks.begin() + kShown - 1);
  return fmt::format("[{}, ..., {}]", fmt::join(head, ", "), ranks.back());
}

namespace {

std::vector<SimulatedRank> one_per_stage(const ParallelSpec& p) {
  std::vector<SimulatedRank> out;
  for (int s = 0; s < p.pp; ++s) {
    const int rank = global_rank(p, Coord{0, 0, 0, s});
    out.push_back({rank, p.gpus() / p.pp, s, fmt::format("rank {} (stage {})", rank, s)});
  }
  return out;
}

std::vector<SimulatedRank> every_rank(const ParallelSpec& p) {
  std::vector<SimulatedRank> out;
  for (int r = 0; r < p.gpus(); ++r) {
    const int stage = coord_of(p, r).pp;
    out.push_back({r, 1, stage, fmt::format("rank {} (stage {})", r, stage)});
  }
  return out;
}

std::string describe_group(const char* kind, const std::vector<int>& ranks, int gpus_per_node) {
  const collectives::GroupShape s = shape_of(ranks, gpus_per_node);
  return fmt::format("{} group of rank 0: {} ranks on {} node(s), {} per node {}", kind, s.ranks, s.nodes,
                     s.ranks_per_node, ranks_string(ranks));
}

}  // namespace

std::vector<SimulatedRank> simulated_ranks(const ParallelSpec& p, RankMode mode) {
  return mode == RankMode::all ? every_rank(p) : one_per_stage(p);
}

std::string placement_description(const Scenario& scenario) {
  const ParallelSpec& p = scenario.parallel;
  std::string out = "ranks placed TP innermost, then CP, DP, PP outermost (Megatron order tp-cp-ep-dp-pp)";
  constexpr std::pair<Dim, const char*> kDims[] = {{Dim::tp, "tp"}, {Dim::cp, "cp"}, {Dim::dp, "dp"}, {Dim::pp, "pp"}};
  for (const auto& [dim, name] : kDims) {
    if (dim_size(p, dim) <= 1) continue;
    out += "; " + describe_group(name, group_ranks(p, 0, dim), scenario.cluster.gpus_per_node);
  }
  const auto ranks = simulated_ranks(p, scenario.simulation.ranks);
  return out + fmt::format("; {} simulated rank(s) standing for {} GPUs", ranks.size(), p.gpus());
}

}  // namespace stepsim::parallelism
