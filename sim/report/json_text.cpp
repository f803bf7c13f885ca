// Deterministic JSON text: the same value always gives the same bytes.
#include "report/json_text.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <ostream>

namespace stepsim::report {
namespace {

void append_escape(fmt::memory_buffer& buf, char c) {
  switch (c) {
    case '"':
      buf.append(std::string_view("\\\""));
      return;
    case '\\':
      buf.append(std::string_view("\\\\"));
      return;
    case '\n':
      buf.append(std::string_view("\\n"));
      return;
    case '\r':
      buf.append(std::string_view("\\r"));
      return;
    case '\t':
      buf.append(std::string_view("\\t"));
      return;
    default:
      fmt::format_to(std::back_inserter(buf), "\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
  }
}

bool needs_escape(char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; }

void indent(fmt::memory_buffer& buf, int depth) {
  buf.push_back('\n');
  for (int i = 0; i < depth; ++i) buf.append(std::string_view("  "));
}

void append_value(fmt::memory_buffer& buf, const boost::json::value& v, int depth);

void append_object(fmt::memory_buffer& buf, const boost::json::object& o, int depth) {
  if (o.empty()) return buf.append(std::string_view("{}"));
  buf.push_back('{');
  bool first = true;
  for (const auto& kv : o) {
    if (!first) buf.push_back(',');
    first = false;
    indent(buf, depth + 1);
    append_json_string(buf, kv.key());
    buf.append(std::string_view(": "));
    append_value(buf, kv.value(), depth + 1);
  }
  indent(buf, depth);
  buf.push_back('}');
}

bool all_scalars(const boost::json::array& a) {
  for (const auto& v : a)
    if (v.is_object() || v.is_array()) return false;
  return true;
}

// Arrays of scalars stay on one line unless they hold strings (notes read better one a line).
void append_array(fmt::memory_buffer& buf, const boost::json::array& a, int depth) {
  if (a.empty()) return buf.append(std::string_view("[]"));
  const bool inline_items = all_scalars(a) && !a.front().is_string();
  buf.push_back('[');
  bool first = true;
  for (const auto& v : a) {
    if (!first) buf.append(std::string_view(inline_items ? ", " : ","));
    first = false;
    if (!inline_items) indent(buf, depth + 1);
    append_value(buf, v, depth + 1);
  }
  if (!inline_items) indent(buf, depth);
  buf.push_back(']');
}

void append_value(fmt::memory_buffer& buf, const boost::json::value& v, int depth) {
  switch (v.kind()) {
    case boost::json::kind::null:
      return buf.append(std::string_view("null"));
    case boost::json::kind::bool_:
      return buf.append(std::string_view(v.get_bool() ? "true" : "false"));
    case boost::json::kind::int64:
      fmt::format_to(std::back_inserter(buf), "{}", v.get_int64());
      return;
    case boost::json::kind::uint64:
      fmt::format_to(std::back_inserter(buf), "{}", v.get_uint64());
      return;
    case boost::json::kind::double_:
      return append_json_number(buf, v.get_double());
    case boost::json::kind::string:
      return append_json_string(buf, v.get_string());
    case boost::json::kind::array:
      return append_array(buf, v.get_array(), depth);
    case boost::json::kind::object:
      return append_object(buf, v.get_object(), depth);
  }
}

}  // namespace

void append_json_string(fmt::memory_buffer& buf, std::string_view s) {
  buf.push_back('"');
  std::size_t plain = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (!needs_escape(s[i])) continue;
    buf.append(s.substr(plain, i - plain));
    append_escape(buf, s[i]);
    plain = i + 1;
  }
  buf.append(s.substr(plain));
  buf.push_back('"');
}

void append_json_number(fmt::memory_buffer& buf, double v) {
  if (!std::isfinite(v)) return buf.append(std::string_view("null"));
  if (v == 0) v = 0;  // no "-0"
  fmt::format_to(std::back_inserter(buf), "{}", v);
}

boost::json::value rank_json(int rank) {
  if (rank < 0) return nullptr;
  return rank;
}

void write_pretty_json(const boost::json::value& v, std::ostream& out) {
  fmt::memory_buffer buf;
  append_value(buf, v, 0);
  buf.push_back('\n');
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
}

}  // namespace stepsim::report
