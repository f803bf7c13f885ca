// Running a sweep: the points of this shard not already written, simulated on a thread pool,
// their rows written in point order whatever order they finish in.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "stepsim/error.hpp"
#include "sweep/point.hpp"
#include "sweep/rows.hpp"

namespace stepsim::sweep {

struct Shard {
  std::size_t index = 0;  // K of K/N, 0-based
  std::size_t count = 1;  // N
};

// More simulations at once than this is a mistake, not a machine.
inline constexpr long long kMaxJobs = 4096;

// The error of a --jobs value (`text`, as given) that is not a whole number from 1 to kMaxJobs.
InputError jobs_error(const std::string& text);

struct RunOptions {
  std::string output = "-";  // file name or "-"
  bool resume = false;
  unsigned jobs = 0;  // 0: every core
  Shard shard;
  bool progress = false;  // draw the progress line on stderr
};

struct RunSummary {
  std::size_t points = 0;   // of this shard
  std::size_t skipped = 0;  // already in the file (--resume)
  std::size_t ok = 0, invalid = 0, oom = 0, error = 0;
};

RunSummary run_sweep(const SweepSpec& spec, const RunOptions& options);

// The results of `indices` (in that order), simulated on `jobs` threads: for callers that
// keep results in memory (the search for the best configuration).
std::vector<PointResult> run_points(const std::vector<std::size_t>& indices, unsigned jobs,
                                    const std::function<PointResult(std::size_t)>& run, bool progress);

}  // namespace stepsim::sweep
