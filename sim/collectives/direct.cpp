// Direct: point-to-point AllToAll and SendRecv. Every pair exchanges its share at once, over
// NVLink inside the node and over the GPU's NIC share across nodes.
#include <algorithm>

#include "collectives/algorithm.hpp"

namespace stepsim::collectives::direct {
namespace {

// Algorithm bandwidth (GB/s): each byte of the buffer moves its NVLink share and its NIC
// share at once, so the slower of the two limits it.
double transfer_bw(const Context& c) {
  if (c.op == CollOp::sendrecv) return c.nodes() == 1 ? c.intra_total : c.nic_per_gpu;
  const double n = c.ranks();
  const double intra_share = (c.ppn() - 1) / n;
  const double inter_share = (n - c.ppn()) / n;
  double worst = 0;  // time per algorithm byte
  if (intra_share > 0) worst = std::max(worst, intra_share / c.intra_total);
  if (inter_share > 0) worst = std::max(worst, inter_share / c.nic_per_gpu);
  return worst > 0 ? 1.0 / worst : c.intra_total;
}

// LL needs LL buffers on the connection (enqueue.cc, addP2pToPlan), and a network connection
// has none unless NCCL_ALLOC_P2P_NET_LL_BUFFERS is set (transport/net.cc): between nodes every
// transfer is Simple. Inside a node NCCL takes LL up to 16 KiB a channel of each peer
// (NCCL_P2P_LL_THRESHOLD); the model takes the faster of LL and Simple there, which keeps the
// cost monotone in the size where NCCL's threshold would step.
bool ll_buffers(const Context& c) { return c.nodes() == 1; }

}  // namespace

std::optional<std::string> unsupported(const Context& c) { return only_ops(c, {CollOp::alltoall, CollOp::sendrecv}); }

Estimate estimate(const Context& c, Protocol p) {
  if (p == Protocol::ll128 || (p == Protocol::ll && !ll_buffers(c))) return {};
  double bw = transfer_bw(c);
  if (p == Protocol::ll) bw = std::min(bw * 0.5, ll_cap(c));
  double lat = base_latency_us(Algorithm::ring, p) + hop_latency_us(c.intra_hw, Algorithm::ring, p) * c.intra_hop_scale;
  if (c.nodes() > 1) lat += hop_latency_us(Hw::net, Algorithm::ring, p) * c.net_hop_scale;
  return {lat, bw, c.ring.channels};
}

LinkLoad load(const Context& c) {
  if (c.op == CollOp::sendrecv) return c.nodes() == 1 ? LinkLoad{1.0, 0.0} : LinkLoad{0.0, 1.0};
  const double n = c.ranks();
  return {(c.ppn() - 1) / n, (n - c.ppn()) / n};
}

}  // namespace stepsim::collectives::direct
