// The data-parallel strategy interface and its registry: one row per data_parallel.kind,
// one file per strategy (data_parallel_ddp.cpp, ...).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "parallelism/step_builder.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::parallelism {

// One rank's gradient synchronisation. The program builder calls it for every backward
// compute op of the step's last micro-batch (earlier ones run under no_sync()).
class DataParallel {
 public:
  virtual ~DataParallel() = default;
  virtual void after_backward_op(StepBuilder& b, const OpSite& site, OpIndex op) = 0;
  // The last micro-batch's backward has been issued.
  virtual void end_backward(StepBuilder& b) = 0;
  // The optimizer step waits for these.
  virtual std::vector<OpIndex> optimizer_waits() const = 0;
};

using DataParallelFactory = std::unique_ptr<DataParallel> (*)(const Scenario&);

struct DataParallelKind {
  DpKind kind;
  const char* name;  // the data_parallel.kind value
  DataParallelFactory make;
};

std::span<const DataParallelKind> data_parallel_kinds();

// The strategy of scenario.data_parallel.kind for one rank; nothing to do when dp = 1.
std::unique_ptr<DataParallel> make_data_parallel(const Scenario& scenario);

// The strategies (one file each).
std::unique_ptr<DataParallel> make_ddp(const Scenario& scenario);

}  // namespace stepsim::parallelism
