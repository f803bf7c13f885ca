// Representative mode under kernel jitter: when the slowest real member of a collective
// arrives. Each real rank's compute drifts from the simulated rank's by the sum of its
// kernels' jitter; a communicator's members arrive spread by the drift they gathered since a
// collective of theirs last held their compute back, and the collective waits for the largest.
#pragma once

#include <memory>
#include <vector>

#include "engine/program.hpp"
#include "parallelism/mesh.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::parallelism {

// The arrival model of `program` (representative mode) under jitter of `kind` and relative
// standard deviation `sigma`; `members[g]` are the real ranks of program.groups[g].
std::shared_ptr<const engine::ArrivalModel> jitter_arrivals(const engine::Program& program,
                                                            const std::vector<RankGroup>& members, JitterKind kind,
                                                            double sigma);

}  // namespace stepsim::parallelism
