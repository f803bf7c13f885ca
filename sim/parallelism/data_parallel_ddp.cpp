// PyTorch DDP (torch/csrc/distributed/c10d/reducer.cpp): gradients in buckets, each AllReduce launched on the DP
// stream once its bucket is complete, strictly in bucket order, and only in the last
// micro-batch; the optimizer waits for every bucket. Where the framework's DDP is PyTorch's
// (or the scenario turns gradient_as_bucket_view off), the reducer's own kernels run on the
// compute stream: each gradient scaled into its bucket, and without gradient_as_bucket_view
// copied back after its bucket's AllReduce. Megatron-Core's DDP reduces its main-gradient
// buffer as it is.
#include "parallelism/bucket_sync.hpp"
#include "parallelism/data_parallel.hpp"
#include "stepsim/framework.hpp"
#include "workload/shape.hpp"

namespace stepsim::parallelism {

namespace {

// Expert gradients have buckets of their own, all-reduced over the expert-dp group.
class Ddp final : public DataParallel {
 public:
  explicit Ddp(const Scenario& scenario)
      : sync_(dense_layout(scenario, bucket_layout(scenario)), scenario.data_parallel.overlap_grad_reduce,
              CollOp::allreduce) {
    if (expert_dp_size(scenario) > 1)
      sync_.add_experts(expert_bucket_layout(scenario, megatron_buckets(DpKind::ddp, scenario.training.framework)),
                        scenario.data_parallel.overlap_grad_reduce, CollOp::allreduce);
    const DataParallelSpec& dp = scenario.data_parallel;
    if (traits_of(scenario.training.framework).pytorch_ddp || !dp.gradient_as_bucket_view)
      sync_.run_reducer(element_bytes(scenario.training.main_grad), !dp.gradient_as_bucket_view,
                        workload::layer_shape(scenario).separate_linears);
  }
  void after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) override {
    sync_.after_backward_op(b, site, op);
  }
  // Without overlap (or for gradients no op was seen to produce) every remaining bucket is
  // reduced after the whole backward.
  void end_backward(StepBuilder& b) override { sync_.end_backward(b); }
  std::vector<OpIndex> optimizer_waits() const override { return sync_.launched(); }

 private:
  GradientSync sync_;
};

}  // namespace

std::unique_ptr<DataParallel> make_ddp(const Scenario& scenario) { return std::make_unique<Ddp>(scenario); }

}  // namespace stepsim::parallelism
