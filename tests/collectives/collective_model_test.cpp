// NCCL's cost model: bus factors, protocol and algorithm choice, forcing, link loads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cluster_fixtures.hpp"
#include "collectives/algorithm.hpp"
#include "collectives/collective.hpp"
#include "collectives/topology.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;
using collectives::Request;

namespace {

collectives::Choice choose(const ClusterSpec& c, CollOp op, Bytes size, collectives::GroupShape shape,
                           CollectivesSpec forced = {}) {
  return collectives::predict(c, forced, Request{op, size, shape});
}

std::string error_of(const ClusterSpec& c, CollOp op, CollectivesSpec forced) {
  try {
    choose(c, op, Bytes::mib(64), {8, 1, 8}, forced);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("bus factors follow nccl-tests") {
  CHECK(collectives::bus_factor(CollOp::allreduce, 8) == Approx(1.75));
  CHECK(collectives::bus_factor(CollOp::allgather, 8) == Approx(0.875));
  CHECK(collectives::bus_factor(CollOp::reducescatter, 4) == Approx(0.75));
  CHECK(collectives::bus_factor(CollOp::alltoall, 2) == Approx(0.5));
  CHECK(collectives::bus_factor(CollOp::broadcast, 8) == Approx(1.0));
  CHECK(collectives::bus_factor(CollOp::sendrecv, 8) == Approx(1.0));
}

TEST_CASE("small messages use LL and large ones Simple") {
  const ClusterSpec a100 = test::dgx_a100_80g_hdr(1);
  CHECK(choose(a100, CollOp::allreduce, Bytes(1024), {8, 1, 8}).protocol == Protocol::ll);
  CHECK(choose(a100, CollOp::allreduce, Bytes::mib(4), {8, 1, 8}).protocol == Protocol::ll128);
  const auto large = choose(a100, CollOp::allreduce, Bytes::gib(1), {8, 1, 8});
  CHECK(large.protocol == Protocol::simple);
  CHECK(large.algorithm == Algorithm::ring);
}

TEST_CASE("the unfitted NCCL model gives 240 GB/s ring busbw on 8 A100") {
  ClusterSpec a100 = test::dgx_a100_80g_hdr(1);
  a100.tuning = {};
  const auto c = choose(a100, CollOp::allreduce, Bytes::gib(64), {8, 1, 8}, {Algorithm::ring, Protocol::simple});
  CHECK(c.algbw.gbytes_per_s() * 1.75 == Approx(240.0));
  CHECK(c.latency.us() == Approx(8.4 + 14 * 3.4));
  CHECK(c.channels == 12);
}

TEST_CASE("a forced pair is used as given") {
  const ClusterSpec h100 = test::dgx_hopper("dgx-h100-ndr", 1);
  const auto c = choose(h100, CollOp::allreduce, Bytes::gib(1), {8, 1, 8}, {Algorithm::ring, Protocol::ll});
  CHECK(c.algorithm == Algorithm::ring);
  CHECK(c.protocol == Protocol::ll);
}

TEST_CASE("forcing NVLS on A100 names the key and the choices") {
  const ClusterSpec a100 = test::dgx_a100_80g_hdr(1);
  CHECK(error_of(a100, CollOp::allreduce, {Algorithm::nvls, Protocol::automatic}) ==
        "/collectives/algorithm: 'nvls' does not apply to AllReduce on 8 GPUs over 1 node(s): the cluster has no "
        "NVLink SHARP (intra_node.nvls is false or the GPU predates Hopper) (choices: auto, tree, ring)");
}

TEST_CASE("forcing PAT for AllReduce is an input error") {
  const ClusterSpec h100 = test::dgx_hopper("dgx-h100-ndr", 1);
  CHECK(error_of(h100, CollOp::allreduce, {Algorithm::pat, Protocol::automatic}) ==
        "/collectives/algorithm: 'pat' does not apply to AllReduce on 8 GPUs over 1 node(s): it does not implement "
        "AllReduce (choices: auto, tree, ring, nvls)");
}

// On NVL72 racks NCCL's node is the rack (multi-node NVLink), and the collective's header counts
// its trays and racks apart: a refusal names racks as NVLink domains, not as nodes.
TEST_CASE("forcing an algorithm on NVL72 racks names NVLink domains, not nodes") {
  const ClusterSpec racks = test::gb200_nvl72(2);
  const auto error = [&](Algorithm a, collectives::GroupShape shape) {
    try {
      choose(racks, CollOp::allreduce, Bytes::gib(1), shape, {a, Protocol::automatic});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error(Algorithm::nvls, {144, 2, 72}) ==
        "/collectives/algorithm: 'nvls' does not apply to AllReduce on 144 GPUs over 2 NVLink domain(s): NVLS spans "
        "one NVLink domain; across NVLink domains it needs CollNet, which is off (choices: auto, tree, ring, "
        "nvls-tree)");
  CHECK(error(Algorithm::nvls_tree, {72, 1, 72}) ==
        "/collectives/algorithm: 'nvls-tree' does not apply to AllReduce on 72 GPUs over 1 NVLink domain(s): "
        "NVLS-Tree needs more than one NVLink domain (choices: auto, tree, ring, nvls)");
}

TEST_CASE("forcing LL on NVLS is an input error on the protocol") {
  const ClusterSpec h100 = test::dgx_hopper("dgx-h100-ndr", 1);
  CHECK_THROWS_AS(choose(h100, CollOp::allreduce, Bytes::mib(64), {8, 1, 8}, {Algorithm::nvls, Protocol::ll}),
                  InputError);
}

TEST_CASE("PAT runs AllGather with one GPU per node") {
  const ClusterSpec h100 = test::dgx_hopper("dgx-h100-ndr", 16);
  const auto all = collectives::candidates(h100, {}, Request{CollOp::allgather, Bytes::mib(1), {16, 16, 1}});
  CHECK(std::any_of(all.begin(), all.end(), [](const auto& c) { return c.algorithm == Algorithm::pat; }));
}

TEST_CASE("AllToAll and SendRecv go point to point") {
  const ClusterSpec h100 = test::dgx_hopper("dgx-h100-ndr", 2);
  CHECK(choose(h100, CollOp::alltoall, Bytes::mib(64), {16, 2, 8}).algorithm == Algorithm::direct);
  CHECK(choose(h100, CollOp::sendrecv, Bytes::mib(64), {2, 2, 1}).algorithm == Algorithm::direct);
}

TEST_CASE("a group of one only pays the launch") {
  const ClusterSpec a100 = test::dgx_a100_80g_hdr(1);
  CHECK(choose(a100, CollOp::allreduce, Bytes::gib(1), {1, 1, 1}).time() == Time::from_us(36));
}

TEST_CASE("link loads per algorithm byte follow the algorithm") {
  const Request intra{CollOp::allreduce, Bytes::mib(64), {8, 1, 8}};
  collectives::Choice ring;
  ring.algorithm = Algorithm::ring;
  const auto load = collectives::link_load(intra, ring);
  CHECK(load.intra == Approx(1.75));
  CHECK(load.inter == 0.0);
  collectives::Choice nvls;
  nvls.algorithm = Algorithm::nvls;
  CHECK(collectives::link_load(intra, nvls).intra == Approx(1.0));
  const Request across{CollOp::allgather, Bytes::mib(64), {16, 16, 1}};
  collectives::Choice pat;
  pat.algorithm = Algorithm::pat;
  CHECK(collectives::link_load(across, pat).inter == Approx(15.0 / 16.0));
  const auto multi = collectives::link_load({CollOp::allreduce, Bytes::mib(64), {16, 2, 8}}, ring);
  CHECK(multi.intra + multi.inter == Approx(2.0 * 15 / 16));
}

// Each of the double binary tree's N − 1 edges carries its half of the buffer up and down:
// 2(N−1)/N of the buffer leaves each node each way, once on two nodes, almost twice on many.
TEST_CASE("a tree AllReduce sends 2(N-1)/N of the buffer out of each node, spread over its GPUs") {
  collectives::Choice tree;
  tree.algorithm = Algorithm::tree;
  CHECK(collectives::link_load({CollOp::allreduce, Bytes::mib(64), {16, 2, 8}}, tree).inter == Approx(1.0 / 8));
  CHECK(collectives::link_load({CollOp::allreduce, Bytes::mib(64), {64, 64, 1}}, tree).inter == Approx(2.0 * 63 / 64));
  collectives::Choice nvls_tree;
  nvls_tree.algorithm = Algorithm::nvls_tree;
  CHECK(collectives::link_load({CollOp::allreduce, Bytes::mib(64), {32, 4, 8}}, nvls_tree).inter ==
        Approx(2.0 * 3 / 4 / 8));
}

namespace {

// A DGX B200 node (NVLS and LL128 on Blackwell) and 8 A100 joined by PCIe only (no LL128).
ClusterSpec forced_test_b200() {
  ClusterSpec c = test::dgx_hopper("dgx-b200", 16);
  c.gpu.arch = GpuArch::blackwell;
  c.intra_node.bandwidth = Bandwidth::gbytes_per_s(900);
  return c;
}

ClusterSpec forced_test_a100_pcie() {
  ClusterSpec c = test::dgx_a100_80g_hdr(16);
  c.intra_node.fabric = IntraFabric::pcie;
  c.intra_node.bandwidth = Bandwidth::gbytes_per_s(32);
  return c;
}

}  // namespace

// NCCL_ALGO and NCCL_PROTO only narrow the pairs NCCL chooses among: the pair it then runs
// costs what the same pair costs in the list NCCL chooses from on its own (stepsim collective
// -v), whichever other pairs are left out; a Tree pair, whose modelled time drops where NCCL's
// correction steps up, may cost more forced, holding the longest time of a smaller buffer
// among the pairs left (next case).
TEST_CASE("a forced pair costs what the same pair costs among all candidates, for every op, size and cluster") {
  const std::vector<ClusterSpec> clusters{test::dgx_a100_80g_hdr(16), test::dgx_hopper("dgx-h100-ndr", 16),
                                          forced_test_b200(), forced_test_a100_pcie()};
  const std::vector<collectives::GroupShape> shapes{{8, 1, 8}, {16, 2, 8}, {64, 8, 8}, {8, 8, 1}};
  const std::vector<Bytes> sizes{Bytes(4096), Bytes::kib(300), Bytes::mib(4), Bytes::mib(64), Bytes::gib(1)};
  int compared = 0;
  for (const ClusterSpec& c : clusters) {
    for (CollOp op : {CollOp::allreduce, CollOp::allgather, CollOp::reducescatter, CollOp::broadcast}) {
      for (const collectives::GroupShape& shape : shapes) {
        for (Bytes size : sizes) {
          const Request request{op, size, shape};
          for (const collectives::Choice& listed : collectives::candidates(c, {}, request)) {
            const std::string pair =
                fmt::format("{} {} {} B on {}/{}: {}/{}", c.name, to_string(op), size.count(), shape.ranks, shape.nodes,
                            collectives::to_string(listed.algorithm), collectives::to_string(listed.protocol));
            INFO(pair);
            // The pair alone, the algorithm alone (any protocol) and the protocol alone.
            const std::vector<CollectivesSpec> forcings{{listed.algorithm, listed.protocol},
                                                        {listed.algorithm, Protocol::automatic},
                                                        {Algorithm::automatic, listed.protocol}};
            for (const CollectivesSpec& forced : forcings) {
              for (const collectives::Choice& x : collectives::candidates(c, forced, request)) {
                if (x.algorithm != listed.algorithm || x.protocol != listed.protocol) continue;
                ++compared;
                if (x.algorithm == Algorithm::tree) {
                  CHECK(x.time() >= listed.time());
                  continue;
                }
                CHECK(x.time() == listed.time());
                CHECK(x.algbw == listed.algbw);
              }
            }
          }
        }
      }
    }
  }
  CHECK(compared > 1000);
}

// The case as a user met it: on 8 H100 NVLS is NCCL's choice for a 64 MiB AllReduce, and with
// ring forced the ring's Simple protocol costs the 479.3 us it is listed at, not 502.5 us.
TEST_CASE("forcing ring on 8 H100 leaves the ring's cost as listed beside NVLS") {
  const ClusterSpec h100 = test::dgx_hopper("dgx-h100-ndr", 1);
  const Request request{CollOp::allreduce, Bytes::mib(64), {8, 1, 8}};
  const auto all = collectives::candidates(h100, {}, request);
  REQUIRE(all.front().algorithm == Algorithm::nvls);
  const auto ring = std::find_if(all.begin(), all.end(), [](const collectives::Choice& x) {
    return x.algorithm == Algorithm::ring && x.protocol == Protocol::simple;
  });
  REQUIRE(ring != all.end());
  const collectives::Choice forced = choose(h100, CollOp::allreduce, Bytes::mib(64), {8, 1, 8}, {Algorithm::ring});
  CHECK(forced.protocol == Protocol::simple);
  CHECK(forced.time() == ring->time());
}

// NCCL 2.28.9's src/graph/tuning.cc caps a Blackwell Ring LL128 channel at 2 · 36.7 GB/s on one
// node and beyond two, 34.6 GB/s on two (perChMaxRingLL128Bws). On 2 or 4 DGX B200 nodes (8
// NICs of 400 Gb/s: 8 channels at 48 GB/s, the first Blackwell inter-node speed below 50) the
// LL128 bus bandwidth is min(0.92 · 8 · 48, 8 · cap): 276.8 GB/s on two nodes, 353.28 beyond,
// and an AllGather's algorithm bandwidth that times n / (n − 1).
TEST_CASE("Blackwell's Ring LL128 channels are capped as NCCL 2.28.9 caps them, 34.6 GB/s on two nodes") {
  const ClusterSpec b200 = forced_test_b200();
  const auto ll128 = [&](collectives::GroupShape shape) {
    const collectives::Context c = collectives::make_context(b200, {CollOp::allgather, Bytes::gib(1), shape});
    REQUIRE(c.ring.channels == 8);
    REQUIRE(c.ring.bw_inter == 48);
    return collectives::algorithm_row(Algorithm::ring).estimate(c, Protocol::ll128).algbw_gbps;
  };
  CHECK(ll128({16, 2, 8}) == Approx(8 * 34.6 * 16 / 15));
  CHECK(ll128({32, 4, 8}) == Approx(0.92 * 8 * 48 * 32 / 31));
}

// NCCL appends AllToAll and SendRecv as send and receive tasks (enqueue.cc, p2pTaskAppend),
// whose protocol is LL or Simple by size alone: NCCL_ALGO and NCCL_PROTO never reach them, so
// a scenario that forces the collectives leaves its pipeline's and experts' transfers as NCCL
// runs them on its own, on one node and across nodes.
TEST_CASE("a forced algorithm or protocol leaves point-to-point transfers as NCCL chooses them") {
  const ClusterSpec h100 = test::dgx_hopper("dgx-h100-ndr", 2);
  const std::vector<CollectivesSpec> forcings{{Algorithm::ring, Protocol::automatic},
                                              {Algorithm::nvls, Protocol::simple},
                                              {Algorithm::automatic, Protocol::ll128},
                                              {Algorithm::tree, Protocol::ll}};
  for (CollOp op : {CollOp::sendrecv, CollOp::alltoall}) {
    for (const collectives::GroupShape& shape :
         std::vector<collectives::GroupShape>{{2, 1, 2}, {8, 1, 8}, {2, 2, 1}, {16, 2, 8}}) {
      if (op == CollOp::sendrecv && shape.ranks != 2) continue;
      for (Bytes size : {Bytes(4096), Bytes::mib(64)}) {
        const Request request{op, size, shape};
        const collectives::Choice own = collectives::predict(h100, {}, request);
        CHECK(own.algorithm == Algorithm::direct);
        for (const CollectivesSpec& forced : forcings) {
          INFO(fmt::format("{} of {} B on {} ranks over {} node(s), {}/{} forced", to_string(op), size.count(),
                           shape.ranks, shape.nodes, collectives::to_string(forced.algorithm),
                           collectives::to_string(forced.protocol)));
          const collectives::Choice x = collectives::predict(h100, forced, request);
          CHECK(x.algorithm == own.algorithm);
          CHECK(x.protocol == own.protocol);
          CHECK(x.time() == own.time());
        }
      }
    }
  }
  // The collectives themselves are still held to what was forced.
  CHECK(choose(h100, CollOp::allreduce, Bytes::mib(64), {8, 1, 8}, {Algorithm::ring}).algorithm == Algorithm::ring);
}

// NCCL's Tree correction is a step table (tuning.cc, treeCorrectionFactor by log2 of the size),
// so NCCL's modelled Tree time drops where a step rises: 16 A100 nodes with one rank each, Tree
// forced, were modelled 19 % faster at 4 MiB than at 4 MiB less 4 bytes. Forced or not, a larger
// buffer never takes less time: sizes one element either side of every power of two from 4 KiB
// to 1 GiB, for every forcing that leaves Tree in play.
TEST_CASE("a larger buffer never takes less time, whatever is forced") {
  const std::vector<ClusterSpec> clusters{test::dgx_a100_80g_hdr(16), test::dgx_hopper("dgx-h100-ndr", 16)};
  const std::vector<CollectivesSpec> forcings{{},
                                              {Algorithm::tree, Protocol::automatic},
                                              {Algorithm::tree, Protocol::ll},
                                              {Algorithm::tree, Protocol::ll128},
                                              {Algorithm::tree, Protocol::simple},
                                              {Algorithm::automatic, Protocol::ll},
                                              {Algorithm::automatic, Protocol::ll128},
                                              {Algorithm::automatic, Protocol::simple}};
  int steps = 0;
  for (const ClusterSpec& c : clusters) {
    for (const collectives::GroupShape& shape :
         std::vector<collectives::GroupShape>{{16, 16, 1}, {128, 16, 8}, {32, 4, 8}}) {
      for (const CollectivesSpec& forced : forcings) {
        Time before = Time::zero();
        for (int log2 = 12; log2 <= 30; ++log2) {
          for (const std::int64_t size : {(std::int64_t{1} << log2) - 4, std::int64_t{1} << log2}) {
            const Time t = choose(c, CollOp::allreduce, Bytes(size), shape, forced).time();
            INFO(fmt::format("{} AllReduce of {} B on {} ranks over {} nodes, {}/{} forced", c.name, size, shape.ranks,
                             shape.nodes, collectives::to_string(forced.algorithm),
                             collectives::to_string(forced.protocol)));
            CHECK(t >= before);
            before = t;
            ++steps;
          }
        }
      }
    }
  }
  CHECK(steps == 2 * 3 * 8 * 19 * 2);
}

// LL needs LL buffers on the connection (enqueue.cc, addP2pToPlan), and network connections
// have none by default (NCCL_ALLOC_P2P_NET_LL_BUFFERS=0, transport/net.cc): between nodes even
// 4 KiB goes Simple, where inside a node it goes LL.
TEST_CASE("point-to-point transfers between nodes run the Simple protocol") {
  const ClusterSpec h100 = test::dgx_hopper("dgx-h100-ndr", 2);
  for (Bytes size : {Bytes(4096), Bytes::kib(64), Bytes::kib(512)}) {
    INFO(size.count() << " B");
    CHECK(choose(h100, CollOp::sendrecv, size, {2, 2, 1}).protocol == Protocol::simple);
    CHECK(choose(h100, CollOp::alltoall, size, {16, 2, 8}).protocol == Protocol::simple);
  }
  CHECK(choose(h100, CollOp::sendrecv, Bytes(4096), {2, 1, 2}).protocol == Protocol::ll);
}

// NCCL's tuning reads the hosts' CPU vendor across nodes (tuning.cc): getNetOverhead gives
// 2 us per network step on x86 AMD hosts against 1 us on Intel, ×3 for Simple, and a ring's
// intra-node steps take at least that; the LL cap is llMaxBws' AMD row (22.5 GB/s on two nodes,
// 19.0 beyond) instead of Intel's (39.0, 20.4). A ring AllReduce of 16 A100 on two nodes has
// 2(16 − 1) = 30 steps, 2 of them across the network: its 28 NVLink steps of 3.4 us (Simple)
// take max(3.4, 6) = 6 us on AMD hosts, max(3.4, 3) = 3.4 on Intel, and multi-node Simple
// AllReduce rings take 1.4× their latency: 28 × 2.6 × 1.4 = 101.92 us more in NCCL's model.
TEST_CASE("AMD hosts pay NCCL's larger network overhead and LL cap across nodes, and only there") {
  ClusterSpec intel = test::dgx_a100_80g_hdr(2);
  intel.host_cpu = HostCpu::intel;
  ClusterSpec amd = intel;
  amd.host_cpu = HostCpu::amd;
  const CollectivesSpec ring_simple{Algorithm::ring, Protocol::simple};
  const auto nccl_us = [&](const ClusterSpec& c, collectives::GroupShape shape, CollectivesSpec forced) {
    return choose(c, CollOp::allreduce, Bytes::mib(256), shape, forced).nccl_time.us();
  };
  CHECK(nccl_us(amd, {16, 2, 8}, ring_simple) - nccl_us(intel, {16, 2, 8}, ring_simple) == Approx(101.92));
  // One node: no network step, the GPU's row: the same.
  CHECK(nccl_us(amd, {8, 1, 8}, ring_simple) == Approx(nccl_us(intel, {8, 1, 8}, ring_simple)));
  // LL's bus bandwidth on two nodes: 22.5 against 39.0 GB/s, so AMD hosts take longer at a size
  // where the cap binds, and on one node they take the same.
  const CollectivesSpec ring_ll{Algorithm::ring, Protocol::ll};
  CHECK(nccl_us(amd, {16, 2, 8}, ring_ll) > nccl_us(intel, {16, 2, 8}, ring_ll) + 1000);
  CHECK(nccl_us(amd, {8, 1, 8}, ring_ll) == Approx(nccl_us(intel, {8, 1, 8}, ring_ll)));
}
