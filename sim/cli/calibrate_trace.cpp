// `stepsim calibrate from-trace` (see calibrate_trace.hpp).
#include "cli/calibrate_trace.hpp"

#include "stepsim/error.hpp"

namespace stepsim::cli {

int run_from_trace(const Args&) { throw InputError("<command line>", "from-trace", "not there yet"); }

}  // namespace stepsim::cli
