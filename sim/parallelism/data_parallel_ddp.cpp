// PyTorch DDP (torch/csrc/distributed/c10d/reducer.cpp): gradients in buckets, each AllReduce launched on the DP
// stream once its bucket is complete, strictly in bucket order, and only in the last
// micro-batch; the optimizer waits for every bucket.
#include "parallelism/bucket_sync.hpp"
#include "parallelism/data_parallel.hpp"

namespace stepsim::parallelism {

namespace {

// Expert gradients have buckets of their own, all-reduced over the expert-dp group.
class Ddp final : public DataParallel {
 public:
  explicit Ddp(const Scenario& scenario)
      : sync_(bucket_layout(scenario), scenario.data_parallel.overlap_grad_reduce, CollOp::allreduce) {
    if (expert_dp_size(scenario) > 1)
      sync_.add_experts(expert_bucket_layout(scenario, false), scenario.data_parallel.overlap_grad_reduce,
                        CollOp::allreduce);
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
