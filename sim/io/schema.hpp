// The machinery behind the scenario schema: each struct of stepsim/scenario.hpp declares its
// keys once, as a table of fields (scenario_schema.cpp), and that table drives reading,
// unknown-key errors, writing the resolved scenario and the preset listing.
#pragma once

#include <algorithm>
#include <boost/json/value.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "io/reader.hpp"
#include "stepsim/scenario.hpp"
#include "stepsim/units.hpp"

namespace stepsim::io {

namespace json = boost::json;

// How a quantity is written back: network links in bits per second, everything else in bytes.
enum class UnitStyle { bytes, bits };

template <class T>
struct Field {
  std::string_view key;
  void (*read)(T&, const json::value&, const Reader&);
  json::value (*write)(const T&);
};

template <class T>
struct Schema {
  std::span<const Field<T>> fields;
  std::string_view preset_kind;  // folder of configs/ whose presets the section may name, or ""
};

template <class T>
struct Tag {};

template <class E>
struct EnumName {
  std::string_view name;
  E value;
};

// Scalars: numbers, flags, names and quantities with units.
void read_value(int& out, const json::value& v, const Reader& r);
void read_value(long long& out, const json::value& v, const Reader& r);
void read_value(double& out, const json::value& v, const Reader& r);
void read_value(bool& out, const json::value& v, const Reader& r);
// true, false or "partly".
void read_value(Fitted& out, const json::value& v, const Reader& r);
void read_value(std::string& out, const json::value& v, const Reader& r);
void read_value(Time& out, const json::value& v, const Reader& r);
void read_value(Bytes& out, const json::value& v, const Reader& r);
void read_value(Bandwidth& out, const json::value& v, const Reader& r);
void read_value(FlopRate& out, const json::value& v, const Reader& r);
void read_value(std::vector<int>& out, const json::value& v, const Reader& r);
// A key that may be left out: given, an integer.
void read_value(std::optional<int>& out, const json::value& v, const Reader& r);
// A string or a list of strings.
void read_value(std::vector<std::string>& out, const json::value& v, const Reader& r);

json::value write_value(int v, UnitStyle);
json::value write_value(long long v, UnitStyle);
json::value write_value(double v, UnitStyle);
json::value write_value(bool v, UnitStyle);
json::value write_value(Fitted v, UnitStyle);
json::value write_value(const std::string& v, UnitStyle);
json::value write_value(Time v, UnitStyle);
json::value write_value(Bytes v, UnitStyle);
json::value write_value(Bandwidth v, UnitStyle style);
json::value write_value(FlopRate v, UnitStyle);
json::value write_value(const std::vector<int>& v, UnitStyle);
// Null when left out, which leaves the key out of its object.
json::value write_value(const std::optional<int>& v, UnitStyle);
json::value write_value(const std::vector<std::string>& v, UnitStyle);

// Enumerations, through their table of names (enum_names(Tag<E>), matched case-insensitively).
std::string_view enum_text(const json::value& v, const Reader& r);
bool same_name(std::string_view a, std::string_view b);

// A name users may try that means something else here, with what to write instead; "" when none.
template <class E>
std::string_view enum_hint(Tag<E>, std::string_view) {
  return {};
}
std::string_view enum_hint(Tag<DpKind>, std::string_view text);

template <class E>
requires std::is_enum_v<E>
void read_value(E& out, const json::value& v, const Reader& r) {
  const std::string_view text = enum_text(v, r);
  const auto names = enum_names(Tag<E>{});
  for (const auto& row : names)
    if (same_name(row.name, text)) {
      out = row.value;
      return;
    }
  if (const std::string_view hint = enum_hint(Tag<E>{}, text); !hint.empty())
    r.fail(fmt::format("unknown value '{}': {}", text, hint));
  std::vector<std::string_view> choices;
  for (const auto& row : names) choices.push_back(row.name);
  r.fail(unknown_name_message("value", text, choices));
}

template <class E>
requires std::is_enum_v<E> json::value write_value(E v, UnitStyle) {
  for (const auto& row : enum_names(Tag<E>{}))
    if (row.value == v) return json::value(json::string(row.name));
  return json::value(nullptr);
}

// Sections and nested objects, through their field table (schema_of(Tag<T>)).
void load_named_preset(std::string_view kind, const json::value& name, const Reader& r, json::value& document,
                       Reader& preset_reader);
[[noreturn]] void fail_unknown_key(std::string_view key, std::span<const std::string_view> keys, const Reader& r);
[[noreturn]] void fail_type(std::string_view expected, const json::value& v, const Reader& r);

// A list of names of an enumeration (a single name reads as a list of one), each named once.
template <class E>
requires std::is_enum_v<E>
void read_value(std::vector<E>& out, const json::value& v, const Reader& r) {
  out.clear();
  if (v.is_string()) {
    read_value(out.emplace_back(), v, r);
    return;
  }
  if (!v.is_array()) fail_type("a name or a list of names", v, r);
  for (std::size_t i = 0; i < v.get_array().size(); ++i) {
    E e{};
    const Reader at = r.at_index(i);
    read_value(e, v.get_array()[i], at);
    if (std::find(out.begin(), out.end(), e) != out.end())
      at.fail(fmt::format("'{}' is listed twice", enum_text(v.get_array()[i], at)));
    out.push_back(e);
  }
}

template <class E>
requires std::is_enum_v<E> json::value write_value(const std::vector<E>& v, UnitStyle style) {
  json::array out;
  for (const E& x : v) out.push_back(write_value(x, style));
  return out;
}

template <class T>
requires requires { schema_of(Tag<T>{}); }
void read_value(T& out, const json::value& v, const Reader& r);

template <class T>
const Field<T>* find_field(const Schema<T>& schema, std::string_view key) {
  for (const auto& f : schema.fields)
    if (f.key == key) return &f;
  return nullptr;
}

template <class T>
void read_fields(T& out, const Schema<T>& schema, const json::object& object, const Reader& r) {
  for (const auto& [key, value] : object) {
    if (key == "preset" && !schema.preset_kind.empty()) continue;
    const Field<T>* f = find_field(schema, key);
    if (f == nullptr) {
      std::vector<std::string_view> keys;
      for (const auto& known : schema.fields) keys.push_back(known.key);
      if (!schema.preset_kind.empty()) keys.push_back("preset");
      fail_unknown_key(key, keys, r.at(key));
    }
    f->read(out, value, r.at(key));
  }
}

// A preset name replaces the whole object by the preset; {"preset": name, ...} replaces it
// by the preset and then applies the other keys; a plain object overrides key by key.
template <class T>
requires requires { schema_of(Tag<T>{}); }
void read_value(T& out, const json::value& v, const Reader& r) {
  const Schema<T> schema = schema_of(Tag<T>{});
  const bool named = v.is_string() || (v.is_object() && v.get_object().contains("preset"));
  if (named && !schema.preset_kind.empty()) {
    const bool bare = v.is_string();
    json::value document;
    Reader preset_reader = r;
    load_named_preset(schema.preset_kind, bare ? v : v.get_object().at("preset"), bare ? r : r.at("preset"), document,
                      preset_reader);
    out = T{};
    read_value(out, document, preset_reader);
  }
  if (v.is_string() && !schema.preset_kind.empty()) return;
  if (!v.is_object()) fail_type(schema.preset_kind.empty() ? "an object" : "a preset name or an object", v, r);
  read_fields(out, schema, v.get_object(), r);
}

template <class T>
requires requires { schema_of(Tag<T>{}); }
json::value write_value(const T& v, UnitStyle) {
  json::object object;
  for (const auto& f : schema_of(Tag<T>{}).fields) {
    json::value value = f.write(v);
    // A key left out (an empty std::optional) is written as it was given: not at all.
    if (!value.is_null()) object[f.key] = std::move(value);
  }
  return object;
}

// A list of objects (simulation.variation.gpu_speed, ...): each element read whole.
template <class T>
requires requires { schema_of(Tag<T>{}); }
void read_value(std::vector<T>& out, const json::value& v, const Reader& r) {
  if (!v.is_array()) fail_type("a list of objects", v, r);
  out.clear();
  for (std::size_t i = 0; i < v.get_array().size(); ++i)
    read_value(out.emplace_back(), v.get_array()[i], r.at_index(i));
}

template <class T>
requires requires { schema_of(Tag<T>{}); }
json::value write_value(const std::vector<T>& v, UnitStyle style) {
  json::array out;
  for (const T& x : v) out.push_back(write_value(x, style));
  return out;
}

// One table row: `field<&Struct::member>("key")`.
template <class M>
struct MemberOf;
template <class C, class V>
struct MemberOf<V C::*> {
  using Owner = C;
};
template <auto M>
using OwnerOf = typename MemberOf<decltype(M)>::Owner;

template <auto M>
void read_member(OwnerOf<M>& owner, const json::value& v, const Reader& r) {
  read_value(owner.*M, v, r);
}

template <auto M, UnitStyle S>
json::value write_member(const OwnerOf<M>& owner) {
  return write_value(owner.*M, S);
}

template <auto M, UnitStyle S = UnitStyle::bytes>
constexpr Field<OwnerOf<M>> field(std::string_view key) {
  return {key, &read_member<M>, &write_member<M, S>};
}

}  // namespace stepsim::io
