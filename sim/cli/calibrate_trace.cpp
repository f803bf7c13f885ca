// `stepsim calibrate from-trace`: the kernels of one rank's first step, matched to the
// scenario's ops (calibration/trace_match), fitted to the compute model, and the simulation
// rerun with what was fitted.
#include "cli/calibrate_trace.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "analysis/analysis_output.hpp"
#include "analysis/host_costs.hpp"
#include "analysis/like_for_like.hpp"
#include "analysis/trace_timeline.hpp"
#include "calibration/apply.hpp"
#include "calibration/calibration.hpp"
#include "calibration/trace_fit.hpp"
#include "calibration/trace_match.hpp"
#include "cli/options.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"
#include "stepsim/report.hpp"
#include "workload/work.hpp"

namespace stepsim::cli {
namespace {

struct RankKernels {
  std::vector<calibration::TraceKernel> kernels;  // of one rank, inside its first step
  double step_us = 0;
};

// A profiler trace through the analyzer (it reads stepsim's own traces alike): its first
// rank, its first step.
RankKernels read_kernels(const analysis::LoadedTrace& t) {
  RankKernels out{{}, 0};
  if (t.timeline.ranks.empty()) return out;
  const StepWindow& w = t.rank_steps.front().front();
  for (const Interval& iv : t.timeline.ranks.front().intervals) {
    if (iv.activity != Activity::compute && iv.activity != Activity::comm) continue;
    if (iv.start < w.start || iv.start >= w.end) continue;
    calibration::TraceKernel k;
    k.name = iv.name < t.timeline.names.size() ? std::string(t.timeline.names[iv.name]) : "";
    k.comm = iv.activity == Activity::comm;
    k.op = iv.op;
    k.start_us = iv.start.us();
    k.end_us = iv.end.us();
    if (const auto it = t.timeline.work.find(iv.name); it != t.timeline.work.end()) k.work = it->second;
    out.kernels.push_back(std::move(k));
  }
  out.step_us = (w.end - w.start).us();
  return out;
}

// The same classes in the model's own step of the scenario.
calibration::ClassTotals simulated_totals(const SimulationResult& r, const calibration::OpNames& names) {
  calibration::ClassTotals t;
  if (r.timeline.ranks.empty()) return t;
  const StepWindow& w = r.timeline.steps.front();
  for (const Interval& iv : r.timeline.ranks.front().intervals) {
    if (iv.activity != Activity::compute || iv.start < w.start || iv.start >= w.end) continue;
    int pieces = 1;
    const workload::OpCost* op = calibration::op_of_kernel(names, std::string(r.timeline.names[iv.name]), pieces);
    t.add(op == nullptr ? workload::OpClass::elementwise : op->cls, (iv.end - iv.start).us());
  }
  return t;
}

// The CPU's cost per operator, what training.framework's dispatch is measured from, and the
// kernel launch's, each as the calibration file holds it; or what the trace lacks for them.
// What a trace without a CPU operator the fit can use holds instead: none, or only events left
// out for their times.
std::string no_cpu_ops(const analysis::HostCosts& h) {
  if (h.cpu_ops_left_out == 0) return "no cpu_op events";
  return fmt::format(
      "no cpu_op events it could use (its {} left out: not complete events with ts and dur, or a negative dur, a ts "
      "or dur out of range)",
      h.cpu_ops_left_out);
}

void print_host(const std::string& trace, const analysis::HostCosts& h, std::ostream& log) {
  const analysis::HostFit fit = analysis::fit_host(h);
  if (!fit.launch_us) {
    log << fmt::format("# host: no kernel launch cost in {}: {}\n", trace,
                       h.launches > 0 ? fmt::format("its {} cudaLaunchKernel events last no time", h.launches)
                       : h.cpu_ops == 0 && h.cpu_ops_left_out == 0
                           ? std::string("no cpu_op and no cudaLaunchKernel events")
                       : h.cpu_ops == 0 ? no_cpu_ops(h) + " and no cudaLaunchKernel events"
                                        : fmt::format("{} cpu_op events but no cudaLaunchKernel event", h.cpu_ops));
    return;
  }
  if (!fit.dispatch_us) {
    log << fmt::format("# host: kernel launch {:.1f} us (median of {} launches); no per-operator cost: {}\n",
                       *fit.launch_us, h.launches,
                       h.cpu_ops == 0
                           ? no_cpu_ops(h)
                           : fmt::format("none of its {} cpu_op events encloses a launch on its thread", h.cpu_ops));
    return;
  }
  log << fmt::format(
      "# host: per-operator CPU cost {:.1f} us (median of {} CPU operators that launched kernels), kernel launch "
      "{:.1f} us (median of {} launches): {:.1f} us of dispatch beyond its launches (the operators' median)\n",
      *fit.operator_us, h.operators, *fit.launch_us, h.launches, *fit.dispatch_us);
}

// Where the host costs go in the calibration file, and what `simulate --calibration` does
// with them.
void print_host_written(const calibration::Calibration& c, const Scenario& scenario, std::ostream& log) {
  const calibration::ComputeTables& t = c.compute;
  if (!t.launch_overhead_us) return;
  log << fmt::format(
      "# host: written as compute.launch_overhead_us {:.1f} (cluster.gpu.kernel_launch, preset {:.4g} us)",
      *t.launch_overhead_us, scenario.cluster.gpu.kernel_launch.us());
  const FrameworkTraits& f = traits_of(scenario.training.framework);
  if (t.dispatch_us)
    log << fmt::format(" and compute.dispatch_us {:.1f} (in place of training.framework {}'s {:.4g} us)",
                       *t.dispatch_us, f.name, f.dispatch.us());
  log << "\n";
}

// The GPU the trace says it ran on (its deviceProperties) must be the scenario's: efficiencies
// fitted on one GPU are no other's. A trace that does not say (or stepsim's own from before it
// named the GPU) is taken as the scenario's.
void check_trace_gpu(const std::vector<analysis::KinetoTrace>& traces, const Scenario& scenario) {
  for (const analysis::KinetoTrace& t : traces) {
    if (t.gpu_name.empty() || t.gpu_name == "simulated GPU") continue;
    if (calibration::gpu_stands_for(t.gpu_name, scenario.cluster.gpu.name)) continue;
    throw InputError(t.path, "/deviceProperties/0/name",
                     fmt::format("ran on '{}', but the scenario's GPU is '{}': a fit stands for the GPU it was "
                                 "measured on (give a scenario on that GPU, e.g. --set cluster=... or "
                                 "--set cluster.gpu=...)",
                                 t.gpu_name, scenario.cluster.gpu.name));
  }
}

// What tells that the trace is of another job than the scenario (analysis::job_differences,
// as compare says it), measured on the rank whose kernels are fitted.
std::vector<std::string> trace_job_differences(analysis::LoadedTrace loaded, const std::string& trace,
                                               const Scenario& scenario, const SimulationResult& simulated) {
  if (loaded.timeline.ranks.empty()) return {};
  const int rank = loaded.timeline.ranks.front().rank;
  const analysis::Analysis measured = analysis::analyze_loaded(std::move(loaded), trace, rank, std::nullopt);
  return analysis::job_differences(measured, scenario, simulated);
}

// A trace of another job than the scenario's (another model, layout, batch or sequence) has
// other kernels than the scenario's ops: an efficiency fitted to them is no efficiency of the
// GPU, so none is written. The host's costs do not depend on the job and still are.
void leave_out_fitted(calibration::TraceFit& fit) {
  for (calibration::FittedValue& v : fit.values) {
    if (!v.fitted) continue;
    v.fitted.reset();
    v.why_not = "the trace is of another job than the scenario (see differs: above)";
  }
}

}  // namespace

int run_from_trace(const Args& args) {
  std::string trace, scenario_path, output;
  std::vector<std::string> sets;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("trace", po::value(&trace)->value_name("TRACE"),
                                                 "profiler trace (or stepsim's own --trace) of the scenario")(
      "scenario", po::value(&scenario_path)->value_name("SCENARIO"), "the scenario the trace ran")(
      "output,o", po::value(&output)->value_name("FILE"), "the calibration file to write ('-' for stdout)")(
      "set", po::value(&sets)->value_name("KEY=VALUE")->composing(), "override a scenario key (repeatable)");
  po::positional_options_description positional;
  positional.add("trace", 1).add("scenario", 1);
  const auto vm = parse_args("calibrate from-trace", args, desc, positional);
  if (help_requested(vm,
                     "usage: stepsim calibrate from-trace TRACE SCENARIO -o FILE [--set KEY=VALUE]...\n"
                     "       stepsim calibrate from-trace TRACE   (the CPU's cost per operator alone)",
                     desc,
                     "  stepsim calibrate from-trace rank0.json.gz my-scenario.json -o fitted.calib.json\n"
                     "  stepsim simulate --trace step.json && stepsim calibrate from-trace step.json default -o -\n"
                     "  stepsim calibrate from-trace tests/data/traces/\n"))
    return 0;
  if (trace.empty()) throw InputError("<command line>", "TRACE", "give the trace to calibrate from");
  require_stdin_once("calibrate from-trace", {trace, scenario_path});
  if (vm.count("scenario") == 0) {  // "" is the default scenario
    for (const char* flag : {"output", "set"})
      if (vm.count(flag) != 0)
        throw InputError("<command line>", flag[0] == 'o' ? "-o" : "--set",
                         "needs a SCENARIO: 'from-trace TRACE' alone prints the CPU's cost per operator and writes "
                         "nothing (give the scenario to fit a calibration file)");
    print_host(trace, analysis::host_costs(trace), std::cout);
    return 0;
  }
  if (output.empty()) throw InputError("<command line>", "-o", "give the calibration file to write (-o FILE)");
  report::check_outputs({{"-o", output, {}}});
  const Scenario scenario = io::load_scenario(scenario_path, sets);
  const workload::ModelWork work = workload::build_work(scenario);
  const calibration::OpNames names = calibration::op_names(work);
  // The trace read once, for its kernels and its CPU operators (a pipe cannot be read twice).
  std::vector<analysis::KinetoTrace> traces = analysis::read_traces(trace);
  check_trace_gpu(traces, scenario);
  const analysis::HostCosts host = analysis::host_costs(traces);
  analysis::LoadedTrace loaded = analysis::to_timeline(std::move(traces));
  const RankKernels rk = read_kernels(loaded);
  const calibration::Matched m = calibration::match_kernels(rk.kernels, names);
  const SimulationResult simulated = simulate(scenario);
  const std::vector<std::string> differences = trace_job_differences(std::move(loaded), trace, scenario, simulated);
  for (const std::string& d : differences) spdlog::warn("calibrate from-trace: {}", d);

  const Precision precision = scenario.training.precision;
  calibration::TraceFit fit = calibration::fit_kernels(m.kernels, scenario.cluster.gpu, precision);
  calibration::fit_by_totals(fit, m, simulated_totals(simulated, names), precision);
  if (!differences.empty()) leave_out_fitted(fit);

  calibration::Calibration c;
  c.provenance.gpu = scenario.cluster.gpu.name;
  c.provenance.sources = {trace};
  c.provenance.command = "stepsim calibrate from-trace " + trace + " " + scenario.source;
  for (const std::string& set : sets) c.provenance.command += " --set " + set;
  c.compute.efficiency = fit.efficiency();
  const analysis::HostFit host_fit = analysis::fit_host(host);
  c.compute.launch_overhead_us = host_fit.launch_us;
  c.compute.dispatch_us = host_fit.dispatch_us;
  // What `simulate` would refuse is left out, and said so, before the fitted step is simulated.
  const std::vector<std::string> left_out = calibration::leave_out_unreadable(c);

  std::ostringstream log;
  log << fmt::format(
      "# {}: {} kernels in the first step of its first rank, {} matched to {} ops by name, "
      "{} communication\n",
      trace, rk.kernels.size(), m.by_name, scenario.source, m.comm);
  log << fmt::format("# by class: GEMM {} kernels {:.1f} ms, attention {} {:.1f} ms, memory-bound {} {:.1f} ms",
                     m.totals.n_gemm, m.totals.gemm / 1e3, m.totals.n_attention, m.totals.attention / 1e3,
                     m.totals.n_memory, m.totals.memory / 1e3);
  for (const auto& [op, n] : m.comm_by_op) log << fmt::format("; NCCL {} {}", op, n);
  log << "\n";
  for (const std::string& d : differences) log << "# differs: " << d << "\n";
  log << fmt::format("# {:<16} {:>12} {:>12} {:>8} {:>10}  {}\n", "efficiency", "preset", "fitted", "kernels",
                     "residual", "");
  for (const auto& v : fit.values) {
    if (v.fitted)
      log << fmt::format("  {:<16} {:>12.4g} {:>12.4g} {:>8} {:>9.2f}%  {}\n", v.key, v.preset, *v.fitted, v.kernels,
                         100 * v.residual, v.why_not);
    else
      log << fmt::format("  {:<16} {:>12.4g} {:>12} {:>8} {:>10}  not fitted: {}\n", v.key, v.preset, "-", "-", "-",
                         v.why_not);
  }
  Scenario recalibrated = scenario;
  const calibration::MeasuredTables fitted({c});
  recalibrated.cluster.gpu = calibration::calibrated_gpu(fitted, scenario.cluster.gpu);
  const double before = simulated.report.step_time_s, after = simulate(recalibrated).report.step_time_s;
  const double measured = rk.step_us * 1e-6;
  log << fmt::format(
      "# step time: trace {:.4f} s; simulated {:.4f} s with the preset ({:+.1f}%), {:.4f} s with the "
      "fitted values ({:+.2f}%)\n",
      measured, before, 100 * (before - measured) / measured, after, 100 * (after - measured) / measured);
  print_host(trace, host, log);
  print_host_written(c, scenario, log);
  for (const std::string& note : left_out) log << "# not written: " << note << "\n";
  write_with_log({"-o", output, [&](std::ostream& os) { os << calibration::calibration_json(c); }}, log.str());
  return 0;
}

}  // namespace stepsim::cli
