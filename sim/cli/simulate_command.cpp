// `stepsim simulate`: load a scenario (or the embedded default), simulate one step, and
// write the table, the JSON report and the trace.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>

#include "cli/cluster_comparison.hpp"
#include "cli/options.hpp"
#include "cli/trace_ranks.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/memory_model.hpp"
#include "report/report_io.hpp"
#include "simulation/advice.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kSimulateUsage =
    "usage: stepsim simulate [SCENARIO.json] [--set KEY=VALUE]... [--calibration FILE]... [--advise]\n"
    "                        [--json FILE] [--trace FILE [--trace-format kineto] [--trace-ranks LIST]]\n"
    "                        [--compare-cluster NAME[@PRICE][,NAME[@PRICE]]...]...\n\n"
    "Simulates one training step of SCENARIO.json (without it: the embedded default, Llama-3-8B\n"
    "on 64 H100 with TP 8 inside each node and DDP across 8 nodes) and prints step time,\n"
    "throughput, MFU and where the time goes. SCENARIO.json may be an embedded example's name\n"
    "(stepsim presets) or '-', standard input.\n\n"
    "Definitions (the same for simulated and measured timelines):\n"
    "  exposed communication  time when a communication kernel runs and no compute kernel runs,\n"
    "                         split equally among the kinds (tp, dp, ...) running at that moment\n"
    "  hidden fraction        time when communication and compute run at once, divided by the\n"
    "                         union of communication time (HolisticTraceAnalysis' comm-comp overlap)\n"
    "  comm busy              union of the time each kind of communication runs\n"
    "  bubble                 compute stream idle for lack of work (pipeline fill/drain, waiting\n"
    "                         on a peer), not waiting on its own communication\n"
    "  MFU                    model FLOPs (no recompute) per second per GPU over the GPU's dense\n"
    "                         peak for the training precision; attention is counted causal\n"
    "                         (half of the s^2 that Megatron's papers count)";

constexpr const char* kSimulateExamples =
    "  stepsim simulate\n"
    "  stepsim simulate configs/examples/ddp-1.3b-64xa100.json --set data_parallel.bucket_cap_mb=100\n"
    "  stepsim simulate --set parallel.sequence_parallel=true --json report.json --trace step.json\n"
    "  stepsim simulate my.json --json - | jq .breakdown_s\n"
    "  stepsim simulate --set cluster=dgx-h200-ndr --calibration h200.calib.json\n"
    "  stepsim simulate --set cluster.gpu_hour_price=2.2 --compare-cluster dgx-h200-ndr@3.1\n"
    "  stepsim simulate --trace sim.json --trace-format kineto && stepsim analyze sim.json\n"
    "  stepsim simulate ddp-1.3b-64xa100 --set data_parallel.overlap_grad_reduce=false --advise\n"
    "  stepsim simulate ddp-1.3b-64xa100 --set simulation.ranks=all \\\n"
    "      --set 'simulation.variation.gpu_speed=[{\"rank\": 5, \"factor\": 0.8}]' --trace t.json --trace-ranks 0-7\n";

std::string layout_of(const ParallelSpec& p) {
  return fmt::format("TP {}, PP {}, CP {}, DP {}", p.tp, p.pp, p.cp, p.dp);
}

}  // namespace

int run_simulate(const Args& args) {
  std::string scenario_path;
  std::vector<std::string> sets, calibrations, formats, clusters, trace_ranks;
  OutputOptions out;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("scenario", po::value(&scenario_path)->value_name("SCENARIO.json"),
                                                 "scenario file")(
      "set", po::value(&sets)->value_name("KEY=VALUE")->composing(),
      "override a scenario key, e.g. parallel.tp=4 (repeatable)")(
      "calibration", po::value(&calibrations)->value_name("FILE")->composing(),
      "apply a calibration file (stepsim calibrate) after the scenario's own (repeatable)")(
      "trace-format", po::value(&formats)->value_name("FORMAT")->notifier(given_once("--trace-format")),
      "chrome (default): every simulated rank for Perfetto; kineto: the rank the report is measured on as a "
      "PyTorch profiler trace (kernel events on CUDA streams, NCCL kernel names, ProfilerStep#1) for "
      "'stepsim analyze' and HolisticTraceAnalysis")(
      "trace-ranks", po::value(&trace_ranks)->value_name("LIST")->notifier(given_once("--trace-ranks")),
      "only these global ranks in the chrome trace, one list given once, e.g. 0,5,100-120 (default: every "
      "simulated rank; with "
      "simulation.ranks \"all\" that is every GPU, whose timelines are then all held in memory: several GiB "
      "at 16,384 GPUs)")(
      "compare-cluster", po::value(&clusters)->value_name("NAME[@PRICE]")->composing(),
      "also simulate the job, with its layout held fixed, on cluster preset NAME (with PRICE per GPU-hour) and "
      "print step time, tokens/s, MFU, energy and cost per million tokens side by side (with --json, also in "
      "the report's compare_clusters; repeatable, or a "
      "comma-separated list NAME[@PRICE],NAME[@PRICE],... as plan's --cluster; the scenario's own cluster keys, of "
      "its file and of --set, carry to each as plan carries them, but the price: the scenario's is its own "
      "cluster's, and a cluster without @PRICE has none; 'stepsim plan' finds each cluster's own fastest layout)")(
      "advise",
      "say which communication is exposed and why, and whether the GPU waits for the host, and simulate the knobs "
      "that would hide them, best first, a knob that does not fit in memory together with what makes it fit "
      "(automatic when either reaches 5 % of the step and the scenario is small); on a job that does not fit, "
      "simulate what makes it fit (PyTorch DDP's buckets as views of the gradients, sharding, recompute, more "
      "stages, a smaller micro-batch, a larger TP group, activation offload), the fastest that fits first, in "
      "pairs when none fits alone");
  add_output_options(desc, out);
  po::positional_options_description positional;
  positional.add("scenario", 1);
  auto vm = parse_args("simulate", args, desc, positional);
  if (help_requested(vm, kSimulateUsage, desc, kSimulateExamples)) return 0;
  check_outputs(out);
  const std::string format = formats.empty() ? "chrome" : formats.front();
  if (format != "chrome" && format != "kineto")
    throw InputError("<command line>", "--trace-format",
                     "unknown trace format '" + format + "' (expected chrome or kineto)");

  if (vm.count("trace-format") != 0 && !out.trace)
    throw InputError("<command line>", "--trace-format", "needs --trace FILE: it chooses the format of that file");

  if (!trace_ranks.empty() && !out.trace)
    throw InputError("<command line>", "--trace-ranks", "needs --trace FILE: it chooses the ranks of that file");
  if (!trace_ranks.empty() && format == "kineto")
    throw InputError("<command line>", "--trace-ranks",
                     "applies to the chrome trace; a kineto trace holds the one rank the report is measured on");

  if (vm.count("scenario") != 0) require_scenario_name(scenario_path);
  // Read once: the advice and the other clusters load the scenario again.
  const io::ScenarioInput input = io::read_scenario_input(scenario_path);
  const std::vector<std::string> all_sets = io::sets_with_calibration(input, sets, calibrations);
  const Scenario scenario = io::load_scenario(input, all_sets);
  sweep::check_comparable(scenario, clusters);
  const RankSelection traced =
      trace_ranks.empty() ? RankSelection() : RankSelection(trace_ranks.front(), scenario.parallel.gpus());
  spdlog::debug("simulating {} ({} GPUs)", scenario.source, scenario.parallel.gpus());
  // Only the trace reads intervals beyond the report's own: without one, or with a subset of
  // ranks, an all-ranks run keeps no other rank's (a kineto trace holds the report's rank).
  SimulateOptions options;
  if (!out.trace || format == "kineto")
    options = SimulateOptions::report_only();
  else if (!traced.all())
    options.keep_intervals = [&traced](int rank) { return traced.contains(rank); };
  options.host_issues = out.trace && format == "kineto";  // the Kineto trace's CPU side
  SimulationResult result = simulate(scenario, options);
  if (!traced.all() && std::none_of(result.timeline.ranks.begin(), result.timeline.ranks.end(),
                                    [&](const RankTimeline& r) { return traced.contains(r.rank); }))
    throw InputError("<command line>", "--trace-ranks",
                     "names none of the simulated ranks (representative mode simulates one rank per pipeline "
                     "stage; simulation.ranks \"all\" simulates every GPU)");
  advise({input, all_sets, vm.count("advise") > 0, {}}, scenario, result);
  const std::vector<ClusterColumn> columns =
      clusters.empty() ? std::vector<ClusterColumn>{}
                       : sweep::compare_clusters(input, sets, scenario, result.report, clusters);
  if (!result.report.memory_bytes.fits) spdlog::warn("{}", parallelism::does_not_fit(result.report.memory_bytes));

  emit(
      out,
      [&](std::ostream& os) {
        report::write_table(result.report, os);
        if (!columns.empty()) write_cluster_comparison(columns, layout_of(scenario.parallel), os);
      },
      [&](std::ostream& os) {
        std::vector<report::ComparedCluster> compared;
        for (const ClusterColumn& c : columns) compared.push_back({c.cluster, &c.report});
        report::write_json(result.report, compared, os);
      },
      [&](std::ostream& os) {
        if (format == "kineto")
          report::write_kineto_trace(result.timeline, -1, scenario.cluster.gpu.name, os,
                                     report::collective_dtypes(scenario));
        else
          report::write_trace(
              result.timeline, [&](int rank) { return traced.contains(rank); }, os, scenario.parallel.gpus(),
              scenario.cluster.gpu.name);
      });
  // A bug met while simulating one of the advice's changes: the report is written, its row
  // names the change and the error, and the command fails, as any bug makes it fail.
  const std::vector<std::string> bugs = advice_bugs(result.report);
  for (const std::string& bug : bugs) std::cerr << "stepsim: " << bug << "\n";
  return bugs.empty() ? 0 : 1;
}

}  // namespace stepsim::cli
