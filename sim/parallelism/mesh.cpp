// Rank placement and communicator shapes. Ranks are numbered TP-fastest so that a TP group
// of at most gpus_per_node GPUs stays inside one node (NVLink), as Megatron places them. A
// group is costed over NVLink domains (the node, or the rack of a GB200 NVL72).
#include "parallelism/mesh.hpp"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <numeric>
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

std::vector<int> RankGroup::ranks() const {
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) out.push_back(static_cast<int>(at(i)));
  return out;
}

RankGroup group_of(const ParallelSpec& p, int rank, Dim d) {
  Coord c = coord_of(p, rank);
  coordinate(c, d) = 0;
  Coord next = c;
  coordinate(next, d) = 1;
  const int first = global_rank(p, c);
  const int size = dim_size(p, d);
  return {first, size > 1 ? static_cast<long long>(global_rank(p, next)) - first : 1, size};
}

RankGroup expert_group(const ParallelSpec& p, int rank) {
  const int stage = p.tp * p.cp * p.dp;
  const int base = rank - rank % stage;
  const int q = rank % stage;
  const int block = p.ep * p.etp;
  return {base + q / block * block + q % p.etp, p.etp, p.ep};
}

RankGroup expert_tp_group(const ParallelSpec& p, int rank) {
  const int stage = p.tp * p.cp * p.dp;
  const int base = rank - rank % stage;
  const int q = rank % stage;
  return {base + q / p.etp * p.etp, 1, p.etp};
}

RankGroup expert_data_group(const ParallelSpec& p, int rank) {
  const int stage = p.tp * p.cp * p.dp;
  const int base = rank - rank % stage;
  const int block = p.ep * p.etp;
  return {base + rank % stage % block, block, stage / block};
}

RankGroup expert_block(const ParallelSpec& p, int rank) {
  const int stage = p.tp * p.cp * p.dp;
  const int base = rank - rank % stage;
  const int block = p.ep * p.etp;
  return {base + rank % stage / block * block, 1, block};
}

bool dispatches_over_block(const Scenario& s) {
  return s.model.moe.experts > 0 && s.model.moe.dispatcher == MoeDispatcher::flex && s.parallel.etp > 1;
}

RankGroup dispatch_group(const Scenario& s, int rank) {
  return dispatches_over_block(s) ? expert_block(s.parallel, rank) : expert_group(s.parallel, rank);
}

std::vector<int> group_ranks(const ParallelSpec& p, int rank, Dim d) { return group_of(p, rank, d).ranks(); }

namespace {

// The fewest members any node holds, and the most, of a group of `size` ranks placed at
// first + i·stride on nodes of g GPUs, without listing them: the count on one node follows
// from arithmetic, and the counts of the nodes between the first and the last repeat with
// a period of at most g nodes, so at most g + 2 nodes are looked at.
struct Spread {
  long long nodes = 0;
  long long fewest = 0;
  long long most = 0;
};

long long members_on(const RankGroup& group, long long node, long long g) {
  // Indices i with node·g <= first + i·stride < (node + 1)·g.
  const auto first_at_least = [&](long long rank) {
    if (rank <= group.first) return 0LL;
    return (rank - group.first + group.stride - 1) / group.stride;
  };
  const long long lo = std::min<long long>(first_at_least(node * g), group.size);
  const long long hi = std::min<long long>(first_at_least((node + 1) * g), group.size);
  return hi - lo;
}

Spread spread_of(const RankGroup& group, int gpus_per_node) {
  const long long g = gpus_per_node;
  const long long first_node = group.first / g;
  const long long last_node = group.at(group.size - 1) / g;
  Spread out;
  out.fewest = group.size;
  if (group.stride >= g) {
    // Members at least a node apart: one per node.
    return {group.size, 1, 1};
  }
  out.nodes = last_node - first_node + 1;
  const auto look = [&](long long node) {
    const long long n = members_on(group, node, g);
    out.fewest = std::min(out.fewest, n);
    out.most = std::max(out.most, n);
  };
  look(first_node);
  look(last_node);
  for (long long k = first_node + 1; k < last_node && k <= first_node + g; ++k) look(k);
  return out;
}

}  // namespace

// NCCL's cost model takes groups with the same number of members on every node. A group
// that spreads unevenly (a partial last node, a TP group wider than a node) is costed as
// an even group of its emptiest node's size: across nodes every ring channel leaves through
// the NICs of the emptiest node, so it bounds the bandwidth. Where that size divides the
// group it is the group's own rank count over more, fuller-costed nodes; where it does not
// (127 ranks holding 7 to 8 per node), the group's own nodes each holding that many (16 of
// 7): the bandwidth term hardly depends on the rank count, and the node crossings stay
// those the group makes. (The largest divisor instead made a prime rank count one GPU per
// node, as if each node lent it one NIC.)
namespace {
collectives::GroupShape even_shape(int size, int nodes, int fewest) {
  if (size % fewest == 0) return {size, size / fewest, fewest};
  return {nodes * fewest, nodes, fewest};
}
}  // namespace

collectives::GroupShape shape_of(const RankGroup& group, int gpus_per_node) {
  const Spread spread = spread_of(group, gpus_per_node);
  return even_shape(static_cast<int>(group.size), static_cast<int>(spread.nodes), static_cast<int>(spread.fewest));
}

collectives::GroupShape shape_of(const std::vector<int>& ranks, int gpus_per_node) {
  std::map<int, int> per_node;
  for (int r : ranks) ++per_node[r / gpus_per_node];
  int fewest = static_cast<int>(ranks.size());
  for (const auto& [node, count] : per_node) fewest = std::min(fewest, count);
  return even_shape(static_cast<int>(ranks.size()), static_cast<int>(per_node.size()), fewest);
}

Translates stage_translates(const RankGroup& group, long long stage_ranks) {
  const long long step = group.stride * group.size;
  return {group.stride, step, std::max(1LL, stage_ranks / step)};
}

RankGroup translated(const RankGroup& group, long long by) {
  return {static_cast<int>(group.first + by), group.stride, group.size};
}

namespace {

// Translations of a group by Σ step·i over ranges (step, count), i below count, sorted by
// their residue modulo the domain size: a translation by whole domains leaves the group's
// spread as it is, so the smallest translation of each residue stands for all of them. The
// residues of step·i repeat with a period of g / gcd(g, step), so at most that many values
// of i are looked at, and at most g residues kept: a stage of 2^20 ranks on 72-GPU domains
// costs a few thousand steps, not a million.
struct Residue {
  long long count = 0;  // translations with this residue
  long long first = 0;  // the smallest of them
};

using Range = std::pair<long long, long long>;

std::map<long long, Residue> residues(std::initializer_list<Range> ranges, long long g) {
  std::map<long long, Residue> acc{{0, {1, 0}}};
  for (const auto& [step, count] : ranges) {
    if (count <= 1) continue;
    const long long period = g / std::gcd(g, step % g);
    const long long distinct = std::min(count, period);
    std::map<long long, Residue> next;
    for (const auto& [residue, have] : acc) {
      for (long long i = 0; i < distinct; ++i) {
        const long long times = (count - i + period - 1) / period;  // i, i + period, ... below count
        const long long by = have.first + step * i;
        const auto [it, inserted] = next.try_emplace((residue + step % g * i) % g, Residue{0, by});
        it->second.count += have.count * times;
        it->second.first = std::min(it->second.first, by);
      }
    }
    acc = std::move(next);
  }
  return acc;
}

// Whether groups of one kind costed as `a` are slower than costed as `b`: across NVLink
// domains rather than inside one; across, with fewer members per domain (a ring's channels
// leave through the emptiest domain's NICs, fewer of them, and an all-to-all sends more of
// its bytes out of the domain), or as many over more domains (more hops).
bool slower(const collectives::GroupShape& a, const collectives::GroupShape& b) {
  if ((a.nodes > 1) != (b.nodes > 1)) return a.nodes > 1;
  if (a.ranks_per_node != b.ranks_per_node) return a.ranks_per_node < b.ranks_per_node;
  return a.nodes > b.nodes;
}

// How the translates of a group are costed: the smallest translation of the slowest, how
// many are costed as it, of how many, and whether all are costed alike.
struct Placements {
  long long slowest = 0;
  long long slow = 0;
  long long total = 0;
  bool alike = true;
};

Placements placements(const RankGroup& group, std::initializer_list<Range> ranges, int domain_gpus) {
  struct Seen {
    Residue residue;
    collectives::GroupShape shape;
  };
  std::vector<Seen> seen;
  for (const auto& [residue, r] : residues(ranges, domain_gpus))
    seen.push_back({r, shape_of(translated(group, r.first), domain_gpus)});
  Placements out;
  collectives::GroupShape worst = shape_of(group, domain_gpus);
  for (const Seen& s : seen) {
    out.total += s.residue.count;
    out.alike = out.alike && s.shape == seen.front().shape;
    if (slower(s.shape, worst) || (s.shape == worst && s.residue.first < out.slowest)) {
      worst = s.shape;
      out.slowest = s.residue.first;
    }
  }
  for (const Seen& s : seen) {
    if (s.shape == worst) out.slow += s.residue.count;
  }
  return out;
}

}  // namespace

long long slowest_translation(const RankGroup& group, const Translates& t, int domain_gpus) {
  if (group.size <= 1) return 0;
  return placements(group, {{1, t.across}, {t.step, t.repeats}}, domain_gpus).slowest;
}

std::string group_string(const RankGroup& group) {
  constexpr int kShown = 8;
  if (group.size <= kShown) return ranks_string(group.ranks());
  std::vector<int> head;
  for (int i = 0; i < kShown - 1; ++i) head.push_back(static_cast<int>(group.at(i)));
  return fmt::format("[{}, ..., {}]", fmt::join(head, ", "), group.at(group.size - 1));
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

std::string per_text(const Spread& s) {
  return s.fewest == s.most ? fmt::format("{}", s.most) : fmt::format("{} to {}", s.fewest, s.most);
}

// Where a group's traffic goes when an NVLink domain spans several nodes: all of it over
// NVLink inside one domain, the part between domains over the NICs. Nothing when the domain
// is the node, where the node count already says it.
std::string domain_text(const RankGroup& group, const ClusterSpec& cluster) {
  if (cluster.domain_gpus() == cluster.gpus_per_node) return "";
  const Spread d = spread_of(group, cluster.domain_gpus());
  if (d.nodes <= 1) return " in one NVLink domain (all over NVLink)";
  return fmt::format(" in {} NVLink domains, {} per domain (NVLink inside a domain, NICs between domains)", d.nodes,
                     per_text(d));
}

// The group as it is placed (an uneven spread says so), not as it is costed.
std::string describe_group(const char* kind, const RankGroup& group, const ClusterSpec& cluster) {
  const Spread s = spread_of(group, cluster.gpus_per_node);
  return fmt::format("{} group of rank 0: {} ranks on {} node(s), {} per node{} {}", kind, group.size, s.nodes,
                     per_text(s), domain_text(group, cluster), group_string(group));
}

// Where the groups of a kind (the translates of `group` by `ranges` over the whole job) are
// costed differently: how many are placed as the slowest, where, and the first of them. In
// representative mode each stage's simulated rank is costed as its stage's slowest group,
// the one the step waits for at every synchronisation.
std::string difference_text(const char* what, const RankGroup& group, std::initializer_list<Range> ranges,
                            const Scenario& scenario) {
  const ClusterSpec& cluster = scenario.cluster;
  const Placements pl = placements(group, ranges, cluster.domain_gpus());
  if (pl.alike) return "";
  const RankGroup first = translated(group, pl.slowest);
  const Spread d = spread_of(first, cluster.domain_gpus());
  const bool domains = cluster.domain_gpus() != cluster.gpus_per_node;
  // Groups placed otherwise than the slowest may span as many domains with more members in
  // the emptiest (an EP group of 64 on 72-GPU racks: 56 + 8 is slower than 48 + 16): count them.
  long long spanning = 0;
  for (const auto& [residue, r] : residues(ranges, cluster.domain_gpus()))
    spanning += spread_of(translated(group, r.first), cluster.domain_gpus()).nodes == d.nodes ? r.count : 0;
  const char* unit = domains ? "NVLink domains" : "nodes";
  std::string out =
      spanning > pl.slow
          ? fmt::format(
                "; {} are placed differently: {} of {} span {} {}, the slowest {} of them {} per {}, the first {}",
                what, spanning, pl.total, d.nodes, unit, pl.slow, per_text(d), domains ? "domain" : "node",
                group_string(first))
          : fmt::format("; {} are placed differently: {} of {} span {} {}, {} per {}, the first {}", what, pl.slow,
                        pl.total, d.nodes, unit, per_text(d), domains ? "domain" : "node", group_string(first));
  if (scenario.simulation.ranks == RankMode::representative)
    out += ", which the step waits for: each simulated rank is costed as its stage's slowest";
  return out;
}

// Where the groups of a kind cross an oversubscribed spine differently: a leaf switch holds
// no whole number of them (TP 16 under three-node leaves), so some cross it and some do not.
// Representative mode loads every leaf's uplinks a stage's groups cross with the stage's
// traffic there, so the busiest leaf paces them.
std::string leaf_difference_text(const char* what, const RankGroup& group, std::initializer_list<Range> ranges,
                                 const Scenario& scenario) {
  const ClusterSpec& cluster = scenario.cluster;
  if (cluster.inter_node.oversubscription <= 1) return "";
  // Groups that all stay inside one NVLink domain (TP 8 in a GB200 NVL72 rack) run over NVLink
  // and never reach the NICs, whichever leaves their trays sit under.
  const RankGroup widest = translated(group, placements(group, ranges, cluster.domain_gpus()).slowest);
  if (spread_of(widest, cluster.domain_gpus()).nodes <= 1) return "";
  const int leaf_gpus = cluster.gpus_per_node * std::max(1, cluster.inter_node.nodes_per_leaf);
  const Placements pl = placements(group, ranges, leaf_gpus);
  if (pl.alike) return "";
  const RankGroup first = translated(group, pl.slowest);
  const Spread d = spread_of(first, leaf_gpus);
  std::string out = fmt::format("; {} cross the oversubscribed spine differently: {} of {} span {} leaf switches, {} "
                                "per leaf, the first {}",
                                what, pl.slow, pl.total, d.nodes, per_text(d), group_string(first));
  if (scenario.simulation.ranks == RankMode::representative)
    out += ", and each simulated rank loads every leaf its stage's groups cross with their traffic there";
  return out;
}

// A kind whose groups tile every pipeline stage alike, over all stages.
std::string kind_difference(const char* what, const RankGroup& group, const Scenario& scenario) {
  const ParallelSpec& p = scenario.parallel;
  const long long stage = p.gpus() / p.pp;
  const Translates t = stage_translates(group, stage);
  return difference_text(what, group, {{1, t.across}, {t.step, t.repeats}, {stage, p.pp}}, scenario) +
         leaf_difference_text(what, group, {{1, t.across}, {t.step, t.repeats}, {stage, p.pp}}, scenario);
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
    const RankGroup group = group_of(p, 0, dim);
    out += "; " + describe_group(name, group, scenario.cluster);
    if (dim != Dim::pp) out += kind_difference(fmt::format("{} groups", name).c_str(), group, scenario);
  }
  if (p.pp > 1) {
    // The sends between neighbouring stages: ranks r and r + stage for every r below the last stage.
    const long long stage = p.gpus() / p.pp;
    out += difference_text("pipeline links between neighbouring stages", RankGroup{0, stage, 2},
                           {{1, stage}, {stage, p.pp - 1}}, scenario);
  }
  if (p.ep > 1) {
    const bool block = dispatches_over_block(scenario);
    const RankGroup ep = dispatch_group(scenario, 0);
    const char* name = block ? "flex dispatch (ep·etp)" : "ep";
    out += "; " + describe_group(name, ep, scenario.cluster) +
           kind_difference(block ? "flex dispatch groups" : "ep groups", ep, scenario);
  }
  if (p.etp > 1 && !dispatches_over_block(scenario)) {
    const RankGroup etp = expert_tp_group(p, 0);
    out += "; " + describe_group("etp", etp, scenario.cluster) + kind_difference("etp groups", etp, scenario);
  }
  // CP ranks hold the same weights: their gradients are reduced together with DP's.
  ParallelSpec folded = p;
  folded.dp = p.dp * p.cp;
  folded.cp = 1;
  const RankGroup gradient = group_of(folded, 0, Dim::dp);
  // The experts' gradients are reduced over the expert-dp group, tp·cp·dp / (ep·etp) ranks,
  // which is the group of the other gradients only where ep·etp = tp and cp = 1 (TP 2 and EP 1
  // at ETP 1: the 2·dp ranks of a stage, not its dp).
  const RankGroup edp = expert_data_group(p, 0);
  const bool same =
      edp.size == gradient.size && edp.first == gradient.first && (edp.size <= 1 || edp.stride == gradient.stride);
  if (scenario.model.moe.experts > 0 && (p.ep > 1 || !same))
    out += edp.size > 1 ? "; expert gradients reduced over the " + describe_group("expert-dp", edp, scenario.cluster) +
                              kind_difference("expert-dp groups", edp, scenario)
                        : "; every GPU holds its own experts (no expert-dp group)";
  if (p.cp > 1)
    out += "; gradients reduced over dp·cp, " + describe_group("gradient", gradient, scenario.cluster) +
           kind_difference("gradient groups", gradient, scenario);
  const auto ranks = simulated_ranks(p, scenario.simulation.ranks);
  return out + fmt::format("; {} simulated rank(s) standing for {} GPUs", ranks.size(), p.gpus());
}

}  // namespace stepsim::parallelism
