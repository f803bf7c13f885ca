// One function per subcommand of `stepsim`. Each takes its own arguments (after the
// subcommand name), parses them with Boost.Program_options and returns the exit status.
// They throw InputError for bad input; main turns it into a message and exit status 2.
#pragma once

#include <string>
#include <vector>

namespace stepsim::cli {

using Args = std::vector<std::string>;

int run_simulate(const Args& args);
int run_collective(const Args& args);
int run_presets(const Args& args);
int run_analyze(const Args& args);
int run_compare(const Args& args);
int run_sweep(const Args& args);
int run_plan(const Args& args);
int run_calibrate(const Args& args);

}  // namespace stepsim::cli
