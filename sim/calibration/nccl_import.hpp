// nccl-tests logs into measured collective tables: one table per test and communicator
// shape, the out-of-place time of each size (in-place where a row has no out-of-place half),
// with an α–β fit.
#pragma once

#include <string>
#include <vector>

#include "calibration/calibration.hpp"
#include "calibration/nccl_tests_log.hpp"

namespace stepsim::calibration {

// What the logs do not say and the command line does (0 or empty: take the log's word).
struct ImportOverrides {
  std::string op;  // "allreduce", ...
  int ranks = 0, nodes = 0;
  std::string gpu;
  std::string dtype;  // only the rows of this nccl-tests type ("bfloat16"); "": every row (a table a type)
};

// The collective of an nccl-tests program ("all_reduce_perf" → allreduce); throws an
// InputError naming `source` for a test stepsim does not model.
CollOp op_of_test(const std::string& test, const std::string& source);

// The nccl-tests program that measures `op` ("all_reduce_perf"; its MPI build takes the same
// arguments).
std::string nccl_test_program(CollOp op);

// One calibration from the logs: provenance from their headers, one table per shape.
Calibration import_nccl_tests(const std::vector<NcclTestsLog>& logs, const ImportOverrides& overrides);

}  // namespace stepsim::calibration
