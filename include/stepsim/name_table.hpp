// Interned names: each distinct string is stored once and referred to by a dense index, so
// that intervals, ops and trace events carry 4 bytes instead of a string. The one
// implementation behind Timeline::names, engine::Program::names and the Kineto reader.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stepsim {

class NameTable {
 public:
  NameTable() = default;
  // Interns `names` in order (index 0 is the first).
  NameTable(std::initializer_list<std::string_view> names);

  // The index of `name`, appended the first time it is seen. A lookup does not allocate.
  std::uint32_t intern(std::string_view name);
  // The index of `name`, or nullopt when it was never interned.
  std::optional<std::uint32_t> find(std::string_view name) const;

  const std::string& operator[](std::size_t index) const { return names_[index]; }
  std::size_t size() const { return names_.size(); }
  bool empty() const { return names_.empty(); }
  std::vector<std::string>::const_iterator begin() const { return names_.begin(); }
  std::vector<std::string>::const_iterator end() const { return names_.end(); }

 private:
  // Transparent, so that string_view lookups need no temporary std::string.
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t, Hash, std::equal_to<>> index_;
};

}  // namespace stepsim
