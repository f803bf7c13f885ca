// `stepsim collective`: predicted time, algbw and busbw of one collective per size, printed
// like an nccl-tests table, with the (algorithm, protocol) pair NCCL would choose.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <boost/json.hpp>

#include <algorithm>
#include <iostream>

#include "cli/options.hpp"
#include "report/report_io.hpp"
#include "simulation/collective_prediction.hpp"
#include "stepsim/error.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kCollectiveUsage =
    "usage: stepsim collective OP [--size S | --sweep MIN:MAX [--factor F]] [--gpus N]\n"
    "                             [--ranks-per-node K] [--cluster C] [--set cluster.KEY=VALUE]...\n"
    "                             [--algorithm A] [--protocol P] [--json FILE|-] [-v] [--calibration FILE]...\n\n"
    "Predicts the time, algorithm bandwidth and bus bandwidth of one NCCL collective, as\n"
    "nccl-tests would print them, and the (algorithm, protocol) pair NCCL would choose.\n"
    "OP: allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv.\n"
    "S is nccl-tests' size: the per-rank buffer for AllReduce, the whole buffer for\n"
    "AllGather, ReduceScatter and AllToAll. busbw = algbw x bus factor (2(n-1)/n for\n"
    "AllReduce, (n-1)/n for AllGather/ReduceScatter/AllToAll, 1 otherwise). Sizes run as\n"
    "nccl-tests runs them: rounded down to whole floats, for AllGather, ReduceScatter and\n"
    "AllToAll to a per-rank count that is a multiple of 4 (the count column is one rank's).\n"
    "The N ranks fill whole nodes (N at most a node or a multiple of it) unless\n"
    "--ranks-per-node K places K on each of N/K nodes:\n"
    "a data-parallel or FSDP communicator beside TP 8 has one rank per node.\n"
    "--set changes the cluster's keys as simulate's --set does (cluster.nvlink_domain,\n"
    "cluster.inter_node.nic_bandwidth, ...; stepsim presets --keys lists them).\n"
    "With --calibration, measured tables replace the model inside their measured sizes (and\n"
    "scale it outside them); the model's time and, at measured sizes, both errors are shown.\n"
    "The rows are of float elements: a shape's float table where one was measured, else its\n"
    "table of another type, matched by bytes (the row says which).";

constexpr const char* kCollectiveExamples =
    "  stepsim collective allreduce --size 256MiB\n"
    "  stepsim collective allreduce --cluster dgx-a100-80g-hdr --gpus 8 --sweep 8B:4GiB\n"
    "  stepsim collective allgather --gpus 64 --sweep 1MiB:1GiB --factor 4 --json -\n"
    "  stepsim collective allreduce --size 64MiB --algorithm ring --protocol ll128 -v\n"
    "  stepsim collective allreduce --cluster dgx-h100-ndr --gpus 16 --ranks-per-node 8 --size 1GiB\n"
    "  stepsim collective reducescatter --gpus 64 --ranks-per-node 1 --sweep 1MiB:1GiB\n"
    "  stepsim collective allreduce --cluster gb200-nvl72 --gpus 144 --ranks-per-node 4 --set "
    "cluster.nvlink_domain=36\n"
    "  stepsim collective allreduce --cluster dgx-a100-80g-hdr --sweep 8B:4GiB --calibration a100.calib.json\n";

// The table as nccl-tests prints it, with the calibrated rows' model beside them and, with -v,
// every candidate pair.
// Where the communicator lies over NVLink domains larger than a node, and, where it lies
// unevenly, how it is costed: as an even group of its emptiest domain's size (README).
std::string domain_text(const CollectivePrediction& p) {
  const int domain = p.cluster.domain_gpus();
  if (domain == p.cluster.gpus_per_node) return "";
  const std::vector<int>& d = p.domain_ranks;
  const bool even = std::ranges::all_of(d, [&](int n) { return n == d.front(); });
  if (even) return fmt::format(" in {} NVLink domain(s) of {} GPUs, {} ranks per domain", d.size(), domain, d.front());
  // Runs of equal counts: "3 x 72 + 4".
  std::vector<std::string> runs;
  for (std::size_t i = 0; i < d.size();) {
    std::size_t j = i;
    while (j < d.size() && d[j] == d[i]) ++j;
    runs.push_back(j - i > 1 ? fmt::format("{} x {}", j - i, d[i]) : std::to_string(d[i]));
    i = j;
  }
  return fmt::format(
      " in {} NVLink domain(s) of {} GPUs holding {} ranks; costed as an even group of its emptiest domain's size: "
      "{} ranks as {} domain(s) of {}",
      d.size(), domain, fmt::join(runs, " + "), p.shape.ranks, p.shape.nodes, p.shape.ranks_per_node);
}

// The table as nccl-tests prints it, with the calibrated rows' model beside them and, with -v,
// every candidate pair.
void print_table(const CollectivePrediction& p, std::ostream& out) {
  out << fmt::format("# stepsim collective {} on {} GPUs of {} ({} node(s){})\n", to_string(p.op), p.gpus,
                     p.cluster.name, p.cluster.nodes, domain_text(p));
  if (p.rounded > 0 || p.dropped > 0)
    out << fmt::format("# as nccl-tests runs them: {} size(s) rounded down to whole float elements{}{}\n", p.rounded,
                       p.op == CollOp::allgather || p.op == CollOp::reducescatter || p.op == CollOp::alltoall
                           ? fmt::format(" (a multiple of 4 per rank of {})", p.gpus)
                           : "",
                       p.dropped > 0 ? fmt::format(", {} holding none left out", p.dropped) : "");
  out << fmt::format("# {:>12} {:>12} {:>6} {:>10} {:>8} {:>8}  {}\n", "size(B)", "count", "type", "time(us)", "algbw",
                     "busbw", "algorithm/protocol");
  for (const CollectiveRow& r : p.rows) {
    const double t = r.choice.time().us();
    const double algbw = t > 0 ? r.size.as_double() / t * 1e-3 : 0.0;
    out << fmt::format("  {:>12} {:>12} {:>6} {:>10.2f} {:>8.2f} {:>8.2f}  {}/{}\n", r.size.count(), r.count, "float",
                       t, algbw, busbw_gbps(r, p.op, p.gpus), collectives::to_string(r.choice.algorithm),
                       collectives::to_string(r.choice.protocol));
    if (r.model) {
      const std::string by_bytes = r.table_dtype.empty() || r.table_dtype == "float"
                                       ? ""
                                       : fmt::format(", from a {} table matched by bytes", r.table_dtype);
      out << fmt::format("  {:>12} {:>12} {:>6} {:>10.2f} {:>8} {:>8}    model without calibration (above: {}{})", "",
                         "", "", r.model->time().us(), "", "", calibration::to_string(r.source), by_bytes);
      if (r.measured_us)
        out << fmt::format("; measured {:.2f}: error {:+.1f}% calibrated, {:+.1f}% model", *r.measured_us,
                           100 * relative_error(t, *r.measured_us),
                           100 * relative_error(r.model->time().us(), *r.measured_us));
      out << fmt::format("\n");
    }
    // NCCL models the collectives it tunes (tuning.cc); its AllToAll and SendRecv are
    // point-to-point sends it does not model, whose estimate is stepsim's own.
    for (std::size_t i = 0; i < r.all.size(); ++i) {
      const collectives::Choice& c = r.all[i];
      // The shared links (NICs shared by GPUs, leaf uplinks, a PCIe link slower than the NIC)
      // that hold a pair below its own bandwidth, which NCCL's choice does not see.
      std::string held;
      if (i < r.alone.size() && c.algbw.bytes_per_s() < r.alone[i].bytes_per_s() * (1 - 1e-9))
        held = fmt::format("; the network's shared links hold its bandwidth to {:.2f} GB/s ({:.2f} alone)",
                           c.algbw.gbytes_per_s(), r.alone[i].gbytes_per_s());
      out << fmt::format(
          "  {:>12} {:>12} {:>6} {:>10.2f} {:>8} {:>8}    candidate {}/{} ({} {:.2f} us; latency {:.1f} us, "
          "{} channels{})\n",
          "", "", "", c.time().us(), "", "", collectives::to_string(c.algorithm), collectives::to_string(c.protocol),
          c.algorithm == Algorithm::direct ? "stepsim's point-to-point estimate, which NCCL does not model,"
                                           : "NCCL's model",
          c.nccl_time.us(), c.latency.us(), c.channels, held);
    }
  }
}

po::options_description describe(CollectiveQuery& o, std::string& json) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("op", po::value(&o.op)->value_name("OP"),
                                                 "collective (case-insensitive)")(
      "size", po::value<std::string>()->value_name("S")->notifier([&o](const std::string& s) { o.size = s; }),
      "one size, e.g. 256MiB (default 256MiB)")(
      "sweep", po::value<std::string>()->value_name("MIN:MAX")->notifier([&o](const std::string& s) { o.sweep = s; }),
      "sizes from MIN to MAX, e.g. 8B:4GiB")(
      "factor", number_value(o.factor, "--factor", factor_error)->value_name("F"), "size step of --sweep (default 2)")(
      "gpus", number_value(o.gpus, "--gpus", collective_gpus_error)->value_name("N"),
      "GPUs in the communicator (default 8)")(
      "ranks-per-node", number_value(o.ranks_per_node, "--ranks-per-node", ranks_per_node_error)->value_name("K"),
      "communicator ranks on each node, spanning N/K nodes (default: fill whole nodes)")(
      "cluster", po::value(&o.cluster)->value_name("C"), "cluster preset or cluster file (default dgx-h100-ndr)")(
      "set", po::value(&o.cluster_sets)->value_name("cluster.KEY=VALUE")->composing(),
      "override one of the cluster's keys, e.g. cluster.nvlink_domain=36 (repeatable)")(
      "algorithm", po::value(&o.algorithm)->value_name("A"),
      "force ring, tree, nvls, nvls-tree, pat (the collectives), direct (AllToAll, SendRecv) (default auto), as "
      "NCCL_ALGO")(
      "protocol", po::value(&o.protocol)->value_name("P"),
      "force ll, ll128, simple (default auto), as NCCL_PROTO: not for AllToAll and SendRecv, which NCCL runs point "
      "to point")("json", po::value(&json)->value_name("FILE"), "write the rows as JSON to FILE ('-' for stdout)")(
      "verbose,v", po::bool_switch(&o.candidates),
      "list every candidate pair with its time and NCCL's own estimate (stepsim's for AllToAll and SendRecv, "
      "which NCCL does not model), in the order NCCL ranks them, and the bandwidth to which NICs shared by "
      "the GPUs, an oversubscribed spine or a slower PCIe link hold it, which NCCL's choice does not see")(
      "calibration", po::value(&o.calibrations)->value_name("FILE")->composing(),
      "measured tables to apply (stepsim calibrate; repeatable)");
  return desc;
}

}  // namespace

int run_collective(const Args& args) {
  CollectiveQuery query;
  std::string json;
  const po::options_description desc = describe(query, json);
  po::positional_options_description positional;
  positional.add("op", 1);
  const auto vm = parse_args("collective", args, desc, positional);
  if (help_requested(vm, kCollectiveUsage, desc, kCollectiveExamples)) return 0;
  if (vm.count("factor") != 0 && vm.count("sweep") == 0)
    throw InputError("<command line>", "--factor", "applies only with --sweep");
  std::vector<report::Output> outputs;
  if (vm.count("json") != 0) outputs.push_back({"--json", json, {}});
  report::check_outputs(outputs);
  const CollectivePrediction prediction = predict_collective(query);
  for (report::Output& o : outputs)
    o.write = [&](std::ostream& os) { os << boost::json::serialize(collective_json(prediction)) << "\n"; };
  // The table once every output is written (none when the JSON goes to stdout).
  report::write_outputs(outputs, [&](std::ostream& out) { print_table(prediction, out); });
  return 0;
}

}  // namespace stepsim::cli
