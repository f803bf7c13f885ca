// Megatron's distributed optimizer (Megatron-LM megatron/core/distributed): gradient buckets reduce-scattered
// during the last micro-batch's backward, the optimizer updates this rank's 1/dp shard, and
// the updated parameters are all-gathered bucket by bucket (by DeepSpeed, parameter group by
// group). zero2 shards the gradients too, so
// it reduce-scatters them in every micro-batch's backward, keeping only its shard between
// micro-batches: DeepSpeed's ZeRO-2 (stage_1_and_2.py, reduce_ready_partitions_and_remove_grads
// reduces whenever partition_gradients, and otherwise only at the accumulation boundary).
// DeepSpeed's ZeRO-1/2 all-reduces each bucket (stage_1_and_2.py, average_tensor: with
// use_multi_rank_bucket_allreduce, True by default since DeepSpeed 0.12.4, every partition
// owner's slices of the bucket go in one all_reduce, and each rank keeps its own), twice the
// bytes a ReduceScatter moves. Under DeepSpeed's pipeline engine (framework deepspeed, pp > 1)
// ZeRO-1 is its BF16 optimizer's: every gradient all-reduced after the whole schedule, then
// the same sharded update and parameter AllGather.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "parallelism/bucket_sync.hpp"
#include "parallelism/data_parallel.hpp"
#include "parallelism/memory_model.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"
#include "workload/shape.hpp"

namespace stepsim::parallelism {

namespace {

// How a gradient bucket is reduced: DeepSpeed all-reduces it, Megatron-Core reduce-scatters it.
CollOp bucket_reduction(const Scenario& s) {
  return s.training.framework == Framework::deepspeed ? CollOp::allreduce : CollOp::reducescatter;
}

// With overlap_param_gather the step sees the gather of the previous step's update: the
// first bucket's AllGather at the start of the forward (exposed), and each later one
// dispatched when the forward reaches the bucket before it. Without it every AllGather
// follows the optimizer step, before the next forward. Expert gradients of an MoE model have
// buckets of their own, reduce-scattered over the expert-dp group, whose ranks update 1/edp
// of the experts and all-gather them after the optimizer step.
class Zero final : public DataParallel {
 public:
  explicit Zero(const Scenario& scenario);
  void after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) override;
  void end_backward(StepBuilder& b) override;
  bool reduces_every_micro_batch() const override { return every_micro_batch_; }
  std::vector<OpIndex> optimizer_waits() const override { return every_micro_batch_ ? launched_ : sync_.launched(); }
  void before_block(StepBuilder& b, const BlockSite& site) override;
  workload::OpCost optimizer_op(const workload::OpCost& whole) const override;
  void after_optimizer(StepBuilder& b, OpIndex optimizer) override;

 private:
  std::size_t gradient_bucket(std::size_t gather) const { return gathered_.size() - 1 - gather; }
  void reach(StepBuilder& b, std::size_t gather);
  void dispatch(StepBuilder& b, std::size_t gather, const std::vector<OpIndex>& waits);
  void gather_param_groups(StepBuilder& b, OpIndex optimizer);

  // zero2's buckets of the micro-batches whose reduction has not all been launched yet.
  GradientSync& micro_batch_sync(int micro_batch);
  void retire(int micro_batch);

  CollOp reduction_;
  int copy_bytes_ = 0;  // DeepSpeed's copies of each gradient into its bucket, bytes an element
  bool separate_linears_ = false;  // and whether a tensor stands for several parameters (parameters_of)
  GradientSync sync_;  // zero1's, and the bucket layouts zero2 copies for each micro-batch
  bool every_micro_batch_;
  bool overlap_;
  std::map<int, GradientSync> in_flight_;
  std::set<int> retired_;          // micro-batches whose reduction has all been launched
  std::vector<OpIndex> launched_;  // zero2: every micro-batch's collectives
  int dp_;
  int expert_dp_;
  long long dense_params_ = 0;   // this stage's parameters outside the routed experts
  long long expert_params_ = 0;  // and inside them
  bool overlap_param_gather_;
  bool deepspeed_;
  Precision precision_;
  // Buckets in forward order (the reverse of the gradient buckets), and which of them hold
  // each block's parameters.
  std::map<int, std::vector<std::size_t>> gathers_at_;
  std::vector<bool> reached_;
  std::vector<std::optional<OpIndex>> gathered_;
};

Zero::Zero(const Scenario& s)
    : reduction_(bucket_reduction(s)),
      sync_(dense_layout(s, deepspeed_pipeline_engine(s) ? deepspeed_engine_layout(s) : megatron_bucket_layout(s)),
            s.data_parallel.overlap_grad_reduce, reduction_),
      every_micro_batch_(s.data_parallel.kind == DpKind::zero2),
      overlap_(s.data_parallel.overlap_grad_reduce),
      dp_(s.parallel.dp),
      expert_dp_(expert_dp_size(s)),
      overlap_param_gather_(s.data_parallel.overlap_param_gather),
      deepspeed_(s.training.framework == Framework::deepspeed),
      precision_(s.training.precision) {
  STEPSIM_CHECK(!overlap_param_gather_ || s.data_parallel.overlap_grad_reduce,
                "overlap_param_gather without overlap_grad_reduce, which validation refuses");
  const BucketLayout& layout = sync_.layout();
  const std::size_t n = layout.buckets.size();
  reached_.assign(n, false);
  gathered_.assign(n, std::nullopt);
  for (std::size_t g = 0; g < n; ++g) {
    for (int t : layout.buckets[gradient_bucket(g)].tensors) {
      auto& at = gathers_at_[layout.tensors[static_cast<std::size_t>(t)].block];
      if (at.empty() || at.back() != g) at.push_back(g);
    }
  }
  for (auto& [block, list] : gathers_at_) std::sort(list.begin(), list.end());
  for (const GradTensor& t : gradient_tensors(s.model, s.parallel))
    (t.expert ? expert_params_ : dense_params_) += t.elements;
  if (expert_dp_ > 1 && expert_params_ > 0) {
    sync_.add_experts(expert_bucket_layout(s, true), s.data_parallel.overlap_grad_reduce, reduction_);
  }
  if (deepspeed_ipg_buffers(s)) {
    copy_bytes_ = compute_bytes(s);
    separate_linears_ = workload::layer_shape(s).separate_linears;
    sync_.copy_into_buckets(copy_bytes_, separate_linears_);
  }
}

void Zero::after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) {
  if (!every_micro_batch_) {
    sync_.after_backward_op(b, site, op);
    return;
  }
  // A backward op after the micro-batch's last gradient (an input gradient) has nothing to add.
  if (retired_.count(site.micro_batch) != 0) return;
  GradientSync& sync = micro_batch_sync(site.micro_batch);
  const std::size_t before = sync.launched().size();
  sync.after_backward_op(b, site, op);
  if (!overlap_) {
    // Without overlap_comm DeepSpeed's hook reduces each bucket as it fills, on the compute
    // stream (stage_1_and_2.py, average_tensor: the current stream): the backward waits for it.
    const std::vector<OpIndex> launched = sync.launched();
    for (std::size_t i = before; i < launched.size(); ++i)
      b.defer_wait(launched[i], WaitRule::next_op, workload::Role::embedding);
  }
  if (sync.all_launched()) retire(site.micro_batch);
}

void Zero::end_backward(StepBuilder& b) {
  if (!every_micro_batch_) {
    sync_.end_backward(b);
    return;
  }
  while (!in_flight_.empty()) {
    GradientSync& sync = in_flight_.begin()->second;
    const std::size_t before = sync.launched().size();
    sync.end_backward(b);
    const std::vector<OpIndex> launched = sync.launched();
    for (std::size_t i = before; i < launched.size() && !overlap_; ++i)
      b.defer_wait(launched[i], WaitRule::next_op, workload::Role::embedding);
    retire(in_flight_.begin()->first);
  }
}

// Each bucket is launched once its gradients exist, with overlap_comm or without (which only
// makes the backward wait for it: after_backward_op).
GradientSync& Zero::micro_batch_sync(int micro_batch) {
  auto it = in_flight_.find(micro_batch);
  if (it != in_flight_.end()) return it->second;
  GradientSync sync(sync_.layout(), true, reduction_);
  if (const BucketLayout* experts = sync_.expert_layout()) sync.add_experts(*experts, true, reduction_);
  if (copy_bytes_ > 0) sync.copy_into_buckets(copy_bytes_, separate_linears_);
  return in_flight_.emplace(micro_batch, std::move(sync)).first->second;
}

void Zero::retire(int micro_batch) {
  const auto it = in_flight_.find(micro_batch);
  const std::vector<OpIndex> ops = it->second.launched();
  launched_.insert(launched_.end(), ops.begin(), ops.end());
  in_flight_.erase(it);
  retired_.insert(micro_batch);
}

// Adam over 1/dp of the dense parameters and 1/edp of the experts.
workload::OpCost Zero::optimizer_op(const workload::OpCost& whole) const {
  return sharded_optimizer(whole, dense_params_, dp_, expert_params_, expert_dp_);
}

void Zero::before_block(StepBuilder& b, const BlockSite& site) {
  if (!overlap_param_gather_ || site.phase != Phase::forward || site.micro_batch != 0) return;
  const auto it = gathers_at_.find(site.block);
  if (it == gathers_at_.end()) return;
  for (std::size_t g : it->second) reach(b, g);
}

// The forward reaches bucket g: its parameters must have arrived, and bucket g + 1's
// gather starts now.
void Zero::reach(StepBuilder& b, std::size_t g) {
  if (reached_[g]) return;
  reached_[g] = true;
  if (!gathered_[g]) dispatch(b, g, {});
  if (g + 1 < gathered_.size() && !gathered_[g + 1]) dispatch(b, g + 1, {});
  b.defer_wait(*gathered_[g], WaitRule::next_op, workload::Role::embedding);
}

void Zero::dispatch(StepBuilder& b, std::size_t g, const std::vector<OpIndex>& waits) {
  const BucketLayout& layout = sync_.layout();
  const std::size_t k = gradient_bucket(g);
  const Bytes size = bucket_gather_bytes(layout, layout.buckets[k], precision_);
  gathered_[g] = b.collective(CommKind::dp, CollOp::allgather, size, fmt::format("bucket {} params", k), waits);
}

// Buckets the forward did not gather (all of them without overlap_param_gather).
void Zero::after_optimizer(StepBuilder& b, OpIndex optimizer) {
  if (deepspeed_) {
    gather_param_groups(b, optimizer);
    return;
  }
  for (std::size_t g = 0; g < gathered_.size(); ++g) {
    if (!gathered_[g]) dispatch(b, g, {optimizer});
  }
  const BucketLayout* experts = sync_.expert_layout();
  if (experts == nullptr) return;
  const BucketLayout& layout = *experts;
  for (std::size_t k = 0; k < layout.buckets.size(); ++k) {
    const Bytes size = bucket_gather_bytes(layout, layout.buckets[k], precision_);
    b.expert_dp_collective(CollOp::allgather, size, fmt::format("bucket {} params", k), {optimizer});
  }
}

// DeepSpeed's ZeRO-1/2 (and its pipeline engine's BF16 optimizer) all-gathers each parameter
// group's flat 16-bit buffer in one AllGather after its optimizer step (runtime/utils.py,
// all_gather_dp_groups: one all_gather_into_tensor per group where torch has it; DeepSpeed's
// allgather_bucket_size splits it only where torch does not). Megatron-DeepSpeed's groups are
// the parameters with weight decay and those without (norms and biases); under MoE each is
// split again into the experts' own group, gathered over the expert data-parallel group.
void Zero::gather_param_groups(StepBuilder& b, OpIndex optimizer) {
  const int bytes = low_precision(precision_) ? 2 : element_bytes(precision_);
  const auto groups = [&](const BucketLayout& layout) {
    std::pair<long long, long long> decayed_and_not{0, 0};
    for (const GradTensor& t : layout.tensors)
      (weight_decayed(t) ? decayed_and_not.first : decayed_and_not.second) += t.elements;
    return decayed_and_not;
  };
  const auto [decayed, not_decayed] = groups(sync_.layout());
  if (decayed > 0)
    b.collective(CommKind::dp, CollOp::allgather, Bytes(decayed * bytes), "param group 0 params", {optimizer});
  if (not_decayed > 0)
    b.collective(CommKind::dp, CollOp::allgather, Bytes(not_decayed * bytes), "param group 1 params", {optimizer});
  const BucketLayout* experts = sync_.expert_layout();
  if (experts == nullptr) return;
  const auto [expert_decayed, expert_not_decayed] = groups(*experts);
  if (expert_decayed > 0)
    b.expert_dp_collective(CollOp::allgather, Bytes(expert_decayed * bytes), "expert param group 0 params",
                           {optimizer});
  if (expert_not_decayed > 0)
    b.expert_dp_collective(CollOp::allgather, Bytes(expert_not_decayed * bytes), "expert param group 1 params",
                           {optimizer});
}

}  // namespace

std::unique_ptr<DataParallel> make_zero(const Scenario& scenario) { return std::make_unique<Zero>(scenario); }

std::string zero_notes(const Scenario& s) {
  Scenario first = s;  // the stage whose first model chunk alone is split into buckets
  first.parallel.stage = 0;
  const BucketLayout layout = megatron_bucket_layout(s.parallel.pp > 1 ? first : s);
  long long elements = 0;  // a rank's parameters: of stage 0 under a pipeline
  for (const Bucket& b : layout.buckets) elements += bucket_elements(layout, b);
  // The experts' states are sharded over the expert-dp group (tp·cp·dp / (ep·etp) ranks), not dp.
  long long expert_elements = 0;
  for (const GradTensor& t : gradient_tensors(s.model, (s.parallel.pp > 1 ? first : s).parallel))
    if (t.expert) expert_elements += t.elements;
  if (deepspeed_pipeline_engine(s)) {
    return fmt::format(
        "ZeRO-1 under DeepSpeed's pipeline engine: each stage's gradients all-reduced after the whole schedule in "
        "buffers of 500 M elements ({} on stage 0), Adam on 1/{} of stage 0's {} M parameters, parameters "
        "all-gathered after the optimizer step",
        deepspeed_engine_layout(first).buckets.size(), s.parallel.dp, elements / 1'000'000);
  }
  const std::string size = megatron_bucket_text(s);
  const bool zero2 = s.data_parallel.kind == DpKind::zero2;
  const bool deepspeed = s.training.framework == Framework::deepspeed;
  // Megatron-Core closes a bucket once it holds at least its size, DeepSpeed before a gradient
  // would take it past that size (chunked_layout); DeepSpeed with pp > 1 returned above.
  const std::string buckets = s.parallel.pp > 1 ? fmt::format("{} gradient buckets of at least {} on stage 0 ({})",
                                                              megatron_bucket_layout(first).buckets.size(), size,
                                                              zero2 ? "every stage and model chunk split alike"
                                                                    : "each later stage and model chunk one bucket")
                                                : fmt::format("{} gradient buckets of {} {}", layout.buckets.size(),
                                                              deepspeed ? "at most" : "at least", size);
  // The experts' own buckets, reduce-scattered over their group beside these.
  const int edp = expert_dp_size(s);
  const std::string expert_buckets =
      expert_elements > 0 && edp > 1
          ? fmt::format(" (and {} of the experts' over their expert-dp group of {})",
                        expert_bucket_layout(s.parallel.pp > 1 ? first : s, true).buckets.size(), edp)
          : "";
  const std::string experts = expert_elements > 0
                                  ? fmt::format(" and 1/{} of the experts' {} M (their expert-dp group)",
                                                expert_dp_size(s), expert_elements / 1'000'000)
                                  : "";
  return fmt::format(
      "{} ({}): {}{} {} {}, Adam on 1/{} of {}{} M parameters{}, parameters all-gathered {}",
      deepspeed ? "DeepSpeed's ZeRO" : "distributed optimizer", zero2 ? "zero2" : "zero1", buckets + expert_buckets,
      deepspeed && s.data_parallel.bucket_parameters == 0 ? " (reduce_bucket_size's default)" : "",
      deepspeed ? "all-reduced (each rank keeps its partition's slices)" : "reduce-scattered",
      zero2 ? fmt::format("in every micro-batch's backward ({} a step: gradients sharded, as DeepSpeed's ZeRO-2{})",
                          s.training.micro_batches(s.parallel.dp),
                          s.data_parallel.overlap_grad_reduce
                              ? ""
                              : ", each on the compute stream as it fills without overlap, the backward waiting")
            : "in the last micro-batch",
      s.parallel.dp, s.parallel.pp > 1 ? "stage 0's " : "", elements / 1'000'000, experts,
      s.data_parallel.overlap_param_gather ? "one bucket ahead of the forward" : "after the optimizer step");
}

}  // namespace stepsim::parallelism
