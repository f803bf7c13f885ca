// Hand-made inputs for the parallelism tests: a small GPT scenario, its work as the
// workload layer lays it out, and costs that need no hardware or NCCL model.
#pragma once

#include <string>
#include <vector>

#include "engine/program.hpp"
#include "parallelism/costs.hpp"
#include "stepsim/scenario.hpp"
#include "stepsim/timeline.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism::test {

// 1 µs per compute op; every collective 10 µs + size at 100 GB/s on the NVLink port.
class FixedCosts final : public Costs {
 public:
  Time compute(const workload::OpCost&) const override { return Time::from_us(1.0); }
  CollectiveCost collective(const collectives::Request&) const override {
    return {Time::from_us(10.0), Bandwidth::gbytes_per_s(100.0), {1.0, 0.0}};
  }
  Time kernel_launch() const override { return Time::from_us(5.0); }
  double comm_slowdown() const override { return 0.1; }
};

// Each transformer layer's forward, input-gradient and weight-gradient work take `f`, `b` and
// `w` µs, spread evenly over its ops; the embedding, the head and the optimizer free,
// communication free: the schedules' own pass arithmetic.
class PassCosts final : public Costs {
 public:
  PassCosts(const workload::LayerWork& layer, double f, double b, double w);
  Time compute(const workload::OpCost& op) const override;
  CollectiveCost collective(const collectives::Request&) const override {
    return {Time::zero(), Bandwidth::gbytes_per_s(1e12), {0.0, 0.0}};
  }
  Time kernel_launch() const override { return Time::zero(); }
  double comm_slowdown() const override { return 0.0; }

 private:
  double f_, b_, w_;
  int forward_ = 0, input_ = 0, weight_ = 0;
};

// GPT with 2 layers, hidden 1024, 16 heads, ffn 4096, vocab 32000, sequence 2048, GELU,
// untied embeddings, on 8-GPU nodes; micro_batches of one sequence.
Scenario small_scenario(int tp, int dp, int micro_batches);

// small_scenario with `p` stages of one layer each under `schedule`, `m` micro-batches.
Scenario pipeline_scenario(Schedule schedule, int p, int m);
// Qi et al.'s uniform stages: four layers a stage and a head small beside them (the last
// stage keeps its head's logits on top, under 1F1B as under ZB-H1).
Scenario uniform_pipeline_scenario(Schedule schedule, int p, int m);

// The work of one micro-batch of `scenario`: Megatron's op order, GEMM dgrad before wgrad.
workload::ModelWork small_work(const Scenario& scenario);

// Op names of rank `r`, in issue order.
std::vector<std::string> op_names(const engine::Program& program, std::size_t r = 0);
// Indices of the collectives of `kind` on rank `r`.
std::vector<engine::OpIndex> collectives_of(const engine::Program& program, CommKind kind, std::size_t r = 0);
// Index of the first op whose name is `name` at or after `from`; -1 if none.
long find_op(const engine::Program& program, const std::string& name, std::size_t from = 0);

// The largest stage bubble of a run, in µs: a rank's span from its first to its last compute
// op (the optimizer left out) minus its compute time.
double largest_bubble_us(const Timeline& timeline);

}  // namespace stepsim::parallelism::test
