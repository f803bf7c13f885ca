// Bucketed gradient synchronisation shared by DDP (AllReduce) and the distributed optimizer
// (ReduceScatter): a bucket is launched once all its gradients exist, strictly in bucket
// order, and only in the last micro-batch (PyTorch's reducer.cpp; Megatron-LM's DDP wrapper).
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "parallelism/grad_buckets.hpp"
#include "parallelism/step_builder.hpp"

namespace stepsim::parallelism {

class BucketSync {
 public:
  // `overlap`: launch buckets during the backward as they fill; otherwise all at its end.
  // `experts`: the buckets of expert gradients, on the expert-dp communicator.
  BucketSync(BucketLayout layout, bool overlap, CollOp op, bool experts = false);

  // PyTorch DDP's reducer runs on the compute stream beside the buckets (reducer.cpp): every
  // gradient, once produced, is scaled by 1/world into its bucket, one kernel and one PyTorch
  // operator per parameter reading and writing `grad_bytes` an element, the gradients'
  // precision, which their buckets share (mul_out; div_ in place under
  // gradient_as_bucket_view), and the bucket waits for those kernels. With
  // `copy_back`, each bucket's gradients are copied back once its collective has ended
  // (finalize_backward's copy_bucket_to_grad), issued after the backward. `separate_linears`:
  // a gradient tensor may stand for several parameters, each its own operator (parameters_of).
  void run_reducer(int grad_bytes, bool copy_back, bool separate_linears);
  // DeepSpeed's ZeRO-1/2 hooks copy every gradient, once produced, into the bucket's
  // contiguous buffer (stage_1_and_2.py, reduce_independent_p_g_buckets_and_remove_grads under
  // contiguous_gradients): the reducer's kernels, named as ZeRO's copies, never copied back.
  void copy_into_buckets(int grad_bytes, bool separate_linears);

  void after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op);
  // Launches every bucket not launched yet (gradients no op was seen to produce), then, under
  // run_reducer with copy_back, copies every bucket back to its gradients.
  void end_backward(StepBuilder& b);
  const std::vector<OpIndex>& launched() const { return launched_; }
  const BucketLayout& layout() const { return layout_; }
  bool all_launched() const { return next_ == layout_.buckets.size(); }

 private:
  void produced(int tensor, OpIndex op);
  void launch_ready(StepBuilder& b);
  void launch(StepBuilder& b, const std::vector<OpIndex>& waits);
  OpIndex copy_in(StepBuilder& b, const std::vector<int>& tensors);
  void copy_back(StepBuilder& b, std::size_t bucket);

  BucketLayout layout_;
  bool overlap_;
  CollOp op_;
  bool experts_;
  std::vector<int> bucket_of_;     // per tensor
  std::vector<bool> done_;         // per tensor: gradient produced
  std::vector<int> missing_;       // per bucket: gradients still to come
  std::vector<OpIndex> producer_;  // per bucket: the op producing its last gradient
  std::map<std::pair<int, workload::Role>, std::vector<int>> tensors_at_;  // by (block, role)
  std::size_t next_ = 0;                                                   // next bucket to launch
  std::vector<OpIndex> launched_;
  int reducer_bytes_ = 0;  // run_reducer's bytes per gradient element; 0: no reducer kernels
  bool copy_back_ = false;
  bool separate_linears_ = false;  // run_reducer's: parameters_of each tensor
  bool zero_copies_ = false;  // copy_into_buckets: DeepSpeed's copies rather than DDP's reducer
};

// The dense gradients' buckets and, for a mixture of experts, the expert gradients' own
// buckets on the expert-dp communicator: driven together, waited for together.
class GradientSync {
 public:
  GradientSync(BucketLayout dense, bool overlap, CollOp op) : dense_(std::move(dense), overlap, op) {}
  void add_experts(BucketLayout experts, bool overlap, CollOp op) {
    experts_.emplace(std::move(experts), overlap, op, true);
  }

  void after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) {
    dense_.after_backward_op(b, site, op);
    if (experts_) experts_->after_backward_op(b, site, op);
  }
  void end_backward(StepBuilder& b) {
    dense_.end_backward(b);
    if (experts_) experts_->end_backward(b);
  }
  // BucketSync::run_reducer and copy_into_buckets for the dense and the expert buckets (after
  // add_experts).
  void run_reducer(int grad_bytes, bool copy_back, bool separate_linears) {
    dense_.run_reducer(grad_bytes, copy_back, separate_linears);
    if (experts_) experts_->run_reducer(grad_bytes, copy_back, separate_linears);
  }
  void copy_into_buckets(int grad_bytes, bool separate_linears) {
    dense_.copy_into_buckets(grad_bytes, separate_linears);
    if (experts_) experts_->copy_into_buckets(grad_bytes, separate_linears);
  }
  std::vector<OpIndex> launched() const {
    std::vector<OpIndex> all = dense_.launched();
    if (experts_) all.insert(all.end(), experts_->launched().begin(), experts_->launched().end());
    return all;
  }
  const BucketLayout& layout() const { return dense_.layout(); }
  bool all_launched() const { return dense_.all_launched() && (!experts_ || experts_->all_launched()); }
  // The expert gradients' layout; nullptr without expert buckets.
  const BucketLayout* expert_layout() const { return experts_ ? &experts_->layout() : nullptr; }

 private:
  BucketSync dense_;
  std::optional<BucketSync> experts_;
};

}  // namespace stepsim::parallelism
