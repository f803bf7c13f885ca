// Tree: AllReduce as a chain inside each node and NCCL's double binary tree across nodes.
#include <algorithm>
#include <cmath>

#include "collectives/algorithm.hpp"

namespace stepsim::collectives::tree {
namespace {

double bus_bw(const Context& c, Protocol p) {
  const auto idx = static_cast<std::size_t>(nodes_index(c.nodes()));
  const double bw = c.nodes() <= 2 ? c.ring.bw_intra : c.ring.bw_inter;
  const int ch = c.ring.channels;
  double bus = std::min(ch * bw * 0.92, ch * c.arch.tree_per_channel[idx]);
  if (p == Protocol::ll) bus = std::min(bus / 3.8, ll_cap(c));
  if (p == Protocol::ll128) {
    if (!c.ll128) return 0.0;
    bus = std::min(bus * (c.nodes() == 1 ? 7.0 / 9.0 : 120.0 / 128.0), ch * c.arch.tree_ll128_per_channel[idx]);
  }
  // NCCL takes 15 % off a tree of pattern TREE (tuning.cc). Hopper and later fall back to it
  // across nodes; with one GPU per node the search sets it on every GPU (search.cc:
  // "if (ngpus == 1) ... pattern = NCCL_TOPO_PATTERN_TREE").
  if (c.nodes() > 1 && (c.arch.tree_pattern_penalty || c.ppn() == 1)) bus *= 0.85;
  return bus;
}

}  // namespace

std::optional<std::string> unsupported(const Context& c) { return only_ops(c, {CollOp::allreduce}); }

Estimate estimate(const Context& c, Protocol p) {
  const double intra = hop_latency_us(c.intra_hw, Algorithm::tree, p) * c.intra_hop_scale;
  const double inter = hop_latency_us(Hw::net, Algorithm::tree, p) * c.net_hop_scale;
  const double depth = std::floor(std::log2(c.nodes()));
  const double lat = base_latency_us(Algorithm::tree, p) + 2 * ((c.ppn() - 1) * intra + depth * inter);
  // Bus bandwidth to algorithm bandwidth: data goes up and down the tree.
  const double peak = bus_bw(c, p) * 0.5;
  return {lat, peak * tree_correction(p, c.nbytes()), c.ring.channels, peak};
}

LinkLoad load(const Context& c) {
  // Each GPU of the chain sends the buffer up (reduce) and down (broadcast).
  const double intra = 2.0 * (c.ppn() - 1) / c.ppn();
  return {intra, tree_inter_load(c), true};
}

}  // namespace stepsim::collectives::tree
