// fp16 mixed precision's dynamic loss scaling in the step: each framework's overflow check of
// the gradients, the all-reduces of its flag and the host's read of it before the optimizer.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cli/simulate_support.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"
#include "workload/work.hpp"

namespace {

stepsim::Scenario gpt3_small(const std::vector<std::string>& sets) {
  return stepsim::io::load_scenario_text(stepsim::test::kEagerGpt3Small, "small.json", sets);
}

// Rank 0's compute ops after the backward, by name, in the order they ran.
std::vector<std::string> step_end_ops(const stepsim::SimulationResult& r) {
  std::vector<std::string> out;
  for (const auto& i : r.timeline.ranks.front().intervals)
    if (i.activity == stepsim::Activity::compute && i.phase == stepsim::Phase::optimizer)
      out.push_back(r.timeline.names[i.name]);
  return out;
}

}  // namespace

TEST_CASE("Megatron's fp16 step adds the unscale pass over the main gradients and one more wait for the host") {
  const stepsim::Scenario bf16 = gpt3_small({"training.framework=megatron"});
  const stepsim::Scenario fp16 = gpt3_small({"training.framework=megatron", "training.precision=fp16"});
  const stepsim::SimulationResult a = stepsim::simulate(bf16);
  const stepsim::SimulationResult b = stepsim::simulate(fp16);
  // By hand: tp = pp = 1 under DDP, so the model-parallel group that found_inf is all-reduced
  // over is the rank alone, and no all-reduce runs. _amp_foreach_non_finite_check_and_unscale_
  // reads and writes every fp32 main gradient of the rank's P parameters (8 B each) at the
  // H100's HBM bandwidth times its efficiency; then found_inf.item() makes the host wait for
  // it before it issues the gradient norm, whose .item() (the wait bf16 has too) comes after:
  // one more issue of one operator after a wait, the H100 preset's 5 us launch and Megatron's
  // 12 us dispatch. The norm's pass moves out of the step, the step's time staying the same.
  const double params = static_cast<double>(stepsim::workload::build_work(fp16).optimizer_params);
  const double hbm = fp16.cluster.gpu.memory_bandwidth.bytes_per_s() * fp16.cluster.gpu.efficiency.hbm;
  const double unscale_s = 8.0 * params / hbm;
  CHECK(b.report.step_time_s - a.report.step_time_s == Approx(unscale_s + 17e-6).epsilon(1e-4));
  CHECK(b.report.breakdown_s.optimizer - a.report.breakdown_s.optimizer == Approx(unscale_s).epsilon(1e-4));
  CHECK(step_end_ops(b) == std::vector<std::string>{"unscale and check gradients", "gradient norm", "optimizer step"});
  // The loss scale's state (a scale, a growth tracker, a float found_inf) takes no memory
  // worth counting.
  CHECK(b.report.memory_bytes.peak == a.report.memory_bytes.peak);
}

TEST_CASE("Megatron's distributed optimizer all-reduces found_inf over every rank, the model-parallel group else") {
  const auto zero1 = stepsim::simulate(
      gpt3_small({"training.framework=megatron", "training.precision=fp16", "data_parallel.kind=zero1"}));
  CHECK(step_end_ops(zero1) == std::vector<std::string>{"unscale and check gradients",
                                                        "overflow flag all-reduce (all ranks, 8 ranks)",
                                                        "gradient norm", "optimizer step"});
  const auto tp2 = stepsim::simulate(gpt3_small(
      {"training.framework=megatron", "training.precision=fp16", "parallel.tp=2", "parallel.dp=4", "parallel.pp=1"}));
  CHECK(step_end_ops(tp2) == std::vector<std::string>{"unscale and check gradients",
                                                      "overflow flag all-reduce (model-parallel, 2 ranks)",
                                                      "gradient norm", "optimizer step"});
}

TEST_CASE("GradScaler reduces found_inf only under FSDP, DeepSpeed over the data-parallel group of ZeRO-2") {
  const auto ddp = stepsim::simulate(gpt3_small({"training.precision=fp16"}));
  CHECK(step_end_ops(ddp) == std::vector<std::string>{"unscale and check gradients", "optimizer step"});
  const auto fsdp = stepsim::simulate(gpt3_small({"training.precision=fp16", "data_parallel.kind=fsdp"}));
  CHECK(step_end_ops(fsdp) == std::vector<std::string>{"unscale and check gradients",
                                                       "overflow flag all-reduce (all ranks, 8 ranks)",
                                                       "optimizer step"});
  const auto zero2 = stepsim::simulate(
      gpt3_small({"training.framework=deepspeed", "training.precision=fp16", "data_parallel.kind=zero2"}));
  CHECK(step_end_ops(zero2) == std::vector<std::string>{"check gradients for overflow",
                                                        "overflow flag all-reduce (data-parallel, 8 ranks)",
                                                        "optimizer step"});
}

TEST_CASE("torchtitan scales no loss: its fp16 step costs what its bf16 step does") {
  // torchtitan's train_step clips and steps the optimizers with no GradScaler.
  const auto a = stepsim::simulate(gpt3_small({"training.framework=torchtitan"}));
  const auto b = stepsim::simulate(gpt3_small({"training.framework=torchtitan", "training.precision=fp16"}));
  CHECK(b.report.breakdown_s.optimizer == a.report.breakdown_s.optimizer);
  CHECK(b.report.host.cpu_issue_s == a.report.host.cpu_issue_s);
}
