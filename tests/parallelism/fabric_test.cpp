// The network's named, directional resources: which NIC a GPU uses, what a simulated rank
// standing for many GPUs loads, and where an oversubscribed spine is shared.
#include "parallelism/fabric.hpp"

#include <catch2/catch.hpp>

#include <array>

#include "network/max_min.hpp"

namespace sp = stepsim::parallelism;
using stepsim::Bandwidth;
using stepsim::ClusterSpec;
using stepsim::InterTopology;

namespace {

// 8 GPUs per node at 450 GB/s NVLink, `nics` NICs of 50 GB/s (400 Gb/s).
ClusterSpec cluster(int nics, double oversubscription = 1, int nodes_per_leaf = 1,
                    InterTopology topology = InterTopology::fat_tree) {
  ClusterSpec c;
  c.nodes = 16;
  c.gpus_per_node = 8;
  c.intra_node.bandwidth = Bandwidth::gbytes_per_s(450);
  c.inter_node.nics_per_node = nics;
  c.inter_node.nic_bandwidth = Bandwidth::gbytes_per_s(50);
  c.inter_node.oversubscription = oversubscription;
  c.inter_node.nodes_per_leaf = nodes_per_leaf;
  c.inter_node.topology = topology;
  return c;
}

// GPU 0 of each of `nodes`: a group of one rank per node of 8 GPUs.
std::vector<int> first_gpus(std::initializer_list<int> nodes) {
  std::vector<int> ranks;
  for (const int n : nodes) ranks.push_back(n * 8);
  return ranks;
}

}  // namespace

TEST_CASE("a GPU's traffic leaves through the NIC NCCL maps it to, and two GPUs share it with 4 NICs") {
  std::vector<stepsim::network::Resource> resources;
  sp::Fabric fabric(cluster(4), resources);
  const sp::RankPorts p = fabric.ports(11, 11, 1);  // node 1, GPU 3: NIC 3 · 4 / 8 = 1
  CHECK(resources[p.nvlink_tx].name == "node 1 gpu 3 nvlink tx");
  CHECK(resources[p.nvlink_rx].name == "node 1 gpu 3 nvlink rx");
  CHECK(resources[p.nic_tx].name == "node 1 nic 1 tx");
  CHECK(resources[p.nic_rx].name == "node 1 nic 1 rx");
  CHECK(resources[p.nic_tx].capacity.gbytes_per_s() == Approx(50));
  CHECK(!p.spine);
  const sp::RankPorts q = fabric.ports(10, 10, 1);  // GPU 2 shares NIC 1, not its NVLink port
  CHECK(q.nic_tx == p.nic_tx);
  CHECK(q.nvlink_tx != p.nvlink_tx);
  CHECK(resources[fabric.ports(12, 12, 1).nic_tx].name == "node 1 nic 2 tx");
  CHECK(resources.size() == 10);  // each resource is created once
}

TEST_CASE("a simulated rank standing for its stage loads its NIC for every GPU of the stage on it") {
  std::vector<stepsim::network::Resource> resources;
  sp::Fabric four(cluster(4), resources);
  CHECK(four.ports(0, 0, 64).nic_weight == 2);
  CHECK(four.ports(0, 0, 1).nic_weight == 1);  // all-ranks mode: each GPU for itself
  std::vector<stepsim::network::Resource> more;
  sp::Fabric eight(cluster(8), more);
  CHECK(eight.ports(0, 0, 64).nic_weight == 1);
}

TEST_CASE("a fat tree's leaf pools its uplinks and a rail-optimized fabric gives each rail its own") {
  std::vector<stepsim::network::Resource> resources;
  sp::Fabric fat(cluster(8, 2, 2), resources);
  const sp::RankPorts p = fat.ports(16, 16, 48);  // node 2, the first of leaf 1
  REQUIRE(p.spine);
  CHECK(resources[p.leaf_up].name == "leaf 1 up");
  CHECK(resources[p.leaf_down].name == "leaf 1 down");
  // 2 nodes · 8 NICs · 50 GB/s / 2
  CHECK(resources[p.leaf_up].capacity.gbytes_per_s() == Approx(400));
  CHECK(p.leaf_weight == 16);  // both nodes of leaf 1 belong to the stage
  std::vector<stepsim::network::Resource> rail_resources;
  sp::Fabric rail(cluster(8, 2, 2, InterTopology::rail_optimized), rail_resources);
  const sp::RankPorts r = rail.ports(17, 16, 48);  // GPU 1 of node 2: rail 1
  CHECK(rail_resources[r.leaf_up].name == "leaf 1 rail 1 up");
  CHECK(rail_resources[r.leaf_up].capacity.gbytes_per_s() == Approx(50));  // 2 nodes · 50 GB/s / 2
  CHECK(r.leaf_weight == 2);
  std::vector<stepsim::network::Resource> open;
  CHECK(!sp::Fabric(cluster(8, 1, 2), open).ports(0, 0, 1).spine);  // a non-blocking spine limits nothing
}

TEST_CASE("a ring crosses the spine once per change of leaf and an all-to-all to every other leaf's nodes") {
  std::vector<stepsim::network::Resource> resources;
  sp::Fabric fabric(cluster(8, 2, 4), resources);
  const std::vector<int> eight = first_gpus({0, 1, 2, 3, 4, 5, 6, 7});
  for (const int leaf : {0, 1}) {
    const sp::SpineShare s = fabric.spine_share(eight, leaf);
    CHECK(s.ring == Approx(1.0 / 4));    // hop 3→4 (7→0) out of the leaf's 4 nodes
    CHECK(s.spread == Approx(4.0 / 7));  // 4 of each node's 7 peers sit in the other leaf
  }
  CHECK(fabric.spine_share(eight, 2) == sp::SpineShare{});  // no node of the group there
  const std::vector<int> same_leaf = first_gpus({0, 1, 2, 3});
  CHECK(fabric.spine_shares(same_leaf).empty());
  CHECK(fabric.spine_share(same_leaf, 0) == sp::SpineShare{});
}

// NCCL's double binary tree over 8 nodes (trees.cc): the binary tree 0-4, 4-2, 4-6, 2-1, 2-3,
// 6-5, 6-7 and its mirror 7-3, 3-5, 3-1, 5-6, 5-4, 1-2, 1-0. Of them 0-4, 2-4, 3-7 and 3-5
// join the leaves {0..3} and {4..7}: each edge carries half the buffer each way, so 2 buffers
// leave each leaf per algorithm byte, where the Tree's load is 2·7/8 = 1.75 buffers a node:
// a share of 2 / (4 · 1.75) = 2/7 a member, above the ring's 1/4 (one edge of 1.75 out of four
// nodes). Over 5 nodes under leaves of 4 the tree 4-0, 2-4, 1-2, 3-2 and its shift by one 0-1,
// 2-3, 3-0, 4-3 join node 4 to the first leaf by 3 edges: 1.5 buffers each way against the
// lone node's 2·4/5 = 1.6 (share 0.9375), and the first leaf's three members with one each
// (3 · 0.5 / 1.6 / 4 = 0.234375 a member).
TEST_CASE("a double binary tree crosses the spine on its own edges, not the ring's") {
  std::vector<stepsim::network::Resource> resources;
  sp::Fabric fabric(cluster(8, 4, 4), resources);
  const std::vector<int> eight = first_gpus({0, 1, 2, 3, 4, 5, 6, 7});
  for (const int leaf : {0, 1}) CHECK(fabric.spine_share(eight, leaf).tree == Approx(2.0 / 7));
  CHECK(fabric.first_nodes_spine_share(8).tree == Approx(2.0 / 7));
  const std::vector<int> five = first_gpus({0, 1, 2, 3, 4});
  CHECK(fabric.spine_share(five, 0).tree == Approx(0.234375));
  CHECK(fabric.spine_share(five, 1).tree == Approx(0.9375));
  CHECK(fabric.first_nodes_spine_share(5).tree == Approx(0.234375));  // the busiest leaf's 1.5 over 4 nodes
  // A Tree AllReduce over all 64 GPUs of the 8 nodes: each GPU's NIC (50 GB/s) carries 1.75/8
  // of the algorithm bandwidth (228.57 GB/s at most), each leaf's uplinks (4 nodes · 8 NICs ·
  // 50 GB/s / 4 = 400 GB/s) 2 of it: 200 GB/s, where the ring's share would let 228.57 through.
  const stepsim::collectives::Request request{stepsim::CollOp::allreduce, stepsim::Bytes::mib(64), {64, 8, 8}};
  stepsim::collectives::Choice choice;
  choice.algorithm = stepsim::Algorithm::tree;
  choice.algbw = Bandwidth::gbytes_per_s(400);
  CHECK(sp::fabric_bandwidth(cluster(8, 4, 4), request, choice).gbytes_per_s() == Approx(200));
}

TEST_CASE("a SendRecv loads its sender's transmit side and its receiver's receive side") {
  std::vector<stepsim::network::Resource> resources;
  sp::Fabric fabric(cluster(8, 2), resources);
  const sp::RankPorts p = fabric.ports(0, 0, 1);
  const auto names = [&](const std::vector<stepsim::network::ResourceUse>& uses) {
    std::vector<std::string> out;
    for (const auto& u : uses) out.push_back(resources[u.resource].name + " " + std::to_string(u.weight));
    return out;
  };
  CHECK(names(sp::link_uses(p, {0, 1}, sp::Side::tx, 1)) ==
        std::vector<std::string>{"node 0 nic 0 tx 1.000000", "leaf 0 up 1.000000"});
  CHECK(names(sp::link_uses(p, {0, 1}, sp::Side::rx, 1)) ==
        std::vector<std::string>{"node 0 nic 0 rx 1.000000", "leaf 0 down 1.000000"});
  CHECK(names(sp::link_uses(p, {1.5, 0}, sp::Side::both, 1)) ==
        std::vector<std::string>{"node 0 gpu 0 nvlink tx 1.500000", "node 0 gpu 0 nvlink rx 1.500000"});
}

// Five nodes under leaves of four: leaf 0 holds nodes 0 to 3, leaf 1 node 4. NCCL's ring
// 0→1→2→3→4→0 leaves leaf 0 once (3→4) and enters it once (4→0), each edge carrying what one
// ring node sends, so leaf 0's uplinks carry one node's ring traffic, shared by its 4 nodes
// (1/4 each), and leaf 1's the same from its one node (1). Averaged over the group, 2 changes
// of leaf over 5 nodes, each member would put 2/5 on its uplinks and leaf 0 1.6 nodes' worth.
// An all-to-all member of leaf 0 sends to 1 of its 4 peer nodes across the spine, the member
// of leaf 1 to all 4.
TEST_CASE("each leaf's uplinks carry the ring edges that leave it, whatever the other leaves hold") {
  std::vector<stepsim::network::Resource> resources;
  const sp::Fabric fabric(cluster(8, 8, 4), resources);
  const std::vector<int> five = first_gpus({0, 1, 2, 3, 4});
  CHECK(fabric.spine_share(five, 0).ring == Approx(1.0 / 4));
  CHECK(fabric.spine_share(five, 1).ring == Approx(1.0));
  CHECK(fabric.spine_share(five, 0).spread == Approx(1.0 / 4));
  CHECK(fabric.spine_share(five, 1).spread == Approx(1.0));
  // Three leaves of three nodes each hold two of the DP group 0, 16, 32, 48 of TP 16 x DP 4
  // (nodes 0, 2, 4, 6 under leaves 0, 0, 1, 2): one edge leaves each of them.
  const std::vector<int> spaced = first_gpus({0, 2, 4, 6});
  std::vector<stepsim::network::Resource> three;
  const sp::Fabric by_three(cluster(8, 4, 3), three);
  CHECK(by_three.spine_share(spaced, 0).ring == Approx(1.0 / 2));
  CHECK(by_three.spine_share(spaced, 1).ring == Approx(1.0));
  CHECK(by_three.spine_share(spaced, 2).ring == Approx(1.0));
}

// A GB200 NVL72 rack is 18 trays of 4 GPUs joined by NVLink: NCCL treats it as one node, so a
// group over two racks rings over NVLink inside each and sends all its NIC traffic from rack
// to rack, the member at each place to the member at the same place in the other rack. Under
// leaves of 18 trays (one per rack) all of it crosses the spine, under leaves of 4 trays too;
// under leaves of 36 trays (both racks) none. Counting the trays as the ring's hops had put
// 1/18 (2 changes of leaf over 36 trays) and 1/4 on the uplinks. An all-to-all member sends
// to the other rack's 18 members: all behind another leaf but where its leaf holds trays of
// both racks (leaf 4 of four-tray leaves: trays 16 and 17 of rack 0, 18 and 19 of rack 1),
// 16 of 18 there.
TEST_CASE("a group over NVLink domains sends its NIC traffic from domain to domain") {
  for (const auto& [per_leaf, share] : {std::pair{18, 1.0}, std::pair{4, 1.0}, std::pair{36, 0.0}}) {
    ClusterSpec c = cluster(4, 8, per_leaf);
    c.gpus_per_node = 4;
    c.nvlink_domain = 72;
    std::vector<stepsim::network::Resource> resources;
    const sp::Fabric fabric(c, resources);
    std::vector<int> one_per_tray;  // TP 4 x DP 36: GPU 0 of each of the 36 trays
    for (int tray = 0; tray < 36; ++tray) one_per_tray.push_back(tray * 4);
    INFO(per_leaf << " trays per leaf");
    for (const int tray : {0, 5, 17, 18, 35}) {
      const sp::SpineShare s = fabric.spine_share(one_per_tray, fabric.leaf_of(tray));
      CHECK(s.ring == Approx(share));
      CHECK(s.spread == Approx(tray == 17 || tray == 18 ? (per_leaf == 4 ? 16.0 / 18 : share) : share));
    }
  }
}

// An uneven group is costed as an even one of its emptiest domain's size, whose cross-domain
// load every member then takes: EP 64 over ranks 64 to 127 of two NVL72 racks has 8 members in
// rack 0 and 56 in rack 1, costed as 8 domains of 8, so each member's NIC load is 7/8 of its
// all-to-all buffer (56 of its 64 peers outside its domain). A rack-0 member really sends 56/64
// of it to rack 1, behind the other leaf (one leaf per rack): share 1. A rack-1 member sends
// only 8/64 across, 1/7 of what it is costed: share 1/7, so that rack 1's uplinks carry
// 56 · 8/64 = 7 buffers, as rack 0's do (8 · 56/64), not 49. A ring's traffic out of a rack is
// one edge's, over the rack's members: 8 members share it in rack 0 as costed, 56 in rack 1.
TEST_CASE("a group costed as an even one shares the spine by what its members really send") {
  ClusterSpec c = cluster(4, 4, 18);
  c.gpus_per_node = 4;
  c.nvlink_domain = 72;
  std::vector<stepsim::network::Resource> resources;
  const sp::Fabric fabric(c, resources);
  std::vector<int> ep;
  for (int r = 64; r < 128; ++r) ep.push_back(r);
  const stepsim::collectives::GroupShape costed{64, 8, 8};
  CHECK(fabric.spine_share(ep, 0, costed).spread == Approx(1.0));
  CHECK(fabric.spine_share(ep, 1, costed).spread == Approx(1.0 / 7));
  CHECK(fabric.spine_share(ep, 0, costed).ring == Approx(1.0));
  CHECK(fabric.spine_share(ep, 1, costed).ring == Approx(1.0 / 7));
}

TEST_CASE("the spine share of a group on the first nodes is the one its listed nodes give on the first leaf") {
  for (int per_leaf : {1, 2, 3, 4, 7}) {
    std::vector<stepsim::network::Resource> resources;
    const sp::Fabric fabric(cluster(8, 2, per_leaf), resources);
    std::vector<int> ranks;
    for (int n = 1; n <= 20; ++n) {
      ranks.push_back((n - 1) * 8);
      INFO("nodes " << n << ", " << per_leaf << " per leaf");
      CHECK(fabric.first_nodes_spine_share(n).ring == Approx(fabric.spine_share(ranks, 0).ring));
      CHECK(fabric.first_nodes_spine_share(n).spread == Approx(fabric.spine_share(ranks, 0).spread));
    }
  }
}

namespace {

// Every member of the group on the first ranks of consecutive nodes, each with its own
// ports, in one lone flow: what stepsim collective's bandwidth must equal.
double every_member_bandwidth(const ClusterSpec& c, const stepsim::collectives::Request& request,
                              const stepsim::collectives::Choice& choice) {
  std::vector<stepsim::network::Resource> resources;
  sp::Fabric fabric(c, resources);
  std::vector<int> ranks;
  for (int node = 0; node < request.shape.nodes; ++node) {
    for (int g = 0; g < request.shape.ranks_per_node; ++g) ranks.push_back(node * c.gpus_per_node + g);
  }
  const auto load = stepsim::collectives::link_load(request, choice);
  std::vector<stepsim::network::ResourceUse> uses;
  for (int r : ranks) {
    const double spine = fabric.spine_share(ranks, fabric.leaf_of(fabric.node_of(r))).of(request.op, load);
    for (const auto& u : sp::link_uses(fabric.ports(r, r, 1), load, sp::Side::both, spine)) uses.push_back(u);
  }
  stepsim::network::MaxMinSolver solver(resources);
  const std::array<stepsim::network::FlowDemand, 1> flow{{{choice.algbw, uses}}};
  return solver.solve(flow)[0];
}

}  // namespace

TEST_CASE("a collective's fabric bandwidth is the one every member's ports give, from one node's members") {
  using stepsim::collectives::Choice;
  for (const InterTopology topology : {InterTopology::fat_tree, InterTopology::rail_optimized}) {
    for (const double over : {1.0, 2.0, 4.0}) {
      for (const int per_leaf : {1, 3, 4}) {
        const ClusterSpec c = cluster(4, over, per_leaf, topology);
        for (const auto op : {stepsim::CollOp::allreduce, stepsim::CollOp::alltoall}) {
          for (const stepsim::collectives::GroupShape shape : std::initializer_list<stepsim::collectives::GroupShape>{
                   {8, 1, 8}, {16, 2, 8}, {40, 5, 8}, {9, 9, 1}, {22, 11, 2}}) {
            for (const auto algorithm :
                 {stepsim::Algorithm::ring, stepsim::Algorithm::tree, stepsim::Algorithm::direct}) {
              const stepsim::collectives::Request request{op, stepsim::Bytes::mib(64), shape};
              Choice choice;
              choice.algorithm = algorithm;
              choice.algbw = Bandwidth::gbytes_per_s(400);
              INFO("shape " << shape.ranks << "/" << shape.nodes << ", oversubscription " << over << ", per leaf "
                            << per_leaf);
              CHECK(sp::fabric_bandwidth(c, request, choice).bytes_per_s() ==
                    Approx(every_member_bandwidth(c, request, choice)).epsilon(1e-12));
            }
          }
        }
      }
    }
  }
}

namespace {

// 8 A100 per node joined by PCIe only, each GPU's x16 link at 32 GB/s, and 8 NICs of
// 400 Gb/s (50 GB/s), faster than that link.
ClusterSpec pcie_cluster() {
  ClusterSpec c = cluster(8);
  c.gpu.arch = stepsim::GpuArch::ampere;
  c.intra_node.fabric = stepsim::IntraFabric::pcie;
  c.intra_node.bandwidth = Bandwidth::gbytes_per_s(32);
  c.intra_node.nvls = false;
  return c;
}

}  // namespace

// A PCIe GPU sends to its peers and to its NIC (GPUDirect RDMA: GPU, PCIe switch, NIC) over its
// one x16 link: its port to the peers is that link, which its NIC traffic crosses too.
TEST_CASE("on a PCIe fabric a GPU's peers and its NIC are reached over its one PCIe link") {
  std::vector<stepsim::network::Resource> resources;
  sp::Fabric fabric(pcie_cluster(), resources);
  const sp::RankPorts p = fabric.ports(11, 11, 1);
  CHECK(p.pcie);
  CHECK(p.nvlink_tx == p.pcie_tx);
  CHECK(p.nvlink_rx == p.pcie_rx);
  CHECK(resources[p.pcie_tx].name == "node 1 gpu 3 pcie tx");
  CHECK(resources[p.pcie_rx].name == "node 1 gpu 3 pcie rx");
  CHECK(resources[p.pcie_tx].capacity.gbytes_per_s() == Approx(32));
  // A ring member on 2 nodes of 8 moves 1.875 bytes per algorithm byte in all, 1.640625 to its
  // peers and 0.234375 to its NIC: all of it over the link, the NIC's part over the NIC too.
  const auto uses = sp::link_uses(p, {1.640625, 0.234375}, sp::Side::tx, 0);
  REQUIRE(uses.size() == 2);
  CHECK(uses[0].resource == p.pcie_tx);
  CHECK(uses[0].weight == Approx(1.875));
  CHECK(uses[1].resource == p.nic_tx);
  CHECK(uses[1].weight == Approx(0.234375));
}

// Each member of a ring or tree AllReduce over n GPUs moves 2(n − 1)/n of the buffer out of
// its GPU and as much in, all of it over the GPU's one 32 GB/s link: the bus bandwidth can
// never pass the link's, however many nodes the group spans (nor an AllGather's, (n − 1)/n).
TEST_CASE("on a PCIe fabric a collective's bus bandwidth never passes the GPU's PCIe link, on any number of nodes") {
  const ClusterSpec c = pcie_cluster();
  for (const auto op : {stepsim::CollOp::allreduce, stepsim::CollOp::allgather, stepsim::CollOp::reducescatter}) {
    for (const stepsim::collectives::GroupShape shape : std::initializer_list<stepsim::collectives::GroupShape>{
             {8, 1, 8}, {16, 2, 8}, {32, 4, 8}, {64, 8, 8}, {32, 8, 4}}) {
      for (const auto algorithm : {stepsim::Algorithm::ring, stepsim::Algorithm::tree}) {
        if (algorithm == stepsim::Algorithm::tree && op != stepsim::CollOp::allreduce) continue;
        const stepsim::collectives::Request request{op, stepsim::Bytes::gib(4), shape};
        stepsim::collectives::Choice choice;
        choice.algorithm = algorithm;
        choice.algbw = Bandwidth::gbytes_per_s(400);
        const double per_byte = stepsim::collectives::bus_factor(op, shape.ranks);
        INFO(stepsim::collectives::to_string(algorithm)
             << " over " << shape.ranks << " GPUs on " << shape.nodes << " nodes");
        CHECK(sp::fabric_bandwidth(c, request, choice).gbytes_per_s() * per_byte <= Approx(32).epsilon(1e-12));
      }
    }
  }
}
