// Grouping nccl-tests rows into tables by test and communicator shape, and fitting each.
#include "calibration/nccl_import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <tuple>

#include "calibration/apply.hpp"
#include "calibration/link_bound.hpp"
#include "collectives/collective.hpp"
#include "stepsim/error.hpp"

namespace stepsim::calibration {
namespace {

struct ShapeKey {
  CollOp op;
  int ranks, nodes;
  std::string type;
  std::string algorithm, protocol;  // stepsim's names where the run forced them, else ""
  auto operator<=>(const ShapeKey&) const = default;
};

std::string row_place(const NcclTestsRow& row) {
  if (row.line > 0) return fmt::format("line {}", row.line);
  if (row.result >= 0) return fmt::format("/results/{}", row.result);
  return "";
}

// A run that printed wrong results timed a broken collective. Legacy rows print the largest
// numerical error instead of a count, small and not zero in good runs: they pass.
void check_not_wrong(const NcclTestsLog& log, const NcclTestsRow& row) {
  if (row.legacy) return;
  for (auto [half, name] : {std::pair{&row.out_of_place, "out-of-place"}, {&row.in_place, "in-place"}}) {
    if (half->wrong && *half->wrong != 0)
      throw InputError(log.source, row_place(row),
                       fmt::format("the {} run produced {:g} wrong element(s) (#wrong is not 0): a run with wrong "
                                   "results is no measurement of the collective; rerun it",
                                   name, *half->wrong));
  }
}

// The flags say what a log that keeps only its rows does not; where the header says it, a flag
// that says otherwise would relabel the measurement (an A100's table applied as an H100's,
// past the check that refuses a table of another GPU), so it is refused, naming where the
// header says what. A flag that agrees changes nothing.
[[noreturn]] void contradicts(const NcclTestsLog& log, const std::string& at, const std::string& flag,
                              const std::string& says, const char* what) {
  throw InputError(log.source, at,
                   fmt::format("{} contradicts the log's header, which says {} here ({} is for a log that does not "
                               "say {}, one that keeps only its rows: leave it out)",
                               flag, says, flag.substr(0, flag.find(' ')), what));
}

void check_flags(const NcclTestsLog& log, const NcclTestsRow& row, const ImportOverrides& o) {
  if (!o.op.empty() && !row.test.empty() && op_of_test(o.op, "--op") != op_of_test(row.test, log.source))
    contradicts(log, row.test_at, "--op " + o.op, fmt::format("the test is {}", row.test), "which test ran");
  if (o.ranks > 0) {
    if (row.ranks_said > 0 && o.ranks != row.ranks_said)
      contradicts(log, row.ranks_at, fmt::format("--ranks {}", o.ranks),
                  fmt::format("{} ranks ran the test", row.ranks_said), "how many ranks ran");
    if (row.ranks_said == 0 && row.process_ranks > 0 && o.ranks % row.process_ranks != 0)
      contradicts(log, row.process_ranks_at, fmt::format("--ranks {}", o.ranks),
                  fmt::format("each process ran {} rank(s) (nThread x nGpus, -g), of which {} is no whole number of "
                              "processes",
                              row.process_ranks, o.ranks),
                  "how many ranks ran");
  }
  if (o.nodes > 0 && row.nodes > 0 && o.nodes != row.nodes)
    contradicts(
        log, row.nodes_at, fmt::format("--nodes {}", o.nodes),
        row.nodes == 1 ? std::string("the ranks ran on one node") : fmt::format("the ranks ran on {} hosts", row.nodes),
        "how many nodes the ranks ran on");
}

// An algorithm or a protocol: NCCL's names for it, in errors, and its name in a table ("" for
// NCCL's own choice), or empty for a name of neither.
struct Setting {
  const char* what;      // "algorithm"
  const char* flag;      // "--algorithm"
  const char* variable;  // "NCCL_ALGO"
  const char* names;     // "Ring, Tree, ..."
  bool algorithm;

  std::optional<std::string> table_name(const std::string& name) const {
    if (algorithm) {
      const auto a = algorithm_named(name);
      if (!a) return std::nullopt;
      return *a == Algorithm::automatic ? "" : collectives::to_string(*a);
    }
    const auto p = protocol_named(name);
    if (!p) return std::nullopt;
    return *p == Protocol::automatic ? "" : collectives::to_string(*p);
  }
};
constexpr Setting kAlgorithm{"algorithm", "--algorithm", "NCCL_ALGO", "Ring, Tree, NVLS, NVLSTree, CollnetDirect, PAT",
                             true};
constexpr Setting kProtocol{"protocol", "--protocol", "NCCL_PROTO", "LL, LL128, Simple", false};

// What NCCL_ALGO or NCCL_PROTO says of the test's collective. Since NCCL 2.24 the value may
// hold a list for every function and lists for named ones, separated by semicolons
// ("ring;allreduce:tree;allgather:ring", the names case-insensitive): the list naming the
// collective, else the unnamed one, else none (empty: NCCL's own choice for it).
std::string setting_for(const std::string& said, CollOp op) {
  if (said.find_first_of(":;") == std::string::npos) return said;
  std::string unnamed;
  std::size_t start = 0;
  while (start <= said.size()) {
    const std::size_t end = std::min(said.find(';', start), said.size());
    const std::string entry = said.substr(start, end - start);
    start = end + 1;
    const std::size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      unnamed = entry;
      continue;
    }
    std::string name = entry.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (name == to_string(op)) return entry.substr(colon + 1);
  }
  return unnamed;
}

// What the run forced: the flag where given, else what NCCL's own lines said of the test's
// collective; a flag that says otherwise than NCCL is refused, as a flag that contradicts the
// header.
std::string run_setting(const NcclTestsLog& log, const Setting& s, CollOp op, const std::string& flag_value,
                        const std::string& said, const std::string& said_at) {
  std::optional<std::string> from_log;
  if (const std::string value = setting_for(said, op); !value.empty()) {
    from_log = s.table_name(value);
    if (!from_log)
      throw InputError(log.source, said_at,
                       fmt::format("{} '{}' is not one {} stepsim models ({}): a table stands for one forced {} or "
                                   "NCCL's own choice; measure with one {} forced",
                                   s.variable, said, s.what, s.names, s.what, s.what));
  }
  if (flag_value.empty()) return from_log.value_or("");
  const std::string given = s.table_name(flag_value).value_or("");
  if (from_log && *from_log != given)
    contradicts(log, said_at, fmt::format("{} {}", s.flag, flag_value),
                fmt::format("NCCL ran with {} set to {}", s.variable, said),
                s.algorithm ? "which algorithm ran" : "which protocol ran");
  return given;
}

// One measured time, kept with its row to check it once the GPU is known.
struct Measurement {
  const NcclTestsLog* log;
  const NcclTestsRow* row;
  ShapeKey key;
  double bytes, us;
  bool nodes_said;  // by the header or --nodes; else taken as one
};

// nccl-tests prints a row's size as the larger of its send and receive buffers and its count as
// the count the collective is called with (common.cu, after each test's GetCollByteCount): one
// rank's part for AllGather and ReduceScatter, so that the size is count x ranks x the element's
// bytes; the whole buffer for AllReduce, Broadcast, Reduce and SendRecv; the part for each peer
// for AlltoAll (the whole buffer in its first versions). A row that keeps none of these is of
// another test, rank count or element type than it is read as, and its times would cost
// another collective.
void check_count(const NcclTestsLog& log, const NcclTestsRow& row, CollOp op, int ranks) {
  // In doubles: a count of 2^40 elements of 8 B over 2^24 ranks overflows 64 bits, and any
  // product beyond 2^53 is far above every size a row may have.
  const int element = nccl_type_bytes(row.type);
  const double whole = static_cast<double>(row.count) * element, parts = whole * ranks;
  const double size = row.size.as_double();
  const bool per_rank = op == CollOp::allgather || op == CollOp::reducescatter;
  if (per_rank ? size == parts : size == whole || (op == CollOp::alltoall && size == parts)) return;
  const std::string rule =
      per_rank ? fmt::format("count x {} ranks x {} B = {:.0f} B", ranks, element, parts)
      : op == CollOp::alltoall
          ? fmt::format("count x {} ranks x {} B = {:.0f} B (count x {} B = {:.0f} B in its first versions)", ranks,
                        element, parts, element, whole)
          : fmt::format("count x {} B = {:.0f} B", element, whole);
  throw InputError(
      log.source, row_place(row),
      fmt::format("size {} B contradicts count {} of {}: {} prints its size as {}; a row that does not "
                  "keep it is of another test, rank count or element type than {} of {} rank(s) (check "
                  "--op, --ranks and the log)",
                  row.size.count(), row.count, row.type, nccl_test_program(op), rule, nccl_test_program(op), ranks));
}

// What the run's environment switched off that a table cannot say, where it mattered to the
// table's collectives: peer-to-peer copies between the GPUs of a node (NCCL_P2P_DISABLE: their
// data goes through host memory, not NVLink), InfiniBand and RoCE between nodes
// (NCCL_IB_DISABLE: TCP sockets), NVLS where the GPU has it and NCCL chose the algorithm
// (NCCL_NVLS_ENABLE=0: its choice among the others). Every simulation would take such a table
// for the collectives NCCL runs without them.
void check_environment(const Measurement& m, const std::optional<ClusterSpec>& cluster) {
  const int per_node = m.key.ranks / m.key.nodes;
  const bool nvls_op =
      m.key.op == CollOp::allreduce || m.key.op == CollOp::allgather || m.key.op == CollOp::reducescatter;
  for (const NcclTestsRow::EnvSaid& e : m.row->nccl_env) {
    std::string what;
    if (e.variable == "NCCL_P2P_DISABLE" && e.value > 0 && per_node > 1)
      what =
          fmt::format("the {} ranks on each node exchanged their data through host memory, not over NVLink", per_node);
    if (e.variable == "NCCL_IB_DISABLE" && e.value != 0 && m.key.nodes > 1)
      what = fmt::format("the {} nodes exchanged their data over TCP sockets, not InfiniBand or RoCE", m.key.nodes);
    if (e.variable == "NCCL_NVLS_ENABLE" && e.value == 0 && nvls_op && m.key.algorithm.empty() && cluster &&
        cluster->intra_node.nvls)
      what = "NCCL chose among its algorithms without NVLS, which it runs on this GPU's NVSwitch";
    if (what.empty()) continue;
    throw InputError(m.log->source, row_place(*m.row),
                     fmt::format("{}={} ({}): {}; a table of this run would stand for {} run as NCCL runs it "
                                 "without that setting: measure without it",
                                 e.variable, e.value, e.at, what, to_string(m.key.op)));
  }
}

// What forced the table's algorithm and protocol: the flags, or NCCL's lines in the log.
std::string forced_by(const NcclTestsRow& row, const ImportOverrides& o, const ShapeKey& key) {
  std::string out;
  const auto add = [&](const std::string& table, const std::string& flag, const char* flag_name, const char* variable,
                       const std::string& said, const std::string& at) {
    if (table.empty()) return;
    if (!out.empty()) out += " and ";
    out += !flag.empty() ? fmt::format("{} {}", flag_name, flag) : fmt::format("{}={} ({})", variable, said, at);
  };
  add(key.algorithm, o.algorithm, "--algorithm", "NCCL_ALGO", row.nccl_algo, row.nccl_algo_at);
  add(key.protocol, o.protocol, "--protocol", "NCCL_PROTO", row.nccl_proto, row.nccl_proto_at);
  return out;
}

// A forced algorithm or protocol the collective model cannot run for the test on this GPU and
// shape (NVLS before Hopper, Tree for an AllGather, PAT with several ranks on a node, NVLS with
// LL; CollNet, which it does not model): every simulation would refuse the table. Where NCCL
// has no such algorithm either it refuses the run (enqueue.cc: "no algorithm/protocol
// available", ncclInvalidUsage), so such a label is a wrong flag or a misread log. The model's
// own rules say which, on the fastest cluster with the GPU.
// The row's collective as the test ran it, on the fastest cluster with its GPU over its hosts.
struct AsRun {
  ClusterSpec cluster;
  collectives::Request request;
  CollectivesSpec forced;
};

AsRun as_run(const ClusterSpec& fastest, const Measurement& m) {
  AsRun a{fastest, {}, {}};
  a.cluster.nodes = m.key.nodes;
  CollectiveTable table;
  table.algorithm = m.key.algorithm;
  table.protocol = m.key.protocol;
  a.forced = measured_as(table);
  a.request = {m.key.op, Bytes(static_cast<std::int64_t>(m.bytes)), domain_shape(a.cluster, m.key.ranks, m.key.nodes)};
  return a;
}

void check_runnable(const ClusterSpec& fastest, const Measurement& m, const ImportOverrides& o,
                    const std::string& gpu) {
  if (m.key.algorithm.empty() && m.key.protocol.empty()) return;
  const AsRun run = as_run(fastest, m);
  const ClusterSpec& cluster = run.cluster;
  try {
    collectives::predict(cluster, run.forced, run.request);
  } catch (const InputError& e) {
    throw InputError(m.log->source, row_place(*m.row),
                     fmt::format("{}: on {} ({}), {}; a table so forced would serve no simulation, and NCCL "
                                 "itself refuses a forced algorithm or protocol it cannot run (\"no "
                                 "algorithm/protocol available\")",
                                 forced_by(*m.row, o, m.key), gpu, cluster.name, e.message()));
  }
}

// The channels the run's environment held NCCL to, where they are not those NCCL runs the
// table's algorithm on by default: a table so measured stands for collectives on fewer (or
// more) SMs and channels than any simulation runs. NCCL takes the communicator's channels
// (rings, trees, PAT, sends) to at most NCCL_MAX_NCHANNELS (or the older NCCL_MAX_NRINGS) and
// NCCL_MAX_CTAS, then to at least NCCL_MIN_NCHANNELS (NCCL_MIN_NRINGS) and NCCL_MIN_CTAS
// (init.cc, ncclMaxNchannels, ncclMinNchannels and the config's CTAs; connect.cc,
// ncclTopoPostset); NVLS's own channels to NCCL_NVLS_NCHANNELS where set, then between the two
// CTA bounds (nvls.cc, ncclNvlsInit). A bound that leaves the default count as it is changes
// nothing and is let through.
void check_channels(const ClusterSpec& fastest, const Measurement& m) {
  std::map<std::string, const NcclTestsRow::EnvSaid*> said;
  for (const NcclTestsRow::EnvSaid& e : m.row->nccl_env) said[e.variable] = &e;
  if (std::none_of(said.begin(), said.end(), [](const auto& kv) {
        return kv.first.find("CHANNELS") != std::string::npos || kv.first.find("RINGS") != std::string::npos ||
               kv.first.find("CTAS") != std::string::npos;
      }))
    return;
  const AsRun run = as_run(fastest, m);
  const collectives::Choice choice = collectives::predict(run.cluster, run.forced, run.request);
  const bool nvls = choice.algorithm == Algorithm::nvls || choice.algorithm == Algorithm::nvls_tree;
  const int by_default = collectives::nccl_channels(run.cluster, run.request, choice.algorithm);
  const auto get = [&](const char* name) { return said.count(name) ? said[name] : nullptr; };
  // The variable that holds the bound, the newer name over the older.
  const auto pick = [&](const char* newer, const char* older) {
    const NcclTestsRow::EnvSaid* e = get(newer);
    return e != nullptr && e->value != -2 ? e : get(older);
  };
  int channels = by_default;
  std::vector<const NcclTestsRow::EnvSaid*> binding;
  // NCCL holds what it reads to its MAXCHANNELS (64), a maximum below 1 to 1 (ncclMaxNchannels:
  // "User asked for a maximum of ... channels"), and takes -2, its parameters' default, as unset.
  constexpr long long kMaxChannels = 64;
  const auto held = [&](const NcclTestsRow::EnvSaid* e) -> std::optional<int> {
    if (e == nullptr || e->value == -2) return std::nullopt;
    return static_cast<int>(std::clamp(e->value, 1LL, kMaxChannels));
  };
  const auto cap = [&](const NcclTestsRow::EnvSaid* e) {
    if (const auto v = held(e); v && *v < channels) {
      channels = *v;
      binding.push_back(e);
    }
  };
  const auto raise = [&](const NcclTestsRow::EnvSaid* e) {
    if (const auto v = held(e); v && e->value >= 1 && *v > channels) {
      channels = *v;
      binding.push_back(e);
    }
  };
  if (nvls) {
    if (const auto* e = get("NCCL_NVLS_NCHANNELS"); held(e) && e->value >= 1 && *held(e) != channels) {
      channels = *held(e);
      binding.push_back(e);
    }
  } else {
    cap(pick("NCCL_MAX_NCHANNELS", "NCCL_MAX_NRINGS"));
  }
  cap(get("NCCL_MAX_CTAS"));
  if (!nvls) raise(pick("NCCL_MIN_NCHANNELS", "NCCL_MIN_NRINGS"));
  raise(get("NCCL_MIN_CTAS"));
  if (channels == by_default || binding.empty()) return;
  std::string settings;
  for (const NcclTestsRow::EnvSaid* e : binding)
    settings += fmt::format("{}{}={} ({})", settings.empty() ? "" : ", ", e->variable, e->value, e->at);
  throw InputError(m.log->source, row_place(*m.row),
                   fmt::format("{}: NCCL ran {} of {} ranks on {} host(s) ({}) on {} channel(s), where it runs {} "
                               "by default; a table of this run would stand for collectives on other channels, and "
                               "SMs, than any simulation runs: measure without that setting",
                               settings, to_string(m.key.op), m.key.ranks, m.key.nodes,
                               collectives::to_string(choice.algorithm), channels, by_default));
}
}  // namespace

namespace {

// nccl-tests' programs, less their "_perf" suffix.
constexpr std::pair<const char*, CollOp> kTests[] = {
    {"all_reduce", CollOp::allreduce}, {"all_gather", CollOp::allgather}, {"reduce_scatter", CollOp::reducescatter},
    {"broadcast", CollOp::broadcast},  {"alltoall", CollOp::alltoall},    {"sendrecv", CollOp::sendrecv},
    {"reduce", CollOp::reduce}};

}  // namespace

std::string nccl_algo_name(Algorithm a) {
  switch (a) {
    case Algorithm::ring:
      return "Ring";
    case Algorithm::tree:
      return "Tree";
    case Algorithm::nvls:
      return "NVLS";
    case Algorithm::nvls_tree:
      return "NVLSTree";
    case Algorithm::collnet:
      return "CollnetDirect";
    case Algorithm::pat:
      return "PAT";
    case Algorithm::automatic:
    case Algorithm::direct:
      break;
  }
  return {};
}

std::string nccl_proto_name(Protocol p) {
  switch (p) {
    case Protocol::ll:
      return "LL";
    case Protocol::ll128:
      return "LL128";
    case Protocol::simple:
      return "Simple";
    case Protocol::automatic:
      break;
  }
  return {};
}

namespace {

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

template <class E, class NcclName>
std::optional<E> named(const std::string& name, E last, NcclName nccl_name) {
  const std::string n = lowercase(name);
  for (int i = 0; i <= static_cast<int>(last); ++i) {
    const auto e = static_cast<E>(i);
    if (n == collectives::to_string(e) || (!nccl_name(e).empty() && n == lowercase(nccl_name(e)))) return e;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Algorithm> algorithm_named(const std::string& name) {
  return named(name, Algorithm::direct, nccl_algo_name);
}

std::optional<Protocol> protocol_named(const std::string& name) {
  return named(name, Protocol::simple, nccl_proto_name);
}

std::string nccl_test_program(CollOp op) {
  for (const auto& [prefix, o] : kTests)
    if (o == op) return std::string(prefix) + "_perf";
  return "sendrecv_perf";
}

CollOp op_of_test(const std::string& test, const std::string& source) {
  std::string name = test.substr(test.find_last_of('/') + 1);
  // nccl-tests built with MPI=1 appends "_mpi" to the program's name: all_reduce_perf_mpi.
  if (name.ends_with("_mpi")) name.resize(name.size() - 4);
  if (name.ends_with("_perf")) name.resize(name.size() - 5);
  for (const auto& [prefix, op] : kTests)
    if (name == prefix) return op;
  for (int i = 0; i <= static_cast<int>(CollOp::sendrecv); ++i)
    if (name == to_string(static_cast<CollOp>(i))) return static_cast<CollOp>(i);
  throw InputError(source, "",
                   fmt::format("test '{}' is not a collective stepsim models (all_reduce_perf, all_gather_perf, "
                               "reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf, sendrecv_perf)",
                               test));
}

Calibration import_nccl_tests(const std::vector<NcclTestsLog>& logs, const ImportOverrides& o) {
  Calibration c;
  std::map<ShapeKey, std::map<double, std::vector<double>>> tables;
  std::vector<Measurement> measured;
  std::string first_gpu_log, first_gpu_at;  // the first log that names its GPU, and where
  for (const auto& [setting, value] : {std::pair{&kAlgorithm, &o.algorithm}, {&kProtocol, &o.protocol}})
    if (!value->empty() && !setting->table_name(*value))
      throw InputError("<command line>", setting->flag,
                       fmt::format("expected one {}, NCCL's name or stepsim's ({}, or auto for NCCL's own choice), "
                                   "got '{}'",
                                   setting->what, setting->names, *value));
  for (const NcclTestsLog& log : logs) {
    c.provenance.sources.push_back(log.source);
    const NcclTestsHeader& h = log.header;
    if (c.provenance.host.empty()) c.provenance.host = h.host;
    if (c.provenance.nccl.empty()) c.provenance.nccl = h.nccl;
    if (c.provenance.command.empty()) c.provenance.command = h.command;
    if (log.rows.empty()) throw InputError(log.source, "", "expected nccl-tests result rows, found none");
    std::size_t usable = 0;
    for (const NcclTestsRow& row : log.rows) {
      check_not_wrong(log, row);
      check_flags(log, row, o);
      // Each test of a file names its own GPU (a file may be several runs one after another).
      if (!row.gpu.empty()) {
        if (!o.gpu.empty() && !(gpu_matches(o.gpu, row.gpu) && gpu_matches(row.gpu, o.gpu)))
          contradicts(log, row.gpu_at, fmt::format("--gpu '{}'", o.gpu), fmt::format("the GPU is '{}'", row.gpu),
                      "which GPU ran");
        if (c.provenance.gpu.empty()) {
          c.provenance.gpu = row.gpu;
          first_gpu_log = log.source;
          first_gpu_at = row.gpu_at;
        } else if (row.gpu != c.provenance.gpu) {
          throw InputError(
              log.source, row.gpu_at,
              fmt::format("ran on {}, but {} ran on {}: a calibration file holds one GPU's "
                          "measurements (import each GPU's logs into a file of its own)",
                          row.gpu, first_gpu_log == log.source ? first_gpu_at : first_gpu_log, c.provenance.gpu));
        }
      }
      const std::string test = !o.op.empty() ? o.op : row.test;
      if (test.empty())
        throw InputError(log.source, row_place(row),
                         "the log does not say which test printed this row (no '# Collective test starting' line); "
                         "give --op");
      const int ranks = o.ranks > 0 ? o.ranks : row.ranks;
      if (ranks < 1)
        throw InputError(log.source, row_place(row), "the log does not say how many ranks ran the test; give --ranks");
      if (!row.uneven_hosts.empty())
        throw InputError(log.source, row_place(row),
                         fmt::format("the ranks are spread unevenly over the hosts ({}); stepsim's communicators have "
                                     "as many ranks on every node: measure with as many GPUs on each host",
                                     row.uneven_hosts));
      const int nodes = o.nodes > 0 ? o.nodes : std::max(1, row.nodes);
      if (ranks % nodes != 0)
        throw InputError(log.source, row_place(row),
                         fmt::format("{} ranks do not spread evenly over {} nodes", ranks, nodes));
      // The out-of-place half, unless nccl-tests did not run it (a replay row's, -J's null: no
      // time; the reader refuses a time of 0 for bytes). A row of no bytes is no measurement.
      const NcclTestsResult& r = row.out_of_place.time > Time::zero() ? row.out_of_place : row.in_place;
      if (!(r.time > Time::zero()) || row.size.count() <= 0) continue;
      if (!is_nccl_type(row.type))
        throw InputError(log.source, row_place(row),
                         fmt::format("data type '{}' is none of nccl-tests' (float, bfloat16, half, ...)", row.type));
      if (!o.dtype.empty() && row.type != o.dtype) continue;
      const CollOp op = op_of_test(test, log.source);
      check_count(log, row, op, ranks);
      std::string algorithm = run_setting(log, kAlgorithm, op, o.algorithm, row.nccl_algo, row.nccl_algo_at);
      std::string protocol = run_setting(log, kProtocol, op, o.protocol, row.nccl_proto, row.nccl_proto_at);
      // Sends and receives run as NCCL chooses whatever NCCL_ALGO and NCCL_PROTO say.
      if (point_to_point(op)) {
        algorithm.clear();
        protocol.clear();
      }
      measured.push_back({&log,
                          &row,
                          {op, ranks, nodes, row.type, std::move(algorithm), std::move(protocol)},
                          row.size.as_double(),
                          // The printed microseconds to the last digit: ps x 1e-6 is an ulp off
                          // (39.06 would be written 39.059999999999995), ps / 1e6 is not.
                          static_cast<double>(r.time.ps()) / 1e6,
                          o.nodes > 0 || row.nodes > 0});
      ++usable;
    }
    if (usable == 0)
      throw InputError(log.source, "",
                       o.dtype.empty()
                           ? fmt::format("no row has a size and a time above zero ({} row(s) read); nothing to "
                                         "calibrate",
                                         log.rows.size())
                           : fmt::format("no row of type {} has a size and a time above zero ({} row(s) read)", o.dtype,
                                         log.rows.size()));
  }
  if (!o.gpu.empty()) c.provenance.gpu = o.gpu;
  if (c.provenance.gpu.empty())
    throw InputError(logs.empty() ? "<command line>" : logs.front().source, "",
                     "the logs do not name the GPU (no '#  Rank ... device' line); give --gpu NAME");
  // Checked against the fastest links any cluster with this GPU has; an unknown GPU is
  // checked when the file is applied to a cluster.
  const std::optional<ClusterSpec> cluster = fastest_cluster_with(c.provenance.gpu);
  // Where neither the log nor --nodes says the hosts, the ranks ran on one: more ranks than a
  // host of this GPU holds did not, and would be taken for one NVLink domain of them all.
  const int host_gpus = most_gpus_per_host(c.provenance.gpu);
  for (const Measurement& m : measured) {
    if (!m.nodes_said && host_gpus > 0 && m.key.ranks > host_gpus)
      throw InputError(m.log->source, row_place(*m.row),
                       fmt::format("{} ranks ran the test, more than a host of {} holds ({} GPUs), and the log does "
                                   "not say on how many hosts: give --nodes",
                                   m.key.ranks, c.provenance.gpu, host_gpus));
    check_environment(m, cluster);
    if (cluster) {
      check_runnable(*cluster, m, o, c.provenance.gpu);
      check_channels(*cluster, m);
      check_within_links(*cluster, m.key.op, m.key.ranks, m.key.nodes, m.bytes, m.us, m.log->source, row_place(*m.row));
    }
    tables[m.key][m.bytes].push_back(m.us);
  }
  for (const auto& [key, sizes] : tables) {
    CollectiveTable t;
    t.op = key.op;
    t.ranks = key.ranks;
    t.nodes = key.nodes;
    t.ranks_per_node = key.ranks / key.nodes;
    t.dtype = key.type;
    t.algorithm = key.algorithm;
    t.protocol = key.protocol;
    for (const auto& [bytes, times] : sizes) {
      double sum = 0;
      for (double x : times) sum += x;
      t.points.push_back({bytes, sum / static_cast<double>(times.size())});
    }
    t.fit = fit_alpha_beta(t.points, t.op, t.ranks, 0.0);
    c.collectives.push_back(std::move(t));
  }
  c.provenance.gpu_count = 0;
  for (const auto& t : c.collectives) c.provenance.gpu_count = std::max(c.provenance.gpu_count, t.ranks_per_node);
  return c;
}

}  // namespace stepsim::calibration
