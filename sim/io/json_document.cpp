// Parsing and writing JSON text with Boost.JSON; positions of syntax errors are computed
// from the parser's offset because Boost.JSON reports only an error code.
#include "io/json_document.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/stream_parser.hpp>

#include "stepsim/error.hpp"
#include "stepsim/text.hpp"

namespace stepsim::io {
namespace json = boost::json;
namespace {

json::parse_options scenario_options() {
  json::parse_options options;
  options.allow_comments = true;
  options.allow_trailing_commas = true;
  return options;
}

// "line L, column C" of byte `offset`, counting columns in characters, not UTF-8 bytes.
std::string position(std::string_view text, std::size_t offset) {
  int line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      column = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++column;
    }
  }
  return fmt::format("line {}, column {}", line, column);
}

std::string excerpt(std::string_view text, std::size_t offset) {
  std::string_view rest = text.substr(std::min(offset, text.size()));
  rest = rest.substr(0, std::min(rest.find('\n'), std::size_t{12}));
  return rest.empty() ? "end of line" : fmt::format("'{}'", rest);
}

// A first pass over the text that Boost.JSON's DOM parser cannot make: it silently keeps the
// last of duplicate keys and turns 1e999 into infinity. Stopping the parser at the offending
// token gives its offset, hence the line and column.
class StrictHandler {
 public:
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  using error_code = boost::system::error_code;

  std::string problem;  // empty while the text is fine

  bool on_document_begin(error_code&) { return true; }
  bool on_document_end(error_code&) { return true; }
  bool on_array_begin(error_code&) {
    frames_.push_back({false, {}, 0, {}});
    return true;
  }
  bool on_array_end(std::size_t, error_code&) { return close(); }
  bool on_object_begin(error_code&) {
    frames_.push_back({true, {}, 0, {}});
    return true;
  }
  bool on_object_end(std::size_t, error_code&) { return close(); }
  bool on_string_part(json::string_view, std::size_t, error_code&) { return true; }
  bool on_string(json::string_view, std::size_t, error_code&) { return value(); }
  bool on_key_part(json::string_view s, std::size_t, error_code&) {
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, error_code& ec) {
    key_.append(s.data(), s.size());
    Frame& f = frames_.back();
    f.key = std::move(key_);
    key_.clear();
    if (f.seen.insert(f.key).second) return true;
    problem = fmt::format("duplicate key '{}' at {} (each key may appear once in an object)", f.key, path());
    return fail(ec);
  }
  bool on_number_part(json::string_view, error_code&) { return true; }
  bool on_int64(std::int64_t, json::string_view, error_code&) { return value(); }
  bool on_uint64(std::uint64_t, json::string_view, error_code&) { return value(); }
  bool on_double(double d, json::string_view text, error_code& ec) {
    if (std::isfinite(d)) return value();
    problem =
        fmt::format("the number {} at {} is out of range (at most about 1.8e308)", std::string_view(text), path());
    return fail(ec);
  }
  bool on_bool(bool, error_code&) { return value(); }
  bool on_null(error_code&) { return value(); }
  bool on_comment_part(json::string_view, error_code&) { return true; }
  bool on_comment(json::string_view, error_code&) { return true; }

 private:
  struct Frame {
    bool object;
    std::string key;
    std::size_t index;
    std::set<std::string, std::less<>> seen;
  };

  bool close() {
    frames_.pop_back();
    return value();
  }
  bool value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    return true;
  }
  bool fail(error_code& ec) {
    ec = boost::system::errc::make_error_code(boost::system::errc::invalid_argument);
    return false;
  }
  std::string path() const {
    std::string out;
    for (const Frame& f : frames_) out += f.object ? "/" + f.key : fmt::format("/{}", f.index);
    return out.empty() ? "/" : out;
  }

  std::vector<Frame> frames_;
  std::string key_;
};

// Throws InputError at the first duplicate key or out-of-range number of `text`.
void check_strict(std::string_view text, const std::string& source) {
  json::basic_parser<StrictHandler> parser(scenario_options());
  boost::system::error_code ec;
  const std::size_t used = parser.write_some(false, text.data(), text.size(), ec);
  if (ec && !parser.handler().problem.empty()) throw InputError(source, position(text, used), parser.handler().problem);
}

// Where a text the parser wants more of stops, outside strings: inside a /* comment, after a
// '/' that starts none, or neither (a '{', '[' or '"' left open). Boost.JSON says "incomplete".
enum class TextEnd { code, string, escape, slash, line_comment, block_comment, block_star };

TextEnd after_char(TextEnd at, char c) {
  switch (at) {
    case TextEnd::code:
      return c == '"' ? TextEnd::string : c == '/' ? TextEnd::slash : TextEnd::code;
    case TextEnd::string:
      return c == '\\' ? TextEnd::escape : c == '"' ? TextEnd::code : TextEnd::string;
    case TextEnd::escape:
      return TextEnd::string;
    case TextEnd::slash:
      return c == '/' ? TextEnd::line_comment : c == '*' ? TextEnd::block_comment : TextEnd::code;
    case TextEnd::line_comment:
      return c == '\n' ? TextEnd::code : TextEnd::line_comment;
    case TextEnd::block_comment:
      return c == '*' ? TextEnd::block_star : TextEnd::block_comment;
    case TextEnd::block_star:
      return c == '/' ? TextEnd::code : c == '*' ? TextEnd::block_star : TextEnd::block_comment;
  }
  return at;
}

std::string incomplete_message(std::string_view text) {
  TextEnd at = TextEnd::code;
  for (const char c : text) at = after_char(at, c);
  if (at == TextEnd::block_comment || at == TextEnd::block_star)
    return "invalid JSON: the document ends inside a /* comment (expected its closing */)";
  if (at == TextEnd::slash) return "invalid JSON: the document ends with a '/' that starts no comment (// or /*)";
  return "invalid JSON: the document ends before every '{', '[' and '\"' is closed";
}

}  // namespace

bool try_parse_json(std::string_view text, json::value& out) {
  json::stream_parser parser({}, scenario_options());
  boost::system::error_code ec;
  const std::size_t used = parser.write_some(text.data(), text.size(), ec);
  if (ec || used != text.size()) return false;
  parser.finish(ec);
  if (ec) return false;
  out = parser.release();
  return !out.is_double() || std::isfinite(out.get_double());
}

json::value parse_json(std::string_view text, const std::string& source) {
  // A UTF-8 byte order mark, which some Windows editors write first, is not part of the
  // document (RFC 8259 lets a parser ignore it); positions stay those an editor shows.
  const std::size_t bom = text.size() - without_bom(text).size();
  text = without_bom(text);
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw InputError(source, "", "is empty: expected a JSON document");
  // JSON is UTF-8 (RFC 8259): bytes that are not say so, rather than "syntax error".
  check_utf8(text, source, bom);
  check_strict(text, source);
  json::stream_parser parser({}, scenario_options());
  boost::system::error_code ec;
  const std::size_t used = parser.write_some(text.data(), text.size(), ec);
  if (ec)
    throw InputError(source, position(text, used),
                     fmt::format("invalid JSON: {} at {}", ec.message(), excerpt(text, used)));
  if (used != text.size())
    throw InputError(source, position(text, used),
                     fmt::format("invalid JSON: unexpected {} after the end of the document", excerpt(text, used)));
  parser.finish(ec);
  if (ec) throw InputError(source, position(text, used), incomplete_message(text));
  return parser.release();
}

std::string number_text(const json::value& v) {
  if (v.is_int64()) return fmt::format("{}", v.get_int64());
  if (v.is_uint64()) return fmt::format("{}", v.get_uint64());
  return fmt::format("{}", v.get_double());
}

namespace {

bool is_scalar(const json::value& v) { return !v.is_object() && !v.is_array(); }

void write(const json::value& v, int indent, std::string& out) {
  const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
  if (v.is_number()) {
    out += number_text(v);
  } else if (v.is_object()) {
    if (v.get_object().empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    bool first = true;
    for (const auto& [key, value] : v.get_object()) {
      out += (first ? "" : ",\n") + pad + json::serialize(json::string(key)) + ": ";
      write(value, indent + 2, out);
      first = false;
    }
    out += "\n" + std::string(static_cast<std::size_t>(indent), ' ') + "}";
  } else if (v.is_array()) {
    const auto& array = v.get_array();
    const bool inline_array = std::all_of(array.begin(), array.end(), is_scalar);
    out += "[";
    for (std::size_t i = 0; i < array.size(); ++i) {
      out += i == 0 ? "" : ",";
      out += inline_array ? (i == 0 ? "" : " ") : "\n" + pad;
      write(array[i], indent + 2, out);
    }
    out += inline_array || array.empty() ? "]" : "\n" + std::string(static_cast<std::size_t>(indent), ' ') + "]";
  } else {
    out += json::serialize(v);
  }
}

}  // namespace

std::string pretty_json(const json::value& v) {
  std::string out;
  write(v, 0, out);
  return out + "\n";
}

std::string describe_value(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return v.get_bool() ? "true" : "false";
    case json::kind::string:
      return fmt::format("a string (\"{}\")", std::string_view(v.get_string()));
    case json::kind::object:
      return "an object";
    case json::kind::array:
      return "a list";
    default:
      return fmt::format("a number ({})", number_text(v));
  }
}

}  // namespace stepsim::io
