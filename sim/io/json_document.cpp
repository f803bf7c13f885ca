// Parsing and writing JSON text with Boost.JSON; positions of syntax errors are computed
// from the parser's offset because Boost.JSON reports only an error code.
#include "io/json_document.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <boost/json/parse_options.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/stream_parser.hpp>

#include "stepsim/error.hpp"

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

}  // namespace

bool try_parse_json(std::string_view text, json::value& out) {
  json::stream_parser parser({}, scenario_options());
  boost::system::error_code ec;
  const std::size_t used = parser.write_some(text.data(), text.size(), ec);
  if (ec || used != text.size()) return false;
  parser.finish(ec);
  if (ec) return false;
  out = parser.release();
  return true;
}

json::value parse_json(std::string_view text, const std::string& source) {
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
  if (ec)
    throw InputError(source, position(text, used),
                     "invalid JSON: the document ends before every '{', '[' and '\"' is closed");
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
