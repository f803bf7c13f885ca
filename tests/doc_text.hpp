// The project's documents as tests read them, to hold what they quote to what the program prints.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace stepsim::test {

// A document of the source tree (`doc` relative to its root, e.g. "docs/report.md") as one
// line, each run of blanks and line breaks one space, as its paragraphs read.
inline std::string doc_one_line(const char* doc) {
  std::ifstream in(std::filesystem::path(STEPSIM_SOURCE_DIR) / doc);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  for (char c : text) {
    if (c == '\n') c = ' ';
    if (c != ' ' || out.empty() || out.back() != ' ') out += c;
  }
  return out;
}

}  // namespace stepsim::test
