// Name interning for programs, so ops refer to names by index.
#include "engine/program.hpp"

namespace stepsim::engine {

std::uint32_t Program::intern(const std::string& name) {
  auto [it, inserted] = name_index.try_emplace(name, static_cast<std::uint32_t>(names.size()));
  if (inserted) names.push_back(name);
  return it->second;
}

}  // namespace stepsim::engine
