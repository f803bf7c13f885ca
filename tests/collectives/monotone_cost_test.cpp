// Physical bounds on the cost of the pair NCCL chooses: a larger buffer never takes less
// time, and more NVLink or NIC bandwidth never makes a collective slower, whichever pair
// NCCL's own model picks on each side of a switch (a tuning that slowed the pairs apart, by
// protocol, made the cost step wherever that model switches pair; see docs/model.md).
#include <catch2/catch.hpp>

#include <vector>

#include <fmt/format.h>

#include "cluster_fixtures.hpp"
#include "collectives/collective.hpp"

using namespace stepsim;
using collectives::GroupShape;

namespace {

constexpr CollOp kOps[] = {CollOp::allreduce, CollOp::allgather, CollOp::reducescatter, CollOp::broadcast,
                           CollOp::reduce,    CollOp::alltoall,  CollOp::sendrecv};

// One node's worth and whole nodes of 8, and one GPU per node (data parallelism beside TP 8).
const std::vector<GroupShape> kShapes{{2, 1, 2},   {4, 1, 4},    {8, 1, 8},      {16, 2, 8}, {32, 4, 8},
                                      {64, 8, 8},  {256, 32, 8}, {1024, 128, 8}, {2, 2, 1},  {4, 4, 1},
                                      {16, 16, 1}, {64, 64, 1},  {32, 16, 2}};

// A DGX B200 node, a GB200 NVL72 rack (72 GPUs joined by NVLink, 4 per tray with their
// NICs) and 8 A100 joined by PCIe only (no LL128, PCIe latencies).
ClusterSpec dgx_b200() {
  ClusterSpec c = test::dgx_hopper("dgx-b200", 128);
  c.gpu.arch = GpuArch::blackwell;
  c.intra_node.bandwidth = Bandwidth::gbytes_per_s(900);
  return c;
}

ClusterSpec gb200_nvl72() {
  ClusterSpec c = dgx_b200();
  c.name = "gb200-nvl72";
  c.gpus_per_node = 4;
  c.nvlink_domain = 72;
  c.inter_node.nics_per_node = 4;
  return c;
}

ClusterSpec a100_pcie() {
  ClusterSpec c = test::dgx_a100_80g_hdr(128);
  c.name = "a100-pcie";
  c.intra_node.fabric = IntraFabric::pcie;
  c.intra_node.bandwidth = Bandwidth::gbytes_per_s(32);
  return c;
}

std::vector<ClusterSpec> clusters() {
  return {test::dgx_a100_80g_hdr(128), test::dgx_hopper("dgx-h100-ndr", 128), dgx_b200(), gb200_nvl72(), a100_pcie()};
}

Time cost(const ClusterSpec& c, CollOp op, Bytes size, GroupShape shape) {
  return collectives::predict(c, {}, {op, size, shape}).time();
}

std::string pick(const ClusterSpec& c, CollOp op, Bytes size, GroupShape shape) {
  const auto choice = collectives::predict(c, {}, {op, size, shape});
  return fmt::format("{}/{}", collectives::to_string(choice.algorithm), collectives::to_string(choice.protocol));
}

std::vector<Bytes> sizes() {
  std::vector<Bytes> out;
  for (double s = 1024; s <= 8.0 * (1 << 30); s *= 1.05) out.emplace_back(static_cast<std::int64_t>(s));
  return out;
}

}  // namespace

TEST_CASE("a larger buffer never takes less time, for every op, GPU count and size") {
  int drops = 0;
  for (const ClusterSpec& c : clusters()) {
    for (CollOp op : kOps) {
      for (const GroupShape& shape : kShapes) {
        Bytes before{0};
        Time t_before = Time::zero();
        for (Bytes s : sizes()) {
          const Time t = cost(c, op, s, shape);
          if (before.count() > 0 && t < t_before) {
            ++drops;
            UNSCOPED_INFO(fmt::format("{} {} on {} GPUs over {} nodes: {} B {:.2f} us ({}) > {} B {:.2f} us ({})",
                                      c.name, to_string(op), shape.ranks, shape.nodes, before.count(), t_before.us(),
                                      pick(c, op, before, shape), s.count(), t.us(), pick(c, op, s, shape)));
          }
          before = s;
          t_before = t;
        }
      }
    }
  }
  CHECK(drops == 0);
}

namespace {

// The cluster with NVLink (GB/s) and NIC (Gb/s) bandwidth replaced.
ClusterSpec with_links(ClusterSpec c, double nvlink_gbps, double nic_gbits) {
  c.intra_node.bandwidth = Bandwidth::gbytes_per_s(nvlink_gbps);
  c.inter_node.nic_bandwidth = Bandwidth::gbits_per_s(nic_gbits);
  return c;
}

}  // namespace

TEST_CASE("more NVLink or NIC bandwidth never makes a collective slower", "[slow]") {
  const std::vector<Bytes> probe{Bytes(1024),    Bytes::kib(64),  Bytes::mib(1), Bytes::mib(4), Bytes::mib(16),
                                 Bytes::mib(64), Bytes::mib(256), Bytes::gib(1), Bytes::gib(4)};
  int rises = 0;
  for (const ClusterSpec& base : clusters()) {
    for (CollOp op : kOps) {
      for (const GroupShape& shape : kShapes) {
        for (Bytes s : probe) {
          for (double nic = 100; nic <= 1600; nic *= 2) {
            Time t_before = Time::zero();
            double nvlink_before = 0;
            for (double nvlink = 100; nvlink <= 2000; nvlink *= 1.1) {
              const Time t = cost(with_links(base, nvlink, nic), op, s, shape);
              if (nvlink_before > 0 && t > t_before) {
                ++rises;
                UNSCOPED_INFO(
                    fmt::format("{} {} {} B on {} GPUs over {} nodes, NIC {:.0f} Gb/s: NVLink {:.0f} GB/s "
                                "{:.2f} us ({}) < {:.0f} GB/s {:.2f} us ({})",
                                base.name, to_string(op), s.count(), shape.ranks, shape.nodes, nic, nvlink_before,
                                t_before.us(), pick(with_links(base, nvlink_before, nic), op, s, shape), nvlink, t.us(),
                                pick(with_links(base, nvlink, nic), op, s, shape)));
              }
              nvlink_before = nvlink;
              t_before = t;
            }
          }
          for (double nvlink = 100; nvlink <= 2000; nvlink *= 2) {
            Time t_before = Time::zero();
            double nic_before = 0;
            for (double nic = 100; nic <= 1600; nic *= 1.1) {
              const Time t = cost(with_links(base, nvlink, nic), op, s, shape);
              if (nic_before > 0 && t > t_before) {
                ++rises;
                UNSCOPED_INFO(
                    fmt::format("{} {} {} B on {} GPUs over {} nodes, NVLink {:.0f} GB/s: NIC {:.0f} Gb/s "
                                "{:.2f} us ({}) < {:.0f} Gb/s {:.2f} us ({})",
                                base.name, to_string(op), s.count(), shape.ranks, shape.nodes, nvlink, nic_before,
                                t_before.us(), pick(with_links(base, nvlink, nic_before), op, s, shape), nic, t.us(),
                                pick(with_links(base, nvlink, nic), op, s, shape)));
              }
              nic_before = nic;
              t_before = t;
            }
          }
        }
      }
    }
  }
  CHECK(rises == 0);
}
