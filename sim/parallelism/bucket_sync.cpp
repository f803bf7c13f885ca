// Bucket readiness and in-order launch of the gradient collectives.
#include "parallelism/bucket_sync.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

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

// Weight gradients come from wgrad ops and from fused backward ops (norms, embedding);
// input-gradient (dgrad) ops produce none.
void BucketSync::after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) {
  const workload::Pass pass = site.cost->pass;
  if (pass == workload::Pass::forward || pass == workload::Pass::backward_data) return;
  const auto it = tensors_at_.find({site.block, site.cost->role});
  if (it == tensors_at_.end()) return;
  for (int t : it->second) produced(t, op);
  if (overlap_) launch_ready(b);
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
}

}  // namespace stepsim::parallelism
