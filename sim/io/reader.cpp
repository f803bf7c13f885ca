// Error locations and name suggestions for everything io reads.
#include "io/reader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include "stepsim/error.hpp"

namespace stepsim::io {

Reader Reader::at(std::string_view key) const {
  Reader child = *this;
  if (dotted_)
    child.where_ += (where_.empty() ? "" : ".") + std::string(key);
  else
    child.where_ += "/" + std::string(key);
  return child;
}

Reader Reader::at_index(std::size_t index) const {
  Reader child = *this;
  child.where_ += dotted_ ? fmt::format("[{}]", index) : fmt::format("/{}", index);
  return child;
}

Reader Reader::in_preset(std::string file) const {
  Reader child(std::move(file), false);
  child.preset_depth_ = preset_depth_ + 1;
  return child;
}

void Reader::fail(const std::string& message) const { throw InputError(file_, where_, message); }

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const bool same =
          std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string_view closest_match(std::string_view word, std::span<const std::string_view> choices) {
  // Allow about one typo per three letters, as LLVM's option suggestions do.
  std::size_t best = std::max<std::size_t>(2, word.size() / 3) + 1;
  std::string_view match;
  // A shortened name ("dgx-h100" for "dgx-h100-ndr") is closer than any typo.
  if (word.size() >= 3)
    for (const auto choice : choices)
      if (choice.starts_with(word)) return choice;
  for (const auto choice : choices) {
    const std::size_t d = edit_distance(word, choice);
    if (d < best) {
      best = d;
      match = choice;
    }
  }
  return match;
}

std::string unknown_name_message(std::string_view kind, std::string_view word,
                                 std::span<const std::string_view> choices) {
  const std::string_view match = closest_match(word, choices);
  if (!match.empty()) return fmt::format("unknown {} '{}' (did you mean '{}'?)", kind, word, match);
  return fmt::format("unknown {} '{}' (expected one of {})", kind, word, fmt::join(choices, ", "));
}

}  // namespace stepsim::io
