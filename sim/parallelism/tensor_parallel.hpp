// Megatron tensor parallelism (Shoeybi et al. 2019; Korthikanti et al. 2022): where the TP collectives of a transformer
// layer, the vocab-parallel embedding, LM head and cross-entropy go, and what waits on them.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "parallelism/split_op.hpp"
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

  // With tensor_parallel.comm_overlap (tensor_parallel_overlap.cpp): whether this GEMM runs
  // in pieces pipelined with its AllGather or ReduceScatter, and issuing it so.
  bool pipelines(const OpSite& site) const;
  OpIndex issue_pipelined(StepBuilder& b, const OpSite& site);
  // The pieces of a GEMM pipelined with a ring AllGather (one per TP rank), and of one
  // pipelined with a ReduceScatter (Transformer Engine's default split).
  int ring_pieces() const { return tp_; }
  static constexpr int kReduceScatterPieces = 4;
  // How much longer a GEMM piece takes on the SMs the ReduceScatter leaves it.
  double reduce_scatter_work_scale() const;

 private:
  // A collective's name follows from the rule, the block and the op (not the micro-batch).
  using NameKey = std::tuple<std::size_t, int, const workload::OpCost*>;

  Bytes message(const OpSite& site) const;
  Bytes message(const OpSite& site, std::size_t rule) const;
  Bytes gathered(const OpSite& site, std::size_t rule) const;
  Bytes quantized(const OpSite& site, Bytes whole) const;
  bool has_rule(const OpSite& site, bool after) const;
  void issue(StepBuilder& b, const OpSite& site, bool after, const std::vector<OpIndex>& producer);
  std::uint32_t name(StepBuilder& b, std::size_t rule, const OpSite& site);
  OpIndex ring_gathered(StepBuilder& b, const OpSite& site);
  OpIndex split_reduced(StepBuilder& b, const OpSite& site);
  CollectiveCost ring_step_cost() const;
  CollectiveCost reduce_scatter_cost() const;
  std::uint32_t overlap_name(StepBuilder& b, const OpSite& site, CollOp op, Bytes size, const char* what);

  bool enabled_;
  bool overlap_;
  int tp_;
  int sms_;
  Time nvlink_latency_;
  Bandwidth nvlink_;
  bool sequence_parallel_;
  int layers_;
  Bytes layer_message_;
  Bytes pre_message_;
  Bytes post_message_;
  Bytes loss_message_;  // one fp32 per token: the cross-entropy max / sum AllReduces
  Bytes rope_message_;  // latent attention's shared rotary key of b·s tokens
  bool latent_attention_;
  int act_bytes_;  // one activation element: the latents' and MTP's gathers
  unsigned impls_;  // the implementations whose rows apply (Impl in tensor_parallel.cpp), one bit each
  // Bytes of one element of a low-precision GEMM's operand gathered before it, over act_bytes_
  // (1 where the gathers stay BF16); which gathers are quantized: quantizes_*.
  double quantized_share_ = 1.0;
  bool quantizes_inputs_ = false;      // the column-parallel GEMMs' inputs, forward
  bool quantizes_backward_ = false;    // their inputs re-gathered for wgrad, the row-parallel output gradients
  std::map<NameKey, std::uint32_t> names_;
  PieceNames pieces_;
  std::map<std::tuple<int, const workload::OpCost*, CollOp>, std::uint32_t> overlap_names_;
};

}  // namespace stepsim::parallelism
