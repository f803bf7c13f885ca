// Text read from input files as error messages quote it, and as readers take it: UTF-8
// checked, control characters and bytes that are not UTF-8 escaped, a byte order mark skipped.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace stepsim {

// Where `text` stops being UTF-8 (the offset of its first byte that starts no valid sequence,
// an overlong form, a surrogate or a code point above U+10FFFF among them); npos when it is UTF-8.
std::size_t invalid_utf8_at(std::string_view text);

// `text` as an error message may show it on a terminal: UTF-8 kept, every control character
// but newline and tab (C0, DEL, C1) written as JSON writes it (\u001b), and each byte that is
// not UTF-8 as \xFF. NUL is \u0000.
std::string printable(std::string_view text);

// `text` without a leading UTF-8 byte order mark (U+FEFF), which some editors write first and
// every text input accepts alike.
std::string_view without_bom(std::string_view text);
inline constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

// Throws InputError naming `file` and the line and column when `text` is not UTF-8: "not valid
// UTF-8 at byte N (0xFF)", N counting from 1 at the file's first byte (`offset` bytes before
// `text`, a byte order mark that was skipped).
void check_utf8(std::string_view text, const std::string& file, std::size_t offset = 0);

// A number as the whole of `text`, in decimal as every numeric flag takes one ("12", "-3", "5.5",
// "1.5e12" for a floating-point T): nullopt for anything else (blanks, a '+', hexadecimal, "inf"
// or "nan"), or for a value T cannot hold.
template <typename T>
std::optional<T> number_of(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>)
    if (!std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace stepsim
