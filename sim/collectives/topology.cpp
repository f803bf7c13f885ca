// What NCCL's topology search would find on a cluster: channel counts and per-channel
// bandwidths of the ring/tree and NVLS graphs, and the hop-latency scales. A request's nodes
// are NVLink domains: NVLink inside one, the NICs between them.
#include "collectives/topology.hpp"

#include <algorithm>
#include <cmath>

namespace stepsim::collectives {
namespace {

// NCCL's graph search holds at most 16 channels before duplication.
constexpr int kMaxSearchChannels = 16;

// The search tries speeds from the top and keeps the first one at which channels fit.
Graph search(std::span<const double> speeds, double limit, const ArchFacts& arch) {
  Graph best{1, limit, limit};
  for (double s : speeds) {
    const int channels = std::min(kMaxSearchChannels, static_cast<int>(std::floor(limit / s + 1e-9)));
    if (channels < 1) continue;
    best = {channels, s, s};
    break;
  }
  // Fast channels are split in two, which lets more SMs share the work.
  if (best.bw_intra >= arch.dup_min_speed) best = {best.channels * 2, best.bw_intra / 2, best.bw_inter / 2};
  return best;
}

double first_speed_at_most(std::span<const double> speeds, double limit) {
  for (double s : speeds)
    if (s <= limit + 1e-9) return s;
  return limit;
}

// A GPU's port to the network: its NIC, or with more NICs than GPUs the nics / gpus NICs it
// drives (NCCL maps them to it), as one port of their summed line rate.
double port_gbps(const ClusterSpec& cluster) {
  const double per_gpu =
      static_cast<double>(std::max(1, cluster.inter_node.nics_per_node)) / std::max(1, cluster.gpus_per_node);
  return cluster.inter_node.nic_bandwidth.gbytes_per_s() * std::max(1.0, per_gpu);
}

double nic_speed(const ClusterSpec& cluster, const ArchFacts& arch, double intra_total) {
  // NCCL sees the NIC's line rate: an oversubscribed spine is shared traffic, which the
  // network's link resources model (leaf uplinks), not a slower NIC. The path from the GPU
  // to its NICs crosses the GPU's one PCIe link, which bounds the sum over them: NCCL's search
  // takes each channel's bandwidth off the links of its path, so a GPU's channels through its
  // two NICs share that link as one NIC's do.
  return first_speed_at_most(arch.inter_speeds, std::min({port_gbps(cluster), intra_total, arch.pcie_path_gbps}));
}

}  // namespace

Context make_context(const ClusterSpec& cluster, const Request& request) {
  const ArchFacts& arch = arch_facts(cluster.gpu.arch);
  const bool pcie = cluster.intra_node.fabric == IntraFabric::pcie;
  Context c{cluster, arch, request.op, request.size, request.shape};
  c.intra_total = cluster.intra_node.bandwidth.gbytes_per_s() * (pcie ? 1.0 : arch.nvlink_fraction);
  c.intra_hw = pcie ? Hw::pci : Hw::nvlink;
  c.ll128 = !pcie;
  c.intra_hop_scale = cluster.intra_node.latency.us() / (pcie ? 1.0 : 0.6);
  c.net_hop_scale = cluster.inter_node.latency.us() / 2.7;
  // A "node" of the request is an NVLink domain (NCCL's multi-node NVLink treats the GPUs of
  // one NVLink fabric as one node): its ranks reach the network through all its nodes' NICs.
  const int ppn = std::max(1, request.shape.ranks_per_node);
  const double nic = nic_speed(cluster, arch, c.intra_total);
  // The domain's ports to the network: its NICs, or one per GPU where a GPU has several.
  const int node_ports = std::min(std::max(1, cluster.inter_node.nics_per_node), std::max(1, cluster.gpus_per_node));
  const int domain_ports = node_ports * std::max(1, cluster.domain_gpus() / std::max(1, cluster.gpus_per_node));
  const int nics = std::max(1, std::min({domain_ports, ppn, kMaxSearchChannels}));
  c.nic_per_gpu = nic * node_ports / std::max(1, cluster.gpus_per_node);
  if (request.shape.nodes <= 1) {
    c.ring = search(arch.intra_speeds, c.intra_total, arch);
    const double nvls_speed = first_speed_at_most(arch.intra_speeds, c.intra_total / ppn);
    c.nvls = {ppn, nvls_speed, nvls_speed};
    return c;
  }
  // Across nodes every channel leaves through a NIC: the NIC speed bounds each channel.
  c.ring = {nics, nic, nic};
  if (nic >= arch.dup_min_speed) c.ring = {nics * 2, nic / 2, nic / 2};
  const double nvls_speed = first_speed_at_most(arch.intra_speeds, c.intra_total / ppn);
  c.nvls = {ppn, nvls_speed, nic};
  return c;
}

}  // namespace stepsim::collectives
