// NCCL's graph search as stepsim models it: the NVLS graph's heads and speeds, and the doubling
// of ring/tree channels. The oracle is NCCL 2.28.9's src/graph/search.cc worked by hand: a GPU's
// NVSwitch link is 18 NVLinks of 20.6 GB/s on Hopper (370.8) and of 40.1 GB/s on Blackwell
// (721.8), and the speeds are search.cc's lists.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "cluster_fixtures.hpp"
#include "collectives/algorithm.hpp"
#include "collectives/collective.hpp"
#include "collectives/topology.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;
using collectives::GroupShape;
using collectives::Request;

namespace {

collectives::Graph nvls_graph(const ClusterSpec& cluster, GroupShape shape) {
  return collectives::make_context(cluster, {CollOp::allreduce, Bytes::gib(1), shape}).nvls;
}

collectives::Graph ring_graph(const ClusterSpec& cluster, GroupShape shape) {
  return collectives::make_context(cluster, {CollOp::allreduce, Bytes::gib(1), shape}).ring;
}

void check_graph(const collectives::Graph& g, int channels, double bw_intra, double bw_inter) {
  CHECK(g.channels == channels);
  CHECK(g.bw_intra == Approx(bw_intra));
  CHECK(g.bw_inter == Approx(bw_inter));
}

double estimate_algbw(const ClusterSpec& cluster, Algorithm a, CollOp op, GroupShape shape) {
  const collectives::Context c = collectives::make_context(cluster, {op, Bytes::gib(1), shape});
  return collectives::algorithm_row(a).estimate(c, Protocol::simple).algbw_gbps;
}

bool lists_nvls(const ClusterSpec& cluster, CollOp op, GroupShape shape) {
  const auto all = collectives::candidates(cluster, {}, Request{op, Bytes::mib(64), shape});
  return std::any_of(all.begin(), all.end(),
                     [](const collectives::Choice& x) { return x.algorithm == Algorithm::nvls; });
}

}  // namespace

// Inside one node every GPU heads a channel, up to 32, at the fastest listed speed s with
// (heads + 1) · s within the link: 8 H100 9 · 40 = 360 ≤ 370.8; 8 B200 9 · 80 = 720 ≤ 721.8
// (9 · 90 = 810 is not); 12 GB200 13 · 50; 24 GB200 25 · 24; 72 GB200 32 heads, 33 · 20. The
// second pass then raises bwInter one listed speed at a time up to twice s or the top of the list.
TEST_CASE("NVLS graphs inside one NVLink domain have at most 32 heads that fit on each GPU's link") {
  check_graph(nvls_graph(test::dgx_hopper("dgx-h100-ndr", 1), {8, 1, 8}), 8, 40, 60);
  check_graph(nvls_graph(test::dgx_b200(1), {8, 1, 8}), 8, 80, 90);
  const ClusterSpec rack = test::gb200_nvl72(1);
  check_graph(nvls_graph(rack, {12, 1, 12}), 12, 50, 90);
  check_graph(nvls_graph(rack, {24, 1, 24}), 24, 24, 50);
  check_graph(nvls_graph(rack, {72, 1, 72}), 32, 20, 40);
}

// tuning.cc: an NVLS channel's AllReduce bandwidth is min(2 · bwIntra · 0.74 · (ch − 1) / ch,
// bwInter), times ch · n / (2 (n − 1)) for the algorithm bandwidth: on 8 B200 bwInter (90)
// binds, on 72 GB200 the head count does.
TEST_CASE("the NVLS AllReduce bandwidth is NCCL's for 8 B200 and for one NVL72 rack") {
  CHECK(estimate_algbw(test::dgx_b200(1), Algorithm::nvls, CollOp::allreduce, {8, 1, 8}) == Approx(8 * 90.0 * 8 / 14));
  CHECK(estimate_algbw(test::gb200_nvl72(1), Algorithm::nvls, CollOp::allreduce, {72, 1, 72}) ==
        Approx(32 * (2 * 20 * 0.74 * 31 / 32) * 72 / 142));
}

// Across nodes the heads are GPUs with a NIC and the speeds the inter-node list, from the first
// the NIC path carries (48). 8 H100: 48 fits 6 heads, 45 7, 40 all 8; bwInter then rises to 48.
// 8 B200: 48 fits 14, so all 8. A rack of 72 GB200: 48 fits 14 heads, walking down to 20 fits
// 32; bwInter rises to 40, twice 20. NVLS-Tree on two nodes: min(2 · bwIntra · 0.74 · (ch − 1)
// / ch, 2 · bwInter, 96).
TEST_CASE("NVLS graphs across nodes take the inter-node speeds and keep bwInter within the NIC") {
  check_graph(nvls_graph(test::dgx_hopper("dgx-h100-ndr", 2), {16, 2, 8}), 8, 40, 48);
  check_graph(nvls_graph(test::dgx_b200(2), {16, 2, 8}), 8, 48, 48);
  check_graph(nvls_graph(test::gb200_nvl72(2), {144, 2, 72}), 32, 20, 40);
  CHECK(estimate_algbw(test::dgx_b200(2), Algorithm::nvls_tree, CollOp::allreduce, {16, 2, 8}) ==
        Approx(8 * (2 * 48 * 0.74 * 7 / 8) * 16 / 30));
}

// An NVLS head across nodes is a GPU next to a NIC (search.cc: fewer channels than NICs), and
// tuning.cc wants two channels: 8 H100 behind one NIC per node run no NVLS-Tree.
TEST_CASE("NVLS-Tree needs two GPUs with a NIC of their own per node") {
  ClusterSpec one_nic = test::dgx_hopper("dgx-h100-ndr", 2);
  one_nic.inter_node.nics_per_node = 1;
  CHECK(nvls_graph(one_nic, {16, 2, 8}).channels == 1);
  CHECK_THROWS_WITH(collectives::predict(one_nic, {Algorithm::nvls_tree, Protocol::automatic},
                                         Request{CollOp::allreduce, Bytes::mib(64), {16, 2, 8}}),
                    Catch::Contains("NVLS-Tree needs two NVLS channels, one per GPU with a NIC of its own"));
}

// enqueue.cc skips NVLS for every function but AllReduce when a node holds more than
// NCCL_MAX_NVLS_ARITY (32) ranks; a rack of GB200 is one node.
TEST_CASE("beyond 32 GPUs of one NVLink domain NVLS runs AllReduce only") {
  const ClusterSpec rack = test::gb200_nvl72(1);
  CHECK(lists_nvls(rack, CollOp::allreduce, {72, 1, 72}));
  CHECK_FALSE(lists_nvls(rack, CollOp::allgather, {72, 1, 72}));
  CHECK_FALSE(lists_nvls(rack, CollOp::reducescatter, {36, 1, 36}));
  CHECK(lists_nvls(rack, CollOp::allgather, {32, 1, 32}));
  const Request request{CollOp::allgather, Bytes::mib(64), {72, 1, 72}};
  CHECK(collectives::predict(rack, {}, request).algorithm == Algorithm::ring);
  CHECK_THROWS_WITH(collectives::predict(rack, {Algorithm::nvls, Protocol::automatic}, request),
                    Catch::Contains("beyond 32 GPUs of one NVLink domain NCCL runs NVLS for AllReduce only"));
}

// ncclTopoDupChannels doubles a graph unless bwIntra < 25, or (compute capability above 8.0)
// bwIntra < 50 with more than 4 channels. H100 nodes reach the network at 48 GB/s: 1 or 4
// ranks per node double to 2 × 24 and 8 × 24, 8 ranks per node keep 8 × 48. An A100's 200 Gb/s
// NIC gives 24, below 25: never doubled.
TEST_CASE("ring channels across nodes are doubled as NCCL doubles them") {
  const ClusterSpec h100 = test::dgx_hopper("dgx-h100-ndr", 16);
  check_graph(ring_graph(h100, {16, 16, 1}), 2, 24, 24);
  check_graph(ring_graph(h100, {64, 16, 4}), 8, 24, 24);
  check_graph(ring_graph(h100, {128, 16, 8}), 8, 48, 48);
  check_graph(ring_graph(test::dgx_a100_80g_hdr(16), {16, 16, 1}), 1, 24, 24);
}

// NCCL's model with 2 × 24 channels on 16 H100, one per node, 4 MiB (ppn 1: Tree's network
// latencies everywhere; tree correction 0.8 at 2^16 chunks): Tree LL128 bus bandwidth
// min(min(0.92 · 48, 2 · 36) · 120/128, 2 · 29) · 0.85 = 35.19, algorithm bandwidth half of it
// times 0.8, latency 14 + 2 · 4 · 8.5 = 82 us: 82 + 4194304 / 14076 = 380.0 us, faster than
// Ring LL128 at 14 + 30 · 8.5 + 4194304 / (0.92 · 48 · 16 / 30 · 1000) = 447.1 us.
TEST_CASE("a one-rank-per-node AllReduce on H100 runs Tree LL128 at 4 MiB as NCCL does") {
  const ClusterSpec h100 = test::dgx_hopper("dgx-h100-ndr", 16);
  const collectives::Choice c = collectives::predict(h100, {}, Request{CollOp::allreduce, Bytes::mib(4), {16, 16, 1}});
  CHECK(c.algorithm == Algorithm::tree);
  CHECK(c.protocol == Protocol::ll128);
  CHECK(c.channels == 2);
  CHECK(c.nccl_time.us() == Approx(380.0).epsilon(1e-3));
}

// A ring channel across nodes runs over the NVLink of every member of a node but the one its
// NIC leads out from, and NCCL's search takes its speed off each (search.cc): on NVLink domains
// of 72 GPUs (18 × 40.1 = 721.8 GB/s a GPU) 16 channels need 16 · s ≤ 721.8. Pass 1 from the
// NIC's speed: 96 (800 Gb/s) fits 7 channels (672), 48 fits 15 (720), 45.1 fits 16 (721.6),
// nothing lower beats it and 22 / 45.1 ≤ 0.49 ends the walk; 45.1 < 50 with 16 channels is not
// doubled. The graph is the same behind 400 and 800 Gb/s NICs, so NCCL's model rates the ring
// at 16 · 45.1 = 721.6 GB/s of bus bandwidth and runs NVLS-Tree for 4 GiB on two racks: ring
// 1427.8 us of latency + 4 GiB / (721.6 · 144 / 286 GB/s) = 13249 us against NVLS-Tree's 9363.
// Eight ranks a node keep 8 × 48 on H100 (7 channels on a link, 336 ≤ 370.8) and on B200.
TEST_CASE("ring channels across NVLink domains fit each GPU's NVLink as NCCL's search fits them") {
  const ClusterSpec racks = test::gb200_nvl72(2);
  ClusterSpec cx8 = racks;
  cx8.inter_node.nic_bandwidth = Bandwidth::gbits_per_s(800);
  for (const ClusterSpec& c : {racks, cx8}) {
    const collectives::Graph g = ring_graph(c, {144, 2, 72});
    CHECK(g.channels == 16);
    CHECK(g.bw_intra == Approx(45.1).epsilon(1e-3));
    CHECK(g.bw_inter == Approx(45.1).epsilon(1e-3));
    const collectives::Choice choice = collectives::predict(c, {}, {CollOp::allreduce, Bytes::gib(4), {144, 2, 72}});
    CHECK(choice.algorithm == Algorithm::nvls_tree);
    CHECK(choice.nccl_time.us() == Approx(9363.1).epsilon(1e-4));
  }
  check_graph(ring_graph(test::dgx_hopper("dgx-h100-ndr", 16), {128, 16, 8}), 8, 48, 48);
  check_graph(ring_graph(test::dgx_b200(16), {128, 16, 8}), 8, 48, 48);
}

// Inside one node NCCL's search (search.cc, ncclTopoCompute) does not stop at the first listed
// speed whose channels fit: unless they fill the link it tries each slower speed while it is
// above 0.49 of the best graph's, keeping the graph of the larger channels x speed
// (ncclTopoCompareGraphs), and then duplicates it (ncclTopoDupChannels). By hand, on the
// Hopper list 60, 50, 40, 30, 24, 20, 15: 8 NVLinks of 20.6 GB/s (164.8) give 2 x 60 = 120,
// 3 x 50 = 150, 4 x 40 = 160, then 5 x 30, 6 x 24 and 8 x 20 are no larger and 15 is below
// 0.49 x 40: 4 x 40, doubled (4 channels) to 8 x 20. A Gen5 PCIe link (48) gives 1 x 40, 1 x 30,
// then 2 x 24 = 48 fills it (24 < 25: not doubled); an A100's Gen4 link (24), on the Ampere list
// 40, 30, 20, 18, 15, 12: 1 x 20, then 2 x 12 = 24. The presets' links are filled best by their
// first speed: 18 H100 NVLinks 6 x 60 (12 x 30 doubled), 18 B200 NVLinks 8 x 90, 12 A100 6 x 40.
TEST_CASE("a node's ring graph has the most channels x speed NCCL's search finds, not its first fit") {
  ClusterSpec h800 = test::dgx_hopper("h100-8-nvlinks", 1);
  h800.intra_node.bandwidth = Bandwidth::gbytes_per_s(200);
  check_graph(ring_graph(h800, {8, 1, 8}), 8, 20, 20);
  ClusterSpec pcie = test::dgx_hopper("h100-pcie", 1);
  pcie.intra_node.fabric = IntraFabric::pcie;
  pcie.intra_node.nvls = false;
  pcie.intra_node.bandwidth = Bandwidth::gbytes_per_s(64);
  check_graph(ring_graph(pcie, {8, 1, 8}), 2, 24, 24);
  ClusterSpec a100_pcie = test::dgx_a100_80g_hdr(1);
  a100_pcie.intra_node.fabric = IntraFabric::pcie;
  a100_pcie.intra_node.bandwidth = Bandwidth::gbytes_per_s(32);
  check_graph(ring_graph(a100_pcie, {8, 1, 8}), 2, 12, 12);
  check_graph(ring_graph(test::dgx_hopper("dgx-h100-ndr", 1), {8, 1, 8}), 12, 30, 30);
  check_graph(ring_graph(test::dgx_b200(1), {8, 1, 8}), 16, 45, 45);
  check_graph(ring_graph(test::dgx_a100_80g_hdr(1), {8, 1, 8}), 12, 20, 20);
}

// With one GPU of the communicator per node NCCL's search makes the tree's pattern TREE on any
// GPU (search.cc: "if (ngpus == 1) if (graph->pattern != NCCL_TOPO_PATTERN_RING) graph->pattern
// = NCCL_TOPO_PATTERN_TREE"), and tuning.cc takes 15 % off a TREE-pattern tree whatever the
// architecture. 8 A100 nodes, one GPU each: one 24 GB/s channel, Tree Simple bus bandwidth
// min(0.92 x 24, 17.8) x 0.85 = 15.13, algorithm bandwidth half of it (1 GiB: no size
// correction). Eight A100 per node keep NCCL's balanced tree: min(0.92 x 8 x 24, 8 x 23.6) / 2.
TEST_CASE("a tree with one GPU per node is NCCL's TREE pattern on Ampere too") {
  const ClusterSpec a100 = test::dgx_a100_80g_hdr(16);
  CHECK(estimate_algbw(a100, Algorithm::tree, CollOp::allreduce, {8, 8, 1}) == Approx(17.8 * 0.85 / 2));
  CHECK(estimate_algbw(a100, Algorithm::tree, CollOp::allreduce, {16, 2, 8}) == Approx(0.92 * 8 * 24 / 2));
}

// NCCL's ring plateau (tuning.cc, ncclTopoGetAlgoTime: Simple AllReduce latency x 1.4 across
// nodes) starts where nBytes / (comm->nChannels * nRanks) reaches 64, comm->nChannels being
// the graph's channels doubled by ncclTopoPostset (connect.cc): 16 on two DGX H100 (8 x 48).
// Ring Simple there: 8.4 + 28 x 3.4 + 2 x 14 = 131.6 us of latency and 8 x 48 x 16 / 30 GB/s,
// so 8 KiB (8192 / 256 = 32) costs 131.64 us and 16 KiB (64) 1.4 x 131.6 + 0.08 = 184.32 us.
TEST_CASE("the ring plateau starts where NCCL's doubled channel count puts it") {
  const ClusterSpec h100 = test::dgx_hopper("dgx-h100-ndr", 2);
  const auto ring_simple = [&](Bytes size) {
    return collectives::predict(h100, {Algorithm::ring, Protocol::simple}, Request{CollOp::allreduce, size, {16, 2, 8}})
        .nccl_time.us();
  };
  CHECK(ring_simple(Bytes::kib(8)) == Approx(131.6 + 8192 / (8 * 48 * 16 / 30.0 * 1e3)).epsilon(1e-5));
  CHECK(ring_simple(Bytes::kib(12)) == Approx(131.6 + 12288 / (8 * 48 * 16 / 30.0 * 1e3)).epsilon(1e-5));
  CHECK(ring_simple(Bytes::kib(16)) == Approx(1.4 * 131.6 + 16384 / (8 * 48 * 16 / 30.0 * 1e3)).epsilon(1e-5));
}

// NCCL's Tree correction (tuning.cc, ncclTopoGetAlgoTime) indexes its table by
// log2i(nBytes >> 6) and applies it only for an index from 0 to 22: below 64 B the index is
// log2Down(0) = -1 (bitops.h), so no factor, where the Simple row's first entry is 0.9; from
// 64 B the table's 0.9 applies, and from 512 MiB (index 23) none again.
TEST_CASE("NCCL's Tree correction leaves buffers below 64 bytes alone") {
  CHECK(collectives::tree_correction(Protocol::simple, 32) == 1.0);
  CHECK(collectives::tree_correction(Protocol::simple, 63) == 1.0);
  CHECK(collectives::tree_correction(Protocol::simple, 64) == Approx(0.9));
  CHECK(collectives::tree_correction(Protocol::ll, 1 << 20) == Approx(0.5));
  CHECK(collectives::tree_correction(Protocol::simple, 536870912.0) == 1.0);
}
