// Dynamic loss scaling under fp16 mixed precision: the all-reduces of the overflow flag that
// each framework issues between its check of the gradients and the host's read of the flag
// (LossScaling, stepsim/framework.hpp).
#pragma once

#include <string>
#include <vector>

#include "collectives/collective.hpp"
#include "stepsim/scenario.hpp"
#include "stepsim/units.hpp"

namespace stepsim::parallelism {

// The step checks its gradients for overflow: training.precision fp16 under a framework that
// scales the loss.
bool scales_loss(const Scenario& s);

// One all-reduce of the flag: over which group, as its shape over the cluster, and its size.
struct FlagReduce {
  std::string group;  // "model-parallel", "data-parallel", "all ranks"
  collectives::GroupShape shape;
  Bytes size{0};
};

// Rank `rank`'s all-reduces of the flag, in order; none of a group of one rank.
std::vector<FlagReduce> overflow_flag_reduces(const Scenario& s, int rank);

}  // namespace stepsim::parallelism
