// What the CPU spends per operator in a real PyTorch profiler trace: each kernel launch's
// innermost enclosing CPU operator, on the launching thread (calibrate from-trace).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "analysis/kineto_trace.hpp"
#include "stepsim/units.hpp"

namespace stepsim::analysis {

struct HostCosts {
  std::size_t operators = 0;  // CPU operators that launched at least one kernel
  std::size_t launches = 0;   // kernel launches with a duration
  std::size_t cpu_ops = 0;    // CPU operators, whether or not they launched a kernel
  std::size_t cpu_ops_left_out = 0;  // cpu_op events the reader left out (KinetoTrace)
  Time operator_median;       // the operators' median duration: dispatch and launch
  Time launch_median;         // the launches' median duration
  // The operators' median time beyond their own launches (an operator's duration less the
  // durations of the launches it encloses as their innermost operator): its dispatch, as the
  // host model charges an op the dispatch once and the launch once per kernel.
  Time dispatch_median;
};

// What the host costs say of the host model (calibrate from-trace), in microseconds rounded to
// a tenth, as printed and as the calibration file holds them: the kernel launch (cluster.gpu.kernel_launch) is the
// launches' median, where there are launches of some duration; the dispatch (the framework's
// cost per operator beyond its launches) the operators' median time beyond their own launches,
// where some operator encloses a launch and the launch is known, and not below zero.
struct HostFit {
  std::optional<double> launch_us;
  std::optional<double> dispatch_us;
  std::optional<double> operator_us;  // the operators' median, from which the dispatch is
};
HostFit fit_host(const HostCosts& h);

// Of one trace's CPU operators and launches.
HostCosts host_costs(const KinetoTrace& trace);

// Of several traces (one job's ranks), pooled.
HostCosts host_costs(const std::vector<KinetoTrace>& traces);

// Of every file of `path` (a trace, or a folder of one job's ranks), pooled, read one at a time.
HostCosts host_costs(const std::string& path);

}  // namespace stepsim::analysis
