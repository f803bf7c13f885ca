// Fuzz target: the text of a scenario file, read and validated as `stepsim simulate FILE`
// does before it simulates.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_outcome.hpp"
#include "io/scenario_loader.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return stepsim::fuzz::run_one([&] { stepsim::io::load_scenario_text(text, "fuzz.json"); });
}
