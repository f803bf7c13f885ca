// Deterministic JSON text shared by the report and trace writers: string escaping, numbers
// in shortest round-trip form, and a pretty printer that keeps object keys in order.
#pragma once

#include <fmt/format.h>

#include <boost/json/value.hpp>
#include <iosfwd>
#include <string_view>

namespace stepsim::report {

// Appends `s` as a quoted JSON string; bytes ≥ 0x80 pass through unchanged (UTF-8).
void append_json_string(fmt::memory_buffer& buf, std::string_view s);

// Appends `v` in shortest round-trip form ("13.75", "1e-05"); NaN and infinities as null.
void append_json_number(fmt::memory_buffer& buf, double v);

// A rank as the reports write it: its number, or null where it is not known (a trace that
// does not say, no straggler), never -1, which a reader would take for a rank.
boost::json::value rank_json(int rank);

// Writes `v` with two-space indentation, keys in insertion order, and a final newline.
void write_pretty_json(const boost::json::value& v, std::ostream& out);

}  // namespace stepsim::report
