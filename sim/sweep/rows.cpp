// Formatting and reading the rows of a sweep: CSV per RFC 4180 and JSON lines with the
// same fields in the same order.
#include "sweep/rows.hpp"

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "report/output_target.hpp"
#include "stepsim/error.hpp"
#include "stepsim/timeline.hpp"

namespace stepsim::sweep {
namespace json = boost::json;
namespace {

// A value of a row, typed for JSON (CSV writes the text of every kind).
struct Cell {
  enum Kind { text, number, boolean, null } kind = null;
  std::string value;
};

Cell text_cell(std::string s) { return {Cell::text, std::move(s)}; }
// A figure that is not finite has no JSON number: it is left empty (null), as an unknown one.
Cell number_cell(double v) { return std::isfinite(v) ? Cell{Cell::number, number_text(v)} : Cell{}; }

// Whether `v` is a number JSON can write: Boost.JSON reads 1e400 as infinity, which it then
// writes as Infinity, no JSON at all.
bool finite_number(const json::value& v) {
  return v.is_int64() || v.is_uint64() || (v.is_double() && std::isfinite(v.as_double()));
}

// A varied value as the JSON scalar it is when it is one (numbers, true), else text: as the
// scenario loader reads it, for which a number out of range (1e400) is a string.
Cell varied_cell(const std::string& s) {
  json::error_code ec;
  const json::value v = json::parse(s, ec);
  if (!ec && v.is_bool()) return {Cell::boolean, s};
  if (!ec && finite_number(v)) return {Cell::number, s};
  return text_cell(s);
}

std::vector<std::string> metric_columns() {
  std::vector<std::string> names = {"step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "compute_s"};
  for (std::size_t k = 0; k < kCommKinds; ++k)
    names.push_back(fmt::format("exposed_{}_s", to_string(static_cast<CommKind>(k))));
  for (const char* name : {"exposed_total_s", "hidden_fraction", "bubble_s", "optimizer_s", "memory_peak_bytes",
                           "memory_in_use_bytes", "memory_headroom_bytes", "memory_capacity_bytes", "fits"})
    names.emplace_back(name);
  return names;
}

std::vector<Cell> metric_cells(const PointResult& r) {
  std::vector<Cell> cells(metric_columns().size());
  if (!r.report) return cells;
  const Report& rep = *r.report;
  std::size_t i = 0;
  // A point that does not fit keeps only its memory figures unless --keep-oom made it `ok`.
  const bool timings = r.status == Status::ok;
  auto put = [&](double v) {
    if (timings) cells[i] = number_cell(v);
    ++i;
  };
  put(rep.step_time_s);
  put(rep.throughput.tokens_per_s);
  put(rep.throughput.tflops_per_gpu);
  put(rep.throughput.mfu);
  put(rep.breakdown_s.compute);
  for (const double e : rep.breakdown_s.exposed_comm) put(e);
  put(rep.breakdown_s.exposed_total());
  put(rep.overlap.hidden_fraction);
  put(rep.breakdown_s.bubble);
  put(rep.breakdown_s.optimizer);
  if (rep.memory_bytes.modelled) {
    // fits compares the memory in use (allocator reserve, CUDA context, NCCL buffers) plus
    // the headroom with the capacity; the live tensors' peak alone would not explain it.
    cells[i] = number_cell(rep.memory_bytes.peak);
    cells[i + 1] = number_cell(rep.memory_bytes.device);
    cells[i + 2] = number_cell(rep.memory_bytes.headroom);
    cells[i + 3] = number_cell(rep.memory_bytes.capacity);
    cells[i + 4] = {Cell::boolean, rep.memory_bytes.fits ? "true" : "false"};
  }
  return cells;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string quoted = "\"";
  for (const char c : s) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

json::value json_of(const Cell& c) {
  switch (c.kind) {
    case Cell::text:
      return json::string(c.value);
    case Cell::number: {
      json::error_code ec;
      json::value v = json::parse(c.value, ec);
      if (ec || !finite_number(v)) return json::string(c.value);
      // Boost.JSON's parser (1.81) rounds some decimals to a neighbour of the double they were
      // written from (478300.81545073213 read as 478300.8154507322): the value is the text read
      // correctly rounded, as CSV and simulate's JSON give it, to the last digit.
      if (v.is_double()) std::from_chars(c.value.data(), c.value.data() + c.value.size(), v.as_double());
      return v;
    }
    case Cell::boolean:
      return c.value == "true";
    case Cell::null:
      return nullptr;
  }
  return nullptr;
}

template <typename T>
bool whole(const std::string& text, int base, T& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

bool hex_id(const std::string& text, std::uint64_t& value) { return text.size() == 16 && whole(text, 16, value); }

InputError missing_column(const std::string& file, const char* name) {
  return InputError(file, "line 1",
                    fmt::format("has no '{}' column: not the rows of a stepsim sweep (or of one older than "
                                "sweep_id, which cannot be resumed or merged: run it again)",
                                name));
}

}  // namespace

std::string number_text(double v) { return std::isfinite(v) ? fmt::format("{}", v) : std::string(); }

std::string csv_line(const std::vector<std::string>& fields) {
  std::string line;
  for (std::size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + csv_field(one_line(fields[i]));
  return line + "\n";
}

Format format_of(const std::string& path, const std::string& flag) {
  if (path.ends_with(".csv")) return Format::csv;
  if (path.ends_with(".jsonl")) return Format::jsonl;
  if (report::is_written_through(path)) return Format::csv;  // '-', a device, a FIFO: CSV as on stdout
  throw InputError(
      flag, path, "expected a file name ending in .csv or .jsonl (or '-', a device or a FIFO for CSV written through)");
}

std::string format_id(std::uint64_t id) { return fmt::format("{:016x}", id); }

std::vector<std::string> columns(const SweepSpec& spec) {
  std::vector<std::string> names = {"point", "point_id", "sweep_id", "sweep_points"};
  for (const auto& axis : spec.axes) names.push_back(axis.key);
  if (spec.gpus != 0) names.emplace_back("parallel.dp");
  names.emplace_back("status");
  names.emplace_back("reason");
  for (auto& name : metric_columns()) names.push_back(std::move(name));
  return names;
}

std::string format_header(const std::vector<std::string>& names, Format format) {
  return format == Format::csv ? csv_line(names) : std::string();
}

std::string format_row(const SweepSpec& spec, const PointResult& r, Format format) {
  std::vector<Cell> cells = {{Cell::number, std::to_string(r.index)},
                             text_cell(format_id(r.id)),
                             text_cell(format_id(spec.sweep_id)),
                             {Cell::number, std::to_string(spec.points)}};
  for (const auto& v : r.values) cells.push_back(varied_cell(v));
  if (spec.gpus != 0) cells.push_back(r.dp.empty() ? Cell{} : Cell{Cell::number, r.dp});
  cells.push_back(text_cell(to_string(r.status)));
  cells.push_back(text_cell(one_line(r.reason)));
  for (auto& c : metric_cells(r)) cells.push_back(std::move(c));
  const auto names = columns(spec);
  if (format == Format::csv) {
    std::vector<std::string> fields;
    for (const auto& c : cells) fields.push_back(c.value);
    return csv_line(fields);
  }
  json::object object;
  for (std::size_t i = 0; i < cells.size(); ++i) object[names[i]] = json_of(cells[i]);
  return json::serialize(object) + "\n";
}

std::vector<std::string> parse_csv_line(const std::string& line, const std::string& file, std::size_t line_number) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c != '"') {
        fields.back() += c;
      } else if (i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else {
        quoted = false;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) throw InputError(file, fmt::format("line {}", line_number), "unbalanced quote in a CSV row");
  return fields;
}

std::vector<std::string> header_of(const std::string& first_line, Format format, const std::string& file) {
  if (format == Format::csv) return parse_csv_line(first_line, file, 1);
  json::error_code ec;
  const json::value v = json::parse(first_line, ec);
  if (ec || !v.is_object()) throw InputError(file, "line 1", "expected a JSON object per line");
  std::vector<std::string> keys;
  for (const auto& kv : v.as_object()) keys.emplace_back(kv.key());
  return keys;
}

namespace {
constexpr std::array<const char*, 4> kNames = {"point", "point_id", "sweep_id", "sweep_points"};
}

void check_header(const std::vector<std::string>& header, const std::string& file) {
  for (const char* name : kNames)
    if (std::find(header.begin(), header.end(), name) == header.end()) throw missing_column(file, name);
}

RowHead head_of(const std::string& line, Format format, const std::vector<std::string>& header, const std::string& file,
                std::size_t line_number) {
  const std::string where = fmt::format("line {}", line_number);
  std::array<std::string, 4> text;
  if (format == Format::csv) {
    const auto fields = parse_csv_line(line, file, line_number);
    if (fields.size() != header.size())
      throw InputError(file, where,
                       fmt::format("expected {} fields as in the header, got {}", header.size(), fields.size()));
    for (std::size_t k = 0; k < kNames.size(); ++k) {
      const auto column = std::find(header.begin(), header.end(), kNames[k]);
      if (column == header.end()) throw missing_column(file, kNames[k]);
      text[k] = fields[static_cast<std::size_t>(column - header.begin())];
    }
  } else {
    json::error_code ec;
    const json::value v = json::parse(line, ec);
    const json::object* o = ec ? nullptr : v.if_object();
    if (o == nullptr) throw InputError(file, where, "expected a JSON object per line");
    // Every row has the keys of the first, in its order, as every CSV row has the header's
    // fields.
    for (const std::string& key : header)
      if (!o->contains(key))
        throw InputError(file, where,
                         fmt::format("has no key '{}': expected the keys of line 1, as every row has", key));
    if (o->size() != header.size()) {
      for (const auto& kv : *o)
        if (std::find(header.begin(), header.end(), std::string_view(kv.key())) == header.end())
          throw InputError(file, where,
                           fmt::format("has the key '{}', which line 1 has not: expected the keys of line 1",
                                       std::string_view(kv.key())));
      throw InputError(file, where, fmt::format("expected {} keys as line 1 has, got {}", header.size(), o->size()));
    }
    for (std::size_t k = 0; k < kNames.size(); ++k) {
      const json::value* cell = o->if_contains(kNames[k]);
      if (cell == nullptr) throw missing_column(file, kNames[k]);
      // As the sweep writes them: point and sweep_points numbers, the ids strings.
      const bool id = k == 1 || k == 2;
      if (id ? !cell->is_string() : !cell->is_number())
        throw InputError(file, fmt::format("{}, key '{}'", where, kNames[k]),
                         fmt::format("expected {}, got {}", id ? "a string of 16 hex digits" : "a whole number",
                                     json::serialize(*cell)));
      text[k] = cell->is_string() ? std::string(cell->get_string()) : json::serialize(*cell);
    }
  }
  RowHead head;
  if (!whole(text[0], 10, head.key.point) || !hex_id(text[1], head.key.id) || !hex_id(text[2], head.sweep) ||
      !whole(text[3], 10, head.points) || head.key.point >= head.points)
    throw InputError(file, where,
                     fmt::format("expected a point index below sweep_points and 16-digit point_id and sweep_id, got "
                                 "'{}', '{}', '{}' and '{}'",
                                 text[0], text[1], text[2], text[3]));
  return head;
}

}  // namespace stepsim::sweep
