// Context parallelism as Megatron-Core runs it with Transformer Engine's fused attention: the
// sequence is cut into 2·cp chunks and CP rank r keeps chunks r and 2·cp − 1 − r, so every
// rank has the same share of causal attention work. Attention gets the other ranks' keys and
// values either around the CP ring, one block per step overlapped with the attention of the
// block at hand (`p2p`, TE's AttnFuncWithCPAndKVP2P), or gathered before it (`all_gather`, as
// Llama 3 was trained; TE's AttnFuncWithCPAndKVAllGather: an AllGather of K, then one of V).
// PyTorch's context_parallel (training.framework torchtitan, torchtitan-compile and pytorch)
// gathers both in one AllGather and computes the rank's own block while it is in flight, and in
// backward passes the dK/dV around the ring in float32 whichever way the K/V come.
#pragma once

#include "parallelism/split_op.hpp"
#include "parallelism/step_builder.hpp"
#include "stepsim/scenario.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

class ContextParallel {
 public:
  ContextParallel(const Scenario& scenario, const workload::ModelWork& work);

  // Whether this op is the attention core of a transformer layer with cp > 1.
  bool handles(const OpSite& site) const;
  // Issues the attention op with its K/V traffic; returns the last compute op.
  OpIndex issue(StepBuilder& b, const OpSite& site);

  // Steps of the ring (one attention piece each) and one step's K/V message per rank.
  int ring_steps() const { return cp_; }
  Bytes kv_block() const { return kv_block_; }

 private:
  OpIndex ring_forward(StepBuilder& b, const OpSite& site);
  OpIndex te_ring_backward(StepBuilder& b, const OpSite& site);
  OpIndex pytorch_backward(StepBuilder& b, const OpSite& site);
  OpIndex gathered(StepBuilder& b, const OpSite& site);
  std::uint32_t comm_name(StepBuilder& b, CollOp op, Bytes size, const OpSite& site, const char* what);

  int cp_;
  CpComm comm_;
  bool pytorch_;  // PyTorch's context_parallel rather than Transformer Engine's (pytorch_context_parallel)
  int layers_;
  Bytes kv_block_;
  Bytes kv_grad_block_;  // PyTorch's dK/dV message: float32
  PieceNames names_;
  std::map<std::tuple<int, CollOp, std::string>, std::uint32_t> comm_names_;
};

}  // namespace stepsim::parallelism
