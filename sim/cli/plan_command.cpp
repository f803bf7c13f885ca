// `stepsim plan`: one job on several clusters, each with its own fastest layout, and what a
// token budget costs on each; the search is the library's (sweep/plan), this file parses and prints.
#include <fmt/format.h>

#include <iostream>

#include "cli/options.hpp"
#include "cli/plan_output.hpp"
#include "io/scenario_loader.hpp"
#include "report/output_target.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "sweep/plan.hpp"
#include "sweep/plan_rows.hpp"
#include "sweep/runner.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kPlanUsage =
    "usage: stepsim plan [SCENARIO.json] [--model NAME] (--tokens N | --deadline DAYS) --gpus LIST\n"
    "                    [--cluster NAME[@PRICE]...] [--precision LIST] [--set KEY=VALUE]... [--jobs J]\n"
    "                    [-o FILE.csv|FILE.json]\n\n"
    "Which cluster to buy for a training job. For each --cluster (a cluster preset, with its price\n"
    "per GPU-hour) and each GPU count, searches the fastest layout that fits, as 'sweep --best'\n"
    "does (TP up to the NVLink domain, PP, CP, EP for a mixture of experts, micro-batch, schedule and\n"
    "virtual stages, recompute,\n"
    "data-parallel kind, bucket size, TP communication overlap and the --precision values allowed),\n"
    "and prints per cluster: the layout, step time, tokens/s per GPU, MFU, exposed communication,\n"
    "memory headroom, and for the token budget the time to train, the GPU boards' energy and the\n"
    "cost; then the Pareto table of cost against time to train (with --deadline alone, of cost per\n"
    "M tokens against the tokens trained by the deadline).\n\n"
    "The job is SCENARIO (without it: the embedded default) with --model and --set: its model,\n"
    "sequence length and global batch hold on every cluster; its layout keys are searched unless\n"
    "--set fixes them. The keys of SCENARIO's cluster section carry to every --cluster as --set\n"
    "cluster.KEY would (not its preset, node count or GPU: a GPU of its own is refused beside\n"
    "--cluster); without --cluster, SCENARIO's own cluster is planned (the embedded default's without\n"
    "SCENARIO). --tokens: a whole number of tokens from one step's (global batch x sequence length)\n"
    "to 1e18. Steps are whole: the budget takes ceil(tokens / tokens per step) steps, and the\n"
    "deadline trains floor(deadline / step time) of them; a deadline shorter than one step on every\n"
    "cluster and GPU count is refused.\n\n"
    "Band: the step time, time to train, energy and cost carry +/- the mean absolute error of stepsim's\n"
    "step times against the published runs on that GPU (docs/validation.md); a GPU with no\n"
    "published run gets the mean over all runs, and says so.\n\n"
    "--gpus: a count, a list (128,256) or a range (64:1024:x2), up to 1048576. -o writes one row\n"
    "per cluster and GPU count as CSV or JSON, whole or not at all ('-': CSV on stdout instead of\n"
    "the tables);\n"
    "tools/plot.py pareto FILE.csv draws cost against time to train. Progress goes to stderr.\n\n"
    "Search: layouts are simulated in the order of a lower bound on their step time (their compute:\n"
    "one micro-batch simulated per TP, CP, micro-batch and precision, times the micro-batches over\n"
    "the stages, with the fill and drain the schedule cannot hide); those whose bound is above the\n"
    "fastest found are left out, and once --max-layouts fit the rest too (the table counts them).";

constexpr const char* kPlanExamples =
    "  stepsim plan --model llama3-70b --tokens 1T --gpus 256 --precision bf16,fp8 \\\n"
    "      --cluster dgx-a100-80g-hdr@1.8 --cluster dgx-h100-ndr@2.5 --cluster dgx-h200-ndr@3.1 \\\n"
    "      --cluster dgx-b200@5.5 --cluster gb200-nvl72@6.5 -o plan.csv && tools/plot.py pareto plan.csv -o plan.png\n"
    "  stepsim plan --model llama3-8b --deadline 14 --gpus 64:512:x2 --cluster dgx-h100-ndr@2.5\n";

struct PlanFlags {
  std::string scenario, model, tokens, deadline, gpus, output;
  std::vector<std::string> clusters, precisions, sets;
  long long jobs = 0;
  long long max_layouts = sweep::kDefaultPlanLayouts;
};

po::options_description describe(PlanFlags& f) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("scenario", po::value(&f.scenario)->value_name("SCENARIO.json"),
                                                 "the job (default: the embedded default scenario)")(
      "model", po::value(&f.model)->value_name("NAME"), "a model preset (--set model=NAME)")(
      "tokens", po::value(&f.tokens)->value_name("N"), "token budget, e.g. 1T, 300B, 1.5e12 (at most 1e18)")(
      "deadline", po::value(&f.deadline)->value_name("DAYS"),
      "days available: tokens of the whole steps trained by then")("gpus", po::value(&f.gpus)->value_name("LIST"),
                                                                   "GPU count(s): 256, 128,256 or 64:1024:x2")(
      "cluster", po::value(&f.clusters)->value_name("NAME[@PRICE]")->composing(),
      "a cluster preset and its price per GPU-hour (repeatable, or a comma-separated list; --set "
      "cluster.gpu_hour_price=P prices those given without one)")(
      "precision", po::value(&f.precisions)->value_name("LIST")->composing(),
      "training precisions allowed, of bf16, fp16, fp8, tf32, fp32, mxfp8, nvfp4, e.g. bf16,fp8 (default: the "
      "scenario's; not with --set training.precision, which fixes one)")(
      "set", po::value(&f.sets)->value_name("KEY=VALUE")->composing(), "override a scenario key on every cluster")(
      "jobs,j", number_value(f.jobs, "--jobs", sweep::jobs_error)->value_name("J"),
      "simulations at once (default: every core)")(
      "max-layouts", number_value(f.max_layouts, "--max-layouts", sweep::max_layouts_error)->value_name("N"),
      "layouts that fit simulated per cluster and GPU count, the fastest bound first (default 96; 0: every one the "
      "bound cannot rule out)")("output,o", po::value(&f.output)->value_name("FILE"),
                                "rows to FILE.csv or FILE.json ('-': CSV on stdout)");
  return desc;
}

sweep::PlanSpec spec_of(const PlanFlags& f, const po::variables_map& vm) {
  if (vm.count("scenario") != 0) require_scenario_name(f.scenario);
  sweep::PlanRequest request;
  request.scenario = io::read_scenario_input(f.scenario);  // read once for every cluster and layout
  if (vm.count("model") != 0) request.model = f.model;
  if (vm.count("tokens") != 0) request.tokens = f.tokens;
  if (vm.count("deadline") != 0) request.deadline = f.deadline;
  if (vm.count("gpus") != 0) request.gpus = f.gpus;
  request.clusters = f.clusters;
  request.precisions = f.precisions;
  request.sets = f.sets;
  request.max_layouts = f.max_layouts;
  return sweep::make_plan_spec(request);
}

void check_jobs(const PlanFlags& f, const po::variables_map& vm) {
  if (vm.count("jobs") != 0 && (f.jobs < 1 || f.jobs > sweep::kMaxJobs))
    throw sweep::jobs_error(std::to_string(f.jobs));
}

report::Output output_of(const std::string& path, const std::vector<sweep::PlanRow>* rows) {
  const bool json = path.ends_with(".json");
  if (!json && !path.ends_with(".csv") && !report::is_written_through(path))
    throw InputError(
        "-o", path, "expected a file name ending in .csv or .json, or '-', a device or a FIFO for CSV written through");
  return {"-o", path, [json, rows](std::ostream& os) {
            if (json)
              sweep::write_plan_json(*rows, os);
            else
              sweep::write_plan_csv(*rows, os);
          }};
}

void progress_line(const sweep::PlanRow& r) {
  std::cerr << fmt::format("stepsim: plan: {}, {} GPUs: {} configurations, {} fit; {} ({:.1f} s)\n", r.cluster.name,
                           r.gpus, r.search.candidates + r.search.pruned + r.search.unsearched, r.search.ranked.size(),
                           r.report ? fmt::format("fastest {:.3f} s per step", r.report->step_time_s)
                           : r.search.no_layout.empty() ? "none fits"
                                                        : "no layout",
                           r.search_s);
}

}  // namespace

int run_plan(const Args& args) {
  PlanFlags f;
  const auto desc = describe(f);
  po::positional_options_description positional;
  positional.add("scenario", 1);
  const auto vm = parse_args("plan", args, desc, positional);
  if (help_requested(vm, kPlanUsage, desc, kPlanExamples)) return 0;
  check_jobs(f, vm);
  const sweep::PlanSpec spec = spec_of(f, vm);
  std::vector<sweep::PlanRow> rows;
  std::optional<report::Output> output;
  if (vm.count("output") != 0) {
    output = output_of(f.output, &rows);
    report::check_outputs({*output});
  }
  rows = sweep::run_plan(spec, static_cast<unsigned>(f.jobs), progress_line);
  std::vector<report::Output> outputs;
  if (output) outputs.push_back(*output);
  report::write_outputs(outputs, [&](std::ostream& out) { write_plan_tables(spec, rows, out); });
  return 0;
}

}  // namespace stepsim::cli
