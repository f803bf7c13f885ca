// `stepsim calibrate`: make calibration files from measurements (nccl-tests logs, profiler
// traces) and check how well a calibration file and the model predict what was measured.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <iostream>
#include <sstream>

#include "calibration/apply.hpp"
#include "calibration/nccl_import.hpp"
#include "cli/calibrate_check.hpp"
#include "cli/calibrate_plan.hpp"
#include "cli/calibrate_trace.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kCalibrateUsage =
    "usage: stepsim calibrate import-nccl-tests LOG... -o FILE [--op OP] [--ranks N] [--nodes N] [--gpu NAME]\n"
    "                                          [--dtype TYPE] [--algorithm A] [--protocol P]\n"
    "       stepsim calibrate check FILE [SCENARIO | --cluster C] [--held-out LOG]...\n"
    "       stepsim calibrate from-trace TRACE SCENARIO -o FILE [--set KEY=VALUE]...\n"
    "       stepsim calibrate from-trace TRACE\n"
    "       stepsim calibrate plan SCENARIO [--set KEY=VALUE]... [--json FILE]\n\n"
    "Calibration files hold what was measured on real GPUs: collective times by communicator\n"
    "shape and size, GEMM, attention and memory-bound kernel times, launch overhead and the\n"
    "slowdown of compute beside communication. 'simulate' and 'collective' apply them with\n"
    "--calibration FILE (or the scenario key \"calibration\"). A LOG or the FILE to check may be\n"
    "'-', standard input.\n\n"
    "  import-nccl-tests  nccl-tests output (any version's table, -J JSON) into collective tables,\n"
    "                     with the alpha-beta fit of each test and communicator shape\n"
    "  check              how the file generalises: each measured point predicted from the file\n"
    "                     without it (leave-one-out), and with --held-out LOG each point of another\n"
    "                     log predicted from the whole file; errors against the model's beside them\n"
    "  from-trace         fit GPU efficiencies and the slowdown under communication so that the\n"
    "                     simulated scenario agrees with a profiler trace of it (none from a trace\n"
    "                     of another job: world size, a process group's size or compute per step\n"
    "                     as compare checks them); with or without a scenario, the CPU's cost per\n"
    "                     operator from the trace's CPU operators (with one, the kernel launch and\n"
    "                     dispatch are written to the file too)\n"
    "  plan               the nccl-tests and stepsim-calibrate runs that would measure every\n"
    "                     communicator (op, shape, data type, sizes) and GEMM shape of the scenario\n"
    "  (tools/calibrate builds stepsim-calibrate, which measures a GPU node and writes the file)";

constexpr const char* kCalibrateExamples =
    "  stepsim calibrate import-nccl-tests all_reduce.txt all_gather.txt -o a100.calib.json\n"
    "  stepsim calibrate check a100.calib.json --cluster dgx-a100-80g-hdr --held-out second-run.txt\n"
    "  stepsim calibrate from-trace rank0.json.gz my-scenario.json -o fitted.calib.json\n"
    "  stepsim calibrate plan my-scenario.json\n";

std::string ranks_text(const calibration::CollectiveTable& t) {
  return fmt::format("{} rank(s), {} node(s) x {}", t.ranks, t.nodes, t.ranks_per_node);
}

// The error of a --ranks or --nodes value that is not a whole number from 1 to kMaxGpus.
Refusal count_refusal(const std::string& flag, const std::string& what) {
  return [flag, what](const std::string& text) {
    return InputError("<command line>", flag, fmt::format("expected 1 to {} {}, got {}", kMaxGpus, what, text));
  };
}

int run_import(const Args& args) {
  std::vector<std::string> logs;
  std::string output;
  calibration::ImportOverrides o;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("log", po::value(&logs)->value_name("LOG")->composing(),
                                                 "nccl-tests output (text or -J JSON)")(
      "output,o", po::value(&output)->value_name("FILE"), "the calibration file to write ('-' for stdout)")(
      "op", po::value(&o.op)->value_name("OP"),
      "the test, when the log does not say (all_reduce_perf, allgather, ...); refused where its header says "
      "another")("ranks", number_value(o.ranks, "--ranks", count_refusal("--ranks", "ranks"))->value_name("N"),
                 "ranks of the communicator, when the log does not say; refused where its header says otherwise")(
      "nodes", number_value(o.nodes, "--nodes", count_refusal("--nodes", "nodes"))->value_name("N"),
      "nodes it spanned, when the log does not say (default 1); refused where its header says otherwise")(
      "gpu", po::value(&o.gpu)->value_name("NAME"),
      "the GPU, when the log does not name it; refused where its header names another")(
      "dtype", po::value(&o.dtype)->value_name("TYPE"),
      "only the rows of this nccl-tests type (bfloat16, float, ...) of a log of several (-d all); without it, a "
      "table per type")(
      "algorithm", po::value(&o.algorithm)->value_name("A"),
      "the algorithm the run forced (NCCL_ALGO: Ring, Tree, NVLS, NVLSTree, CollnetDirect, PAT; auto: "
      "NCCL's own choice), when the log does not say (NCCL's 'NCCL_ALGO set by environment' line); "
      "refused where it says another")(
      "protocol", po::value(&o.protocol)->value_name("P"),
      "the protocol the run forced (NCCL_PROTO: LL, LL128, Simple; auto), when the log does not say; refused where it "
      "says another");
  po::positional_options_description positional;
  positional.add("log", -1);
  const auto vm = parse_args("calibrate import-nccl-tests", args, desc, positional);
  if (help_requested(vm, kCalibrateUsage, desc, kCalibrateExamples)) return 0;
  if (logs.empty()) throw InputError("<command line>", "LOG", "give at least one nccl-tests log");
  if (output.empty()) throw InputError("<command line>", "-o", "give the calibration file to write (-o FILE)");
  // Each of these, left out, is what the log says; given, "" says nothing.
  refuse_empty(vm, {{"op", "the test's name, such as all_reduce_perf or allgather"},
                    {"gpu", "the GPU's name"},
                    {"algorithm", "the algorithm the run forced (NCCL_ALGO: Ring, Tree, ...)"},
                    {"protocol", "the protocol the run forced (NCCL_PROTO: LL, LL128, Simple)"}});
  // 0 stands for "not given" in ImportOverrides: given, it is as far out of range as -8.
  if (vm.count("ranks") != 0 && (o.ranks < 1 || o.ranks > kMaxGpus))
    throw count_refusal("--ranks", "ranks")(std::to_string(o.ranks));
  if (vm.count("nodes") != 0 && (o.nodes < 1 || o.nodes > kMaxGpus))
    throw count_refusal("--nodes", "nodes")(std::to_string(o.nodes));
  if (vm.count("dtype") != 0 && !calibration::is_nccl_type(o.dtype))
    throw InputError("--dtype", o.dtype, "expected one of nccl-tests' type names (float, bfloat16, half, double, ...)");
  report::check_outputs({{"-o", output, {}}});
  std::vector<calibration::NcclTestsLog> parsed;
  for (const auto& path : logs) parsed.push_back(calibration::read_nccl_tests(path));
  calibration::Calibration c = calibration::import_nccl_tests(parsed, o);
  c.provenance.command = "stepsim calibrate import-nccl-tests" + [&] {
    std::string s;
    for (const auto& a : args) s += " " + a;
    return s;
  }() + (c.provenance.command.empty() ? "" : " (measured with: " + c.provenance.command + ")");
  std::ostringstream log;
  log << fmt::format("# {} on {} ({} host, NCCL {})\n", fmt::join(c.provenance.sources, ", "), c.provenance.gpu,
                     c.provenance.host.empty() ? "unnamed" : c.provenance.host,
                     c.provenance.nccl.empty() ? "not said" : c.provenance.nccl);
  log << fmt::format("# {:<14} {:<26} {:>6} {:>23} {:>10} {:>16} {:>10}  {}\n", "op", "shape", "points", "sizes(B)",
                     "alpha(us)", "fit busbw(GB/s)", "fit error", "dtype");
  for (const auto& t : c.collectives) {
    const std::string forced = t.algorithm.empty() && t.protocol.empty()
                                   ? ""
                                   : fmt::format(" ({} forced)", t.algorithm.empty()  ? t.protocol
                                                                 : t.protocol.empty() ? t.algorithm
                                                                                      : t.algorithm + "/" + t.protocol);
    log << fmt::format("  {:<14} {:<26} {:>6} {:>14} {:>12.2f} {:>16.2f} {:>9.1f}%  {}{}{}\n", to_string(t.op),
                       ranks_text(t), t.points.size(),
                       fmt::format("{:.0f}-{:.0f}", t.points.front().bytes, t.points.back().bytes), t.fit.alpha_us,
                       t.fit.busbw_gbps, 100 * t.fit.max_error, t.dtype, forced,
                       t.fit.alpha_fitted ? "" : "  (one size: alpha not fitted)");
  }
  log << "# alpha: the smallest size's time less its bandwidth term; fit busbw: the largest size's bus bandwidth with "
         "alpha taken off (above the busbw nccl-tests prints for that row, which counts the latency in)\n";
  const std::vector<std::string> left_out = calibration::leave_out_unreadable(c);
  if (c.collectives.empty())
    throw InputError(
        fmt::format("{}", fmt::join(logs, ", ")), "",
        fmt::format("no measured point is one a calibration file can hold ({})", fmt::join(left_out, "; ")));
  for (const std::string& note : left_out) log << "# not written: " << note << "\n";
  const std::string text = calibration::calibration_json(c);
  write_with_log({"-o", output, [&](std::ostream& os) { os << text; }}, log.str());
  return 0;
}

}  // namespace

int run_calibrate(const Args& args) {
  if (args.empty() || args.front() == "-h" || args.front() == "--help") {
    std::cout << kCalibrateUsage << "\n\nExamples:\n" << kCalibrateExamples;
    return args.empty() ? 2 : 0;
  }
  const Args rest(args.begin() + 1, args.end());
  if (args.front() == "import-nccl-tests") return run_import(rest);
  if (args.front() == "check") return run_check(rest);
  if (args.front() == "from-trace") return run_from_trace(rest);
  if (args.front() == "plan") return run_calibrate_plan(rest);
  throw InputError(
      "<command line>", "stepsim calibrate",
      fmt::format("unknown step '{}' (expected import-nccl-tests, check, from-trace or plan)", args.front()));
}

}  // namespace stepsim::cli
