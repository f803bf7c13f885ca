// The step of one rank: its pipeline stage's passes in schedule order (recompute just before
// each layer's backward), activations and gradients to and from the neighbouring stages,
// gradient synchronisation hooked into the last micro-batch's backward, and the optimizer
// step once every bucket (and a tied embedding's gradient) has been reduced. DualPipe's
// paired forward and backward, and Megatron-Core's combined forward and backward under the EP
// all-to-all overlap, are issued interleaved, in two lanes.
#include "parallelism/program_builder.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "parallelism/activation_offload.hpp"
#include "parallelism/communicators.hpp"
#include "parallelism/context_parallel.hpp"
#include "parallelism/data_parallel.hpp"
#include "parallelism/expert_parallel.hpp"
#include "parallelism/fabric.hpp"
#include "parallelism/grad_accumulation.hpp"
#include "parallelism/grad_buckets.hpp"
#include "parallelism/loss_scaling.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/mesh.hpp"
#include "parallelism/pipeline_comm.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "parallelism/stage_layout.hpp"
#include "parallelism/step_builder.hpp"
#include "parallelism/tensor_parallel.hpp"
#include "parallelism/variation.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"

namespace stepsim::parallelism {

namespace {

using workload::OpCost;

// A piece of one pass, recorded to be issued interleaved with another's; `dispatch`: it issues
// an EP dispatch all-to-all (forward, or its backward), before which a pass under Megatron-Core's
// all-to-all overlap hands the compute stream to the other pass.
struct Piece {
  std::function<void()> run;
  bool dispatch = false;
};
using Script = std::vector<Piece>;

// What validation (io::complete_and_validate) guarantees of the micro-batches, which the
// schedules rely on: at least one per replica, a multiple of the interleaved schedule's rounds
// (max(1, m div pp) of them: PyTorch's; Megatron-Core's m, a multiple of pp, is one), an even
// number of at least 2·pp under DualPipe.
void check_supported(const Scenario& s) {
  const long long m = s.training.micro_batches(s.parallel.dp);
  STEPSIM_CHECK(m >= 1, "a replica without a micro-batch");
  STEPSIM_CHECK(s.parallel.schedule != Schedule::interleaved || m % std::max(1LL, m / s.parallel.pp) == 0,
                "interleaved micro-batches not a multiple of the rounds");
  STEPSIM_CHECK(s.parallel.schedule != Schedule::dualpipe || (m % 2 == 0 && m >= 2LL * s.parallel.pp),
                "DualPipe micro-batches odd or fewer than 2·pp");
}

// The scenario as one pipeline stage's data-parallel strategy sees it: only the gradients of
// the layers (and embedding or head) that the stage holds, reduced over DP × CP.
Scenario stage_scenario(const Scenario& s, int stage) {
  Scenario out = gradient_scenario(s);
  if (s.parallel.pp > 1) out.parallel.stage = stage;
  return out;
}

// The optimizer step over the parameters this stage's GPU holds, and the passes over their
// gradients that may run before it: fp16's overflow check and clipping's norm.
struct StageOptimizer {
  OpCost step;
  OpCost overflow_check;
  OpCost norm;
};

StageOptimizer stage_optimizer(const Scenario& s, const workload::ModelWork& work) {
  long long params = work.optimizer_params;
  if (s.parallel.pp > 1) {
    params = 0;
    for (const GradTensor& t : gradient_tensors(s.model, s.parallel)) params += t.elements;
  }
  return {s.parallel.pp > 1 ? workload::optimizer_step(params, s.training) : work.optimizer,
          workload::overflow_check(params, s.training), workload::gradient_norm(params, s.training)};
}

// Megatron-Core's train_step zeroes each model chunk's whole gradient buffer before the
// forward (DistributedDataParallel.zero_grad_buffer: every buffer's grad_data.zero_()): the
// main gradient of every parameter the rank holds, not only the optimizer's shard. Charged to
// the optimizer step, which ends the step before on the same stream.
Bytes zeroed_gradients(const Scenario& stage) {
  const DpKind kind = stage.data_parallel.kind;
  if (!traits_of(stage.training.framework).megatron_core) return Bytes(0);
  if (kind == DpKind::fsdp || kind == DpKind::hsdp) return Bytes(0);
  long long elements = 0;
  for (const GradTensor& t : gradient_tensors(stage.model, stage.parallel)) elements += t.elements;
  return Bytes(elements * element_bytes(stage.training.main_grad));
}

// Compute op names by (block, cost, phase), interned once for every rank of the job.
using OpNames = std::map<std::tuple<int, const OpCost*, Phase>, std::uint32_t>;

// What every rank of the job shares: op names, and each stage's optimizer step (which counts
// the stage's parameters), worked out once and not for each rank of an all-ranks run.
struct JobShared {
  OpNames names;
  std::map<int, StageOptimizer> optimizers;

  const StageOptimizer& optimizer(const Scenario& stage_s, int stage, const workload::ModelWork& work) {
    const auto [it, inserted] = optimizers.try_emplace(stage);
    if (inserted) it->second = stage_optimizer(stage_s, work);
    return it->second;
  }
};

// Issues one rank's step.
class StepWriter {
 public:
  StepWriter(const Scenario& s, const workload::ModelWork& work, StepBuilder& b, int stage, JobShared& shared)
      : s_(s),
        work_(work),
        b_(b),
        stage_s_(stage_scenario(s, stage)),
        chunks_(chunk_layers(s.parallel, s.model.layers)),
        stage_(stage),
        tp_(s, work),
        cp_(s, work),
        ep_(s, work, stage),
        pp_(s, work, stage),
        offload_(s, work),
        dp_(make_data_parallel(stage_s_)),
        accumulation_(stage_s_),
        optimizer_(shared.optimizer(stage_s_, stage, work)),
        names_(shared.names) {}

  void step() {
    const PipelineShape shape = pipeline_shape(s_);
    const std::vector<PipelineOp> order = stage_order(s_.parallel.schedule, shape, stage_);
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (!order[i].forward || !order[i].overlapped) {
        pass(order[i]);
        continue;
      }
      i = overlapped(order, i);
    }
    dp_->end_backward(b_);
    std::vector<OpIndex> waits = dp_->optimizer_waits();
    for (OpIndex op : b_.take_deferred()) waits.push_back(op);
    // The stages' gradient sums (finalize_model_grads' _allreduce_embedding_grads after
    // finish_grad_sync, DualPipe's two copies of a stage) are issued on the compute stream after
    // the last backward: they wait for it, and for the DP reduction where there is one.
    std::vector<OpIndex> summed = waits;
    for (OpIndex op : b_.stream_tail()) summed.push_back(op);
    for (OpIndex op : pp_.sync_embedding(b_, summed)) waits.push_back(op);
    for (OpIndex op : pp_.sync_mirror(b_, summed)) waits.push_back(op);
    // Megatron reads the gradients' norm on the CPU (.item()): the host waits for every
    // gradient, and the backward's last kernel, before it issues the step.
    const bool syncs = s_.training.grad_clip && traits_of(s_.training.framework).syncs_grad_norm;
    if (syncs)
      for (OpIndex op : b_.last_compute()) waits.push_back(op);
    OpCost step = dp_->optimizer_op(optimizer_.step);
    step.bytes += zeroed_gradients(stage_s_);
    const bool scaled = scales_loss(s_);
    if (scaled) waits = check_overflow(waits, step, syncs);
    const OpIndex optimizer = b_.compute(step, Phase::optimizer, "optimizer step", waits);
    if (syncs || scaled) b_.rank().ops()[optimizer].host_blocks = true;
    dp_->after_optimizer(b_, optimizer);
  }

 private:
  // fp16's dynamic loss scaling, after every gradient: the check of the gradients, the flag's
  // all-reduces, then the host's read of the flag (.item()), which the step after it waits
  // for. Megatron-Core then reads the gradients' norm (a second .item()): its pass, taken out of
  // `step`, runs between the two reads. Returns what the step waits for.
  std::vector<OpIndex> check_overflow(const std::vector<OpIndex>& waits, OpCost& step, bool syncs) {
    OpIndex last = b_.compute(dp_->optimizer_op(optimizer_.overflow_check), Phase::optimizer,
                              optimizer_.overflow_check.name, waits);
    for (const FlagReduce& r : overflow_flag_reduces(s_, b_.rank().rank))
      last =
          b_.small_all_reduce(r.shape, r.size, Phase::optimizer,
                              fmt::format("overflow flag all-reduce ({}, {} ranks)", r.group, r.shape.ranks), {last});
    if (!syncs) return {last};
    const OpCost norm = dp_->optimizer_op(optimizer_.norm);
    step.bytes = step.bytes - norm.bytes;
    const OpIndex read = b_.compute(norm, Phase::optimizer, norm.name, {last});
    b_.rank().ops()[read].host_blocks = true;
    return {read};
  }

  // One pass of the schedule: its receive, its compute and the send of its output (or only
  // its compute, for a pass of a pair, whose transfers the pair makes).
  void pass(const PipelineOp& op, bool transfers = true) {
    last_ = op.micro_batch + 1 == chunk_micro_batches(s_.parallel.schedule, pipeline_shape(s_));
    micro_batch_ = op.micro_batch;
    chunk_ = op.chunk;
    const ChunkLayers& chunk = chunk_of(chunks_, s_.parallel, stage_, op.chunk);
    if (op.weight) {
      weight_pass(chunk);  // reads only what the stage holds: no transfer
      return;
    }
    if (transfers) pp_.receive(b_, op);
    if (op.forward) forward(chunk);
    if (!op.forward) backward(chunk);
    if (transfers) pp_.send(b_, op);
  }

  // DualPipe's F&B: the forward at `i` and the backward after it (with its W pass when one
  // follows at once) recorded as two scripts, then issued in turn, each handing the compute
  // stream to the other whenever it has issued communication it must wait for (an
  // all-to-all, a TP collective); under the EP all-to-all overlap, Megatron-Core's combined
  // step (combine). As the reference implementation does, the pair starts once both inputs
  // have arrived and sends both outputs when it ends. Returns the index of the pair's last
  // pass.
  std::size_t overlapped(const std::vector<PipelineOp>& order, std::size_t i) {
    STEPSIM_CHECK(i + 1 < order.size() && !order[i + 1].forward && !order[i + 1].weight,
                  "an overlapped forward without a backward after it");
    const PipelineOp& f = order[i];
    const PipelineOp& b = order[i + 1];
    b_.set_lane(1);
    const std::optional<OpIndex> gradient = pp_.receive(b_, b);
    b_.set_lane(0);
    pp_.receive(b_, f);
    if (gradient) b_.defer_wait(*gradient, WaitRule::next_op, workload::Role::optimizer);
    std::array<Script, 2> lanes;
    script_ = &lanes[0];
    pass(f, false);
    script_ = &lanes[1];
    pass(b, false);
    std::size_t end = i + 1;
    if (end + 1 < order.size() && order[end + 1] == PipelineOp{b.micro_batch, b.chunk, false, true}) pass(order[++end]);
    script_ = nullptr;
    if (a2a_overlap_) {
      combine(lanes);
    } else {
      interleave(lanes);
    }
    pp_.send(b_, f);
    pp_.send(b_, b);
    return end;
  }

  void interleave(std::array<Script, 2>& lanes) {
    std::array<std::size_t, 2> next{0, 0};
    int lane = 0;
    while (next[0] < lanes[0].size() || next[1] < lanes[1].size()) {
      if (next[lane] == lanes[lane].size()) lane ^= 1;
      b_.set_lane(lane);
      const long long deferrals = b_.deferrals();
      lanes[lane][next[lane]++].run();
      if (b_.deferrals() != deferrals) lane ^= 1;
    }
    b_.join_lanes();
  }

  // Megatron-Core's combined forward and backward of one layer pair, in the order
  // combined_order gives its pieces.
  void combine(std::array<Script, 2>& lanes) {
    combined_order(
        {lanes[0].size(), lanes[1].size()},
        [&lanes](int lane, std::size_t i) { return lanes[static_cast<std::size_t>(lane)][i].dispatch; },
        [this, &lanes](int lane, std::size_t i) {
          b_.set_lane(lane);
          const long long before = ep_.all_to_alls();
          lanes[static_cast<std::size_t>(lane)][i].run();
          return ep_.all_to_alls() != before;
        });
    b_.join_lanes();
  }

  // Runs a piece of a pass now, or records it while a pass is scripted for interleaving.
  template <class Run>
  void emit(Run&& run, bool dispatch = false) {
    if (script_ != nullptr) {
      script_->push_back({std::forward<Run>(run), dispatch});
      return;
    }
    run();
  }

  void forward(const ChunkLayers& chunk) {
    if (chunk.pre) ops(work_.pre.forward, 0, Phase::forward);
    for (int l = chunk.first_layer; l < chunk.first_layer + chunk.layers; ++l) {
      // The chunk's first micro-batch quantizes the weights the others reuse.
      const workload::LayerWork& block = work_.block(l);
      const bool first = micro_batch_ == 0 && !block.first_forward.empty();
      ops(first ? block.first_forward : block.forward, l + 1, Phase::forward);
      if (offload_.active()) emit([this, l] { offload_.after_forward(b_, l); });
    }
    if (chunk.post) ops(work_.post.forward, s_.model.layers + 1, Phase::forward);
  }

  // The whole backward, or under a zero-bubble schedule its input-gradient (B) pass. The
  // embedding and the LM head run whole in B: the head's weight gradient needs the b·s·V
  // logits gradient, which deferred W passes would hold beyond 1F1B's memory.
  void backward(const ChunkLayers& chunk) {
    const Passes passes = split_ ? Passes::input : Passes::all;
    if (chunk.post) ops(work_.post.backward, s_.model.layers + 1, Phase::backward);
    for (int l = chunk.first_layer + chunk.layers - 1; l >= chunk.first_layer; --l) {
      if (offload_.active()) emit([this, l] { offload_.before_backward(b_, l); });
      ops(work_.block(l).recompute, l + 1, Phase::recompute);
      ops(work_.block(l).backward, l + 1, Phase::backward, passes);
    }
    if (chunk.pre) ops(work_.pre.backward, 0, Phase::backward);
  }

  // The weight-gradient (W) pass of a zero-bubble schedule: the transformer layers' wgrad
  // GEMMs the B pass left, last layer first, so gradient buckets fill as in an unsplit
  // backward.
  void weight_pass(const ChunkLayers& chunk) {
    for (int l = chunk.first_layer + chunk.layers - 1; l >= chunk.first_layer; --l) {
      ops(work_.block(l).backward, l + 1, Phase::backward, Passes::weight);
    }
  }

  // Which backward ops a pass issues: all, all but the wgrad GEMMs (B), only them (W).
  enum class Passes : std::uint8_t { all, input, weight };

  static bool selected(const OpCost& cost, Passes passes) {
    const bool wgrad = cost.pass == workload::Pass::backward_weight;
    return passes == Passes::all || (passes == Passes::weight) == wgrad;
  }

  void ops(const std::vector<OpCost>& list, int block, Phase phase, Passes passes = Passes::all) {
    const auto any = [&](const OpCost& c) { return selected(c, passes); };
    if (passes != Passes::all && std::none_of(list.begin(), list.end(), any)) return;
    const BlockSite site{block, phase, micro_batch_, chunk_, last_};
    emit([this, site] { dp_->before_block(b_, site); });
    for (const OpCost& cost : list) {
      if (selected(cost, passes)) one({block, &cost, phase, last_, micro_batch_});
    }
    emit([this, site] { dp_->after_block(b_, site); });
  }

  // An op in two pieces: the communication issued before it, then the op and what follows;
  // under the all-to-all overlap in three, what follows it a piece of its own (the dispatch's
  // backward may be issued after the other pass has had its turn).
  void one(const OpSite& site) {
    emit([this, site] { before(site); }, ep_.dispatches_before(site));
    if (!a2a_overlap_ || script_ == nullptr) {
      emit([this, site] { after(site, body(site)); });
      return;
    }
    const auto op = std::make_shared<OpIndex>(0);
    emit([this, site, op] { *op = body(site); });
    emit([this, site, op] { after(site, *op); }, ep_.dispatches_after(site));
  }

  void before(const OpSite& site) {
    tp_.before_op(b_, site);
    ep_.before_op(b_, site);
  }

  OpIndex body(const OpSite& site) {
    OpIndex op = 0;
    if (cp_.handles(site)) {
      op = cp_.issue(b_, site);
    } else if (tp_.pipelines(site)) {
      op = tp_.issue_pipelined(b_, site);
    } else {
      op = b_.compute(*site.cost, site.phase, name(site));
    }
    tp_.after_op(b_, site, op);
    return op;
  }

  void after(const OpSite& site, OpIndex op) {
    ep_.after_op(b_, site, op);
    if (site.phase == Phase::backward) accumulation_.after_backward_op(b_, site);
    if (site.phase == Phase::backward && (site.last_micro_batch || dp_->reduces_every_micro_batch()))
      dp_->after_backward_op(b_, site, op);
  }

  // Names depend neither on the micro-batch nor on the rank: each is formatted and interned
  // once per job.
  std::uint32_t name(const OpSite& site) {
    const auto [it, inserted] = names_.try_emplace({site.block, site.cost, site.phase}, 0);
    if (inserted) it->second = b_.state().name(op_name(site, s_.model.layers));
    return it->second;
  }

  const Scenario& s_;
  const workload::ModelWork& work_;
  StepBuilder& b_;
  Scenario stage_s_;  // outlives dp_, which may keep a reference
  std::vector<ChunkLayers> chunks_;
  int stage_;
  TensorParallel tp_;
  ContextParallel cp_;
  ExpertParallel ep_;
  PipelineComm pp_;
  ActivationOffload offload_;
  std::unique_ptr<DataParallel> dp_;
  GradAccumulation accumulation_;  // eager PyTorch's AccumulateGrad adds after the first micro-batch
  StageOptimizer optimizer_;
  OpNames& names_;
  bool split_ = splits_backward(s_.parallel.schedule);
  bool a2a_overlap_ = s_.model.moe.a2a_overlap;
  Script* script_ = nullptr;
  bool last_ = false;
  int micro_batch_ = 0;
  int chunk_ = 0;
};

// Simulated ranks get communicators: one Group per real group that has simulated members.
class Layout {
 public:
  Layout(const Scenario& s, engine::Program& program)
      : s_(s),
        program_(program),
        ranks_(simulated_ranks(s.parallel, s.simulation.ranks)),
        fabric_(s.cluster, program.resources, offload_on_pcie(s)) {}

  const std::vector<SimulatedRank>& ranks() const { return ranks_; }
  const std::vector<RankPorts>& links() const { return links_; }
  const std::vector<RankGroup>& members() const { return members_; }  // per group, its real ranks

  void add_rank(std::size_t index, StepBuilder& b) {
    const SimulatedRank& r = ranks_[index];
    engine::RankProgram rank;
    rank.rank = r.rank;
    rank.multiplicity = r.multiplicity;
    rank.label = r.label;
    rank.stage = r.stage;
    rank.streams = {"compute"};
    program_.ranks.push_back(std::move(rank));
    // A simulated rank stands for the real ranks [rank, rank + multiplicity) of its stage
    // (ranks are placed with the pipeline outermost), which load shared NICs and uplinks alike.
    b.set_links(links_.emplace_back(fabric_.ports(r.rank, r.rank, r.multiplicity)));
    const std::vector<RankCommunicator> comms = rank_communicators(s_, r.rank);
    for (const RankCommunicator& c : comms) add_comm(index, c, b);
    add_stand_ins(index, comms, b);
    add_pipeline_links(index, b);
    add_host_streams(index, b);
  }

 private:
  // The spine share of a group's members behind simulated rank `index`'s leaf; the group's
  // shares by leaf computed once per group (its members are the same for all).
  SpineShare spine_from(std::int32_t group, std::size_t index, const collectives::GroupShape& shape,
                        const auto& ranks_of_group) {
    if (!fabric_.oversubscribed()) return {};
    if (static_cast<std::size_t>(group) >= spine_.size()) spine_.resize(static_cast<std::size_t>(group) + 1);
    auto& shares = spine_[static_cast<std::size_t>(group)];
    if (!shares) shares = fabric_.spine_shares(ranks_of_group(), shape);
    return share_at(*shares, fabric_.leaf_of(fabric_.node_of(ranks_[index].rank)));
  }

  SpineShare spine_of(std::int32_t group, const RankGroup& members, std::size_t index,
                      const collectives::GroupShape& shape) {
    return spine_from(group, index, shape, [&] { return members.ranks(); });
  }

  SpineShare spine_of(std::int32_t group, const std::vector<int>& members, std::size_t index,
                      const collectives::GroupShape& shape) {
    return spine_from(group, index, shape, [&] { return members; });
  }

  // A simulated rank of representative mode stands for every rank of its stage, whose groups
  // of one kind need not cross the spine alike: with TP 16 on three-node leaves, the TP group
  // of nodes 2 and 3 crosses it and that of nodes 0 and 1 does not; and a leaf may hold nodes
  // of two stages (six-node leaves under eight-node stages: leaf 1 holds two nodes of stage 0
  // and four of stage 1), whose traffic shares its uplinks. So the rank loads every leaf that
  // its stage's groups of the kind cross, each with the spine share of each member's group
  // summed over the stage's members behind that leaf (on the rank's rail), as the real ranks
  // there do; the other stages' simulated ranks load the same uplinks with their own members'.
  // The rank's collectives then run at the pace of the busiest leaf, shared with every stage's
  // traffic crossing there, as in all-ranks mode. `translate(k)` is the k-th of `count` groups
  // of the kind in the stage.
  std::vector<LeafLoad> leaves_of(std::int32_t group, std::size_t index, const collectives::GroupShape& shape,
                                  long long count, const auto& translate) {
    if (s_.simulation.ranks != RankMode::representative || !fabric_.oversubscribed()) return {};
    const auto [it, inserted] = leaves_.try_emplace({group, index});
    if (!inserted) return it->second;
    const int rail = fabric_.rail_of(ranks_[index].rank);
    const int stage = ranks_[index].stage;
    const long long stage_ranks = s_.parallel.gpus() / s_.parallel.pp;
    std::map<int, SpineShare> load;  // per leaf
    for (long long k = 0; k < count; ++k) {
      const std::vector<int> ranks = translate(k);
      const LeafShares shares = fabric_.spine_shares(ranks, shape);
      if (shares.empty()) continue;
      for (const int r : ranks) {
        if (r / stage_ranks != stage || fabric_.rail_of(r) != rail) continue;
        const int at = fabric_.leaf_of(fabric_.node_of(r));
        const SpineShare share = share_at(shares, at);
        SpineShare& leaf = load[at];
        leaf.ring += share.ring;
        leaf.spread += share.spread;
        leaf.tree += share.tree;
      }
    }
    for (const auto& [leaf, share] : load) {
      LeafLoad l = fabric_.leaf_ports(leaf, rail);
      l.share = share;
      it->second.push_back(l);
    }
    return it->second;
  }

  // The same for a communicator: its group's translates over the stage.
  std::vector<LeafLoad> leaves_of(std::int32_t group, const RankGroup& members, std::size_t index,
                                  const collectives::GroupShape& shape) {
    const Translates t = stage_translates(members, s_.parallel.gpus() / s_.parallel.pp);
    return leaves_of(group, index, shape, t.across * t.repeats,
                     [&](long long k) { return translated(members, k % t.across + k / t.across * t.step).ranks(); });
  }

  // And for a pipeline link: the same link between the same stages at every place in them
  // (the rank's side of it: its sends load its leaves' uplinks, its receives their downlinks).
  std::vector<LeafLoad> leaves_of(std::int32_t group, const std::vector<int>& members, std::size_t index,
                                  const collectives::GroupShape& shape) {
    if (members.size() != 2 || members[0] == members[1]) return {};
    // The rank is its stage's first, and the link's other end the same place in its stage.
    return leaves_of(group, index, shape, s_.parallel.gpus() / s_.parallel.pp, [&](long long k) {
      const auto by = static_cast<int>(k);
      return std::vector<int>{members[0] + by, members[1] + by};
    });
  }

  // The link shares of a group, computed once per group: its slowest members' links.
  LinkShares shares_of(std::int32_t group, const auto& members) {
    if (static_cast<std::size_t>(group) >= shares_.size()) shares_.resize(static_cast<std::size_t>(group) + 1);
    auto& shares = shares_[static_cast<std::size_t>(group)];
    if (!shares) shares = link_shares(s_, members);
    return *shares;
  }

  // The shape a group's collectives are costed on, for the report to tell its collectives from
  // those of another group of as many ranks.
  void note_shape(std::int32_t group, const collectives::GroupShape& shape) {
    engine::Group& g = program_.groups[static_cast<std::size_t>(group)];
    g.nodes = shape.nodes;
    g.ranks_per_node = shape.ranks_per_node;
  }

  // A collective communicator: its group (groups partition the ranks, so a group's name and
  // first member name it), its stream, and the slot the rank takes it for.
  void add_comm(std::size_t index, const RankCommunicator& c, StepBuilder& b) {
    auto& streams = program_.ranks[index].streams;
    streams.push_back(c.name);
    const auto stream = static_cast<engine::StreamIndex>(streams.size() - 1);
    const auto [it, inserted] =
        groups_.try_emplace({c.name, c.members.first}, static_cast<std::int32_t>(program_.groups.size()));
    if (inserted) {
      program_.groups.push_back({c.name, c.kind, c.members.size, {}, group_string(c.members)});
      members_.push_back(c.members);
    }
    program_.groups[static_cast<std::size_t>(it->second)].members.push_back(static_cast<int>(index));
    const RankGroup like = costed(c.members);
    const collectives::GroupShape shape = shape_of(like, s_.cluster.domain_gpus());
    Communicator comm{
        it->second, stream, shape, {}, shares_of(it->second, like), leaves_of(it->second, c.members, index, shape)};
    note_shape(it->second, comm.shape);
    if (s_.simulation.ranks == RankMode::all) comm.spine = spine_of(it->second, c.members, index, shape);
    switch (c.use) {
      case RankCommunicator::Use::expert_dp:
        b.add_expert_dp(comm);
        break;
      case RankCommunicator::Use::expert_tp:
        b.add_expert_tp(comm);
        break;
      case RankCommunicator::Use::kind:
        b.add_communicator(c.kind, comm);
        break;
    }
  }

  // A simulated rank of representative mode takes each communicator as the slowest group of
  // its kind in the stage (costed), and those need not hold the same ranks: with TP 16 x DP 32
  // on 512 NVL72 GPUs, the TP group of ranks 64 to 79 straddles racks 0 and 1, and its members
  // 72 to 79 have DP groups with a member alone on the partial eighth rack, which is how the
  // rank's DP communicator is costed, while 64 to 71 have DP groups of 4 and 5 per rack. A
  // ring collective runs at the pace of its busiest member's links, and the NICs of 64 to 71
  // carry their own DP groups' collectives, shorter and of another rate than the rank's. So
  // for each communicator A whose costed group crosses NVLink domains, and each other
  // communicator B of the rank, the members of A's costed group whose B group is costed
  // otherwise than the rank's B (and crosses domains too, loading their NICs) get a stand-in:
  // one such member's links, which A's calls load beside the rank's own, and a stand-in B
  // communicator over them, costed as that member's B group, on which the rank makes every
  // call it makes on B. One stand-in per A, B and distinct shape; a shape's members repeat with the
  // period at which A's members' offsets repeat over the domains, so at most that many are
  // looked at. TP, CP and DP communicators only: their groups move rigidly with a member.
  void add_stand_ins(std::size_t index, const std::vector<RankCommunicator>& comms, StepBuilder& b) {
    if (s_.simulation.ranks != RankMode::representative) return;
    const long long g = s_.cluster.domain_gpus();
    const auto mesh_kind = [](const RankCommunicator& c) {
      return c.use == RankCommunicator::Use::kind && c.kind != CommKind::ep && c.kind != CommKind::pp;
    };
    using Made = std::tuple<std::string_view, std::string_view, collectives::GroupShape>;
    std::vector<Made> made;  // (A, B, shape): one stand-in each
    for (const RankCommunicator& a : comms) {
      if (!mesh_kind(a)) continue;
      const RankGroup like = costed(a.members);
      if (shape_of(like, s_.cluster.domain_gpus()).nodes <= 1) continue;
      const long long period = g / std::gcd(g, like.stride % g);
      for (long long i = 0; i < std::min<long long>(like.size, period); ++i) {
        const int member = static_cast<int>(like.at(i));
        const std::vector<RankCommunicator> theirs = rank_communicators(s_, member);
        for (const RankCommunicator& mine : comms) {
          if (!mesh_kind(mine) || std::string_view(mine.name) == a.name) continue;
          const auto other = std::ranges::find_if(
              theirs, [&](const RankCommunicator& t) { return std::string_view(t.name) == mine.name; });
          if (other == theirs.end()) continue;
          const collectives::GroupShape shape = shape_of(other->members, s_.cluster.domain_gpus());
          if (shape.nodes <= 1 || shape == shape_of(costed(mine.members), s_.cluster.domain_gpus())) continue;
          const RankPorts ports = fabric_.ports(member, member, 1);
          if (ports.nic_tx == links_[index].nic_tx) continue;
          const Made key{a.name, mine.name, shape};
          if (std::ranges::find(made, key) != made.end()) continue;
          made.push_back(key);
          b.add_other_links(a.kind, ports);
          add_stand_in(index, *other, shape, ports, b);
        }
      }
    }
  }

  void add_stand_in(std::size_t index, const RankCommunicator& c, const collectives::GroupShape& shape,
                    const RankPorts& ports, StepBuilder& b) {
    auto& streams = program_.ranks[index].streams;
    streams.push_back(fmt::format("{} stand-in", c.name));
    const auto group = static_cast<std::int32_t>(program_.groups.size());
    program_.groups.push_back({c.name, c.kind, c.members.size, {static_cast<int>(index)}, group_string(c.members)});
    program_.groups.back().stand_in = true;
    members_.push_back(c.members);
    const Communicator comm{
        group, static_cast<engine::StreamIndex>(streams.size() - 1), shape, {}, shares_of(group, c.members), {}};
    note_shape(group, shape);
    b.add_stand_in(c.kind, comm, ports);
  }

  // A stage's SendRecv links to its neighbours, one 2-member group and stream per direction,
  // and the tied embedding's group of the first and the last stage.
  void add_pipeline_links(std::size_t index, StepBuilder& b) {
    const ParallelSpec& p = s_.parallel;
    const int rank = ranks_[index].rank;
    const int stage = ranks_[index].stage;
    const int before = stage_rank(rank, stage - 1);
    const int after = stage_rank(rank, stage + 1);
    if (has_pipeline_peer(p, stage, -1)) {
      add_pp_link(index, b, PpLink::forward_in, "pp fwd", {before, rank}, "pp activation recv");
      add_pp_link(index, b, PpLink::backward_out, "pp bwd", {rank, before}, "pp gradient send");
    }
    if (has_pipeline_peer(p, stage, 1)) {
      add_pp_link(index, b, PpLink::forward_out, "pp fwd", {rank, after}, "pp activation send");
      add_pp_link(index, b, PpLink::backward_in, "pp bwd", {after, rank}, "pp gradient recv");
    }
    if (bidirectional(p.schedule)) add_reverse_links(index, b);
    if (has_embedding_group(s_, stage)) {
      add_pp_link(index, b, PpLink::embedding, "pp embedding", {stage_rank(rank, 0), stage_rank(rank, p.pp - 1)},
                  "pp embedding");
    }
  }

  // Activation offload's copy streams, one per direction as Transformer Engine's offload
  // handler makes them (its d2h_stream and h2d_stream), over the rank's share of its host link.
  // Where that is the GPU's PCIe link, its NIC traffic crosses it too: the copies are flows on
  // it, each direction a group of the rank alone.
  void add_host_streams(std::size_t index, StepBuilder& b) {
    if (s_.training.activation_offload_layers == 0) return;
    auto& streams = program_.ranks[index].streams;
    streams.push_back("offload to host");
    streams.push_back("offload from host");
    const auto to_host = static_cast<engine::StreamIndex>(streams.size() - 2);
    const auto from_host = static_cast<engine::StreamIndex>(streams.size() - 1);
    const Bandwidth share = host_link_share(s_, ranks_[index].rank);
    if (!offload_on_pcie(s_)) {
      b.set_host_streams(to_host, from_host, share);
      return;
    }
    const int rank = ranks_[index].rank;
    const auto group = [&](const char* name) {
      program_.groups.push_back({name, CommKind::other, 1, {static_cast<int>(index)}, ranks_string({rank})});
      members_.push_back(RankGroup{rank, 1, 1});  // the rank alone, for the jitter's arrival model
      return static_cast<std::int32_t>(program_.groups.size() - 1);
    };
    const std::int32_t out = group("offload to host");
    b.set_host_streams(to_host, from_host, share, out, group("offload from host"));
  }

  // DualPipe's reverse direction: activations from the stage after to the stage before,
  // gradients back; and the group of the stage and its mirror image p − 1 − stage.
  void add_reverse_links(std::size_t index, StepBuilder& b) {
    const ParallelSpec& p = s_.parallel;
    const int rank = ranks_[index].rank;
    const int stage = ranks_[index].stage;
    const int before = stage_rank(rank, stage - 1);
    const int after = stage_rank(rank, stage + 1);
    if (has_pipeline_peer(p, stage, 1)) {
      add_pp_link(index, b, PpLink::reverse_forward_in, "pp fwd", {after, rank}, "pp reverse activation recv");
      add_pp_link(index, b, PpLink::reverse_backward_out, "pp bwd", {rank, after}, "pp reverse gradient send");
    }
    if (has_pipeline_peer(p, stage, -1)) {
      add_pp_link(index, b, PpLink::reverse_forward_out, "pp fwd", {rank, before}, "pp reverse activation send");
      add_pp_link(index, b, PpLink::reverse_backward_in, "pp bwd", {before, rank}, "pp reverse gradient recv");
    }
    if (!has_mirror_group(s_)) return;
    const int mirror = stage_rank(rank, p.pp - 1 - stage);
    add_pp_link(index, b, PpLink::mirror, "pp mirror", {std::min(rank, mirror), std::max(rank, mirror)}, "pp mirror");
  }

  // The rank at the same TP, CP and DP coordinates in pipeline stage `stage` (modulo pp).
  int stage_rank(int rank, int stage) const {
    Coord c = coord_of(s_.parallel, rank);
    c.pp = (stage + s_.parallel.pp) % s_.parallel.pp;
    return global_rank(s_.parallel, c);
  }

  // Pipeline groups are keyed by name and members (the sender first).
  void add_pp_link(std::size_t index, StepBuilder& b, PpLink link, const char* name, const std::vector<int>& members,
                   const char* stream_name) {
    auto& streams = program_.ranks[index].streams;
    streams.push_back(stream_name);
    const auto stream = static_cast<engine::StreamIndex>(streams.size() - 1);
    const auto [it, inserted] =
        pp_groups_.try_emplace({name, members}, static_cast<std::int32_t>(program_.groups.size()));
    if (inserted) {
      program_.groups.push_back({name, CommKind::pp, static_cast<int>(members.size()), {}, ranks_string(members)});
      const auto [low, high] = std::minmax(members[0], members[1]);
      members_.push_back(low == high ? RankGroup{low, 1, 1} : RankGroup{low, high - low, 2});
    }
    program_.groups[static_cast<std::size_t>(it->second)].members.push_back(static_cast<int>(index));
    const std::vector<int> like = costed(members);
    const collectives::GroupShape shape = shape_of(like, s_.cluster.domain_gpus());
    Communicator comm{
        it->second, stream, shape, {}, shares_of(it->second, like), leaves_of(it->second, members, index, shape)};
    note_shape(it->second, comm.shape);
    if (s_.simulation.ranks == RankMode::all) comm.spine = spine_of(it->second, like, index, shape);
    b.add_pp_link(link, comm);
  }

  // A simulated rank of representative mode stands for every rank of its stage, whose groups
  // of one kind need not be placed alike: with TP 16 on 72-GPU racks, ranks 64 to 79 straddle
  // two racks and run their TP collectives over the NICs while the stage's other TP groups stay
  // on NVLink. The step waits for the slowest group at every data-parallel and pipeline
  // synchronisation, so the rank's communicator is costed (shape, spine share, link shares) as
  // the slowest group of its kind in the stage; where all are costed alike, as its own.
  RankGroup costed(const RankGroup& members) const {
    if (s_.simulation.ranks != RankMode::representative) return members;
    const Translates t = stage_translates(members, s_.parallel.gpus() / s_.parallel.pp);
    return translated(members, slowest_translation(members, t, s_.cluster.domain_gpus()));
  }

  // A pipeline link of representative mode joins the first ranks of two stages: costed as the
  // slowest of the links between the same stages at every place in them.
  std::vector<int> costed(const std::vector<int>& members) const {
    if (s_.simulation.ranks != RankMode::representative || members.size() != 2 || members[0] == members[1])
      return members;
    const long long stage = s_.parallel.gpus() / s_.parallel.pp;
    const auto [low, high] = std::minmax(members[0], members[1]);
    const auto by = static_cast<int>(
        slowest_translation(RankGroup{low, high - low, 2}, Translates{stage, stage, 1}, s_.cluster.domain_gpus()));
    return {members[0] + by, members[1] + by};
  }

  const Scenario& s_;
  engine::Program& program_;
  std::vector<SimulatedRank> ranks_;
  std::vector<RankPorts> links_;    // per simulated rank
  std::vector<RankGroup> members_;  // per group of program_, its real ranks
  std::map<std::pair<std::string, int>, std::int32_t> groups_;
  std::map<std::pair<std::string, std::vector<int>>, std::int32_t> pp_groups_;
  Fabric fabric_;
  std::vector<std::optional<LeafShares>> spine_;                                  // per group, by leaf, once known
  std::map<std::pair<std::int32_t, std::size_t>, std::vector<LeafLoad>> leaves_;  // per group and rank, once known
  std::vector<std::optional<LinkShares>> shares_;  // per group, once known
};

}  // namespace

engine::Program build_program(const Scenario& scenario, const workload::ModelWork& work, const Costs& costs,
                              StageRanks stage_ranks) {
  check_supported(scenario);
  engine::Program program;
  // Each op costs the CPU its kernel's launch and the framework's dispatch around it, unless a
  // CUDA graph replays it.
  program.kernel_launch =
      costs.kernel_launch() + costs.dispatch().value_or(traits_of(scenario.training.framework).dispatch);
  program.expert_gemm_host = traits_of(scenario.training.framework).expert_gemm_host;
  program.comm_slowdown = costs.comm_slowdown();
  program.derived_slowdown = costs.derived_slowdown();
  BuildState state(program, costs);
  // torchtitan's GroupedExperts runs each expert GEMM as one torch._grouped_mm
  // (torchtitan/models/moe/moe.py, _run_experts_grouped_mm, use_grouped_mm on by default).
  if (torchtitan(scenario.training.framework)) state.launch_grouped_gemm_once();
  if (scenario.training.cuda_graphs) {
    program.host_costs = {Time::zero()};
    if (scenario.training.cuda_graph_scope.empty()) {
      state.capture_layers();
    } else {
      state.capture_scopes(scenario.training.cuda_graph_scope);
    }
  }
  Layout layout(scenario, program);
  JobShared shared;
  // The ranks of a stage issue the same ops: only their groups and links differ. The first
  // rank of each stage writes its step; the others take its op list and make its calls again
  // on their own communicators (StepBuilder::replay), so that an all-ranks program holds one
  // op list per stage and costs little more to build than one rank per stage. A rank whose
  // communicators differ in more writes its step too, into buffers of the final size, and
  // shares the first one's list if the two came out equal.
  std::map<int, std::unique_ptr<StepBuilder>> first_of_stage;
  for (std::size_t r = 0; r < layout.ranks().size(); ++r) {
    auto b = std::make_unique<StepBuilder>(state, r);
    layout.add_rank(r, *b);
    const int stage = layout.ranks()[r].stage;
    const auto first = first_of_stage.find(stage);
    if (first != first_of_stage.end() && stage_ranks == StageRanks::replay && b->replay(*first->second)) continue;
    engine::RankProgram& rank = program.ranks[r];
    if (first != first_of_stage.end()) {
      const engine::OpList& model = *first->second->rank().list;
      rank.list->ops.reserve(model.ops.size());
      rank.list->waits.reserve(model.waits.size());
    }
    StepWriter(scenario, work, *b, stage, shared).step();
    // Grown by doubling; large pipelines hold millions of ops, so give back the slack.
    rank.list->ops.shrink_to_fit();
    rank.list->waits.shrink_to_fit();
    if (first != first_of_stage.end()) {
      rank.share_ops_with(first->second->rank());
    } else {
      first_of_stage.emplace(stage, std::move(b));
    }
  }
  annotate_memory(program, scenario, work);
  apply_variation(program, scenario, layout.links(), layout.members());
  return program;
}

// The schedule, the layers per stage and the SendRecv message, when there is a pipeline.
std::string pipeline_notes(const Scenario& s) {
  const ParallelSpec& p = s.parallel;
  if (p.pp <= 1) return "";
  const char* schedule = "?";
  for (const ScheduleKind& k : pipeline_schedules()) {
    if (k.schedule == p.schedule) schedule = k.name;
  }
  std::vector<int> layers;
  for (const ChunkLayers& c : chunk_layers(p, s.model.layers)) layers.push_back(c.layers);
  const Bytes message = pipeline_message(s);
  return fmt::format(
      "; pipeline: {} schedule, {} micro-batches, {} chunk(s) per stage, layers per "
      "virtual stage {}; SendRecv of {} per micro-batch and boundary ({}) "
      "between adjacent stages of the pp group",
      schedule, s.training.micro_batches(p.dp), chunks_per_stage(p), ranks_string(layers), format_size(message),
      pipeline_message_formula(s));
}

std::string placement_notes(const Scenario& s) {
  std::string notes = placement_description(s) + pipeline_notes(s);
  const Scenario scenario = gradient_scenario(s);
  if (scenario.parallel.dp <= 1) return notes;
  if (scenario.data_parallel.kind != DpKind::ddp) return notes + "; " + data_parallel_notes(scenario);
  Scenario first = scenario;
  if (scenario.parallel.pp > 1) first.parallel.stage = 0;
  const BucketLayout layout = bucket_layout(first);
  Bytes total{0};
  for (const Bucket& b : layout.buckets) total += b.size;
  return fmt::format("{}; DDP{}: {} gradient tensors in {} buckets, {} in all", notes,
                     scenario.parallel.pp > 1 ? " on stage 0" : "", layout.tensors.size(), layout.buckets.size(),
                     format_size(total));
}

}  // namespace stepsim::parallelism
