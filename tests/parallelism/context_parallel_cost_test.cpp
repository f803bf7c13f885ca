// The cost of context parallelism's attention kernels: each ring step's kernel costed at its own
// shape, a scenario loaded and its program built on the GPU model.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "hardware/gpu_model.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/costs.hpp"
#include "parallelism/program_builder.hpp"
#include "stepsim/framework.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::engine::Program;

namespace {

// Llama 3 8B on one H100 node, one sequence a micro-batch.
stepsim::Scenario h100_llama(int cp, long long seq, stepsim::Framework framework) {
  const std::vector<std::string> sets{
      "parallel.cp=" + std::to_string(cp), "parallel.dp=" + std::to_string(8 / cp),
      "model.seq_len=" + std::to_string(seq),
      std::string("training.framework=") + std::string(stepsim::traits_of(framework).name)};
  return stepsim::io::load_scenario_text(
      R"({ "model": "llama3-8b", "cluster": { "preset": "dgx-h100-ndr", "nodes": 1 },
           "parallel": { "tp": 1 }, "data_parallel": { "kind": "fsdp" },
           "training": { "global_batch": 64, "micro_batch": 1 } })",
      "s.json", sets);
}

// The duration in µs of rank 0's first compute op named `name`.
double duration_us(const stepsim::Scenario& s, const std::string& name) {
  const stepsim::hardware::GpuModel gpu(s.cluster.gpu, s.training.precision);
  const Program p = sp::build_program(s, stepsim::workload::build_work(s), sp::ModelCosts(s, gpu));
  const long op = spt::find_op(p, name);
  REQUIRE(op >= 0);
  return p.ranks[0].ops()[static_cast<std::size_t>(op)].duration.us();
}

}  // namespace

// A CP rank's s/cp queries meet one rank's s/cp keys a step (its own two chunks causally, then
// a chunk against a block or a block against a chunk): each step's kernel is the attention of a
// job without CP over s/cp tokens, and costs what that kernel costs there, forward and backward
// (whose efficiency on Hopper follows the keys: 408/574 of the forward's at 1,024, 518/600 at
// 8,192).
TEST_CASE("a CP step's attention kernel costs what the same kernel costs without CP") {
  for (const auto framework : {stepsim::Framework::megatron, stepsim::Framework::torchtitan}) {
    INFO(stepsim::traits_of(framework).name);
    const stepsim::Scenario whole = h100_llama(1, 1024, framework);
    const stepsim::Scenario ring = h100_llama(8, 8192, framework);
    for (const std::string pass : {"fwd", "backward"}) {
      INFO(pass);
      const double alone = duration_us(whole, "L0 flash attention " + pass);
      CHECK(duration_us(ring, "L0 flash attention " + pass + " (step 1/8)") == Approx(alone).epsilon(1e-6));
      CHECK(duration_us(ring, "L0 flash attention " + pass + " (step 2/8)") == Approx(alone).epsilon(1e-6));
    }
  }
}
