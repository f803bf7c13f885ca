// Parsing of --vary axes: value lists and numeric ranges, and the product's point order.
#include "sweep/axes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "stepsim/error.hpp"
#include "stepsim/input_files.hpp"
#include "stepsim/text.hpp"

namespace stepsim::sweep {
namespace {

double parse_number(const std::string& text, const std::string& axis, const char* what) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || !std::isfinite(value))
    throw InputError("--vary", axis, fmt::format("expected a number as the range's {}, got '{}'", what, text));
  return value;
}

// An integer written as one ("12", "-3"; not "1e3" nor "4.0") that 64 bits hold.
std::optional<long long> written_integer(const std::string& text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

// An arithmetic range of integers, counted exactly: beyond 2^53 a double cannot tell
// 9007199254740993 from 9007199254740992. The step is checked above 0 already.
std::vector<std::string> integer_range(const std::string& key, long long lo, long long hi, long long step) {
  if (hi < lo)
    throw InputError("--vary", key, fmt::format("the range's upper bound {} is below its lower bound {}", hi, lo));
  // In unsigned 64 bits, where hi - lo cannot overflow; each value lo + k·step is one again.
  const auto first = static_cast<unsigned long long>(lo);
  const auto stride = static_cast<unsigned long long>(step);
  const unsigned long long steps = (static_cast<unsigned long long>(hi) - first) / stride;
  if (steps >= kMaxPoints)
    throw InputError("--vary", key, fmt::format("the range has more than {} values", kMaxPoints));
  std::vector<std::string> values;
  for (unsigned long long k = 0; k <= steps; ++k)
    values.push_back(std::to_string(static_cast<long long>(first + k * stride)));
  return values;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

// The values of a list "v1,v2,...", split at the commas outside JSON brackets and strings, so
// that a list or object value keeps its own: training.cuda_graph_scope=["attn"],["attn","mlp"]
// is two values.
std::vector<std::string> split_values(const std::string& key, const std::string& text) {
  std::vector<std::string> parts(1);
  std::string closers;  // the brackets open at this point, innermost last
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '\\' && i + 1 < text.size()) {
        parts.back() += c;
        parts.back() += text[++i];
        continue;
      }
      if (c == '"') quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '[' || c == '{') {
      closers.push_back(c == '[' ? ']' : '}');
    } else if (c == ']' || c == '}') {
      if (closers.empty() || closers.back() != c)
        throw InputError("--vary", key, fmt::format("unbalanced '{}' at character {} of '{}'", c, i + 1, text));
      closers.pop_back();
    } else if (c == ',' && closers.empty()) {
      parts.emplace_back();
      continue;
    }
    parts.back() += c;
  }
  if (quoted) throw InputError("--vary", key, fmt::format("a '\"' is not closed in '{}'", text));
  if (!closers.empty())
    throw InputError("--vary", key, fmt::format("'{}' is not closed in '{}'", closers.back() == ']' ? '[' : '{', text));
  return parts;
}

// "lo:hi:xF" or "lo:hi:+S": every value from lo up to hi (inclusive, with a relative
// tolerance so that 0.1 steps reach hi).
std::vector<std::string> expand_range(const std::string& key, const std::string& text) {
  const auto parts = split(text, ':');
  if (parts.size() != 3 || parts[2].size() < 2 || (parts[2][0] != 'x' && parts[2][0] != '+'))
    throw InputError("--vary", key,
                     fmt::format("expected a range lo:hi:xF (geometric) or lo:hi:+S (arithmetic), got '{}'", text));
  const double lo = parse_number(parts[0], key, "lower bound");
  const double hi = parse_number(parts[1], key, "upper bound");
  const bool geometric = parts[2][0] == 'x';
  const double step = parse_number(parts[2].substr(1), key, geometric ? "factor" : "step");
  if (geometric && !(step > 1))
    throw InputError("--vary", key, fmt::format("the range's factor must be greater than 1, got {}", step));
  if (!geometric && !(step > 0))
    throw InputError("--vary", key, fmt::format("the range's step must be greater than 0, got {}", step));
  if (geometric && !(lo > 0))
    throw InputError("--vary", key, fmt::format("a geometric range must start above 0, got {}", lo));
  if (hi < lo)
    throw InputError("--vary", key, fmt::format("the range's upper bound {} is below its lower bound {}", hi, lo));
  if (!geometric) {
    const auto lo_integer = written_integer(parts[0]), hi_integer = written_integer(parts[1]),
               step_integer = written_integer(parts[2].substr(1));
    if (lo_integer && hi_integer && step_integer) return integer_range(key, *lo_integer, *hi_integer, *step_integer);
  }
  const double span = geometric ? std::log(hi / lo) / std::log(step) : (hi - lo) / step;
  if (!(span < static_cast<double>(kMaxPoints)))
    throw InputError("--vary", key, fmt::format("the range has more than {} values", kMaxPoints));
  std::vector<std::string> values;
  // The tolerance takes in hi where rounding left a value a hair above it, never a value a whole
  // step (or factor) beyond it: at most half the last step.
  const double last_step = geometric ? hi - hi / step : step;
  const double limit = hi + std::min(std::abs(hi) * 1e-9, last_step / 2);
  double v = lo;  // geometric: each value from the one before
  for (;;) {
    // Arithmetic steps accumulate rounding: each value from lo, and integers printed as such.
    const double exact = geometric ? v : lo + step * static_cast<double>(values.size());
    if (!(exact <= limit)) break;
    if (values.size() >= kMaxPoints)
      throw InputError("--vary", key, fmt::format("the range has more than {} values", kMaxPoints));
    const double rounded = std::round(exact);
    std::string shown =
        fmt::format("{}", std::abs(exact - rounded) < 1e-9 * std::max(1.0, std::abs(exact)) ? rounded : exact);
    // A step below the values' precision would give one value again and again (2^53 + 1 is
    // 2^53 as a double).
    if (!values.empty() && shown == values.back())
      throw InputError("--vary", key,
                       fmt::format("the range's {} {} is below the precision of its values near {}: two values "
                                   "would be the same number",
                                   geometric ? "factor" : "step", parts[2].substr(1), shown));
    values.push_back(std::move(shown));
    v *= step;
  }
  return values;
}

constexpr const char* kBlanks = " \t\r";

std::string trimmed(const std::string& text) {
  const std::size_t first = text.find_first_not_of(kBlanks);
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(kBlanks) - first + 1);
}

}  // namespace

// "KEY = V1, V2" is KEY=V1,V2: the key and each value without the blanks around them, as a spec
// file's line (read_spec_file), so that the two give one sweep and one sweep_id.
Axis parse_axis(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError("--vary", text, "expected KEY=V1,V2,... or KEY=LO:HI:xF or KEY=LO:HI:+S");
  Axis axis{trimmed(text.substr(0, eq)), {}};
  if (axis.key.empty()) throw InputError("--vary", text, "expected KEY=V1,V2,... or KEY=LO:HI:xF or KEY=LO:HI:+S");
  const std::string values = trimmed(text.substr(eq + 1));
  if (values.empty()) throw InputError("--vary", axis.key, "no values given (expected e.g. parallel.tp=1,2,4)");
  // A range is numbers and colons; a JSON string, list or object is a value of its own.
  if (values.find(':') != std::string::npos && values.find(',') == std::string::npos &&
      values.find_first_of("\"[{") == std::string::npos) {
    axis.values = expand_range(axis.key, values);
    return axis;
  }
  for (auto& value : split_values(axis.key, values)) {
    value = trimmed(value);
    if (value.empty()) throw InputError("--vary", axis.key, fmt::format("empty value in '{}'", values));
    axis.values.push_back(std::move(value));
  }
  if (axis.values.size() > kMaxPoints)
    throw InputError("--vary", axis.key, fmt::format("more than {} values", kMaxPoints));
  return axis;
}

namespace {

// A spec line without its comment: from a '#' that starts the line or follows a space or tab,
// outside a JSON string ("a #b" keeps its '#').
std::string without_comment(const std::string& line) {
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
      return line.substr(0, i);
    }
  }
  return line;
}

}  // namespace

InputError axis_error(const Axis& axis, const std::string& where, const std::string& message) {
  if (axis.file.empty()) return InputError("--vary", where, message);
  return InputError(axis.file, fmt::format("line {}", axis.line), fmt::format("{}: {}", where, message));
}

std::vector<Axis> read_spec_file(const std::string& path) {
  if (path.empty()) throw InputError("--spec", "", "the spec file name is empty");
  std::ifstream in(path == "-" ? "/dev/stdin" : path, std::ios::binary);
  if (!in) throw InputError(path, "", fmt::format("cannot read the spec file: {}", std::strerror(errno)));
  note_input_file(path);
  std::ostringstream whole;
  whole << in.rdbuf();
  if (in.bad()) throw InputError(path, "", fmt::format("cannot read the spec file: {}", std::strerror(errno)));
  // A byte order mark first is no part of the first key; the rest is UTF-8 text, as keys are.
  const std::string all = whole.str();
  const std::string_view body = without_bom(all);
  check_utf8(body, path, all.size() - body.size());
  std::istringstream lines{std::string(body)};
  std::vector<Axis> axes;
  std::string line;
  for (std::size_t number = 1; std::getline(lines, line); ++number) {
    std::string text = trimmed(without_comment(line));
    if (text.empty()) continue;
    // "KEY = V1, V2": the key and each value without the blanks around them.
    if (const auto eq = text.find('='); eq != std::string::npos)
      text = trimmed(text.substr(0, eq)) + "=" + trimmed(text.substr(eq + 1));
    try {
      axes.push_back(parse_axis(text));
    } catch (const InputError& e) {
      // parse_axis names --vary and the key: here the file and the line say where.
      throw InputError(path, fmt::format("line {}", number), fmt::format("{}: {}", e.where(), e.message()));
    }
    Axis& axis = axes.back();
    axis.file = path;
    axis.line = number;
    for (auto& value : axis.values) {
      value = trimmed(value);
      if (value.empty()) throw axis_error(axis, axis.key, fmt::format("empty value in '{}'", line));
    }
    for (std::size_t i = 0; i + 1 < axes.size(); ++i)
      if (axes[i].key == axis.key)
        throw axis_error(
            axis, axis.key,
            fmt::format("the key is varied twice (line {} varies it too): give its values in one line", axes[i].line));
  }
  if (axes.empty())
    throw InputError(path, "",
                     "lists no variation (expected lines KEY=V1,V2,... or KEY=LO:HI:xF or KEY=LO:HI:+S, as --vary "
                     "takes them)");
  return axes;
}

std::size_t point_count(const std::vector<Axis>& axes) {
  std::size_t count = 1;
  for (const auto& axis : axes) {
    if (axis.values.size() > kMaxPoints / count)
      throw axis_error(axis, axis.key,
                       fmt::format("the sweep would have more than {} points; narrow the ranges", kMaxPoints));
    count *= axis.values.size();
  }
  return count;
}

std::vector<std::string> point_values(const std::vector<Axis>& axes, std::size_t index) {
  std::vector<std::string> values(axes.size());
  for (std::size_t i = axes.size(); i-- > 0;) {
    values[i] = axes[i].values[index % axes[i].values.size()];
    index /= axes[i].values.size();
  }
  return values;
}

}  // namespace stepsim::sweep
