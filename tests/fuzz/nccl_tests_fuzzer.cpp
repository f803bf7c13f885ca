// Fuzz target: nccl-tests output (all_reduce_perf and friends) through the log reader.
#include <sstream>
#include <string>

#include "calibration/nccl_tests_log.hpp"
#include "fuzz/fuzz_outcome.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  return stepsim::fuzz::run_one([&] { stepsim::calibration::parse_nccl_tests(in, "fuzz.txt"); });
}
