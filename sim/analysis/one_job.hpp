// The traces read as one job must be one job's: one world size, each rank once. Without the
// check, two jobs' traces in one folder would have their calls matched across the jobs and
// a rank listed twice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stepsim::analysis {

// The files of one job start within this of each other (their timestamps share an epoch).
inline constexpr std::int64_t kMaxRankSkewUs = 1'000'000'000'000;

// A rank as its file gives it.
struct RankSource {
  std::string file;
  int rank = 0;
  int world_size = 0;      // distributedInfo's; 0: not given
  bool rank_given = true;  // by distributedInfo (or stepsim's process), not by the file's place in the list
};

// Throws InputError naming both files when two ranks give different world sizes, or the
// same rank.
void check_one_job(const std::vector<RankSource>& ranks);

}  // namespace stepsim::analysis
