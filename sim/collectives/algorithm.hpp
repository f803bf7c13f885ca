// The small interface every collective algorithm implements (one file each), the context
// they read, and the registry table that lists them.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "collectives/collective.hpp"
#include "collectives/nccl_facts.hpp"

namespace stepsim::collectives {

// What NCCL's topology search finds: channels and the bandwidth of each (GB/s).
struct Graph {
  int channels = 0;
  double bw_intra = 0;
  double bw_inter = 0;
  double total() const { return channels * bw_intra; }
};

// Everything an algorithm needs about one request on one cluster, computed once.
struct Context {
  const ClusterSpec& cluster;
  const ArchFacts& arch;
  CollOp op;
  Bytes size;  // nccl-tests S
  GroupShape shape;
  Graph ring{};            // ring and tree graphs (NCCL searches them alike on these systems)
  Graph nvls{};            // NVLS graph: one channel per head GPU (0 channels: none)
  double intra_total = 0;  // NCCL's NVLink (or PCIe) bandwidth of one GPU, GB/s
  double nic_per_gpu = 0;  // one GPU's share of the node's NICs as NCCL sees them, GB/s
  Hw intra_hw = Hw::nvlink;
  double intra_hop_scale = 1;  // cluster's per-hop latency over NCCL's NVLink/PCIe figure
  double net_hop_scale = 1;    // cluster's network latency over NCCL's 2.7 µs
  bool ll128 = true;           // LL128 enabled (NVLink inside the node)

  int ranks() const { return shape.ranks; }
  int nodes() const { return shape.nodes; }
  int ppn() const { return shape.ranks_per_node; }
  // What the request's nodes are to NCCL: NVLink domains where one joins several nodes (an
  // NVL72 rack), as messages name them.
  const char* node_name() const { return cluster.domain_gpus() > cluster.gpus_per_node ? "NVLink domain" : "node"; }
  double nbytes() const;  // NCCL's nBytes: the whole buffer for AllGather/ReduceScatter
};

// NCCL's untuned figures for one (algorithm, protocol): latency and algorithm bandwidth.
struct Estimate {
  double latency_us = 0;
  double algbw_gbps = 0;  // 0: the pair is not available
  int channels = 0;
  double peak_gbps = 0;  // algbw without NCCL's size corrections (the Tree's); 0: algbw_gbps
  double peak() const { return peak_gbps > 0 ? peak_gbps : algbw_gbps; }
};

// One algorithm. `unsupported` returns why it does not apply to the request (nullopt:
// it applies); `estimate` gives NCCL's model for one protocol (algbw 0: protocol not
// available); `load` the link bytes per algorithm byte.
struct AlgorithmRow {
  Algorithm id;
  std::optional<std::string> (*unsupported)(const Context&);
  Estimate (*estimate)(const Context&, Protocol);
  LinkLoad (*load)(const Context&);
};

// The registry: every algorithm stepsim models, in NCCL's order.
std::span<const AlgorithmRow> algorithms();
const AlgorithmRow& algorithm_row(Algorithm a);

// Shared by several algorithms.
double nsteps(CollOp op, int ranks);  // ring steps: 2(n−1) AllReduce, n−1 AG/RS, n others
double ll_cap(const Context& c);
// NIC bytes per algorithm byte of one member of a double binary tree across nodes, each way:
// each tree's N − 1 edges carry the half of the buffer it holds up and down, 2(N−1)/N of the
// buffer per node (1 on two nodes, where each node is a leaf of one tree), over ppn GPUs.
double tree_inter_load(const Context& c);
// NCCL's comm->nChannels, on which its rings, trees, PAT and sends run and which its plateau
// test reads (tuning.cc, ncclTopoGetAlgoTime).
int comm_channels(const Context& c);
std::optional<std::string> only_ops(const Context& c, std::initializer_list<CollOp> ops);

// The three functions of each algorithm file; registry.cpp lists them in one table.
#define STEPSIM_COLLECTIVE_ALGORITHM(ns)                    \
  namespace ns {                                            \
  std::optional<std::string> unsupported(const Context& c); \
  Estimate estimate(const Context& c, Protocol p);          \
  LinkLoad load(const Context& c);                          \
  }
STEPSIM_COLLECTIVE_ALGORITHM(ring)
STEPSIM_COLLECTIVE_ALGORITHM(tree)
STEPSIM_COLLECTIVE_ALGORITHM(nvls)
STEPSIM_COLLECTIVE_ALGORITHM(nvls_tree)
STEPSIM_COLLECTIVE_ALGORITHM(collnet)
STEPSIM_COLLECTIVE_ALGORITHM(pat)
STEPSIM_COLLECTIVE_ALGORITHM(direct)
#undef STEPSIM_COLLECTIVE_ALGORITHM

}  // namespace stepsim::collectives
