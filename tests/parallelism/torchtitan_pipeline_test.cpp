// torchtitan's pipelines as its defaults run them: what crosses a stage boundary, sent and held
// in PipelineStage's receive buffers alike, and FSDP's AllGathers under its pipeline policy,
// counted by hand.
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/program.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/pipeline_comm.hpp"
#include "parallelism/program_builder.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::Bytes;

namespace {

// Llama 3 8B (32 layers, hidden 4,096, sequences of 8,192) under torchtitan: TP 8, 4 stages of
// 8 layers, FSDP2 over 2 ranks, 16 micro-batches of one sequence per replica.
stepsim::Scenario titan_pipeline(const std::vector<std::string>& sets = {}) {
  const std::string text = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr",
    "parallel": { "tp": 8, "pp": 4, "dp": 2 },
    "training": { "framework": "torchtitan", "global_batch": 32, "micro_batch": 1 },
    "data_parallel": { "kind": "fsdp", "fsdp_version": 2 } })";
  return stepsim::io::load_scenario_text(text, "titan.json", sets);
}

// One sequence's residual stream over TP 8 in bf16: 8,192 · 4,096 · 2 / 8 bytes, 8 MiB.
constexpr long long kTitanMessage = 8192LL * 4096 * 2 / 8;

int fsdp_gathers(const stepsim::engine::Program& p, std::size_t r, const std::string& prefix) {
  const auto names = spt::op_names(p, r);
  return static_cast<int>(
      std::count_if(names.begin(), names.end(), [&](const std::string& n) { return n.rfind(prefix, 0) == 0; }));
}

}  // namespace

// torchtitan's TP shards the sequence, so a stage sends b·s·h/tp; PipelineStage allocates a
// receive buffer per micro-batch for each boundary a stage receives across (activations in,
// gradients in), each as large as what is sent into it: 16 · 8 MiB per boundary, one on the
// outer stages and two on the middle ones. Sequence parallelism once stood at its default
// (false) under torchtitan: the buffers were b·s·h whole, 8 times what was sent into them.
TEST_CASE("torchtitan's pipeline receive buffers hold what each transfer sends into them") {
  const stepsim::Scenario s = titan_pipeline();
  CHECK(sp::pipeline_message(s) == Bytes(kTitanMessage));
  const long long m = 16;
  CHECK(sp::pipeline_buffers(s, 0) == Bytes(m * kTitanMessage));
  CHECK(sp::pipeline_buffers(s, 1) == Bytes(2 * m * kTitanMessage));
  CHECK(sp::pipeline_buffers(s, 2) == Bytes(2 * m * kTitanMessage));
  CHECK(sp::pipeline_buffers(s, 3) == Bytes(m * kTitanMessage));
}

// Eager PyTorch's TP without sequence parallelism (RowwiseParallel's replicated output): each TP
// rank's stage returns, sends and receives the whole b·s·h; with it, 1/tp.
TEST_CASE("PyTorch's pipeline sends and buffers the whole residual stream without sequence parallelism") {
  const std::string text = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr",
    "parallel": { "tp": 8, "pp": 4, "dp": 2 },
    "training": { "framework": "pytorch", "global_batch": 32, "micro_batch": 1 },
    "data_parallel": { "kind": "fsdp", "fsdp_version": 2 } })";
  const stepsim::Scenario whole = stepsim::io::load_scenario_text(text, "s.json");
  CHECK(sp::pipeline_message(whole) == Bytes(8 * kTitanMessage));
  CHECK(sp::pipeline_buffers(whole, 1) == Bytes(2 * 16 * 8 * kTitanMessage));
  const stepsim::Scenario sharded =
      stepsim::io::load_scenario_text(text, "s.json", {"parallel.sequence_parallel=true"});
  CHECK(sp::pipeline_message(sharded) == Bytes(kTitanMessage));
  CHECK(sp::pipeline_buffers(sharded, 1) == Bytes(2 * 16 * kTitanMessage));
}

// torchtitan's apply_fsdp under a pipeline: reshard_after_forward false, so each of a middle
// stage's 8 layers is gathered once a step (micro-batch 0's forward) and kept; PyTorch's
// schedule leaves the weights gathered between backwards (set_reshard_after_backward(False)
// until the last). Resharding after each forward (given true) gathers a layer before each of
// the 16 forwards that follows a forward or starts the step, and before each backward that
// follows a forward: stage 1 of 4 under 1F1B warms up 2 forwards, F0 F1 F2 then B0 F3 B1 ...,
// so F0, F1, F2 and the 14 steady backwards after a forward: 17 = m + 1 per layer.
TEST_CASE("torchtitan's FSDP gathers each layer of a pipeline stage once a step by default") {
  const spt::FixedCosts costs;
  const auto gathers = [&](const stepsim::Scenario& s) {
    const auto program = sp::build_program(s, stepsim::workload::build_work(s), costs);
    return fsdp_gathers(program, 1, "AllGather fsdp");
  };
  CHECK(gathers(titan_pipeline()) == 8);
  CHECK(gathers(titan_pipeline({"data_parallel.reshard_after_forward=true"})) == 8 * 17);
}
