// How far stepsim's step times have been from published measurements on each GPU: the
// uncertainty band `plan` puts around a predicted step time.
#pragma once

#include <string>

#include "stepsim/scenario.hpp"

namespace stepsim::sweep {

struct ValidationBand {
  double mape = 0;       // mean absolute error of the predicted step times, as a fraction
  int runs = 0;          // the published runs it is the mean of
  bool own_gpu = false;  // false: no run on this GPU, the mean over every GPU's runs
  std::string source;    // where the figure comes from, in words
};

// The band of `gpu`: docs/validation.md's step-time errors of the runs not used for fitting on
// the GPU preset whose figures it has, every key that a step time reads (not the name and
// provenance, which only name it, the board power, which gives the energy, nor the memory
// capacity, which decides which layouts fit); or of all such runs when it has no preset's
// figures (the source then names the keys that differ) or no run was on that preset.
ValidationBand validation_band(const GpuSpec& gpu);

}  // namespace stepsim::sweep
