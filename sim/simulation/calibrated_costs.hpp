// The cost models with calibration files applied: measured compute and collective tables
// consulted before the model, and a tally of which costs were measured for the report.
#pragma once

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "calibration/apply.hpp"
#include "parallelism/costs.hpp"
#include "stepsim/report.hpp"

namespace stepsim {

class CalibratedCosts final : public parallelism::Costs {
 public:
  CalibratedCosts(const Scenario& scenario, const hardware::GpuModel& gpu, const calibration::MeasuredTables& tables);
  Time compute(const workload::OpCost& op) const override;
  parallelism::CollectiveCost collective(const collectives::Request& request) const override;
  // What was measured on healthy links, slowed as much as NCCL's model slows on the degraded ones.
  parallelism::CollectiveCost degraded_collective(const collectives::Request& request,
                                                  const parallelism::LinkShares& shares) const override;
  Time kernel_launch() const override { return model_.kernel_launch(); }
  std::optional<Time> dispatch() const override;
  double comm_slowdown() const override { return model_.comm_slowdown(); }
  bool memory_bound(const workload::OpCost& op) const override { return model_.memory_bound(op); }
  bool derived_slowdown() const override { return model_.derived_slowdown(); }

  // Fills `report.calibration` from the tally, the simulated timeline and the GPU figures the
  // files set (`values`: in force where the job's costs use them, else unused), with a note.
  void summarise(const Timeline& timeline, Report& report, std::vector<CalibratedValue> values) const;

 private:
  // op, size, the communicator's shape (ranks, NVLink domains, ranks in each: two groups of as
  // many ranks may be measured apart, one inside a node and one across) and what communicates
  // (its element type decides the table)
  using CollKey = std::tuple<CollOp, std::int64_t, int, int, int, CommKind>;
  const Scenario& scenario_;
  const hardware::GpuModel& gpu_;
  const calibration::MeasuredTables& tables_;
  parallelism::ModelCosts model_;
  mutable double compute_total_us_ = 0, compute_measured_us_ = 0;
  mutable std::map<CollKey, calibration::Source> collectives_;
  mutable std::set<std::string> measured_;
  mutable std::set<std::string> not_measured_;  // what the model alone answered
  // The GPU figures (CalibratedValue keys) the model consulted for the costs it answered.
  mutable std::set<std::string> consulted_;
};

// The calibration files a scenario names, read and checked against its GPU.
calibration::MeasuredTables load_calibration(const Scenario& scenario);

}  // namespace stepsim
