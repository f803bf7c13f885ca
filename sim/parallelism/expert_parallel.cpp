// Where the EP all-to-alls go. Forward: dispatch after the permutation, before the first
// expert GEMM; combine after the last expert GEMM, before the unpermutation. Backward: the
// output gradient goes back to the experts before expert fc2's input gradient, and the input
// gradient returns after expert fc1's weight gradient (the grouped GEMM's backward ends with
// it), or after its input gradient when the schedule defers weight gradients. Each is on the
// ep stream and the next compute op of its pass waits for it: only DualPipe, which runs
// another micro-batch's pass beside it, hides it.
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
      split_backward_(splits_backward(s.parallel.schedule)),
      message_(work.layer.dispatch_message) {}

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

void ExpertParallel::before_op(StepBuilder& b, const OpSite& site) {
  if (!enabled_) return;
  const Role role = site.cost->role;
  const Pass pass = site.cost->pass;
  if (role == Role::expert_fc1 && pass == Pass::forward) all_to_all(b, site, "dispatch", b.last_compute());
  if (role == Role::expert_fc2 && pass == Pass::backward_data) {
    all_to_all(b, site, "combine backward", b.last_compute());
  }
}

void ExpertParallel::after_op(StepBuilder& b, const OpSite& site, OpIndex op) {
  if (!enabled_) return;
  const Role role = site.cost->role;
  const Pass pass = site.cost->pass;
  if (role == Role::expert_fc2 && pass == Pass::forward) all_to_all(b, site, "combine", {op});
  const Pass sends_input_grad = split_backward_ ? Pass::backward_data : Pass::backward_weight;
  if (role == Role::expert_fc1 && pass == sends_input_grad) all_to_all(b, site, "dispatch backward", {op});
}

}  // namespace stepsim::parallelism
