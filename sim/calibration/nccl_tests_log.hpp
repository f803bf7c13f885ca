// Reading nccl-tests output (all_reduce_perf and friends): the table rows of current and
// legacy versions, with or without MPI rank prefixes.
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "stepsim/units.hpp"

namespace stepsim::calibration {

// One half of a row: out-of-place or in-place.
struct NcclTestsResult {
  Time time;
  Bandwidth algbw;
  Bandwidth busbw;
  std::optional<double> wrong;  // #wrong (current) or error (legacy); empty for N/A
};

struct NcclTestsRow {
  Bytes size;  // nccl-tests S
  long long count = 0;
  std::string type;   // "float", "half", ...
  std::string redop;  // "sum", "none", ...
  int root = -1;      // -1: unrooted, or the legacy layout without a root column
  NcclTestsResult out_of_place;
  NcclTestsResult in_place;
};

struct NcclTestsLog {
  std::string source;
  std::vector<NcclTestsRow> rows;
};

// `source` names the input in errors ("file: line N: expected ...").
NcclTestsLog parse_nccl_tests(std::istream& in, const std::string& source);
NcclTestsLog read_nccl_tests(const std::string& path);

}  // namespace stepsim::calibration
