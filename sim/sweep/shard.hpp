// Splitting a sweep across the tasks of a job array: which shard this process runs (from
// --shard K/N or Slurm's SLURM_ARRAY_TASK_* variables) and the file each shard writes.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "sweep/runner.hpp"

namespace stepsim::sweep {

// "K/N" with 0 ≤ K < N; InputError naming --shard otherwise.
Shard parse_shard(const std::string& text);

// The shard from a job array's environment: task K = (SLURM_ARRAY_TASK_ID −
// SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP (MIN 0 and STEP 1 when unset: --array=0-6:2
// runs ids 0, 2, 4, 6 as shards 0 to 3) of N = SLURM_ARRAY_TASK_COUNT; nothing outside an
// array. `getenv` is a parameter so that tests need no process environment.
std::optional<Shard> shard_from_environment(const std::function<const char*(const char*)>& getenv);

// The output of shard K of N: every "{shard}" in `path` becomes K (0 for one shard);
// otherwise "out.csv" becomes "out.shard-K-of-N.csv", and one shard (N = 1) keeps `path`.
// Stdout ("-") stays stdout.
std::string shard_path(const std::string& path, const Shard& shard);

// shard_path's name for -o `path`, refused (InputError naming -o and `path`) when one shard of
// several would write through stdout ('-', /dev/stdout), a device or a FIFO: shards need
// regular files to merge.
std::string shard_output(const std::string& path, const Shard& shard);

}  // namespace stepsim::sweep
