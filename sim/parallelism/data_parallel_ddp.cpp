// PyTorch DDP (REFERENCE.md §3): gradients in buckets, each AllReduce launched on the DP
// stream once its bucket is complete, strictly in bucket order, and only in the last
// micro-batch; the optimizer waits for every bucket.
#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "parallelism/data_parallel.hpp"
#include "parallelism/grad_buckets.hpp"

namespace stepsim::parallelism {

namespace {

class Ddp final : public DataParallel {
 public:
  explicit Ddp(const Scenario& scenario);
  void after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) override;
  void end_backward(StepBuilder& b) override;
  std::vector<OpIndex> optimizer_waits() const override { return launched_; }

 private:
  void produced(int tensor, OpIndex op);
  void launch_ready(StepBuilder& b);
  void launch(StepBuilder& b, std::vector<OpIndex> waits);

  BucketLayout layout_;
  bool overlap_;
  std::vector<int> bucket_of_;             // per tensor
  std::vector<bool> done_;                 // per tensor: gradient produced
  std::vector<int> missing_;               // per bucket: gradients still to come
  std::vector<OpIndex> producer_;          // per bucket: the op producing its last gradient
  std::map<std::pair<int, workload::Role>, std::vector<int>> tensors_at_;  // by (block, role)
  std::size_t next_ = 0;                   // next bucket to launch
  std::vector<OpIndex> launched_;
};

Ddp::Ddp(const Scenario& scenario)
    : layout_(bucket_layout(scenario)), overlap_(scenario.data_parallel.overlap_grad_reduce) {
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

void Ddp::produced(int tensor, OpIndex op) {
  const auto t = static_cast<std::size_t>(tensor);
  if (done_[t]) return;
  done_[t] = true;
  const auto k = static_cast<std::size_t>(bucket_of_[t]);
  --missing_[k];
  producer_[k] = std::max(producer_[k], op);
}

// Weight gradients come from wgrad ops and from fused backward ops (norms, embedding);
// input-gradient (dgrad) ops produce none.
void Ddp::after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) {
  const workload::Pass pass = site.cost->pass;
  if (pass == workload::Pass::forward || pass == workload::Pass::backward_data) return;
  const auto it = tensors_at_.find({site.block, site.cost->role});
  if (it == tensors_at_.end()) return;
  for (int t : it->second) produced(t, op);
  if (overlap_) launch_ready(b);
}

void Ddp::launch_ready(StepBuilder& b) {
  while (next_ < layout_.buckets.size() && missing_[next_] == 0) launch(b, {producer_[next_]});
}

void Ddp::launch(StepBuilder& b, std::vector<OpIndex> waits) {
  const Bucket& bucket = layout_.buckets[next_];
  launched_.push_back(b.collective(CommKind::dp, CollOp::allreduce, bucket.size,
                                   fmt::format("bucket {}", next_), std::move(waits)));
  ++next_;
}

// Without overlap (or for gradients no op was seen to produce) every remaining bucket is
// reduced after the whole backward.
void Ddp::end_backward(StepBuilder& b) {
  if (overlap_) launch_ready(b);
  while (next_ < layout_.buckets.size()) launch(b, b.last_compute());
}

}  // namespace

std::unique_ptr<DataParallel> make_ddp(const Scenario& scenario) {
  return std::make_unique<Ddp>(scenario);
}

}  // namespace stepsim::parallelism
