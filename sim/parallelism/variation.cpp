// simulation.variation on a built Program. Link factors scale the rank's link resources; the
// bandwidth its collectives reach is NCCL's on its group's slowest links (link_shares, asked
// for when the collectives are built), so that a degradation every GPU shares is exactly a
// cluster with that bandwidth.
#include "parallelism/variation.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace stepsim::parallelism {
namespace {

int node_of(const Scenario& s, int rank) { return rank / s.cluster.gpus_per_node; }

// The speed a rank's link of `kind` runs at, as a share of its line rate: what NCCL detects
// and its cost model sees (a link trained down to a lower rate).
double link_speed(const Scenario& s, int rank, LinkKind kind) {
  const int node = node_of(s, rank);
  double factor = 1.0;
  for (const LinkFactor& l : s.simulation.variation.links)
    if (l.link == kind && (l.rank == rank || l.node == node)) factor *= l.factor;
  return factor;
}

engine::JitterDraw draw_of(JitterKind k) {
  switch (k) {
    case JitterKind::normal:
      return engine::JitterDraw::normal;
    case JitterKind::lognormal:
      return engine::JitterDraw::lognormal;
    case JitterKind::uniform:
      return engine::JitterDraw::uniform;
    case JitterKind::none:
      break;
  }
  return engine::JitterDraw::none;
}

void set_compute_variation(engine::Program& program, const Scenario& s) {
  const VariationSpec& v = s.simulation.variation;
  if (v.jitters()) {
    program.variation.jitter = draw_of(v.jitter.distribution);
    program.variation.sigma = v.jitter.sigma;
    program.variation.seed = static_cast<std::uint64_t>(v.jitter.seed);
  }
  if (v.gpu_speed.empty() && v.node_speed.empty()) return;
  for (const engine::RankProgram& rank : program.ranks) program.variation.speed.push_back(speed_factor(s, rank.rank));
}

// The factor of each varied link resource: the smallest any of its users asks for (a node's
// factor reaches it through each of the node's GPUs, and must count once).
using ResourceFactors = std::map<network::ResourceId, double>;

void note_factor(ResourceFactors& factors, network::ResourceId id, double factor) {
  if (factor == 1.0) return;
  const auto [it, inserted] = factors.try_emplace(id, factor);
  if (!inserted) it->second = std::min(it->second, factor);
}

void scale_links(engine::Program& program, const Scenario& s, const std::vector<RankPorts>& links) {
  ResourceFactors factors;
  for (std::size_t i = 0; i < program.ranks.size(); ++i) {
    const int rank = program.ranks[i].rank;
    const double nvlink = link_factor(s, rank, LinkKind::nvlink);
    const double nic = link_factor(s, rank, LinkKind::nic);
    note_factor(factors, links[i].nvlink_tx, nvlink);
    note_factor(factors, links[i].nvlink_rx, nvlink);
    note_factor(factors, links[i].nic_tx, nic);
    note_factor(factors, links[i].nic_rx, nic);
  }
  for (const auto& [id, factor] : factors)
    program.resources[id].capacity = program.resources[id].capacity.scaled(factor);
}

template <class Members>
LinkShares slowest_links(const Scenario& s, long long count, const Members& rank_at) {
  const VariationSpec& v = s.simulation.variation;
  LinkShares shares;
  if (v.links.empty()) return shares;
  for (long long i = 0; i < count; ++i) {
    shares.nvlink = std::min(shares.nvlink, link_speed(s, rank_at(i), LinkKind::nvlink));
    shares.nic = std::min(shares.nic, link_speed(s, rank_at(i), LinkKind::nic));
  }
  return shares;
}

bool waits_on_collective(const engine::Program& program, const engine::RankProgram& rank, engine::OpIndex o) {
  for (engine::OpIndex w : rank.waits_of(o)) {
    const engine::Op& op = rank.ops()[w];
    if (op.kind != engine::OpKind::collective) continue;
    const auto group = rank.calls[static_cast<std::size_t>(op.call)].group;
    if (program.groups[static_cast<std::size_t>(group)].size > 1) return true;
  }
  return false;
}

// Between two synchronisations (a compute op waiting on a collective) each real rank's
// compute drifts by the sum of its kernels' jitter: variance sigma² · Σ d². The members of
// an N-rank collective arrive spread by that drift, and the expected wait for the last is
// the expected maximum of N such sums, sigma · √(Σ d²) · E[max of N], E taken over the sum of
// as many equal kernels as give its kurtosis, drawn from the scenario's distribution: a few
// kernels keep its shape (a uniform one bounded, a lognormal one long-tailed), many make it
// normal.
void add_arrival_skews(const engine::Program& program, engine::RankProgram& rank, double sigma,
                       ExpectedMaxima& maxima) {
  double d2 = 0;  // Σ d² since the last synchronisation, in s²
  double d4 = 0;  // Σ d⁴, in s⁴
  for (engine::OpIndex o = 0; o < rank.ops().size(); ++o) {
    const engine::Op& op = rank.ops()[o];
    if (op.kind == engine::OpKind::copy) continue;  // on a copy engine, no kernel to jitter
    if (op.kind == engine::OpKind::compute) {
      if (waits_on_collective(program, rank, o)) d2 = d4 = 0;
      const double s2 = op.duration.seconds() * op.duration.seconds();
      d2 += s2;
      d4 += s2 * s2;
      continue;
    }
    const int members =
        program.groups[static_cast<std::size_t>(rank.calls[static_cast<std::size_t>(op.call)].group)].size;
    if (members <= 1 || d2 <= 0) continue;
    const double wait_s = sigma * std::sqrt(d2) * maxima.of(members, ExpectedMaxima::equal_kernels(d2, d4));
    rank.skews.push_back({o, Time::from_ps(std::llround(wait_s * 1e12))});
  }
}

}  // namespace

double speed_factor(const Scenario& s, int rank) {
  double factor = 1.0;
  for (const GpuSpeed& g : s.simulation.variation.gpu_speed)
    if (g.rank == rank) factor *= g.factor;
  for (const NodeSpeed& n : s.simulation.variation.node_speed)
    if (n.node == node_of(s, rank)) factor *= n.factor;
  return factor;
}

namespace {

// The NICs of `node` that work: entries for one node add up.
int working_nics(const Scenario& s, int node) {
  int failed = 0;
  for (const FailedNics& f : s.simulation.variation.failed_nics)
    if (f.node == node) failed += f.count;
  return std::max(s.cluster.inter_node.nics_per_node, 1) - failed;
}

// NCCL builds its graphs at init from the NICs each node has, and its ranks keep the fewest
// channels and the lowest bandwidths any of them found (init.cc aligns the graphs over the
// all-gathered graph information): a NIC down at init is a node without it, and the group's
// collectives are costed on the working NICs of its node with the fewest. Other jobs' traffic,
// which NCCL never sees, leaves its graphs as they are (link_factor shares the links).
template <class Members>
LinkShares with_working_nics(const Scenario& s, LinkShares shares, long long count, const Members& rank_at) {
  const std::vector<FailedNics>& failed = s.simulation.variation.failed_nics;
  if (failed.empty()) return shares;
  const int nics = std::max(s.cluster.inter_node.nics_per_node, 1);
  int fewest = nics;
  int last_node = -1;
  for (long long i = 0; i < count; ++i) {
    const int node = node_of(s, rank_at(i));
    if (node == last_node) continue;  // a node's members mostly follow one another
    last_node = node;
    fewest = std::min(fewest, working_nics(s, node));
  }
  if (fewest < nics) shares.nics = fewest;
  return shares;
}

}  // namespace

double link_factor(const Scenario& s, int rank, LinkKind kind) {
  const VariationSpec& v = s.simulation.variation;
  double factor = link_speed(s, rank, kind);
  if (kind != LinkKind::nic) return factor;
  // The node's GPUs share the NICs that none of them failed.
  const int nics = std::max(s.cluster.inter_node.nics_per_node, 1);
  factor *= static_cast<double>(working_nics(s, node_of(s, rank))) / nics;
  return factor * (1.0 - v.background_traffic);
}

LinkShares link_shares(const Scenario& s, const RankGroup& members) {
  const auto rank_at = [&](long long i) { return static_cast<int>(members.at(i)); };
  return with_working_nics(s, slowest_links(s, members.size, rank_at), members.size, rank_at);
}

LinkShares link_shares(const Scenario& s, const std::vector<int>& members) {
  const auto rank_at = [&](long long i) { return members[static_cast<std::size_t>(i)]; };
  const auto count = static_cast<long long>(members.size());
  return with_working_nics(s, slowest_links(s, count, rank_at), count, rank_at);
}

void apply_variation(engine::Program& program, const Scenario& s, const std::vector<RankPorts>& links) {
  scale_links(program, s, links);
  const VariationSpec& v = s.simulation.variation;
  if (s.simulation.ranks == RankMode::all) {
    set_compute_variation(program, s);
    return;
  }
  if (!v.jitters()) return;
  ExpectedMaxima maxima(v.jitter.distribution, v.jitter.sigma);
  for (engine::RankProgram& rank : program.ranks) add_arrival_skews(program, rank, v.jitter.sigma, maxima);
}

std::string variation_cause(const Scenario& s, int rank) {
  std::vector<std::string> causes;
  if (const double f = speed_factor(s, rank); f != 1.0) causes.push_back(fmt::format("compute at {:.3g}× speed", f));
  if (const double f = link_factor(s, rank, LinkKind::nic); f != 1.0)
    causes.push_back(fmt::format("network link at {:.3g}× bandwidth", f));
  if (const double f = link_factor(s, rank, LinkKind::nvlink); f != 1.0)
    causes.push_back(fmt::format("NVLink at {:.3g}× bandwidth", f));
  if (causes.empty() && s.simulation.variation.jitters()) causes.push_back("kernel jitter");
  return fmt::format("{}", fmt::join(causes, ", "));
}

}  // namespace stepsim::parallelism
