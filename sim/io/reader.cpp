// Error locations and name suggestions for everything io reads.
#include "io/reader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
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
  // The distance is at least the difference in length: a word far longer than every choice
  // (a pasted file, say) is not compared letter by letter.
  std::string_view match;
  // A shortened name ("dgx-h100" for "dgx-h100-ndr") is closer than any typo.
  if (word.size() >= 3)
    for (const auto choice : choices)
      if (choice.starts_with(word)) return choice;
  for (const auto choice : choices) {
    const std::size_t gap = word.size() > choice.size() ? word.size() - choice.size() : choice.size() - word.size();
    if (gap >= best) continue;
    const std::size_t d = edit_distance(word, choice);
    if (d < best) {
      best = d;
      match = choice;
    }
  }
  return match;
}

std::string quoted_excerpt(std::string_view word) {
  constexpr std::size_t kShown = 60;
  if (word.size() <= kShown) return fmt::format("'{}'", word);
  // Cut on a UTF-8 character boundary so that the message stays valid text.
  std::size_t cut = kShown;
  while (cut > 0 && (static_cast<unsigned char>(word[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("'{}…' ({} bytes)", word.substr(0, cut), word.size());
}

std::string unknown_name_message(std::string_view kind, std::string_view word,
                                 std::span<const std::string_view> choices) {
  const std::string_view match = closest_match(word, choices);
  if (!match.empty()) return fmt::format("unknown {} {} (did you mean '{}'?)", kind, quoted_excerpt(word), match);
  return fmt::format("unknown {} {} (expected one of {})", kind, quoted_excerpt(word), fmt::join(choices, ", "));
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    std::uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (std::size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points beyond Unicode are not UTF-8.
    constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += n;
  }
  return true;
}

}  // namespace stepsim::io
