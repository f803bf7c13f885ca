// FSDP (ZeRO-3; torch/distributed/fsdp): units are the transformer layers plus the root (embedding,
// final norm, LM head). Each unit's parameters are all-gathered before its forward and, when
// resharded after the forward, again before its backward; its gradient is reduce-scattered
// after its backward, in every micro-batch (no no_sync()) unless a pipeline schedule drives
// the stage (see Fsdp below). AllGather and ReduceScatter share the group's NCCL stream, so
// one "fsdp" stream in issue order decides what overlaps.
#include <algorithm>
#include <deque>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "parallelism/data_parallel.hpp"
#include "parallelism/grad_buckets.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/mesh.hpp"
#include "parallelism/stage_layout.hpp"
#include "stepsim/framework.hpp"
#include "workload/op_builder.hpp"

namespace stepsim::parallelism {

namespace {

// One unit's parameters sharded over one group: the FSDP group, or, for a mixture of experts'
// routed experts, the expert-data-parallel group.
struct Part {
  Bytes params{0};  // the gathered buffer (unit_gathered_bytes)
  Bytes grads{0};   // the reduced buffer in grad_reduce_dtype
  long long elements = 0;
};

struct Unit {
  std::string label;  // "root", "L3"
  Part dense;         // everything but the routed experts, over the FSDP group
  Part experts;       // this GPU's routed experts, over the expert-dp group
  Bytes params() const { return dense.params + experts.params; }
};

// Bytes one parameter of `t` takes in its unit's AllGather: FSDP1's FlatParameter is gathered
// in its param_dtype, the compute precision, whatever the GEMMs run in
// (DataParallelSpec::flat_parameter); FSDP2 and Megatron-FSDP gather FP8 Linear weights at
// 1 byte (gathered_bytes).
int unit_gathered_bytes(const Scenario& s, const GradTensor& t) {
  return s.data_parallel.flat_parameter() ? compute_bytes(s) : gathered_bytes(t, s.training.precision);
}

// Megatron-FSDP (Megatron-Core's megatron_fsdp.py) gathers a unit's buckets and the next
// unit's in one call, in the forward (its pre-forward hook, prefetch in forward-pass order,
// cancelled only for the recompute forward) and in the backward (its pre-backward hook, in
// backward-pass order): FSDP1's forward_prefetch and backward_prefetch pre (the default; io
// refuses the FSDP1 keys with it). Its prefetch stops at half the communication unit
// (at least 500 M elements) or, with fsdp_double_buffer, at the second unit: one unit ahead.
bool megatron_fsdp(const Scenario& s) { return s.data_parallel.fsdp_impl == FsdpImpl::megatron; }

// Unit 0 is the root; unit u >= 1 is transformer layer u - 1 (block u). A mixture-of-experts
// layer's routed experts are a unit of their own nested in the layer's, sharded over the
// expert-data-parallel group (tp·cp·dp / (ep·etp) ranks), as torchtitan's apply_fsdp wraps
// transformer_block.moe.experts with fully_shard on its dp_shard_mod_ep mesh before the block,
// and Megatron-FSDP keeps the experts' buffers in their own group: they are gathered and
// reduced with their layer, over that group.
std::vector<Unit> fsdp_units(const Scenario& s) {
  std::vector<Unit> units(static_cast<std::size_t>(s.model.layers) + 1);
  const int reduce_bytes = element_bytes(s.data_parallel.grad_reduce_dtype);
  for (const GradTensor& t : gradient_tensors(s.model, s.parallel)) {
    const bool root = t.block == 0 || t.block == s.model.layers + 1;
    Unit& unit = units[root ? 0 : static_cast<std::size_t>(t.block)];
    Part& part = t.expert ? unit.experts : unit.dense;
    part.elements += t.elements;
    part.params += Bytes(t.elements * unit_gathered_bytes(s, t));
    part.grads += Bytes(t.elements * reduce_bytes);
  }
  for (std::size_t u = 0; u < units.size(); ++u)
    units[u].label = u == 0 ? std::string("root") : fmt::format("L{}", u - 1);
  return units;
}

// FSDP1's knobs as FullyShardedDataParallel applies them, and FSDP2's fixed behaviour:
// - FSDP1: the compute stream waits for a unit's AllGather right before it; forward_prefetch
//   issues the next unit's AllGather after that wait; backward_prefetch pre issues the next
//   unit's before the current backward, post after the current backward, none not at all
//   (it then queues behind the previous ReduceScatter). post runs in the unit's post-backward
//   hook (_post_backward_hook: _reshard records the free event, _prefetch_handle unshards the
//   next unit, and only then _reduce_grad issues the ReduceScatter), which the autograd engine
//   calls once the host has issued the unit's gradient kernels: the AllGather goes to the
//   unshard stream, which does not wait for the compute stream, so it waits only for what the
//   rate limiter makes the host wait for, and it is queued before the unit's ReduceScatter.
//   limit_all_gathers: before an AllGather the host blocks on the oldest free event once
//   max_inflight_all_gathers of them are pending.
// - FSDP2: depth-1 prefetch both ways without host blocking; each AllGather waits for the
//   unit before it to be freed (two gathered buffers at most), and the compute stream waits
//   for the previous ReduceScatter before the next one is issued. Its parameters are separate
//   tensors, not views of the gathered buffer: once a unit's AllGather has ended, the compute
//   stream copies them out of it (FSDPParamGroup.wait_for_unshard, foreach_all_gather_copy_out:
//   one split_with_sizes_copy reading and writing every gathered byte) before the unit runs.
//   Before its ReduceScatter the compute stream likewise copies the unit's gradients into one
//   buffer in the reduction's precision (foreach_reduce's foreach_reduce_scatter_copy_in, the
//   chunk_cat that also casts), after waiting for the previous ReduceScatter. FSDP1's flat
//   parameter and flat gradient are gathered and reduced in place.
//
// With pipeline stages (pp > 1) each stage runs FSDP over the units it holds (its layers,
// and a root made of whatever embedding or head it holds), as torchtitan applies
// fully_shard to every model chunk, and the pipeline schedule drives the passes the way
// PyTorch's pipelining stages do (PipelineStage.backward_maybe_with_nosync): every backward
// but a chunk's last runs with requires_gradient_sync and reshard_after_backward off, so
// - no ReduceScatter until the chunk's last backward; gradients accumulate unsharded;
// - after a backward that is not the last the unit stays gathered, so the pass that follows
//   on that unit (the next forward) needs no AllGather; reshard_after_forward then frees it
//   after that forward, and the next backward gathers it again;
// - after the chunk's last backward FSDP's post-backward runs for every unit of the chunk,
//   root first then the layers in model order: one ReduceScatter per unit, issued once the
//   chunk's backward compute is done, and the units are freed.
class Fsdp final : public DataParallel {
 public:
  Fsdp(const Scenario& s, int shard_ranks);
  void after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) override;
  // Without a pipeline every micro-batch's backward reduces (the experts' state mid-layer).
  bool reduces_every_micro_batch() const override { return !pipelined_; }
  void end_backward(StepBuilder& b) override { reduce_chunk(b); }
  std::vector<OpIndex> optimizer_waits() const override;
  void before_block(StepBuilder& b, const BlockSite& site) override;
  void after_block(StepBuilder& b, const BlockSite& site) override;
  workload::OpCost optimizer_op(const workload::OpCost& whole) const override;

 private:
  int unit_of(int block) const { return block == 0 || block == layers_ + 1 ? 0 : block; }
  bool fsdp2() const { return version_ == 2; }
  // The root's first block in forward order on this stage, and its first and last in
  // backward order (the embedding, the head, or both).
  int root_forward_first() const { return holds_embedding_ ? 0 : layers_ + 1; }
  int root_backward_first() const { return holds_head_ ? layers_ + 1 : 0; }
  int root_backward_last() const { return holds_embedding_ ? 0 : layers_ + 1; }
  void forward_start(StepBuilder& b, const BlockSite& site);
  void backward_start(StepBuilder& b, int unit, Phase phase);
  void backward_end(StepBuilder& b, int unit, const BlockSite& site);
  void gather(StepBuilder& b, int unit, const char* pass, std::vector<OpIndex> waits = {});
  void wait_for(StepBuilder& b, int unit, Phase phase);
  void free(int unit, OpIndex last);
  void reduce(StepBuilder& b, int unit, OpIndex last);
  OpIndex reduce_scatter(StepBuilder& b, const Unit& u, const Part& part, bool experts, OpIndex last);
  OpIndex reduce_experts(StepBuilder& b, const Unit& u, OpIndex last);
  void reduce_chunk(StepBuilder& b);

  std::vector<Unit> units_;
  int layers_;
  int shard_ranks_;
  int expert_ranks_;             // the routed experts' shard group's ranks (expert_shard_ranks)
  long long dense_params_ = 0;   // this stage's parameters outside the routed experts
  long long expert_params_ = 0;  // and inside them
  bool replicate_;  // HSDP: all-reduce gradient shards across shard groups
  int grad_bytes_;  // an unsharded gradient's element: the compute precision's
  bool pipelined_;  // gradient sync and resharding only at a chunk's last backward
  bool holds_embedding_;
  bool holds_head_;
  int version_;
  BackwardPrefetch backward_prefetch_;
  bool forward_prefetch_;
  bool reshard_after_forward_;
  std::size_t max_inflight_;
  // Per unit: the AllGathers not yet waited for, of the layer's own parameters and of its experts.
  struct Pending {
    std::optional<OpIndex> dense;
    std::optional<OpIndex> experts;
  };
  std::vector<Pending> pending_;
  std::vector<bool> unsharded_;
  std::vector<bool> in_backward_;  // per unit: its backward (or recompute) has started
  std::vector<int> to_reduce_;     // pipelined: units whose last backward is done
  // The pass (micro-batch, chunk, forward or not) the last block belonged to.
  using Pass = std::tuple<long long, int, bool>;
  Pass pass_{-1, 0, true};
  std::deque<OpIndex> frees_;  // FSDP1: free events the rate limiter has not consumed
  std::optional<OpIndex> last_free_;
  // A mixture of experts' layer whose experts' backward has issued its last op (`experts_done_`)
  // and whose experts are not reduced yet; per unit, reduced in this backward.
  int experts_unit_ = -1;
  OpIndex experts_done_ = 0;
  std::vector<bool> experts_reduced_;
  std::optional<OpIndex> last_reduce_scatter_;
  std::optional<OpIndex> last_all_reduce_;
};

Fsdp::Fsdp(const Scenario& s, int shard_ranks)
    : units_(fsdp_units(s)),
      layers_(s.model.layers),
      shard_ranks_(shard_ranks),
      expert_ranks_(expert_shard_ranks(s)),
      replicate_(shard_ranks < s.parallel.dp),
      grad_bytes_(compute_bytes(s)),
      pipelined_(s.parallel.pp > 1),
      holds_embedding_(s.parallel.stage < 0 || stage_holds_block(s.parallel, layers_, s.parallel.stage, 0)),
      holds_head_(s.parallel.stage < 0 || stage_holds_block(s.parallel, layers_, s.parallel.stage, layers_ + 1)),
      version_(s.data_parallel.fsdp_version),
      backward_prefetch_(s.data_parallel.backward_prefetch),
      forward_prefetch_(megatron_fsdp(s) || s.data_parallel.forward_prefetch),
      reshard_after_forward_(s.data_parallel.reshard_after_forward),
      max_inflight_(static_cast<std::size_t>(s.data_parallel.max_inflight_all_gathers)),
      pending_(units_.size()),
      unsharded_(units_.size(), false),
      in_backward_(units_.size(), false),
      experts_reduced_(units_.size(), false) {
  for (const Unit& u : units_) {
    dense_params_ += u.dense.elements;
    expert_params_ += u.experts.elements;
  }
}

// Adam over 1/shard of the dense parameters and 1/edp of the routed experts.
workload::OpCost Fsdp::optimizer_op(const workload::OpCost& whole) const {
  return sharded_optimizer(whole, dense_params_, shard_ranks_, expert_params_, expert_ranks_);
}

std::vector<OpIndex> Fsdp::optimizer_waits() const {
  std::vector<OpIndex> waits;
  if (last_reduce_scatter_) waits.push_back(*last_reduce_scatter_);
  if (last_all_reduce_) waits.push_back(*last_all_reduce_);
  return waits;
}

void Fsdp::before_block(StepBuilder& b, const BlockSite& site) {
  // A chunk's last backward ends where another pass starts.
  const Pass pass{site.micro_batch, site.chunk, site.phase == Phase::forward};
  if (pass != pass_) reduce_chunk(b);
  pass_ = pass;
  const int unit = unit_of(site.block);
  if (site.phase == Phase::forward) {
    if (unit != 0 || site.block == root_forward_first()) forward_start(b, site);
    return;
  }
  if (unit == 0 && site.block != root_backward_first()) return;
  if (!in_backward_[static_cast<std::size_t>(unit)]) backward_start(b, unit, site.phase);
}

void Fsdp::after_block(StepBuilder& b, const BlockSite& site) {
  const std::vector<OpIndex> last = b.last_compute();
  if (last.empty()) return;
  const int unit = unit_of(site.block);
  if (site.phase == Phase::forward) {
    // The root stays gathered from forward to backward, as FSDP leaves it.
    if (unit != 0 && reshard_after_forward_) free(unit, last.front());
    return;
  }
  if (site.phase != Phase::backward) return;
  if (unit != 0 || site.block == root_backward_last()) backward_end(b, unit, site);
}

// The root's pre-forward also makes the AllGathers wait for earlier compute (the previous
// micro-batch's backward).
void Fsdp::forward_start(StepBuilder& b, const BlockSite& site) {
  const int unit = unit_of(site.block);
  gather(b, unit, "forward", unit == 0 ? b.last_compute() : std::vector<OpIndex>{});
  wait_for(b, unit, site.phase);
  const bool next_in_stage = unit != 0 || site.block == 0;
  if ((forward_prefetch_ || fsdp2()) && unit < layers_ && next_in_stage) gather(b, unit + 1, "forward");
}

// The head's backward starts the root's; a layer's starts with its recompute, if any.
void Fsdp::backward_start(StepBuilder& b, int unit, Phase phase) {
  const auto u = static_cast<std::size_t>(unit);
  in_backward_[u] = true;
  experts_reduced_[u] = false;
  gather(b, unit, "backward");
  wait_for(b, unit, phase);
  const int next = unit == 0 ? layers_ : unit - 1;
  if (next >= 1 && (fsdp2() || backward_prefetch_ == BackwardPrefetch::pre)) {
    gather(b, next, "backward");
  }
}

// Without a pipeline every backward reshards and reduce-scatters; with one only a chunk's
// last does, after the whole chunk (reduce_chunk).
void Fsdp::backward_end(StepBuilder& b, int unit, const BlockSite& site) {
  in_backward_[static_cast<std::size_t>(unit)] = false;
  const OpIndex last = b.last_compute().front();
  const bool sync = !pipelined_ || site.last_micro_batch;
  if (sync && !pipelined_) free(unit, last);
  const int next = unit - 1;
  // The post-backward hook: the free above, the prefetch, then the ReduceScatter.
  if (!fsdp2() && backward_prefetch_ == BackwardPrefetch::post && next >= 1) gather(b, next, "backward");
  if (!sync) return;
  if (pipelined_) {
    to_reduce_.push_back(unit);
    return;
  }
  reduce(b, unit, last);
}

void Fsdp::reduce_chunk(StepBuilder& b) {
  if (to_reduce_.empty()) return;
  std::sort(to_reduce_.begin(), to_reduce_.end());
  const OpIndex last = b.last_compute().front();
  for (int unit : to_reduce_) {
    free(unit, last);
    reduce(b, unit, last);
  }
  to_reduce_.clear();
}

void Fsdp::gather(StepBuilder& b, int unit, const char* pass, std::vector<OpIndex> waits) {
  const auto u = static_cast<std::size_t>(unit);
  const Unit& unit_info = units_[u];
  // Units of other pipeline stages hold nothing here; a shard group of one holds them whole.
  const bool dense = unit_info.dense.params.count() > 0 && shard_ranks_ > 1;
  const bool experts = unit_info.experts.params.count() > 0 && expert_ranks_ > 1;
  if (unsharded_[u] || (!dense && !experts)) return;
  unsharded_[u] = true;
  bool host_blocks = false;
  if (fsdp2() && last_free_) waits.push_back(*last_free_);
  if (!fsdp2() && frees_.size() >= max_inflight_) {
    waits.push_back(frees_.front());
    frees_.pop_front();
    host_blocks = true;
  }
  const std::string label = fmt::format("{} {}", unit_info.label, pass);
  // FSDP2's foreach_all_gather copies the unit's shards into the AllGather's input first
  // (torch.ops.fsdp.all_gather_copy_in: a _foreach_copy_), and under mixed precision
  // _get_param_all_gather_inputs casts them into a buffer of the param dtype before that
  // (another _foreach_copy_): operators the host issues before the collective's own. Their
  // kernels, on the all-gather copy-in stream, move 1/shard of the unit and are left out.
  auto copy_in_operators = [](const Part& part) { return 1 + (part.params < Bytes(part.elements * 4) ? 2 : 1); };
  if (dense) {
    const OpIndex op = b.collective(CommKind::fsdp, CollOp::allgather, unit_info.dense.params, label, waits);
    b.rank().ops()[op].host_blocks = host_blocks;
    if (fsdp2()) b.issued_with(op, copy_in_operators(unit_info.dense));
    pending_[u].dense = op;
    // The experts' AllGather follows on the same all-gather stream (one for every FSDP state
    // of the model), so it starts after the layer's own.
    waits.push_back(op);
    host_blocks = false;
  }
  if (experts) {
    const OpIndex op =
        b.expert_dp_collective(CollOp::allgather, unit_info.experts.params, label, waits, CommKind::fsdp);
    b.rank().ops()[op].host_blocks = host_blocks;
    if (fsdp2()) b.issued_with(op, copy_in_operators(unit_info.experts));
    pending_[u].experts = op;
  }
}

// The compute stream waits for each gathered state before the unit runs; under FSDP2 each state
// then copies its parameters out of its own buffer (wait_for_unshard, one per FSDP state).
void Fsdp::wait_for(StepBuilder& b, int unit, Phase phase) {
  Pending& pending = pending_[static_cast<std::size_t>(unit)];
  const Unit& u = units_[static_cast<std::size_t>(unit)];
  const workload::Pass pass = phase == Phase::forward ? workload::Pass::forward : workload::Pass::backward;
  for (const bool experts : {false, true}) {
    std::optional<OpIndex>& gather = experts ? pending.experts : pending.dense;
    if (!gather) continue;
    b.defer_wait(*gather, WaitRule::next_op, workload::Role::embedding);
    gather.reset();
    if (!fsdp2()) continue;
    const Part& part = experts ? u.experts : u.dense;
    const workload::OpCost copy = workload::copy_kernels("FSDP all-gather copy-out", pass, part.params * 2);
    b.compute(copy, phase, fmt::format("FSDP {}{} all-gather copy-out", u.label, experts ? " experts" : ""));
  }
}

void Fsdp::free(int unit, OpIndex last) {
  unsharded_[static_cast<std::size_t>(unit)] = false;
  if (!fsdp2()) frees_.push_back(last);
  last_free_ = last;
}

// A mixture of experts' routed experts are an FSDP state of their own (torchtitan's fully_shard on
// moe.experts), whose post-backward hook reduce-scatters them as soon as their backward has
// produced every expert gradient, while the rest of the layer's backward (the permutation's,
// the router's, the attention's) still runs. So without a pipeline the experts' ReduceScatter
// is issued after the experts' last backward op (fc1's weight gradient and its casts), at the
// first backward op of another role, and the rest of the layer's at its end. Under HSDP the
// same hook all-reduces the experts' shard across the replicas.
void Fsdp::after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) {
  if (pipelined_ || (expert_ranks_ <= 1 && !replicate_)) return;
  const int unit = unit_of(site.block);
  if (unit == 0 || units_[static_cast<std::size_t>(unit)].experts.elements == 0) return;
  const workload::Role role = site.cost->role == workload::Role::fp8_cast ? site.cost->cast_of : site.cost->role;
  // The experts' own ops, between which the hook cannot fire; the fc2 bias's gradient
  // (expert_bias) comes before them all, so their last op is fc1's weight gradient.
  const bool expert = role == workload::Role::expert_fc1 || role == workload::Role::expert_fc2 ||
                      role == workload::Role::expert_activation;
  if (expert) {
    experts_unit_ = unit;
    experts_done_ = op;
    return;
  }
  if (experts_unit_ != unit) return;
  experts_unit_ = -1;
  reduce_experts(b, units_[static_cast<std::size_t>(unit)], experts_done_);
  experts_reduced_[static_cast<std::size_t>(unit)] = true;
}

// HSDP all-reduces the shard across the replicas; a shard group of one has no
// ReduceScatter and all-reduces the whole gradient. A mixture-of-experts layer's routed experts
// are reduced first: mid-layer where after_backward_op has done it, else here (under a pipeline
// schedule, or where the experts' ops end the layer).
void Fsdp::reduce(StepBuilder& b, int unit, OpIndex last) {
  const Unit& u = units_[static_cast<std::size_t>(unit)];
  if (experts_unit_ == unit) experts_unit_ = -1;  // the layer's backward ended with its experts'
  if (u.experts.elements > 0 && !experts_reduced_[static_cast<std::size_t>(unit)]) last = reduce_experts(b, u, last);
  if (shard_ranks_ > 1) last = reduce_scatter(b, u, u.dense, false, last);
  if (!replicate_) return;
  last_all_reduce_ = b.collective(CommKind::dp, CollOp::allreduce, u.dense.grads / shard_ranks_,
                                  fmt::format("{} shard", u.label), {last});
}

// The routed experts' gradients: reduce-scattered over their shard group, and under HSDP their
// shard all-reduced across the replicas (the dense replica group: the ranks at one place of
// every shard group hold the same experts).
OpIndex Fsdp::reduce_experts(StepBuilder& b, const Unit& u, OpIndex last) {
  if (expert_ranks_ > 1) last = reduce_scatter(b, u, u.experts, true, last);
  if (!replicate_) return last;
  last_all_reduce_ = b.collective(CommKind::dp, CollOp::allreduce, u.experts.grads / expert_ranks_,
                                  fmt::format("{} experts shard", u.label), {last});
  return *last_all_reduce_;
}

OpIndex Fsdp::reduce_scatter(StepBuilder& b, const Unit& u, const Part& part, bool experts, OpIndex last) {
  if (fsdp2() && last_reduce_scatter_) {
    b.defer_wait(*last_reduce_scatter_, WaitRule::next_op, workload::Role::embedding);
  }
  const std::string label = experts ? u.label + " experts" : u.label;
  if (fsdp2() && part.elements > 0) {  // none for a unit this stage does not hold
    // The copy-in reads each gradient and writes it in the reduction's precision.
    const workload::OpCost copy = workload::copy_kernels("FSDP reduce-scatter copy-in", workload::Pass::backward,
                                                         Bytes(part.elements * grad_bytes_) + part.grads);
    last = b.compute(copy, Phase::backward, fmt::format("FSDP {} reduce-scatter copy-in", label));
  }
  last_reduce_scatter_ =
      experts ? b.expert_dp_collective(CollOp::reducescatter, part.grads, u.label, {last}, CommKind::fsdp)
              : b.collective(CommKind::fsdp, CollOp::reducescatter, part.grads, u.label, {last});
  return *last_reduce_scatter_;
}

}  // namespace

std::unique_ptr<DataParallel> make_sharded_fsdp(const Scenario& scenario, int shard_ranks) {
  return std::make_unique<Fsdp>(scenario, shard_ranks);
}

std::string sharded_fsdp_notes(const Scenario& s, int shard_ranks) {
  const std::vector<Unit> units = fsdp_units(s);
  // The largest layer unit, with its experts (a stack of dense and MoE layers gathers each at
  // its own size).
  const Unit* largest = nullptr;
  bool uneven = false;
  for (std::size_t u = 1; u < units.size(); ++u) {
    if (largest != nullptr && units[u].params() != largest->params()) uneven = true;
    if (largest == nullptr || units[u].params() > largest->params()) largest = &units[u];
  }
  const Bytes layer = largest != nullptr ? largest->params() : Bytes(0);
  const DataParallelSpec& d = s.data_parallel;
  const std::string knobs =
      d.fsdp_version == 2 ? std::string("implicit one-unit prefetch both ways")
                          : fmt::format("backward prefetch {}, forward prefetch {}, at most {} AllGathers in flight",
                                        d.backward_prefetch == BackwardPrefetch::pre    ? "pre"
                                        : d.backward_prefetch == BackwardPrefetch::post ? "post"
                                                                                        : "none",
                                        d.forward_prefetch ? "on" : "off", d.max_inflight_all_gathers);
  if (shard_ranks == 1) {
    return fmt::format(
        "FSDP{}: {} units (root: embedding, final norm, LM head; one per layer) held whole "
        "(a shard group of one DP rank: no AllGather or ReduceScatter)",
        d.fsdp_version, units.size());
  }
  // A mixture of experts: the largest layer's experts, and the group they are sharded over.
  const Bytes experts = largest != nullptr ? largest->experts.params : Bytes(0);
  long long expert_elements = 0;
  for (const Unit& u : units) expert_elements += u.experts.elements;
  const int expert_ranks = expert_shard_ranks(s);
  const bool hybrid = s.data_parallel.kind == DpKind::hsdp;
  const std::string expert_note =
      expert_elements == 0 ? std::string()
      : expert_ranks > 1
          ? fmt::format(
                " (of which the routed experts' {} over the {} ranks of the expert-dp group{}, as a unit "
                "nested in the layer's)",
                format_size(experts), expert_ranks, hybrid ? " inside the shard group" : "")
          : fmt::format(" (the routed experts held whole: {})",
                        hybrid ? "one expert-dp rank in the shard group" : "an expert-dp group of one");
  const std::string adam = expert_elements == 0
                               ? fmt::format("Adam on 1/{} of the parameters", shard_ranks)
                               : fmt::format(
                                     "Adam on 1/{} of the parameters outside the routed experts and 1/{} "
                                     "of theirs",
                                     shard_ranks, expert_ranks);
  return fmt::format(
      "FSDP{}: {} units (root: embedding, final norm, LM head; one per layer), "
      "{}{} gathered per layer over {} DP ranks{}, {}, {}; {}; {}",
      d.fsdp_version, units.size(), uneven ? "up to " : "", format_size(layer), shard_ranks, expert_note, knobs,
      d.reshard_after_forward ? "resharded after forward" : "kept from forward to backward",
      s.parallel.pp > 1 ? "per pipeline chunk, units kept gathered after each backward but the last, "
                          "ReduceScatter once after the last"
                        : "AllGather and ReduceScatter every micro-batch",
      adam);
}

std::string fsdp_notes(const Scenario& scenario) {
  std::string note = sharded_fsdp_notes(scenario, scenario.parallel.dp);
  // DeepSpeed's ZeRO-3 (stage3.py, partitioned_param_coordinator.py) gathers parameters module by
  // module within stage3_prefetch_bucket_size and reduce-scatters gradients in buckets of
  // reduce_bucket_size: the step is simulated with FSDP's layer units, and the note says so.
  if (scenario.training.framework == Framework::deepspeed)
    note +=
        "; under training.framework deepspeed this stands for DeepSpeed's ZeRO-3 as FSDP runs it, a layer gathered "
        "and reduced at a time: ZeRO-3's module-by-module gathers (stage3_prefetch_bucket_size) and its gradient "
        "buckets (reduce_bucket_size) are not modelled";
  return note;
}

std::unique_ptr<DataParallel> make_fsdp(const Scenario& scenario) {
  return make_sharded_fsdp(scenario, scenario.parallel.dp);
}

std::vector<DpCommunicator> fsdp_communicators(const Scenario& scenario, int rank) {
  return {{CommKind::fsdp, "fsdp", group_of(scenario.parallel, rank, Dim::dp)}};
}

}  // namespace stepsim::parallelism
