// `stepsim compare`: a measured trace and the simulation of a scenario side by side, with
// the same definitions on both sides.
#include <iostream>
#include <optional>

#include "analysis/analysis_output.hpp"
#include "cli/options.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kUsage =
    "usage: stepsim compare TRACE SCENARIO.json [--set KEY=VALUE]... [--step N] [--rank I] [--json FILE|-]\n\n"
    "Measures TRACE (a PyTorch profiler trace or a folder of rank files, as 'stepsim analyze'\n"
    "does: the mean over its ProfilerSteps, or one step with --step) and simulates SCENARIO.json,\n"
    "then prints measured and predicted step time, exposed communication per kind, communication\n"
    "busy time, compute and hidden fraction with the relative difference (predicted - measured)\n"
    "/ measured. Process groups of a trace count as kind 'other' unless their name says tp, dp,\n"
    "pp, ep, cp or fsdp, so compare the total exposed communication first.";

constexpr const char* kExamples =
    "  stepsim compare rank0.json.gz my-ddp-scenario.json\n"
    "  stepsim simulate ddp-1.3b-64xa100 --trace sim.json && stepsim compare sim.json ddp-1.3b-64xa100\n"
    "  stepsim compare traces/ my.json --set data_parallel.bucket_cap_mb=50 --json -\n";

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
  if (help_requested(vm, kUsage, desc, kExamples)) return 0;
  if (inputs.size() != 2)
    throw InputError("<command line>", "stepsim compare",
                     "expected TRACE and SCENARIO.json (see 'stepsim compare --help')");
  require_scenario_name(inputs[1]);
  check_outputs(out);

  const analysis::Analysis measured = analysis::analyze_trace(inputs[0], selection.rank, selection.step_name());
  const Scenario scenario = io::load_scenario(inputs[1], sets);
  const SimulationResult predicted = simulate(scenario);
  emit(
      out, [&](std::ostream& os) { analysis::write_comparison_table(measured, predicted, os); },
      [&](std::ostream& os) { analysis::write_comparison_json(measured, predicted, os); },
      [&](std::ostream& os) { report::write_trace(predicted.timeline, os); });
  return 0;
}

}  // namespace stepsim::cli
