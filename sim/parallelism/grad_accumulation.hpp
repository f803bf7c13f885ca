// Gradient accumulation across micro-batches where autograd itself accumulates into each
// parameter's .grad: eager PyTorch's AccumulateGrad, under PyTorch's DDP and under FSDP2 with a
// pipeline schedule.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "parallelism/grad_buckets.hpp"
#include "parallelism/step_builder.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::parallelism {

// AccumulateGrad (torch/csrc/autograd/functions/accumulate_grad.h, accumulateGrad) steals a
// parameter's first gradient of the step (no kernel: zero_grad left .grad None) and adds every
// later one in place (`variable_grad += new_grad`: an aten::add_, one operator and one kernel per
// parameter tensor). Under DDP's no_sync() the micro-batches before the last one accumulate
// this way, and the last adds too before the reducer's hook takes the gradient. FSDP2 under a
// pipeline schedule runs every backward but a chunk's last without gradient sync or resharding
// (PipelineStage.backward_maybe_with_nosync), so its unsharded gradients accumulate alike.
// Megatron-Core accumulates into its main-gradient buffer inside the weight-gradient GEMM
// (gradient_accumulation_fusion), FSDP without a pipeline and ZeRO reduce or copy each
// micro-batch's gradients away, and FSDP1's flat parameter (one leaf a unit) is left out.
class GradAccumulation {
 public:
  // `stage`: the stage's scenario as its data-parallel strategy sees it (its tensors only).
  explicit GradAccumulation(const Scenario& stage);

  // After a backward op of the chunk's micro-batch `site.micro_batch`: in every micro-batch but
  // the chunk's first, the in-place add of each gradient the op completed, on the compute stream.
  void after_backward_op(StepBuilder& b, const OpSite& site);

  bool active() const { return active_; }

 private:
  struct Adds {
    std::vector<int> tensors;
    int parameters = 0;  // the model code's parameters they are (parameters_of): an add each
    long long elements = 0;
    std::string name;
  };
  bool active_ = false;
  int grad_bytes_ = 0;
  std::map<std::pair<int, workload::Role>, Adds> at_;             // by (block, role) of the producing op
  std::map<std::pair<int, workload::Role>, long long> added_in_;  // the micro-batch last added
};

// Whether `s`'s framework accumulates micro-batch gradients through AccumulateGrad.
bool accumulates_in_grad(const Scenario& s);

}  // namespace stepsim::parallelism
