// A grid of generated scenarios: --set overrides of the default scenario that vary the
// model, the parallel shape, the schedule, the data-parallel kind and the training knobs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace stepsim::test {

struct GridPoint {
  std::string label;              // "llama3-8b tp2 pp2 dp2 interleaved fsdp ...", stable across runs
  std::vector<std::string> sets;  // the overrides, for io::load_scenario("", sets)
};

// `count` points drawn with a fixed seed from the full product of the dimensions, so that
// every run and every machine sees the same grid; the first points are the same for every
// count, so a smaller grid is a prefix of a larger one.
std::vector<GridPoint> scenario_grid(std::size_t count);

}  // namespace stepsim::test
