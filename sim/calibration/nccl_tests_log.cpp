// nccl-tests table rows: `size count type redop root | time algbw busbw #wrong | time algbw
// busbw #wrong` (current) or the same without root and with a float error (before mid-2022),
// optionally followed by per-iteration statistics (-I) or a timestamp (-S); the header lines
// that name the test, the devices and the hosts; and the JSON file that -J writes.
#include "calibration/nccl_tests_log.hpp"

#include "calibration/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "io/json_document.hpp"
#include "stepsim/error.hpp"
#include "stepsim/text.hpp"

namespace stepsim::calibration {
namespace {

constexpr const char* kLayout = "size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong";

// A half that moved bytes in no time is faster than any link carries them, as a too-fast time
// is; nccl-tests leaves a half it did not run blank (or null in -J), and prints #wrong N/A.
std::string zero_time(long long size, const std::string& column) {
  return fmt::format(
      "a time of 0 us for {} B{} is faster than any link carries the bytes; expected a time above 0 us "
      "(nccl-tests leaves out a half it did not run)",
      size, column.empty() ? "" : " (" + column + ")");
}

// A run with -C 1 prints, in place of each half's time, the host's time to enqueue the timed
// collectives (common.cu: cputimeSec, taken before completeColl), a few microseconds whatever
// the size; its algbw and busbw still come from the collectives' own time.
std::string cpu_time_said(const std::string& column) {
  return fmt::format(
      "the time column is {}: nccl-tests -C 1 prints the host's time to enqueue the collectives there, not how "
      "long they take; expected a run without -C (or with -C 0)",
      column);
}

struct LineReader {
  const std::string& source;
  int line;
  const std::vector<std::string>& tokens;

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(source, fmt::format("line {}", line), what);
  }

  template <class T>
  T number(std::size_t i, const char* column) const {
    const std::string& t = tokens[i];
    T value{};
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
    if (ec != std::errc() || end != t.data() + t.size())
      fail(fmt::format("expected a number for {} (column {}), got '{}'", column, i + 1, t));
    return value;
  }

  // One half of a row of `size` bytes, from its time column `first` on.
  NcclTestsResult result(std::size_t first, long long size) const {
    NcclTestsResult r;
    const double us = number<double>(first, "time");
    // Beyond a day a row is not a measurement of one collective, and beyond 106 days it
    // would not fit in the simulator's time.
    if (!(us >= 0 && us <= 86400e6)) fail(fmt::format("expected a time from 0 to 86400000000 us, got {}", us));
    if (us == 0 && size > 0) fail(zero_time(size, fmt::format("column {}", first + 1)));
    r.time = Time::from_us(us);
    r.algbw = Bandwidth::gbytes_per_s(number<double>(first + 1, "algbw"));
    r.busbw = Bandwidth::gbytes_per_s(number<double>(first + 2, "busbw"));
    if (tokens[first + 3] != "N/A") r.wrong = number<double>(first + 3, "#wrong");
    return r;
  }
};

std::vector<std::string> split(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

// mpirun prefixes such as "[0]" or "[1,0]<stdout>:" come before the row.
void drop_mpi_prefix(std::vector<std::string>& tokens) {
  while (!tokens.empty() && tokens.front().front() == '[') {
    const auto close = tokens.front().find(']');
    const std::string rest = close == std::string::npos ? "" : tokens.front().substr(close + 1);
    const bool tag_only = rest.empty() || rest.back() == ':';
    if (!tag_only) return;
    tokens.erase(tokens.begin());
  }
}

// `-S` appends "YYYY-MM-DD HH:MM:SS" to each row.
void drop_timestamp(std::vector<std::string>& tokens) {
  static const std::regex date(R"(\d{4}-\d{2}-\d{2})"), clock(R"(\d{2}:\d{2}:\d{2})");
  const std::size_t n = tokens.size();
  if (n >= 2 && std::regex_match(tokens[n - 2], date) && std::regex_match(tokens[n - 1], clock)) tokens.resize(n - 2);
}

bool is_number(const std::string& t) {
  double value = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  return ec == std::errc() && end == t.data() + t.size();
}

NcclTestsRow parse_row(const LineReader& r) {
  const std::size_t n = r.tokens.size();
  // 13 current, 12 legacy, 21 current with per-iteration statistics (4 more per half), 9 a
  // replay row without its out-of-place half; 11 legacy without an operation, as the tests
  // that reduce nothing (all_gather_perf, alltoall_perf, sendrecv_perf) printed their rows
  // before mid-2022, an empty operation and root leaving no column. An 11-column row with text
  // in its fourth column (an operation) is a longer row cut short.
  const bool no_redop = n == 11 && is_number(r.tokens[3]);
  if (n != 9 && !no_redop && n != 12 && n != 13 && n != 21)
    r.fail(
        fmt::format("expected an nccl-tests row of 12 or 13 columns ({}), or 11 (legacy, no redop), 9 (in-place "
                    "only) or 21 (with per-iteration statistics), got {} column(s)",
                    kLayout, n));
  const bool root = !no_redop && n != 12;
  const bool redop = !no_redop;
  NcclTestsRow row;
  row.legacy = !root;
  // As the JSON log's bounds: a size or count below zero is no measurement, and beyond a TiB no
  // one GPU's buffer.
  constexpr long long kMaxBytes = 1LL << 40;
  const long long size = r.number<long long>(0, "size");
  if (size < 0 || size > kMaxBytes) r.fail(fmt::format("expected a size from 0 to {} bytes, got {}", kMaxBytes, size));
  row.size = Bytes(size);
  row.count = r.number<long long>(1, "count");
  if (row.count < 0 || row.count > kMaxBytes)
    r.fail(fmt::format("expected an element count from 0 to {}, got {}", kMaxBytes, row.count));
  row.type = r.tokens[2];
  if (redop) row.redop = r.tokens[3];
  if (root) row.root = r.number<int>(4, "root");
  const std::size_t first = root ? 5 : redop ? 4 : 3;
  const std::size_t half = n == 21 ? 8 : 4;
  if (n == 9) {
    row.in_place = r.result(first, size);
  } else {
    row.out_of_place = r.result(first, size);
    row.in_place = r.result(first + half, size);
  }
  return row;
}

// What the header says about the test now being printed.
struct Section {
  std::string test;
  int ranks_per_process = 0;
  int max_rank = -1;
  std::map<std::string, std::set<int>> hosts;  // the ranks on each host
  std::size_t host_ranks = 1;  // ranks each of those stands for (in -J, a process's first rank: its process's)
  int declared_ranks = 0;  // "-g 8" or "8x GPU" in a comment of a rows-only file
  int declared_nodes = 0;
  // Where each was said, for the command line's flags to be checked against: the test's line;
  // the device lines (first and last); the "8x GPU" count of the run's GPUs and its line; one
  // process's ranks (nThread x nGpus, else -g) and its line; "one node"'s line. JSON: pointers.
  std::string test_at;
  int first_device_line = 0, last_device_line = 0;
  std::string devices_at;
  int gpus_said = 0;
  std::string gpus_at;
  int process_ranks = 0;
  std::string process_ranks_at;
  std::string one_node_at;
  std::string gpu, gpu_at;                                         // the device name the header gives, and where
  std::string nccl_algo, nccl_algo_at, nccl_proto, nccl_proto_at;  // NCCL_ALGO, NCCL_PROTO as NCCL said them
  std::vector<NcclTestsRow::EnvSaid> nccl_env;                     // the first of each variable NCCL said
  bool has_rows = false;                                           // a row has come since the header began
  std::string cputime_at;  // where the table header names its time column "cputime" (-C 1)

  // The rank count the header gives exactly, and where: its devices', else its GPU count.
  std::pair<int, std::string> ranks_said() const {
    if (max_rank >= 0) return {max_rank + 1, devices_place()};
    return {gpus_said, gpus_at};
  }
  std::string devices_place() const {
    if (!devices_at.empty()) return devices_at;
    if (first_device_line == last_device_line) return fmt::format("line {}", first_device_line);
    return fmt::format("lines {}-{}", first_device_line, last_device_line);
  }
  std::string nodes_at() const { return !hosts.empty() ? devices_place() : declared_nodes > 0 ? one_node_at : ""; }

  int ranks() const { return max_rank >= 0 ? max_rank + 1 : declared_ranks > 0 ? declared_ranks : ranks_per_process; }
  int nodes() const { return !hosts.empty() ? static_cast<int>(hosts.size()) : declared_nodes; }
  // "8 on a, 4 on b" when the hosts hold different numbers of ranks; "" when even.
  std::string uneven_hosts() const {
    if (hosts.empty()) return "";
    const auto [fewest, most] = std::minmax_element(
        hosts.begin(), hosts.end(), [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    if (fewest->second.size() == most->second.size()) return "";
    return fmt::format("{} on {}, {} on {}", most->second.size() * host_ranks, most->first,
                       fewest->second.size() * host_ranks, fewest->first);
  }
};

// What the section's header says of its rows, and where.
void said_in(const Section& s, NcclTestsRow& row) {
  row.test = s.test;
  row.test_at = s.test_at;
  row.ranks = s.ranks();
  std::tie(row.ranks_said, row.ranks_at) = s.ranks_said();
  row.process_ranks = s.process_ranks;
  row.process_ranks_at = s.process_ranks_at;
  row.nodes = s.nodes();
  row.nodes_at = s.nodes_at();
  row.uneven_hosts = s.uneven_hosts();
  row.gpu = s.gpu;
  row.gpu_at = s.gpu_at;
  row.nccl_algo = s.nccl_algo;
  row.nccl_algo_at = s.nccl_algo_at;
  row.nccl_proto = s.nccl_proto;
  row.nccl_proto_at = s.nccl_proto_at;
  row.nccl_env = s.nccl_env;
}

// The GPU a section's header names: the section's, and the file's where it is the first named.
// One run's ranks all name one GPU (as gpu_matches tells the names apart: a header's "8x NVIDIA
// H100" and its devices' "NVIDIA H100 80GB HBM3" are one); a run of mixed GPUs is refused, naming
// both and where each was said.
void gpu_said(Section& s, NcclTestsHeader& h, const std::string& name, const std::string& at,
              const std::string& source) {
  if (!s.gpu.empty() && !gpu_matches(name, s.gpu))
    throw InputError(source, at,
                     fmt::format("names the GPU '{}', but {} names '{}' in the same run: a log holds one GPU's "
                                 "measurements (import each GPU's runs on their own)",
                                 name, s.gpu_at, s.gpu));
  if (s.gpu.empty()) {
    s.gpu = name;
    s.gpu_at = at;
  }
  if (h.gpu.empty()) {
    h.gpu = name;
    h.gpu_at = at;
  }
}

std::string nccl_version_of_code(long code) {
  if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, code / 100 % 10, code % 100);
}

// A count in a header line (the digits a pattern matched), from 0 to `max`: anything larger is
// no nccl-tests header, and would overflow what it is multiplied into.
long header_count(const std::ssub_match& digits, long max, const char* what, const std::string& source, int line) {
  const std::string t = digits.str();
  long value = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec != std::errc() || end != t.data() + t.size() || value > max) {
    const std::string shown =
        t.size() <= 20 ? fmt::format("'{}'", t) : fmt::format("'{}…' ({} digits)", t.substr(0, 20), t.size());
    throw InputError(source, fmt::format("line {}", line),
                     fmt::format("expected {} from 0 to {}, got {}", what, max, shown));
  }
  return value;
}

// A launcher option's value in `options` ("-np 8", "--ntasks=16"), 0 where it is not given.
long launcher_option(const std::string& options, const std::regex& option, const char* what, const std::string& source,
                     int line) {
  std::smatch m;
  if (!std::regex_search(options, m, option)) return 0;
  return header_count(m[1], 16'777'216, what, source, line);
}

// A comment that gives the run's command line with its launcher, "# mpirun -np 8 all_reduce_perf
// -g 1", says the communicator: the launcher's processes (-np; srun's -n, or -N nodes of
// --ntasks-per-node) times each one's ranks (-t threads of -g GPUs), 8 here, where -g alone
// would say one process's; and the nodes where it says them (srun's -N, mpirun's -np over its
// -N per node). Only the launcher's options before the program count (nccl-tests' own -n is
// its iteration count).
void launched_ranks(const std::string& text, const std::string& source, int line, Section& s) {
  static const std::regex launcher(R"((?:^|[\s#])(mpirun|mpiexec|orterun|srun)\s+(.*?)\S*_perf\b)");
  static const std::regex processes(R"((?:^|\s)(?:-np|-n|--np|--ntasks)(?:\s+|=)(\d+))");
  static const std::regex mpi_per_node(R"((?:^|\s)(?:-N|-npernode|--npernode)(?:\s+|=)(\d+))");
  static const std::regex srun_per_node(R"((?:^|\s)--ntasks-per-node(?:\s+|=)(\d+))");
  static const std::regex srun_nodes(R"((?:^|\s)(?:-N|--nodes)(?:\s+|=)(\d+))");
  static const std::regex gpus_flag(R"(\s-g\s+(\d+))"), threads_flag(R"(\s-t\s+(\d+))");
  std::smatch m;
  if (s.declared_ranks != 0 || !std::regex_search(text, m, launcher)) return;
  const bool srun = m[1] == "srun";
  const std::string options = m[2];
  const long per_node =
      launcher_option(options, srun ? srun_per_node : mpi_per_node, "processes per node", source, line);
  long nodes = srun ? launcher_option(options, srun_nodes, "nodes", source, line) : 0;
  long processes_n = launcher_option(options, processes, "the launcher's process count", source, line);
  if (processes_n == 0) processes_n = nodes * per_node;
  if (processes_n == 0) return;
  if (!srun && per_node > 0 && processes_n % per_node == 0) nodes = processes_n / per_node;
  long per_process = 1;
  if (std::regex_search(text, m, gpus_flag))
    per_process *= header_count(m[1], 4096, "-g (GPUs per thread)", source, line);
  if (std::regex_search(text, m, threads_flag)) per_process *= header_count(m[1], 4096, "-t (threads)", source, line);
  constexpr long kMost = 16'777'216;
  if (processes_n * per_process > kMost)
    throw InputError(
        source, fmt::format("line {}", line),
        fmt::format("expected a run of at most {} ranks, got {} processes of {}", kMost, processes_n, per_process));
  const std::string here = fmt::format("line {}", line);
  s.declared_ranks = static_cast<int>(processes_n * per_process);
  s.process_ranks = static_cast<int>(per_process);
  s.process_ranks_at = here;
  if (s.gpus_said == 0) {
    s.gpus_said = s.declared_ranks;
    s.gpus_at = here;
  }
  if (nodes > 0 && s.declared_nodes == 0) {
    s.declared_nodes = static_cast<int>(nodes);
    s.one_node_at = here;
  }
}

void read_header_line(const std::string& text, const std::string& source, int line, Section& s, NcclTestsHeader& h) {
  const auto count = [&](const std::ssub_match& digits, long max, const char* what) {
    return static_cast<int>(header_count(digits, max, what, source, line));
  };
  static const std::regex starting(R"(Collective test starting:\s*(\S+))");
  static const std::regex threads(R"(nThread\s+(\d+)\s+nGpus\s+(\d+))");
  // "#  Rank  0 Group  0 Pid ..." since nccl-tests 2.13 (2022); "#   Rank  0 Pid ..." before.
  static const std::regex device(
      R"(Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.+\S))");
  static const std::regex library(R"(nccl-library=(\d+))");
  static const std::regex perf(R"((\S*_perf)\b(.*))");
  static const std::regex gpus_flag(R"(\s-g\s+(\d+))");
  static const std::regex count_x(R"((\d+)\s*x\s+((?:NVIDIA\s+)?[A-Za-z][\w-]*))");
  static const std::regex nccl_said(R"(NCCL\s+(\d+\.\d+\.\d+))");
  // nccl-tests writes header lines of a few hundred characters. std::regex matches by
  // recursion, a level per character, so a megabyte-long comment line would exhaust the
  // stack: such a line is no header, and is skipped like any other comment.
  constexpr std::size_t kMaxHeaderLine = 4096;
  if (text.size() > kMaxHeaderLine) return;
  std::smatch m;
  const std::string here = fmt::format("line {}", line);
  if (std::regex_search(text, m, starting)) {
    s = Section{};
    s.test = m[1];
    s.test_at = here;
    return;
  }
  // "# Collective test concluded: all_gather_perf" ends a test; it starts none.
  if (text.find("Collective test concluded") != std::string::npos) return;
  if (std::regex_search(text, m, threads)) {
    s.ranks_per_process = count(m[1], 4096, "nThread") * count(m[2], 4096, "nGpus");
    s.process_ranks = s.ranks_per_process;
    s.process_ranks_at = here;
    return;
  }
  if (std::regex_search(text, m, device)) {
    const int rank = count(m[1], 16'777'215, "a rank");
    s.max_rank = std::max(s.max_rank, rank);
    s.hosts[m[2]].insert(rank);
    if (s.first_device_line == 0) s.first_device_line = line;
    s.last_device_line = line;
    if (h.host.empty()) h.host = m[2];
    gpu_said(s, h, m[3], here, source);
    return;
  }
  if (std::regex_search(text, m, library)) {
    h.nccl = nccl_version_of_code(header_count(m[1], 99'999'999, "an NCCL version code", source, line));
    return;
  }
  // Files that keep only the rows say what ran in a comment: "# all_reduce_perf -b 8 -g 8 on
  // one node with 8x NVIDIA A100-SXM4-80GB". After rows, such a comment is the header of the
  // next test (logs of several runs, one after another), which says what it ran afresh.
  const bool names_test = std::regex_search(text, m, perf);
  if (names_test && s.has_rows) s = Section{};
  if (names_test && s.test.empty()) {
    s.test = m[1];
    s.test_at = here;
    if (h.command.empty()) h.command = m[1].str() + m[2].str();
  }
  launched_ranks(text, source, line, s);
  if (std::regex_search(text, m, gpus_flag) && s.declared_ranks == 0) {
    s.declared_ranks = count(m[1], 4096, "-g (GPUs per thread)");
    if (s.process_ranks == 0) {
      s.process_ranks = s.declared_ranks;
      s.process_ranks_at = here;
    }
  }
  if (std::regex_search(text, m, count_x)) {
    const int gpus = count(m[1], 16'777'216, "a GPU count");
    if (s.declared_ranks == 0) s.declared_ranks = gpus;
    if (s.gpus_said == 0) {
      s.gpus_said = gpus;
      s.gpus_at = here;
    }
    gpu_said(s, h, m[2], here, source);
  }
  // The table header of a run with -C 1: its time columns are the host's, not the collectives'.
  static const std::regex cputime(R"(\bsize\b.*\bcputime\b)");
  if (std::regex_search(text, cputime)) s.cputime_at = here;
  if (text.find("one node") != std::string::npos && s.declared_nodes == 0) {
    s.declared_nodes = 1;
    s.one_node_at = here;
  }
  if (std::regex_search(text, m, nccl_said) && h.nccl.empty()) h.nccl = m[1];
}

// NCCL's own lines, which nccl-tests' output carries beside its table (NCCL writes them to the
// same stdout): the version, "NCCL version 2.19.3+cuda12.2" (init.cc, from NCCL_DEBUG=VERSION
// up), and NCCL_DEBUG's lines as debug.cc writes them, "host:pid:tid [dev] NCCL INFO ...",
// "host:pid:tid [dev] file:line (func) NCCL WARN ...", "host:pid:tid [dev] ms func:line NCCL
// TRACE ..." and "host:pid:tid NCCL CALL ...", after a timestamp where NCCL_DEBUG_TIMESTAMP_LEVELS
// asks for one (its default format "[%F %T] ", on WARN lines by default since NCCL 2.26). An
// mpirun tag may come first, glued to the host ("[1,0]<stdout>:host:..."). Returns whether
// `text` is one, and the version in `version` when it says it; NCCL_ALGO or NCCL_PROTO set by
// the environment ("NCCL INFO NCCL_ALGO set by environment to Ring") in `section`. Only the
// start of a line is matched: a line of NCCL's is a kilobyte at most, and std::regex recurses
// a level per character.
bool nccl_own_line(const std::string& text, int line, std::string& version, Section& section) {
  static const std::regex tag(R"(^\s*(?:\[\d+(?:,\d+)*\](?:<std(?:out|err)>)?:?\s*)*)");
  static const std::regex version_line(
      R"((?:\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\] )?NCCL version (\d+\.\d+\.\d+)\S*\s*)");
  static const std::regex debug_line(
      R"((?:\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\] )?[^\s:\[]+:\d+:\d+ )"
      R"((?:\[\d+\] (?:NCCL INFO|\S+:\d+ (?:\(\S+\) )?NCCL WARN|\d+(?:\.\d+)? \S+:\d+ NCCL TRACE)|NCCL CALL)(?:\s|$))");
  static const std::regex version_said(R"(NCCL INFO NCCL version (\d+\.\d+\.\d+))");
  const std::string start = text.substr(0, 512);
  std::smatch m;
  std::regex_search(start, m, tag);
  const std::string rest = start.substr(static_cast<std::size_t>(m.length(0)));
  if (std::regex_match(rest, m, version_line)) {
    version = m[1];
    return true;
  }
  if (!std::regex_search(rest, m, debug_line, std::regex_constants::match_continuous)) return false;
  if (std::regex_search(rest, m, version_said)) version = m[1];
  static const std::regex forced(R"(NCCL INFO (NCCL_ALGO|NCCL_PROTO) set by environment to (\S+))");
  if (std::regex_search(rest, m, forced)) {
    const bool algo = m[1] == "NCCL_ALGO";
    (algo ? section.nccl_algo : section.nccl_proto) = m[2];
    (algo ? section.nccl_algo_at : section.nccl_proto_at) = fmt::format("line {}", line);
  }
  // NCCL_PARAM's own line, "NCCL_IB_DISABLE set by environment to 1." (its value as strtoll
  // read it); each rank's process prints it, the first is kept. The transports switched off,
  // and the bounds on the channels NCCL runs (NCCL_MIN/MAX_NCHANNELS, their older names
  // NCCL_MIN/MAX_NRINGS, NCCL_MIN/MAX_CTAS, NCCL_NVLS_NCHANNELS).
  static const std::regex switched(
      R"(NCCL INFO (NCCL_NVLS_ENABLE|NCCL_IB_DISABLE|NCCL_P2P_DISABLE|NCCL_(?:MIN|MAX)_(?:NCHANNELS|NRINGS|CTAS))"
      R"(|NCCL_NVLS_NCHANNELS) set by environment to (-?\d{1,19})\b)");
  if (std::regex_search(rest, m, switched)) {
    const std::string variable = m[1];
    const bool known = std::any_of(section.nccl_env.begin(), section.nccl_env.end(),
                                   [&](const NcclTestsRow::EnvSaid& e) { return e.variable == variable; });
    // NCCL prints the value as a long long (%lld): 19 digits at most, which strtoll reads back
    // whole (a longer one saturates, as NCCL's own strtoll would have).
    const std::string digits = m[2];
    if (!known)
      section.nccl_env.push_back({variable, std::strtoll(digits.c_str(), nullptr, 10), fmt::format("line {}", line)});
  }
  return true;
}

// ---- JSON (-J) ----

namespace json = boost::json;

[[noreturn]] void json_fail(const std::string& source, const std::string& where, const std::string& what) {
  throw InputError(source, where, what);
}

double json_number(const json::object& o, const char* key, const std::string& source, const std::string& where) {
  const auto* v = o.if_contains(key);
  if (v == nullptr) json_fail(source, where, fmt::format("missing key '{}'", key));
  if (!v->is_number())
    json_fail(source, where + "/" + key, fmt::format("expected a number, got {}", io::describe_value(*v)));
  return v->to_number<double>();
}

// A count in the JSON (GPUs, a rank, bytes): a whole number from `lo` to `hi`, else an
// InputError naming its key; a fraction or a huge number is no count nccl-tests writes.
long long json_whole(const json::value& v, const std::string& source, const std::string& where, const char* what,
                     double lo, double hi) {
  if (!v.is_number()) json_fail(source, where, fmt::format("expected a number, got {}", io::describe_value(v)));
  const double x = v.to_number<double>();
  if (!(x >= lo && x <= hi && x == std::floor(x)))
    json_fail(source, where,
              fmt::format("expected {}, a whole number from {:.0f} to {:.0f}, got {:g}", what, lo, hi, x));
  return static_cast<long long>(x);
}

NcclTestsResult json_result(const json::value& v, const std::string& source, const std::string& where, long long size) {
  NcclTestsResult r;
  if (v.is_null()) return r;
  if (!v.is_object())
    json_fail(source, where, fmt::format("expected an object or null, got {}", io::describe_value(v)));
  const auto& o = v.get_object();
  if (o.contains("cpu_time")) json_fail(source, where + "/cpu_time", cpu_time_said("cpu_time"));
  const double us = json_number(o, "time", source, where);
  if (!(us >= 0 && us <= 86400e6))
    json_fail(source, where + "/time", fmt::format("expected a time from 0 to 86400000000 us, got {}", us));
  if (us == 0 && size > 0) json_fail(source, where + "/time", zero_time(size, ""));
  r.time = Time::from_us(us);
  r.algbw = Bandwidth::gbytes_per_s(json_number(o, "alg_bw", source, where));
  r.busbw = Bandwidth::gbytes_per_s(json_number(o, "bus_bw", source, where));
  if (const auto* w = o.if_contains("nwrong"); w != nullptr && w->is_number()) r.wrong = w->to_number<double>();
  return r;
}

// The devices of a -J log. nccl-tests writes one entry per process, its first rank's
// (util.cu: writeDeviceReport parses the first "#  Rank" line of each process's block), so a
// process of `process_ranks` GPUs (nThread x nGpus) holds the ranks from its entry's on: one
// process of -g 8 lists rank 0 alone, two on two hosts ranks 0 and 8. A list whose ranks are
// not all such first ranks lists each rank.
void json_devices(const json::array& list, int process_ranks, Section& s, NcclTestsHeader& header,
                  const std::string& source) {
  std::vector<int> ranks(list.size());
  bool per_process = process_ranks > 1;
  for (std::size_t i = 0; i < list.size(); ++i) {
    ranks[i] = static_cast<int>(i);  // a device without a rank is the list's i-th
    if (!list[i].is_object()) continue;
    const auto* r = list[i].get_object().if_contains("rank");
    if (r == nullptr || !r->is_number()) continue;
    ranks[i] =
        static_cast<int>(json_whole(*r, source, fmt::format("/config/devices/{}/rank", i), "a rank", 0, 16'777'215));
    per_process = per_process && ranks[i] % process_ranks == 0;
  }
  const int held = per_process ? process_ranks : 1;
  s.host_ranks = static_cast<std::size_t>(held);
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_object()) continue;
    const auto& dev = list[i].get_object();
    if (const auto* r = dev.if_contains("rank"); r != nullptr && r->is_number())
      s.max_rank = std::max(s.max_rank, ranks[i] + held - 1);
    if (const auto* host = dev.if_contains("hostname"); host != nullptr && host->is_string()) {
      s.hosts[std::string(host->get_string())].insert(ranks[i]);
      if (header.host.empty()) header.host = std::string(host->get_string());
    }
    if (const auto* info = dev.if_contains("device_info"); info != nullptr && info->is_string())
      gpu_said(s, header, std::string(info->get_string()), fmt::format("/config/devices/{}/device_info", i), source);
  }
}

NcclTestsLog parse_json_log(const std::string& text, const std::string& source) {
  const json::value doc = io::parse_json(text, source);
  if (!doc.is_object()) json_fail(source, "/", "expected the JSON object that nccl-tests -J writes");
  const auto& o = doc.get_object();
  NcclTestsLog log{source, {}, {}};
  Section s;
  if (const auto* args = o.if_contains("args"); args != nullptr && args->is_array() && !args->get_array().empty()) {
    for (const auto& a : args->get_array())
      if (a.is_string()) log.header.command += (log.header.command.empty() ? "" : " ") + std::string(a.get_string());
    const auto& first = args->get_array().front();
    if (first.is_string()) {
      const std::string prog(first.get_string());
      s.test = prog.substr(prog.find_last_of('/') + 1);
      s.test_at = "/args/0";
    }
  }
  if (const auto* v = o.if_contains("nccl_version"); v != nullptr && v->is_number())
    log.header.nccl = nccl_version_of_code(
        static_cast<long>(json_whole(*v, source, "/nccl_version", "an NCCL version code", 0, 99'999'999)));
  if (const auto* cfg = o.if_contains("config"); cfg != nullptr && cfg->is_object()) {
    const auto& c = cfg->get_object();
    // Threads times GPUs per thread, as the text header's "nThread 1 nGpus 8" says.
    const auto per_process = [&](const char* key, const char* what) {
      const auto* n = c.if_contains(key);
      if (n == nullptr || !n->is_number()) return 1LL;
      return json_whole(*n, source, fmt::format("/config/{}", key), what, 1, 4096);
    };
    const int process_ranks =
        static_cast<int>(per_process("ngpus", "GPUs per thread") * per_process("nthreads", "threads"));
    if (const auto* devices = c.if_contains("devices"); devices != nullptr && devices->is_array())
      json_devices(devices->get_array(), process_ranks, s, log.header, source);
    if (c.contains("ngpus") && s.max_rank < 0) s.ranks_per_process = process_ranks;
    if (c.contains("ngpus")) {
      s.process_ranks = process_ranks;
      s.process_ranks_at = "/config/ngpus";
    }
    s.devices_at = "/config/devices";
  }
  const auto* results = o.if_contains("results");
  if (results == nullptr || !results->is_array())
    json_fail(source, "/results", "expected the array of result rows that nccl-tests -J writes");
  const auto& rows = results->get_array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string where = fmt::format("/results/{}", i);
    if (!rows[i].is_object()) json_fail(source, where, "expected a result object");
    const auto& r = rows[i].get_object();
    NcclTestsRow row;
    json_number(r, "size", source, where);
    row.size = Bytes(json_whole(r.at("size"), source, where + "/size", "bytes", 0, 1099511627776.0));
    json_number(r, "count", source, where);
    row.count = json_whole(r.at("count"), source, where + "/count", "an element count", 0, 1099511627776.0);
    if (const auto* t = r.if_contains("type"); t != nullptr && t->is_string()) row.type = std::string(t->get_string());
    if (const auto* t = r.if_contains("redop"); t != nullptr && t->is_string())
      row.redop = std::string(t->get_string());
    if (const auto* t = r.if_contains("root"); t != nullptr && t->is_string()) {
      // nccl-tests pads the root to six characters: "    -1" for collectives without one.
      const std::string root(t->get_string());
      const auto b = root.find_first_not_of(' ');
      if (b != std::string::npos) {
        int value = 0;
        const auto [end, ec] = std::from_chars(root.data() + b, root.data() + root.size(), value);
        if (ec != std::errc() || end != root.data() + root.size() || value < -1 || value > 16'777'215)
          json_fail(source, where + "/root",
                    fmt::format("expected a root rank from -1 to 16777215, got {}", io::describe_value(*t)));
        row.root = value;
      }
    }
    if (const auto* v = r.if_contains("out_of_place"))
      row.out_of_place = json_result(*v, source, where + "/out_of_place", row.size.count());
    const auto* in = r.if_contains("in_place");
    if (in == nullptr) json_fail(source, where, "missing key 'in_place'");
    row.in_place = json_result(*in, source, where + "/in_place", row.size.count());
    said_in(s, row);
    row.result = static_cast<int>(i);
    log.rows.push_back(row);
  }
  return log;
}

}  // namespace

NcclTestsLog parse_nccl_tests(std::istream& in, const std::string& source) {
  std::ostringstream all;
  all << in.rdbuf();
  // A byte order mark first is no part of the first line (nor of a JSON log's first brace).
  const std::string text(without_bom(all.str()));
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return parse_json_log(text, source);

  NcclTestsLog log{source, {}, {}};
  Section section;
  std::istringstream lines(text);
  std::string line_text;
  for (int line = 1; std::getline(lines, line_text); ++line) {
    std::vector<std::string> tokens = split(line_text);
    drop_mpi_prefix(tokens);
    if (tokens.empty()) continue;
    if (tokens.front().front() == '#') {
      read_header_line(line_text, source, line, section, log.header);
      continue;
    }
    if (std::string version; nccl_own_line(line_text, line, version, section)) {
      if (log.header.nccl.empty()) log.header.nccl = version;
      continue;
    }
    drop_timestamp(tokens);
    NcclTestsRow row = parse_row(LineReader{source, line, tokens});
    if (!section.cputime_at.empty())
      throw InputError(source, fmt::format("line {}", line),
                       cpu_time_said(fmt::format("cputime, as the table header on {} names it", section.cputime_at)));
    section.has_rows = true;
    said_in(section, row);
    row.line = line;
    log.rows.push_back(row);
  }
  return log;
}

NcclTestsLog read_nccl_tests(const std::string& path) {
  std::istringstream in(read_measured_file(path, "nccl-tests log"));
  return parse_nccl_tests(in, measured_file_name(path));
}

}  // namespace stepsim::calibration
