// The rows of a sweep's output: the columns, one point as a CSV line (RFC 4180) or a JSON
// line, and reading those lines back (resume, merge).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sweep/point.hpp"

namespace stepsim::sweep {

enum class Format { csv, jsonl };

// The format of an output file by its extension (.csv, .jsonl; "-" is CSV on stdout);
// anything else is InputError naming `flag`.
Format format_of(const std::string& path, const std::string& flag);

// point, point_id, sweep_id, sweep_points, every varied key, parallel.dp when derived, status, reason, then the
// report's fields (docs/report.md names with units as suffixes).
std::vector<std::string> columns(const SweepSpec& spec);

// One line, newline included. Newlines inside a reason become spaces so that one row is
// one line (what makes appends and torn-line detection simple).
std::string format_header(const std::vector<std::string>& columns, Format format);
std::string format_row(const SweepSpec& spec, const PointResult& r, Format format);

// One CSV line of these fields, newline included: RFC 4180 quoting, newlines inside a field
// as spaces.
std::string csv_line(const std::vector<std::string>& fields);

// A figure as a row's cell writes it (CSV and JSON alike): the shortest text that reads back as
// the same double ("1.565813297598", "5.785936710269238e+11"); "" when it is not finite (no
// JSON number holds it).
std::string number_text(double v);

// The fields of one CSV line (no newline), RFC 4180 quoting; InputError(file, line) when
// a quote is unbalanced.
std::vector<std::string> parse_csv_line(const std::string& line, const std::string& file, std::size_t line_number);

// What resume and merge need of a row: its point index and point_id.
struct RowKey {
  std::size_t point = 0;
  std::uint64_t id = 0;
  bool operator<(const RowKey& o) const { return point != o.point ? point < o.point : id < o.id; }
  bool operator==(const RowKey& o) const = default;
};

// The header of a file's first line: the CSV columns, or the keys of the first JSON object.
std::vector<std::string> header_of(const std::string& first_line, Format format, const std::string& file);

// What a data line says of itself: its key, the sweep that wrote it and how many points
// that sweep has. InputError(file, line N) when a field is missing or malformed.
struct RowHead {
  RowKey key;
  std::uint64_t sweep = 0;
  std::size_t points = 0;
};

// Refuses, naming `file`, a header without the columns that say which sweep a row is of (a
// CSV file of no rows but a header line is checked by this alone).
void check_header(const std::vector<std::string>& header, const std::string& file);

RowHead head_of(const std::string& line, Format format, const std::vector<std::string>& header, const std::string& file,
                std::size_t line_number);

std::string format_id(std::uint64_t id);  // 16 lower-case hex digits

}  // namespace stepsim::sweep
