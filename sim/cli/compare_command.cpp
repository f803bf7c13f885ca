// `stepsim compare`: a measured trace and the simulation of a scenario side by side, with
// the same definitions on both sides.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <optional>

#include "analysis/analysis_output.hpp"
#include "analysis/like_for_like.hpp"
#include "cli/options.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kCompareUsage =
    "usage: stepsim compare TRACE SCENARIO.json [--set KEY=VALUE]... [--step N] [--rank R] [--json FILE|-]\n"
    "                       [--trace FILE|-]\n\n"
    "Measures TRACE (a PyTorch profiler trace or a folder of rank files, as 'stepsim analyze'\n"
    "does: the mean over its ProfilerSteps, or one step with --step) and simulates SCENARIO.json,\n"
    "then prints measured and predicted step time, exposed communication per kind, communication\n"
    "busy time, compute, the GPU waiting for the host and hidden fraction with the relative\n"
    "difference (predicted - measured) / measured. The GPU waiting for the host is, measured,\n"
    "HolisticTraceAnalysis' host wait on the trace's compute stream (the stream with the most\n"
    "kernels; on the exact timestamps, per ProfilerStep of HTA's window, or with --step N that\n"
    "step's gaps alone, each in the step that launched the kernel after it; n/a without kernels\n"
    "tied to their launches) and, predicted, the same rule on the simulated rank's compute stream,\n"
    "each kernel launched when the simulated host launched it, as its '--trace-format kineto'\n"
    "trace records it (simulate's own 'GPU waiting for the host' counts only the time no kernel\n"
    "runs at all, so a compute stream idle behind another stream's collective with its next\n"
    "kernel launched late is host wait here and not there).\n"
    "Process groups of a trace count as kind 'other' unless their description or name\n"
    "says tp, dp, pp, ep, cp or fsdp (Megatron-Core's descriptions as the simulator classes the\n"
    "same communicators: EXPERT_DATA_PARALLEL_GROUP is dp, EXPERT_TENSOR_PARALLEL_GROUP ep, as\n"
    "the simulator's own \"etp\" is; a sharded data-parallel group, torchtitan's mesh_dp_shard\n"
    "or mesh_dp_shard_cp, fsdp), so compare the total exposed communication first. Fractions (hidden,\n"
    "exposed of the step) differ in percentage points (pp). The prediction is measured on the\n"
    "trace's rank when the simulation simulates it (simulation.ranks \"all\" simulates every\n"
    "GPU), else on its report's rank, which a note then says. Before the table, compare checks\n"
    "that the trace and the scenario describe the same job (world size, the size of each kind's\n"
    "process groups the trace states against the scenario's communicators, compute per step,\n"
    "step count) and says what differs in 'differs:' lines; the same lines go to stderr as\n"
    "warnings in every case, so that a pipe or file taking the table or the JSON does not hide them.";

constexpr const char* kCompareExamples =
    "  stepsim compare rank0.json.gz my-ddp-scenario.json\n"
    "  stepsim simulate ddp-1.3b-64xa100 --trace sim.json && stepsim compare sim.json ddp-1.3b-64xa100\n"
    "  stepsim compare traces/ my.json --set data_parallel.bucket_cap_mb=50 --json -\n";

// What tells that the trace and the scenario are different jobs (analysis::job_differences),
// and that the measured figures are a mean of several steps, one line each.
std::vector<std::string> differences_of(const analysis::Analysis& measured, const Scenario& scenario,
                                        const SimulationResult& result) {
  std::vector<std::string> out = analysis::job_differences(measured, scenario, result);
  const std::size_t steps = measured.metrics.steps.size();
  if (steps != 1)
    out.push_back(
        fmt::format("steps: the trace holds {} profiler steps and the simulation one; measured figures are "
                    "their mean",
                    steps));
  return out;
}

}  // namespace

int run_compare(const Args& args) {
  // TRACE and SCENARIO as one positional list (see add_trace_options on GCC 12's warning).
  std::vector<std::string> inputs, sets;
  TraceSelection selection;
  OutputOptions out;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("inputs", po::value(&inputs)->value_name("TRACE SCENARIO.json"),
                                                 "trace (file or folder) and scenario")(
      "set", po::value(&sets)->value_name("KEY=VALUE")->composing(), "override a scenario key (repeatable)");
  add_trace_options(desc, selection);
  add_output_options(desc, out);
  po::positional_options_description positional;
  positional.add("inputs", 2);
  auto vm = parse_args("compare", args, desc, positional);
  if (help_requested(vm, kCompareUsage, desc, kCompareExamples)) return 0;
  if (inputs.size() != 2)
    throw InputError("<command line>", "stepsim compare",
                     "expected TRACE and SCENARIO.json (see 'stepsim compare --help')");
  require_scenario_name(inputs[1]);
  require_stdin_once("compare", inputs);
  check_outputs(out);

  const analysis::Analysis measured = analysis::analyze_trace(inputs[0], selection.rank, selection.step_name());
  const Scenario scenario = io::load_scenario(inputs[1], sets);
  // The host's issue of each op, for the host-wait row's launches (analysis::like_for_like).
  SimulateOptions options;
  options.host_issues = true;
  const SimulationResult predicted = simulate(scenario, options);
  const std::vector<std::string> differences = differences_of(measured, scenario, predicted);
  // The table says it too, but a pipe or a file may take the table (or the JSON) unread.
  for (const std::string& d : differences) spdlog::warn("compare: {}", d);
  emit(
      out,
      [&](std::ostream& os) {
        for (const std::string& d : differences) os << "differs: " << d << "\n";
        if (!differences.empty()) os << "\n";
        analysis::write_comparison_table(measured, predicted, os);
      },
      [&](std::ostream& os) { analysis::write_comparison_json(measured, predicted, os); },
      [&](std::ostream& os) {
        report::write_trace(predicted.timeline, os, scenario.parallel.gpus(), scenario.cluster.gpu.name);
      });
  return 0;
}

}  // namespace stepsim::cli
