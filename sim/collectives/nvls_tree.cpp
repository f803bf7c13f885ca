// NVLS-Tree: AllReduce with NVLS inside each node and a tree across nodes.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "collectives/algorithm.hpp"

namespace stepsim::collectives::nvls_tree {

std::optional<std::string> unsupported(const Context& c) {
  if (auto why = only_ops(c, {CollOp::allreduce})) return why;
  if (c.arch.nvls_efficiency <= 0 || !c.cluster.intra_node.nvls)
    return "the cluster has no NVLink SHARP (intra_node.nvls is false or the GPU predates Hopper)";
  if (c.nodes() == 1) return fmt::format("NVLS-Tree needs more than one {}", c.node_name());
  if (c.ppn() < 2) return fmt::format("NVLS-Tree needs at least two GPUs per {}", c.node_name());
  // One channel per head, a GPU next to a NIC; tuning.cc wants two.
  if (c.nvls.channels < 2) return "NVLS-Tree needs two NVLS channels, one per GPU with a NIC of its own";
  return std::nullopt;
}

Estimate estimate(const Context& c, Protocol p) {
  if (p != Protocol::simple) return {};
  const int ch = c.nvls.channels;
  const double intra = c.nvls.bw_intra * c.arch.nvls_efficiency * (ch - 1) / ch * 2.0;
  // On two nodes each node is a leaf of one tree only, which doubles the usable NIC share.
  const double inter = c.nvls.bw_inter * (c.nodes() <= 2 ? 2.0 : 1.0);
  const double cap = c.arch.nvls_tree_per_channel[static_cast<std::size_t>(nodes_index(c.nodes()))];
  const double bw = std::min({intra, inter, cap});
  const double algbw = ch * bw * c.ranks() / nsteps(c.op, c.ranks());
  const double lat =
      hop_latency_us(Hw::nvlink, Algorithm::nvls_tree, p) * c.intra_hop_scale +
      2 * std::floor(std::log2(c.nodes())) * hop_latency_us(Hw::net, Algorithm::nvls_tree, p) * c.net_hop_scale;
  return {lat, algbw, ch};
}

LinkLoad load(const Context& c) { return {1.0, tree_inter_load(c), true}; }

}  // namespace stepsim::collectives::nvls_tree
