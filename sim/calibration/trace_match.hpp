// The kernels of a trace matched to a scenario's ops: by name for stepsim's own traces (a
// piece of a split op by the FLOPs and bytes the trace gives it), by class (GEMM, attention,
// memory-bound) for other profiler traces; and the fit by class totals for kernels known
// only by class.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "calibration/trace_fit.hpp"
#include "stepsim/timeline.hpp"
#include "workload/work.hpp"

namespace stepsim::calibration {

struct TraceKernel {
  std::string name;
  bool comm = false;
  CollOp op = CollOp::other;  // comm only
  double start_us = 0, end_us = 0;
  std::optional<KernelWork> work;  // the FLOPs and bytes the trace gives a compute kernel
};

// Time of each class of compute kernels.
struct ClassTotals {
  double gemm = 0, attention = 0, memory = 0;
  int n_gemm = 0, n_attention = 0, n_memory = 0;
  void add(workload::OpClass c, double us);
};

struct Matched {
  std::vector<MeasuredKernel> kernels;
  ClassTotals totals;
  int by_name = 0, comm = 0;
  std::map<std::string, int> comm_by_op;
};

// The names stepsim gives a scenario's compute ops (program_builder's op_name, without the
// layer prefix) with the op each stands for.
using OpNames = std::map<std::string, workload::OpCost>;
OpNames op_names(const workload::ModelWork& work);

// The op a kernel of this name stands for ("L12 fc1 fwd (step 2/4)" is a piece of "fc1 fwd"),
// or null. `pieces` is set to the piece count the name gives (1 for a whole op).
const workload::OpCost* op_of_kernel(const OpNames& names, const std::string& kernel, int& pieces);

Matched match_kernels(const std::vector<TraceKernel>& kernels, const OpNames& names);

// Kernels known only by class: each efficiency not fitted kernel by kernel is scaled by its
// class's simulated / measured time (`simulated`: the same classes in the model's own step).
void fit_by_totals(TraceFit& fit, const Matched& m, const ClassTotals& simulated, Precision precision);

}  // namespace stepsim::calibration
