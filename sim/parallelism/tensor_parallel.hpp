// Megatron tensor parallelism (REFERENCE.md §5): where the TP collectives of a transformer
// layer, the vocab-parallel embedding, LM head and cross-entropy go, and what waits on them.
#pragma once

#include "parallelism/step_builder.hpp"
#include "stepsim/scenario.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

class TensorParallel {
 public:
  TensorParallel(const Scenario& scenario, const workload::ModelWork& work);

  // Around every compute op: the collectives that feed it, and those it feeds.
  void before_op(StepBuilder& b, const OpSite& site) const;
  void after_op(StepBuilder& b, const OpSite& site, OpIndex op) const;
  bool enabled() const { return enabled_; }

 private:
  Bytes message(const OpSite& site) const;
  void issue(StepBuilder& b, const OpSite& site, bool after, std::vector<OpIndex> producer) const;

  bool enabled_;
  bool sequence_parallel_;
  int layers_;
  Bytes layer_message_;
  Bytes pre_message_;
  Bytes post_message_;
  Bytes loss_message_;  // one fp32 per token: the cross-entropy max / sum AllReduces
};

}  // namespace stepsim::parallelism
