// The axes of a sweep (`--vary key=v1,v2` or ranges `lo:hi:xF`, `lo:hi:+S`) and the points
// of their cartesian product, numbered in a fixed order.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace stepsim::sweep {

struct Axis {
  std::string key;                  // a scenario key, e.g. data_parallel.bucket_cap_mb
  std::vector<std::string> values;  // the values as --set would take them
};

// Most points one sweep may have: a larger product is a mistake in the ranges.
inline constexpr std::size_t kMaxPoints = 1'000'000;

// "key=v1,v2,..." or "key=lo:hi:xF" (geometric, F > 1) or "key=lo:hi:+S" (arithmetic, S > 0).
// Errors are InputError("--vary", ...).
Axis parse_axis(const std::string& text);

// The axes a spec file (`--spec FILE`) lists: one KEY=VALUES a line, as --vary takes it, in
// the order the lines give them; blank lines and lines starting with '#' are skipped. The
// same sweep as the same --vary flags. InputError naming the file and the line ("line 3") on
// a line that is not KEY=VALUES, and naming the file when it cannot be read or lists none.
std::vector<Axis> read_spec_file(const std::string& path);

// The number of points of the product; InputError naming --vary above kMaxPoints.
std::size_t point_count(const std::vector<Axis>& axes);

// The values of point `index`: the first axis varies slowest (like nested loops in the
// order the axes were given), so point order is the same on every run.
std::vector<std::string> point_values(const std::vector<Axis>& axes, std::size_t index);

}  // namespace stepsim::sweep
