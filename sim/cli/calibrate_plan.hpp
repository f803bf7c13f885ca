// `stepsim calibrate plan`: the nccl-tests and stepsim-calibrate runs that would calibrate
// every communicator and GEMM shape a scenario uses.
#pragma once

#include "cli/commands.hpp"

namespace stepsim::cli {

int run_calibrate_plan(const Args& args);

}  // namespace stepsim::cli
