// Bucket readiness and in-order launch of the gradient collectives.
#include "parallelism/bucket_sync.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "workload/op_builder.hpp"

namespace stepsim::parallelism {

BucketSync::BucketSync(BucketLayout layout, bool overlap, CollOp op, bool experts)
    : layout_(std::move(layout)), overlap_(overlap), op_(op), experts_(experts) {
  bucket_of_.assign(layout_.tensors.size(), 0);
  done_.assign(layout_.tensors.size(), false);
  for (std::size_t k = 0; k < layout_.buckets.size(); ++k) {
    for (int t : layout_.buckets[k].tensors) bucket_of_[static_cast<std::size_t>(t)] = static_cast<int>(k);
    missing_.push_back(static_cast<int>(layout_.buckets[k].tensors.size()));
  }
  producer_.assign(layout_.buckets.size(), 0);
  for (std::size_t t = 0; t < layout_.tensors.size(); ++t) {
    const GradTensor& g = layout_.tensors[t];
    tensors_at_[{g.block, g.role}].push_back(static_cast<int>(t));
  }
}

void BucketSync::produced(int tensor, OpIndex op) {
  const auto t = static_cast<std::size_t>(tensor);
  if (done_[t]) return;
  done_[t] = true;
  const auto k = static_cast<std::size_t>(bucket_of_[t]);
  --missing_[k];
  producer_[k] = std::max(producer_[k], op);
}

void BucketSync::run_reducer(int grad_bytes, bool copy_back, bool separate_linears) {
  reducer_bytes_ = grad_bytes;
  copy_back_ = copy_back;
  separate_linears_ = separate_linears;
}

void BucketSync::copy_into_buckets(int grad_bytes, bool separate_linears) {
  run_reducer(grad_bytes, false, separate_linears);
  zero_copies_ = true;
}

// Weight gradients come from wgrad ops and from fused backward ops (norms, embedding);
// input-gradient (dgrad) ops produce none. Under run_reducer a bucket is ready once its
// gradients are in it: after the reducer's kernels that put them there.
void BucketSync::after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) {
  const workload::Pass pass = site.cost->pass;
  if (pass == workload::Pass::forward || pass == workload::Pass::backward_data) return;
  // Under autocast the fp32 gradient is the cast's after the wgrad GEMM.
  if (site.cost->gradient_cast_follows) return;
  const workload::Role role = site.cost->role == workload::Role::fp8_cast ? site.cost->cast_of : site.cost->role;
  const auto it = tensors_at_.find({site.block, role});
  if (it == tensors_at_.end()) return;
  OpIndex ready = op;
  if (reducer_bytes_ > 0) {
    std::vector<int> fresh;
    for (int t : it->second)
      if (!done_[static_cast<std::size_t>(t)]) fresh.push_back(t);
    if (!fresh.empty()) ready = copy_in(b, fresh);
  }
  for (int t : it->second) produced(t, ready);
  if (overlap_) launch_ready(b);
}

// The reducer's autograd hooks on the gradients one backward op produced: mul_out into the
// bucket (or div_ of the bucket's view), a kernel and an operator per parameter.
OpIndex BucketSync::copy_in(StepBuilder& b, const std::vector<int>& tensors) {
  long long elements = 0;
  int parameters = 0;
  for (int t : tensors) {
    elements += layout_.tensors[static_cast<std::size_t>(t)].elements;
    parameters += parameters_of(layout_.tensors[static_cast<std::size_t>(t)], separate_linears_);
  }
  const GradTensor& first = layout_.tensors[static_cast<std::size_t>(tensors.front())];
  const std::string what =
      tensors.size() == 1 ? first.name : fmt::format("{} and {} more", first.name, tensors.size() - 1);
  const int bucket = bucket_of_[static_cast<std::size_t>(tensors.front())];
  const char* owner = zero_copies_ ? "ZeRO" : "DDP";
  const bool scaled = !copy_back_ && !zero_copies_;
  const workload::OpCost cost =
      workload::copy_kernels(fmt::format("{} gradient {}", owner, scaled ? "scaled in its bucket" : "into bucket"),
                             workload::Pass::backward, Bytes(2 * elements * reducer_bytes_), parameters);
  const std::string name = fmt::format("{} {} {} {}", owner, what, scaled ? "scaled in bucket" : "into bucket", bucket);
  return b.compute(cost, Phase::backward, name);
}

// finalize_backward: the compute stream waits for the bucket's collective, then copies each of
// its gradients back from it.
void BucketSync::copy_back(StepBuilder& b, std::size_t bucket) {
  const Bucket& k = layout_.buckets[bucket];
  int parameters = 0;
  for (int t : k.tensors) parameters += parameters_of(layout_.tensors[static_cast<std::size_t>(t)], separate_linears_);
  const workload::OpCost cost =
      workload::copy_kernels("DDP bucket back to gradients", workload::Pass::backward,
                             Bytes(2 * bucket_elements(layout_, k) * reducer_bytes_), parameters);
  b.compute(cost, Phase::backward, fmt::format("DDP bucket {} back to gradients", bucket), {launched_[bucket]});
}

void BucketSync::launch_ready(StepBuilder& b) {
  while (next_ < layout_.buckets.size() && missing_[next_] == 0) launch(b, {producer_[next_]});
}

void BucketSync::launch(StepBuilder& b, const std::vector<OpIndex>& waits) {
  const Bucket& bucket = layout_.buckets[next_];
  const std::string what = fmt::format("bucket {}", next_);
  launched_.push_back(experts_ ? b.expert_dp_collective(op_, bucket.size, what, waits)
                               : b.collective(CommKind::dp, op_, bucket.size, what, waits));
  ++next_;
}

void BucketSync::end_backward(StepBuilder& b) {
  if (overlap_) launch_ready(b);
  while (next_ < layout_.buckets.size()) launch(b, b.last_compute());
  if (reducer_bytes_ > 0 && copy_back_)
    for (std::size_t k = 0; k < layout_.buckets.size(); ++k) copy_back(b, k);
}

}  // namespace stepsim::parallelism
