// Calibrated costs: measured tables first, the model where they do not reach.
#include "simulation/calibrated_costs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stepsim/error.hpp"

namespace stepsim {

CalibratedCosts::CalibratedCosts(const Scenario& scenario, const hardware::GpuModel& gpu,
                                 const calibration::MeasuredTables& tables)
    : scenario_(scenario), gpu_(gpu), tables_(tables), model_(scenario, gpu) {}

Time CalibratedCosts::compute(const workload::OpCost& op) const {
  const calibration::CalibratedTime t = calibration::calibrate_compute(tables_, gpu_, op);
  compute_total_us_ += t.time.us();
  if (t.measured) {
    compute_measured_us_ += t.time.us();
    const bool tensor = op.cls == workload::OpClass::gemm || op.cls == workload::OpClass::attention;
    measured_.insert(op.cls == workload::OpClass::gemm ? "gemm" : tensor ? "attention" : "memory-bound kernels");
  }
  return t.time;
}

parallelism::CollectiveCost CalibratedCosts::collective(const collectives::Request& request) const {
  const calibration::CalibratedChoice c =
      calibration::calibrate_collective(tables_, scenario_.cluster, scenario_.collectives, request);
  collectives_[{request.op, request.size.count(), request.shape.ranks}] = c.source;
  if (c.table != nullptr) {
    measured_.insert(fmt::format("{} {} ranks on {} node(s){}", to_string(c.table->op), c.table->ranks, c.table->nodes,
                                 c.source == calibration::Source::scaled ? " (scaled to other sizes or shapes)" : ""));
  }
  return {c.choice.latency, c.choice.algbw, collectives::link_load(request, c.choice)};
}

parallelism::CollectiveCost CalibratedCosts::degraded_collective(const collectives::Request& request,
                                                                 const parallelism::LinkShares& shares) const {
  parallelism::CollectiveCost cost = collective(request);
  const double slower =
      model_.degraded_collective(request, shares).algbw.bytes_per_s() / model_.collective(request).algbw.bytes_per_s();
  cost.algbw = cost.algbw.scaled(slower);
  return cost;
}

void CalibratedCosts::summarise(const Timeline& timeline, Report& report) const {
  CalibrationReport& out = report.calibration;
  for (const auto& f : tables_.files()) out.files.push_back(f.source);
  out.measured.assign(measured_.begin(), measured_.end());
  if (compute_total_us_ > 0) out.compute_fraction = compute_measured_us_ / compute_total_us_;
  double total = 0, measured = 0, scaled = 0;
  if (!timeline.ranks.empty()) {
    for (const Interval& i : timeline.ranks.front().intervals) {
      if (i.activity != Activity::comm) continue;
      const double d = (i.end - i.start).seconds();
      total += d;
      const int ranks = i.group >= 0 ? timeline.groups[static_cast<std::size_t>(i.group)].size : 0;
      const auto it = collectives_.find({i.op, i.bytes.count(), ranks});
      if (it == collectives_.end()) continue;
      if (it->second == calibration::Source::measured) measured += d;
      if (it->second == calibration::Source::scaled) scaled += d;
    }
  }
  if (total > 0) {
    out.comm_fraction = measured / total;
    out.comm_scaled_fraction = scaled / total;
  }
  if (report.step_time_s > 0)
    out.step_fraction =
        (report.breakdown_s.compute * out.compute_fraction + report.breakdown_s.exposed_total() * out.comm_fraction) /
        report.step_time_s;
  report.notes.push_back(
      fmt::format("calibrated by {} file(s): {:.0f}% of compute kernel time and {:.0f}% of communication time measured "
                  "({:.0f}% more scaled from a measured shape), {:.0f}% of the step; measured: {}",
                  out.files.size(), 100 * out.compute_fraction, 100 * out.comm_fraction, 100 * out.comm_scaled_fraction,
                  100 * out.step_fraction,
                  out.measured.empty() ? "nothing this step uses" : fmt::format("{}", fmt::join(out.measured, "; "))));
}

calibration::MeasuredTables load_calibration(const Scenario& scenario) {
  std::vector<calibration::Calibration> files;
  for (std::size_t i = 0; i < scenario.calibration.size(); ++i) {
    const std::string& path = scenario.calibration[i];
    if (path.empty())
      throw InputError(scenario.source, fmt::format("/calibration/{}", i),
                       "expected a calibration file name, got \"\"");
    files.push_back(calibration::read_calibration(path));
    calibration::check_gpu(files.back(), scenario.cluster.gpu.name);
  }
  return calibration::MeasuredTables(std::move(files));
}

}  // namespace stepsim
