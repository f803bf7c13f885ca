// JSON text in and out for scenario files: parsing with comments and trailing commas whose
// errors say "line L, column C", and a deterministic indented writer.
#pragma once

#include <boost/json/value.hpp>
#include <string>
#include <string_view>

namespace stepsim::io {

// Parses `text`; malformed input is an InputError naming `source` and the line and column.
boost::json::value parse_json(std::string_view text, const std::string& source);

// Like parse_json but returns false instead of throwing (for --set values).
bool try_parse_json(std::string_view text, boost::json::value& out);

// Indented JSON with keys in insertion order and numbers in their shortest exact form.
std::string pretty_json(const boost::json::value& v);

// A number as JSON writes it, in its shortest exact form ("400", "0.82", "2e+10").
std::string number_text(const boost::json::value& v);

// A short description of a value's type and content for "expected X, got Y" errors.
std::string describe_value(const boost::json::value& v);

}  // namespace stepsim::io
