// Fuzz target: `--set key=value` overrides (one per line) on the default scenario, loaded
// and validated as `stepsim simulate --set ...` does before it simulates.
#include "fuzz/fuzz_outcome.hpp"
#include "fuzz/set_lines.hpp"
#include "io/scenario_loader.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> sets = stepsim::fuzz::set_lines(data, size);
  return stepsim::fuzz::run_one([&] { stepsim::io::load_scenario("", sets); });
}
