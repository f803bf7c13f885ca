// What the search tests share: a spec of --set values on a GPU count, and the values a key
// takes over a list of candidates.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "sweep/best.hpp"

namespace stepsim::testing {

inline sweep::SweepSpec spec_of(std::vector<std::string> sets, int gpus) {
  sweep::SweepSpec spec;
  spec.sets = std::move(sets);
  spec.gpus = gpus;
  return spec;
}

inline std::set<std::string> values(const std::vector<sweep::Candidate>& cs, const std::string& key) {
  std::set<std::string> out;
  for (const auto& c : cs) out.insert(sweep::value_of(c, key, "-"));
  return out;
}

}  // namespace stepsim::testing
