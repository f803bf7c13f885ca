// Max-min fair sharing of link resources among concurrent flows (progressive filling),
// the rate model behind concurrent collectives in the flow-level network.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "network/resource.hpp"
#include "stepsim/units.hpp"

namespace stepsim::network {

// One flow's demand: it never exceeds `cap` (its solo algorithm bandwidth) and at rate r it
// loads each used resource at r · weight.
struct FlowDemand {
  Bandwidth cap;
  std::span<const ResourceUse> uses;
};

// Raises every unfrozen flow's rate at the same pace until the flow reaches its cap or one of
// its resources saturates (water-filling). Buffers are kept between calls, so solving the
// same number of flows again does not allocate, and a solve touches only the resources its
// flows use. Deterministic: the flow and resource order is fixed.
class MaxMinSolver {
 public:
  explicit MaxMinSolver(std::span<const Resource> resources);

  // Rates in bytes per second, one per flow, valid until the next call.
  std::span<const double> solve(std::span<const FlowDemand> flows);

  // The rate solve() gives `flow` alone, to the last bit, in a few passes over its uses: the
  // common case of a flow that shares no link with another.
  double solve_alone(const FlowDemand& flow);

 private:
  void start(std::span<const FlowDemand> flows);
  double next_increment(std::span<const FlowDemand> flows) const;
  void raise(std::span<const FlowDemand> flows, double delta);
  void freeze_saturated(std::span<const FlowDemand> flows);
  void release(const ResourceUse& use);

  std::vector<double> capacity_;        // per resource, bytes per second
  std::vector<double> remaining_;       // per resource, capacity not yet handed out
  std::vector<double> weight_;          // per resource, summed weight of unfrozen flows on it
  std::vector<double> lone_weight_;     // per resource, solve_alone's sums (zero between calls)
  std::vector<std::uint32_t> users_;    // per resource, unfrozen flows with weight on it
  std::vector<std::uint32_t> touched_;  // resources the current flows use, in first-use order
  std::vector<double> rates_;           // per flow
  std::vector<std::uint8_t> frozen_;
  std::size_t unfrozen_ = 0;
};

}  // namespace stepsim::network
