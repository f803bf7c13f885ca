// What to measure so that a scenario's costs come from measurements: the nccl-tests runs
// that cover each communicator it uses and the GEMM shapes it runs, as commands to run.
#pragma once

#include <string>
#include <vector>

#include "stepsim/scenario.hpp"
#include "stepsim/timeline.hpp"

namespace stepsim::calibration {

// One communicator shape of one op, with the element type it carries and the nccl-tests
// sizes S (bytes) the scenario calls it with.
struct CollectiveNeed {
  CollOp op = CollOp::allreduce;
  int ranks = 0, nodes = 1, ranks_per_node = 0;
  std::string dtype;  // nccl-tests' name: "bfloat16", "float", ...
  double min_bytes = 0, max_bytes = 0;
  auto operator<=>(const CollectiveNeed&) const = default;
};

struct GemmNeed {
  long long m = 0, n = 0, k = 0;
  Precision dtype = Precision::bf16;
  auto operator<=>(const GemmNeed&) const = default;
};

struct CalibrationNeeds {
  std::vector<CollectiveNeed> collectives;  // sorted, one per (op, shape, dtype)
  std::vector<GemmNeed> gemms;              // sorted, distinct
  CollectivesSpec forced;                   // the scenario's forced algorithm and protocol
};

struct PlannedRun {
  std::string what;     // "allreduce 8 ranks on 1 node(s) x 8, bfloat16, 1K to 64M"
  std::string command;  // the command line to run; empty when nothing at hand measures it
};

// nccl-tests' element type name of `p` as collectives carry it (FP8 training's collectives
// move bf16).
const char* nccl_type_of(Precision p);

// nccl-tests' name of the element type a collective of `kind` moves in `s`: data-parallel
// reductions carry gradients in grad_reduce_dtype; everything else the activations' or
// parameters' 16-bit type.
std::string collective_type(const Scenario& s, CollOp op, CommKind kind);

// One nccl-tests run per collective need, one process per GPU (Open MPI's mpirun -np ranks
// -N ranks_per_node, -g 1), sizes from the power of two at or below the smallest to the one
// at or above the largest (-f 2), NCCL_ALGO and NCCL_PROTO set on every rank (-x) where the
// scenario forces them; then one stepsim-calibrate run with every BF16 and FP8 GEMM shape (other precisions listed
// without a command).
std::vector<PlannedRun> plan_runs(const CalibrationNeeds& needs);

// The needs and the runs as JSON text (`stepsim calibrate plan --json`).
std::string plan_json(const CalibrationNeeds& needs, const std::vector<PlannedRun>& runs);

}  // namespace stepsim::calibration
