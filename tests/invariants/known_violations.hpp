// Scenarios known to break an invariant, by label ("example NAME" or a grid label), with
// what breaks. The default tests skip them; the test tagged [known-failing] checks that
// they still break. Remove an entry once its bug is fixed.
#pragma once

#include <map>
#include <string>

namespace stepsim::test {

inline const std::map<std::string, std::string>& known_violations() {
  static const std::map<std::string, std::string> known = {};
  return known;
}

}  // namespace stepsim::test
