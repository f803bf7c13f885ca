// `stepsim calibrate check`: predicting a point with the file that holds it says nothing (0 %
// by construction), so each point is predicted from the file without it (leave-one-out:
// inside a table an interpolation between its neighbours, at its ends the model corrected
// by the rest), and the points of held-out nccl-tests logs from the whole file; the
// uncalibrated model beside each.
#include "cli/calibrate_check.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cmath>
#include <optional>
#include <ostream>
#include <sstream>

#include "calibration/apply.hpp"
#include "calibration/link_bound.hpp"
#include "calibration/nccl_import.hpp"
#include "cli/options.hpp"
#include "io/presets.hpp"
#include "io/scenario_loader.hpp"
#include "simulation/collective_prediction.hpp"
#include "stepsim/error.hpp"

namespace stepsim::cli {
namespace {

namespace cal = calibration;

constexpr const char* kCalibrateCheckUsage =
    "usage: stepsim calibrate check FILE [SCENARIO | --cluster C] [--held-out LOG]...\n\n"
    "How well a calibration file generalises. Leave-one-out: each measured point (collective,\n"
    "GEMM, memory-bound) is predicted from the file without that point: inside a table by\n"
    "interpolating its neighbours, at a collective table's ends by the model corrected by the\n"
    "rest, at a GEMM or memory-bound table's ends by the model alone (as simulate costs them). With\n"
    "--held-out, each point of other nccl-tests logs of the same hardware is predicted from\n"
    "the whole file. Each prediction is printed beside the uncalibrated model's, with errors\n"
    "relative to the measurement and where the prediction came from (measured: interpolated in\n"
    "a table; scaled: the model corrected by a measured shape; model). The cluster is the\n"
    "scenario's, --cluster, or the first preset with the file's GPU. Collectives run as the\n"
    "scenario forces them (collectives.algorithm, collectives.protocol), and a table measured\n"
    "otherwise is refused as simulate refuses it; without a scenario, each table's as it was\n"
    "measured (its algorithm and protocol where the run forced them, else NCCL's choice).";

constexpr const char* kCalibrateCheckExamples =
    "  stepsim calibrate check a100.calib.json\n"
    "  stepsim calibrate check a100.calib.json --cluster dgx-a100-80g-hdr --held-out second-run.txt\n";

double error_of(double predicted, double measured) { return (predicted - measured) / measured; }

struct ErrorStats {
  double sum_with = 0, sum_without = 0, max_with = 0, max_without = 0;
  int n = 0;
  int model_only = 0;  // points no table of the file reached: their "calibrated" time is the model's
  void add(double with, double without) {
    sum_with += std::abs(with);
    sum_without += std::abs(without);
    max_with = std::max(max_with, std::abs(with));
    max_without = std::max(max_without, std::abs(without));
    ++n;
  }
};

void print_summary(const std::string& what, const ErrorStats& s, std::ostream& out) {
  if (s.n == 0) {
    fmt::print(out, "# {}: no measured points\n", what);
    return;
  }
  const std::string model_only =
      s.model_only == 0
          ? ""
          : fmt::format("; {} of them the model alone (source model: no table of the file has their op and tier)",
                        s.model_only == s.n ? "all" : std::to_string(s.model_only));
  fmt::print(
      out, "# {}: {} point(s), mean |error| {:.1f}% calibrated (max {:.1f}%), {:.1f}% model alone (max {:.1f}%){}\n",
      what, s.n, 100 * s.sum_with / s.n, 100 * s.max_with, 100 * s.sum_without / s.n, 100 * s.max_without, model_only);
}

// The cluster a check predicts on: the scenario's, --cluster, or the first preset whose GPU
// is the calibration's.
ClusterSpec check_cluster(const cal::Calibration& c, const std::string& scenario, const std::string& cluster,
                          int gpus) {
  if (!scenario.empty()) return io::load_scenario(scenario).cluster;
  if (!cluster.empty()) return io::load_cluster(cluster, gpus);
  for (std::string_view name : io::preset_names("clusters")) {
    ClusterSpec spec = io::load_cluster(std::string(name), gpus);
    if (cal::gpu_stands_for(c.provenance.gpu, spec.gpu.name)) return spec;
  }
  throw InputError(c.source, "/provenance/gpu",
                   fmt::format("no cluster preset has the GPU '{}'; give --cluster or a scenario", c.provenance.gpu));
}

void print_table_header(const cal::CollectiveTable& t, const ClusterSpec& cluster, const char* predicted,
                        std::ostream& out) {
  fmt::print(out, "\n# {} on {} rank(s), {} node(s) x {}, {} ({})\n", to_string(t.op), t.ranks, t.nodes,
             t.ranks_per_node, cluster.name, t.dtype);
  fmt::print(out, "# {:>14} {:>12} {:>13} {:>9} {:>12} {:>9}  {}\n", "size(B)", "measured", predicted, "error", "model",
             "error", "source");
}

// How the collectives are predicted: as the scenario runs them (its forced algorithm and
// protocol), else each table's as it was measured.
CollectivesSpec forced_for(const std::optional<CollectivesSpec>& scenario, const cal::CollectiveTable& t) {
  return scenario ? *scenario : cal::measured_as(t);
}

// One measured collective predicted from `tables` and by the model alone, run as `forced` says.
void check_point(const cal::CollectiveTable& t, const ClusterSpec& cluster, const cal::MeasuredTables& tables,
                 const cal::CollectivePoint& p, ErrorStats& stats, const CollectivesSpec& forced, std::ostream& out) {
  // The table's hosts as the model's NVLink domains.
  const collectives::Request r{t.op, Bytes(static_cast<std::int64_t>(std::llround(p.bytes))),
                               cal::domain_shape(cluster, t.ranks, t.nodes)};
  const double model = collectives::predict(cluster, forced, r).time().us();
  const auto cal = cal::calibrate_collective(tables, cluster, forced, r, t.dtype);
  const double predicted = on_fabric(cal, cluster, r).time().us();
  const double with = error_of(predicted, p.time_us), without = error_of(model, p.time_us);
  stats.add(with, without);
  if (cal.source == cal::Source::model) ++stats.model_only;
  fmt::print(out, "  {:>14} {:>12.2f} {:>13.2f} {:>+8.1f}% {:>12.2f} {:>+8.1f}%  {}\n", p.bytes, p.time_us, predicted,
             100 * with, model, 100 * without, cal::to_string(cal.source));
}

ClusterSpec spanning(ClusterSpec cluster, const cal::CollectiveTable& t) {
  cluster.nodes = t.nodes;
  return cluster;
}

// The file without the `i`-th point of its `ti`-th table (without the table when that was
// its only point).
cal::Calibration without_point(const cal::Calibration& c, std::size_t ti, std::size_t i) {
  cal::Calibration rest = c;
  auto& points = rest.collectives[ti].points;
  points.erase(points.begin() + static_cast<std::ptrdiff_t>(i));
  if (points.empty()) rest.collectives.erase(rest.collectives.begin() + static_cast<std::ptrdiff_t>(ti));
  return rest;
}

// A table whose collective the model cannot run as it was measured (an AllToAll measured with
// ring forced, say), named by its file and place rather than by the scenario key the model's
// error speaks of.
template <class Body>
void for_table(const std::string& file, const std::string& where, const Body& body) {
  try {
    body();
  } catch (const InputError& e) {
    throw InputError(file, where, e.message());
  }
}

void leave_one_out_collectives(const cal::Calibration& c, const ClusterSpec& base, ErrorStats& stats,
                               const std::optional<CollectivesSpec>& scenario, std::ostream& out) {
  for (std::size_t ti = 0; ti < c.collectives.size(); ++ti) {
    const cal::CollectiveTable& t = c.collectives[ti];
    const ClusterSpec cluster = spanning(base, t);
    print_table_header(t, cluster, "left out", out);
    for_table(c.source, fmt::format("/collectives/{}", ti), [&] {
      for (std::size_t i = 0; i < t.points.size(); ++i)
        check_point(t, cluster, cal::MeasuredTables({without_point(c, ti, i)}, cluster), t.points[i], stats,
                    forced_for(scenario, t), out);
    });
  }
}

template <class Point>
cal::MeasuredTables without(const cal::Calibration& c, std::vector<Point> cal::ComputeTables::*list, std::size_t i) {
  cal::Calibration rest = c;
  auto& points = rest.compute.*list;
  points.erase(points.begin() + static_cast<std::ptrdiff_t>(i));
  return cal::MeasuredTables({std::move(rest)});
}

workload::OpCost gemm_op(const cal::GemmPoint& g) {
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

void leave_one_out_gemm(const cal::Calibration& c, const ClusterSpec& cluster, ErrorStats& stats, std::ostream& out) {
  if (c.compute.gemm.empty()) return;
  fmt::print(out, "\n# GEMM on {}\n# {:>6} {:>6} {:>6} {:>5} {:>12} {:>12} {:>9} {:>12} {:>9}\n", cluster.gpu.name, "m",
             "n", "k", "dtype", "measured", "left out", "error", "model", "error");
  for (std::size_t i = 0; i < c.compute.gemm.size(); ++i) {
    const cal::GemmPoint& g = c.compute.gemm[i];
    if (!cluster.gpu.flops.for_precision(g.dtype).positive()) continue;
    const cal::MeasuredTables tables = without(c, &cal::ComputeTables::gemm, i);
    const hardware::GpuModel model(cluster.gpu, g.dtype);
    const hardware::GpuModel refit(cal::calibrated_gpu(tables, cluster.gpu), g.dtype);
    const workload::OpCost op = gemm_op(g);
    const double with = cal::calibrate_compute(tables, refit, op).time.us();
    const double without_us = model.duration(op).us();
    stats.add(error_of(with, g.time_us), error_of(without_us, g.time_us));
    fmt::print(out, "  {:>6} {:>6} {:>6} {:>5} {:>12.2f} {:>12.2f} {:>+8.1f}% {:>12.2f} {:>+8.1f}%\n", g.m, g.n, g.k,
               to_string(g.dtype), g.time_us, with, 100 * error_of(with, g.time_us), without_us,
               100 * error_of(without_us, g.time_us));
  }
}

void leave_one_out_memory(const cal::Calibration& c, const ClusterSpec& cluster, ErrorStats& stats, std::ostream& out) {
  for (std::size_t i = 0; i < c.compute.memory.size(); ++i) {
    const cal::BandwidthPoint& m = c.compute.memory[i];
    workload::OpCost op;
    op.name = "copy";
    op.cls = workload::OpClass::elementwise;
    op.bytes = Bytes(static_cast<std::int64_t>(m.bytes));
    const hardware::GpuModel model(cluster.gpu, Precision::bf16);
    const double measured = m.bytes / (m.gbytes_per_s * 1e3);
    const cal::MeasuredTables tables = without(c, &cal::ComputeTables::memory, i);
    const double with = cal::calibrate_compute(tables, model, op).time.us();
    const double without_us = model.duration(op).us();
    stats.add(error_of(with, measured), error_of(without_us, measured));
    fmt::print(out, "  copy {:>14g} B {:>12.2f} {:>12.2f} {:>+8.1f}% {:>12.2f} {:>+8.1f}%\n", m.bytes, measured, with,
               100 * error_of(with, measured), without_us, 100 * error_of(without_us, measured));
  }
}

// Another log of the same hardware, read and checked (its tables as the file's are) before
// anything is printed, so that a log that cannot be read leaves stdout empty. A log that does
// not name its GPU is taken as measured on the file's.
struct HeldOut {
  std::string path;
  cal::Calibration measured;
};

HeldOut read_held_out(const std::string& path, const cal::Calibration& c, const ClusterSpec& base,
                      const std::optional<CollectivesSpec>& scenario) {
  const cal::NcclTestsLog log = cal::read_nccl_tests(path);
  cal::ImportOverrides o;
  if (log.header.gpu.empty()) o.gpu = c.provenance.gpu;
  if (!cal::gpu_stands_for(log.header.gpu, base.gpu.name))
    throw InputError(log.source, "",
                     fmt::format("ran on '{}', but {} is checked on {}'s GPU '{}': a held-out log must come from "
                                 "the hardware the calibration measured",
                                 log.header.gpu, c.source, base.name, base.gpu.name));
  HeldOut out{path, cal::import_nccl_tests({log}, o)};
  out.measured.source = log.source;
  cal::check_fits(out.measured, base, scenario);
  return out;
}

// The points of a held-out log, predicted from the whole file.
void print_held_out(const HeldOut& h, const cal::MeasuredTables& tables, const ClusterSpec& base,
                    const std::optional<CollectivesSpec>& scenario, std::ostream& out) {
  ErrorStats stats;
  for (const cal::CollectiveTable& t : h.measured.collectives) {
    const ClusterSpec cluster = spanning(base, t);
    print_table_header(t, cluster, "calibrated", out);
    for_table(h.measured.source, "", [&] {
      for (const cal::CollectivePoint& p : t.points)
        check_point(t, cluster, tables, p, stats, forced_for(scenario, t), out);
    });
  }
  print_summary("held-out " + h.path, stats, out);
}

}  // namespace

int run_check(const Args& args) {
  std::string file, scenario, cluster;
  std::vector<std::string> held;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("file", po::value(&file)->value_name("FILE"), "calibration file")(
      "scenario", po::value(&scenario)->value_name("SCENARIO"), "predict on this scenario's cluster")(
      "cluster", po::value(&cluster)->value_name("C"), "predict on this cluster preset")(
      "held-out", po::value(&held)->value_name("LOG")->composing(),
      "nccl-tests log of the same hardware not in FILE, its points predicted from FILE (repeatable)");
  po::positional_options_description positional;
  positional.add("file", 1).add("scenario", 1);
  const auto vm = parse_args("calibrate check", args, desc, positional);
  if (help_requested(vm, kCalibrateCheckUsage, desc, kCalibrateCheckExamples)) return 0;
  if (file.empty()) throw InputError("<command line>", "FILE", "give the calibration file to check");
  refuse_empty(
      vm,
      {{"scenario", "a scenario file or preset"}, {"cluster", "a cluster preset"}, {"held-out", "an nccl-tests log"}});
  if (!scenario.empty() && !cluster.empty())
    throw InputError("<command line>", "--cluster",
                     "give a scenario or --cluster, not both (the scenario names its cluster)");
  const cal::Calibration c = cal::read_calibration(file);
  const ClusterSpec base = check_cluster(c, scenario, cluster, 8);
  // A scenario's collectives run as it forces them: the file must have measured them so.
  std::optional<CollectivesSpec> forced;
  if (!scenario.empty()) forced = io::load_scenario(scenario).collectives;
  cal::check_fits(c, base, forced);
  std::vector<HeldOut> held_out;
  for (const std::string& path : held) held_out.push_back(read_held_out(path, c, base, forced));
  const cal::MeasuredTables tables({c}, base);
  // The whole check is composed before any of it is printed: an error on the way (a point the
  // model refuses, say) leaves stdout empty, and a stdout that cannot take it is an error.
  std::ostringstream out;
  fmt::print(out, "# {}: measured on {}, predicted on {} ({})\n", c.source, c.provenance.gpu, base.name, base.gpu.name);
  fmt::print(out, "# leave-one-out: each point predicted from the file without it\n");
  ErrorStats stats;
  leave_one_out_collectives(c, base, stats, forced, out);
  leave_one_out_gemm(c, base, stats, out);
  leave_one_out_memory(c, base, stats, out);
  fmt::print(out, "\n");
  print_summary("leave-one-out", stats, out);
  for (const HeldOut& h : held_out) {
    fmt::print(out, "\n# held-out {}: each point predicted from {}\n", h.path, file);
    print_held_out(h, tables, base, forced, out);
  }
  emit({}, [&out](std::ostream& os) { os << out.str(); }, {}, {});
  return 0;
}

}  // namespace stepsim::cli
