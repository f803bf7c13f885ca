// Calibrated costs: measured tables first, the model where they do not reach.
#include "simulation/calibrated_costs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "calibration/link_bound.hpp"
#include "calibration/plan.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"

namespace stepsim {

CalibratedCosts::CalibratedCosts(const Scenario& scenario, const hardware::GpuModel& gpu,
                                 const calibration::MeasuredTables& tables)
    : scenario_(scenario), gpu_(gpu), tables_(tables), model_(scenario, gpu) {}

namespace {

// The GPU figures the model's time of `op` depends on (GpuModel: the roofline's rate and
// bytes, a GEMM's size and depth curve), as values_in_force names them.
void consult(const hardware::GpuModel& gpu, const workload::OpCost& op, std::set<std::string>& keys) {
  if (op.bytes.count() > 0) keys.insert("hbm");
  if (op.cls == workload::OpClass::gemm) {
    keys.insert(!op.fp8 ? "gemm_max" : gpu.dtype(op) == Precision::nvfp4 ? "fp4_gemm_max" : "fp8_gemm_max");
    keys.insert("gemm_half_flops");
    if (gpu.depth_k(op) > 0) keys.insert("gemm_half_k");
  } else if (op.cls == workload::OpClass::attention) {
    keys.insert("attention_max");
    keys.insert("gemm_half_flops");
  }
}

}  // namespace

std::optional<Time> CalibratedCosts::dispatch() const {
  const std::optional<CalibratedValue> d =
      calibration::calibrated_dispatch(tables_, traits_of(scenario_.training.framework).dispatch);
  if (!d) return std::nullopt;
  return Time::from_us(d->value);
}

Time CalibratedCosts::compute(const workload::OpCost& op) const {
  const calibration::CalibratedTime t = calibration::calibrate_compute(tables_, gpu_, op);
  // Every op is launched, measured or not.
  consulted_.insert("kernel_launch_us");
  consulted_.insert("dispatch_us");
  if (!t.measured) consult(gpu_, op, consulted_);
  compute_total_us_ += t.time.us();
  const bool tensor = op.cls == workload::OpClass::gemm || op.cls == workload::OpClass::attention;
  if (t.measured) {
    compute_measured_us_ += t.time.us();
    const std::string kind = tensor ? fmt::format("{} {}", op.cls == workload::OpClass::gemm ? "gemm" : "attention",
                                                  to_string(gpu_.dtype(op)))
                                    : "memory-bound kernels";
    measured_.insert(kind + ": measured");
  } else if (tensor) {
    not_measured_.insert(
        fmt::format("{} {}", op.cls == workload::OpClass::gemm ? "gemm" : "attention", to_string(gpu_.dtype(op))));
  } else if (op.bytes.count() > 0) {
    not_measured_.insert("memory-bound kernels");
  }
  return t.time;
}

namespace {

std::string shape_text(CollOp op, int ranks, int nodes, int ranks_per_node) {
  return fmt::format("{} {} ranks on {} node(s) x {}", to_string(op), ranks, nodes, ranks_per_node);
}

// "allreduce 8 ranks on 1 node(s) x 8: measured (bfloat16)", or "...: scaled from 2 points of
// allreduce 8 ranks on 1 node(s) x 8 (float, matched by bytes)": a table of the collective's
// own element type where one was measured, else one of another type looked up by nccl-tests'
// size in bytes.
std::string collective_label(const collectives::Request& r, const calibration::CalibratedChoice& c,
                             const std::string& dtype) {
  const calibration::CollectiveTable& t = *c.table;
  const std::string shape = shape_text(r.op, r.shape.ranks, r.shape.nodes, r.shape.ranks_per_node);
  const std::string by_bytes =
      t.dtype == dtype ? fmt::format("({})", t.dtype) : fmt::format("({}, matched by bytes)", t.dtype);
  if (c.source == calibration::Source::measured) return fmt::format("{}: measured {}", shape, by_bytes);
  return fmt::format("{}: scaled from {} point{} of {} {}", shape, t.points.size(), t.points.size() == 1 ? "" : "s",
                     shape_text(t.op, t.ranks, t.nodes, t.ranks_per_node), by_bytes);
}

}  // namespace

parallelism::CollectiveCost CalibratedCosts::collective(const collectives::Request& request) const {
  const std::string dtype = calibration::collective_type(scenario_, request.op, request.kind);
  const calibration::CalibratedChoice c =
      calibration::calibrate_collective(tables_, scenario_.cluster, scenario_.collectives, request, dtype);
  const auto& s = request.shape;
  collectives_[{request.op, request.size.count(), s.ranks, s.nodes, s.ranks_per_node, request.kind}] = c.source;
  if (c.source == calibration::Source::model)
    not_measured_.insert(
        shape_text(request.op, request.shape.ranks, request.shape.nodes, request.shape.ranks_per_node));
  if (c.table != nullptr) measured_.insert(collective_label(request, c, dtype));
  return parallelism::with_gpu_shares({c.choice.latency, c.choice.algbw, collectives::link_load(request, c.choice)},
                                      scenario_.cluster.gpu, request, c.choice);
}

parallelism::CollectiveCost CalibratedCosts::degraded_collective(const collectives::Request& request,
                                                                 const parallelism::LinkShares& shares) const {
  parallelism::CollectiveCost cost = collective(request);
  const double slower =
      model_.degraded_collective(request, shares).algbw.bytes_per_s() / model_.collective(request).algbw.bytes_per_s();
  cost.algbw = cost.algbw.scaled(slower);
  return cost;
}

namespace {

// The efficiency a fit puts in force for what the model alone answered: that part is
// calibrated too.
bool fitted(const std::string& what, const std::vector<CalibratedValue>& values) {
  const char* key = what == "gemm fp8" || what == "gemm mxfp8" ? "fp8_gemm_max"
                    : what == "gemm nvfp4"                     ? "fp4_gemm_max"
                    : what.starts_with("gemm ")                ? "gemm_max"
                    : what.starts_with("attention ")           ? "attention_max"
                    : what == "memory-bound kernels"           ? "hbm"
                                                               : "";
  return std::any_of(values.begin(), values.end(), [&](const CalibratedValue& v) { return v.key == key; });
}

std::string value_text(const CalibratedValue& v) {
  return fmt::format("{} {:.4g} (preset {:.4g}; {})", v.key, v.value, v.preset, v.source);
}

// What the calibration did for this step, in a sentence after the shares.
std::string calibration_detail(const CalibrationReport& c) {
  std::vector<std::string> values, unused;
  for (const auto& v : c.values) values.push_back(value_text(v));
  for (const auto& v : c.unused_values) unused.push_back(value_text(v));
  const std::string set_unused =
      unused.empty() ? "" : fmt::format("; set but unused by this job: {}", fmt::join(unused, "; "));
  if (c.measured.empty() && c.values.empty())
    return fmt::format("the calibration changes nothing this job uses; it would need measurements of: {}{}",
                       fmt::join(c.not_measured, "; "), set_unused);
  std::string out = fmt::format(
      "measured: {}", c.measured.empty() ? "no table this step uses" : fmt::format("{}", fmt::join(c.measured, "; ")));
  if (!values.empty()) out += fmt::format("; in force: {}", fmt::join(values, "; "));
  out += set_unused;
  if (!c.not_measured.empty())
    out += fmt::format("; not measured (the model alone): {}", fmt::join(c.not_measured, "; "));
  return out;
}

}  // namespace

void CalibratedCosts::summarise(const Timeline& timeline, Report& report, std::vector<CalibratedValue> values) const {
  CalibrationReport& out = report.calibration;
  for (const auto& f : tables_.files()) out.files.push_back(f.source);
  out.measured.assign(measured_.begin(), measured_.end());
  // A figure is in force where the costs the model answered consulted it; a slowdown beside
  // communication where some communication ran under compute (a slowdown of 0 changes the
  // step too).
  std::set<std::string> used = consulted_;
  if (report.overlap.hidden_fraction > 0 || report.compute_slowdown_s > 0) used.insert("comm_slowdown");
  for (CalibratedValue& v : values) (used.contains(v.key) ? out.values : out.unused_values).push_back(std::move(v));
  for (const std::string& what : not_measured_)
    if (!fitted(what, out.values)) out.not_measured.push_back(what);
  if (compute_total_us_ > 0) out.compute_fraction = compute_measured_us_ / compute_total_us_;
  double total = 0, measured = 0, scaled = 0;
  if (!timeline.ranks.empty()) {
    for (const Interval& i : timeline.ranks.front().intervals) {
      if (i.activity != Activity::comm) continue;
      const double d = (i.end - i.start).seconds();
      total += d;
      if (i.group < 0) continue;
      const ProcessGroup& g = timeline.groups[static_cast<std::size_t>(i.group)];
      const auto it = collectives_.find({i.op, i.bytes.count(), g.size, g.nodes, g.ranks_per_node, i.kind});
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
                  "({:.0f}% more scaled from a measured shape), {:.0f}% of the step; {}",
                  out.files.size(), 100 * out.compute_fraction, 100 * out.comm_fraction, 100 * out.comm_scaled_fraction,
                  100 * out.step_fraction, calibration_detail(out)));
}

calibration::MeasuredTables load_calibration(const Scenario& scenario) {
  io::require_calibration_files(scenario);
  std::vector<calibration::Calibration> files;
  for (std::size_t i = 0; i < scenario.calibration.size(); ++i) {
    const std::string& path = scenario.calibration[i];
    if (path.empty())
      throw scenario_error(scenario, fmt::format("/calibration/{}", i), "expected a calibration file name, got \"\"");
    if (path == "-")
      throw scenario_error(scenario, fmt::format("/calibration/{}", i),
                           "a scenario's calibration file cannot be standard input (\"-\"): it is read for every "
                           "simulation of the scenario; give its file name");
    files.push_back(calibration::read_calibration(path));
    calibration::check_fits(files.back(), scenario.cluster, scenario.collectives);
  }
  return calibration::MeasuredTables(std::move(files), scenario.cluster);
}

}  // namespace stepsim
