// Merging the files of a sharded sweep into one, in point order, one row per point.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace stepsim::sweep {

struct MergeSummary {
  std::size_t rows = 0;                 // written
  std::size_t points = 0;               // of the sweep (its sweep_points); 0 when no file had a row
  std::vector<std::size_t> duplicates;  // the point of each row dropped as seen before (a resumed or repeated shard)
  std::vector<std::size_t> missing;     // the sweep's points no file has
  std::vector<std::string> torn;        // the files whose torn last line was left out
};

// Every input must have the output's format (by extension), the same columns and rows of one
// sweep (one sweep_id), and none may be written by a running sweep. The output is written as
// every output of stepsim is (report::write_output: whole or not at all, FIFOs and devices
// written through, '-' is stdout). Errors are InputError naming the file.
MergeSummary merge_files(const std::string& output, const std::vector<std::string>& inputs);

// "0-2, 5, 9-10": sorted point indices as ranges, at most `most` of them and then "and N more".
std::string point_list(const std::vector<std::size_t>& points, std::size_t most = 8);

}  // namespace stepsim::sweep
