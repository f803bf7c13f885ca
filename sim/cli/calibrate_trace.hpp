// `stepsim calibrate from-trace`: GPU efficiencies and the slowdown under communication
// fitted so that a scenario's simulation agrees with a profiler trace of it, and the host's
// kernel launch and per-operator dispatch its CPU operators show.
#pragma once

#include "cli/commands.hpp"

namespace stepsim::cli {

int run_from_trace(const Args& args);

}  // namespace stepsim::cli
