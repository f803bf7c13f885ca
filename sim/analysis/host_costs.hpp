// What the CPU spends per operator in a real PyTorch profiler trace: each kernel launch's
// innermost enclosing CPU operator, on the launching thread (calibrate from-trace).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "analysis/kineto_trace.hpp"
#include "stepsim/units.hpp"

namespace stepsim::analysis {

struct HostCosts {
  std::size_t operators = 0;  // CPU operators that launched at least one kernel
  std::size_t launches = 0;   // kernel launches with a duration
  Time operator_median;       // the operators' median duration: dispatch and launch
  Time launch_median;         // the launches' median duration
};

// Of one trace's CPU operators and launches.
HostCosts host_costs(const KinetoTrace& trace);

// Of several traces (one job's ranks), pooled.
HostCosts host_costs(const std::vector<KinetoTrace>& traces);

// Of every file of `path` (a trace, or a folder of one job's ranks), pooled, read one at a time.
HostCosts host_costs(const std::string& path);

}  // namespace stepsim::analysis
