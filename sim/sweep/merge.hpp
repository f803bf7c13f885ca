// Merging the files of a sharded sweep into one, in point order, one row per point.
#pragma once

#include <string>
#include <vector>

namespace stepsim::sweep {

struct MergeSummary {
  std::size_t rows = 0;        // written
  std::size_t duplicates = 0;  // rows of a point already seen (a resumed or repeated shard)
  std::size_t torn = 0;        // files whose torn last line was left out
};

// Every input must have the output's format (by extension) and the same columns; the
// output appears whole or not at all. Errors are InputError naming the file.
MergeSummary merge_files(const std::string& output, const std::vector<std::string>& inputs);

}  // namespace stepsim::sweep
