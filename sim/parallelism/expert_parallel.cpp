// Where the EP all-to-alls go. Forward: dispatch after the permutation, before the first
// expert GEMM; combine after the last expert GEMM, before the unpermutation. Backward: the
// output gradient goes back to the experts before expert fc2's input gradient, and the input
// gradient returns after expert fc1's weight gradient (the grouped GEMM's backward ends with
// it), or after its input gradient when the schedule defers weight gradients. Where Megatron-Core's
// all-to-all dispatcher sorts the received tokens by local expert, the sort follows the dispatch
// and the unsort precedes the combine, so the all-to-alls go before and after them instead. The flex
// dispatcher (DeepEP, HybridEP) sends less across NVLink domains (flex_share); with etp > 1 it
// dispatches over the expert block of ep·etp ranks, each token to every ETP rank of its experts
// (etp times the copies), and no ETP gather or scatter runs (dispatches_over_block). Each is on the
// ep stream and the next compute op of its pass waits for it: only DualPipe and Megatron-Core's
// EP all-to-all overlap (model.moe.a2a_overlap), which run another micro-batch's pass beside
// it, hide it. With expert tensor parallelism under the all-to-all dispatcher the ETP group's
// AllGather follows each all-to-all into the experts and its ReduceScatter precedes each one out of them, on the etp
// stream.
#include "parallelism/expert_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "parallelism/mesh.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "stepsim/framework.hpp"

namespace stepsim::parallelism {

namespace {

using workload::Pass;
using workload::Role;

// Of the bytes the all-to-all dispatcher sends out of the NVLink domains of an EP group, the
// share the flex dispatcher (DeepEP, HybridEP) sends: one copy per other domain holding any of a
// token's top_k experts instead of one per expert. With tokens spread evenly over the group's
// ranks and E experts evenly over them (the benchmarks force balance), a domain holding n_j of
// the group's N ranks holds E·n_j/N experts, and none of a token's k distinct experts with
// probability p_j = C(E − E·n_j/N, k) / C(E, k). A token of domain i then goes to Σ_{j≠i} (1 − p_j)
// other domains under flex, against k(1 − n_i/N) copies under the all-to-all; the share is the
// ratio of the two averaged over the tokens (domain i's are n_i/N of them). With D domains of
// N/D ranks each, (1 − C(E − E/D, k)/C(E, k))·D/k. The NVLink leg inside each domain is left
// at the same share: the NICs, 18 times slower, set the pace. Over an expert block of ep·etp
// ranks (dispatches_over_block) the all-to-all would send each routed copy to each of the
// expert's etp ranks, k·etp copies a token, while flex still sends it once to each other domain
// (a domain holding n_j of the block's N ranks holds E·n_j/N experts, each with its etp ranks):
// the share is then over k·etp copies.
double flex_share(const Scenario& s, const RankGroup& group) {
  if (s.model.moe.dispatcher != MoeDispatcher::flex) return 1.0;
  const int copies = dispatches_over_block(s) ? s.parallel.etp : 1;  // per routed copy
  const long long g = std::max(1, s.cluster.domain_gpus());
  std::map<long long, long long> members;  // per domain
  for (long long i = 0; i < group.size; ++i) ++members[group.at(i) / g];
  if (members.size() <= 1) return 1.0;
  const double experts = s.model.moe.experts;
  const int k = s.model.moe.top_k;
  // The probability that a token has none of its experts among `held` of them.
  const auto none_of = [&](double held) {
    double p = 1.0;
    for (int i = 0; i < k; ++i) p *= std::max(0.0, experts - held - i) / (experts - i);
    return p;
  };
  const bool even = std::ranges::all_of(members, [&](const auto& m) { return m.second == members.begin()->second; });
  if (even) {
    const auto domains = static_cast<double>(members.size());
    return std::min(1.0, (1.0 - none_of(experts / domains)) * domains / (k * copies));
  }
  const auto n = static_cast<double>(group.size);
  double reached = 0;  // Σ_j (1 − p_j): other domains a token reaches, its own included
  for (const auto& m : members) reached += 1.0 - none_of(experts * static_cast<double>(m.second) / n);
  double flex = 0, all_to_all = 0;
  for (const auto& m : members) {
    const double share = static_cast<double>(m.second) / n;
    flex += share * (reached - (1.0 - none_of(experts * share)));
    all_to_all += share * k * copies * (1.0 - share);
  }
  return std::min(1.0, flex / all_to_all);
}

// The EP group (or expert block, dispatch_group) a stage's all-to-alls are sized for: the
// stage's ranks share one op list, and representative mode costs the stage's EP communicator as
// its slowest group (program_builder, costed), the one the step waits for; so the flex share is
// that group's.
RankGroup stage_ep_group(const Scenario& s, int stage) {
  const ParallelSpec& p = s.parallel;
  const RankGroup own = dispatch_group(s, global_rank(p, Coord{0, 0, 0, stage}));
  const Translates t = stage_translates(own, p.gpus() / p.pp);
  return translated(own, slowest_translation(own, t, s.cluster.domain_gpus()));
}

// Megatron-Core's all-to-all dispatcher sends the routed copies' probabilities by an all-to-all
// of their own after the tokens' (MoEAlltoAllTokenDispatcher.token_dispatch: the experts'
// activation weighs by them), one BF16 element per copy, and their gradient home by its
// backward; DeepEP's and HybridEP's kernels carry them with the tokens.
bool sends_probs(const Scenario& s) {
  return s.model.moe.dispatcher == MoeDispatcher::alltoall && traits_of(s.training.framework).megatron_core;
}

// The layer an op belongs to as its collectives' names give it: "L3" for transformer layer 3,
// and for a multi-token-prediction depth's layer, which runs in the head's block, the depth its
// ops are named after ("mtp0", workload::add_mtp).
std::string layer_label(const OpSite& site) {
  const std::string_view name = site.cost->name;
  if (name.starts_with("mtp")) return std::string(name.substr(0, name.find(' ')));
  return fmt::format("L{}", site.block - 1);
}

}  // namespace

ExpertParallel::ExpertParallel(const Scenario& s, const workload::ModelWork& work, int stage)
    : enabled_(s.model.moe.experts > 0 && s.parallel.ep > 1),
      etp_(s.model.moe.experts > 0 && s.parallel.etp > 1 && !dispatches_over_block(s)),
      split_backward_(splits_backward(s.parallel.schedule)),
      sorts_(std::ranges::any_of(work.layer.forward,
                                 [](const workload::OpCost& op) { return op.role == Role::moe_sort; })),
      message_(
          Bytes(std::llround(work.layer.dispatch_message.as_double() * (dispatches_over_block(s) ? s.parallel.etp : 1) *
                             flex_share(s, stage_ep_group(s, stage))))),
      etp_message_(work.layer.expert_tp_message),
      etp_probs_message_(etp_ && sends_probs(s) ? work.layer.expert_tp_message / s.model.hidden : Bytes(0)),
      probs_message_(sends_probs(s) ? work.layer.dispatch_message / s.model.hidden : Bytes(0)),
      counts_message_(
          enabled_ && std::ranges::any_of(work.layer.forward,
                                          [](const workload::OpCost& op) { return op.role == Role::moe_counts; })
              ? Bytes(8LL * s.model.moe.experts * s.parallel.ep)
              : Bytes(0)) {}

// Megatron-Core's all-to-all dispatcher gathers every EP rank's tokens per expert to size the
// dispatch (MoEAlltoAllTokenDispatcher.preprocess: gather_from_sequence_parallel_region of E
// int64 over its tp_ep group, the EP group here), on the compute stream's process group, which
// the compute stream then waits for: the permutation after it does. A graph that captures the
// preprocessing (cuda_graph_scope moe_preprocess) replays it.
void ExpertParallel::gather_counts(StepBuilder& b, const OpSite& site, OpIndex counted) {
  const auto [it, inserted] = names_.try_emplace({layer_label(site), "tokens per expert"}, 0);
  if (inserted) {
    it->second = b.collective_name(CommKind::ep, CollOp::allgather, counts_message_,
                                   fmt::format("{} tokens per expert", it->first.first));
  }
  const OpIndex gather = b.collective(CommKind::ep, CollOp::allgather, counts_message_, it->second, {counted});
  if (b.rank().ops()[counted].host == BuildState::kReplayed) b.rank().ops()[gather].host = BuildState::kReplayed;
  b.defer_wait(gather, WaitRule::next_op, site.cost->role);
}

OpIndex ExpertParallel::expert_tp(StepBuilder& b, const OpSite& site, CollOp op, const char* what,
                                  const std::vector<OpIndex>& waits, bool probs) {
  const Bytes size = probs ? etp_probs_message_ : etp_message_;
  const auto [it, inserted] = names_.try_emplace({layer_label(site), what}, 0);
  if (inserted) {
    it->second = b.collective_name(CommKind::ep, op, size, fmt::format("{} {}", it->first.first, what));
  }
  const OpIndex c = b.expert_tp_collective(op, size, it->second, waits);
  b.defer_wait(c, WaitRule::next_op, site.cost->role);
  return c;
}

OpIndex ExpertParallel::all_to_all(StepBuilder& b, const OpSite& site, const char* what,
                                   const std::vector<OpIndex>& waits, bool probs) {
  const Bytes size = probs ? probs_message_ : message_;
  const auto [it, inserted] = names_.try_emplace({layer_label(site), what}, 0);
  if (inserted) {
    it->second = b.collective_name(CommKind::ep, CollOp::alltoall, size, fmt::format("{} {}", it->first.first, what));
  }
  const OpIndex op = b.collective(CommKind::ep, CollOp::alltoall, size, it->second, waits);
  b.defer_wait(op, WaitRule::next_op, site.cost->role);
  ++all_to_alls_;
  return op;
}

// Megatron-Core's dropless dispatchers size the forward all-to-all from the tokens per
// expert, which the CPU must read: the all-to-all dispatcher copies the counts to the host
// and waits for them before the EP all-to-all (token_dispatcher.py,
// MoEAlltoAllTokenDispatcher.preprocess sets cuda_sync_point "before_ep_alltoall";
// _maybe_dtoh_and_synchronize calls d2h_event.synchronize()); DeepEP's dispatch returns the
// received counts as a Python list, the CPU spinning until the GPU has written them
// (fused_a2a.py, FusedDispatch.forward), and HybridEP's dispatch without a token budget
// waits on its pinned counts (fused_a2a.py, hybrid_ep_dispatch: non_blocking is False when
// num_permuted_tokens is None). So the host stops issuing until the routing and permutation
// before the dispatch have ended on the GPU, and the GPU then waits for the host to issue the
// dispatch and what follows. The backward reuses the split sizes and handles the forward
// kept and does not wait. A layer that CUDA graphs replay has no such read (graphs capture
// only fixed shapes).
void ExpertParallel::wait_for_counts(StepBuilder& b, OpIndex dispatch) {
  engine::Op& op = b.rank().ops()[dispatch];
  op.host_blocks = op.host != BuildState::kReplayed;
}

bool ExpertParallel::into_experts(const OpSite& site) const {
  const Role role = site.cost->role;
  const Pass pass = site.cost->pass;
  if (sorts_) {
    return (role == Role::moe_sort && pass == Pass::forward) || (role == Role::moe_unsort && pass == Pass::backward);
  }
  return (role == Role::expert_fc1 && pass == Pass::forward) ||
         (role == Role::expert_fc2 && pass == Pass::backward_data);
}

bool ExpertParallel::out_of_experts(const OpSite& site) const {
  const Role role = site.cost->role;
  const Pass pass = site.cost->pass;
  if (sorts_) {
    return (role == Role::moe_unsort && pass == Pass::forward) || (role == Role::moe_sort && pass == Pass::backward);
  }
  const Pass sends_input_grad = split_backward_ ? Pass::backward_data : Pass::backward_weight;
  return (role == Role::expert_fc2 && pass == Pass::forward) || (role == Role::expert_fc1 && pass == sends_input_grad);
}

bool ExpertParallel::dispatches_before(const OpSite& site) const {
  return enabled_ && into_experts(site) && site.cost->pass == Pass::forward;
}

bool ExpertParallel::dispatches_after(const OpSite& site) const {
  return enabled_ && out_of_experts(site) && site.cost->pass != Pass::forward;
}

// Forward: the all-to-all, then the ETP AllGather, before the experts; the ETP ReduceScatter,
// then the all-to-all, after them. The backward mirrors both.
void ExpertParallel::before_op(StepBuilder& b, const OpSite& site) {
  if (!enabled_ && !etp_) return;
  if (!into_experts(site)) return;
  const bool forward = site.cost->pass == Pass::forward;
  std::vector<OpIndex> waits = b.last_compute();
  if (enabled_) {
    const OpIndex a2a = all_to_all(b, site, forward ? "dispatch" : "combine backward", waits);
    if (forward) wait_for_counts(b, a2a);
    if (forward && probs_message_.count() > 0) all_to_all(b, site, "dispatch probs", waits, true);
    waits = {a2a};
  }
  // The backward of the forward's ReduceScatter after the experts is this AllGather.
  if (etp_) expert_tp(b, site, CollOp::allgather, forward ? "etp gather" : "etp scatter backward", waits);
  // MoEAlltoAllTokenDispatcher.dispatch_postprocess gathers the copies' probabilities over the
  // ETP group after their tokens (a second gather_from_sequence_parallel_region): the experts'
  // activation weighs by them.
  if (forward && etp_probs_message_.count() > 0) expert_tp(b, site, CollOp::allgather, "etp probs gather", waits, true);
}

void ExpertParallel::after_op(StepBuilder& b, const OpSite& site, OpIndex op) {
  if (counts_message_.count() > 0 && site.cost->role == Role::moe_counts) gather_counts(b, site, op);
  if (!enabled_ && !etp_) return;
  if (!out_of_experts(site)) return;
  const bool forward = site.cost->pass == Pass::forward;
  std::vector<OpIndex> waits{op};
  // The probabilities' gather's backward reduce-scatters their gradient over the ETP group.
  if (!forward && etp_probs_message_.count() > 0)
    expert_tp(b, site, CollOp::reducescatter, "etp probs gather backward", waits, true);
  if (etp_) waits = {expert_tp(b, site, CollOp::reducescatter, forward ? "etp scatter" : "etp gather backward", waits)};
  if (!enabled_) return;
  all_to_all(b, site, forward ? "combine" : "dispatch backward", waits);
  if (!forward && probs_message_.count() > 0) all_to_all(b, site, "dispatch probs backward", waits, true);
}

}  // namespace stepsim::parallelism
