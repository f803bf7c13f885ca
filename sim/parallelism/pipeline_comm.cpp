// Megatron's P2P communication as dataflow: a receive is posted early on its own stream and
// the pass's first compute op waits for it; a send waits only for the op producing its data,
// so the sender's compute goes on (Megatron's batched isend/irecv in the steady state orders
// the same transfers; every one of them feeds the peer's next pass either way).
#include "parallelism/pipeline_comm.hpp"

#include <fmt/format.h>

#include "parallelism/grad_buckets.hpp"
#include "stepsim/framework.hpp"
#include "workload/shape.hpp"

namespace stepsim::parallelism {

bool has_pipeline_peer(const ParallelSpec& parallel, int stage, int offset) {
  if (parallel.pp <= 1) return false;
  if (parallel.schedule == Schedule::interleaved) return true;
  const int peer = stage + offset;
  return peer >= 0 && peer < parallel.pp;
}

namespace {

// Under DualPipe the first and the last stage each hold the embedding and the head, so a
// tied embedding's gradient is summed on the GPU (and then with the mirror's copy).
Bytes embedding_grad(const Scenario& s, int stage) {
  if (!s.model.tied_embeddings || s.parallel.pp <= 1 || bidirectional(s.parallel.schedule)) return Bytes{0};
  const ParallelSpec& p = s.parallel;
  const bool holds =
      stage_holds_block(p, s.model.layers, stage, 0) || stage_holds_block(p, s.model.layers, stage, s.model.layers + 1);
  if (!holds) return Bytes{0};
  const long long vocab = workload::weight_shape(s.model, p.tp).vocab;
  return Bytes(vocab * s.model.hidden * element_bytes(s.data_parallel.grad_reduce_dtype));
}

// All of this stage's gradients: its mirror image holds the same two model chunks.
Bytes mirror_grad(const Scenario& s, int stage) {
  if (s.parallel.pp <= 1 || !bidirectional(s.parallel.schedule)) return Bytes{0};
  ParallelSpec p = s.parallel;
  p.stage = stage;
  long long elements = 0;
  for (const GradTensor& t : gradient_tensors(s.model, p)) elements += t.elements;
  return Bytes(elements * element_bytes(s.data_parallel.grad_reduce_dtype));
}

}  // namespace

namespace {

// Megatron-Core's get_tensor_shapes (pipeline_parallel/schedules.py) splits the sequence over TP
// only under sequence parallelism: without it every TP rank holds the whole residual stream and
// sends it whole. torch.distributed.pipelining's PipelineStage sends a stage's output as the
// stage returns it: sharded over TP under sequence parallelism (torchtitan's TP plan always
// shards the sequence, Shard(1) outputs), whole without it (RowwiseParallel's Replicate output).
// Megatron-LM and Megatron-DeepSpeed of 2021-22 (scatter_gather_tensors_in_pipeline, on by
// default) sent 1/tp of it from each TP rank and gathered it again over NVLink on the receiving
// stage, and DeepSpeed's pipeline engine partitions it alike over the model-parallel ranks.
bool sends_whole_stream(const Scenario& s) {
  if (s.parallel.sequence_parallel && s.parallel.tp > 1) return false;
  return traits_of(s.training.framework).megatron_core || pytorch_pipelining(s);
}

}  // namespace

Bytes pipeline_message(const Scenario& scenario) {
  const workload::LayerShape s = workload::layer_shape(scenario);
  // tokens() is already this rank's share of the sequence under context parallelism.
  const long long whole = s.tokens() * s.hidden * s.act_bytes;
  return Bytes(sends_whole_stream(scenario) ? whole : whole / s.tp);
}

// s is model.seq_len: under context parallelism a rank sends its s/cp tokens.
std::string pipeline_message_formula(const Scenario& scenario) {
  const bool cp = scenario.parallel.cp > 1;
  if (scenario.parallel.tp == 1) return cp ? "b·s·h / cp" : "b·s·h";
  if (sends_whole_stream(scenario))
    return cp ? "b·s·h / cp from every TP rank: no sequence parallelism"
              : "b·s·h from every TP rank: no sequence parallelism";
  return cp ? "b·s·h / (cp·tp)" : "b·s·h / tp";
}

PipelineComm::PipelineComm(const Scenario& scenario, const workload::ModelWork&, int stage)
    : stage_(stage),
      stages_(scenario.parallel.pp),
      bidirectional_(bidirectional(scenario.parallel.schedule)),
      last_virtual_(bidirectional_ ? stages_ - 1 : scenario.parallel.pp * scenario.parallel.virtual_stages - 1),
      message_(pipeline_message(scenario)),
      embedding_grad_(embedding_grad(scenario, stage)),
      mirror_grad_(mirror_grad(scenario, stage)) {}

int PipelineComm::virtual_stage(const PipelineOp& op) const {
  if (bidirectional_) return op.chunk == 0 ? stage_ : stages_ - 1 - stage_;
  return op.chunk * stages_ + stage_;
}

std::optional<OpIndex> PipelineComm::receive(StepBuilder& b, const PipelineOp& op) const {
  const int vs = virtual_stage(op);
  if (op.forward ? vs == 0 : vs == last_virtual_) return std::nullopt;
  const bool reverse = direction(op) < 0;
  const PpLink link = op.forward ? (reverse ? PpLink::reverse_forward_in : PpLink::forward_in)
                                 : (reverse ? PpLink::reverse_backward_in : PpLink::backward_in);
  const std::string what = fmt::format("{} from stage {}", op.forward ? "activation" : "gradient",
                                       peer(op.forward ? -direction(op) : direction(op)));
  const OpIndex recv = b.pp_collective(link, CollOp::sendrecv, message_, what, {});
  b.defer_wait(recv, WaitRule::next_op, workload::Role::optimizer);
  return recv;
}

void PipelineComm::send(StepBuilder& b, const PipelineOp& op) const {
  const int vs = virtual_stage(op);
  if (op.forward ? vs == last_virtual_ : vs == 0) return;
  const bool reverse = direction(op) < 0;
  const PpLink link = op.forward ? (reverse ? PpLink::reverse_forward_out : PpLink::forward_out)
                                 : (reverse ? PpLink::reverse_backward_out : PpLink::backward_out);
  const std::string what = fmt::format("{} to stage {}", op.forward ? "activation" : "gradient",
                                       peer(op.forward ? direction(op) : -direction(op)));
  b.pp_collective(link, CollOp::sendrecv, message_, what, b.last_compute());
}

std::vector<OpIndex> PipelineComm::sync_embedding(StepBuilder& b, const std::vector<OpIndex>& waits) const {
  if (embedding_grad_.count() == 0) return {};
  return {b.pp_collective(PpLink::embedding, CollOp::allreduce, embedding_grad_, "embedding grad", waits)};
}

std::vector<OpIndex> PipelineComm::sync_mirror(StepBuilder& b, const std::vector<OpIndex>& waits) const {
  if (mirror_grad_.count() == 0) return {};
  return {b.pp_collective(PpLink::mirror, CollOp::allreduce, mirror_grad_, "mirror stage grads", waits)};
}

}  // namespace stepsim::parallelism
