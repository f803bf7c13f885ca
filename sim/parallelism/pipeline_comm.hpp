// Pipeline-parallel communication of one stage: activations forward and gradients backward as
// SendRecv between adjacent stages, and the tied embedding's gradient AllReduce.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "parallelism/pipeline_schedule.hpp"
#include "parallelism/stage_layout.hpp"
#include "parallelism/step_builder.hpp"
#include "stepsim/scenario.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

// What crosses a stage boundary, the SendRecv message: one micro-batch's b·s·h activations in
// the activation precision (bf16 under fp8 training), split over CP (each CP rank holds s/cp of
// the sequence) and over TP, which under Megatron-Core (training.framework megatron, nemo) and
// under PyTorch's pipelining (torchtitan, whose TP always runs sequence parallelism) only
// sequence parallelism splits: without it each TP rank holds the whole residual stream and
// sends it whole (get_tensor_shapes; PipelineStage sends the stage's output as it is).
// Elsewhere 1/tp: Megatron-LM's scatter/gather of the replicated tensor, DeepSpeed's
// partitioned activations. The program, the receive buffers and outputs PyTorch's stages keep
// (memory_activations) and the report notes all take it from here, and its formula in words
// ("b·s·h / tp").
Bytes pipeline_message(const Scenario& scenario);
std::string pipeline_message_formula(const Scenario& scenario);

class PipelineComm {
 public:
  PipelineComm(const Scenario& scenario, const workload::ModelWork& work, int stage);

  // Before a pass: the receive its first compute op waits for, if the pass has a sender.
  std::optional<OpIndex> receive(StepBuilder& b, const PipelineOp& op) const;
  // After a pass: the send of its output, waiting for the pass's last compute op.
  void send(StepBuilder& b, const PipelineOp& op) const;
  // Tied embeddings split over the first and the last stage: the AllReduce of the word
  // embedding's gradient, after `waits` (the stage's last backward and the DP gradient sync);
  // nothing elsewhere.
  std::vector<OpIndex> sync_embedding(StepBuilder& b, const std::vector<OpIndex>& waits) const;
  // DualPipe: stage i and stage p − 1 − i hold the same two model chunks; the AllReduce that
  // sums the gradients of both copies, after `waits` (as sync_embedding's); nothing under other
  // schedules.
  std::vector<OpIndex> sync_mirror(StepBuilder& b, const std::vector<OpIndex>& waits) const;

  // The SendRecv message (pipeline_message).
  Bytes message() const { return message_; }

 private:
  int virtual_stage(const PipelineOp& op) const;
  // Which way a pass's data flows: +1 to the next stage, −1 for DualPipe's reverse chunk.
  int direction(const PipelineOp& op) const { return bidirectional_ && op.chunk == 1 ? -1 : 1; }
  int peer(int offset) const { return ((stage_ + offset) % stages_ + stages_) % stages_; }

  int stage_;
  int stages_;
  bool bidirectional_;
  int last_virtual_;
  Bytes message_;
  Bytes embedding_grad_;  // 0 unless this stage holds one copy of a tied embedding
  Bytes mirror_grad_;     // 0 unless the schedule keeps two copies of each stage
};

// The pipeline peers of a stage: the stage before (-1) or after (+1), wrapping around only
// for the interleaved schedule, whose chunks pass from the last stage back to the first.
bool has_pipeline_peer(const ParallelSpec& parallel, int stage, int offset);

}  // namespace stepsim::parallelism
