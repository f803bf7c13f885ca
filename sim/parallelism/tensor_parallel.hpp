// Megatron tensor parallelism (Shoeybi et al. 2019; Korthikanti et al. 2022): where the TP collectives of a transformer
// layer, the vocab-parallel embedding, LM head and cross-entropy go, and what waits on them.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "parallelism/step_builder.hpp"
#include "stepsim/scenario.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

class TensorParallel {
 public:
  TensorParallel(const Scenario& scenario, const workload::ModelWork& work);

  // Around every compute op: the collectives that feed it, and those it feeds.
  void before_op(StepBuilder& b, const OpSite& site);
  void after_op(StepBuilder& b, const OpSite& site, OpIndex op);
  bool enabled() const { return enabled_; }

 private:
  // A collective's name follows from the rule, the block and the op (not the micro-batch).
  using NameKey = std::tuple<std::size_t, int, const workload::OpCost*>;

  Bytes message(const OpSite& site) const;
  bool has_rule(const OpSite& site, bool after) const;
  void issue(StepBuilder& b, const OpSite& site, bool after, const std::vector<OpIndex>& producer);
  std::uint32_t name(StepBuilder& b, std::size_t rule, const OpSite& site);

  bool enabled_;
  bool sequence_parallel_;
  int layers_;
  Bytes layer_message_;
  Bytes pre_message_;
  Bytes post_message_;
  Bytes loss_message_;  // one fp32 per token: the cross-entropy max / sum AllReduces
  std::map<NameKey, std::uint32_t> names_;
};

}  // namespace stepsim::parallelism
