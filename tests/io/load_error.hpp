// The error a scenario's text, named "s.json", with `sets` applied, is refused with, or
// "no error": the io tests' way of asking what a user would be told.
#pragma once

#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"

namespace stepsim::test {

inline std::string load_error(const std::string& text, const std::vector<std::string>& sets) {
  try {
    io::load_scenario_text(text, "s.json", sets);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace stepsim::test
