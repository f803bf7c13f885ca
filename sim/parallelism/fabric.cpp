// The cluster's network as named, directional link resources: where each rank's traffic
// goes, and the one place where a shared NIC or an oversubscribed spine limits it.
#include "parallelism/fabric.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "collectives/nccl_facts.hpp"
#include "network/max_min.hpp"
#include "stepsim/error.hpp"

namespace stepsim::parallelism {

namespace {

// The parent of `rank` in NCCL's binary tree over `n` ranks (trees.cc, ncclGetBtree): the rank
// with its lowest set bit cleared and the next bit set, or cleared alone where that is beyond
// the ranks; −1 for the root, rank 0.
int btree_parent(int n, int rank) {
  if (rank == 0) return -1;
  int bit = 1;
  while (bit < n && (bit & rank) == 0) bit <<= 1;
  const int up = (rank ^ bit) | (bit << 1);
  return up < n ? up : rank ^ bit;
}

// Each node's neighbours in NCCL's double binary tree over `n` nodes (ncclGetDtree): the
// binary tree, and its mirror (an even count) or its shift by one (an odd count); a pair
// joined in both trees is listed twice, each tree carrying half of the buffer.
std::vector<std::vector<int>> dtree_neighbours(int n) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  const auto join = [&](int a, int b) {
    if (b < 0) return;
    out[static_cast<std::size_t>(a)].push_back(b);
    out[static_cast<std::size_t>(b)].push_back(a);
  };
  for (int r = 0; r < n; ++r) {
    join(r, btree_parent(n, r));
    if (n % 2 == 0) {
      const int up = btree_parent(n, n - 1 - r);
      join(r, up < 0 ? -1 : n - 1 - up);
    } else {
      const int up = btree_parent(n, (r - 1 + n) % n);
      join(r, up < 0 ? -1 : (up + 1) % n);
    }
  }
  return out;
}

// Of a member's tree traffic across domains, what leaves its leaf, per algorithm byte over the
// Tree's load (2(n − 1)/n of the buffer per domain): each tree edge carries half the buffer
// each way, spread over the domain's members.
double tree_share(int crossing_edges, int domains) {
  const double n = domains;
  return 0.5 * crossing_edges / (2.0 * (n - 1) / n);
}

}  // namespace

Fabric::Fabric(const ClusterSpec& cluster, std::vector<network::Resource>& resources, bool host_copies)
    : resources_(resources),
      gpus_per_node_(std::max(1, cluster.gpus_per_node)),
      domain_gpus_(std::max(gpus_per_node_, cluster.domain_gpus())),
      nics_per_node_(std::max(1, cluster.inter_node.nics_per_node)),
      nodes_per_leaf_(std::max(1, cluster.inter_node.nodes_per_leaf)),
      oversubscription_(std::max(1.0, cluster.inter_node.oversubscription)),
      rails_(cluster.inter_node.topology == InterTopology::rail_optimized),
      host_copies_(host_copies),
      pcie_fabric_(cluster.intra_node.fabric == IntraFabric::pcie),
      nvlink_(cluster.intra_node.bandwidth),
      // With more NICs than GPUs, each GPU drives nics / gpus of them as one port.
      nic_(
          cluster.inter_node.nic_bandwidth.scaled(std::max(1.0, static_cast<double>(nics_per_node_) / gpus_per_node_))),
      // NCCL counts 3/4 of the link's line rate for its channels; the bytes the link moves
      // are bounded by the line rate itself.
      pcie_(Bandwidth::gbytes_per_s(gpu_pcie_link(cluster.gpu.arch).line_gbps)),
      node_nics_(cluster.inter_node.nic_bandwidth.scaled(nics_per_node_)) {}

int Fabric::nic_of(int local_gpu) const {
  if (nics_per_node_ >= gpus_per_node_) return local_gpu * (nics_per_node_ / gpus_per_node_);
  return local_gpu * nics_per_node_ / gpus_per_node_;
}

std::string Fabric::name(const Key& key) const {
  const auto [kind, where, which, rx] = key;
  const char* side = rx ? "rx" : "tx";
  switch (kind) {
    case Kind::nvlink:
      return fmt::format("node {} gpu {} nvlink {}", where, which, side);
    case Kind::nic:
      return fmt::format("node {} nic {} {}", where, which, side);
    case Kind::pcie:
      return fmt::format("node {} gpu {} pcie {}", where, which, side);
    case Kind::leaf:
      break;
  }
  const char* dir = rx ? "down" : "up";
  if (which < 0) return fmt::format("leaf {} {}", where, dir);
  return fmt::format("leaf {} rail {} {}", where, which, dir);
}

network::ResourceId Fabric::resource(const Key& key, Bandwidth capacity) {
  const auto [it, inserted] = ids_.try_emplace(key, static_cast<network::ResourceId>(resources_.size()));
  if (inserted) resources_.push_back({name(key), capacity});
  return it->second;
}

// Ranks of [first, first + count) on `node` (and on NIC `nic` when nic ≥ 0).
int Fabric::count_on_node(int node, int first, int count, int nic) const {
  const long long begin = std::max<long long>(first, static_cast<long long>(node) * gpus_per_node_);
  const long long end =
      std::min<long long>(static_cast<long long>(first) + count, static_cast<long long>(node + 1) * gpus_per_node_);
  int n = 0;
  for (long long r = begin; r < end; ++r) {
    if (nic < 0 || nic_of(static_cast<int>(r % gpus_per_node_)) == nic) ++n;
  }
  return n;
}

RankPorts Fabric::ports(int rank, int first, int count) {
  const int node = node_of(rank);
  const int gpu = rank % gpus_per_node_;
  const int nic = nic_of(gpu);
  RankPorts p;
  p.nic_tx = resource({Kind::nic, node, nic, false}, nic_);
  p.nic_rx = resource({Kind::nic, node, nic, true}, nic_);
  p.nic_weight = std::max(1, count_on_node(node, first, count, nic));
  if (pcie_fabric_) {
    // GPUs joined by PCIe only send everything over their one x16 link, at the fabric's
    // bandwidth: to their peers through the PCIe switches, and to their NIC (GPUDirect RDMA:
    // GPU, PCIe switch, NIC). Every part of every call of the GPU, and its copies to and from
    // host memory, share that link.
    p.pcie = true;
    p.pcie_fabric = true;
    p.pcie_tx = p.nvlink_tx = resource({Kind::pcie, node, gpu, false}, nvlink_);
    p.pcie_rx = p.nvlink_rx = resource({Kind::pcie, node, gpu, true}, nvlink_);
  } else {
    p.nvlink_tx = resource({Kind::nvlink, node, gpu, false}, nvlink_);
    p.nvlink_rx = resource({Kind::nvlink, node, gpu, true}, nvlink_);
  }
  // The GPU's traffic to and from its NIC crosses its own PCIe link, which every collective of
  // the GPU shares; where the link is slower than the NIC port, it bounds their sum. Copies to
  // and from host memory over the same link share it with them.
  if (!pcie_fabric_ && (host_copies_ || pcie_.bytes_per_s() < nic_.bytes_per_s())) {
    p.pcie = true;
    p.pcie_tx = resource({Kind::pcie, node, gpu, false}, pcie_);
    p.pcie_rx = resource({Kind::pcie, node, gpu, true}, pcie_);
  }
  if (!oversubscribed()) return p;
  const int leaf = leaf_of(node);
  const int rail = rails_ ? nic : -1;
  const LeafLoad uplinks = leaf_ports(leaf, rail);
  p.spine = true;
  p.leaf_up = uplinks.up;
  p.leaf_down = uplinks.down;
  int behind = 0;
  const int first_node = std::max(leaf * nodes_per_leaf_, node_of(first));
  const int last_node = std::min((leaf + 1) * nodes_per_leaf_ - 1, node_of(first + count - 1));
  for (int n = first_node; n <= last_node; ++n) behind += count_on_node(n, first, count, rail);
  p.leaf_weight = std::max(1, behind);
  return p;
}

// A leaf's uplinks carry what its nodes' NICs (one rail's NIC each, on a rail-optimized
// fabric) can send, divided by the oversubscription.
LeafLoad Fabric::leaf_ports(int leaf, int rail) {
  STEPSIM_CHECK(oversubscribed(), "leaf uplinks exist only under an oversubscribed spine");
  const Bandwidth down = rails_ ? nic_ : node_nics_;
  const Bandwidth uplinks = down.scaled(nodes_per_leaf_ / oversubscription_);
  LeafLoad out;
  out.up = resource({Kind::leaf, leaf, rail, false}, uplinks);
  out.down = resource({Kind::leaf, leaf, rail, true}, uplinks);
  return out;
}

SpineShare share_at(const LeafShares& shares, int leaf) {
  const auto it = std::ranges::find(shares, leaf, &LeafShares::value_type::first);
  return it == shares.end() ? SpineShare{} : it->second;
}

LeafShares Fabric::spine_shares(std::span<const int> ranks,
                                const std::optional<collectives::GroupShape>& costed) const {
  // The group's members by NVLink domain, in rank order (each domain's members are consecutive).
  std::vector<std::vector<int>> domains;
  for (const int r : ranks) {
    if (domains.empty() || domains.back().front() / domain_gpus_ != r / domain_gpus_) domains.emplace_back();
    domains.back().push_back(r);
  }
  if (domains.size() < 2) return {};
  const auto leaf = [&](int rank) { return leaf_of(node_of(rank)); };
  std::map<int, int> in_leaf;                     // the group's members behind each leaf
  std::map<std::pair<int, std::size_t>, int> in;  // ... and in each domain there
  for (std::size_t d = 0; d < domains.size(); ++d) {
    for (const int r : domains[d]) {
      ++in_leaf[leaf(r)];
      ++in[{leaf(r), d}];
    }
  }
  struct Sum {
    int members = 0;
    double ring = 0;
    double spread = 0;
    double tree = 0;
  };
  const std::vector<std::vector<int>> tree = dtree_neighbours(static_cast<int>(domains.size()));
  std::map<int, Sum> sums;
  bool crosses = false;
  const auto n = static_cast<double>(ranks.size());
  for (std::size_t d = 0; d < domains.size(); ++d) {
    const std::vector<int>& next = domains[(d + 1) % domains.size()];
    const std::vector<int>& prev = domains[(d + domains.size() - 1) % domains.size()];
    for (std::size_t p = 0; p < domains[d].size(); ++p) {
      const int l = leaf(domains[d][p]);
      // A ring member sends to the member at its place in the next domain and receives from
      // the one in the previous (the place taken modulo a domain holding fewer).
      const double out = leaf(next[p % next.size()]) != l ? 1.0 : 0.0;
      const double back = leaf(prev[p % prev.size()]) != l ? 1.0 : 0.0;
      // An all-to-all member's peers in other domains, those behind other leaves.
      const auto here = static_cast<double>(domains[d].size());
      const double beyond = n - here - (in_leaf[l] - in[{l, d}]);
      // The domain's ring traffic is spread over its members (costed: over the costed shape's
      // members per domain); an all-to-all member sends 1/n of its buffer to each peer (costed:
      // the costed shape's cross-domain share of it).
      const double per_domain = costed ? costed->ranks_per_node : here;
      const double costed_ranks = costed ? costed->ranks : n;
      const double costed_inter = (costed_ranks - per_domain) / costed_ranks;
      // A tree member's partners: those at its place in the domains its domain's edges join.
      int crossing = 0;
      for (const int e : tree[d]) {
        const std::vector<int>& other = domains[static_cast<std::size_t>(e)];
        if (leaf(other[p % other.size()]) != l) ++crossing;
      }
      Sum& sum = sums[l];
      ++sum.members;
      sum.ring += (out + back) / 2 * per_domain / here;
      sum.spread += costed_inter > 0 ? beyond / n / costed_inter : 0.0;
      sum.tree += tree_share(crossing, static_cast<int>(domains.size())) * per_domain / here;
      crosses = crosses || out > 0 || back > 0 || beyond > 0 || crossing > 0;
    }
  }
  if (!crosses) return {};
  LeafShares shares;
  for (const auto& [l, sum] : sums)
    shares.push_back({l, {sum.ring / sum.members, sum.spread / sum.members, sum.tree / sum.members}});
  return shares;
}

std::vector<network::ResourceUse> link_uses(const RankPorts& ports, const collectives::LinkLoad& load, Side side,
                                            double spine_share) {
  std::vector<network::ResourceUse> out;
  const bool tx = side != Side::rx;
  const bool rx = side != Side::tx;
  // On a PCIe fabric the bytes to the NIC cross the same link as those to the peers.
  const double intra = load.intra + (ports.pcie_fabric ? load.inter : 0.0);
  if (intra > 0) {  // each GPU its own link: the rank's alone, whatever it stands for
    if (tx) out.push_back({ports.nvlink_tx, intra});
    if (rx) out.push_back({ports.nvlink_rx, intra});
  }
  if (load.inter > 0) {
    if (tx) out.push_back({ports.nic_tx, load.inter * ports.nic_weight});
    if (rx) out.push_back({ports.nic_rx, load.inter * ports.nic_weight});
    if (ports.pcie && !ports.pcie_fabric) {  // each GPU its own link, as above
      if (tx) out.push_back({ports.pcie_tx, load.inter});
      if (rx) out.push_back({ports.pcie_rx, load.inter});
    }
    const double spine = load.inter * spine_share * ports.leaf_weight;
    if (ports.spine && spine > 0) {
      if (tx) out.push_back({ports.leaf_up, spine});
      if (rx) out.push_back({ports.leaf_down, spine});
    }
  }
  return out;
}

SpineShare Fabric::first_nodes_spine_share(int nodes) const {
  if (nodes <= nodes_per_leaf_) return {};
  // The first leaf holds nodes_per_leaf of the group's nodes and the ring leaves it once; of
  // an AllToAll member's peers, those beyond it. No other leaf's members load their uplinks
  // more: each leaf has one ring edge out, and a leaf of k nodes sends k(n − k)/(n − 1) of a
  // node's all-to-all traffic out, largest for the first (k ≤ n/2 but for two leaves, where
  // both send alike).
  const double n = nodes;
  const double behind = nodes_per_leaf_;
  // A double binary tree's edges out of a leaf depend on where the leaf falls in it: the most
  // any leaf has, over the first leaf's nodes, whose members stand for them.
  const std::vector<std::vector<int>> tree = dtree_neighbours(nodes);
  int most = 0;
  for (int first = 0; first < nodes; first += nodes_per_leaf_) {
    int crossing = 0;
    for (int a = first; a < std::min(nodes, first + nodes_per_leaf_); ++a) {
      for (const int b : tree[static_cast<std::size_t>(a)]) crossing += leaf_of(b) != leaf_of(a) ? 1 : 0;
    }
    most = std::max(most, crossing);
  }
  return {1.0 / behind, (n - behind) / (n - 1), tree_share(most, nodes) / behind};
}

namespace {

// A group whose NVLink domains span several nodes (trays): every member's ports in one flow,
// the spine share from the nodes the members sit on.
Bandwidth domain_fabric_bandwidth(const ClusterSpec& cluster, const collectives::Request& request,
                                  const collectives::Choice& choice, Fabric& fabric,
                                  std::vector<network::Resource>& resources, std::span<const int> gpus) {
  const collectives::GroupShape& shape = request.shape;
  std::vector<int> ranks(gpus.begin(), gpus.end());
  if (ranks.empty()) {
    for (int domain = 0; domain < shape.nodes; ++domain) {
      for (int g = 0; g < shape.ranks_per_node; ++g) ranks.push_back(domain * cluster.domain_gpus() + g);
    }
  }
  const LeafShares shares = fabric.spine_shares(ranks, shape);
  const collectives::LinkLoad load = collectives::link_load(request, choice);
  std::vector<network::ResourceUse> uses;
  for (int r : ranks) {
    const double spine = share_at(shares, fabric.leaf_of(fabric.node_of(r))).of(request.op, load);
    for (const network::ResourceUse& u : link_uses(fabric.ports(r, r, 1), load, Side::both, spine)) uses.push_back(u);
  }
  network::MaxMinSolver solver(resources);
  const std::array<network::FlowDemand, 1> flow{{{choice.algbw, uses}}};
  return Bandwidth::bytes_per_s(solver.solve(flow)[0]);
}

}  // namespace

// The members of a collective on the first ranks of consecutive nodes load every node's
// NVLink ports and NICs alike, and the first leaf's uplinks most (it holds the most of the
// group's nodes): the members of node 0, each standing on the uplinks for its counterparts
// on the first leaf's other nodes, meet every bound a lone flow of the whole group meets.
// NVLink domains of several nodes are costed member by member instead.
Bandwidth fabric_bandwidth(const ClusterSpec& cluster, const collectives::Request& request,
                           const collectives::Choice& choice, std::span<const int> gpus) {
  const collectives::GroupShape& shape = request.shape;
  if (shape.ranks <= 1 || !choice.algbw.positive()) return choice.algbw;
  std::vector<network::Resource> resources;
  Fabric fabric(cluster, resources);
  if (cluster.domain_gpus() > cluster.gpus_per_node)
    return domain_fabric_bandwidth(cluster, request, choice, fabric, resources, gpus);
  const collectives::LinkLoad load = collectives::link_load(request, choice);
  const double spine = fabric.first_nodes_spine_share(shape.nodes).of(request.op, load);
  const int first_leaf_nodes = std::min(shape.nodes, std::max(1, cluster.inter_node.nodes_per_leaf));
  std::vector<network::ResourceUse> uses;
  for (int g = 0; g < shape.ranks_per_node; ++g) {
    RankPorts ports = fabric.ports(g, g, 1);
    ports.leaf_weight = first_leaf_nodes;
    for (const network::ResourceUse& u : link_uses(ports, load, Side::both, spine)) uses.push_back(u);
  }
  network::MaxMinSolver solver(resources);
  const std::array<network::FlowDemand, 1> flow{{{choice.algbw, uses}}};
  return Bandwidth::bytes_per_s(solver.solve(flow)[0]);
}

}  // namespace stepsim::parallelism
