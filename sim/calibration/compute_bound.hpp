// What physics allows a measured compute kernel: no GEMM or attention kernel beats its GPU's
// dense peak in its precision, and no memory-bound kernel moves bytes faster than the HBM.
#pragma once

#include "calibration/calibration.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::calibration {

// Throws an InputError at the point of `c`'s compute tables that `gpu` could not run so fast.
void check_within_peak(const Calibration& c, const GpuSpec& gpu);

}  // namespace stepsim::calibration
