// What the program builder asks of the cost models: compute durations (hardware) and
// collective latency, bandwidth and link loads (collectives). An interface so that program
// structure can be tested with hand-made costs.
#pragma once

#include <optional>

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
  // What one member's NCCL kernel takes of its GPU: its channels' SMs (one thread block each)
  // over the GPU's SMs, and the HBM bandwidth its link bytes use over the GPU's.
  double sm_share = 0;
  double hbm_share = 0;
};

// `cost` with the shares of `gpu` that `choice`'s kernel takes (see CollectiveCost).
CollectiveCost with_gpu_shares(CollectiveCost cost, const GpuSpec& gpu, const collectives::Request& request,
                               const collectives::Choice& choice);

// The share of its bandwidth that a communicator's slowest NVLink port and slowest NIC carry
// (simulation.variation; above 1 for faster links): NCCL builds its rings and trees on the
// links it finds, so a group whose links all run at one factor runs as on a cluster with that
// bandwidth. Likewise the NICs it finds: NCCL searches its graphs at init on each node's
// working NICs and its ranks keep the fewest channels any of them found, so a group with a
// node short of NICs runs as on a cluster whose nodes all have that node's NICs.
struct LinkShares {
  double nvlink = 1;
  double nic = 1;
  int nics = 0;  // the working NICs of the group's node with the fewest; 0: every node's

  bool whole() const { return nvlink == 1 && nic == 1 && nics == 0; }
  bool operator==(const LinkShares&) const = default;
};

// `cluster` with its NVLink and NIC bandwidth scaled by `shares`, and its nodes' NICs those
// of `shares` where it names them.
ClusterSpec with_shares(const ClusterSpec& cluster, const LinkShares& shares);

class Costs {
 public:
  virtual ~Costs() = default;
  virtual Time compute(const workload::OpCost& op) const = 0;
  virtual CollectiveCost collective(const collectives::Request& request) const = 0;
  // The same on links that carry only `shares` of their bandwidth; by default the cost at
  // full bandwidth with its bandwidth scaled by the smaller share (the NICs a node has left
  // are the model's to cost: ModelCosts).
  virtual CollectiveCost degraded_collective(const collectives::Request& request, const LinkShares& shares) const;
  virtual Time kernel_launch() const = 0;
  // The CPU's dispatch per operator beside its launch where a calibration file measured it;
  // none: training.framework's own.
  virtual std::optional<Time> dispatch() const { return std::nullopt; }
  virtual double comm_slowdown() const = 0;
  // Whether HBM bandwidth bounds `op` rather than the SMs: what an NCCL kernel beside it takes
  // of the one or the other slows it (GpuEfficiency::derived_comm_slowdown).
  virtual bool memory_bound(const workload::OpCost& /*op*/) const { return false; }
  // Whether compute slows by those shares rather than by comm_slowdown.
  virtual bool derived_slowdown() const { return false; }
};

// The real models: GpuModel for compute, NCCL's cost model for collectives.
class ModelCosts final : public Costs {
 public:
  ModelCosts(const Scenario& scenario, const hardware::GpuModel& gpu);
  Time compute(const workload::OpCost& op) const override;
  CollectiveCost collective(const collectives::Request& request) const override;
  CollectiveCost degraded_collective(const collectives::Request& request, const LinkShares& shares) const override;
  Time kernel_launch() const override;
  double comm_slowdown() const override;
  bool memory_bound(const workload::OpCost& op) const override;
  bool derived_slowdown() const override;

 private:
  const Scenario& scenario_;
  const hardware::GpuModel& gpu_;
};

}  // namespace stepsim::parallelism
