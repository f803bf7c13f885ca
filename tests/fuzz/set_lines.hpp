// The input format of the --set fuzz targets: one "key=value" assignment per line, applied
// in order to the embedded default scenario, as repeated `--set` flags are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepsim::fuzz {

inline std::vector<std::string> set_lines(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> sets;
  std::string line;
  for (std::size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c != '\n') {
      line += c;
      continue;
    }
    sets.push_back(line);
    line.clear();
  }
  if (!line.empty()) sets.push_back(line);
  return sets;
}

}  // namespace stepsim::fuzz
