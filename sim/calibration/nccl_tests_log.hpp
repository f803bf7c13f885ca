// Reading nccl-tests output (all_reduce_perf and friends): the table rows of current and
// legacy versions, with or without MPI rank prefixes, timestamps or per-iteration columns,
// several tests in one file, and the JSON output of `-J`.
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "stepsim/units.hpp"

namespace stepsim::calibration {

// One half of a row: out-of-place or in-place.
struct NcclTestsResult {
  Time time;
  Bandwidth algbw;
  Bandwidth busbw;
  std::optional<double> wrong;  // #wrong (current, a count) or error (legacy, the largest); empty for N/A
};

struct NcclTestsRow {
  Bytes size;  // nccl-tests S
  long long count = 0;
  std::string type;              // "float", "half", ...
  std::string redop;             // "sum", "none", ...
  int root = -1;                 // -1: unrooted, or the legacy layout without a root column
  NcclTestsResult out_of_place;  // time zero when the row has no out-of-place half
  NcclTestsResult in_place;
  std::string test;     // the test that printed it ("all_reduce_perf"), empty when not said
  int ranks = 0;        // ranks of the communicator, 0 when not said
  int nodes = 0;        // hosts the ranks ran on, 0 when not said
  std::string uneven_hosts;  // "8 on a, 4 on b" when the hosts hold different rank counts
  // What the header said of the row's test, ranks and nodes, and where ("line 3", "lines 5-12",
  // "/config/devices"): "" where it did not say. An exact rank count (its device lines, an
  // "8x GPU" count) or one process's ranks (nThread x nGpus, -g), which the count is a whole
  // multiple of (the processes are not said).
  std::string test_at;
  int ranks_said = 0;
  std::string ranks_at;
  int process_ranks = 0;
  std::string process_ranks_at;
  std::string nodes_at;  // where `nodes` was said
  // The GPU the row's test ran on, as its header names it, and where: each test of a file of
  // several says its own ("" where its header does not say).
  std::string gpu;
  std::string gpu_at;
  // What NCCL said its run was forced to ("NCCL INFO NCCL_ALGO set by environment to Ring",
  // NCCL_PROTO likewise), as NCCL spells it, and where: "" where it did not say.
  std::string nccl_algo, nccl_algo_at, nccl_proto, nccl_proto_at;
  // What NCCL said its environment switched off or on that changes how its collectives run
  // beyond the algorithm and protocol ("NCCL INFO NCCL_P2P_DISABLE set by environment to 1."):
  // NCCL_NVLS_ENABLE, NCCL_IB_DISABLE, NCCL_P2P_DISABLE and the bounds on its channels
  // (NCCL_MIN/MAX_NCHANNELS, NCCL_MIN/MAX_NRINGS, NCCL_MIN/MAX_CTAS, NCCL_NVLS_NCHANNELS), each
  // with its value and where.
  struct EnvSaid {
    std::string variable;
    long long value = 0;
    std::string at;
  };
  std::vector<EnvSaid> nccl_env;
  int line = 0;         // where the row is in its file (JSON: 0)
  int result = -1;      // JSON: its index in /results
  bool legacy = false;  // the layout before mid-2022: `wrong` is a numerical error, not a count
};

// What the header lines say about the run (empty or 0 when they do not say it).
struct NcclTestsHeader {
  std::string gpu;     // device name, "NVIDIA A100-SXM4-80GB", as the first test's header says it
  std::string gpu_at;  // where the header names it ("line 5", "/config/devices/0/device_info")
  std::string host;  // the first host
  std::string nccl;  // "2.19.3"
  std::string command;
};

struct NcclTestsLog {
  std::string source;
  std::vector<NcclTestsRow> rows;
  NcclTestsHeader header;
};

// A file may hold several tests, one after another: a full log's "# Collective test starting"
// line, or in a file that keeps only the rows, a comment naming an nccl-tests program after
// rows ("# all_gather_perf -b 8 ... with 8x NVIDIA H200"), starts a test of its own, whose rows
// take their test, ranks, nodes and GPU from its header alone.
// `source` names the input in errors ("file: line N: expected ...").
NcclTestsLog parse_nccl_tests(std::istream& in, const std::string& source);
NcclTestsLog read_nccl_tests(const std::string& path);

}  // namespace stepsim::calibration
