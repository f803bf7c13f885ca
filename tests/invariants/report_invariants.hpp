// The invariants every simulated report keeps, as a list of violations (empty: all hold),
// so that a test can name the scenario and the numbers of each one.
#pragma once

#include <string>
#include <vector>

#include "stepsim/report.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::test {

// No NaN or infinity; breakdown parts sum to the step; hidden and exposed fractions in
// [0, 1]; MFU in (0, 1]; memory positive.
std::vector<std::string> report_violations(const Report& r);

// Doubling every GPU peak FLOPS, the HBM bandwidth, or the link bandwidths (NVLink and
// NIC) never makes the step slower than `base` (the step time of `s` itself).
std::vector<std::string> faster_hardware_violations(const Scenario& s, double base);

// Both of the above for one scenario; an exception other than InputError (which a scenario
// may still raise while simulating) is a violation too.
std::vector<std::string> all_violations(const Scenario& s);

}  // namespace stepsim::test
