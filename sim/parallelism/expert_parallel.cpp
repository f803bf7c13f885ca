// Where the EP all-to-alls go. Forward: dispatch after the permutation, before the first
// expert GEMM; combine after the last expert GEMM, before the unpermutation. Backward: the
// output gradient goes back to the experts before expert fc2's input gradient, and the input
// gradient returns after expert fc1's weight gradient (the grouped GEMM's backward ends with
// it), or after its input gradient when the schedule defers weight gradients. Each is on the
// ep stream and the next compute op of its pass waits for it: only DualPipe, which runs
// another micro-batch's pass beside it, hides it. With expert tensor parallelism the ETP
// group's AllGather follows each all-to-all into the experts and its ReduceScatter precedes
// each one out of them, on the etp stream.
#include "parallelism/expert_parallel.hpp"

#include <fmt/format.h>

#include "parallelism/pipeline_schedule.hpp"

namespace stepsim::parallelism {

namespace {

using workload::Pass;
using workload::Role;

}  // namespace

ExpertParallel::ExpertParallel(const Scenario& s, const workload::ModelWork& work)
    : enabled_(s.model.moe.experts > 0 && s.parallel.ep > 1),
      etp_(s.model.moe.experts > 0 && s.parallel.etp > 1),
      split_backward_(splits_backward(s.parallel.schedule)),
      message_(work.layer.dispatch_message),
      etp_message_(work.layer.expert_tp_message) {}

OpIndex ExpertParallel::expert_tp(StepBuilder& b, const OpSite& site, CollOp op, const char* what,
                                  const std::vector<OpIndex>& waits) {
  const auto [it, inserted] = names_.try_emplace({site.block, what}, 0);
  if (inserted) {
    it->second = b.collective_name(CommKind::ep, op, etp_message_, fmt::format("L{} {}", site.block - 1, what));
  }
  const OpIndex c = b.expert_tp_collective(op, etp_message_, it->second, waits);
  b.defer_wait(c, WaitRule::next_op, site.cost->role);
  return c;
}

OpIndex ExpertParallel::all_to_all(StepBuilder& b, const OpSite& site, const char* what,
                                   const std::vector<OpIndex>& waits) {
  const auto [it, inserted] = names_.try_emplace({site.block, what}, 0);
  if (inserted) {
    it->second =
        b.collective_name(CommKind::ep, CollOp::alltoall, message_, fmt::format("L{} {}", site.block - 1, what));
  }
  const OpIndex op = b.collective(CommKind::ep, CollOp::alltoall, message_, it->second, waits);
  b.defer_wait(op, WaitRule::next_op, site.cost->role);
  return op;
}

// Forward: the all-to-all, then the ETP AllGather, before the experts; the ETP ReduceScatter,
// then the all-to-all, after them. The backward mirrors both.
void ExpertParallel::before_op(StepBuilder& b, const OpSite& site) {
  if (!enabled_ && !etp_) return;
  const Role role = site.cost->role;
  const Pass pass = site.cost->pass;
  const bool into_experts =
      (role == Role::expert_fc1 && pass == Pass::forward) || (role == Role::expert_fc2 && pass == Pass::backward_data);
  if (!into_experts) return;
  const bool forward = pass == Pass::forward;
  std::vector<OpIndex> waits = b.last_compute();
  if (enabled_) waits = {all_to_all(b, site, forward ? "dispatch" : "combine backward", waits)};
  if (etp_) expert_tp(b, site, CollOp::allgather, forward ? "etp gather" : "etp gather backward", waits);
}

void ExpertParallel::after_op(StepBuilder& b, const OpSite& site, OpIndex op) {
  if (!enabled_ && !etp_) return;
  const Role role = site.cost->role;
  const Pass pass = site.cost->pass;
  const Pass sends_input_grad = split_backward_ ? Pass::backward_data : Pass::backward_weight;
  const bool out_of_experts =
      (role == Role::expert_fc2 && pass == Pass::forward) || (role == Role::expert_fc1 && pass == sends_input_grad);
  if (!out_of_experts) return;
  const bool forward = pass == Pass::forward;
  std::vector<OpIndex> waits{op};
  if (etp_)
    waits = {expert_tp(b, site, CollOp::reducescatter, forward ? "etp scatter" : "etp scatter backward", waits)};
  if (enabled_) all_to_all(b, site, forward ? "combine" : "dispatch backward", waits);
}

}  // namespace stepsim::parallelism
