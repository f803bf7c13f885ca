// The real cost models behind the Costs interface, and the program built with them.
#include "parallelism/costs.hpp"
#include "parallelism/program_builder.hpp"

#include <algorithm>

namespace stepsim::parallelism {

ClusterSpec with_shares(const ClusterSpec& cluster, const LinkShares& shares) {
  ClusterSpec out = cluster;
  out.intra_node.bandwidth = cluster.intra_node.bandwidth.scaled(shares.nvlink);
  out.inter_node.nic_bandwidth = cluster.inter_node.nic_bandwidth.scaled(shares.nic);
  return out;
}

CollectiveCost Costs::degraded_collective(const collectives::Request& request, const LinkShares& shares) const {
  CollectiveCost cost = collective(request);
  cost.algbw = cost.algbw.scaled(std::min(shares.nvlink, shares.nic));
  return cost;
}

ModelCosts::ModelCosts(const Scenario& scenario, const hardware::GpuModel& gpu) : scenario_(scenario), gpu_(gpu) {}

Time ModelCosts::compute(const workload::OpCost& op) const { return gpu_.duration(op); }

CollectiveCost ModelCosts::collective(const collectives::Request& request) const {
  const collectives::Choice choice = collectives::predict(scenario_.cluster, scenario_.collectives, request);
  return {choice.latency, choice.algbw, collectives::link_load(request, choice)};
}

CollectiveCost ModelCosts::degraded_collective(const collectives::Request& request, const LinkShares& shares) const {
  const collectives::Choice choice =
      collectives::predict(with_shares(scenario_.cluster, shares), scenario_.collectives, request);
  return {choice.latency, choice.algbw, collectives::link_load(request, choice)};
}

Time ModelCosts::kernel_launch() const { return gpu_.kernel_launch(); }

double ModelCosts::comm_slowdown() const { return gpu_.comm_slowdown(); }

// Here rather than in program_builder.cpp so that programs built with other costs do not
// pull in the hardware and collective models.
engine::Program build_program(const Scenario& scenario, const workload::ModelWork& work,
                              const hardware::GpuModel& gpu) {
  const ModelCosts costs(scenario, gpu);
  return build_program(scenario, work, costs);
}

}  // namespace stepsim::parallelism
