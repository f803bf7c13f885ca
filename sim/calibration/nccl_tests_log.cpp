// nccl-tests table rows: `size count type redop root | time algbw busbw #wrong | time algbw
// busbw #wrong` (current) or the same without root and with a float error (before mid-2022).
#include "calibration/nccl_tests_log.hpp"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include "stepsim/error.hpp"

namespace stepsim::calibration {
namespace {

constexpr const char* kLayout = "size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong";

struct LineReader {
  const std::string& source;
  int line;
  const std::vector<std::string>& tokens;

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(source, fmt::format("line {}", line), what);
  }

  template <class T>
  T number(std::size_t i, const char* column) const {
    const std::string& t = tokens[i];
    T value{};
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
    if (ec != std::errc() || end != t.data() + t.size())
      fail(fmt::format("expected a number for {} (column {}), got '{}'", column, i + 1, t));
    return value;
  }

  NcclTestsResult result(std::size_t first) const {
    NcclTestsResult r;
    const double us = number<double>(first, "time");
    // Beyond a day a row is not a measurement of one collective, and beyond 106 days it
    // would not fit in the simulator's time.
    if (!(us >= 0 && us <= 86400e6)) fail(fmt::format("expected a time from 0 to 86400000000 us, got {}", us));
    r.time = Time::from_us(us);
    r.algbw = Bandwidth::gbytes_per_s(number<double>(first + 1, "algbw"));
    r.busbw = Bandwidth::gbytes_per_s(number<double>(first + 2, "busbw"));
    if (tokens[first + 3] != "N/A") r.wrong = number<double>(first + 3, "#wrong");
    return r;
  }
};

std::vector<std::string> split(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

// mpirun prefixes such as "[0]" or "[1,0]<stdout>:" come before the row.
void drop_mpi_prefix(std::vector<std::string>& tokens) {
  while (!tokens.empty() && tokens.front().front() == '[') {
    const auto close = tokens.front().find(']');
    const std::string rest = close == std::string::npos ? "" : tokens.front().substr(close + 1);
    const bool tag_only = rest.empty() || rest.back() == ':';
    if (!tag_only) return;
    tokens.erase(tokens.begin());
  }
}

NcclTestsRow parse_row(const LineReader& r) {
  const std::size_t n = r.tokens.size();
  if (n != 12 && n != 13)
    r.fail(fmt::format("expected an nccl-tests row of 12 or 13 columns ({}), got {} column(s)", kLayout, n));
  const bool current = n == 13;
  NcclTestsRow row;
  row.size = Bytes(r.number<long long>(0, "size"));
  row.count = r.number<long long>(1, "count");
  row.type = r.tokens[2];
  row.redop = r.tokens[3];
  if (current) row.root = r.number<int>(4, "root");
  const std::size_t first = current ? 5 : 4;
  row.out_of_place = r.result(first);
  row.in_place = r.result(first + 4);
  return row;
}

}  // namespace

NcclTestsLog parse_nccl_tests(std::istream& in, const std::string& source) {
  NcclTestsLog log{source, {}};
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    std::vector<std::string> tokens = split(text);
    drop_mpi_prefix(tokens);
    if (tokens.empty() || tokens.front().front() == '#') continue;
    log.rows.push_back(parse_row(LineReader{source, line, tokens}));
  }
  return log;
}

NcclTestsLog read_nccl_tests(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "", "cannot open the nccl-tests log");
  return parse_nccl_tests(in, path);
}

}  // namespace stepsim::calibration
