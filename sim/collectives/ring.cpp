// Ring: every collective except AllToAll/SendRecv; intra-node NVLink hops plus, across
// nodes, one NIC hop per node boundary (NCCL's flat ring through the rails).
#include <algorithm>

#include "collectives/algorithm.hpp"

namespace stepsim::collectives::ring {
namespace {

double bus_bw(const Context& c, Protocol p) {
  const double bw = c.nodes() <= 2 ? c.ring.bw_intra : c.ring.bw_inter;
  const double bus = c.ring.channels * bw;
  const int idx = nodes_index(c.nodes());
  switch (p) {
    case Protocol::ll:
      return std::min(ll_cap(c), bus * 0.5);
    case Protocol::ll128:
      return c.ll128
                 ? std::min(bus * 0.92, c.ring.channels * c.arch.ring_ll128_per_channel[static_cast<std::size_t>(idx)])
                 : 0.0;
    default:
      return bus;
  }
}

double latency_us(const Context& c, Protocol p) {
  const double base = base_latency_us(Algorithm::ring, p);
  if (c.op == CollOp::broadcast || c.op == CollOp::reduce) {
    // Rooted rings pipeline: one hop of latency when every channel uses the same order.
    const Hw hw = c.nodes() == 1 ? c.intra_hw : Hw::net;
    const double scale = c.nodes() == 1 ? c.intra_hop_scale : c.net_hop_scale;
    return base + hop_latency_us(hw, Algorithm::ring, p) * scale;
  }
  double intra = hop_latency_us(c.intra_hw, Algorithm::ring, p) * c.intra_hop_scale;
  // With one GPU per node every step is exposed, so NCCL uses the Tree network figure.
  const Algorithm net_row = c.ppn() == 1 ? Algorithm::tree : Algorithm::ring;
  const double inter = hop_latency_us(Hw::net, net_row, p) * c.net_hop_scale;
  int inter_steps = 0;
  if (c.nodes() > 1) {
    intra = std::max(intra, net_overhead_us(c.cluster.host_cpu) * (p == Protocol::simple ? 3.0 : 1.0));
    inter_steps = c.op == CollOp::allreduce ? 2 * (c.nodes() - 1) : c.nodes() - 1;
  }
  const double steps = nsteps(c.op, c.ranks());
  double lat = base + (steps - inter_steps) * intra + inter_steps * inter;
  // NCCL's "plateau effect": multi-node Simple AllReduce rings take 1.4× the latency.
  const bool plateau = c.nodes() > 1 && p == Protocol::simple && c.op == CollOp::allreduce &&
                       c.nbytes() / (comm_channels(c) * c.ranks()) >= 64;
  if (plateau) lat *= 1.4;
  return lat;
}

}  // namespace

std::optional<std::string> unsupported(const Context& c) {
  return only_ops(c, {CollOp::allreduce, CollOp::allgather, CollOp::reducescatter, CollOp::broadcast, CollOp::reduce});
}

Estimate estimate(const Context& c, Protocol p) {
  const double ratio = c.ranks() / nsteps(c.op, c.ranks());
  return {latency_us(c, p), bus_bw(c, p) * ratio, c.ring.channels};
}

LinkLoad load(const Context& c) {
  const double f = bus_factor(c.op, c.ranks());
  if (c.nodes() == 1) return {f, 0.0};
  return {f * (1.0 - 1.0 / c.ppn()), f / c.ppn()};
}

}  // namespace stepsim::collectives::ring
