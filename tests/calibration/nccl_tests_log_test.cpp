// The nccl-tests log parser: current and legacy rows, N/A, MPI prefixes, and bad lines.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <sstream>

#include "calibration/nccl_tests_log.hpp"
#include "stepsim/error.hpp"

using stepsim::Bytes;
using stepsim::InputError;
using stepsim::Time;
using stepsim::calibration::parse_nccl_tests;

namespace {

stepsim::calibration::NcclTestsLog parse(const std::string& text) {
  std::istringstream in(text);
  return parse_nccl_tests(in, "log.txt");
}

}  // namespace

TEST_CASE("a current row gives size, count, type, redop, root and both halves") {
  const auto log = parse(
      "# nThread 1 nGpus 8 minBytes 8 maxBytes 4294967296 step: 2(factor) warmup iters: 5\n"
      "#  Rank  0 Group  0 Pid 1 on thanos device  0 [0x07] NVIDIA A100-SXM4-80GB\n"
      "1048576 262144 float sum -1 52.61 19.93 34.88 0 53.03 19.77 34.60 0\n"
      "# Avg bus bandwidth    : 61.3\n");
  REQUIRE(log.rows.size() == 1);
  const auto& row = log.rows[0];
  CHECK(row.size == Bytes(1048576));
  CHECK(row.count == 262144);
  CHECK(row.type == "float");
  CHECK(row.redop == "sum");
  CHECK(row.root == -1);
  CHECK(row.out_of_place.time.us() == Approx(52.61));
  CHECK(row.out_of_place.busbw.gbytes_per_s() == Approx(34.88));
  CHECK(row.in_place.algbw.gbytes_per_s() == Approx(19.77));
  CHECK(row.in_place.wrong == 0.0);
}

TEST_CASE("a legacy row has no root column and a float error column") {
  const auto log = parse("33554432 8388608 float sum 439.2 76.41 133.71 5e-07 441.9 75.94 132.89 5e-07\n");
  REQUIRE(log.rows.size() == 1);
  CHECK(log.rows[0].root == -1);
  CHECK(log.rows[0].out_of_place.busbw.gbytes_per_s() == Approx(133.71));
  CHECK(*log.rows[0].in_place.wrong == Approx(5e-7));
}

// Before mid-2022 the tests that reduce nothing printed no operation: all_gather_perf's
// print_line_header wrote "%12li  %12li  %6s" (size, count, type), later common.cu an empty
// operation and an empty root for -1, so its rows have 11 columns. 32 B of an 8-rank all-gather
// of floats is 1 element per rank (1 x 8 x 4 B).
TEST_CASE("a legacy row of a test without an operation has 11 columns") {
  const auto log = parse(
      "          32             1   float    29.42    0.00    0.00  0e+00    29.38    0.00    0.00  "
      "0e+00\n");
  REQUIRE(log.rows.size() == 1);
  const auto& row = log.rows[0];
  CHECK(row.size == Bytes(32));
  CHECK(row.count == 1);
  CHECK(row.type == "float");
  CHECK(row.redop.empty());
  CHECK(row.root == -1);
  CHECK(row.legacy);
  CHECK(row.out_of_place.time == Time::from_us(29.42));
  CHECK(row.in_place.time == Time::from_us(29.38));
  CHECK(*row.in_place.wrong == 0.0);
}

TEST_CASE("N/A in the wrong column leaves the count empty") {
  const auto log = parse("8 2 float none 0 10.0 0.00 0.00 N/A 9.0 0.00 0.00 N/A\n");
  REQUIRE(log.rows.size() == 1);
  CHECK(log.rows[0].redop == "none");
  CHECK(log.rows[0].root == 0);
  CHECK_FALSE(log.rows[0].out_of_place.wrong.has_value());
}

TEST_CASE("MPI rank prefixes before a row are skipped") {
  const auto log = parse(
      "[0] #  Rank  0 Group  0 Pid 1 on host device  0 [0x07] NVIDIA H100\n"
      "[0] 8589934592 2147483648 float sum -1 31517 272.55 476.96 0 31516 272.56 476.98 0\n"
      "[1,0]<stdout>: 1024 256 float sum -1 40.0 0.03 0.05 0 39.0 0.03 0.05 0\n");
  REQUIRE(log.rows.size() == 2);
  CHECK(log.rows[0].out_of_place.busbw.gbytes_per_s() == Approx(476.96));
  CHECK(log.rows[1].size == Bytes(1024));
}

TEST_CASE("a bad line names the file, the line and what was expected") {
  try {
    parse("# header\n1024 256 float sum -1 40.0 fast 0.05 0 39.0 0.03 0.05 0\n");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "log.txt: line 2: expected a number for algbw (column 7), got 'fast'");
  }
  try {
    parse("hello world\n");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "log.txt: line 1: expected an nccl-tests row of 12 or 13 columns (size count type redop [root] "
          "time algbw busbw #wrong time algbw busbw #wrong), or 11 (legacy, no redop), 9 (in-place only) or 21 "
          "(with per-iteration statistics), got 2 column(s)");
  }
}

TEST_CASE("the shipped A100 sweep parses into 30 rows") {
  const auto log = stepsim::calibration::read_nccl_tests(STEPSIM_TEST_DATA "/nccl-tests/a100-80g-8gpu-allreduce-a.txt");
  REQUIRE(log.rows.size() == 30);
  CHECK(log.rows.back().size == Bytes(4294967296LL));
  CHECK(log.rows.back().out_of_place.busbw.gbytes_per_s() == Approx(232.44));
}

TEST_CASE("a full log names the test, the ranks, the hosts, the GPU and the NCCL version") {
  const auto log = parse(
      "# nccl-tests version 2.13.8 nccl-headers=21903 nccl-library=21903\n"
      "# Collective test starting: all_gather_perf\n"
      "# nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
      "validation: 1 graph: 0\n"
      "#\n"
      "# Using devices\n"
      "#  Rank  0 Group  0 Pid  11 on     node-a device  0 [0000:07:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid  12 on     node-a device  1 [0000:0f:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  2 Group  0 Pid  13 on     node-b device  0 [0000:07:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  3 Group  0 Pid  14 on     node-b device  1 [0000:0f:00] NVIDIA H100 80GB HBM3\n"
      "#\n"
      "#                                                              out-of-place                       in-place\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
      "#wrong\n"
      "        1024            64     float    none      -1    30.11    0.03    0.03      0    29.80    0.03    0.03"
      "      0\n"
      "        2048           128     float    none      -1    31.02    0.07    0.05    N/A    30.50    0.07    0.05"
      "    N/A\n"
      "# Out of bounds values : 0 OK\n"
      "# Avg bus bandwidth    : 0.04\n"
      "#\n"
      "# Collective test concluded: all_gather_perf\n"
      "# Collective test starting: reduce_scatter_perf\n"
      "# nThread 1 nGpus 1 minBytes 1024 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20\n"
      "#  Rank  0 Group  0 Pid  11 on     node-a device  0 [0000:07:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid  12 on     node-a device  1 [0000:0f:00] NVIDIA H100 80GB HBM3\n"
      "        1024            64     float     sum      -1    25.00    0.04    0.03      0    24.00    0.04    0.03"
      "      0\n");
  REQUIRE(log.rows.size() == 3);
  CHECK(log.header.gpu == "NVIDIA H100 80GB HBM3");
  CHECK(log.header.host == "node-a");
  CHECK(log.header.nccl == "2.19.3");
  CHECK(log.rows[0].test == "all_gather_perf");
  CHECK(log.rows[0].ranks == 4);
  CHECK(log.rows[0].nodes == 2);
  CHECK_FALSE(log.rows[1].in_place.wrong.has_value());
  CHECK(log.rows[2].test == "reduce_scatter_perf");
  CHECK(log.rows[2].ranks == 2);
  CHECK(log.rows[2].nodes == 1);
}

TEST_CASE("a test header after rows starts a test of its own, with its own GPU and ranks") {
  const auto log = parse(
      "# all_reduce_perf -b 8 -e 8 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
      "8 2 float sum -1 40.0 0.00 0.00 0 39.0 0.00 0.00 0\n"
      "# all_gather_perf -b 8 -e 8 -g 2 on one node with 2x NVIDIA H200\n"
      "8 1 float none -1 30.0 0.00 0.00 0 29.0 0.00 0.00 0\n");
  REQUIRE(log.rows.size() == 2);
  CHECK(log.rows[0].test == "all_reduce_perf");
  CHECK(log.rows[0].ranks == 8);
  CHECK(log.rows[0].gpu == "NVIDIA A100-SXM4-80GB");
  CHECK(log.rows[0].gpu_at == "line 1");
  CHECK(log.rows[1].test == "all_gather_perf");
  CHECK(log.rows[1].test_at == "line 3");
  CHECK(log.rows[1].ranks == 2);
  CHECK(log.rows[1].gpu == "NVIDIA H200");
  CHECK(log.rows[1].gpu_at == "line 3");
  CHECK(log.header.gpu == "NVIDIA A100-SXM4-80GB");
}

TEST_CASE("timestamps, per-iteration statistics and replay rows are read") {
  const auto log = parse(
      "65536 16384 float sum -1 41.0 1.60 2.80 0 41.2 1.59 2.79 0 2026-11-30 12:00:01\n"
      "65536 16384 float sum -1 41.0 1.60 2.80 0 39.0 41.9 45.0 3.1 41.2 1.59 2.79 0 39.5 42.0 44.8 2.9\n"
      "65536 16384 float sum -1 41.2 1.59 2.79 0\n");
  REQUIRE(log.rows.size() == 3);
  CHECK(log.rows[0].in_place.time.us() == Approx(41.2));
  CHECK(log.rows[1].in_place.busbw.gbytes_per_s() == Approx(2.79));
  CHECK(log.rows[1].out_of_place.time.us() == Approx(41.0));
  CHECK(log.rows[2].out_of_place.time == stepsim::Time::zero());
  CHECK(log.rows[2].in_place.time.us() == Approx(41.2));
}

TEST_CASE("the JSON output of nccl-tests -J is read") {
  const auto log = parse(R"({"version":2,"start_time":"2026-11-30 12:00:00","args":["./build/all_reduce_perf","-b","8"],
    "env":[],"nccl_version":22703,"config":{"nthreads":1,"ngpus":8,"devices":[
      {"rank":0,"group":0,"pid":1,"hostname":"gpu01","device":0,"device_hex":"0000:18:00","device_info":"NVIDIA H200"},
      {"rank":7,"group":0,"pid":1,"hostname":"gpu01","device":7,"device_hex":"0000:db:00","device_info":"NVIDIA H200"}]},
    "results":[{"size":8,"count":2,"type":"float","redop":"sum","root":"    -1",
      "out_of_place":{"time":20.5,"alg_bw":0.0,"bus_bw":0.0,"nwrong":0.0},
      "in_place":{"time":20.1,"alg_bw":0.0,"bus_bw":0.0,"nwrong":null},"actual_iterations":20,"experiment_name":""},
      {"size":1024,"count":256,"type":"float","redop":"sum","root":"    -1","out_of_place":null,
      "in_place":{"time":21.0,"alg_bw":0.05,"bus_bw":0.09,"nwrong":0.0},"actual_iterations":20,"experiment_name":""}]})");
  REQUIRE(log.rows.size() == 2);
  CHECK(log.header.gpu == "NVIDIA H200");
  CHECK(log.header.nccl == "2.27.3");
  CHECK(log.rows[0].test == "all_reduce_perf");
  CHECK(log.rows[0].ranks == 8);
  CHECK(log.rows[0].nodes == 1);
  CHECK(log.rows[0].root == -1);
  CHECK(log.rows[0].out_of_place.time.us() == Approx(20.5));
  CHECK(log.rows[1].out_of_place.time == stepsim::Time::zero());
  CHECK(log.rows[1].in_place.time.us() == Approx(21.0));
}

// README: a log whose ranks name different GPUs is refused, text and JSON alike, naming both
// GPUs and where each was said.
TEST_CASE("a log whose ranks name different GPUs is refused, naming both and where") {
  CHECK_THROWS_WITH(
      parse("# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5\n"
            "#  Rank  0 Group  0 Pid 100 on node1 device  0 [0x07] NVIDIA A100-SXM4-80GB\n"
            "#  Rank  1 Group  0 Pid 101 on node1 device  1 [0x0f] NVIDIA A100-SXM4-80GB\n"
            "#  Rank  2 Group  0 Pid 102 on node1 device  2 [0x47] NVIDIA H100 80GB HBM3\n"
            "#  Rank  3 Group  0 Pid 103 on node1 device  3 [0x4e] NVIDIA A100-SXM4-80GB\n"
            "1024 256 float sum -1 42.05 0.02 0.04 0 39.65 0.03 0.05 0\n"),
      "log.txt: line 4: names the GPU 'NVIDIA H100 80GB HBM3', but line 2 names 'NVIDIA A100-SXM4-80GB' in the same "
      "run: a log holds one GPU's measurements (import each GPU's runs on their own)");
  CHECK_THROWS_WITH(
      parse(R"({"version":2,"args":["./build/all_reduce_perf","-b","8"],"config":{"nthreads":1,"ngpus":2,"devices":[
      {"rank":0,"group":0,"pid":1,"hostname":"gpu01","device":0,"device_info":"NVIDIA H200"},
      {"rank":1,"group":0,"pid":1,"hostname":"gpu01","device":1,"device_info":"NVIDIA A100-SXM4-80GB"}]},
    "results":[{"size":8,"count":2,"type":"float","redop":"sum","root":"    -1",
      "out_of_place":{"time":20.5,"alg_bw":0.0,"bus_bw":0.0,"nwrong":0.0},"in_place":null}]})"),
      "log.txt: /config/devices/1/device_info: names the GPU 'NVIDIA A100-SXM4-80GB', but "
      "/config/devices/0/device_info "
      "names 'NVIDIA H200' in the same run: a log holds one GPU's measurements (import each GPU's runs on their own)");
  // One GPU spelt two ways (a rows-only file's comment and its devices' lines) is one GPU.
  const auto log = parse(
      "# all_reduce_perf -b 8 -e 1024 -g 2 on one node with 2x NVIDIA H100\n"
      "#  Rank  0 Group  0 Pid 100 on node1 device  0 [0x07] NVIDIA H100 80GB HBM3\n"
      "1024 256 float sum -1 42.05 0.02 0.04 0 39.65 0.03 0.05 0\n");
  CHECK(log.header.gpu == "NVIDIA H100");
}

TEST_CASE("truncated and garbage logs name the file and the place") {
  CHECK_THROWS_WITH(parse("1024 256 float sum -1 40.0 0.03 0.05 0 39.0 0.03\n"),
                    Catch::Contains("log.txt: line 1: expected an nccl-tests row of 12 or 13 columns") &&
                        Catch::Contains("got 11 column(s)"));
  CHECK_THROWS_WITH(parse("{\"version\":2,\"results\":[{\"size\":8,"), Catch::StartsWith("log.txt: line 1, column"));
  CHECK_THROWS_WITH(parse("{\"version\":2,\"results\":[{\"size\":\"8 B\",\"count\":2,\"in_place\":null}]}"),
                    "log.txt: /results/0/size: expected a number, got a string (\"8 B\")");
  CHECK_THROWS_WITH(parse("\x01\x02 garbage\n"),
                    Catch::Contains("log.txt: line 1: expected an nccl-tests row of 12 or 13 columns"));
}

TEST_CASE("a megabyte-long comment line is skipped, not matched until the stack runs out") {
  const std::string long_line = "# Collective test starting: " + std::string(3'000'000, 'b') + "\n";
  const auto log = parse("# nThread 1 nGpus 8 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5\n" + long_line +
                         "#  Rank  0 Group  0 Pid 1 on host device  0 [0x07] " + std::string(2'000'000, 'A') + "\n" +
                         "1024 256 float sum -1 40.0 0.03 0.05 0 39.0 0.03 0.05 0\n");
  REQUIRE(log.rows.size() == 1);
  CHECK(log.rows[0].size == Bytes(1024));
}

TEST_CASE("absurd counts in header lines name the file, the line and the range expected") {
  const std::string row = "1024 256 float sum -1 40.0 0.03 0.05 0 39.0 0.03 0.05 0\n";
  CHECK_THROWS_WITH(
      parse("# all_reduce_perf -b 8 -e 425M -f 2 -g 77777777777777777777777777\n" + row),
      "log.txt: line 1: expected -g (GPUs per thread) from 0 to 4096, got '77777777777777777777…' (26 digits)");
  CHECK_THROWS_WITH(parse("# nThread 1 nGpus 99999 minBytes 8 maxBytes 8 step: 2(factor)\n" + row),
                    "log.txt: line 1: expected nGpus from 0 to 4096, got '99999'");
  CHECK_THROWS_WITH(
      parse("# nThread 1 nGpus 8\n#  Rank 99999999999 Group  0 Pid 1 on h device  0 [0x07] NVIDIA H100\n" + row),
      "log.txt: line 2: expected a rank from 0 to 16777215, got '99999999999'");
  CHECK_THROWS_WITH(parse("# nccl-library=123456789012 version\n" + row),
                    Catch::StartsWith("log.txt: line 1: expected an NCCL version code from 0 to 99999999"));
  CHECK_THROWS_WITH(parse("# all_reduce_perf on one node with 99999999x NVIDIA H100\n" + row),
                    Catch::StartsWith("log.txt: line 1: expected a GPU count from 0 to 16777216"));
  // The counts of real logs are read as before.
  const auto log = parse("# all_reduce_perf -b 8 -e 128M -f 2 -g 8 on one node with 8x NVIDIA H100\n" + row);
  REQUIRE(log.rows.size() == 1);
}

TEST_CASE("an absurd count or root in nccl-tests JSON names the row and the key") {
  const auto json = [](const std::string& count, const std::string& root) {
    return "{\"version\":2,\"results\":[{\"size\":8,\"count\":" + count +
           ",\"type\":\"float\",\"redop\":\"sum\",\"root\":\"" + root +
           "\",\"out_of_place\":null,\"in_place\":{\"time\":5.0,\"alg_bw\":0.0,\"bus_bw\":0.0,\"nwrong\":0}}]}";
  };
  CHECK_THROWS_WITH(
      parse(json("1e300", "    -1")),
      "log.txt: /results/0/count: expected an element count, a whole number from 0 to 1099511627776, got 1e+300");
  CHECK_THROWS_WITH(parse(json("-2", "    -1")), Catch::StartsWith("log.txt: /results/0/count: expected"));
  CHECK_THROWS_WITH(parse(json("2", "99999999999999")),
                    Catch::StartsWith("log.txt: /results/0/root: expected a root rank from -1 to 16777215, got"));
  CHECK_THROWS_WITH(parse(json("2", "none")), Catch::StartsWith("log.txt: /results/0/root: expected a root rank"));
  const auto log = parse(json("2", "     3"));
  REQUIRE(log.rows.size() == 1);
  CHECK(log.rows[0].root == 3);
  CHECK(log.rows[0].count == 2);
}

TEST_CASE("numbers of nccl-tests JSON that must be whole are refused otherwise, naming the key") {
  const auto log = [](const std::string& config, const std::string& size) {
    return "{\"version\":2,\"args\":[\"./all_reduce_perf\"],\"nccl_version\":22703,\"config\":{" + config +
           "},\"results\":[{\"size\":" + size +
           ",\"count\":2,\"type\":\"float\",\"redop\":\"sum\",\"root\":\"    -1\",\"out_of_place\":null,"
           "\"in_place\":{\"time\":5.0,\"alg_bw\":0.0,\"bus_bw\":0.0,\"nwrong\":0}}]}";
  };
  CHECK_THROWS_WITH(parse(log("\"ngpus\":1.5", "8")),
                    "log.txt: /config/ngpus: expected GPUs per thread, a whole number from 1 to 4096, got 1.5");
  CHECK_THROWS_WITH(parse(log("\"ngpus\":1e300", "8")),
                    "log.txt: /config/ngpus: expected GPUs per thread, a whole number from 1 to 4096, got 1e+300");
  CHECK_THROWS_WITH(parse(log("\"devices\":[{\"rank\":2.5,\"hostname\":\"h\"}]", "8")),
                    "log.txt: /config/devices/0/rank: expected a rank, a whole number from 0 to 16777215, got 2.5");
  CHECK_THROWS_WITH(parse(log("\"ngpus\":8", "8.5")),
                    "log.txt: /results/0/size: expected bytes, a whole number from 0 to 1099511627776, got 8.5");
  const auto ok = parse(log("\"ngpus\":8", "8"));
  REQUIRE(ok.rows.size() == 1);
  CHECK(ok.rows[0].ranks == 8);
}

// NCCL writes its own lines to the stdout nccl-tests' table goes to: its version (init.cc,
// from NCCL_DEBUG=VERSION up) and NCCL_DEBUG's INFO, WARN and TRACE lines in debug.cc's forms,
// a WARN after a timestamp (NCCL 2.26's default) or an mpirun tag. They are skipped; the rows
// around them are read at their own lines, and the version is the header's when it has none.
TEST_CASE("NCCL's own version and debug lines beside the table are skipped, other stray lines refused") {
  const std::string row = "1048576 262144 float sum -1 52.61 19.93 34.88 0 53.03 19.77 34.60 0\n";
  const auto log = parse(
      "# all_reduce_perf -b 1M -e 1M -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
      "NCCL version 2.19.3+cuda12.2\n"
      "thanos:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
      "thanos:1234:1234 [0] NCCL INFO NCCL version 2.19.3+cuda12.2\n"
      "\n"
      "thanos:1234:1250 [3] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error\n"
      "[2025-03-12 10:00:00] thanos:1234:1250 [3] init.cc:1000 (ncclCommInitRank) NCCL WARN Cuda failure\n"
      "thanos:1234:1234 [0] 12.345678 ncclGroupEnd:87 NCCL TRACE group end\n"
      "[1,0]<stdout>:thanos:1234:1234 NCCL CALL ncclAllReduce(0x7f, 0x7f, 262144, 7, 0, 0x55, 0x56)\n" +
      row);
  REQUIRE(log.rows.size() == 1);
  CHECK(log.rows[0].line == 10);
  CHECK(log.rows[0].size == Bytes(1048576));
  CHECK(log.header.nccl == "2.19.3");
  // Anything else that is neither a comment nor a row is still refused, naming its line.
  for (const std::string stray : {"NCCL said hello", "thanos:1234:1234 [0] NCCL DEBUG something", "NCCL version two",
                                  "Option -G (CUDA graph) not supported before NCCL 2.9"}) {
    INFO(stray);
    CHECK_THROWS_WITH(parse("# all_reduce_perf -g 8 with 8x NVIDIA A100-SXM4-80GB\n" + stray + "\n" + row),
                      Catch::Contains("log.txt: line 2: expected "));
  }
}

// nccl-tests before 2.13 (commit d313d20, September 2022) printed its device lines without a
// group: "#   Rank %2d Pid %6d on %10s device %2d [0x%02x] %s". Two processes of -g 8 on two hosts
// (mpirun -np 2 -g 8) are 16 ranks on 2 nodes, not nGpus' 8 on one.
TEST_CASE("a log from nccl-tests before 2.13 names its ranks, hosts and GPU on device lines without a group") {
  std::string text =
      "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20\n";
  for (int r = 0; r < 16; ++r)
    text += fmt::format("#   Rank {:2d} Pid {:6d} on {:>10} device {:2d} [0x{:02x}] NVIDIA A100-SXM4-80GB\n", r,
                        4000 + r / 8, r < 8 ? "node0" : "node1", r % 8, r);
  text += "     1048576        262144     float     sum    86.21  12.16  22.81  1e-07    86.00  12.19  22.86  1e-07\n";
  const auto log = parse(text);
  REQUIRE(log.rows.size() == 1);
  CHECK(log.rows[0].legacy);
  CHECK(log.rows[0].ranks == 16);
  CHECK(log.rows[0].nodes == 2);
  CHECK(log.rows[0].uneven_hosts.empty());
  CHECK(log.header.gpu == "NVIDIA A100-SXM4-80GB");
  CHECK(log.header.host == "node0");
}

// nccl-tests' -J writer lists one device per process, the first of its nThread x nGpus ranks
// (util.cu: writeDeviceReport hands each process's "#  Rank" lines to parseRankInfo, which reads
// the first): one process of -g 8 lists rank 0 alone, two of -g 8 on two hosts ranks 0 and 8.
TEST_CASE("the JSON log of processes of several GPUs counts every GPU of each process") {
  const auto json = [](const std::string& devices) {
    return R"({"version":2,"args":["./build/all_reduce_perf","-b","1M","-e","1M","-g","8"],"nccl_version":22703,
      "config":{"nthreads":1,"ngpus":8,"devices":[)" +
           devices + R"(]},"results":[{"size":1048576,"count":262144,"type":"float","redop":"sum","root":"    -1",
      "out_of_place":{"time":52.61,"alg_bw":19.93,"bus_bw":34.88,"nwrong":0.0},
      "in_place":{"time":53.03,"alg_bw":19.77,"bus_bw":34.60,"nwrong":0.0},"actual_iterations":20,
      "experiment_name":""}]})";
  };
  const std::string a0 = R"({"rank":0,"group":0,"pid":11,"hostname":"gpu01","device":0,"device_hex":"0000:07:00",
    "device_info":"NVIDIA A100-SXM4-80GB"})";
  const std::string b8 = R"({"rank":8,"group":0,"pid":12,"hostname":"gpu02","device":0,"device_hex":"0000:07:00",
    "device_info":"NVIDIA A100-SXM4-80GB"})";
  const auto one = parse(json(a0));
  REQUIRE(one.rows.size() == 1);
  CHECK(one.rows[0].ranks == 8);
  CHECK(one.rows[0].ranks_said == 8);
  CHECK(one.rows[0].nodes == 1);
  const auto two = parse(json(a0 + "," + b8));
  REQUIRE(two.rows.size() == 1);
  CHECK(two.rows[0].ranks == 16);
  CHECK(two.rows[0].nodes == 2);
  CHECK(two.rows[0].uneven_hosts.empty());
}

// With -C 1 nccl-tests prints, in each half's time column ("cputime"; -J: "cpu_time"), the host's
// time to enqueue the timed collectives (common.cu: cputimeSec is taken before completeColl), a
// few microseconds at any size; its algbw comes from their real time (here 65536 B at 1.75 GB/s
// is 37.4 us, not 5.10).
TEST_CASE("a run that printed the host's time in place of the collectives' (-C 1) is refused") {
  CHECK_THROWS_WITH(
      parse("# nThread 1 nGpus 8 minBytes 65536 maxBytes 65536 step: 2(factor) warmup iters: 5 iters: 20\n"
            "#       size         count      type   redop    root  cputime   algbw   busbw #wrong  cputime   algbw   "
            "busbw #wrong\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
            "(GB/s)\n"
            "       65536         16384     float     sum      -1     5.10    1.75    3.06      0     5.05    1.75    "
            "3.05      0\n"),
      "log.txt: line 4: the time column is cputime, as the table header on line 2 names it: nccl-tests -C 1 prints "
      "the host's time to enqueue the collectives there, not how long they take; expected a run without -C (or with "
      "-C 0)");
  CHECK_THROWS_WITH(
      parse(R"({"version":2,"args":["./build/all_reduce_perf","-C","1"],"results":[{"size":65536,"count":16384,
        "type":"float","redop":"sum","root":"    -1","out_of_place":{"cpu_time":5.10,"alg_bw":1.75,"bus_bw":3.06,
        "nwrong":0.0},"in_place":{"cpu_time":5.05,"alg_bw":1.75,"bus_bw":3.05,"nwrong":0.0}}]})"),
      "log.txt: /results/0/out_of_place/cpu_time: the time column is cpu_time: nccl-tests -C 1 prints the host's time "
      "to enqueue the collectives there, not how long they take; expected a run without -C (or with -C 0)");
  // The same table with its time column named "time" is read.
  const auto log = parse(
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
      "#wrong\n"
      "       65536         16384     float     sum      -1    37.48    1.75    3.06      0    37.55    1.75    3.05  "
      "    0\n");
  REQUIRE(log.rows.size() == 1);
}

// nccl-tests runs nProcs x nThreads x nGpus ranks (common.cu, setupArgs): a rows-only file whose
// comment is the run's launcher line ("mpirun -np 8 all_reduce_perf ... -g 1", as `calibrate
// plan` prints it) is 8 ranks, not -g's one process of 1. srun's -N nodes of --ntasks-per-node,
// and mpirun's -np over its -N per node, say the nodes too; nccl-tests' own -n (iterations),
// after the program, is no process count.
TEST_CASE("a rows-only log whose comment is the launcher's command line counts every process") {
  const std::string row = "1048576 262144 float sum -1 52.61 19.93 34.88 0 53.03 19.77 34.60 0\n";
  const auto mpi = parse("# mpirun -np 8 all_reduce_perf -b 1M -e 128M -f 2 -g 1 -d float\n" + row);
  REQUIRE(mpi.rows.size() == 1);
  CHECK(mpi.rows[0].ranks == 8);
  CHECK(mpi.rows[0].ranks_said == 8);
  CHECK(mpi.rows[0].process_ranks == 1);
  CHECK(mpi.rows[0].nodes == 0);
  const auto srun = parse("# srun -N 2 --ntasks-per-node=8 ./build/all_reduce_perf -b 1M -e 1M -g 1 -n 50\n" + row);
  CHECK(srun.rows[0].ranks == 16);
  CHECK(srun.rows[0].nodes == 2);
  const auto per_host = parse("# mpirun -np 2 -N 1 all_reduce_perf -b 1M -e 1M -g 8\n" + row);
  CHECK(per_host.rows[0].ranks == 16);
  CHECK(per_host.rows[0].nodes == 2);
  CHECK(per_host.rows[0].process_ranks == 8);
  // Without a launcher, -g is the whole run (one process), as before.
  CHECK(parse("# all_reduce_perf -b 1M -e 1M -g 8\n" + row).rows[0].ranks == 8);
}
