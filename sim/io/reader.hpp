// Where a value being read came from: the file (or "--set") and the path inside it, so
// that every error names both. Also the "did you mean" used for unknown names.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace stepsim::io {

class Reader {
 public:
  // `dotted`: paths are written "a.b.c" as on the command line, else as JSON pointers "/a/b/c".
  Reader(std::string file, bool dotted) : file_(std::move(file)), dotted_(dotted) {}

  Reader at(std::string_view key) const;
  Reader at_index(std::size_t index) const;
  // The same place, one preset deeper (to stop presets that refer to themselves).
  Reader in_preset(std::string file) const;

  // A --set value that is one number, as the command line gave it ("2e9"), so that an error
  // about the number shows what was typed rather than the number rewritten.
  Reader typed(std::string text) const {
    Reader child = *this;
    child.typed_ = std::move(text);
    return child;
  }
  const std::string& typed() const { return typed_; }

  const std::string& file() const { return file_; }
  const std::string& where() const { return where_; }
  int preset_depth() const { return preset_depth_; }
  [[noreturn]] void fail(const std::string& message) const;

 private:
  std::string file_;
  std::string where_;
  bool dotted_;
  int preset_depth_ = 0;
  std::string typed_;
};

// The choice closest to `word` by edit distance, or "" when none is close enough to suggest.
std::string_view closest_match(std::string_view word, std::span<const std::string_view> choices);

// "unknown KIND 'word' (did you mean 'x'?)" or "... (expected one of a, b, c)"; a long word
// is shown cut short.
std::string unknown_name_message(std::string_view kind, std::string_view word,
                                 std::span<const std::string_view> choices);

// True when `s` is well-formed UTF-8 (what JSON text, and so the report, must be).
bool valid_utf8(std::string_view s);

}  // namespace stepsim::io
