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
    "  stepsim compare rank0.json.gz configs/examples/ddp-resnet50-2xa100.json\n"
    "  stepsim compare traces/ my.json --set data_parallel.bucket_cap_mb=50 --json -\n";

}  // namespace

int run_compare(const Args& args) {
  // TRACE and SCENARIO as one positional list: GCC 12 warns (-Wnull-dereference) inside
  // Boost's typed_value<std::string>::notify when it is inlined here several times.
  std::vector<std::string> inputs, sets, step;
  std::size_t rank = 0;
  OutputOptions out;
  po::options_description desc("Options");
  desc.add_options()
      ("help,h", "show this help")
      ("inputs", po::value(&inputs)->value_name("TRACE SCENARIO.json"), "trace (file or folder) and scenario")
      ("set", po::value(&sets)->value_name("KEY=VALUE")->composing(), "override a scenario key (repeatable)")
      ("step", po::value(&step)->value_name("N"), "measure only ProfilerStep#N")
      ("rank", po::value(&rank)->value_name("I"), "which rank of a folder to measure (index, default 0)");
  add_output_options(desc, out);
  po::positional_options_description positional;
  positional.add("inputs", 2);
  auto vm = parse_args("compare", args, desc, positional);
  if (vm.count("help")) {
    print_help(kUsage, desc, kExamples);
    return 0;
  }
  if (inputs.size() != 2)
    throw InputError("<command line>", "stepsim compare", "expected TRACE and SCENARIO.json (see 'stepsim compare --help')");

  const analysis::Analysis measured =
      analysis::analyze_trace(inputs[0], rank, step.empty() ? std::nullopt : std::optional(step.back()));
  const Scenario scenario = io::load_scenario(inputs[1], sets);
  const SimulationResult predicted = simulate(scenario);
  if (out.json != "-") analysis::write_comparison_table(measured, predicted.report, std::cout);
  if (!out.json.empty())
    report::write_output(out.json, [&](std::ostream& os) { analysis::write_comparison_json(measured, predicted.report, os); });
  if (!out.trace.empty())
    report::write_output(out.trace, [&](std::ostream& os) { report::write_trace(predicted.timeline, os); });
  return 0;
}

}  // namespace stepsim::cli
