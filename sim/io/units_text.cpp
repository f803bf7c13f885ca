// Quantities with units as they appear in scenario files and on the command line:
// "2.5 us", "80 GiB", "400 Gb/s", "989 TFLOPS". One table of units per kind of quantity.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <span>
#include <string_view>

#include "io/scenario_loader.hpp"
#include "io/units_text.hpp"
#include "stepsim/error.hpp"

namespace stepsim::io {
namespace {

struct UnitRow {
  std::string_view name;
  double factor;  // to the base unit: picoseconds, bytes, bytes per second, FLOP/s
};

struct QuantityKind {
  std::string_view what;      // "a duration"
  std::string_view examples;  // shown when the unit is missing
  std::span<const UnitRow> units;
  bool case_insensitive;
};

constexpr UnitRow kTimeUnits[] = {
    {"ps", 1.0}, {"ns", 1e3}, {"us", 1e6}, {"\u00b5s", 1e6}, {"\u03bcs", 1e6}, {"ms", 1e9}, {"s", 1e12},
};

constexpr UnitRow kByteUnits[] = {
    {"B", 1.0},   {"KB", 1e3},     {"kB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
    {"TB", 1e12}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
};

// Units tried when writing a size back, largest first; "B" when none divides it.
constexpr UnitRow kByteFormats[] = {
    {"TiB", 1099511627776.0}, {"TB", 1e12}, {"GiB", 1073741824.0}, {"GB", 1e9},
    {"MiB", 1048576.0},       {"MB", 1e6},  {"KiB", 1024.0},       {"KB", 1e3},
};

constexpr UnitRow kBandwidthUnits[] = {
    {"b/s", 1.0 / 8},     {"Kb/s", 1e3 / 8},       {"Mb/s", 1e6 / 8},
    {"Gb/s", 1e9 / 8},    {"Tb/s", 1e12 / 8},      {"bps", 1.0 / 8},
    {"Kbps", 1e3 / 8},    {"kbps", 1e3 / 8},       {"Mbps", 1e6 / 8},
    {"Gbps", 1e9 / 8},    {"Tbps", 1e12 / 8},      {"B/s", 1.0},
    {"KB/s", 1e3},        {"kB/s", 1e3},           {"MB/s", 1e6},
    {"GB/s", 1e9},        {"TB/s", 1e12},          {"KiB/s", 1024.0},
    {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0}, {"TiB/s", 1099511627776.0},
    {"Bps", 1.0},         {"KBps", 1e3},           {"MBps", 1e6},
    {"GBps", 1e9},        {"TBps", 1e12},
};

constexpr UnitRow kFlopUnits[] = {
    {"FLOPS", 1.0},   {"KFLOPS", 1e3}, {"MFLOPS", 1e6},  {"GFLOPS", 1e9},   {"TFLOPS", 1e12},  {"PFLOPS", 1e15},
    {"EFLOPS", 1e18}, {"FLOP/s", 1.0}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15},
};

constexpr QuantityKind kTime{"a duration", "\"2.5 us\" or \"10 ms\"", kTimeUnits, false};
constexpr QuantityKind kBytes{"a size", "\"80 GiB\" or \"25 MB\"", kByteUnits, false};
constexpr QuantityKind kBandwidth{"a bandwidth", "\"400 Gb/s\" or \"50 GB/s\"", kBandwidthUnits, false};
constexpr QuantityKind kFlops{"a compute rate", "\"989 TFLOPS\" or \"19.5 TFLOPS\"", kFlopUnits, true};

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

bool same_unit(std::string_view a, std::string_view b, bool case_insensitive) {
  if (!case_insensitive) return a == b;
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
}

std::string unit_list(const QuantityKind& kind) {
  std::string out;
  for (const auto& row : kind.units) out += (out.empty() ? "" : ", ") + std::string(row.name);
  return out;
}

// The value of `text` in the base unit of `kind`, or InputError naming `file` and `where`.
double parse_quantity(const std::string& text, const QuantityKind& kind, const std::string& file,
                      const std::string& where) {
  const std::string_view s = trim(text);
  double number = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), number);
  const bool numeric_start =
      !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.' || s[0] == '-');
  if (ec != std::errc() || !numeric_start || !std::isfinite(number))
    throw InputError(file, where, fmt::format("'{}' is not {} (expected e.g. {})", text, kind.what, kind.examples));
  const std::string_view unit = trim(s.substr(static_cast<std::size_t>(end - s.data())));
  if (unit.empty())
    throw InputError(file, where, fmt::format("'{}' has no unit (expected e.g. {})", text, kind.examples));
  if (number < 0) throw InputError(file, where, fmt::format("'{}' is negative", text));
  for (const auto& row : kind.units) {
    if (!same_unit(unit, row.name, kind.case_insensitive)) continue;
    const double value = number * row.factor;
    if (!std::isfinite(value)) throw InputError(file, where, fmt::format("'{}' is out of range", text));
    return value;
  }
  throw InputError(file, where,
                   fmt::format("'{}' has an unknown unit '{}' (expected one of {})", text, unit, unit_list(kind)));
}

// Writes `value / factor` with `unit` when that text parses back to exactly `value`.
template <class Parse>
std::string exact_text(double value, double factor, std::string_view unit, Parse parse_back) {
  const std::string text = fmt::format("{} {}", value / factor, unit);
  return parse_back(text) ? text : std::string();
}

}  // namespace

Time parse_time(const std::string& text, const std::string& file, const std::string& where) {
  const double ps = parse_quantity(text, kTime, file, where);
  if (ps > 9.2e18) throw InputError(file, where, fmt::format("'{}' is too long (at most 106 days)", text));
  return Time::from_ps(std::llround(ps));
}

Bytes parse_bytes(const std::string& text, const std::string& file, const std::string& where) {
  const double bytes = parse_quantity(text, kBytes, file, where);
  if (bytes > 9.2e18) throw InputError(file, where, fmt::format("'{}' is too large", text));
  const double whole = std::round(bytes);
  if (std::abs(bytes - whole) > 1e-9 * std::max(1.0, bytes))
    throw InputError(file, where, fmt::format("'{}' is not a whole number of bytes", text));
  return Bytes(static_cast<std::int64_t>(whole));
}

Bandwidth parse_bandwidth(const std::string& text, const std::string& file, const std::string& where) {
  return Bandwidth::bytes_per_s(parse_quantity(text, kBandwidth, file, where));
}

FlopRate parse_flop_rate(const std::string& text, const std::string& file, const std::string& where) {
  return FlopRate::flops_per_s(parse_quantity(text, kFlops, file, where));
}

std::string format_time(Time t) {
  const std::int64_t ps = t.ps();
  const std::int64_t magnitude = ps < 0 ? -ps : ps;
  if (ps == 0) return "0 us";
  if (ps % 1'000'000'000'000 == 0) return fmt::format("{} s", ps / 1'000'000'000'000);
  if (magnitude >= 1'000'000'000) return fmt::format("{} ms", static_cast<double>(ps) / 1e9);
  if (magnitude >= 1'000'000) return fmt::format("{} us", static_cast<double>(ps) / 1e6);
  if (magnitude >= 1'000) return fmt::format("{} ns", static_cast<double>(ps) / 1e3);
  return fmt::format("{} ps", ps);
}

std::string format_bytes(Bytes b) {
  const std::int64_t n = b.count();
  if (n == 0) return "0 B";
  for (const auto& row : kByteFormats) {
    const auto factor = static_cast<std::int64_t>(row.factor);
    if (n % factor == 0) return fmt::format("{} {}", n / factor, row.name);
  }
  return fmt::format("{} B", n);
}

std::string format_bandwidth(Bandwidth bw, bool bits) {
  const double v = bw.bytes_per_s();
  auto same = [v](const std::string& text) { return parse_bandwidth(text, "", "").bytes_per_s() == v; };
  std::string text;
  if (bits)
    text = exact_text(v, 1e9 / 8, "Gb/s", same);
  else if (v >= 1e12)
    text = exact_text(v, 1e12, "TB/s", same);
  else
    text = exact_text(v, 1e9, "GB/s", same);
  if (text.empty()) text = exact_text(v, 1.0, "B/s", same);
  return text;
}

std::string format_flop_rate(FlopRate r) {
  const double v = r.flops_per_s();
  auto same = [v](const std::string& text) { return parse_flop_rate(text, "", "").flops_per_s() == v; };
  std::string text = exact_text(v, 1e12, "TFLOPS", same);
  return text.empty() ? exact_text(v, 1.0, "FLOPS", same) : text;
}

}  // namespace stepsim::io
