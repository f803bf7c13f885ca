// UTF-8 checking and the escaping of what error messages quote (stepsim/text.hpp).
#include "stepsim/text.hpp"

#include <fmt/format.h>

#include "stepsim/error.hpp"

namespace stepsim {
namespace {

// The length of the valid UTF-8 sequence at `text[at]`, 0 when none starts there.
std::size_t sequence_at(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b = byte(at);
  if (b < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;  // overlong
    if (b == 0xED) hi = 0x9F;  // surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;  // overlong
    if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (at + n > text.size()) return 0;
  if (byte(at + 1) < lo || byte(at + 1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if (byte(at + i) < 0x80 || byte(at + i) > 0xBF) return 0;
  return n;
}

}  // namespace

std::size_t invalid_utf8_at(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t n = sequence_at(text, at);
    if (n == 0) return at;
    at += n;
  }
  return std::string_view::npos;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const auto b = static_cast<unsigned char>(text[at]);
    const std::size_t n = sequence_at(text, at);
    if (n == 0) {
      out += fmt::format("\\x{:02X}", b);
      ++at;
    } else if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7F) {
      out += fmt::format("\\u{:04x}", b);
      ++at;
    } else if (b == 0xC2 && static_cast<unsigned char>(text[at + 1]) < 0xA0) {  // C1: U+0080 to U+009F
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[at + 1]));
      at += 2;
    } else {
      out.append(text.substr(at, n));
      at += n;
    }
  }
  return out;
}

std::string_view without_bom(std::string_view text) {
  if (text.starts_with(kUtf8Bom)) text.remove_prefix(kUtf8Bom.size());
  return text;
}

void check_utf8(std::string_view text, const std::string& file, std::size_t offset) {
  const std::size_t bad = invalid_utf8_at(text);
  if (bad == std::string_view::npos) return;
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < bad; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  throw InputError(file, fmt::format("line {}, column {}", line, column),
                   fmt::format("not valid UTF-8 at byte {} (0x{:02X}): expected UTF-8 text", offset + bad + 1,
                               static_cast<unsigned char>(text[bad])));
}

}  // namespace stepsim
