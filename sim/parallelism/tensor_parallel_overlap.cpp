// TP communication overlap as Transformer Engine's userbuffers run it (Megatron's
// --tp-comm-overlap, which needs sequence parallelism): the AllGather before a
// column-parallel GEMM (QKV, fc1 forward; the output gradient before the projection and fc2
// input gradients) becomes a ring of tp − 1 point-to-point steps, each passing one rank's
// b·s/t·h chunk on while the GEMM computes the chunk in hand; the ReduceScatter after a
// row-parallel GEMM (projection, fc2 forward) follows each of 4 GEMM pieces, the GEMM running
// on the SMs that the 16-SM ReduceScatter kernel leaves it. These transfers are not NCCL
// calls: each takes NVLink's latency and bandwidth (a ring step moves its chunk to one peer;
// the ReduceScatter moves (t − 1)/t of its part). What it costs: tp (or 4) smaller,
// less efficient GEMMs, and those of the ReduceScatter split slowed by sms/(sms − 16), all
// four, as TE launches each on the SMs left by its SM margin. That is the ReduceScatter's
// whole share: a transfer does not also slow the compute beside it by the engine's NCCL
// slowdown, and the ring's copies run on copy engines beside a GEMM that keeps every SM (TE
// sets no SM margin for its ring exchange). What stays exposed: the ring steps that outlast
// their piece, and the ReduceScatter of the last piece. The backward's other collectives
// already run beside the weight-gradient GEMMs. On the host, the framework calls Transformer
// Engine's GEMM once per site; the chunk loop, each GEMM piece after the first and every
// transfer, runs in its C++ (CommOverlapP2PBase::split_overlap_ag, CommOverlapBase::
// split_overlap_rs): a kernel launch each, no PyTorch dispatch.
#include <fmt/format.h>

#include "parallelism/tensor_parallel.hpp"

namespace stepsim::parallelism {

namespace {

using workload::Pass;
using workload::Role;

constexpr int kReduceScatterSms = 16;

bool ring_site(const OpSite& site) {
  const Role r = site.cost->role;
  if (site.cost->pass == Pass::forward) return r == Role::qkv || r == Role::fc1;
  return site.cost->pass == Pass::backward_data && (r == Role::attn_proj || r == Role::fc2);
}

bool split_site(const OpSite& site) {
  const Role r = site.cost->role;
  return site.cost->pass == Pass::forward && (r == Role::attn_proj || r == Role::fc2);
}

}  // namespace

bool TensorParallel::pipelines(const OpSite& site) const {
  if (!overlap_ || site.block < 1 || site.block > layers_) return false;
  return site.cost->cls == workload::OpClass::gemm && (ring_site(site) || split_site(site));
}

double TensorParallel::reduce_scatter_work_scale() const {
  if (sms_ <= 2 * kReduceScatterSms) return 2.0;  // a small GPU: the kernel takes half
  return static_cast<double>(sms_) / (sms_ - kReduceScatterSms);
}

OpIndex TensorParallel::issue_pipelined(StepBuilder& b, const OpSite& site) {
  b.set_comm_role(site.cost->role);
  const OpIndex last = ring_site(site) ? ring_gathered(b, site) : split_reduced(b, site);
  b.set_comm_role(std::nullopt);
  return last;
}

std::uint32_t TensorParallel::overlap_name(StepBuilder& b, const OpSite& site, CollOp op, Bytes size,
                                           const char* what) {
  const auto [it, inserted] = overlap_names_.try_emplace({site.block, site.cost, op}, 0);
  if (inserted) {
    it->second = b.collective_name(CommKind::tp, op, size, fmt::format("{} {}", op_name(site, layers_), what));
  }
  return it->second;
}

// One ring step: a copy of `chunk` to the next TP rank over NVLink.
CollectiveCost TensorParallel::ring_step_cost() const { return {nvlink_latency_, nvlink_, {1.0, 0.0}}; }

// A ReduceScatter of S bytes in NVLink's ring: (t − 1)/t of S leave each GPU.
CollectiveCost TensorParallel::reduce_scatter_cost() const {
  const double share = static_cast<double>(tp_ - 1) / tp_;
  return {nvlink_latency_ * (tp_ - 1), nvlink_.scaled(1.0 / share), {share, 0.0}};
}

// Piece i computes the chunk in hand while step i passes it on; piece i + 1 waits for it. A
// low-precision GEMM's operand goes round quantized, as userbuffers' FP8 buffers hold it.
OpIndex TensorParallel::ring_gathered(StepBuilder& b, const OpSite& site) {
  const Bytes chunk = quantized(site, message(site)) / tp_;
  const workload::OpCost piece = op_piece(*site.cost, tp_);
  const std::vector<std::uint32_t>& names = pieces_.of(b, site, tp_);
  const std::uint32_t step = overlap_name(b, site, CollOp::sendrecv, chunk, "AllGather ring step");
  std::vector<OpIndex> producer = b.last_compute();
  std::vector<OpIndex> arrived;
  OpIndex op = 0;
  for (int i = 0; i < tp_; ++i) {
    std::vector<OpIndex> next;
    if (i + 1 < tp_) next = {b.transfer(CommKind::tp, CollOp::sendrecv, chunk, step, ring_step_cost(), producer)};
    producer.clear();
    op = b.compute(piece, site.phase, names[static_cast<std::size_t>(i)], arrived);
    for (const OpIndex launched : next) b.launched_from_cpp(launched);
    if (i > 0) b.launched_from_cpp(op);
    arrived = next;
  }
  return op;
}

// Each piece's output is reduce-scattered while the next piece computes; the op after the
// GEMM waits for the last.
OpIndex TensorParallel::split_reduced(StepBuilder& b, const OpSite& site) {
  const Bytes part = message(site) / kReduceScatterPieces;
  const workload::OpCost piece = op_piece(*site.cost, kReduceScatterPieces, reduce_scatter_work_scale());
  const std::vector<std::uint32_t>& names = pieces_.of(b, site, kReduceScatterPieces);
  const std::uint32_t rs = overlap_name(b, site, CollOp::reducescatter, part, "split");
  OpIndex op = 0;
  OpIndex last = 0;
  for (int i = 0; i < kReduceScatterPieces; ++i) {
    op = b.compute(piece, site.phase, names[static_cast<std::size_t>(i)]);
    if (i > 0) b.launched_from_cpp(op);
    last = b.transfer(CommKind::tp, CollOp::reducescatter, part, rs, reduce_scatter_cost(), {op});
    b.launched_from_cpp(last);
  }
  b.defer_wait(last, WaitRule::next_op, site.cost->role);
  return op;
}

}  // namespace stepsim::parallelism
