// Progressive filling for max-min fair rates with per-flow caps and weighted resource use.
#include "network/max_min.hpp"

#include <algorithm>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "stepsim/error.hpp"

namespace stepsim::network {
namespace {

// Relative slack under which a cap or a resource counts as reached: the increments are
// computed from the very quantities they exhaust, so only rounding noise remains.
constexpr double kSlack = 1e-12;

}  // namespace

MaxMinSolver::MaxMinSolver(std::span<const Resource> resources) {
  capacity_.reserve(resources.size());
  for (const Resource& r : resources) capacity_.push_back(r.capacity.bytes_per_s());
  remaining_.resize(capacity_.size());
  weight_.resize(capacity_.size());
  lone_weight_.resize(capacity_.size());
  users_.resize(capacity_.size());
  touched_.reserve(capacity_.size());
}

std::span<const double> MaxMinSolver::solve(std::span<const FlowDemand> flows) {
  start(flows);
  // Each round freezes at least one flow, or saturates a resource, which freezes its flows.
  const std::size_t max_rounds = flows.size() + capacity_.size() + 1;
  for (std::size_t round = 0; unfrozen_ > 0; ++round) {
    STEPSIM_CHECK(round < max_rounds, "max-min filling does not converge");
    raise(flows, next_increment(flows));
    freeze_saturated(flows);
  }
  return {rates_.data(), flows.size()};
}

// One round of solve() for a lone flow: it rises until its cap or its tightest resource, its
// weights on a resource summed in the order of its uses as start() sums them (a resource used
// twice is simply looked at twice); whatever would take solve() another round, or fail in it,
// is left to solve().
double MaxMinSolver::solve_alone(const FlowDemand& flow) {
  const double cap = flow.cap.bytes_per_s();
  const auto general = [&] { return solve(std::span(&flow, 1))[0]; };
  if (!flow.cap.positive()) return general();
  for (const ResourceUse& u : flow.uses) {
    if (u.resource >= capacity_.size() || !(u.weight >= 0)) return general();  // NaN too: solve() refuses it
  }
  // Each resource's weights summed once, in the order of the uses (lone_weight_ is all zeros
  // between calls).
  for (const ResourceUse& u : flow.uses) lone_weight_[u.resource] += u.weight;
  double delta = cap;
  for (const ResourceUse& u : flow.uses) {
    if (u.weight > 0) delta = std::min(delta, std::max(capacity_[u.resource], 0.0) / lone_weight_[u.resource]);
  }
  std::optional<double> rate;  // where one round leaves it, if it freezes it
  if (delta >= cap * (1 - kSlack)) {
    rate = cap;
  } else {
    for (const ResourceUse& u : flow.uses) {
      const double capacity = capacity_[u.resource];
      if (u.weight > 0 && capacity - delta * lone_weight_[u.resource] <= capacity * kSlack) {
        rate = delta;
        break;
      }
    }
  }
  for (const ResourceUse& u : flow.uses) lone_weight_[u.resource] = 0;
  return rate ? *rate : general();
}

void MaxMinSolver::start(std::span<const FlowDemand> flows) {
  for (std::uint32_t r : touched_) {
    weight_[r] = 0;
    users_[r] = 0;
  }
  touched_.clear();
  rates_.assign(flows.size(), 0.0);
  frozen_.assign(flows.size(), 0);
  unfrozen_ = flows.size();
  for (const FlowDemand& f : flows) {
    STEPSIM_CHECK(f.cap.positive(), "a flow needs a positive rate cap");
    for (const ResourceUse& u : f.uses) {
      STEPSIM_CHECK(u.resource < capacity_.size(), fmt::format("flow uses unknown resource {}", u.resource));
      STEPSIM_CHECK(u.weight >= 0, "a resource weight must not be negative");
      if (u.weight == 0) continue;
      if (users_[u.resource]++ == 0) {
        touched_.push_back(u.resource);
        remaining_[u.resource] = capacity_[u.resource];
      }
      weight_[u.resource] += u.weight;
    }
  }
}

double MaxMinSolver::next_increment(std::span<const FlowDemand> flows) const {
  double delta = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < flows.size(); ++i) {
    if (!frozen_[i]) delta = std::min(delta, flows[i].cap.bytes_per_s() - rates_[i]);
  }
  for (std::uint32_t r : touched_) {
    if (users_[r] > 0) delta = std::min(delta, std::max(remaining_[r], 0.0) / weight_[r]);
  }
  return delta;
}

void MaxMinSolver::raise(std::span<const FlowDemand> flows, double delta) {
  for (std::size_t i = 0; i < flows.size(); ++i) {
    if (!frozen_[i]) rates_[i] += delta;
  }
  for (std::uint32_t r : touched_) {
    if (users_[r] > 0) remaining_[r] -= delta * weight_[r];
  }
}

void MaxMinSolver::freeze_saturated(std::span<const FlowDemand> flows) {
  for (std::size_t i = 0; i < flows.size(); ++i) {
    if (frozen_[i]) continue;
    const double cap = flows[i].cap.bytes_per_s();
    bool stop = rates_[i] >= cap * (1 - kSlack);
    if (stop) rates_[i] = cap;
    for (const ResourceUse& u : flows[i].uses) {
      if (u.weight > 0 && remaining_[u.resource] <= capacity_[u.resource] * kSlack) stop = true;
    }
    if (!stop) continue;
    frozen_[i] = 1;
    --unfrozen_;
    for (const ResourceUse& u : flows[i].uses) release(u);
  }
}

void MaxMinSolver::release(const ResourceUse& use) {
  if (use.weight == 0) return;
  weight_[use.resource] -= use.weight;
  if (--users_[use.resource] == 0) weight_[use.resource] = 0;  // no rounding residue
}

}  // namespace stepsim::network
