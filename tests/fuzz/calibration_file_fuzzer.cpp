// Fuzz target: a calibration file through its strict reader; what it accepts, written back
// by the writer, must read again to the same text (the reader and the writer agree).
#include <string>

#include "calibration/calibration.hpp"
#include "fuzz/fuzz_outcome.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return stepsim::fuzz::run_one([&] {
    const auto first =
        stepsim::calibration::calibration_json(stepsim::calibration::parse_calibration(text, "fuzz.json"));
    const auto again =
        stepsim::calibration::calibration_json(stepsim::calibration::parse_calibration(first, "written.json"));
    if (again != first) stepsim::fuzz::finding("a calibration written back does not read back the same:\n" + first);
  });
}
