// nccl-tests logs into measured collective tables: one table per test and communicator
// shape, the out-of-place time of each size (in-place where a row has no out-of-place half),
// with an α–β fit.
#pragma once

#include <optional>
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
  // What the run forced (NCCL_ALGO, NCCL_PROTO), NCCL's name or stepsim's ("Ring", "ring"),
  // when the log does not say; "auto": NCCL's own choice. "": the log's word, else NCCL's choice.
  std::string algorithm, protocol;
};

// NCCL_ALGO's and NCCL_PROTO's spelling of a forced choice ("Ring", "NVLSTree", "Simple");
// empty for NCCL's own choice and for what NCCL has no name for.
std::string nccl_algo_name(Algorithm a);
std::string nccl_proto_name(Protocol p);

// The algorithm or protocol named by NCCL's spelling or stepsim's, case aside ("Ring", "ring",
// "NVLSTree", "nvls-tree", "auto"); empty for anything else (a list such as "Ring,Tree", an
// exclusion "^NVLS": no one algorithm).
std::optional<Algorithm> algorithm_named(const std::string& name);
std::optional<Protocol> protocol_named(const std::string& name);

// The collective of an nccl-tests program ("all_reduce_perf" → allreduce); throws an
// InputError naming `source` for a test stepsim does not model.
CollOp op_of_test(const std::string& test, const std::string& source);

// The nccl-tests program that measures `op` ("all_reduce_perf"; its MPI build takes the same
// arguments).
std::string nccl_test_program(CollOp op);

// One calibration from the logs: provenance from their headers, one table per shape.
Calibration import_nccl_tests(const std::vector<NcclTestsLog>& logs, const ImportOverrides& overrides);

}  // namespace stepsim::calibration
