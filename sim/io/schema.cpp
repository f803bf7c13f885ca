// Reading and writing the scalar values of the scenario schema: exact integers, flags,
// names, and quantities with units (which must be strings carrying their unit).
#include "io/schema.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <limits>

#include "io/json_document.hpp"
#include "io/presets.hpp"
#include "io/scenario_loader.hpp"
#include "io/units_text.hpp"

namespace stepsim::io {
namespace {

template <class Int>
Int read_integer(const json::value& v, const Reader& r) {
  constexpr auto lo = static_cast<double>(std::numeric_limits<Int>::min());
  constexpr auto hi = static_cast<double>(std::numeric_limits<Int>::max());
  if (v.is_int64() && v.get_int64() >= std::numeric_limits<Int>::min() &&
      v.get_int64() <= std::numeric_limits<Int>::max())
    return static_cast<Int>(v.get_int64());
  if (v.is_double() && std::trunc(v.get_double()) == v.get_double() && v.get_double() >= lo && v.get_double() <= hi)
    return static_cast<Int>(v.get_double());
  const bool whole = v.is_int64() || v.is_uint64() || (v.is_double() && std::trunc(v.get_double()) == v.get_double());
  if (whole)
    r.fail(fmt::format("expected an integer from {} to {}, got {}", std::numeric_limits<Int>::min(),
                       std::numeric_limits<Int>::max(), describe_value(v)));
  fail_type("an integer", v, r);
}

// Quantities must carry their unit; a bare number is the classic bits-or-bytes mistake.
std::string quantity_text(const json::value& v, const Reader& r) {
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_number()) return r.typed().empty() ? number_text(v) : r.typed();
  fail_type("a string with a unit", v, r);
}

}  // namespace

void fail_type(std::string_view expected, const json::value& v, const Reader& r) {
  r.fail(fmt::format("expected {}, got {}", expected, describe_value(v)));
}

namespace {

// Keys that were once read and would now do nothing: refused with what took their place
// rather than as unknown.
std::string_view retired_key(std::string_view key, const Reader& r) {
  const bool tuning = r.where().find("collective_tuning") != std::string::npos;
  if (tuning && (key == "ll128_efficiency" || key == "ll_efficiency"))
    return "is no longer read: one shortfall of NCCL's model, the same for every protocol (bus_efficiency, "
           "ramp_half_bytes, ramp_exponent), costs whichever pair NCCL chooses, so that the cost does not step "
           "where NCCL changes protocol; remove it";
  return {};
}

}  // namespace

void fail_unknown_key(std::string_view key, std::span<const std::string_view> keys, const Reader& r) {
  if (const std::string_view why = retired_key(key, r); !why.empty()) r.fail(fmt::format("'{}' {}", key, why));
  r.fail(unknown_name_message("key", key, keys));
}

void read_value(int& out, const json::value& v, const Reader& r) { out = read_integer<int>(v, r); }
void read_value(std::optional<int>& out, const json::value& v, const Reader& r) { out = read_integer<int>(v, r); }
void read_value(long long& out, const json::value& v, const Reader& r) { out = read_integer<long long>(v, r); }

void read_value(double& out, const json::value& v, const Reader& r) {
  if (!v.is_number()) fail_type("a number", v, r);
  out = v.to_number<double>();
}

void read_value(bool& out, const json::value& v, const Reader& r) {
  if (!v.is_bool()) fail_type("true or false", v, r);
  out = v.get_bool();
}

void read_value(Fitted& out, const json::value& v, const Reader& r) {
  if (v.is_bool()) {
    out = v.get_bool() ? Fitted::yes : Fitted::no;
    return;
  }
  if (!v.is_string() || !same_name(v.get_string(), "partly")) fail_type("true, false or \"partly\"", v, r);
  out = Fitted::partly;
}

void read_value(std::string& out, const json::value& v, const Reader& r) {
  if (!v.is_string()) fail_type("a string", v, r);
  out = v.get_string();
}

void read_value(Time& out, const json::value& v, const Reader& r) {
  out = parse_time(quantity_text(v, r), r.file(), r.where());
}
void read_value(Bytes& out, const json::value& v, const Reader& r) {
  out = parse_bytes(quantity_text(v, r), r.file(), r.where());
}
void read_value(Bandwidth& out, const json::value& v, const Reader& r) {
  out = parse_bandwidth(quantity_text(v, r), r.file(), r.where());
}
void read_value(FlopRate& out, const json::value& v, const Reader& r) {
  out = parse_flop_rate(quantity_text(v, r), r.file(), r.where());
}

void read_value(std::vector<int>& out, const json::value& v, const Reader& r) {
  if (!v.is_array()) fail_type("a list of integers", v, r);
  out.clear();
  for (std::size_t i = 0; i < v.get_array().size(); ++i)
    read_value(out.emplace_back(), v.get_array()[i], r.at_index(i));
}

void read_value(std::vector<std::string>& out, const json::value& v, const Reader& r) {
  out.clear();
  if (v.is_string()) {
    out.emplace_back(v.get_string());
    return;
  }
  if (!v.is_array()) fail_type("a string or a list of strings", v, r);
  for (std::size_t i = 0; i < v.get_array().size(); ++i)
    read_value(out.emplace_back(), v.get_array()[i], r.at_index(i));
}

json::value write_value(int v, UnitStyle) { return json::value(static_cast<std::int64_t>(v)); }
json::value write_value(const std::optional<int>& v, UnitStyle style) {
  return v ? write_value(*v, style) : json::value(nullptr);
}
json::value write_value(long long v, UnitStyle) { return json::value(static_cast<std::int64_t>(v)); }
json::value write_value(double v, UnitStyle) { return json::value(v); }
json::value write_value(bool v, UnitStyle) { return json::value(v); }
json::value write_value(Fitted v, UnitStyle) {
  return v == Fitted::partly ? json::value(json::string("partly")) : json::value(v == Fitted::yes);
}
json::value write_value(const std::string& v, UnitStyle) { return json::value(json::string(v)); }
json::value write_value(Time v, UnitStyle) { return json::value(json::string(format_time(v))); }
json::value write_value(Bytes v, UnitStyle) { return json::value(json::string(format_bytes(v))); }
json::value write_value(Bandwidth v, UnitStyle style) {
  return json::value(json::string(format_bandwidth(v, style == UnitStyle::bits)));
}
json::value write_value(FlopRate v, UnitStyle) { return json::value(json::string(format_flop_rate(v))); }

json::value write_value(const std::vector<int>& v, UnitStyle) {
  json::array out;
  for (int x : v) out.emplace_back(static_cast<std::int64_t>(x));
  return out;
}

json::value write_value(const std::vector<std::string>& v, UnitStyle) {
  json::array out;
  for (const auto& x : v) out.emplace_back(json::string(x));
  return out;
}

std::string_view enum_text(const json::value& v, const Reader& r) {
  if (!v.is_string()) fail_type("a string", v, r);
  return v.get_string();
}

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

void load_named_preset(std::string_view kind, const json::value& name, const Reader& r, json::value& document,
                       Reader& preset_reader) {
  if (!name.is_string()) fail_type("a preset name", name, r);
  if (r.preset_depth() >= 8) r.fail("presets nest more than 8 deep (does a preset name itself?)");
  const EmbeddedFile& file = find_preset(kind, name.get_string(), r);
  preset_reader = r.in_preset("configs/" + std::string(file.path));
  document = parse_json(file.text, preset_reader.file());
}

}  // namespace stepsim::io
