// The constants of NCCL's tuning model (src/graph/tuning.cc and search.cc of NCCL 2.28.9),
// per GPU architecture and per (algorithm, protocol), as stepsim's algorithms read them.
#pragma once

#include <array>
#include <span>

#include "stepsim/scenario.hpp"

namespace stepsim::collectives {

// Index of a protocol in the per-protocol arrays below (LL, LL128, Simple).
int protocol_index(Protocol p);

// Per-architecture figures. The [3] arrays are indexed by node count: 1, 2, more than 2.
struct ArchFacts {
  // NCCL's per-NVLink figure over the line rate (A100 20 of 25 GB/s, H100 20.6 of 25,
  // B200 40.1 of 50): what the topology search believes a GPU's NVLink bandwidth is.
  double nvlink_fraction;
  std::span<const double> intra_speeds;  // per-channel bandwidths the graph search tries, GB/s
  std::span<const double> inter_speeds;
  // ncclTopoDupChannels doubles (and halves) a ring/tree graph's channels from 25 GB/s up, and
  // on compute capability above 8.0 below 50 GB/s only a graph of at most 4 channels.
  double dup_min_speed;
  double dup_many_channels_speed;
  // LL bus bandwidth cap, GB/s: on one node the architecture's, across nodes that of hosts with
  // Intel (or Arm) CPUs; ll_max_bw_gbps gives AMD hosts theirs.
  std::array<double, 3> ll_max_bw;
  std::array<double, 3> ring_ll128_per_channel;
  std::array<double, 3> tree_ll128_per_channel;
  std::array<double, 3> tree_per_channel;
  std::array<double, 3> nvls_tree_per_channel;
  double nvls_efficiency;     // 0: no NVLink SHARP on this architecture
  bool tree_pattern_penalty;  // Hopper+ multi-node trees lose 15 % (pattern TREE; any GPU at one per node)
};

const ArchFacts& arch_facts(GpuArch arch);

// Index into the [3] arrays for a node count.
int nodes_index(int nodes);

enum class Hw { nvlink, pci, net };

// Base latency and per-hop latency (µs) of NCCL's model. Algorithms without a figure read 0.
double base_latency_us(Algorithm a, Protocol p);
double hop_latency_us(Hw hw, Algorithm a, Protocol p);

// NCCL_MAX_NVLS_ARITY (src/include/device.h): the most NVLS channels (heads), and beyond this
// many GPUs of one node NCCL runs NVLS for AllReduce only (enqueue.cc).
inline constexpr int kMaxNvlsArity = 32;

// NCCL's LL bus bandwidth cap (llMaxBws, GB/s): for one node the architecture's row, across
// nodes the hosts' CPU's: AMD hosts' row {22.5, 19.0} on two nodes and more, any other's
// {39.0, 20.4}.
double ll_max_bw_gbps(const ArchFacts& arch, HostCpu cpu, int nodes);

// Network post overhead per inter-node ring step (µs), ×3 for Simple (getNetOverhead): 2 µs on
// x86 hosts with AMD CPUs, 1 µs on any other.
double net_overhead_us(HostCpu cpu);

// NCCL's Tree correction factor for AllReduce, indexed by log2(bytes / 64), 64 B to 256 MiB
// (1 outside them).
double tree_correction(Protocol p, double bytes);
// The sizes (bytes) at which that factor may change, smallest first: 128 B to 512 MiB.
std::span<const double> tree_correction_steps();

}  // namespace stepsim::collectives
