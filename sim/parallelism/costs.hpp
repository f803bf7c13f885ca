// What the program builder asks of the cost models: compute durations (hardware) and
// collective latency, bandwidth and link loads (collectives). An interface so that program
// structure can be tested with hand-made costs.
#pragma once

#include "collectives/collective.hpp"
#include "hardware/gpu_model.hpp"
#include "stepsim/scenario.hpp"
#include "stepsim/units.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

struct CollectiveCost {
  Time latency;
  Bandwidth algbw;
  collectives::LinkLoad load;  // link bytes per algorithm byte, per member
};

class Costs {
 public:
  virtual ~Costs() = default;
  virtual Time compute(const workload::OpCost& op) const = 0;
  virtual CollectiveCost collective(const collectives::Request& request) const = 0;
  virtual Time kernel_launch() const = 0;
  virtual double comm_slowdown() const = 0;
};

// The real models: GpuModel for compute, NCCL's cost model for collectives.
class ModelCosts final : public Costs {
 public:
  ModelCosts(const Scenario& scenario, const hardware::GpuModel& gpu);
  Time compute(const workload::OpCost& op) const override;
  CollectiveCost collective(const collectives::Request& request) const override;
  Time kernel_launch() const override;
  double comm_slowdown() const override;

 private:
  const Scenario& scenario_;
  const hardware::GpuModel& gpu_;
};

}  // namespace stepsim::parallelism
