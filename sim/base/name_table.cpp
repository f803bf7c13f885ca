// NameTable: a vector of the names in first-seen order and a hash index into it.
#include "stepsim/name_table.hpp"

#include "stepsim/error.hpp"

namespace stepsim {

NameTable::NameTable(std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) intern(name);
}

std::uint32_t NameTable::intern(std::string_view name) {
  if (auto it = index_.find(name); it != index_.end()) return it->second;
  STEPSIM_CHECK(names_.size() < UINT32_MAX, "more than 2^32 distinct names");
  const auto index = static_cast<std::uint32_t>(names_.size());
  names_.emplace_back(name);
  index_.emplace(names_.back(), index);
  return index;
}

std::optional<std::uint32_t> NameTable::find(std::string_view name) const {
  if (auto it = index_.find(name); it != index_.end()) return it->second;
  return std::nullopt;
}

}  // namespace stepsim
