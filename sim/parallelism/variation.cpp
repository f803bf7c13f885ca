// simulation.variation on a built Program. Link factors scale the rank's link resources; the
// bandwidth its collectives reach is NCCL's on its group's slowest links (link_shares, asked
// for when the collectives are built), so that a degradation every GPU shares is exactly a
// cluster with that bandwidth.
#include "parallelism/variation.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "parallelism/jitter_arrivals.hpp"

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

// The slowest of the members' links, whatever their speed: a factor above 1 (a faster link,
// a partly upgraded cluster) counts as one below does, so that the same factor on every
// member is the cluster with that bandwidth.
template <class Members>
LinkShares slowest_links(const Scenario& s, long long count, const Members& rank_at) {
  const VariationSpec& v = s.simulation.variation;
  LinkShares shares;
  if (v.links.empty() || count == 0) return shares;
  shares = {link_speed(s, rank_at(0), LinkKind::nvlink), link_speed(s, rank_at(0), LinkKind::nic)};
  for (long long i = 1; i < count; ++i) {
    shares.nvlink = std::min(shares.nvlink, link_speed(s, rank_at(i), LinkKind::nvlink));
    shares.nic = std::min(shares.nic, link_speed(s, rank_at(i), LinkKind::nic));
  }
  return shares;
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

void apply_variation(engine::Program& program, const Scenario& s, const std::vector<RankPorts>& links,
                     const std::vector<RankGroup>& members) {
  scale_links(program, s, links);
  const VariationSpec& v = s.simulation.variation;
  if (s.simulation.ranks == RankMode::all) {
    set_compute_variation(program, s);
    return;
  }
  if (v.jitters()) program.arrivals = jitter_arrivals(program, members, v.jitter.distribution, v.jitter.sigma);
}

namespace {

Hardware hardware_of(const Scenario& s, int rank) {
  return {speed_factor(s, rank), link_factor(s, rank, LinkKind::nic), link_factor(s, rank, LinkKind::nvlink)};
}

}  // namespace

HardwareSpread::HardwareSpread(const Scenario& s) : s_(s) {
  const long long gpus = s.parallel.gpus();
  if (gpus <= 0) return;
  fastest_ = hardware_of(s, 0);
  for (long long r = 1; r < gpus; ++r) {
    const Hardware h = hardware_of(s, static_cast<int>(r));
    fastest_ = {std::max(fastest_.speed, h.speed), std::max(fastest_.nic, h.nic), std::max(fastest_.nvlink, h.nvlink)};
  }
}

Hardware HardwareSpread::own(int rank) const {
  const Hardware h = hardware_of(s_, rank);
  return {h.speed / fastest_.speed, h.nic / fastest_.nic, h.nvlink / fastest_.nvlink};
}

std::string HardwareSpread::cause(int rank) const {
  const Hardware h = own(rank);
  std::vector<std::string> causes;
  if (h.speed < 1) causes.push_back(fmt::format("compute at {:.3g}× speed", h.speed));
  if (h.nic < 1) causes.push_back(fmt::format("network link at {:.3g}× bandwidth", h.nic));
  if (h.nvlink < 1) causes.push_back(fmt::format("NVLink at {:.3g}× bandwidth", h.nvlink));
  if (causes.empty() && s_.simulation.variation.jitters()) causes.push_back("kernel jitter");
  return fmt::format("{}", fmt::join(causes, ", "));
}

}  // namespace stepsim::parallelism
