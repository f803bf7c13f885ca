// `stepsim collective`: predicted time, algbw and busbw of one collective per size, printed
// like an nccl-tests table, with the (algorithm, protocol) pair NCCL would choose.
#include <fmt/format.h>

#include <boost/json.hpp>
#include <cmath>

#include <algorithm>
#include <array>
#include <cctype>
#include <iostream>
#include <optional>

#include "calibration/apply.hpp"
#include "cli/options.hpp"
#include "collectives/collective.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/fabric.hpp"
#include "parallelism/mesh.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kUsage =
    "usage: stepsim collective OP [--size S | --sweep MIN:MAX [--factor F]] [--gpus N]\n"
    "                             [--ranks-per-node K] [--cluster C] [--algorithm A] [--protocol P]\n"
    "                             [--json FILE|-] [-v] [--calibration FILE]...\n\n"
    "Predicts the time, algorithm bandwidth and bus bandwidth of one NCCL collective, as\n"
    "nccl-tests would print them, and the (algorithm, protocol) pair NCCL would choose.\n"
    "OP: allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv.\n"
    "S is nccl-tests' size: the per-rank buffer for AllReduce, the whole buffer for\n"
    "AllGather, ReduceScatter and AllToAll. busbw = algbw x bus factor (2(n-1)/n for\n"
    "AllReduce, (n-1)/n for AllGather/ReduceScatter/AllToAll, 1 otherwise).\n"
    "The N ranks fill whole nodes (N at most a node or a multiple of it) unless\n"
    "--ranks-per-node K places K on each of N/K nodes:\n"
    "a data-parallel or FSDP communicator beside TP 8 has one rank per node.\n"
    "With --calibration, measured tables replace the model inside their measured sizes (and\n"
    "scale it outside them); the model's time and, at measured sizes, both errors are shown.";

constexpr const char* kExamples =
    "  stepsim collective allreduce --size 256MiB\n"
    "  stepsim collective allreduce --cluster dgx-a100-80g-hdr --gpus 8 --sweep 8B:4GiB\n"
    "  stepsim collective allgather --gpus 64 --sweep 1MiB:1GiB --factor 4 --json -\n"
    "  stepsim collective allreduce --size 64MiB --algorithm ring --protocol ll128 -v\n"
    "  stepsim collective allreduce --cluster dgx-h100-ndr --gpus 16 --ranks-per-node 8 --size 1GiB\n"
    "  stepsim collective reducescatter --gpus 64 --ranks-per-node 1 --sweep 1MiB:1GiB\n"
    "  stepsim collective allreduce --cluster dgx-a100-80g-hdr --sweep 8B:4GiB --calibration a100.calib.json\n";

struct Options {
  std::string op, size, sweep, cluster = "dgx-h100-ndr", algorithm = "auto", protocol = "auto", json;
  int gpus = 8;
  int ranks_per_node = 0;  // 0: fill whole nodes
  double factor = 2;
  bool verbose = false;
  std::vector<std::string> calibrations;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

// Looks `text` up among the names `to_string` gives to enumerators first..last.
template <class Enum, class Name>
Enum parse_name(const std::string& text, Enum first, Enum last, Name name, const std::string& where) {
  std::string choices;
  for (int i = static_cast<int>(first); i <= static_cast<int>(last); ++i) {
    const auto e = static_cast<Enum>(i);
    if (lower(text) == name(e)) return e;
    choices += fmt::format("{}{}", choices.empty() ? "" : ", ", name(e));
  }
  throw InputError("<command line>", where, fmt::format("unknown value '{}' (choices: {})", text, choices));
}

CollOp parse_op(const std::string& text) {
  return parse_name(
      text, CollOp::allreduce, CollOp::sendrecv, [](CollOp op) { return std::string(to_string(op)); }, "OP");
}

// Beyond any GPU's memory; larger sizes would only test the simulator's integer range.
constexpr std::int64_t kMaxSize = std::int64_t{1} << 40;
constexpr int kMaxRows = 10000;
constexpr int kMaxGpus = 1 << 20;

void check_size(Bytes size, const char* flag) {
  if (size.count() > kMaxSize)
    throw InputError("<command line>", flag,
                     fmt::format("{} bytes is more than the 1 TiB a rank can hold", size.count()));
}

std::vector<Bytes> sizes(const Options& o) {
  if (!o.size.empty() && !o.sweep.empty())
    throw InputError("<command line>", "--sweep", "give either --size or --sweep, not both");
  if (o.sweep.empty()) {
    const Bytes size = io::parse_bytes(o.size.empty() ? "256MiB" : o.size, "<command line>", "--size");
    check_size(size, "--size");
    return {size};
  }
  const auto colon = o.sweep.find(':');
  if (colon == std::string::npos)
    throw InputError("<command line>", "--sweep", fmt::format("expected MIN:MAX such as 8B:4GiB, got '{}'", o.sweep));
  const Bytes lo = io::parse_bytes(o.sweep.substr(0, colon), "<command line>", "--sweep");
  const Bytes hi = io::parse_bytes(o.sweep.substr(colon + 1), "<command line>", "--sweep");
  if (!(o.factor >= 1.001 && o.factor <= 1e6))
    throw InputError("<command line>", "--factor",
                     fmt::format("expected a factor between 1.001 and 1000000, got {}", o.factor));
  if (lo.count() < 1 || hi < lo)
    throw InputError("<command line>", "--sweep", fmt::format("expected 1 <= MIN <= MAX, got '{}'", o.sweep));
  check_size(hi, "--sweep");
  const double rows = std::log(hi.as_double() / lo.as_double()) / std::log(o.factor) + 1;
  if (rows > kMaxRows)
    throw InputError("<command line>", "--factor",
                     fmt::format("{} from {} to {} gives {:.0f} sizes; at most {} (raise --factor)", o.factor,
                                 o.sweep.substr(0, colon), o.sweep.substr(colon + 1), rows, kMaxRows));
  std::vector<Bytes> out;
  for (double s = lo.as_double(); s <= hi.as_double() * (1 + 1e-12); s *= o.factor)
    out.emplace_back(static_cast<std::int64_t>(std::llround(s)));
  return out;
}

// K ranks on the first GPUs of each node, costed over the NVLink domains that hold them (a
// GB200 NVL72 rack's 18 trays of 4 are one domain).
collectives::GroupShape shape_of(const ClusterSpec& cluster, int gpus, int ranks_per_node) {
  const int per_node = ranks_per_node > 0 ? ranks_per_node : std::min(gpus, cluster.gpus_per_node);
  if (cluster.domain_gpus() == cluster.gpus_per_node) return {gpus, (gpus + per_node - 1) / per_node, per_node};
  std::vector<int> ranks;
  ranks.reserve(static_cast<std::size_t>(gpus));
  for (int r = 0; r < gpus; ++r) ranks.push_back(r / per_node * cluster.gpus_per_node + r % per_node);
  return parallelism::shape_of(ranks, cluster.domain_gpus());
}

// NCCL's model and the fabric see every node of a communicator alike (the same ranks per
// node); a partly filled last node would need a shape of its own, so it is refused.
void check_whole_nodes(const ClusterSpec& cluster, int gpus) {
  const int per_node = cluster.gpus_per_node;
  if (gpus <= per_node || gpus % per_node == 0) return;
  throw InputError(
      "<command line>", "--gpus",
      fmt::format("expected at most {} GPUs (one node of {}) or a multiple of {} (whole nodes), got {}; or "
                  "place K on each of {}/K nodes with --ranks-per-node K",
                  per_node, cluster.name, per_node, gpus, gpus));
}

// The cluster that holds the communicator: N/K nodes when K ranks sit on each.
ClusterSpec load_cluster_for(const Options& o) {
  const ClusterSpec first = io::load_cluster(o.cluster, o.gpus);
  if (o.ranks_per_node == 0) {
    check_whole_nodes(first, o.gpus);
    return first;
  }
  if (o.ranks_per_node < 1 || o.ranks_per_node > first.gpus_per_node)
    throw InputError("<command line>", "--ranks-per-node",
                     fmt::format("expected 1 to {} ({} has {} GPUs per node), got {}", first.gpus_per_node, first.name,
                                 first.gpus_per_node, o.ranks_per_node));
  if (o.gpus % o.ranks_per_node != 0)
    throw InputError("<command line>", "--ranks-per-node",
                     fmt::format("{} does not divide --gpus {}", o.ranks_per_node, o.gpus));
  const long long nodes = o.gpus / o.ranks_per_node;
  if (nodes * first.gpus_per_node > kMaxGpus)
    throw InputError("<command line>", "--ranks-per-node",
                     fmt::format("{} nodes of {} GPUs is more than {} GPUs", nodes, first.gpus_per_node, kMaxGpus));
  return io::load_cluster(o.cluster, static_cast<int>(nodes) * first.gpus_per_node);
}

struct Row {
  Bytes size;
  collectives::Choice choice;
  std::vector<collectives::Choice> all;
  // With --calibration: the uncalibrated model, where the time came from, the measurement.
  std::optional<collectives::Choice> model;
  calibration::Source source = calibration::Source::model;
  std::optional<double> measured_us;
};

double relative_error(double predicted, double measured) { return (predicted - measured) / measured; }

double busbw(const Row& r, CollOp op, int gpus) {
  const double t = r.choice.time().seconds();
  return t > 0 ? r.size.as_double() / t * collectives::bus_factor(op, gpus) * 1e-9 : 0.0;
}

void print_table(const std::vector<Row>& rows, CollOp op, const ClusterSpec& cluster, int gpus, int ranks_per_node,
                 bool verbose) {
  const collectives::GroupShape shape = shape_of(cluster, gpus, ranks_per_node);
  const std::string domains = cluster.domain_gpus() == cluster.gpus_per_node
                                  ? ""
                                  : fmt::format(" in {} NVLink domain(s) of {} GPUs, {} ranks per domain", shape.nodes,
                                                cluster.domain_gpus(), shape.ranks_per_node);
  fmt::print("# stepsim collective {} on {} GPUs of {} ({} node(s){})\n", to_string(op), gpus, cluster.name,
             cluster.nodes, domains);
  fmt::print("# {:>12} {:>12} {:>6} {:>10} {:>8} {:>8}  {}\n", "size(B)", "count", "type", "time(us)", "algbw", "busbw",
             "algorithm/protocol");
  for (const Row& r : rows) {
    const double t = r.choice.time().us();
    const double algbw = t > 0 ? r.size.as_double() / t * 1e-3 : 0.0;
    fmt::print("  {:>12} {:>12} {:>6} {:>10.2f} {:>8.2f} {:>8.2f}  {}/{}\n", r.size.count(), r.size.count() / 4,
               "float", t, algbw, busbw(r, op, gpus), collectives::to_string(r.choice.algorithm),
               collectives::to_string(r.choice.protocol));
    if (r.model) {
      fmt::print("  {:>12} {:>12} {:>6} {:>10.2f} {:>8} {:>8}    model without calibration (above: {})", "", "", "",
                 r.model->time().us(), "", "", calibration::to_string(r.source));
      if (r.measured_us)
        fmt::print("; measured {:.2f}: error {:+.1f}% calibrated, {:+.1f}% model", *r.measured_us,
                   100 * relative_error(t, *r.measured_us), 100 * relative_error(r.model->time().us(), *r.measured_us));
      fmt::print("\n");
    }
    if (!verbose) continue;
    for (const auto& c : r.all)
      fmt::print(
          "  {:>12} {:>12} {:>6} {:>10.2f} {:>8} {:>8}    candidate {}/{} (NCCL's model {:.2f} us; latency {:.1f} us, "
          "{} channels)\n",
          "", "", "", c.time().us(), "", "", collectives::to_string(c.algorithm), collectives::to_string(c.protocol),
          c.nccl_time.us(), c.latency.us(), c.channels);
  }
}

boost::json::value to_json(const std::vector<Row>& rows, CollOp op, const ClusterSpec& cluster, int gpus) {
  boost::json::array out;
  for (const Row& r : rows) {
    const double t = r.choice.time().us();
    boost::json::object o;
    o["op"] = to_string(op);
    o["cluster"] = cluster.name;
    o["gpus"] = gpus;
    o["size_bytes"] = r.size.count();
    o["time_us"] = t;
    o["algbw_gbps"] = t > 0 ? r.size.as_double() / t * 1e-3 : 0.0;
    o["busbw_gbps"] = busbw(r, op, gpus);
    o["algorithm"] = collectives::to_string(r.choice.algorithm);
    o["protocol"] = collectives::to_string(r.choice.protocol);
    o["channels"] = r.choice.channels;
    if (r.model) {
      o["source"] = calibration::to_string(r.source);
      o["model_time_us"] = r.model->time().us();
      if (r.measured_us) {
        o["measured_time_us"] = *r.measured_us;
        o["error"] = relative_error(t, *r.measured_us);
        o["model_error"] = relative_error(r.model->time().us(), *r.measured_us);
      }
    }
    out.push_back(std::move(o));
  }
  return out;
}

// The model names a forced algorithm or protocol by its scenario key; here it came from a flag.
std::vector<collectives::Choice> candidates_for_command_line(const ClusterSpec& cluster, const CollectivesSpec& forced,
                                                             const collectives::Request& request) {
  try {
    return collectives::candidates(cluster, forced, request);
  } catch (const InputError& e) {
    const bool protocol = e.where().ends_with("protocol");
    throw InputError("<command line>", protocol ? "--protocol" : "--algorithm", e.message());
  }
}

calibration::MeasuredTables read_tables(const std::vector<std::string>& files, const ClusterSpec& cluster) {
  std::vector<calibration::Calibration> read;
  for (const auto& f : files) {
    read.push_back(calibration::read_calibration(f));
    calibration::check_gpu(read.back(), cluster.gpu.name);
  }
  return calibration::MeasuredTables(std::move(read));
}

// The calibrated time in place of the model's, the model kept beside it, and the measured
// time when this very size was measured on this shape.
void calibrate(Row& row, const calibration::MeasuredTables& tables, const ClusterSpec& cluster,
               const CollectivesSpec& forced, const collectives::Request& request) {
  const calibration::CalibratedChoice c = calibration::calibrate_collective(tables, cluster, forced, request);
  row.model = row.choice;
  row.choice = c.choice;
  row.source = c.source;
  const auto& s = request.shape;
  if (const auto* t = tables.exact(request.op, s.ranks, s.nodes, s.ranks_per_node)) {
    for (const auto& p : t->points)
      if (p.bytes == request.size.as_double()) row.measured_us = p.time_us;
  }
}

po::options_description describe(Options& o) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("op", po::value(&o.op)->value_name("OP"),
                                                 "collective (case-insensitive)")(
      "size", po::value(&o.size)->value_name("S"), "one size, e.g. 256MiB (default 256MiB)")(
      "sweep", po::value(&o.sweep)->value_name("MIN:MAX"), "sizes from MIN to MAX, e.g. 8B:4GiB")(
      "factor", po::value(&o.factor)->value_name("F"), "size step of --sweep (default 2)")(
      "gpus", po::value(&o.gpus)->value_name("N"), "GPUs in the communicator (default 8)")(
      "ranks-per-node", po::value(&o.ranks_per_node)->value_name("K"),
      "communicator ranks on each node, spanning N/K nodes (default: fill whole nodes)")(
      "cluster", po::value(&o.cluster)->value_name("C"), "cluster preset (default dgx-h100-ndr)")(
      "algorithm", po::value(&o.algorithm)->value_name("A"),
      "force ring, tree, nvls, nvls-tree, pat, direct (default auto)")(
      "protocol", po::value(&o.protocol)->value_name("P"), "force ll, ll128, simple (default auto)")(
      "json", po::value(&o.json)->value_name("FILE"), "write the rows as JSON to FILE ('-' for stdout)")(
      "verbose,v", po::bool_switch(&o.verbose),
      "list every candidate pair with its time and NCCL's own estimate, in the order NCCL ranks them")(
      "calibration", po::value(&o.calibrations)->value_name("FILE")->composing(),
      "measured tables to apply (stepsim calibrate; repeatable)");
  return desc;
}

}  // namespace

int run_collective(const Args& args) {
  Options o;
  const po::options_description desc = describe(o);
  po::positional_options_description positional;
  positional.add("op", 1);
  const auto vm = parse_args("collective", args, desc, positional);
  if (help_requested(vm, kUsage, desc, kExamples)) return 0;
  if (vm.count("json") != 0) report::check_outputs({{"--json", o.json, {}}});
  if (o.op.empty())
    throw InputError("<command line>", "stepsim collective", "missing OP (see 'stepsim collective --help')");
  const CollOp op = parse_op(o.op);
  if (o.gpus == 1)
    throw InputError("<command line>", "--gpus",
                     "a collective over 1 GPU moves no data (NCCL returns at once or makes a local copy); expected 2 "
                     "or more GPUs");
  if (o.gpus < 2 || o.gpus > kMaxGpus)
    throw InputError("<command line>", "--gpus", fmt::format("expected 2 to {} GPUs, got {}", kMaxGpus, o.gpus));
  if (vm.count("ranks-per-node") != 0 && o.ranks_per_node < 1)
    throw InputError("<command line>", "--ranks-per-node", fmt::format("expected 1 or more, got {}", o.ranks_per_node));
  const ClusterSpec cluster = load_cluster_for(o);
  CollectivesSpec forced;
  forced.algorithm = parse_name(
      o.algorithm, Algorithm::automatic, Algorithm::direct,
      [](Algorithm a) { return std::string(collectives::to_string(a)); }, "--algorithm");
  forced.protocol = parse_name(
      o.protocol, Protocol::automatic, Protocol::simple,
      [](Protocol p) { return std::string(collectives::to_string(p)); }, "--protocol");
  const calibration::MeasuredTables tables = read_tables(o.calibrations, cluster);
  std::vector<Row> rows;
  const collectives::GroupShape shape = shape_of(cluster, o.gpus, o.ranks_per_node);
  for (Bytes s : sizes(o)) {
    const collectives::Request request{op, s, shape};
    auto all = candidates_for_command_line(cluster, forced, request);
    // NCCL chooses without knowing the spine; the shared NICs and uplinks the simulation
    // loads then limit the chosen algorithm (and, for -v, every other).
    for (collectives::Choice& c : all) c.algbw = parallelism::fabric_bandwidth(cluster, request, c);
    Row row;
    row.size = s;
    row.choice = all.front();
    if (o.verbose) row.all = all;
    rows.push_back(std::move(row));
    if (!tables.empty()) calibrate(rows.back(), tables, cluster, forced, request);
  }
  if (o.json != "-") print_table(rows, op, cluster, o.gpus, o.ranks_per_node, o.verbose);
  if (vm.count("json") != 0)
    report::write_output({"--json", o.json, [&](std::ostream& os) {
                            os << boost::json::serialize(to_json(rows, op, cluster, o.gpus)) << "\n";
                          }});
  return 0;
}

}  // namespace stepsim::cli
