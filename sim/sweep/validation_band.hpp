// How far stepsim's step times have been from published measurements on each GPU: the
// uncertainty band `plan` puts around a predicted step time.
#pragma once

#include <string>

namespace stepsim::sweep {

struct ValidationBand {
  double mape = 0;       // mean absolute error of the predicted step times, as a fraction
  int runs = 0;          // the published runs it is the mean of
  bool own_gpu = false;  // false: no run on this GPU, the mean over every GPU's runs
  std::string source;    // where the figure comes from, in words
};

// The band of `gpu` (a GPU preset's name): docs/validation.md's step-time errors of the runs on
// that GPU not used for fitting, or of all such runs when none was on it.
ValidationBand validation_band(const std::string& gpu);

}  // namespace stepsim::sweep
