// The attention core of a CP rank: its pieces on the compute stream and the K/V blocks on
// the cp stream. Forward (and recompute) passes K/V one block per step; backward passes K/V
// and the partial dK/dV as each framework's attention does: Transformer Engine in one message
// a step beside that step's attention, PyTorch after each step in float32.
#include "parallelism/context_parallel.hpp"

#include <optional>

#include <fmt/format.h>

#include "stepsim/framework.hpp"

namespace stepsim::parallelism {
namespace {

// `steps` of the cp steps' attention as one kernel. Each step's kernel computes the rank's s/cp
// queries against one rank's block of s/cp keys (the first step its own two chunks, causally;
// the others a chunk against a block or a block against a chunk, the same work): the kernel of
// a job without context parallelism over s/cp tokens, which is how it is costed, where the
// whole op meets all s keys (the backward's efficiency follows the keys, hardware::GpuModel).
workload::OpCost step_kernel(const workload::OpCost& cost, int cp, double steps = 1.0) {
  workload::OpCost piece = op_piece(cost, cp, steps);
  piece.n = std::max(cost.n / cp, 1LL);
  return piece;
}

}  // namespace

ContextParallel::ContextParallel(const Scenario& s, const workload::ModelWork& work)
    : cp_(std::max(s.parallel.cp, 1)),
      comm_(s.context_parallel.comm),
      pytorch_(pytorch_context_parallel(s.training.framework)),
      layers_(s.model.layers),
      kv_block_(work.layer.kv_block),
      kv_grad_block_(work.layer.kv_grad_block_f32),
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
  if (site.cost->pass != workload::Pass::forward && pytorch_) return pytorch_backward(b, site);
  if (comm_ == CpComm::all_gather) return gathered(b, site);
  if (site.cost->pass == workload::Pass::forward) return ring_forward(b, site);
  return te_ring_backward(b, site);
}

// Step i computes attention against the block in hand while the ring passes it on; step
// i + 1 waits for that block. The rank's own block needs no transfer.
OpIndex ContextParallel::ring_forward(StepBuilder& b, const OpSite& site) {
  const workload::OpCost piece = step_kernel(*site.cost, cp_);
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

// Transformer Engine's AttnFuncWithCPAndKVP2P.backward: the ring reversed, the rank's own
// block last. Each step sends its message before its attention and waits for it after: the
// first carries the K/V block only, the middle ones the K/V and the partial dK/dV in one
// buffer (p2p_comm_buffers, in the K/V's precision), the last the dK/dV only; the dK/dV that
// arrives with it are the rank's own, to which its own block's gradients are added. Step
// i + 1 computes with what step i's message brought, and its message leaves after step i's
// dK/dV have been added to (after step i's attention and message). Nothing is sent after the
// last step, so its message runs beside the own block's attention.
OpIndex ContextParallel::te_ring_backward(StepBuilder& b, const OpSite& site) {
  const workload::OpCost piece = step_kernel(*site.cost, cp_);
  const std::vector<std::uint32_t>& names = names_.of(b, site, cp_);
  const std::uint32_t kv = comm_name(b, CollOp::sendrecv, kv_block_, site, "attention K/V ring step");
  const std::uint32_t dkv = comm_name(b, CollOp::sendrecv, kv_block_, site, "attention dK/dV ring step");
  std::vector<OpIndex> after = b.last_compute();
  std::vector<OpIndex> arrived;
  OpIndex op = 0;
  OpIndex message = 0;
  for (int i = 0; i < cp_; ++i) {
    if (i == 0) {
      message = b.collective(CommKind::cp, CollOp::sendrecv, kv_block_, kv, after);
    } else if (i + 1 < cp_) {
      const Bytes both = kv_block_ * 2;
      message = b.collective(CommKind::cp, CollOp::sendrecv, both,
                             comm_name(b, CollOp::sendrecv, both, site, "attention K/V and dK/dV ring step"), after);
    } else {
      message = b.collective(CommKind::cp, CollOp::sendrecv, kv_block_, dkv, after);
    }
    op = b.compute(piece, site.phase, names[static_cast<std::size_t>(i)], arrived);
    arrived = {message};
    after = {op, message};
  }
  b.defer_wait(message, WaitRule::next_op, site.cost->role);
  return op;
}

// PyTorch's _templated_ring_attention_backward (context_parallel under torchtitan or pytorch). The K/V
// come as in forward: around the ring one block a step (rotate method alltoall, `p2p`) or in
// one AllGather started at the first step, beside the own block's attention (allgather). The
// dK/dV go around the ring whatever the rotate method (dkv_rotater, an _AllToAllRotater),
// accumulated and sent in float32 (_ContextParallelOptions.convert_to_f32): after step i's
// attention the rank waits for the dK/dV of step i − 1, adds its share and sends them on, one
// message a step, cp in all; after the last step it waits for the last, its own.
OpIndex ContextParallel::pytorch_backward(StepBuilder& b, const OpSite& site) {
  const workload::OpCost piece = step_kernel(*site.cost, cp_);
  const std::vector<std::uint32_t>& names = names_.of(b, site, cp_);
  const std::uint32_t dkv = comm_name(b, CollOp::sendrecv, kv_grad_block_, site, "attention dK/dV ring step");
  const bool gather = comm_ == CpComm::all_gather;
  const Bytes whole = kv_block_ * cp_;
  const std::uint32_t kv = gather ? comm_name(b, CollOp::allgather, whole, site, "attention K/V")
                                  : comm_name(b, CollOp::sendrecv, kv_block_, site, "attention K/V ring step");
  std::vector<OpIndex> producer = b.last_compute();
  std::vector<OpIndex> arrived;  // the K/V this step computes against
  std::optional<OpIndex> added;  // the dK/dV whose wait the previous step's accumulation put on the stream
  std::optional<OpIndex> grads;  // the dK/dV last sent
  OpIndex op = 0;
  for (int i = 0; i < cp_; ++i) {
    std::vector<OpIndex> next;
    if (gather && i == 0) next = {b.collective(CommKind::cp, CollOp::allgather, whole, kv, producer)};
    if (!gather && i + 1 < cp_) next = {b.collective(CommKind::cp, CollOp::sendrecv, kv_block_, kv, producer)};
    producer.clear();
    std::vector<OpIndex> waits = arrived;
    if (added) waits.push_back(*added);
    op = b.compute(piece, site.phase, names[static_cast<std::size_t>(i)], waits);
    std::vector<OpIndex> after{op};
    if (grads) after.push_back(*grads);
    added = grads;
    grads = b.collective(CommKind::cp, CollOp::sendrecv, kv_grad_block_, dkv, after);
    if (!next.empty()) arrived = next;
  }
  b.defer_wait(*grads, WaitRule::next_op, site.cost->role);
  return op;
}

// Every rank's K/V gathered before attention. Under PyTorch's context_parallel
// (_AllGatherRotater) K and V go in one buffer, one AllGather, and the rank's own block (one
// cp-th of the work, as load balancing gives every step) runs first, beside the gather, the rest
// waiting for it (_templated_ring_attention's first step); its backward is pytorch_backward's.
// Transformer Engine's AttnFuncWithCPAndKVAllGather gathers K and then V
// (gather_along_first_dim of each, in forward and again in backward), and after the backward
// reduce-scatters the dK and then the dV back to their owners, one ReduceScatter each.
OpIndex ContextParallel::gathered(StepBuilder& b, const OpSite& site) {
  const Bytes whole = kv_block_ * cp_;
  if (pytorch_) {
    const OpIndex gather =
        b.collective(CommKind::cp, CollOp::allgather, whole,
                     comm_name(b, CollOp::allgather, whole, site, "attention K/V"), b.last_compute());
    const std::vector<std::uint32_t>& names = names_.of(b, site, 2);
    b.compute(step_kernel(*site.cost, cp_), site.phase, names.front(), {});
    return b.compute(step_kernel(*site.cost, cp_, cp_ - 1.0), site.phase, names.back(), {gather});
  }
  // The whole sequence's K, or V: half the gathered K/V.
  const Bytes half = Bytes(whole.count() / 2);
  const OpIndex k = b.collective(CommKind::cp, CollOp::allgather, half,
                                 comm_name(b, CollOp::allgather, half, site, "attention K"), b.last_compute());
  const OpIndex v = b.collective(CommKind::cp, CollOp::allgather, half,
                                 comm_name(b, CollOp::allgather, half, site, "attention V"), {k});
  const OpIndex op = b.compute(*site.cost, site.phase, names_.of(b, site, 1).back(), {v});
  if (site.cost->pass == workload::Pass::forward) return op;
  const OpIndex dk = b.collective(CommKind::cp, CollOp::reducescatter, half,
                                  comm_name(b, CollOp::reducescatter, half, site, "attention dK"), {op});
  const OpIndex dv = b.collective(CommKind::cp, CollOp::reducescatter, half,
                                  comm_name(b, CollOp::reducescatter, half, site, "attention dV"), {dk});
  b.defer_wait(dv, WaitRule::next_op, site.cost->role);
  return op;
}

}  // namespace stepsim::parallelism
