// The outcome contract every fuzz harness enforces: bad input is an InputError that names
// its file and says what was expected; any other exception, a crash or a hang is a finding.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "stepsim/error.hpp"

namespace stepsim::fuzz {

// Prints what went wrong and aborts, so that libFuzzer (or the replay driver) records the
// input as a finding.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "stepsim fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Runs `body` on one input; returns 0 (libFuzzer's "keep going") unless it is a finding.
template <typename Body>
int run_one(Body&& body) {
  try {
    body();
  } catch (const InputError& e) {
    if (e.file().empty()) finding(std::string("InputError names no file: ") + e.what());
    if (e.message().empty()) finding(std::string("InputError says nothing: ") + e.what());
  } catch (const InternalError& e) {
    finding(std::string("internal error (exit status 1): ") + e.what());
  } catch (const std::exception& e) {
    finding(std::string("unexpected exception: ") + e.what());
  }
  return 0;
}

}  // namespace stepsim::fuzz
