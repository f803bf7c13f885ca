// NVLS: NVLink SHARP, the NVSwitch reduces and multicasts (Hopper and later, Simple only,
// one node: across nodes it needs CollNet, which is off).
#include <algorithm>

#include <fmt/format.h>

#include "collectives/algorithm.hpp"

namespace stepsim::collectives::nvls {

std::optional<std::string> unsupported(const Context& c) {
  if (auto why = only_ops(c, {CollOp::allreduce, CollOp::allgather, CollOp::reducescatter})) return why;
  if (c.arch.nvls_efficiency <= 0 || !c.cluster.intra_node.nvls)
    return "the cluster has no NVLink SHARP (intra_node.nvls is false or the GPU predates Hopper)";
  if (c.nodes() > 1)
    return fmt::format("NVLS spans one {0}; across {0}s it needs CollNet, which is off", c.node_name());
  // enqueue.cc skips NVLS for all but AllReduce beyond NCCL_MAX_NVLS_ARITY local ranks.
  if (c.op != CollOp::allreduce && c.ppn() > kMaxNvlsArity)
    return fmt::format("beyond {} GPUs of one NVLink domain NCCL runs NVLS for AllReduce only", kMaxNvlsArity);
  if (c.ppn() < 2) return fmt::format("NVLS needs at least two GPUs in the {}", c.node_name());
  if (c.nvls.channels < 2) return "NCCL's NVLS search finds no two channels that fit on the GPUs' NVSwitch links";
  return std::nullopt;
}

Estimate estimate(const Context& c, Protocol p) {
  if (p != Protocol::simple) return {};
  const int ch = c.nvls.channels;
  double bw = c.nvls.bw_intra * c.arch.nvls_efficiency * (ch - 1) / ch;
  // AllReduce pipelines the reduction and the multicast.
  bw *= c.op == CollOp::allreduce ? 2.0 : (c.ppn() - 1.0) / c.ppn();
  // No faster than the graph's bwInter, which the search raises to at most twice bwIntra.
  bw = std::min(bw, c.nvls.bw_inter);
  double algbw = ch * bw;
  if (c.op == CollOp::allreduce) algbw *= c.ranks() / nsteps(c.op, c.ranks());
  const double lat = hop_latency_us(Hw::nvlink, Algorithm::nvls, p) * c.intra_hop_scale;
  return {lat, algbw, ch};
}

LinkLoad load(const Context& c) {
  if (c.op == CollOp::allreduce) return {1.0, 0.0};
  return {(c.ranks() - 1.0) / c.ranks(), 0.0};
}

}  // namespace stepsim::collectives::nvls
