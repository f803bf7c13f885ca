// A synthetic pipeline-parallel program for engine benchmarks: stages exchanging
// activations, tensor-parallel all-reduces after each layer, data-parallel gradient
// all-reduces in backward, all in representative mode (one simulated rank per stage).
#pragma once

#include "engine/program.hpp"

namespace stepsim::bench {

struct SyntheticShape {
  int stages = 4;
  int layers = 32;  // per stage
  int micro_batches = 16;
};

engine::Program synthetic_program(const SyntheticShape& shape);

}  // namespace stepsim::bench
