// One rank's ops in host issue order, with deferred waits so that a strategy can say "the
// next op that consumes this gradient waits for its collective" without knowing that op.
#include "parallelism/step_builder.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "stepsim/error.hpp"

namespace stepsim::parallelism {

std::uint32_t BuildState::name(const std::string& text) { return program_.names.intern(text); }

std::uint8_t BuildState::host_class(Time cost) {
  auto& costs = program_.host_costs;
  const auto it = std::ranges::find(costs, cost);
  if (it != costs.end()) return static_cast<std::uint8_t>(it - costs.begin() + 1);
  STEPSIM_CHECK(costs.size() < 255, "more than 255 host cost classes");
  costs.push_back(cost);
  return static_cast<std::uint8_t>(costs.size());
}

const CollectiveCost& BuildState::collective(const collectives::Request& r, const LinkShares& shares) {
  const Key key{r.op,          r.size.count(), r.shape.ranks, r.shape.nodes, r.shape.ranks_per_node,
                shares.nvlink, shares.nic,     shares.nics,   r.kind};
  auto it = collectives_.find(key);
  if (it == collectives_.end())
    it = collectives_.emplace(key, shares.whole() ? costs_.collective(r) : costs_.degraded_collective(r, shares)).first;
  return it->second;
}

std::string site_label(const OpSite& site, int layers) {
  if (site.block == 0 || site.block == layers + 1) return site.cost->name;
  return fmt::format("L{} {}", site.block - 1, site.cost->name);
}

std::string op_name(const OpSite& site, int layers) {
  std::string label = site_label(site, layers);
  if (site.phase == Phase::recompute || site.cost->recomputed) return label + " recompute";
  if (site.cost->pass == workload::Pass::forward) return label + " fwd";
  return label;
}

std::string format_size(Bytes size) {
  if (size >= Bytes::mib(1)) return fmt::format("{:.1f} MiB", size.mib_value());
  if (size >= Bytes::kib(1)) return fmt::format("{:.1f} KiB", size.as_double() / 1024.0);
  return fmt::format("{} B", size.count());
}

StepBuilder::StepBuilder(BuildState& state, std::size_t rank_index) : state_(state), rank_index_(rank_index) {}

engine::RankProgram& StepBuilder::rank() { return state_.program().ranks[rank_index_]; }

void StepBuilder::add_communicator(CommKind kind, const Communicator& comm) { slots_[slot_of(kind)] = comm; }

bool StepBuilder::has_communicator(CommKind kind) const { return slots_[slot_of(kind)].group >= 0; }

void StepBuilder::add_pp_link(PpLink link, const Communicator& comm) { slots_[slot_of(link)] = comm; }

bool StepBuilder::has_pp_link(PpLink link) const { return slots_[slot_of(link)].group >= 0; }

OpIndex StepBuilder::append(const engine::Op& op, const std::vector<OpIndex>& waits) {
  waits_.insert(waits_.end(), waits.begin(), waits.end());
  std::sort(waits_.begin(), waits_.end());
  waits_.erase(std::unique(waits_.begin(), waits_.end()), waits_.end());
  const OpIndex index = rank().add_op(op, waits_);
  waits_.clear();
  return index;
}

namespace {

// The ops of a transformer layer, which CUDA graphs capture (Megatron captures each layer's
// forward and backward); the embedding, the head, the loss and the optimizer run outside.
bool in_layer(workload::Role role) {
  using workload::Role;
  return role != Role::embedding && role != Role::final_norm && role != Role::lm_head && role != Role::loss &&
         role != Role::optimizer;
}

// The ops each of Megatron-Core's CUDA graph scopes captures (TransformerLayer's
// _forward_attention for attn; _forward_mlp for mlp; up to MoELayer.router() for moe_router;
// the token dispatcher's preprocessing, the permutation before the dispatch, for
// moe_preprocess), forward and backward: Transformer Engine's make_graphed_callables graphs
// both. The pre-MLP norm is in mlp and in moe_router.
bool in_scope(CudaGraphScope scope, workload::Role role) {
  using workload::Role;
  switch (scope) {
    case CudaGraphScope::attn:
      return role == Role::input_norm || role == Role::qkv || role == Role::qk_norm || role == Role::rotary ||
             role == Role::attention_core || role == Role::attn_proj || role == Role::attn_residual ||
             role == Role::q_down || role == Role::kv_down;
    case CudaGraphScope::mlp:
      return role == Role::post_norm || role == Role::fc1 || role == Role::activation || role == Role::fc2 ||
             role == Role::mlp_residual;
    case CudaGraphScope::moe_router:
      return role == Role::post_norm || role == Role::router;
    case CudaGraphScope::moe_preprocess:
      return role == Role::moe_counts || role == Role::moe_permute;
    case CudaGraphScope::moe:
      return false;  // refused by validation
  }
  return false;
}

}  // namespace

bool BuildState::captures(workload::Role role) const {
  if (capture_layers_) return in_layer(role);
  return std::ranges::any_of(scopes_, [&](CudaGraphScope s) { return in_scope(s, role); });
}

bool StepBuilder::attaches(const Deferred& d, const workload::OpCost& op) const {
  if (d.lane != lane_) return false;
  switch (d.rule) {
    case WaitRule::next_op:
      return true;
    case WaitRule::next_other_role:
      return op.role != d.role;
    case WaitRule::wgrad_of_role:
      return op.role != d.role || op.pass != workload::Pass::backward_data;
  }
  return true;
}

OpIndex StepBuilder::compute(const workload::OpCost& cost, Phase phase, const std::string& name,
                             const std::vector<OpIndex>& waits) {
  return compute(cost, phase, state_.name(name), waits);
}

OpIndex StepBuilder::compute(const workload::OpCost& cost, Phase phase, std::uint32_t name,
                             const std::vector<OpIndex>& waits) {
  auto keep =
      std::stable_partition(deferred_.begin(), deferred_.end(), [&](const Deferred& d) { return !attaches(d, cost); });
  for (auto it = keep; it != deferred_.end(); ++it) waits_.push_back(it->op);
  deferred_.erase(keep, deferred_.end());
  engine::Op op;
  op.kind = engine::OpKind::compute;
  op.stream = 0;
  op.name = name;
  op.phase = phase;
  op.duration = state_.costs().compute(cost);
  op.memory_bound = state_.costs().memory_bound(cost);
  const workload::Role role = cost.role == workload::Role::fp8_cast ? cost.cast_of : cost.role;
  if (state_.captures(role)) {
    op.host = BuildState::kReplayed;
  } else if (const long long launches =
                 std::max(state_.launches_grouped_gemm_once() ? 1LL : cost.groups, cost.launches);
             launches > 1) {
    // Transformer Engine's grouped GEMM launches one cuBLAS GEMM per group from C++
    // (nvte_multi_tensor_gemm's multi_stream_cublas_gemm; CUTLASS's single grouped kernel only
    // for BF16 on Hopper, behind NVTE_USE_CUTLASS_GROUPED_GEMM), and its casts a quantize
    // kernel per expert under most recipes (OpCost::launches): the framework's dispatch once,
    // the launch once per kernel. torchtitan's torch._grouped_mm is one kernel.
    // GroupedLinear's own host work per further expert comes on top of its GEMMs' launches.
    const Time launch = state_.costs().kernel_launch();
    const Time experts = state_.program().expert_gemm_host * (cost.groups - 1);
    op.host = state_.host_class(state_.program().kernel_launch + launch * (launches - 1) + experts);
  } else if (cost.operators > 1) {
    // An eager chain or a Python loop of PyTorch operators: each at the framework's cost.
    op.host = state_.host_class(state_.program().kernel_launch * cost.operators);
  }
  if (cost.host_sync && op.host != BuildState::kReplayed) {
    // A synchronising copy before it: the host waits for the stream's work so far.
    op.host_blocks = true;
    for (OpIndex w : last_compute()) waits_.push_back(w);
  }
  // Written into stepsim's traces, so that a fit to them knows each piece's own work.
  state_.program().work.try_emplace(name, KernelWork{cost.flops, cost.bytes});
  const OpIndex index = append(op, waits);
  last_compute_[static_cast<std::size_t>(lane_)] = index;
  return index;
}

OpIndex StepBuilder::small_all_reduce(const collectives::GroupShape& shape, Bytes size, Phase phase,
                                      const std::string& name, const std::vector<OpIndex>& waits) {
  const CollectiveCost& cost = state_.collective({CollOp::allreduce, size, shape, CommKind::other}, LinkShares{});
  engine::Op op;
  op.kind = engine::OpKind::compute;
  op.stream = 0;
  op.name = state_.name(name);
  op.phase = phase;
  op.duration = cost.latency + transfer_time(size, cost.algbw);
  const OpIndex index = append(op, waits);
  last_compute_[static_cast<std::size_t>(lane_)] = index;
  return index;
}

std::vector<network::ResourceUse> StepBuilder::uses(const Communicator& comm, CollOp op,
                                                    const collectives::LinkLoad& load, Side side) const {
  std::vector<network::ResourceUse> out = link_uses(ports_, load, side, comm.spine.of(op, load));
  for (const RankPorts& other : comm.others) {
    for (const network::ResourceUse& u : link_uses(other, load, side, 0.0)) out.push_back(u);
  }
  if (load.inter <= 0) return out;
  for (const LeafLoad& leaf : comm.leaves) {
    const double share = load.inter * leaf.share.of(op, load);
    if (share <= 0) continue;
    if (side != Side::rx) out.push_back({leaf.up, share});
    if (side != Side::tx) out.push_back({leaf.down, share});
  }
  return out;
}

std::uint32_t StepBuilder::collective_name(CommKind kind, CollOp op, Bytes size, const std::string& what) {
  return state_.name(fmt::format("{} {} {}, {}", nccl_name(op), to_string(kind), what, format_size(size)));
}

OpIndex StepBuilder::collective(CommKind kind, CollOp op, Bytes size, const std::string& what,
                                const std::vector<OpIndex>& waits) {
  return collective(kind, op, size, collective_name(kind, op, size, what), waits);
}

OpIndex StepBuilder::collective(CommKind kind, CollOp op, Bytes size, std::uint32_t name,
                                const std::vector<OpIndex>& waits) {
  STEPSIM_CHECK(has_communicator(kind), fmt::format("no {} communicator on this rank", to_string(kind)));
  return collective_on(slot_of(kind), kind, op, size, name, waits);
}

OpIndex StepBuilder::pp_collective(PpLink link, CollOp op, Bytes size, const std::string& what,
                                   const std::vector<OpIndex>& waits) {
  STEPSIM_CHECK(has_pp_link(link), "no pipeline link of that direction on this rank");
  // A SendRecv loads its sender's transmit side and its receiver's receive side.
  Side side = Side::both;
  if (op == CollOp::sendrecv && (link == PpLink::forward_out || link == PpLink::backward_out)) side = Side::tx;
  if (op == CollOp::sendrecv && (link == PpLink::forward_in || link == PpLink::backward_in)) side = Side::rx;
  return collective_on(slot_of(link), CommKind::pp, op, size, collective_name(CommKind::pp, op, size, what), waits,
                       side);
}

// The call's cost and link loads follow from the key: a communicator's shape is fixed per group.
std::int32_t StepBuilder::call_of(std::size_t slot, CommKind kind, CollOp op, Bytes size, Side side) {
  const Communicator& comm = slots_[slot];
  auto& calls = rank().calls;
  const auto [it, inserted] =
      calls_.try_emplace({op, kind, comm.group, size.count()}, static_cast<std::int32_t>(calls.size()));
  if (!inserted) return it->second;
  const CollectiveCost& cost = state_.collective({op, size, comm.shape, kind}, comm.shares);
  calls.push_back({op, kind, comm.group, size, cost.latency, cost.algbw, uses(comm, op, cost.load, side)});
  calls.back().sm_share = cost.sm_share;
  calls.back().hbm_share = cost.hbm_share;
  origins_.push_back({slot, side, cost});
  return it->second;
}

bool StepBuilder::replay(StepBuilder& model) {
  if (host_share_ != model.host_share_ || !stand_ins_.empty() || !model.stand_ins_.empty()) return false;
  for (std::size_t i = 0; i < kSlots; ++i) {
    const Communicator& mine = slots_[i];
    const Communicator& theirs = model.slots_[i];
    if ((mine.group >= 0) != (theirs.group >= 0)) return false;
    if (mine.group < 0) continue;
    if (mine.stream != theirs.stream || mine.shape != theirs.shape || mine.spine != theirs.spine ||
        mine.leaves != theirs.leaves || mine.others != theirs.others)
      return false;
    // Calls are told apart by their group: two slots that are one group on one rank share calls.
    for (std::size_t j = 0; j < i; ++j) {
      if (slots_[j].group >= 0 && (slots_[j].group == mine.group) != (model.slots_[j].group == theirs.group)) {
        return false;
      }
    }
  }
  engine::RankProgram& out = rank();
  const engine::RankProgram& in = model.rank();
  out.list = in.list;
  out.calls.clear();
  out.calls.reserve(in.calls.size());
  origins_ = model.origins_;
  for (std::size_t c = 0; c < in.calls.size(); ++c) {
    const engine::CollectiveCall& call = in.calls[c];
    CallOrigin& origin = origins_[c];
    const Communicator& comm = slots_[origin.slot];
    // A group whose links are degraded otherwise than the model's has its own NCCL cost.
    if (origin.nccl && comm.shares != model.slots_[origin.slot].shares)
      origin.cost = state_.collective({call.op, call.size, comm.shape, call.kind}, comm.shares);
    out.calls.push_back(
        {call.op, call.kind, comm.group, call.size, origin.cost.latency, origin.cost.algbw,
         origin.host_copy ? host_copy_uses(origin.side) : uses(comm, call.op, origin.cost.load, origin.side),
         call.slows_compute, origin.cost.sm_share, origin.cost.hbm_share, call.host_copy});
  }
  return true;
}

OpIndex StepBuilder::expert_dp_collective(CollOp op, Bytes size, const std::string& what,
                                          const std::vector<OpIndex>& waits, CommKind kind) {
  STEPSIM_CHECK(has_expert_dp(), "no expert-dp communicator on this rank");
  return collective_on(kExpertDpSlot, kind, op, size, collective_name(kind, op, size, "experts " + what), waits);
}

OpIndex StepBuilder::expert_tp_collective(CollOp op, Bytes size, std::uint32_t name,
                                          const std::vector<OpIndex>& waits) {
  STEPSIM_CHECK(slots_[kExpertTpSlot].group >= 0, "no expert-tp communicator on this rank");
  return collective_on(kExpertTpSlot, CommKind::ep, op, size, name, waits);
}

OpIndex StepBuilder::transfer(CommKind kind, CollOp op, Bytes size, std::uint32_t name, const CollectiveCost& cost,
                              const std::vector<OpIndex>& waits) {
  const Communicator& comm = slots_[slot_of(kind)];
  STEPSIM_CHECK(comm.group >= 0, fmt::format("no {} communicator on this rank", to_string(kind)));
  auto& calls = rank().calls;
  const auto [it, inserted] =
      transfers_.try_emplace({op, kind, comm.group, size.count()}, static_cast<std::int32_t>(calls.size()));
  if (inserted) {
    calls.push_back(
        {op, kind, comm.group, size, cost.latency, cost.algbw, uses(comm, op, cost.load, Side::both), false});
    origins_.push_back({slot_of(kind), Side::both, cost, false});
  }
  engine::Op e;
  e.kind = engine::OpKind::collective;
  e.stream = comm.stream;
  e.name = name;
  e.call = it->second;
  // Userbuffers' exchanges inside a layer, replayed with it or with their GEMM's scope.
  if (comm_role_ && state_.captures(*comm_role_)) e.host = BuildState::kReplayed;
  return append(e, waits);
}

OpIndex StepBuilder::collective_on(std::size_t slot, CommKind kind, CollOp op, Bytes size, std::uint32_t name,
                                   const std::vector<OpIndex>& waits, Side side) {
  engine::Op e;
  e.kind = engine::OpKind::collective;
  e.stream = slots_[slot].stream;
  e.name = name;
  e.call = call_of(slot, kind, op, size, side);
  // A layer's own communication is captured with it: a TP collective with the op it belongs
  // to (the embedding's, the head's and the loss's stay outside every graph), the attention's
  // K/V exchange with the attention, the expert all-to-alls and gathers with a whole layer.
  // Gradient and pipeline transfers are not captured.
  bool replayed = false;
  if (kind == CommKind::tp) replayed = comm_role_ && state_.captures(*comm_role_);
  if (kind == CommKind::cp) replayed = state_.captures(workload::Role::attention_core);
  if (kind == CommKind::ep) replayed = state_.captures_layers();
  if (replayed) e.host = BuildState::kReplayed;
  const OpIndex index = append(e, waits);
  for (const StandIn& stand_in : stand_ins_) {
    if (stand_in.slot != slot) continue;
    engine::Op copy = e;
    copy.stream = stand_in.comm.stream;
    copy.call = stand_in_call(stand_in, kind, op, size, side);
    copy.host = state_.host_class(Time::zero());
    append(copy, waits);
  }
  return index;
}

std::int32_t StepBuilder::stand_in_call(const StandIn& stand_in, CommKind kind, CollOp op, Bytes size, Side side) {
  auto& calls = rank().calls;
  const auto [it, inserted] =
      calls_.try_emplace({op, kind, stand_in.comm.group, size.count()}, static_cast<std::int32_t>(calls.size()));
  if (!inserted) return it->second;
  const CollectiveCost& cost = state_.collective({op, size, stand_in.comm.shape, kind}, stand_in.comm.shares);
  calls.push_back({op, kind, stand_in.comm.group, size, cost.latency, cost.algbw,
                   link_uses(stand_in.ports, cost.load, side, 0.0), false});
  origins_.push_back({stand_in.slot, side, cost});
  return it->second;
}

void StepBuilder::add_other_links(CommKind kind, const RankPorts& ports) {
  std::vector<RankPorts>& others = slots_[slot_of(kind)].others;
  if (std::ranges::find(others, ports) == others.end()) others.push_back(ports);
}

void StepBuilder::add_stand_in(CommKind kind, const Communicator& comm, const RankPorts& ports) {
  stand_ins_.push_back({slot_of(kind), comm, ports});
}

void StepBuilder::launched_from_cpp(OpIndex index) {
  engine::Op& op = rank().ops()[index];
  if (op.host == BuildState::kReplayed) return;
  op.host = state_.host_class(state_.costs().kernel_launch());
}

void StepBuilder::issued_with(OpIndex index, int operators) {
  engine::Op& op = rank().ops()[index];
  if (op.host == BuildState::kReplayed) return;
  op.host = state_.host_class(state_.program().kernel_launch * operators);
}

void StepBuilder::set_host_streams(engine::StreamIndex to_host, engine::StreamIndex from_host, Bandwidth share,
                                   std::int32_t to_host_group, std::int32_t from_host_group) {
  to_host_ = to_host;
  from_host_ = from_host;
  host_share_ = share;
  if (to_host_group < 0 || from_host_group < 0) return;
  STEPSIM_CHECK(ports_.pcie, "host copies over a PCIe link the rank's ports do not have");
  slots_[kToHostSlot].group = to_host_group;
  slots_[kToHostSlot].stream = to_host;
  slots_[kFromHostSlot].group = from_host_group;
  slots_[kFromHostSlot].stream = from_host;
}

std::vector<network::ResourceUse> StepBuilder::host_copy_uses(Side side) const {
  return {{side == Side::tx ? ports_.pcie_tx : ports_.pcie_rx, 1.0}};
}

OpIndex StepBuilder::host_copy(bool to_host, std::uint32_t name, Bytes bytes, Time duration, Bytes memory_delta,
                               Phase phase, const std::vector<OpIndex>& waits) {
  STEPSIM_CHECK(to_host_ != 0 && from_host_ != 0, "no host copy streams on this rank");
  engine::Op e;
  e.stream = to_host ? to_host_ : from_host_;
  e.name = name;
  e.phase = phase;
  e.memory_delta = memory_delta;
  // The bytes it moves, which the timeline's memory interval carries.
  state_.program().work.try_emplace(name, KernelWork{0, bytes});
  const std::size_t slot = to_host ? kToHostSlot : kFromHostSlot;
  const std::int32_t group = slots_[slot].group;
  if (group < 0) {
    e.kind = engine::OpKind::copy;
    e.duration = duration;
    return append(e, waits);
  }
  // Over the GPU's PCIe link, beside its NIC traffic: a flow at up to the rank's share of its
  // host link, out of the GPU to the host, into it back.
  const Side side = to_host ? Side::tx : Side::rx;
  auto& calls = rank().calls;
  const auto [it, inserted] = calls_.try_emplace({CollOp::sendrecv, CommKind::other, group, bytes.count()},
                                                 static_cast<std::int32_t>(calls.size()));
  if (inserted) {
    const CollectiveCost cost{Time::zero(), host_share_, {}};
    calls.push_back({CollOp::sendrecv, CommKind::other, group, bytes, cost.latency, cost.algbw, host_copy_uses(side),
                     false, 0, 0, true});
    origins_.push_back({slot, side, cost, false, true});
  }
  e.kind = engine::OpKind::collective;
  e.call = it->second;
  return append(e, waits);
}

void StepBuilder::defer_wait(OpIndex op, WaitRule rule, workload::Role role) {
  deferred_.push_back({op, rule, role, lane_});
  ++deferrals_[static_cast<std::size_t>(lane_)];
}

void StepBuilder::set_lane(int lane) {
  STEPSIM_CHECK(lane >= 0 && lane < kLanes, "no such lane of issue");
  lane_ = lane;
}

void StepBuilder::join_lanes() {
  for (Deferred& d : deferred_) d.lane = 0;
  last_compute_[0] = std::max(last_compute_[0], last_compute_[1]);
  last_compute_[1] = -1;
  lane_ = 0;
}

std::vector<OpIndex> StepBuilder::take_deferred() {
  std::vector<OpIndex> out;
  for (const Deferred& d : deferred_) out.push_back(d.op);
  deferred_.clear();
  return out;
}

std::vector<OpIndex> StepBuilder::last_compute() const {
  const std::int64_t last = last_compute_[static_cast<std::size_t>(lane_)];
  if (last < 0) return {};
  return {static_cast<OpIndex>(last)};
}

std::vector<OpIndex> StepBuilder::stream_tail() const {
  const std::int64_t last = std::max(last_compute_[0], last_compute_[1]);
  if (last < 0) return {};
  return {static_cast<OpIndex>(last)};
}

}  // namespace stepsim::parallelism
