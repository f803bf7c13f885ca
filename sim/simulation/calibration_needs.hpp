// What a scenario's step would need measured to be calibrated: every collective it calls
// (op, communicator shape, element type, sizes) and every GEMM shape it runs.
#pragma once

#include "calibration/plan.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim {

// Builds the scenario's program with the model's costs and collects what it asked of them.
calibration::CalibrationNeeds calibration_needs(const Scenario& scenario);

}  // namespace stepsim
