// Megatron's P2P communication as dataflow: a receive is posted early on its own stream and
// the pass's first compute op waits for it; a send waits only for the op producing its data,
// so the sender's compute goes on (Megatron's batched isend/irecv in the steady state orders
// the same transfers; every one of them feeds the peer's next pass either way).
#include "parallelism/pipeline_comm.hpp"

#include <fmt/format.h>

#include "workload/shape.hpp"

namespace stepsim::parallelism {

bool has_pipeline_peer(const ParallelSpec& parallel, int stage, int offset) {
  if (parallel.pp <= 1) return false;
  if (parallel.schedule == Schedule::interleaved) return true;
  const int peer = stage + offset;
  return peer >= 0 && peer < parallel.pp;
}

namespace {

Bytes embedding_grad(const Scenario& s, int stage) {
  if (!s.model.tied_embeddings || s.parallel.pp <= 1) return Bytes{0};
  const ParallelSpec& p = s.parallel;
  const bool holds =
      stage_holds_block(p, s.model.layers, stage, 0) || stage_holds_block(p, s.model.layers, stage, s.model.layers + 1);
  if (!holds) return Bytes{0};
  const long long vocab = workload::weight_shape(s.model, p.tp).vocab;
  return Bytes(vocab * s.model.hidden * element_bytes(s.data_parallel.grad_reduce_dtype));
}

}  // namespace

Bytes pipeline_message(const Scenario& scenario) {
  const workload::LayerShape s = workload::layer_shape(scenario);
  return Bytes(s.tokens() * s.hidden * s.act_bytes / s.tp / scenario.parallel.cp);
}

PipelineComm::PipelineComm(const Scenario& scenario, const workload::ModelWork&, int stage)
    : stage_(stage),
      stages_(scenario.parallel.pp),
      last_virtual_(scenario.parallel.pp * scenario.parallel.virtual_stages - 1),
      message_(pipeline_message(scenario)),
      embedding_grad_(embedding_grad(scenario, stage)) {}

void PipelineComm::receive(StepBuilder& b, const PipelineOp& op) const {
  const int vs = virtual_stage(op);
  if (op.forward ? vs == 0 : vs == last_virtual_) return;
  const PpLink link = op.forward ? PpLink::forward_in : PpLink::backward_in;
  const std::string what =
      fmt::format("{} from stage {}", op.forward ? "activation" : "gradient", peer(op.forward ? -1 : 1));
  const OpIndex recv = b.pp_collective(link, CollOp::sendrecv, message_, what, {});
  b.defer_wait(recv, WaitRule::next_op, workload::Role::optimizer);
}

void PipelineComm::send(StepBuilder& b, const PipelineOp& op) const {
  const int vs = virtual_stage(op);
  if (op.forward ? vs == last_virtual_ : vs == 0) return;
  const PpLink link = op.forward ? PpLink::forward_out : PpLink::backward_out;
  const std::string what =
      fmt::format("{} to stage {}", op.forward ? "activation" : "gradient", peer(op.forward ? 1 : -1));
  b.pp_collective(link, CollOp::sendrecv, message_, what, b.last_compute());
}

std::vector<OpIndex> PipelineComm::sync_embedding(StepBuilder& b, const std::vector<OpIndex>& waits) const {
  if (embedding_grad_.count() == 0) return {};
  return {b.pp_collective(PpLink::embedding, CollOp::allreduce, embedding_grad_, "embedding grad", waits)};
}

}  // namespace stepsim::parallelism
