// The attention core of a CP rank: its pieces on the compute stream and the K/V blocks on
// the cp stream. Forward (and recompute) passes K/V one block per step; backward passes K/V
// and the partial dK/dV, whose last step returns each rank's own dK/dV before its QKV
// backward can start.
#include "parallelism/context_parallel.hpp"

#include <fmt/format.h>

#include "stepsim/framework.hpp"

namespace stepsim::parallelism {

ContextParallel::ContextParallel(const Scenario& s, const workload::ModelWork& work)
    : cp_(std::max(s.parallel.cp, 1)),
      comm_(s.context_parallel.comm),
      own_block_under_gather_(traits_of(s.training.framework).torchtitan_attention),
      layers_(s.model.layers),
      kv_block_(work.layer.kv_block),
      names_(s.model.layers) {}

bool ContextParallel::handles(const OpSite& site) const {
  return cp_ > 1 && site.cost->role == workload::Role::attention_core && site.block >= 1 && site.block <= layers_;
}

std::uint32_t ContextParallel::comm_name(StepBuilder& b, CollOp op, Bytes size, const OpSite& site, const char* what) {
  const auto [it, inserted] = comm_names_.try_emplace({site.block, op, what}, 0);
  if (inserted) it->second = b.collective_name(CommKind::cp, op, size, fmt::format("L{} {}", site.block - 1, what));
  return it->second;
}

OpIndex ContextParallel::issue(StepBuilder& b, const OpSite& site) {
  if (comm_ == CpComm::all_gather) return gathered(b, site);
  if (site.cost->pass == workload::Pass::forward) return ring_forward(b, site);
  return ring_backward(b, site);
}

// Step i computes attention against the block in hand while the ring passes it on; step
// i + 1 waits for that block. The rank's own block needs no transfer.
OpIndex ContextParallel::ring_forward(StepBuilder& b, const OpSite& site) {
  const workload::OpCost piece = op_piece(*site.cost, cp_);
  const std::vector<std::uint32_t>& names = names_.of(b, site, cp_);
  const std::uint32_t kv = comm_name(b, CollOp::sendrecv, kv_block_, site, "attention K/V ring step");
  std::vector<OpIndex> arrived;
  std::vector<OpIndex> producer = b.last_compute();
  OpIndex op = 0;
  for (int i = 0; i < cp_; ++i) {
    std::vector<OpIndex> next;
    if (i + 1 < cp_) next = {b.collective(CommKind::cp, CollOp::sendrecv, kv_block_, kv, producer)};
    producer.clear();
    op = b.compute(piece, site.phase, names[static_cast<std::size_t>(i)], arrived);
    arrived = next;
  }
  return op;
}

// The same ring in backward, plus each step's partial dK/dV passed on after the step; the
// last one brings the rank its own dK/dV, which its QKV backward waits for.
OpIndex ContextParallel::ring_backward(StepBuilder& b, const OpSite& site) {
  const workload::OpCost piece = op_piece(*site.cost, cp_);
  const std::vector<std::uint32_t>& names = names_.of(b, site, cp_);
  const std::uint32_t kv = comm_name(b, CollOp::sendrecv, kv_block_, site, "attention K/V ring step");
  const std::uint32_t dkv = comm_name(b, CollOp::sendrecv, kv_block_, site, "attention dK/dV ring step");
  std::vector<OpIndex> arrived;
  std::vector<OpIndex> producer = b.last_compute();
  OpIndex op = 0;
  OpIndex grad = 0;
  for (int i = 0; i < cp_; ++i) {
    std::vector<OpIndex> next;
    if (i + 1 < cp_) next = {b.collective(CommKind::cp, CollOp::sendrecv, kv_block_, kv, producer)};
    producer.clear();
    op = b.compute(piece, site.phase, names[static_cast<std::size_t>(i)], arrived);
    grad = b.collective(CommKind::cp, CollOp::sendrecv, kv_block_, dkv, {op});
    arrived = next;
  }
  b.defer_wait(grad, WaitRule::next_op, site.cost->role);
  return op;
}

// AllGather of every rank's K/V before attention; in backward, gathered again and the dK/dV
// reduce-scattered back to their owners after it. Under PyTorch's context_parallel the rank's
// own block (one cp-th of the work, as load balancing gives every step) runs first, beside
// the gather, and the rest waits for it (_templated_ring_attention's first step).
OpIndex ContextParallel::gathered(StepBuilder& b, const OpSite& site) {
  const Bytes whole = kv_block_ * cp_;
  const std::uint32_t ag = comm_name(b, CollOp::allgather, whole, site, "attention K/V");
  const OpIndex gather = b.collective(CommKind::cp, CollOp::allgather, whole, ag, b.last_compute());
  OpIndex op = 0;
  if (own_block_under_gather_) {
    const std::vector<std::uint32_t>& names = names_.of(b, site, 2);
    b.compute(op_piece(*site.cost, cp_), site.phase, names.front(), {});
    op = b.compute(op_piece(*site.cost, cp_, cp_ - 1.0), site.phase, names.back(), {gather});
  } else {
    op = b.compute(*site.cost, site.phase, names_.of(b, site, 1).back(), {gather});
  }
  if (site.cost->pass == workload::Pass::forward) return op;
  const std::uint32_t rs = comm_name(b, CollOp::reducescatter, whole, site, "attention dK/dV");
  b.defer_wait(b.collective(CommKind::cp, CollOp::reducescatter, whole, rs, {op}), WaitRule::next_op, site.cost->role);
  return op;
}

}  // namespace stepsim::parallelism
