// `stepsim calibrate`: make calibration files from measurements (nccl-tests logs, profiler
// traces) and check how well a calibration file and the model predict what was measured.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <iostream>

#include "calibration/apply.hpp"
#include "calibration/link_bound.hpp"
#include "calibration/nccl_import.hpp"
#include "cli/calibrate_trace.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "io/presets.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kUsage =
    "usage: stepsim calibrate import-nccl-tests LOG... -o FILE [--op OP] [--ranks N] [--nodes N] [--gpu NAME]\n"
    "       stepsim calibrate check FILE [SCENARIO] [--cluster C]\n"
    "       stepsim calibrate from-trace TRACE SCENARIO -o FILE [--set KEY=VALUE]...\n\n"
    "Calibration files hold what was measured on real GPUs: collective times by communicator\n"
    "shape and size, GEMM, attention and memory-bound kernel times, launch overhead and the\n"
    "slowdown of compute beside communication. 'simulate' and 'collective' apply them with\n"
    "--calibration FILE (or the scenario key \"calibration\").\n\n"
    "  import-nccl-tests  nccl-tests output (any version's table, -J JSON) into collective tables,\n"
    "                     with the alpha-beta fit of each test and communicator shape\n"
    "  check              each measured point predicted with and without the calibration\n"
    "  from-trace         fit GPU efficiencies and the slowdown under communication so that the\n"
    "                     simulated scenario agrees with a profiler trace of it\n"
    "  (tools/calibrate builds stepsim-calibrate, which measures a GPU node and writes the file)";

constexpr const char* kExamples =
    "  stepsim calibrate import-nccl-tests all_reduce.txt all_gather.txt -o a100.calib.json\n"
    "  stepsim calibrate check a100.calib.json --cluster dgx-a100-80g-hdr\n"
    "  stepsim calibrate from-trace rank0.json.gz my-scenario.json -o fitted.calib.json\n";

void write_file(const std::string& path, const std::string& text) {
  report::write_output({"-o", path, [&](std::ostream& os) { os << text; }});
}

std::string ranks_text(const calibration::CollectiveTable& t) {
  return fmt::format("{} rank(s), {} node(s) x {}", t.ranks, t.nodes, t.ranks_per_node);
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
      "the test, when the log does not say (all_reduce_perf, allgather, ...)")(
      "ranks", po::value(&o.ranks)->value_name("N"), "ranks of the communicator, when the log does not say")(
      "nodes", po::value(&o.nodes)->value_name("N"), "nodes it spanned, when the log does not say (default 1)")(
      "gpu", po::value(&o.gpu)->value_name("NAME"), "the GPU, when the log does not name it");
  po::positional_options_description positional;
  positional.add("log", -1);
  const auto vm = parse_args("calibrate import-nccl-tests", args, desc, positional);
  if (help_requested(vm, kUsage, desc, kExamples)) return 0;
  if (logs.empty()) throw InputError("<command line>", "LOG", "give at least one nccl-tests log");
  if (output.empty()) throw InputError("<command line>", "-o", "give the calibration file to write (-o FILE)");
  if (o.ranks < 0 || o.ranks > (1 << 20)) throw InputError("<command line>", "--ranks", "expected 1 to 1048576 ranks");
  if (o.nodes < 0 || o.nodes > (1 << 20)) throw InputError("<command line>", "--nodes", "expected 1 to 1048576 nodes");
  report::check_outputs({{"-o", output, {}}});
  std::vector<calibration::NcclTestsLog> parsed;
  for (const auto& path : logs) parsed.push_back(calibration::read_nccl_tests(path));
  calibration::Calibration c = calibration::import_nccl_tests(parsed, o);
  c.provenance.command = "stepsim calibrate import-nccl-tests" + [&] {
    std::string s;
    for (const auto& a : args) s += " " + a;
    return s;
  }() + (c.provenance.command.empty() ? "" : " (measured with: " + c.provenance.command + ")");
  std::ostream& log = output == "-" ? std::cerr : std::cout;
  log << fmt::format("# {} on {} ({} host, NCCL {})\n", fmt::join(c.provenance.sources, ", "), c.provenance.gpu,
                     c.provenance.host.empty() ? "unnamed" : c.provenance.host,
                     c.provenance.nccl.empty() ? "not said" : c.provenance.nccl);
  log << fmt::format("# {:<14} {:<26} {:>6} {:>23} {:>10} {:>12} {:>10}\n", "op", "shape", "points", "sizes(B)",
                     "alpha(us)", "busbw(GB/s)", "fit error");
  for (const auto& t : c.collectives) {
    log << fmt::format("  {:<14} {:<26} {:>6} {:>14} {:>12.2f} {:>12.2f} {:>9.1f}%{}\n", to_string(t.op), ranks_text(t),
                       t.points.size(), fmt::format("{:.0f}-{:.0f}", t.points.front().bytes, t.points.back().bytes),
                       t.fit.alpha_us, t.fit.busbw_gbps, 100 * t.fit.max_error,
                       t.fit.alpha_fitted ? "" : "  (one size: alpha not fitted)");
  }
  write_file(output, calibration::calibration_json(c));
  return 0;
}

// The cluster a check predicts on: the scenario's, --cluster, or the first preset whose GPU
// is the calibration's.
ClusterSpec check_cluster(const calibration::Calibration& c, const std::string& scenario, const std::string& cluster,
                          int gpus) {
  if (!scenario.empty()) return io::load_scenario(scenario).cluster;
  if (!cluster.empty()) return io::load_cluster(cluster, gpus);
  for (std::string_view name : io::preset_names("clusters")) {
    ClusterSpec spec = io::load_cluster(std::string(name), gpus);
    if (calibration::gpu_matches(c.provenance.gpu, spec.gpu.name)) return spec;
  }
  throw InputError(c.source, "/provenance/gpu",
                   fmt::format("no cluster preset has the GPU '{}'; give --cluster or a scenario", c.provenance.gpu));
}

double error_of(double predicted, double measured) { return (predicted - measured) / measured; }

struct ErrorStats {
  double sum_with = 0, sum_without = 0, max_with = 0, max_without = 0;
  int n = 0;
  void add(double with, double without) {
    sum_with += std::abs(with);
    sum_without += std::abs(without);
    max_with = std::max(max_with, std::abs(with));
    max_without = std::max(max_without, std::abs(without));
    ++n;
  }
};

void check_collectives(const calibration::Calibration& c, const calibration::MeasuredTables& tables,
                       const ClusterSpec& base, ErrorStats& stats) {
  for (const auto& t : c.collectives) {
    const int gpus = t.ranks;
    ClusterSpec cluster = base;
    cluster.nodes = t.nodes;
    fmt::print("\n# {} on {}, {} ({})\n", to_string(t.op), ranks_text(t), cluster.name, t.dtype);
    fmt::print("# {:>14} {:>12} {:>12} {:>9} {:>12} {:>9}  {}\n", "size(B)", "measured", "calibrated", "error", "model",
               "error", "source");
    for (const auto& p : t.points) {
      const collectives::Request r{
          t.op, Bytes(static_cast<std::int64_t>(std::llround(p.bytes))), {gpus, t.nodes, t.ranks_per_node}};
      const double model = collectives::predict(cluster, {}, r).time().us();
      const auto cal = calibration::calibrate_collective(tables, cluster, {}, r);
      const double with = error_of(cal.choice.time().us(), p.time_us), without = error_of(model, p.time_us);
      stats.add(with, without);
      fmt::print("  {:>14} {:>12.2f} {:>12.2f} {:>+8.1f}% {:>12.2f} {:>+8.1f}%  {}\n", p.bytes, p.time_us,
                 cal.choice.time().us(), 100 * with, model, 100 * without, calibration::to_string(cal.source));
    }
  }
}

workload::OpCost gemm_op(const calibration::GemmPoint& g) {
  workload::OpCost op;
  op.name = "gemm";
  op.cls = workload::OpClass::gemm;
  op.m = g.m;
  op.n = g.n;
  op.k = g.k;
  op.flops = g.flops();
  op.fp8 = g.dtype == Precision::fp8;
  op.bytes = Bytes(static_cast<std::int64_t>((g.m * g.k + g.k * g.n + g.m * g.n) * element_bytes(g.dtype)));
  return op;
}

void check_compute(const calibration::Calibration& c, const calibration::MeasuredTables& tables,
                   const ClusterSpec& cluster, ErrorStats& stats) {
  if (!c.compute.gemm.empty()) {
    fmt::print("\n# GEMM on {}\n# {:>6} {:>6} {:>6} {:>5} {:>12} {:>12} {:>9} {:>12} {:>9}\n", cluster.gpu.name, "m",
               "n", "k", "dtype", "measured", "calibrated", "error", "model", "error");
  }
  for (const auto& g : c.compute.gemm) {
    if (!cluster.gpu.flops.for_precision(g.dtype).positive()) continue;
    const hardware::GpuModel model(cluster.gpu, g.dtype);
    const hardware::GpuModel refit(calibration::calibrated_gpu(tables, cluster.gpu), g.dtype);
    const workload::OpCost op = gemm_op(g);
    const double with = calibration::calibrate_compute(tables, refit, op).time.us();
    const double without = model.duration(op).us();
    stats.add(error_of(with, g.time_us), error_of(without, g.time_us));
    fmt::print("  {:>6} {:>6} {:>6} {:>5} {:>12.2f} {:>12.2f} {:>+8.1f}% {:>12.2f} {:>+8.1f}%\n", g.m, g.n, g.k,
               to_string(g.dtype), g.time_us, with, 100 * error_of(with, g.time_us), without,
               100 * error_of(without, g.time_us));
  }
  for (const auto& m : c.compute.memory) {
    workload::OpCost op;
    op.name = "copy";
    op.cls = workload::OpClass::elementwise;
    op.bytes = Bytes(static_cast<std::int64_t>(m.bytes));
    const hardware::GpuModel model(cluster.gpu, Precision::bf16);
    const double measured = m.bytes / (m.gbytes_per_s * 1e3);
    const double with = calibration::calibrate_compute(tables, model, op).time.us();
    const double without = model.duration(op).us();
    stats.add(error_of(with, measured), error_of(without, measured));
    fmt::print("  copy {:>14g} B {:>12.2f} {:>12.2f} {:>+8.1f}% {:>12.2f} {:>+8.1f}%\n", m.bytes, measured, with,
               100 * error_of(with, measured), without, 100 * error_of(without, measured));
  }
}

int run_check(const Args& args) {
  std::string file, scenario, cluster;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("file", po::value(&file)->value_name("FILE"), "calibration file")(
      "scenario", po::value(&scenario)->value_name("SCENARIO"), "predict on this scenario's cluster")(
      "cluster", po::value(&cluster)->value_name("C"), "predict on this cluster preset");
  po::positional_options_description positional;
  positional.add("file", 1).add("scenario", 1);
  const auto vm = parse_args("calibrate check", args, desc, positional);
  if (help_requested(vm, kUsage, desc, kExamples)) return 0;
  if (file.empty()) throw InputError("<command line>", "FILE", "give the calibration file to check");
  if (!scenario.empty() && !cluster.empty())
    throw InputError("<command line>", "--cluster",
                     "give a scenario or --cluster, not both (the scenario names its cluster)");
  const calibration::Calibration c = calibration::read_calibration(file);
  const ClusterSpec base = check_cluster(c, scenario, cluster, 8);
  calibration::check_fits(c, base);
  const calibration::MeasuredTables tables({c});
  fmt::print("# {}: measured on {}, predicted on {} ({})\n", file, c.provenance.gpu, base.name, base.gpu.name);
  ErrorStats stats;
  check_collectives(c, tables, base, stats);
  check_compute(c, tables, base, stats);
  if (stats.n > 0)
    fmt::print("\n# {} point(s): mean |error| {:.1f}% calibrated (max {:.1f}%), {:.1f}% model (max {:.1f}%)\n", stats.n,
               100 * stats.sum_with / stats.n, 100 * stats.max_with, 100 * stats.sum_without / stats.n,
               100 * stats.max_without);
  else
    fmt::print("# no measured points to check\n");
  return 0;
}

}  // namespace

int run_calibrate(const Args& args) {
  if (args.empty() || args.front() == "-h" || args.front() == "--help") {
    std::cout << kUsage << "\n\nExamples:\n" << kExamples;
    return args.empty() ? 2 : 0;
  }
  const Args rest(args.begin() + 1, args.end());
  if (args.front() == "import-nccl-tests") return run_import(rest);
  if (args.front() == "check") return run_check(rest);
  if (args.front() == "from-trace") return run_from_trace(rest);
  throw InputError("<command line>", "stepsim calibrate",
                   fmt::format("unknown step '{}' (expected import-nccl-tests, check or from-trace)", args.front()));
}

}  // namespace stepsim::cli
