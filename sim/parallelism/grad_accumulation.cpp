// AccumulateGrad's in-place add per parameter tensor in every micro-batch after the first.
#include "parallelism/grad_accumulation.hpp"

#include <fmt/format.h>

#include "stepsim/framework.hpp"
#include "workload/op_builder.hpp"
#include "workload/shape.hpp"

namespace stepsim::parallelism {

bool accumulates_in_grad(const Scenario& s) {
  if (!traits_of(s.training.framework).pytorch_ddp) return false;
  if (s.data_parallel.kind == DpKind::ddp) return true;
  const bool fsdp = s.data_parallel.kind == DpKind::fsdp || s.data_parallel.kind == DpKind::hsdp;
  return fsdp && s.data_parallel.fsdp_version == 2 && s.parallel.pp > 1;
}

GradAccumulation::GradAccumulation(const Scenario& stage)
    : active_(accumulates_in_grad(stage)), grad_bytes_(element_bytes(stage.training.main_grad)) {
  if (!active_) return;
  const std::vector<GradTensor> tensors = gradient_tensors(stage.model, stage.parallel);
  const bool separate = workload::layer_shape(stage).separate_linears;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    Adds& adds = at_[{tensors[t].block, tensors[t].role}];
    adds.tensors.push_back(static_cast<int>(t));
    adds.parameters += parameters_of(tensors[t], separate);
    adds.elements += tensors[t].elements;
    if (adds.tensors.size() == 1) {
      adds.name = fmt::format("AccumulateGrad {}", tensors[t].name);
    } else {
      adds.name =
          fmt::format("AccumulateGrad {} and {} more", tensors[adds.tensors.front()].name, adds.tensors.size() - 1);
    }
  }
}

// The gradients an op completes are found as the DDP buckets find them (BucketSync): weight
// gradients of wgrad ops and of fused backward ops, under autocast the fp32 cast after the wgrad
// GEMM. The add reads the new gradient and reads and writes the accumulated one; the wgrad
// GEMM's cost already moves the accumulated gradient (workload::gemm's main-gradient traffic),
// so the add's own bytes are the new gradient's read. Its kernels are at least kernel_min each.
void GradAccumulation::after_backward_op(StepBuilder& b, const OpSite& site) {
  if (!active_ || site.micro_batch == 0) return;
  const workload::OpCost& cost = *site.cost;
  if (cost.pass == workload::Pass::forward || cost.pass == workload::Pass::backward_data) return;
  if (cost.gradient_cast_follows) return;
  const workload::Role role = cost.role == workload::Role::fp8_cast ? cost.cast_of : cost.role;
  const auto key = std::make_pair(site.block, role);
  const auto it = at_.find(key);
  if (it == at_.end()) return;
  long long& last = added_in_.try_emplace(key, -1).first->second;
  if (last == site.micro_batch) return;
  last = site.micro_batch;
  const Adds& adds = it->second;
  const workload::OpCost add = workload::copy_kernels("AccumulateGrad add", workload::Pass::backward,
                                                      Bytes(adds.elements * grad_bytes_), adds.parameters);
  b.compute(add, Phase::backward, adds.name);
}

}  // namespace stepsim::parallelism
