// `stepsim calibrate check`: how well a calibration file generalises, each measured point
// predicted from the file's other points, and held-out logs' points from the whole file.
#pragma once

#include "cli/commands.hpp"

namespace stepsim::cli {

int run_check(const Args& args);

}  // namespace stepsim::cli
