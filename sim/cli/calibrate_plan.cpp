// `stepsim calibrate plan SCENARIO`: prints the measurement plan (simulation/calibration_needs,
// calibration/plan) as commands, or as JSON.
#include "cli/calibrate_plan.hpp"

#include <fmt/format.h>

#include <iostream>

#include "calibration/plan.hpp"
#include "cli/options.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"
#include "simulation/calibration_needs.hpp"
#include "stepsim/error.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kCalibratePlanUsage = "usage: stepsim calibrate plan SCENARIO [--set KEY=VALUE]... [--json FILE]";
constexpr const char* kCalibratePlanExamples =
    "  stepsim calibrate plan my-scenario.json\n"
    "  stepsim calibrate plan default --set model=llama3-70b --json plan.json\n";

void print_plan(const std::vector<calibration::PlannedRun>& runs, std::ostream& out) {
  out << "# runs that would measure every communicator and GEMM shape of the step (one process per GPU)\n";
  for (const calibration::PlannedRun& r : runs)
    out << fmt::format("# {}\n{}", r.what, r.command.empty() ? "" : r.command + "\n");
}

}  // namespace

int run_calibrate_plan(const Args& args) {
  std::string scenario_path, json;
  std::vector<std::string> sets;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("scenario", po::value(&scenario_path)->value_name("SCENARIO"),
                                                 "the scenario file or preset to plan for")(
      "set", po::value(&sets)->value_name("KEY=VALUE")->composing(), "override a scenario key (repeatable)")(
      "json", po::value(&json)->value_name("FILE"), "write the needs and commands as JSON to FILE ('-' for stdout)");
  po::positional_options_description positional;
  positional.add("scenario", 1);
  const auto vm = parse_args("calibrate plan", args, desc, positional);
  if (help_requested(vm, kCalibratePlanUsage, desc, kCalibratePlanExamples)) return 0;
  if (scenario_path.empty()) throw InputError("<command line>", "SCENARIO", "give the scenario to plan for");
  std::vector<report::Output> outputs;
  if (vm.count("json") != 0) outputs.push_back({"--json", json, {}});
  report::check_outputs(outputs);
  const Scenario scenario = io::load_scenario(scenario_path, sets);
  const calibration::CalibrationNeeds needs = calibration_needs(scenario);
  const std::vector<calibration::PlannedRun> runs = calibration::plan_runs(needs);
  for (report::Output& o : outputs) o.write = [&](std::ostream& os) { os << calibration::plan_json(needs, runs); };
  report::write_outputs(outputs, [&](std::ostream& out) { print_plan(runs, out); });
  return 0;
}

}  // namespace stepsim::cli
