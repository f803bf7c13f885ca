// `stepsim calibrate from-trace`: the kernels of one rank's first step, matched to the
// scenario's ops by name (stepsim's own traces) or by class (GEMM, attention, memory-bound,
// NCCL), fitted to the compute model, and the simulation rerun with what was fitted.
#include "cli/calibrate_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <map>

#include "analysis/nccl_kernels.hpp"
#include "analysis/trace_timeline.hpp"
#include "calibration/apply.hpp"
#include "calibration/trace_fit.hpp"
#include "cli/options.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"
#include "workload/work.hpp"

namespace stepsim::cli {
namespace {

struct Kernel {
  std::string name;
  bool comm = false;
  double start_us = 0, end_us = 0;
};

struct RankKernels {
  std::vector<Kernel> kernels;  // of one rank, inside its first step
  double step_us = 0;
};

std::vector<Kernel> in_window(std::vector<Kernel> all, double begin, double end) {
  std::vector<Kernel> out;
  for (auto& k : all)
    if (k.start_us >= begin && k.start_us < end) out.push_back(std::move(k));
  return out;
}

// A profiler trace through the analyzer: its first rank, its first step.
RankKernels from_timeline(const analysis::LoadedTrace& t) {
  RankKernels out{{}, 0};
  if (t.timeline.ranks.empty()) return out;
  std::vector<Kernel> all;
  for (const Interval& iv : t.timeline.ranks.front().intervals) {
    if (iv.activity != Activity::compute && iv.activity != Activity::comm) continue;
    const std::string name = iv.name < t.timeline.names.size() ? std::string(t.timeline.names[iv.name]) : "";
    all.push_back({name, iv.activity == Activity::comm, iv.start.us(), iv.end.us()});
  }
  const StepWindow& w = t.timeline.steps.front();
  out.kernels = in_window(std::move(all), w.start.us(), w.end.us());
  out.step_us = (w.end - w.start).us();
  return out;
}

// The analyzer reads profiler traces and stepsim's own (simulate --trace) alike.
RankKernels read_kernels(const std::string& path) { return from_timeline(analysis::load_trace(path)); }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A profiler kernel's class from its name: cuBLAS/CUTLASS GEMMs, flash/fused attention,
// everything else memory-bound element-wise work.
workload::OpClass class_of_kernel(const std::string& name) {
  const std::string n = lower(name);
  for (const char* a : {"flash", "fmha", "attention", "attn"})
    if (n.find(a) != std::string::npos) return workload::OpClass::attention;
  for (const char* g : {"gemm", "xmma", "cutlass", "cublas", "nvjet", "matmul", "hmma", "wgmma", "s16816", "s1688"})
    if (n.find(g) != std::string::npos) return workload::OpClass::gemm;
  return workload::OpClass::elementwise;
}

// The names stepsim gives a scenario's compute ops (program_builder's op_name, without the
// layer prefix) with the op each stands for.
std::map<std::string, workload::OpCost> op_names(const workload::ModelWork& w) {
  std::map<std::string, workload::OpCost> out;
  auto add = [&](const std::vector<workload::OpCost>& ops, bool recompute) {
    for (const auto& op : ops) {
      if (recompute)
        out[op.name + " recompute"] = op;
      else if (op.pass == workload::Pass::forward)
        out[op.name + " fwd"] = op;
      else
        out[op.name] = op;
    }
  };
  for (const auto* l : {&w.layer, &w.pre, &w.post}) {
    add(l->forward, false);
    add(l->backward, false);
    add(l->recompute, true);
  }
  out["optimizer step"] = w.optimizer;
  return out;
}

// "L12 fc1" -> "fc1": stepsim's traces prefix an op with its layer.
std::string without_layer(const std::string& name) {
  if (name.size() < 3 || name[0] != 'L') return name;
  std::size_t i = 1;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == 1 || i >= name.size() || name[i] != ' ') return name;
  return name.substr(i + 1);
}

// Overlap of [a, b) with the merged communication intervals.
double overlap_with(const std::vector<std::pair<double, double>>& comm, double a, double b) {
  double o = 0;
  for (const auto& [s, e] : comm) {
    if (s >= b) break;
    o += std::max(0.0, std::min(b, e) - std::max(a, s));
  }
  return o;
}

std::vector<std::pair<double, double>> comm_union(const std::vector<Kernel>& ks) {
  std::vector<std::pair<double, double>> v;
  for (const auto& k : ks)
    if (k.comm) v.emplace_back(k.start_us, k.end_us);
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& i : v) {
    if (!out.empty() && i.first <= out.back().second)
      out.back().second = std::max(out.back().second, i.second);
    else
      out.push_back(i);
  }
  return out;
}

struct ClassTotals {
  double gemm = 0, attention = 0, memory = 0;
  int n_gemm = 0, n_attention = 0, n_memory = 0;
  void add(workload::OpClass c, double us) {
    if (c == workload::OpClass::gemm)
      (gemm += us, ++n_gemm);
    else if (c == workload::OpClass::attention)
      (attention += us, ++n_attention);
    else
      (memory += us, ++n_memory);
  }
};

struct Matched {
  std::vector<calibration::MeasuredKernel> kernels;
  ClassTotals totals;
  int by_name = 0, comm = 0;
  std::map<std::string, int> comm_by_op;
};

Matched match(const RankKernels& rk, const std::map<std::string, workload::OpCost>& names) {
  Matched out;
  const auto comm = comm_union(rk.kernels);
  for (const Kernel& k : rk.kernels) {
    if (k.comm) {
      ++out.comm;
      ++out.comm_by_op[to_string(analysis::coll_op_of("", k.name))];
      continue;
    }
    calibration::MeasuredKernel m;
    m.time_us = k.end_us - k.start_us;
    m.overlap_us = overlap_with(comm, k.start_us, k.end_us);
    if (const auto it = names.find(without_layer(k.name)); it != names.end()) {
      m.cls = it->second.cls;
      m.flops = it->second.flops;
      m.bytes = it->second.bytes.as_double();
      m.backward = it->second.pass != workload::Pass::forward;
      m.flash2 = it->second.flash2;
      m.matched = true;
      ++out.by_name;
    } else {
      m.cls = class_of_kernel(k.name);
    }
    if (m.time_us <= 0) continue;
    out.totals.add(m.cls, m.time_us);
    out.kernels.push_back(m);
  }
  return out;
}

// The same classes in the model's own step of the scenario.
ClassTotals simulated_totals(const Scenario& s, const std::map<std::string, workload::OpCost>& names) {
  const SimulationResult r = simulate(s);
  ClassTotals t;
  if (r.timeline.ranks.empty()) return t;
  const StepWindow& w = r.timeline.steps.front();
  for (const Interval& iv : r.timeline.ranks.front().intervals) {
    if (iv.activity != Activity::compute || iv.start < w.start || iv.start >= w.end) continue;
    const auto it = names.find(without_layer(std::string(r.timeline.names[iv.name])));
    t.add(it == names.end() ? workload::OpClass::elementwise : it->second.cls, (iv.end - iv.start).us());
  }
  return t;
}

// Kernels known only by class: each efficiency scaled by the class's simulated / measured time.
void fit_by_totals(calibration::TraceFit& fit, const Matched& m, const ClassTotals& sim) {
  for (auto& v : fit.values) {
    if (v.fitted) continue;
    if (m.by_name == 0 && (v.key == "gemm_half_flops" || v.key == "comm_slowdown"))
      v.why_not = "no kernel matched an op of the scenario by name, so no kernel's FLOPs are known";
    double simulated = 0, measured = 0;
    int n = 0;
    if (v.key == "gemm_max") (simulated = sim.gemm, measured = m.totals.gemm, n = m.totals.n_gemm);
    if (v.key == "attention_max") (simulated = sim.attention, measured = m.totals.attention, n = m.totals.n_attention);
    if (v.key == "hbm") (simulated = sim.memory, measured = m.totals.memory, n = m.totals.n_memory);
    if (n == 0) {
      if (v.key == "attention_max") v.why_not = "the trace has no attention kernels (no transformer layers?)";
      continue;
    }
    if (const auto x = calibration::scale_by_totals(v.preset, simulated, measured); x && *x <= 1.0) {
      v.fitted = *x;
      v.kernels = n;
      v.residual = 0;
      v.why_not = "from class totals";
    } else if (x) {
      v.why_not = fmt::format("class totals imply {:.3g}, above 1: the trace is not of this scenario", *x);
    }
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
  if (help_requested(vm, "usage: stepsim calibrate from-trace TRACE SCENARIO -o FILE [--set KEY=VALUE]...", desc, ""))
    return 0;
  if (trace.empty()) throw InputError("<command line>", "TRACE", "give the trace to calibrate from");
  if (output.empty()) throw InputError("<command line>", "-o", "give the calibration file to write (-o FILE)");
  report::check_outputs({{"-o", output, {}}});
  const Scenario scenario = io::load_scenario(scenario_path, sets);
  const workload::ModelWork work = workload::build_work(scenario);
  const auto names = op_names(work);
  const RankKernels rk = read_kernels(trace);
  const Matched m = match(rk, names);

  calibration::TraceFit fit = calibration::fit_kernels(m.kernels, scenario.cluster.gpu, scenario.training.precision);
  fit_by_totals(fit, m, simulated_totals(scenario, names));

  calibration::Calibration c;
  c.provenance.gpu = scenario.cluster.gpu.name;
  c.provenance.sources = {trace};
  c.provenance.command = "stepsim calibrate from-trace " + trace + " " + scenario.source;
  c.compute.efficiency = fit.efficiency();

  std::ostream& log = output == "-" ? std::cerr : std::cout;
  log << fmt::format(
      "# {}: {} kernels in the first step of its first rank, {} matched to {} ops by name, "
      "{} communication\n",
      trace, rk.kernels.size(), m.by_name, scenario.source, m.comm);
  log << fmt::format("# by class: GEMM {} kernels {:.1f} ms, attention {} {:.1f} ms, memory-bound {} {:.1f} ms",
                     m.totals.n_gemm, m.totals.gemm / 1e3, m.totals.n_attention, m.totals.attention / 1e3,
                     m.totals.n_memory, m.totals.memory / 1e3);
  for (const auto& [op, n] : m.comm_by_op) log << fmt::format("; NCCL {} {}", op, n);
  log << "\n";
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
  recalibrated.cluster.gpu = calibration::calibrated_gpu(calibration::MeasuredTables({c}), scenario.cluster.gpu);
  const double before = simulate(scenario).report.step_time_s, after = simulate(recalibrated).report.step_time_s;
  const double measured = rk.step_us * 1e-6;
  log << fmt::format(
      "# step time: trace {:.4f} s; simulated {:.4f} s with the preset ({:+.1f}%), {:.4f} s with the "
      "fitted values ({:+.2f}%)\n",
      measured, before, 100 * (before - measured) / measured, after, 100 * (after - measured) / measured);
  report::write_output({"-o", output, [&](std::ostream& os) { os << calibration::calibration_json(c); }});
  return 0;
}

}  // namespace stepsim::cli
