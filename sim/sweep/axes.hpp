// The axes of a sweep (`--vary key=v1,v2` or ranges `lo:hi:xF`, `lo:hi:+S`) and the points
// of their cartesian product, numbered in a fixed order.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "stepsim/error.hpp"

namespace stepsim::sweep {

struct Axis {
  Axis() = default;
  Axis(std::string key_, std::vector<std::string> values_) : key(std::move(key_)), values(std::move(values_)) {}

  std::string key;                  // a scenario key, e.g. data_parallel.bucket_cap_mb
  std::vector<std::string> values;  // the values as --set would take them
  // Where the axis was given: the spec file and its line (1-based), or "" and 0 for --vary.
  std::string file;
  std::size_t line = 0;
};

// The InputError for `axis` at `where` (its key, or a key below it): naming --vary, or the spec
// file and line the axis came from ("axes.txt: line 3: parallel.tpp: unknown key ...").
InputError axis_error(const Axis& axis, const std::string& where, const std::string& message);

// Most points one sweep may have: a larger product is a mistake in the ranges.
inline constexpr std::size_t kMaxPoints = 1'000'000;

// "key=v1,v2,..." or "key=lo:hi:xF" (geometric, F > 1) or "key=lo:hi:+S" (arithmetic, S > 0).
// Errors are InputError("--vary", ...).
Axis parse_axis(const std::string& text);

// The axes a spec file (`--spec FILE`) lists: one KEY=VALUES a line, as --vary takes it, in
// the order the lines give them; blank lines and lines starting with '#' are skipped, and a
// '#' after a space or tab outside a JSON string starts a comment to the end of the line; the
// key and each value are trimmed of spaces and tabs. The same sweep as the same --vary flags.
// InputError naming the file and the line ("line 3") on a line that is not KEY=VALUES, and
// naming the file when it cannot be read or lists none. Each axis records its file and line,
// so that later errors about it (axis_error) name them too.
std::vector<Axis> read_spec_file(const std::string& path);

// The number of points of the product; InputError naming --vary above kMaxPoints.
std::size_t point_count(const std::vector<Axis>& axes);

// The values of point `index`: the first axis varies slowest (like nested loops in the
// order the axes were given), so point order is the same on every run.
std::vector<std::string> point_values(const std::vector<Axis>& axes, std::size_t index);

}  // namespace stepsim::sweep
