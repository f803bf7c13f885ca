// The checks of simulation.variation: factors in range, GPUs and nodes that exist, and
// variation that representative mode cannot show refused instead of ignored.
#pragma once

#include "stepsim/scenario.hpp"

namespace stepsim::io {

// Throws InputError(s.source, JSON pointer, what was expected); needs cluster.nodes sized.
void check_variation(const Scenario& s);

}  // namespace stepsim::io
