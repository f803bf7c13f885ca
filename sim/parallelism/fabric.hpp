// The cluster's network as named, directional link resources shared by the ranks: each GPU's
// NVLink port and the NIC it uses (transmit and receive), and the leaf switches' uplinks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives/collective.hpp"
#include "network/resource.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::parallelism {

// Which side of its links a rank's part of a call loads: a SendRecv's sender transmits, its
// receiver receives; a collective's member does both at once (links are full duplex).
enum class Side : std::uint8_t { both, tx, rx };

// The resources one simulated rank's traffic loads, and how many real GPUs' traffic it
// carries on each: a simulated rank standing for several GPUs of its pipeline stage loads a
// shared NIC or uplink for every one of them that shares it.
struct RankPorts {
  network::ResourceId nvlink_tx = 0;
  network::ResourceId nvlink_rx = 0;
  network::ResourceId nic_tx = 0;
  network::ResourceId nic_rx = 0;
  network::ResourceId leaf_up = 0;  // only with an oversubscribed spine
  network::ResourceId leaf_down = 0;
  // Only where the GPU's PCIe link is slower than its NIC port, or carries host copies too, or
  // is the node's fabric.
  network::ResourceId pcie_tx = 0;
  network::ResourceId pcie_rx = 0;
  bool spine = false;  // leaf_up and leaf_down exist
  bool pcie = false;   // pcie_tx and pcie_rx exist
  // A PCIe fabric: the GPU reaches its peers and its NIC over its one PCIe link, so nvlink_tx
  // and nvlink_rx are that link (pcie_tx and pcie_rx), which carries both parts of a call.
  bool pcie_fabric = false;
  double nic_weight = 1;   // GPUs of the rank's class on its NIC
  double leaf_weight = 1;  // GPUs of the rank's class behind its leaf uplinks

  bool operator==(const RankPorts&) const = default;
};

// Fraction of a group member's cross-node traffic that leaves its leaf. NCCL's rings (and its
// trees, approximately) visit the group's nodes in rank order, every channel alike and through
// the same NIC on every node, so a member's NIC traffic goes to (and comes from) the member at
// the same place in the next (previous) node, and leaves the leaf where that member sits behind
// another: a leaf's uplinks carry its ring edges to other leaves, whatever the other leaves
// hold (a ring over five nodes under leaves of four: one node's traffic out of each). An
// AllToAll spreads a member's traffic over the members of every other node: the share is the
// part of them behind other leaves. A "node" here is an NVLink domain: inside a GB200 NVL72
// rack the ring runs over NVLink, and all the NIC traffic goes from rack to rack. Per leaf,
// the mean over the group's members behind it.
// A double binary tree (Tree, NVLS-Tree) joins other node pairs than the ring: each member's
// share of its domain's tree edges that end behind another leaf.
struct SpineShare {
  double ring = 0;
  double spread = 0;
  double tree = 0;

  // The share that `op`'s traffic of `load` takes: spread for an AllToAll, tree on a tree.
  double of(CollOp op, const collectives::LinkLoad& load) const {
    if (op == CollOp::alltoall) return spread;
    return load.tree ? tree : ring;
  }

  bool operator==(const SpineShare&) const = default;
};

// The shares of a group's members by leaf (Fabric::spine_shares), and the one behind `leaf`
// (none where the group has no member there).
using LeafShares = std::vector<std::pair<int, SpineShare>>;
SpineShare share_at(const LeafShares& shares, int leaf);

// Representative mode: the load that a simulated rank's communicator puts on one leaf's
// uplinks, per byte of its cross-node load: the spine share of each of its stage's groups of
// the kind, summed over their members behind the leaf (on the rank's rail).
struct LeafLoad {
  network::ResourceId up = 0;
  network::ResourceId down = 0;
  SpineShare share;

  bool operator==(const LeafLoad&) const = default;
};

// Creates each resource once, on first use, under a stable name that other parts (reports,
// degraded links) can look up: "node 3 gpu 2 nvlink tx" ("node 3 gpu 2 pcie tx" on a PCIe
// fabric), "node 3 nic 1 rx", "leaf 2 up" on a fat tree, "leaf 2 rail 1 up" on a
// rail-optimized fabric.
class Fabric {
 public:
  // `host_copies`: copies between the GPUs and host memory cross each GPU's PCIe link too
  // (activation offload over an x86 host's PCIe), so every GPU's link is a resource.
  Fabric(const ClusterSpec& cluster, std::vector<network::Resource>& resources, bool host_copies = false);

  // The ports of global rank `rank`, which stands for the real ranks [first, first + count).
  RankPorts ports(int rank, int first, int count);
  // The uplinks of leaf `leaf` (of rail `rail` on a rail-optimized fabric, −1 on a fat tree);
  // only with an oversubscribed spine.
  LeafLoad leaf_ports(int leaf, int rail);
  // `ranks`: the group's ranks in rank order. The share of the group's members behind each
  // leaf, by leaf; none when no traffic of the group leaves its leaf. A share multiplies the
  // cross-node load of `costed`, the shape the group's collectives are costed on (an uneven
  // group as an even one of its emptiest domain's size, whose load every member then takes):
  // scaled so that the product is what the member really sends across the spine. Without it,
  // the group's own (even) shape.
  LeafShares spine_shares(std::span<const int> ranks,
                          const std::optional<collectives::GroupShape>& costed = std::nullopt) const;
  // The share of the group's members behind `leaf` (none where the group has no member there).
  SpineShare spine_share(std::span<const int> ranks, int leaf,
                         const std::optional<collectives::GroupShape>& costed = std::nullopt) const {
    return share_at(spine_shares(ranks, costed), leaf);
  }
  // The same for the members behind the first leaf of a group on nodes 0 to `nodes` − 1,
  // without listing them: the leaf whose uplinks such a group loads most.
  SpineShare first_nodes_spine_share(int nodes) const;

  int node_of(int rank) const { return rank / gpus_per_node_; }
  int nic_of(int local_gpu) const;  // the NIC a GPU uses, as NCCL maps them: g · nics / gpus
  int leaf_of(int node) const { return node / nodes_per_leaf_; }
  // The rail whose leaf a rank's cross-node traffic goes through; −1 on a fat tree.
  int rail_of(int rank) const { return rails_ ? nic_of(rank % gpus_per_node_) : -1; }
  bool oversubscribed() const { return oversubscription_ > 1.0; }

 private:
  enum class Kind : std::uint8_t { nvlink, nic, leaf, pcie };
  using Key = std::tuple<Kind, int, int, bool>;  // kind, node or leaf, gpu or rail, receive side
  network::ResourceId resource(const Key& key, Bandwidth capacity);
  std::string name(const Key& key) const;
  int count_on_node(int node, int first, int count, int nic) const;  // nic < 0: any NIC

  std::vector<network::Resource>& resources_;
  std::map<Key, network::ResourceId> ids_;
  int gpus_per_node_;
  int domain_gpus_;  // GPUs of one NVLink domain: a node, or a rack of trays
  int nics_per_node_;
  int nodes_per_leaf_;
  double oversubscription_;
  bool rails_;
  bool host_copies_;
  bool pcie_fabric_;  // the GPUs of a node are joined by PCIe only
  Bandwidth nvlink_;
  Bandwidth nic_;        // one GPU's NIC (several NICs when a node has more NICs than GPUs)
  Bandwidth pcie_;       // the line rate of the GPU's PCIe link to its NIC
  Bandwidth node_nics_;  // all NICs of a node
};

// The resource loads of one rank's part of a call: `load` per algorithm byte on its NVLink
// port and on its NIC, the side(s) it uses, and the uplinks for the share that leaves its leaf.
// On a PCIe fabric the GPU's one link carries the intra-node and the cross-node part together.
std::vector<network::ResourceUse> link_uses(const RankPorts& ports, const collectives::LinkLoad& load, Side side,
                                            double spine_share);

// The algorithm bandwidth one collective alone gets on the fabric (its members laid on the
// first ranks of consecutive NVLink domains, as `stepsim collective` assumes, or on `gpus`
// where given: the GPU of each member in rank order, as `--ranks-per-node` places them over a
// domain's trays): its cost model's bandwidth, or less where a shared NIC or an
// oversubscribed uplink limits it.
Bandwidth fabric_bandwidth(const ClusterSpec& cluster, const collectives::Request& request,
                           const collectives::Choice& choice, std::span<const int> gpus = {});

}  // namespace stepsim::parallelism
