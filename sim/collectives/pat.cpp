// PAT (Parallel Aggregated Trees): AllGather and ReduceScatter with one GPU per node, in
// a logarithmic number of network steps.
#include <cmath>

#include <fmt/format.h>

#include "collectives/algorithm.hpp"

namespace stepsim::collectives::pat {

std::optional<std::string> unsupported(const Context& c) {
  if (auto why = only_ops(c, {CollOp::allgather, CollOp::reducescatter})) return why;
  if (c.ppn() != 1 || c.nodes() < 2) return fmt::format("PAT needs one GPU per {0} on two or more {0}s", c.node_name());
  return std::nullopt;
}

Estimate estimate(const Context& c, Protocol p) {
  if (p != Protocol::simple) return {};
  const double bw = c.nodes() <= 2 ? c.ring.bw_intra : c.ring.bw_inter;
  const double algbw = c.ring.channels * bw * 0.75;
  // With one GPU per node the network latency is NCCL's Tree figure.
  const double inter = hop_latency_us(Hw::net, Algorithm::tree, p) * c.net_hop_scale;
  const double lat =
      base_latency_us(Algorithm::pat, p) + std::floor(std::log2(c.nodes())) * inter / 3.5 + c.ranks() * 2.8;
  return {lat, algbw, c.ring.channels};
}

LinkLoad load(const Context& c) { return {0.0, (c.ranks() - 1.0) / c.ranks()}; }

}  // namespace stepsim::collectives::pat
