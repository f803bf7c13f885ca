// Expert parallelism as Megatron-Core's token dispatchers run it: the routed copies of this
// GPU's tokens go to the EP ranks that hold their experts before the expert GEMMs (dispatch)
// and come back after them (combine), gathered over and scattered back to the ETP group around
// the experts when they are split by expert tensor parallelism (the all-to-all dispatcher; the
// flex dispatcher sends them to every ETP rank instead); the backward mirrors both.
#pragma once

#include <map>
#include <string>

#include "parallelism/step_builder.hpp"
#include "stepsim/scenario.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

class ExpertParallel {
 public:
  // The all-to-alls of pipeline stage `stage` (the flex dispatcher's share depends on where the
  // stage's EP groups lie).
  ExpertParallel(const Scenario& scenario, const workload::ModelWork& work, int stage);

  // Around every compute op: the all-to-alls that feed the expert GEMMs and those they feed.
  void before_op(StepBuilder& b, const OpSite& site);
  void after_op(StepBuilder& b, const OpSite& site, OpIndex op);

  // Whether the communication before (after) the op at `site` issues an EP dispatch all-to-all:
  // the forward dispatch (its backward, the tokens' input gradient going home).
  bool dispatches_before(const OpSite& site) const;
  bool dispatches_after(const OpSite& site) const;
  // Whether the communication before (after) the op at `site` issues any EP all-to-all.
  bool all_to_all_before(const OpSite& site) const { return enabled_ && into_experts(site); }
  bool all_to_all_after(const OpSite& site) const { return enabled_ && out_of_experts(site); }
  // The EP all-to-alls issued so far.
  long long all_to_alls() const { return all_to_alls_; }

  // One all-to-all's S: the routed tokens the busiest EP rank receives, b·s/(cp·tp)·top_k·h
  // elements times the imbalance (capped by the capacity factor), times etp where the flex
  // dispatcher sends each to every ETP rank of its experts (dispatches_over_block), times the
  // flex dispatcher's share (flex_share).
  Bytes message() const { return message_; }

 private:
  bool into_experts(const OpSite& site) const;
  bool out_of_experts(const OpSite& site) const;
  // The tokens' all-to-all, or (probs) the all-to-all dispatcher's of their probabilities.
  OpIndex all_to_all(StepBuilder& b, const OpSite& site, const char* what, const std::vector<OpIndex>& waits,
                     bool probs = false);
  // The host waits for the forward dispatch's waits before issuing it: the CPU reads the
  // tokens per expert there.
  static void wait_for_counts(StepBuilder& b, OpIndex dispatch);
  // The EP group's AllGather of the tokens per expert after the dispatcher counts them (op
  // `counted`), which the permutation after it waits for.
  void gather_counts(StepBuilder& b, const OpSite& site, OpIndex counted);
  // Expert tensor parallelism's AllGather or ReduceScatter of the ETP group's tokens.
  OpIndex expert_tp(StepBuilder& b, const OpSite& site, CollOp op, const char* what, const std::vector<OpIndex>& waits,
                    bool probs = false);

  bool enabled_;
  bool etp_;  // etp > 1: the ETP group gathers the tokens before the experts and scatters after
  // Under a split backward the tokens' input gradient leaves after expert fc1's dgrad, in the
  // B pass, not after the wgrad the W pass runs later.
  bool split_backward_;
  // The all-to-all dispatcher's chunk sorts (workload::Role::moe_sort, moe_unsort) stand
  // between the all-to-alls and the experts.
  bool sorts_;
  Bytes message_;
  Bytes etp_message_;
  Bytes etp_probs_message_;  // the ETP group's probabilities gathered; zero where none are
  Bytes probs_message_;  // the probabilities' all-to-all's S; zero where none is sent
  // The tokens-per-expert AllGather's S, E int64 from each EP rank; zero where the dispatcher
  // does not gather them (workload::Role::moe_counts).
  Bytes counts_message_;
  long long all_to_alls_ = 0;
  std::map<std::pair<std::string, std::string>, std::uint32_t> names_;  // by layer label and what
};

}  // namespace stepsim::parallelism
