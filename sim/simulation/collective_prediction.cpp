// Predicting one collective per size: the query's checks, NCCL's choice limited by the
// fabric the simulation loads, and calibration files where they measured the same shape.
#include "simulation/collective_prediction.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "calibration/link_bound.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/fabric.hpp"
#include "parallelism/mesh.hpp"
#include "stepsim/error.hpp"

namespace stepsim {
InputError collective_gpus_error(const std::string& text) {
  return InputError("<command line>", "--gpus", fmt::format("expected 2 to {} GPUs, got {}", kMaxGpus, text));
}

InputError ranks_per_node_error(const std::string& text) {
  return InputError("<command line>", "--ranks-per-node",
                    fmt::format("expected 1 to the cluster's GPUs per node, got {}", text));
}

InputError factor_error(const std::string& text) {
  return InputError("<command line>", "--factor",
                    fmt::format("expected a factor between 1.001 and 1000000, got {}", text));
}

namespace {

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
  if (text.empty())
    throw InputError("<command line>", "stepsim collective", "missing OP (see 'stepsim collective --help')");
  return parse_name(
      text, CollOp::allreduce, CollOp::sendrecv, [](CollOp op) { return std::string(to_string(op)); }, "OP");
}

// Beyond any GPU's memory; larger sizes would only test the simulator's integer range.
constexpr std::int64_t kMaxSize = std::int64_t{1} << 40;
constexpr int kMaxRows = 10000;

void check_size(Bytes size, const char* flag) {
  if (size.count() > kMaxSize)
    throw InputError("<command line>", flag,
                     fmt::format("{} bytes is more than the 1 TiB a rank can hold", size.count()));
}

std::vector<Bytes> sizes(const CollectiveQuery& q) {
  if (q.size && q.sweep) throw InputError("<command line>", "--sweep", "give either --size or --sweep, not both");
  if (!q.sweep) {
    const Bytes size = io::parse_bytes(q.size.value_or("256MiB"), "<command line>", "--size");
    check_size(size, "--size");
    return {size};
  }
  const std::string& sweep = *q.sweep;
  const auto colon = sweep.find(':');
  if (colon == std::string::npos)
    throw InputError("<command line>", "--sweep", fmt::format("expected MIN:MAX such as 8B:4GiB, got '{}'", sweep));
  const Bytes lo = io::parse_bytes(sweep.substr(0, colon), "<command line>", "--sweep");
  const Bytes hi = io::parse_bytes(sweep.substr(colon + 1), "<command line>", "--sweep");
  if (!(q.factor >= 1.001 && q.factor <= 1e6)) throw factor_error(fmt::format("{}", q.factor));
  if (lo.count() < 1 || hi < lo)
    throw InputError("<command line>", "--sweep", fmt::format("expected 1 <= MIN <= MAX, got '{}'", sweep));
  check_size(hi, "--sweep");
  const double rows = std::log(hi.as_double() / lo.as_double()) / std::log(q.factor) + 1;
  if (rows > kMaxRows)
    throw InputError("<command line>", "--factor",
                     fmt::format("{} from {} to {} gives {:.0f} sizes; at most {} (raise --factor)", q.factor,
                                 sweep.substr(0, colon), sweep.substr(colon + 1), rows, kMaxRows));
  std::vector<Bytes> out;
  // Whole bytes, each once: a small factor rounds neighbouring sizes to the same byte count.
  for (double s = lo.as_double(); s <= hi.as_double() * (1 + 1e-12); s *= q.factor) {
    const Bytes size(static_cast<std::int64_t>(std::llround(s)));
    if (out.empty() || out.back() != size) out.push_back(size);
  }
  return out;
}

// nccl-tests runs whole elements of its type (float here): count = size / 4, and AllGather,
// ReduceScatter and AllToAll split it into per-rank pieces rounded down to 16 bytes
// (AllGatherGetCollByteCount and its siblings: (count / nranks) & ~(16 / eltsize − 1)). It
// prints the bytes it ran and the count of one rank's piece.
struct TestShape {
  Bytes size;
  std::int64_t count = 0;
};

TestShape nccl_tests_shape(CollOp op, Bytes requested, int ranks) {
  constexpr std::int64_t kElement = 4;
  const std::int64_t count = requested.count() / kElement;
  if (op != CollOp::allgather && op != CollOp::reducescatter && op != CollOp::alltoall)
    return {Bytes(count * kElement), count};
  const std::int64_t piece = count / ranks / 4 * 4;
  return {Bytes(piece * ranks * kElement), piece};
}

void check_gpus(const CollectiveQuery& q) {
  if (q.gpus == 1)
    throw InputError("<command line>", "--gpus",
                     "a collective over 1 GPU moves no data (NCCL returns at once or makes a local copy); expected 2 "
                     "or more GPUs");
  if (q.gpus < 2 || q.gpus > kMaxGpus) throw collective_gpus_error(std::to_string(q.gpus));
  if (q.ranks_per_node && *q.ranks_per_node < 1) throw ranks_per_node_error(std::to_string(*q.ranks_per_node));
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

// The cluster --cluster names, an unknown name blamed on the flag (the scenario reader names
// the scenario key "cluster", which this command line does not take).
ClusterSpec load_flag_cluster(const std::string& name, int gpus, const std::vector<std::string>& sets) {
  try {
    return io::load_cluster(name, gpus, sets);
  } catch (const InputError& e) {
    if (e.file() != "<command line>" || e.where() != "cluster") throw;
    throw InputError("<command line>", "--cluster", e.message());
  }
}

// The cluster that holds the communicator: N/K nodes when K ranks sit on each.
ClusterSpec load_cluster_for(const CollectiveQuery& q) {
  const ClusterSpec first = load_flag_cluster(q.cluster, q.gpus, q.cluster_sets);
  if (!q.ranks_per_node) {
    check_whole_nodes(first, q.gpus);
    return first;
  }
  const int per_node = *q.ranks_per_node;
  if (per_node < 1 || per_node > first.gpus_per_node)
    throw InputError("<command line>", "--ranks-per-node",
                     fmt::format("expected 1 to {} ({} has {} GPUs per node), got {}", first.gpus_per_node, first.name,
                                 first.gpus_per_node, per_node));
  if (q.gpus % per_node != 0)
    throw InputError("<command line>", "--ranks-per-node",
                     fmt::format("{} does not divide --gpus {}", per_node, q.gpus));
  const long long nodes = q.gpus / per_node;
  if (nodes * first.gpus_per_node > kMaxGpus)
    throw InputError("<command line>", "--ranks-per-node",
                     fmt::format("{} nodes of {} GPUs is more than {} GPUs", nodes, first.gpus_per_node, kMaxGpus));
  return load_flag_cluster(q.cluster, static_cast<int>(nodes) * first.gpus_per_node, q.cluster_sets);
}

CollectivesSpec forced_choice(const CollectiveQuery& q) {
  CollectivesSpec forced;
  forced.algorithm = parse_name(
      q.algorithm, Algorithm::automatic, Algorithm::direct,
      [](Algorithm a) { return std::string(collectives::to_string(a)); }, "--algorithm");
  forced.protocol = parse_name(
      q.protocol, Protocol::automatic, Protocol::simple,
      [](Protocol p) { return std::string(collectives::to_string(p)); }, "--protocol");
  return forced;
}

// NCCL_ALGO and NCCL_PROTO leave AllToAll and SendRecv as they are (point_to_point): a flag
// that forces them there would change nothing, so it is refused rather than ignored.
void check_point_to_point_setting(CollOp op, const CollectivesSpec& forced) {
  if (!point_to_point(op)) return;
  const auto refuse = [op](const char* flag, const char* value, const char* choices) {
    throw InputError("<command line>", flag,
                     fmt::format("NCCL runs {} as point-to-point sends and receives, which NCCL_ALGO and NCCL_PROTO "
                                 "do not touch, so '{}' cannot be forced (choices: {})",
                                 nccl_name(op), value, choices));
  };
  if (forced.algorithm != Algorithm::automatic && forced.algorithm != Algorithm::direct)
    refuse("--algorithm", collectives::to_string(forced.algorithm), "auto, direct");
  if (forced.protocol != Protocol::automatic) refuse("--protocol", collectives::to_string(forced.protocol), "auto");
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

calibration::MeasuredTables read_tables(const std::vector<std::string>& files, const ClusterSpec& cluster,
                                        const CollectivesSpec& forced) {
  std::vector<calibration::Calibration> read;
  for (const auto& f : files) {
    read.push_back(calibration::read_calibration(f));
    calibration::check_fits(read.back(), cluster, forced);
  }
  return calibration::MeasuredTables(std::move(read), cluster);
}

constexpr const char* kRowType = "float";

// The calibrated time in place of the model's, the model kept beside it, and the measured
// time when this very size was measured on this shape.
void calibrate(CollectiveRow& row, const calibration::MeasuredTables& tables, const ClusterSpec& cluster,
               const CollectivesSpec& forced, const collectives::Request& request) {
  // The rows are of float elements, nccl-tests' default type: a float table where one was
  // measured, else one of another type, matched by bytes.
  const calibration::CalibratedChoice c = calibration::calibrate_collective(tables, cluster, forced, request, kRowType);
  row.model = row.choice;
  row.choice = on_fabric(c, cluster, request);
  row.source = c.source;
  if (c.table != nullptr) row.table_dtype = c.table->dtype;
  const auto& s = request.shape;
  if (const auto* t = tables.exact(request.op, s.ranks, s.nodes, s.ranks_per_node, kRowType)) {
    for (const auto& p : t->points)
      if (p.bytes == request.size.as_double()) row.measured_us = p.time_us;
  }
}

}  // namespace

double relative_error(double predicted, double measured) { return (predicted - measured) / measured; }

collectives::Choice on_fabric(const calibration::CalibratedChoice& c, const ClusterSpec& cluster,
                              const collectives::Request& request) {
  collectives::Choice out = c.choice;
  const auto& s = request.shape;
  const bool other_shape = c.table != nullptr && (c.table->ranks != s.ranks || c.table->nodes != s.nodes ||
                                                  c.table->ranks_per_node != s.ranks_per_node);
  if (c.source == calibration::Source::scaled && other_shape)
    out.algbw = parallelism::fabric_bandwidth(cluster, request, out);
  return out;
}

double busbw_gbps(const CollectiveRow& r, CollOp op, int gpus) {
  const double t = r.choice.time().seconds();
  return t > 0 ? r.size.as_double() / t * collectives::bus_factor(op, gpus) * 1e-9 : 0.0;
}

namespace {
// The GPU of each rank: K ranks on the first GPUs of each node.
std::vector<int> communicator_gpus(const ClusterSpec& cluster, int gpus, std::optional<int> ranks_per_node) {
  const int per_node = ranks_per_node.value_or(std::min(gpus, cluster.gpus_per_node));
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(gpus));
  for (int r = 0; r < gpus; ++r) out.push_back(r / per_node * cluster.gpus_per_node + r % per_node);
  return out;
}
}  // namespace

collectives::GroupShape communicator_shape(const ClusterSpec& cluster, int gpus, std::optional<int> ranks_per_node) {
  const int per_node = ranks_per_node.value_or(std::min(gpus, cluster.gpus_per_node));
  if (cluster.domain_gpus() == cluster.gpus_per_node) return {gpus, (gpus + per_node - 1) / per_node, per_node};
  return parallelism::shape_of(communicator_gpus(cluster, gpus, ranks_per_node), cluster.domain_gpus());
}

std::vector<int> communicator_domain_ranks(const ClusterSpec& cluster, int gpus, std::optional<int> ranks_per_node) {
  std::vector<int> out;
  int domain = -1;
  for (const int gpu : communicator_gpus(cluster, gpus, ranks_per_node)) {
    if (gpu / cluster.domain_gpus() != domain) {
      domain = gpu / cluster.domain_gpus();
      out.push_back(0);
    }
    ++out.back();
  }
  return out;
}

CollectivePrediction predict_collective(const CollectiveQuery& q) {
  CollectivePrediction out;
  out.op = parse_op(q.op);
  check_gpus(q);
  out.cluster = load_cluster_for(q);
  out.gpus = q.gpus;
  const CollectivesSpec forced = forced_choice(q);
  check_point_to_point_setting(out.op, forced);
  const calibration::MeasuredTables tables = read_tables(q.calibrations, out.cluster, forced);
  out.shape = communicator_shape(out.cluster, q.gpus, q.ranks_per_node);
  out.domain_ranks = communicator_domain_ranks(out.cluster, q.gpus, q.ranks_per_node);
  const std::vector<Bytes> asked = sizes(q);
  std::vector<TestShape> shapes;
  for (Bytes s : asked) {
    const TestShape t = nccl_tests_shape(out.op, s, q.gpus);
    if (t.size.count() == 0) {
      ++out.dropped;
      continue;
    }
    out.rounded += t.size != s ? 1 : 0;
    if (shapes.empty() || shapes.back().size != t.size) shapes.push_back(t);
  }
  if (shapes.empty()) {
    const bool pieces = out.op == CollOp::allgather || out.op == CollOp::reducescatter || out.op == CollOp::alltoall;
    const std::int64_t least = pieces ? 16LL * q.gpus : 4;
    throw InputError("<command line>", q.sweep ? "--sweep" : "--size",
                     fmt::format("{} holds no whole {}: nccl-tests would run 0 bytes; expected at least {} bytes",
                                 q.sweep ? "every size of " + *q.sweep : std::to_string(asked.front().count()) + " B",
                                 pieces ? fmt::format("16-byte piece per rank of {} ranks", q.gpus)
                                        : std::string("4-byte float element"),
                                 least));
  }
  // The members' GPUs: K on each tray of an NVLink domain with --ranks-per-node K, whose
  // NICs and leaves they load.
  const std::vector<int> gpus = communicator_gpus(out.cluster, q.gpus, q.ranks_per_node);
  for (const TestShape& shape : shapes) {
    const Bytes s = shape.size;
    const collectives::Request request{out.op, s, out.shape};
    auto all = candidates_for_command_line(out.cluster, forced, request);
    // NCCL chooses without knowing the spine; the shared NICs and uplinks the simulation
    // loads then limit the chosen algorithm (and every other candidate).
    std::vector<Bandwidth> alone;
    for (collectives::Choice& c : all) {
      alone.push_back(c.algbw);
      c.algbw = parallelism::fabric_bandwidth(out.cluster, request, c, gpus);
    }
    CollectiveRow row;
    row.size = s;
    row.count = shape.count;
    row.choice = all.front();
    if (q.candidates) {
      row.all = all;
      row.alone = std::move(alone);
    }
    out.rows.push_back(std::move(row));
    if (!tables.empty()) calibrate(out.rows.back(), tables, out.cluster, forced, request);
  }
  return out;
}

boost::json::value collective_json(const CollectivePrediction& p) {
  boost::json::array out;
  for (const CollectiveRow& r : p.rows) {
    const double t = r.choice.time().us();
    boost::json::object o;
    o["op"] = to_string(p.op);
    o["cluster"] = p.cluster.name;
    o["gpus"] = p.gpus;
    // Where the ranks sit, as the table's header says: --gpus 8 fills one node of 8, --gpus 8
    // --ranks-per-node 1 spans 8 nodes, and the rows differ tenfold.
    o["nodes"] = p.cluster.nodes;
    o["ranks_per_node"] = p.gpus / std::max(1, p.cluster.nodes);
    o["size_bytes"] = r.size.count();
    o["count"] = r.count;
    o["time_us"] = t;
    o["algbw_gbps"] = t > 0 ? r.size.as_double() / t * 1e-3 : 0.0;
    o["busbw_gbps"] = busbw_gbps(r, p.op, p.gpus);
    o["algorithm"] = collectives::to_string(r.choice.algorithm);
    o["protocol"] = collectives::to_string(r.choice.protocol);
    o["channels"] = r.choice.channels;
    if (r.model) {
      o["source"] = calibration::to_string(r.source);
      if (!r.table_dtype.empty()) o["table_dtype"] = r.table_dtype;
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

}  // namespace stepsim
