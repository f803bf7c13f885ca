// What NCCL's topology search would find on a cluster: channel counts and per-channel
// bandwidths of the ring/tree and NVLS graphs, and the hop-latency scales. A request's nodes
// are NVLink domains: NVLink inside one, the NICs between them.
#include "collectives/topology.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace stepsim::collectives {
namespace {

// NCCL's graph search holds at most 16 channels before duplication.
constexpr int kMaxSearchChannels = 16;

// ncclTopoDupChannels (search.cc): a ring/tree graph's channels are doubled and each halved,
// unless it is slower than 25 GB/s, or (compute capability above 8.0) slower than 50 GB/s with
// more than 4 channels.
Graph dup_channels(const Graph& g, const ArchFacts& arch) {
  if (g.bw_intra < arch.dup_min_speed - 1e-9) return g;
  if (g.bw_intra < arch.dup_many_channels_speed - 1e-9 && g.channels > 4) return g;
  return {g.channels * 2, g.bw_intra / 2, g.bw_inter / 2};
}

// The search (ncclTopoCompute's first pass) starts at the fastest listed speed the link carries
// and, unless its channels fill the link, tries each slower listed speed while it is above 0.49
// of the best graph's, keeping a graph only if its channels x speed is larger
// (ncclTopoCompareGraphs): on 8 H100 whose 8 NVLinks carry 164.8 GB/s, 2 x 60, 3 x 50, then
// 4 x 40 = 160; over a 48 GB/s PCIe link 1 x 40, then 2 x 24 = 48.
Graph search(std::span<const double> speeds, double limit, const ArchFacts& arch) {
  Graph best{};
  for (double s : speeds) {
    if (s > limit + 1e-9) continue;
    if (best.channels > 0 && s / best.bw_intra <= 0.49) break;
    const int channels = std::min(kMaxSearchChannels, static_cast<int>(std::floor(limit / s + 1e-9)));
    if (channels * s > best.total() + 1e-9) best = {channels, s, s};
    if (best.channels == kMaxSearchChannels || best.total() >= limit - 1e-9) break;
  }
  if (best.channels == 0) best = {1, limit, limit};
  return dup_channels(best, arch);
}

// NCCL's NVLS search (search.cc, ncclTopoCompute and ncclTopoSearchTryNvls). A channel's head
// is one GPU; each channel takes its speed once off every GPU's NVSwitch link and twice off its
// head's, so ch channels at speed s fit when (ch + 1)·s ≤ the link. At most
// NCCL_MAX_NVLS_ARITY channels, and no more than the GPUs.

int nvls_fit(double speed, double link) { return static_cast<int>(std::floor(link / speed + 1e-9)) - 1; }

// The search's second pass raises the graph's bwInter one listed speed at a time while it is
// below twice bwIntra and the network path (limit) carries it; inside one node nothing does.
double raise_inter(std::span<const double> speeds, std::size_t at, double intra, double limit) {
  while (at > 0 && speeds[at] < 2 * intra && speeds[at - 1] <= limit + 1e-9) --at;
  return speeds[at];
}

// One node: every GPU must head a channel (minChannels = maxChannels), at the fastest listed
// speed at which they all fit. No speed fits: no graph, and NCCL turns NVLS off.
Graph nvls_one_node(std::span<const double> speeds, double link, int gpus) {
  const int channels = std::min(kMaxNvlsArity, gpus);
  for (std::size_t i = 0; i < speeds.size(); ++i)
    if (nvls_fit(speeds[i], link) >= channels)
      return {channels, speeds[i], raise_inter(speeds, i, speeds[i], std::numeric_limits<double>::infinity())};
  return {};
}

// Across nodes the heads are the GPUs next to a NIC (one channel each) and the speeds are the
// inter-node list, from the first the NIC path carries. The first pass walks down the speeds
// while the next is above 0.49 of the best so far, keeping a graph with more channels or more
// channels × speed; it stops at the most channels or once channels × speed reach the link.
Graph nvls_across_nodes(std::span<const double> speeds, double link, int gpus, int heads, double limit) {
  const int most = std::min(kMaxNvlsArity, gpus);
  Graph best{};
  std::size_t at = 0;
  for (std::size_t i = 0; i < speeds.size(); ++i) {
    const double s = speeds[i];
    if (s > limit + 1e-9) continue;
    if (best.channels > 0 && s / best.bw_inter <= 0.49) break;
    const int channels = std::min({most, heads, nvls_fit(s, link)});
    if (channels >= 1 && (channels > best.channels || channels * s > best.channels * best.bw_inter)) {
      best = {channels, s, s};
      at = i;
    }
    if (best.channels == most || best.channels * best.bw_inter >= link - 1e-9) break;
  }
  if (best.channels > 0) best.bw_inter = raise_inter(speeds, at, best.bw_intra, limit);
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
  const double pcie = gpu_pcie_link(cluster.gpu.arch).nccl_gbps();
  return first_speed_at_most(arch.inter_speeds, std::min({port_gbps(cluster), intra_total, pcie}));
}

}  // namespace

Context make_context(const ClusterSpec& cluster, const Request& request) {
  const ArchFacts& arch = arch_facts(cluster.gpu.arch);
  const bool pcie = cluster.intra_node.fabric == IntraFabric::pcie;
  Context c{cluster, arch, request.op, request.size, request.shape};
  // What NCCL's topology believes a GPU's port to its peers carries: of an NVLink port its
  // per-link figure over the line rate, of a PCIe link 3/4 of the line rate (as for the path
  // to a NIC), so that a PCIe link is no faster than an NVLink port of the same line rate.
  c.intra_total = cluster.intra_node.bandwidth.gbytes_per_s() * (pcie ? 0.75 : arch.nvlink_fraction);
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
    c.nvls = nvls_one_node(arch.intra_speeds, c.intra_total, ppn);
    return c;
  }
  // Across nodes every channel leaves through a NIC: the NIC speed bounds each channel. A
  // channel also runs through every member of a node, and the search takes its speed off each
  // link on its path (search.cc, ncclTopoSearchTryGpu): on NVLink a GPU's port carries every
  // channel but those leaving through its own NIC, on a PCIe fabric its one link carries them
  // all, its peers and its NIC being behind it. The channels share that link (evenly here,
  // rather than as the search's listed speeds would split it, so that a faster NIC or link
  // never makes a collective slower): 8 H100 a node keep 8 × 48 (7 on a port, 336 ≤ 370.8), the
  // 72 GPUs of an NVL72 rack take 16 × 45.1 behind 400 and 800 Gb/s NICs alike (the search's
  // listed speed; 721.8 / 16 here).
  const int carried = pcie ? nics : nics - nics / ppn;
  double ring_speed = nic;
  if (carried * nic > c.intra_total) ring_speed = c.intra_total / carried;
  c.ring = dup_channels({nics, ring_speed, ring_speed}, arch);
  // An NVLS channel leaves through one NIC, whatever other NICs its GPU has.
  const double nvls_limit = std::min(
      {cluster.inter_node.nic_bandwidth.gbytes_per_s(), c.intra_total, gpu_pcie_link(cluster.gpu.arch).nccl_gbps()});
  c.nvls = nvls_across_nodes(arch.inter_speeds, c.intra_total, ppn, std::min(domain_ports, ppn), nvls_limit);
  return c;
}

}  // namespace stepsim::collectives
