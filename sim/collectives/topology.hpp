// Builds the Context of one request: NCCL's graphs for the cluster and group shape.
#pragma once

#include "collectives/algorithm.hpp"

namespace stepsim::collectives {

Context make_context(const ClusterSpec& cluster, const Request& request);

}  // namespace stepsim::collectives
