// The rank list of --trace-ranks: numbers and inclusive ranges, comma-separated.
#include "cli/trace_ranks.hpp"

#include <fmt/format.h>

#include <charconv>
#include <string_view>

#include "stepsim/error.hpp"

namespace stepsim::cli {
namespace {

[[noreturn]] void fail(std::string_view part, const std::string& why) {
  throw InputError("<command line>", "--trace-ranks", fmt::format("'{}': {}", part, why));
}

int parse_rank(std::string_view text, std::string_view part, int gpus) {
  int value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    fail(part, "expected a rank or a range of ranks, e.g. 0,5,100-120");
  if (value < 0 || value >= gpus) fail(part, fmt::format("the job's ranks are 0 to {}", gpus - 1));
  return value;
}

}  // namespace

RankSelection::RankSelection(const std::string& text, int gpus) {
  std::string_view rest = text;
  if (rest.empty()) fail(rest, "expected a rank or a range of ranks, e.g. 0,5,100-120");
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view part = rest.substr(0, comma);
    const std::size_t dash = part.find('-');
    const int lo = parse_rank(part.substr(0, dash), part, gpus);
    const int hi = dash == std::string_view::npos ? lo : parse_rank(part.substr(dash + 1), part, gpus);
    if (hi < lo) fail(part, "the range ends before it starts");
    ranges_.emplace_back(lo, hi);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
}

bool RankSelection::contains(int rank) const {
  if (ranges_.empty()) return true;
  for (const auto& [lo, hi] : ranges_)
    if (rank >= lo && rank <= hi) return true;
  return false;
}

}  // namespace stepsim::cli
