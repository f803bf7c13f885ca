// Shards: point i belongs to shard i mod N, so every shard gets a fair mix of the sweep.
#include "sweep/shard.hpp"

#include <fmt/format.h>

#include <charconv>
#include <string_view>

#include "report/output_target.hpp"
#include "stepsim/error.hpp"

namespace stepsim::sweep {
namespace {

constexpr std::string_view kShardPattern = "{shard}";

std::optional<long long> parse_count(const std::string& text) {
  long long value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  const auto k = parse_count(text.substr(0, slash));
  const auto n = slash == std::string::npos ? std::nullopt : parse_count(text.substr(slash + 1));
  if (!k || !n || *n < 1 || *k < 0 || *k >= *n)
    throw InputError("--shard", text, "expected K/N with 0 <= K < N, e.g. 0/4 for the first of four shards");
  return {static_cast<std::size_t>(*k), static_cast<std::size_t>(*n)};
}

std::optional<Shard> shard_from_environment(const std::function<const char*(const char*)>& getenv) {
  const char* id = getenv("SLURM_ARRAY_TASK_ID");
  const char* count = getenv("SLURM_ARRAY_TASK_COUNT");
  if (id == nullptr || count == nullptr) return std::nullopt;
  const char* min = getenv("SLURM_ARRAY_TASK_MIN");
  const char* step = getenv("SLURM_ARRAY_TASK_STEP");  // --array=0-6:2 runs ids 0, 2, 4, 6
  const auto k = parse_count(id);
  const auto n = parse_count(count);
  const auto lo = min ? parse_count(min) : std::optional<long long>(0);
  const auto stride = step ? parse_count(step) : std::optional<long long>(1);
  if (!stride || *stride < 1)
    throw InputError("SLURM_ARRAY_TASK_STEP", step, "expected the job array's step, a whole number of 1 or more");
  long long offset = -1;  // k - lo, unless that overflows (ids far apart are no shard either)
  if (k && lo && __builtin_sub_overflow(*k, *lo, &offset)) offset = -1;
  const long long task = offset >= 0 && offset % *stride == 0 ? offset / *stride : -1;
  if (!k || !n || !lo || *n < 1 || task < 0 || task >= *n)
    throw InputError("SLURM_ARRAY_TASK_ID", id,
                     fmt::format("expected a task id SLURM_ARRAY_TASK_MIN ({}) + K x SLURM_ARRAY_TASK_STEP ({}) "
                                 "for K from 0 to SLURM_ARRAY_TASK_COUNT ({}) - 1; submit with --array=0-{{N-1}} "
                                 "or --array=LO-HI:STEP",
                                 min ? min : "unset", step ? step : "unset", count));
  return Shard{static_cast<std::size_t>(task), static_cast<std::size_t>(*n)};
}

std::string shard_path(const std::string& path, const Shard& shard) {
  if (path == "-") return path;
  if (path.find(kShardPattern) != std::string::npos) {
    std::string named = path;
    const std::string index = std::to_string(shard.index);
    for (auto at = named.find(kShardPattern); at != std::string::npos;
         at = named.find(kShardPattern, at + index.size()))
      named.replace(at, kShardPattern.size(), index);
    return named;
  }
  if (shard.count == 1) return path;
  const auto dot = path.rfind('.');
  const auto slash = path.rfind('/');
  const bool has_extension = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  const std::string stem = has_extension ? path.substr(0, dot) : path;
  const std::string extension = has_extension ? path.substr(dot) : "";
  return fmt::format("{}.shard-{}-of-{}{}", stem, shard.index, shard.count, extension);
}

std::string shard_output(const std::string& path, const Shard& shard) {
  const std::string named = shard_path(path, shard);
  // One shard of several writes a file of its own for --merge: stdout, a device or a FIFO
  // would get a part of the rows (or none, the shard's name being another file's).
  if (shard.count > 1 && (report::is_written_through(path) || report::is_written_through(named)))
    throw InputError("-o", path,
                     fmt::format("shard {}/{} writes its rows to a file of its own for --merge to join: expected a "
                                 "regular file name ending in .csv or .jsonl, not stdout, a device or a FIFO",
                                 shard.index, shard.count));
  return named;
}

}  // namespace stepsim::sweep
