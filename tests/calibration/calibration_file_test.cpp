// Calibration files: the strict reader, the GPU check, interpolation in measured tables, the
// alpha-beta fit, nccl-tests import and the trace fit.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <sstream>

#include "calibration/apply.hpp"
#include "calibration/calibration.hpp"
#include "calibration/link_bound.hpp"
#include "calibration/nccl_import.hpp"
#include "calibration/tables.hpp"
#include "calibration/trace_fit.hpp"
#include "hardware/gpu_model.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;
using namespace stepsim::calibration;

namespace {

const std::string kMinimal = R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA A100-SXM4-80GB"},
  "collectives": [{"op": "allreduce", "ranks": 8, "nodes": 1,
                   "fit": {"alpha_us": 9.97066498, "algbw_gbps": 34.9183889, "busbw_gbps": 61.1071807,
                           "max_error": 9.5e-7, "alpha_fitted": true},
                   "points": [{"bytes": 1024, "time_us": 10}, {"bytes": 1048576, "time_us": 40}]}]})";

std::string error_of(const std::string& text) {
  try {
    parse_calibration(text, "c.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("a calibration file is read and written back unchanged") {
  const Calibration c = parse_calibration(kMinimal, "c.json");
  CHECK(c.collectives.at(0).ranks_per_node == 8);
  CHECK(parse_calibration(calibration_json(c), "again.json").collectives.at(0).points.size() == 2);
  CHECK(calibration_json(parse_calibration(calibration_json(c), "x")) == calibration_json(c));
}

TEST_CASE("bad calibration files name the file, the JSON pointer and what was expected") {
  CHECK(error_of(kMinimal.substr(0, 60)).starts_with("c.json: line "));
  CHECK(error_of("[1, 2]") == "c.json: /: expected an object, got a list");
  CHECK(error_of(replaced(kMinimal, "\"stepsim_calibration\": 1", "\"stepsim_calibration\": 2")) ==
        "c.json: /stepsim_calibration: expected format version 1, got a number (2)");
  CHECK(error_of(replaced(kMinimal, "\"time_us\": 40", "\"time_us\": \"40 us\"")) ==
        "c.json: /collectives/0/points/1/time_us: expected a plain number of microseconds (the key names the "
        "unit), got a string (\"40 us\")");
  CHECK(error_of(replaced(kMinimal, "\"time_us\": 40", "\"time_us\": 0")) ==
        "c.json: /collectives/0/points/1/time_us: expected microseconds from 0.001 to 86400000000, got 0");
  CHECK(error_of(replaced(kMinimal, "\"bytes\": 1048576", "\"bytes\": 512")) ==
        "c.json: /collectives/0/points/1/bytes: expected sizes in increasing order, got 512 after 1024");
  CHECK(error_of(replaced(kMinimal, "\"nodes\": 1", "\"nodes\": 3")) ==
        "c.json: /collectives/0: ranks (8) must be nodes (3) times ranks_per_node (2)");
  CHECK(error_of(replaced(kMinimal, "\"op\": \"allreduce\"", "\"op\": \"allreduse\"")) ==
        "c.json: /collectives/0/op: unknown value 'allreduse' (expected one of allreduce, allgather, reducescatter, "
        "broadcast, reduce, alltoall, sendrecv)");
  CHECK(error_of(replaced(kMinimal, "\"bytes\": 1048576", "\"bytes\": 1048576.5")) ==
        "c.json: /collectives/0/points/1/bytes: expected a whole number of bytes, got 1048576.5");
  CHECK(error_of(replaced(kMinimal, "\"ranks\": 8", "\"rank\": 8"))
            .starts_with(
                "c.json: /collectives/0/rank: unknown key 'rank'"));  // The GPU check compares this name with the
                                                                      // cluster's: an empty one would pass any.
  CHECK(error_of(replaced(kMinimal, "\"gpu\": \"NVIDIA A100-SXM4-80GB\"", "\"gpu\": \" \"")) ==
        "c.json: /provenance/gpu: expected the GPU the measurements ran on, as CUDA names it (e.g. \"NVIDIA H100 80GB "
        "HBM3\"), got an empty name");
}

// The fit of kMinimal's points by hand: α from the smallest size, the bandwidth from the
// largest, each less the other's share, twice: α = 10 − 1024·x, x = (40 − α) / 1048576 gives
// α = 9.97066498 µs and algbw = 1048576 / (30.0293350 µs) = 34.9183889 GB/s; busbw 2·7/8 of it.
TEST_CASE("a collective table's fit is the one its points give, as the writers write it") {
  const std::string& good = kMinimal;
  CHECK(error_of(good) == "no error");
  CHECK(error_of(replaced(good, "\"algbw_gbps\": 34.9183889", "\"algbw_gbps\": 99999")) ==
        "c.json: /collectives/0/fit: expected the fit its points give (alpha_us 9.97066498, algbw_gbps 34.9183889, "
        "busbw_gbps 61.1071807, max_error 9.49949026e-07, alpha_fitted true), got alpha_us 9.97066498, algbw_gbps "
        "99999, busbw_gbps 61.1071807, max_error 9.5e-07, alpha_fitted true");
  CHECK(error_of(replaced(good, "\"alpha_fitted\": true", "\"alpha_fitted\": false"))
            .starts_with("c.json: /collectives/0/fit: expected the fit its points give"));
}

TEST_CASE("a collective table's dtype is one of nccl-tests' type names") {
  CHECK(error_of(replaced(kMinimal, "\"nodes\": 1,", "\"nodes\": 1, \"dtype\": \"nonsense\",")) ==
        "c.json: /collectives/0/dtype: unknown value 'nonsense' (expected one of int8, uint8, int32, uint32, int64, "
        "uint64, half, float, double, bfloat16, f8e4m3, f8e5m2)");
}

// A100: 312 TFLOPS bf16 dense, 2.04 TB/s HBM. 2·8192³ = 1.0995e12 FLOPs need 3524 us at
// the peak; 3000 us would be 366.5 TFLOPS. 2,500 GB/s is above the HBM's 2,040.
TEST_CASE("measured kernels faster than the GPU's peak or its memory are refused for the cluster") {
  const ClusterSpec cluster = io::load_cluster("dgx-a100-80g-hdr", 8);
  auto check = [&](const std::string& compute) {
    Calibration c = parse_calibration(R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA A100-SXM4-80GB"},
                                          "compute": )" +
                                          compute + "}",
                                      "k.json");
    try {
      check_fits(c, cluster, CollectivesSpec{});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(check(R"({"gemm": [{"m": 8192, "n": 8192, "k": 8192, "dtype": "bf16", "time_us": 4000}]})") == "no error");
  CHECK(check(R"({"gemm": [{"m": 8192, "n": 8192, "k": 8192, "dtype": "bf16", "time_us": 3000}]})") ==
        "k.json: /compute/gemm/0/time_us: 8192 x 8192 x 8192 bf16 in 3000 us is 366.5 TFLOPS, above the bf16 peak of "
        "312.0 TFLOPS of a100-sxm4-80gb: no kernel runs faster than its GPU's peak");
  CHECK(check(R"({"attention": [{"pass": "forward", "batch": 1, "heads": 32, "kv_heads": 32, "seq": 8192,
                   "head_dim": 128, "dtype": "bf16", "time_us": 500}]})")
            .starts_with("k.json: /compute/attention/0/time_us: attention forward bf16 in 500 us is 1099.5 TFLOPS, "
                         "above the bf16 peak of 312.0 TFLOPS"));
  CHECK(check(R"({"memory": [{"bytes": 1e9, "gbytes_per_s": 2500}]})") ==
        "k.json: /compute/memory/0/gbytes_per_s: 2500 GB/s is above the 2040 GB/s of a100-sxm4-80gb's memory");
}

TEST_CASE("calibration range messages print whole numbers in full") {
  CHECK(error_of(replaced(kMinimal, "\"gpu\": \"NVIDIA A100-SXM4-80GB\"",
                          "\"gpu\": \"NVIDIA A100-SXM4-80GB\", \"gpu_count\": 1048577")) ==
        "c.json: /provenance/gpu_count: expected GPUs from 1 to 1048576, got 1048577");
  CHECK(error_of(replaced(kMinimal, "\"bytes\": 1048576", "\"bytes\": 2199023255552")) ==
        "c.json: /collectives/0/points/1/bytes: expected bytes from 1 to 1099511627776, got 2199023255552");
}

TEST_CASE("a table measured on another GPU is refused for the scenario") {
  const Calibration c = parse_calibration(kMinimal, "c.json");
  CHECK_NOTHROW(check_gpu(c, "a100-sxm4-80gb"));
  CHECK_THROWS_WITH(check_gpu(c, "h100-sxm5-80gb"),
                    "c.json: /provenance/gpu: measured on 'NVIDIA A100-SXM4-80GB', but the scenario's GPU is "
                    "'h100-sxm5-80gb' (calibrate on that GPU, or choose a cluster with the measured GPU)");
  CHECK(gpu_matches("NVIDIA H200", "h200"));
  CHECK_FALSE(gpu_matches("NVIDIA H200", "h100-sxm5-80gb"));
}

// CUDA's device names against the presets' names: the family, the form factor and the memory
// where both say them, never a substring (GH200 is no H200, an A100 40GB no A100 80GB).
TEST_CASE("the GPU check compares family, form factor and memory, not a substring") {
  CHECK(gpu_matches("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"));
  CHECK(gpu_matches("NVIDIA A100-SXM4-80GB", "a100-80g"));
  CHECK(gpu_matches("NVIDIA H100 80GB HBM3", "h100-sxm5-80gb"));
  CHECK(gpu_matches("NVIDIA B200", "b200"));
  CHECK(gpu_matches("A100", "a100-sxm4-80gb"));
  CHECK_FALSE(gpu_matches("NVIDIA A100-SXM4-40GB", "a100-sxm4-80gb"));
  CHECK_FALSE(gpu_matches("NVIDIA A100 80GB PCIe", "a100-sxm4-80gb"));
  CHECK_FALSE(gpu_matches("NVIDIA A100-PCIE-40GB", "a100-80g"));
  CHECK_FALSE(gpu_matches("NVIDIA H100 PCIe", "h100-sxm5-80gb"));
  CHECK_FALSE(gpu_matches("NVIDIA H100 NVL", "h100-sxm5-80gb"));
  CHECK_FALSE(gpu_matches("NVIDIA H100 80GB HBM3", "h100-sxm5-96gb-500w"));
  CHECK_FALSE(gpu_matches("NVIDIA GH200 480GB", "h200"));
  CHECK_FALSE(gpu_matches("NVIDIA H200", "gh200"));
}

TEST_CASE("measured tables interpolate in log-log space inside their range only") {
  const std::vector<std::pair<double, double>> curve{{1, 10}, {100, 1000}};
  CHECK(*interpolate_loglog(curve, 10) == Approx(100));
  CHECK(*interpolate_loglog(curve, 1) == 10);
  CHECK_FALSE(interpolate_loglog(curve, 0.5).has_value());
  CHECK_FALSE(interpolate_loglog(curve, 101).has_value());
  const MeasuredTables t({parse_calibration(kMinimal, "c.json")});
  CHECK(*measured_us(*t.exact(CollOp::allreduce, 8, 1, 8), 32768) == Approx(20).epsilon(1e-9));
  CHECK(t.exact(CollOp::allreduce, 16, 2, 8) == nullptr);
  CHECK(t.reference(CollOp::allreduce, 4, 1, 4) != nullptr);
  CHECK(t.reference(CollOp::allreduce, 16, 2, 8) == nullptr);  // one node says nothing about the network
}

TEST_CASE("a collective inside the measured range costs the measured time, outside it the scaled model") {
  const ClusterSpec cluster = io::load_cluster("dgx-a100-80g-hdr", 8);
  const MeasuredTables t({parse_calibration(kMinimal, "c.json")});
  const collectives::Request inside{CollOp::allreduce, Bytes(32768), {8, 1, 8}};
  const auto c = calibrate_collective(t, cluster, {}, inside);
  CHECK(c.source == Source::measured);
  CHECK(c.choice.time().us() == Approx(20).epsilon(1e-6));
  const collectives::Request outside{CollOp::allreduce, Bytes(1LL << 30), {8, 1, 8}};
  CHECK(calibrate_collective(t, cluster, {}, outside).source == Source::scaled);
  const collectives::Request network{CollOp::allreduce, Bytes(1LL << 30), {16, 2, 8}};
  CHECK(calibrate_collective(t, cluster, {}, network).source == Source::model);
}

// Two files that measured one shape at different sizes are one table, as their logs imported
// into one file: the same points and the same time at every size; not the later file alone.
TEST_CASE("the tables of one shape in two calibration files are merged as their logs imported together") {
  const NcclTestsLog log = read_nccl_tests(STEPSIM_TEST_DATA "/nccl-tests/a100-80g-8gpu-allreduce-a.txt");
  NcclTestsLog small = log, large = log;
  std::erase_if(small.rows, [](const NcclTestsRow& r) { return r.size.count() > 131072; });
  std::erase_if(large.rows, [](const NcclTestsRow& r) { return r.size.count() <= 131072; });
  Calibration lo = import_nccl_tests({small}, {}), hi = import_nccl_tests({large}, {});
  lo.source = "lo.json";
  hi.source = "hi.json";
  const ClusterSpec cluster = io::load_cluster("dgx-a100-80g-hdr", 8);
  const MeasuredTables apart({hi, lo}, cluster), whole({import_nccl_tests({log}, {})}, cluster);
  const CollectiveTable* a = apart.exact(CollOp::allreduce, 8, 1, 8);
  const CollectiveTable* w = whole.exact(CollOp::allreduce, 8, 1, 8);
  REQUIRE(a != nullptr);
  REQUIRE(w != nullptr);
  REQUIRE(a->points.size() == w->points.size());
  for (std::size_t i = 0; i < w->points.size(); ++i) {
    CHECK(a->points[i].bytes == w->points[i].bytes);
    CHECK(a->points[i].time_us == w->points[i].time_us);
  }
  for (long long bytes = 1024; bytes <= (1LL << 30); bytes *= 32) {
    INFO("size " << bytes);
    const collectives::Request r{CollOp::allreduce, Bytes(bytes), {8, 1, 8}};
    const auto x = calibrate_collective(apart, cluster, {}, r), y = calibrate_collective(whole, cluster, {}, r);
    CHECK(x.source == Source::measured);
    CHECK(x.choice.time().us() == Approx(y.choice.time().us()).epsilon(1e-12));
  }
  // The log's own row: 1 GiB in 8247.6 us, measured by hi.json, given before lo.json.
  const collectives::Request gib{CollOp::allreduce, Bytes(1LL << 30), {8, 1, 8}};
  CHECK(calibrate_collective(apart, cluster, {}, gib).choice.time().us() == Approx(8247.6).epsilon(1e-9));
  // The same file twice measures each size once; one size timed twice otherwise is refused.
  CHECK(MeasuredTables({lo, lo}, cluster).exact(CollOp::allreduce, 8, 1, 8)->points.size() ==
        lo.collectives[0].points.size());
  Calibration other = lo;
  other.source = "other.json";
  other.collectives[0].points.back().time_us = 50;
  CHECK_THROWS_WITH(
      MeasuredTables({lo, other}, cluster),
      "other.json: /collectives/0/points/14: measures allreduce of 8 rank(s), 1 node(s) x 8 (float) at "
      "131072 B in 50 us, but lo.json /collectives/0/points/14 measures it in 42.26 us: the tables of one "
      "shape and type in several calibration files are merged, and a size has one time (import both logs "
      "into one file, which averages a size's times, or give one of the files)");
}

TEST_CASE("the alpha-beta fit takes latency from the smallest size and bandwidth from the largest") {
  std::vector<CollectivePoint> pts;
  for (double s = 8; s <= 1e9; s *= 8) pts.push_back({s, 20 + s / 100e3});  // 20 us + 100 GB/s
  const AlphaBeta f = fit_alpha_beta(pts, CollOp::allreduce, 8, 0);
  CHECK(f.alpha_us == Approx(20).epsilon(1e-3));
  CHECK(f.algbw_gbps == Approx(100).epsilon(1e-3));
  CHECK(f.busbw_gbps == Approx(175).epsilon(1e-3));
  CHECK(f.max_error < 1e-3);
  const AlphaBeta one = fit_alpha_beta({{1e9, 10020}}, CollOp::allreduce, 8, 20);
  CHECK_FALSE(one.alpha_fitted);
  CHECK(one.algbw_gbps == Approx(100).epsilon(1e-6));
}

TEST_CASE("importing logs groups rows by test and communicator shape") {
  std::istringstream in(
      "# all_reduce_perf -b 8 -e 16 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
      "8 2 float sum -1 40.0 0.00 0.00 0 39.0 0.00 0.00 0\n"
      "16 4 float sum -1 41.0 0.00 0.00 0 39.0 0.00 0.00 0\n");
  const Calibration c = import_nccl_tests({parse_nccl_tests(in, "a.txt")}, {});
  CHECK(c.provenance.gpu == "NVIDIA A100-SXM4-80GB");
  REQUIRE(c.collectives.size() == 1);
  CHECK(c.collectives[0].ranks == 8);
  CHECK(c.collectives[0].nodes == 1);
  CHECK(c.collectives[0].points[1].time_us == 41.0);
  std::istringstream bare("8 2 float sum -1 40.0 0.00 0.00 0 39.0 0.00 0.00 0\n");
  CHECK_THROWS_WITH(import_nccl_tests({parse_nccl_tests(bare, "b.txt")}, {}),
                    "b.txt: line 1: the log does not say which test printed this row (no '# Collective test "
                    "starting' line); give --op");
  CHECK_THROWS_WITH(op_of_test("hypercube_perf", "h.txt"), Catch::StartsWith("h.txt: test 'hypercube_perf' is not"));
}

// The file keeps each time as the log prints it: 39.06 us, not the 39.059999999999995 a round
// trip through picoseconds times 1e-6 gives.
TEST_CASE("imported times are the log's microseconds to the last digit") {
  const Calibration c = import_nccl_tests(
      {stepsim::calibration::read_nccl_tests(STEPSIM_TEST_DATA "/nccl-tests/a100-80g-8gpu-allreduce-a.txt")}, {});
  REQUIRE(c.collectives.size() == 1);
  CHECK(c.collectives[0].points.at(2).bytes == 32);
  CHECK(c.collectives[0].points.at(2).time_us == 39.06);
  CHECK(calibration_json(c).find("39.059999") == std::string::npos);
}

// One calibration file is one GPU's: logs of two GPUs are refused, naming both; ranks spread
// unevenly over the hosts are no communicator shape stepsim has; a negative size no measurement.
TEST_CASE("importing refuses logs of two GPUs, uneven hosts and negative sizes") {
  const auto log = [](const std::string& device, const std::string& host_b, const std::string& size, const char* name) {
    std::istringstream in(
        "# Collective test starting: all_reduce_perf\n"
        "#  Rank  0 Group  0 Pid  11 on node-a device  0 [0000:07:00] " +
        device +
        "\n"
        "#  Rank  1 Group  0 Pid  12 on node-a device  1 [0000:0f:00] " +
        device +
        "\n"
        "#  Rank  2 Group  0 Pid  13 on " +
        host_b + " device  0 [0000:07:00] " + device +
        "\n"
        "#  Rank  3 Group  0 Pid  14 on " +
        host_b + " device  1 [0000:0f:00] " + device + "\n" + size +
        " 2 float sum -1 40.0 0.00 0.00 0 39.0 0.00 0.00 0\n");
    return parse_nccl_tests(in, name);
  };
  const std::string a100 = "NVIDIA A100-SXM4-80GB", h100 = "NVIDIA H100 80GB HBM3";
  const Calibration two_nodes = import_nccl_tests({log(a100, "node-b", "8", "a.txt")}, {});
  REQUIRE(two_nodes.collectives.size() == 1);
  CHECK(two_nodes.collectives[0].nodes == 2);
  CHECK(two_nodes.collectives[0].ranks_per_node == 2);
  CHECK_THROWS_WITH(
      import_nccl_tests({log(a100, "node-b", "8", "a.txt"), log(h100, "node-b", "8", "h.txt")}, {}),
      "h.txt: line 2: ran on NVIDIA H100 80GB HBM3, but a.txt ran on NVIDIA A100-SXM4-80GB: a calibration file "
      "holds one GPU's measurements (import each GPU's logs into a file of its own)");
  // Two ranks on a and one on b: no "nodes x ranks per node" shape ran.
  std::istringstream uneven(
      "# Collective test starting: all_reduce_perf\n"
      "#  Rank  0 Group  0 Pid  11 on a device  0 [0000:07:00] NVIDIA A100-SXM4-80GB\n"
      "#  Rank  1 Group  0 Pid  12 on a device  1 [0000:0f:00] NVIDIA A100-SXM4-80GB\n"
      "#  Rank  2 Group  0 Pid  13 on b device  0 [0000:07:00] NVIDIA A100-SXM4-80GB\n"
      "8 2 float sum -1 40.0 0.00 0.00 0 39.0 0.00 0.00 0\n");
  CHECK_THROWS_WITH(import_nccl_tests({parse_nccl_tests(uneven, "v.txt")}, {}),
                    "v.txt: line 5: the ranks are spread unevenly over the hosts (2 on a, 1 on b); stepsim's "
                    "communicators have as many ranks on every node: measure with as many GPUs on each host");
  CHECK_THROWS_WITH(log(a100, "node-b", "-8", "n.txt"),
                    "n.txt: line 6: expected a size from 0 to 1099511627776 bytes, got -8");
}

// nccl-tests prints a row's count as the count the collective is called with and its size as
// the larger buffer (common.cu, after GetCollByteCount): an 8-rank all_gather_perf of floats
// prints 1048576 B as 32768 elements per rank (32768 x 8 x 4 B), an all_reduce_perf 262144
// (262144 x 4 B). The all-gather's rows read as an all-reduce's would cost an all-reduce the
// all-gather's 30 us; a row of 262144 halves is 524288 B, not 1048576.
TEST_CASE("a row whose count contradicts its size, test and ranks is refused") {
  const auto rows = [](const std::string& text) {
    std::istringstream in(text);
    return parse_nccl_tests(in, "r.txt");
  };
  const std::string gather = "1048576 32768 float none -1 30.0 34.95 30.58 0 30.0 34.95 30.58 0\n";
  ImportOverrides o;
  o.ranks = 8;
  o.gpu = "NVIDIA A100-SXM4-80GB";
  o.op = "allgather";
  CHECK(import_nccl_tests({rows(gather)}, o).collectives.at(0).points.at(0).bytes == 1048576);
  o.op = "reducescatter";  // one rank's part of the result: the same count for the same size
  CHECK(import_nccl_tests({rows(gather)}, o).collectives.size() == 1);
  o.op = "alltoall";  // the part for each peer, or (its first versions) the whole count
  CHECK(import_nccl_tests({rows(gather)}, o).collectives.size() == 1);
  CHECK(import_nccl_tests({rows("1048576 262144 float none -1 30.0 34.95 30.58 0 30.0 34.95 30.58 0\n")}, o)
            .collectives.size() == 1);
  o.op = "allreduce";
  CHECK_THROWS_WITH(import_nccl_tests({rows(gather)}, o),
                    "r.txt: line 1: size 1048576 B contradicts count 32768 of float: all_reduce_perf prints its size "
                    "as count x 4 B = 131072 B; a row that does not keep it is of another test, rank count or element "
                    "type than all_reduce_perf of 8 rank(s) (check --op, --ranks and the log)");
  o.op = "allgather";
  o.ranks = 4;
  CHECK_THROWS_WITH(import_nccl_tests({rows(gather)}, o),
                    Catch::Contains("all_gather_perf prints its size as count x 4 ranks x 4 B = 524288 B"));
  o.ranks = 8;
  o.op = "allreduce";
  CHECK_THROWS_WITH(import_nccl_tests({rows("1048576 262144 half sum -1 52.6 19.93 34.88 0 53.0 19.77 34.60 0\n")}, o),
                    Catch::Contains("size 1048576 B contradicts count 262144 of half: all_reduce_perf prints its "
                                    "size as count x 2 B = 524288 B"));
}

// NCCL refuses a forced algorithm or protocol it cannot run for the collective ("no
// algorithm/protocol available", enqueue.cc): NVLS needs Hopper's NVSwitch, so an A100 run was
// never NVLS; Tree implements AllReduce alone; NVLS is Simple only. Such a table would be
// refused by every simulation, so the import refuses it, naming the log and what forced it.
TEST_CASE("a forced algorithm or protocol NCCL cannot run is refused at import") {
  const auto rows = [](const std::string& text) {
    std::istringstream in(text);
    return parse_nccl_tests(in, "f.txt");
  };
  const std::string a100_reduce =
      "# all_reduce_perf -b 1M -e 1M -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
      "1048576 262144 float sum -1 52.61 19.93 34.88 0 53.03 19.77 34.60 0\n";
  ImportOverrides nvls;
  nvls.algorithm = "nvls";
  CHECK_THROWS_WITH(import_nccl_tests({rows(a100_reduce)}, nvls),
                    Catch::StartsWith("f.txt: line 2: --algorithm nvls: on NVIDIA A100-SXM4-80GB "
                                      "(dgx-a100-80g-hdr), 'nvls' does not apply to AllReduce on 8 "
                                      "GPUs over 1 node(s)"));
  CHECK_THROWS_WITH(
      import_nccl_tests({rows("host:1:1 [0] NCCL INFO NCCL_ALGO set by environment to NVLS\n" + a100_reduce)}, {}),
      Catch::StartsWith("f.txt: line 3: NCCL_ALGO=NVLS (line 1): on NVIDIA A100-SXM4-80GB"));
  ImportOverrides tree;
  tree.algorithm = "tree";
  CHECK(import_nccl_tests({rows(a100_reduce)}, tree).collectives.at(0).algorithm == "tree");
  const std::string a100_gather =
      "# all_gather_perf -b 1M -e 1M -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
      "1048576 32768 float none -1 30.0 34.95 30.58 0 30.0 34.95 30.58 0\n";
  CHECK_THROWS_WITH(import_nccl_tests({rows(a100_gather)}, tree),
                    Catch::Contains("'tree' does not apply to AllGather on 8 GPUs over 1 node(s): it does not "
                                    "implement AllGather"));
  ImportOverrides pat;
  pat.algorithm = "pat";  // one rank per node only
  CHECK_THROWS_WITH(import_nccl_tests({rows(a100_gather)}, pat), Catch::Contains("'pat' does not apply"));
  const std::string h200_reduce =
      "# all_reduce_perf -b 1M -e 1M -g 8 on one node with 8x NVIDIA H200\n"
      "1048576 262144 float sum -1 52.61 19.93 34.88 0 53.03 19.77 34.60 0\n";
  CHECK(import_nccl_tests({rows(h200_reduce)}, nvls).collectives.at(0).algorithm == "nvls");
  ImportOverrides nvls_ll = nvls;
  nvls_ll.protocol = "ll";
  CHECK_THROWS_WITH(
      import_nccl_tests({rows(h200_reduce)}, nvls_ll),
      Catch::StartsWith("f.txt: line 2: --algorithm nvls and --protocol ll: on NVIDIA H200 (dgx-h200-ndr)"));
}

// An all_gather_perf log from before mid-2022 has no operation column (11 columns): 32 B on 8
// ranks is 1 float from each (1 x 8 x 4 B), and 128 MiB 4194304 of them.
TEST_CASE("a legacy all_gather_perf log without an operation column imports as an all-gather table") {
  std::istringstream in(
      "# all_gather_perf -b 32 -e 128M -f 64 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
      "#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error\n"
      "          32             1   float    29.42    0.00    0.00  0e+00    29.38    0.00    0.00  0e+00\n"
      "   134217728       4194304   float   800.00  167.77  146.80  0e+00   800.00  167.77  146.80  0e+00\n");
  const Calibration c = import_nccl_tests({parse_nccl_tests(in, "old.txt")}, {});
  REQUIRE(c.collectives.size() == 1);
  const CollectiveTable& t = c.collectives[0];
  CHECK(t.op == CollOp::allgather);
  CHECK(t.ranks == 8);
  REQUIRE(t.points.size() == 2);
  CHECK(t.points[0].bytes == 32);
  CHECK(t.points[0].time_us == Approx(29.42));
  CHECK(t.points[1].time_us == Approx(800.0));
}

// NCCL_DEBUG=INFO prints each NCCL_PARAM set by the environment ("NCCL_P2P_DISABLE set by
// environment to 1."). Peer-to-peer switched off sends a node's data through host memory, not
// NVLink; InfiniBand switched off, the network's over TCP; NVLS switched off, NCCL's own choice
// without it. None of them is what a table of NCCL's collectives stands for, where it mattered:
// P2P with several ranks on a node, IB across nodes, NVLS on Hopper for NCCL's own choice.
TEST_CASE("a log whose environment switched off NVLink P2P, InfiniBand or NVLS where they matter is refused") {
  const auto rows = [](const std::string& env, const std::string& device, int hosts) {
    // NCCL initialises after nccl-tests has listed the devices, and says its environment then.
    std::string text = "# Collective test starting: all_reduce_perf\n";
    for (int r = 0; r < 8; ++r)
      text += fmt::format("#  Rank {} Group  0 Pid {} on node{} device {} [0x07] {}\n", r, 100 + r, r * hosts / 8, r,
                          device);
    if (!env.empty())
      text += "node0:100:100 [0] NCCL INFO " + env + " set by environment to " +
              (env == "NCCL_NVLS_ENABLE" ? "0" : "1") + ".\n";
    text += "1048576 262144 float sum -1 500.0 2.10 3.67 0 500.0 2.10 3.67 0\n";
    std::istringstream in(text);
    return parse_nccl_tests(in, "e.txt");
  };
  const std::string a100 = "NVIDIA A100-SXM4-80GB", h100 = "NVIDIA H100 80GB HBM3";
  CHECK(import_nccl_tests({rows("", a100, 1)}, {}).collectives.size() == 1);
  CHECK_THROWS_WITH(import_nccl_tests({rows("NCCL_P2P_DISABLE", a100, 1)}, {}),
                    "e.txt: line 11: NCCL_P2P_DISABLE=1 (line 10): the 8 ranks on each node exchanged their data "
                    "through host memory, not over NVLink; a table of this run would stand for allreduce run as NCCL "
                    "runs it without that setting: measure without it");
  // InfiniBand off on one node changes nothing; across two it does.
  CHECK(import_nccl_tests({rows("NCCL_IB_DISABLE", a100, 1)}, {}).collectives.size() == 1);
  CHECK_THROWS_WITH(import_nccl_tests({rows("NCCL_IB_DISABLE", a100, 2)}, {}),
                    Catch::StartsWith("e.txt: line 11: NCCL_IB_DISABLE=1 (line 10): the 2 nodes exchanged their data "
                                      "over TCP sockets"));
  // NVLS off on an A100 (it has none) changes nothing; on an H100 NCCL's choice is another.
  CHECK(import_nccl_tests({rows("NCCL_NVLS_ENABLE", a100, 1)}, {}).collectives.size() == 1);
  CHECK_THROWS_WITH(import_nccl_tests({rows("NCCL_NVLS_ENABLE", h100, 1)}, {}),
                    Catch::StartsWith("e.txt: line 11: NCCL_NVLS_ENABLE=0 (line 10): NCCL chose among its algorithms "
                                      "without NVLS"));
  ImportOverrides ring;
  ring.algorithm = "ring";
  CHECK(import_nccl_tests({rows("NCCL_NVLS_ENABLE", h100, 1)}, ring).collectives.at(0).algorithm == "ring");
}

// NCCL_MAX_NCHANNELS, NCCL_MIN_NCHANNELS and NCCL_MAX_CTAS bound the channels of the
// communicator's rings (init.cc, connect.cc), NCCL_NVLS_NCHANNELS and the CTA bounds NVLS's own
// (nvls.cc). A DGX A100 runs its rings on 24 channels: NCCL's search finds 12 rings of 20 GB/s on
// the twelve 25 GB/s NVLink 3 links of each GPU, and ncclTopoPostset doubles them ("24 coll
// channels" in NCCL_DEBUG=INFO's output); an H100's NVLS runs on 16 (NVLS_NCHANNELS_SM90). A
// table measured on other counts is refused; a bound that leaves the count alone is not.
TEST_CASE("a log whose environment bounded NCCL's channels below or above their default is refused") {
  const auto rows = [](const std::string& env, long long value, const std::string& device, const std::string& row) {
    std::string text = "# Collective test starting: all_reduce_perf\n";
    for (int r = 0; r < 8; ++r)
      text += fmt::format("#  Rank {} Group  0 Pid {} on node0 device {} [0x07] {}\n", r, 100 + r, r, device);
    text += fmt::format("node0:100:100 [0] NCCL INFO {} set by environment to {}.\n", env, value);
    text += row;
    std::istringstream in(text);
    return parse_nccl_tests(in, "c.txt");
  };
  const std::string a100 = "NVIDIA A100-SXM4-80GB", h100 = "NVIDIA H100 80GB HBM3";
  const std::string mib = "1048576 262144 float sum -1 500.0 2.10 3.67 0 500.0 2.10 3.67 0\n";
  CHECK_THROWS_WITH(import_nccl_tests({rows("NCCL_MAX_NCHANNELS", 4, a100, mib)}, {}),
                    "c.txt: line 11: NCCL_MAX_NCHANNELS=4 (line 10): NCCL ran allreduce of 8 ranks on 1 host(s) (ring) "
                    "on 4 channel(s), where it runs 24 by default; a table of this run would stand for collectives on "
                    "other channels, and SMs, than any simulation runs: measure without that setting");
  CHECK_THROWS_WITH(import_nccl_tests({rows("NCCL_MIN_NCHANNELS", 32, a100, mib)}, {}),
                    Catch::Contains("NCCL_MIN_NCHANNELS=32 (line 10): NCCL ran allreduce of 8 ranks on 1 host(s) "
                                    "(ring) on 32 channel(s), where it runs 24 by default"));
  CHECK_THROWS_WITH(import_nccl_tests({rows("NCCL_MAX_CTAS", 8, a100, mib)}, {}),
                    Catch::Contains("on 8 channel(s), where it runs 24 by default"));
  // NCCL holds a bound to its 64 channels, a maximum below 1 to 1, and takes -2 for unset.
  CHECK_THROWS_WITH(import_nccl_tests({rows("NCCL_MIN_NCHANNELS", 1000000000000000000LL, a100, mib)}, {}),
                    Catch::Contains("on 64 channel(s), where it runs 24 by default"));
  CHECK_THROWS_WITH(import_nccl_tests({rows("NCCL_MAX_NCHANNELS", 0, a100, mib)}, {}),
                    Catch::Contains("on 1 channel(s), where it runs 24 by default"));
  CHECK(import_nccl_tests({rows("NCCL_MAX_NCHANNELS", -2, a100, mib)}, {}).collectives.size() == 1);
  // At or beyond the default, the bounds change nothing; NVLS's count is not the A100's rings'.
  CHECK(import_nccl_tests({rows("NCCL_MAX_NCHANNELS", 24, a100, mib)}, {}).collectives.size() == 1);
  CHECK(import_nccl_tests({rows("NCCL_MIN_NCHANNELS", 8, a100, mib)}, {}).collectives.size() == 1);
  CHECK(import_nccl_tests({rows("NCCL_NVLS_NCHANNELS", 8, a100, mib)}, {}).collectives.size() == 1);
  // 1 GiB on eight H100s runs on NVLS, which NCCL_NVLS_NCHANNELS sets and the rings' bound does not.
  const std::string gib = "1073741824 268435456 float sum -1 5000.0 214.75 375.80 0 5000.0 214.75 375.80 0\n";
  CHECK_THROWS_WITH(import_nccl_tests({rows("NCCL_NVLS_NCHANNELS", 8, h100, gib)}, {}),
                    Catch::Contains("NCCL_NVLS_NCHANNELS=8 (line 10): NCCL ran allreduce of 8 ranks on 1 host(s) "
                                    "(nvls) on 8 channel(s), where it runs 16 by default"));
  CHECK(import_nccl_tests({rows("NCCL_MAX_NCHANNELS", 4, h100, gib)}, {}).collectives.size() == 1);
  CHECK_THROWS_WITH(import_nccl_tests({rows("NCCL_MAX_CTAS", 4, h100, gib)}, {}),
                    Catch::Contains("on 4 channel(s), where it runs 16 by default"));
}

// A file of several rows-only logs, one after another, is each test with its own header: the
// same tables as the logs imported as files of their own, and two GPUs refused as two files are.
TEST_CASE("a file of several tests imports as the tests imported one by one") {
  const std::string all_reduce =
      "# all_reduce_perf -b 1K -e 4K -f 4 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
      "1024 256 float sum -1 48.0 0.02 0.04 0 48.0 0.02 0.04 0\n"
      "4096 1024 float sum -1 48.1 0.09 0.15 0 48.1 0.09 0.15 0\n";
  const std::string all_gather =
      "# all_gather_perf -b 1K -e 4K -f 4 -g 4 on one node with 4x NVIDIA A100-SXM4-80GB\n"
      "1024 64 float none -1 108.0 0.01 0.01 0 108.0 0.01 0.01 0\n"
      "4096 256 float none -1 109.0 0.04 0.03 0 109.0 0.04 0.03 0\n";
  const auto parse = [](const std::string& text, const char* name) {
    std::istringstream in(text);
    return parse_nccl_tests(in, name);
  };
  const Calibration apart = import_nccl_tests({parse(all_reduce, "ar.txt"), parse(all_gather, "ag.txt")}, {});
  const Calibration together = import_nccl_tests({parse(all_reduce + all_gather, "both.txt")}, {});
  REQUIRE(apart.collectives.size() == 2);
  REQUIRE(together.collectives.size() == apart.collectives.size());
  for (std::size_t i = 0; i < apart.collectives.size(); ++i) {
    const CollectiveTable &a = apart.collectives[i], &t = together.collectives[i];
    CHECK(t.op == a.op);
    CHECK(t.ranks == a.ranks);
    CHECK(t.nodes == a.nodes);
    REQUIRE(t.points.size() == a.points.size());
    for (std::size_t j = 0; j < a.points.size(); ++j) {
      CHECK(t.points[j].bytes == a.points[j].bytes);
      CHECK(t.points[j].time_us == a.points[j].time_us);
    }
  }
  // The all_gather's own: 4 ranks at 108 us, not the all_reduce's 8 ranks or its times.
  CHECK(together.collectives[1].op == CollOp::allgather);
  CHECK(together.collectives[1].ranks == 4);
  CHECK(together.collectives[1].points[0].time_us == 108.0);
  const std::string h200 =
      "# all_reduce_perf on one node with 8x H200, NCCL 2.19.3\n"
      "8589934592 2147483648 float sum -1 31517 272.55 476.96 0 31516 272.56 476.98 0\n";
  CHECK_THROWS_WITH(import_nccl_tests({parse(all_reduce + h200, "x.txt")}, {}),
                    "x.txt: line 4: ran on H200, but line 1 ran on NVIDIA A100-SXM4-80GB: a calibration file holds "
                    "one GPU's measurements (import each GPU's logs into a file of its own)");
  CHECK_THROWS_WITH(import_nccl_tests({parse(h200 + all_reduce, "y.txt")}, {}),
                    "y.txt: line 3: ran on NVIDIA A100-SXM4-80GB, but line 1 ran on H200: a calibration file holds "
                    "one GPU's measurements (import each GPU's logs into a file of its own)");
}

// A log of two element types for one shape (nccl-tests -d all) is a table per type, each the
// one the collectives of its type look up; --dtype keeps one type's rows. A type not measured
// falls back to the shape's other table, matched by bytes.
TEST_CASE("each element type's table serves the collectives of that type") {
  const auto two_types = [] {
    std::istringstream in(
        "# all_reduce_perf -b 8 -e 16 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
        "8 4 bfloat16 sum -1 40.0 0.00 0.00 0 39.0 0.00 0.00 0\n"
        "8 4 half sum -1 80.0 0.00 0.00 0 79.0 0.00 0.00 0\n");
    return parse_nccl_tests(in, "d.txt");
  };
  const Calibration both = import_nccl_tests({two_types()}, {});
  REQUIRE(both.collectives.size() == 2);
  const MeasuredTables tables({both});
  REQUIRE(tables.exact(CollOp::allreduce, 8, 1, 8, "bfloat16") != nullptr);
  CHECK(tables.exact(CollOp::allreduce, 8, 1, 8, "bfloat16")->points[0].time_us == 40.0);
  CHECK(tables.exact(CollOp::allreduce, 8, 1, 8, "half")->points[0].time_us == 80.0);
  CHECK(tables.reference(CollOp::allreduce, 8, 1, 8, "bfloat16")->dtype == "bfloat16");
  // Not measured in float: the shape's table of another type.
  REQUIRE(tables.exact(CollOp::allreduce, 8, 1, 8, "float") != nullptr);
  CHECK(tables.exact(CollOp::allreduce, 8, 1, 8, "float")->dtype != "float");
  // Another rank count of the tier: the nearest of the collective's own type first.
  CHECK(tables.reference(CollOp::allreduce, 4, 1, 4, "half")->dtype == "half");
  ImportOverrides bf16;
  bf16.dtype = "bfloat16";
  const Calibration one = import_nccl_tests({two_types()}, bf16);
  REQUIRE(one.collectives.size() == 1);
  CHECK(one.collectives[0].dtype == "bfloat16");
  ImportOverrides none;
  none.dtype = "float";
  CHECK_THROWS_WITH(import_nccl_tests({two_types()}, none),
                    "d.txt: no row of type float has a size and a time above zero (2 row(s) read)");
}

// nccl-tests built with MPI=1 names its programs all_reduce_perf_mpi: "_mpi" comes after "_perf".
TEST_CASE("the MPI builds of the nccl-tests programs are the same collectives") {
  CHECK(op_of_test("all_reduce_perf_mpi", "m.txt") == CollOp::allreduce);
  CHECK(op_of_test("./build/reduce_scatter_perf_mpi", "m.txt") == CollOp::reducescatter);
  CHECK(op_of_test("sendrecv_perf", "m.txt") == CollOp::sendrecv);
  CHECK_THROWS_WITH(op_of_test("all_reduce_mpi_perf", "m.txt"), Catch::StartsWith("m.txt: test 'all_reduce_mpi_perf'"));
}

namespace {

// Kernels of `n` GEMM (or attention) ops from 1e11 FLOPs up, each timed by the GPU model with
// the `truth` efficiencies: what a trace of them would measure.
std::vector<MeasuredKernel> kernels_of(const GpuSpec& truth, Precision precision, workload::OpClass cls, bool fp8,
                                       bool flash2 = false) {
  const hardware::GpuModel model(truth, precision);
  std::vector<MeasuredKernel> ks;
  for (double f = 1e11; f < 1e14; f *= 3) {
    MeasuredKernel k;
    k.op.cls = cls;
    k.op.fp8 = fp8;
    k.op.flash2 = flash2;
    k.op.flops = f;
    k.op.bytes = Bytes(1000);
    k.time_us = model.duration(k.op).us();
    k.matched = true;
    ks.push_back(k);
  }
  return ks;
}

// The H100 preset with a GEMM curve of its own: what kernels measured on some GPU would give.
GpuSpec h100_with(double gemm_max, double gemm_half_flops) {
  GpuSpec truth = io::load_cluster("dgx-h100-ndr", 8).gpu;
  truth.efficiency.gemm_max = gemm_max;
  truth.efficiency.gemm_half_flops = gemm_half_flops;
  return truth;
}

}  // namespace

TEST_CASE("the trace fit recovers efficiencies from kernels made with them") {
  const GpuSpec gpu = io::load_cluster("dgx-h100-ndr", 8).gpu;
  const GpuSpec truth = h100_with(0.65, 2e10);
  const TraceFit fit =
      fit_kernels(kernels_of(truth, Precision::bf16, workload::OpClass::gemm, false), gpu, Precision::bf16);
  const FittedEfficiency e = fit.efficiency();
  CHECK(*e.gemm_max == Approx(0.65).epsilon(1e-4));
  CHECK(*e.gemm_half_flops == Approx(2e10).epsilon(1e-3));
  CHECK_FALSE(e.attention_max.has_value());
  CHECK_FALSE(e.fp8_gemm_max.has_value());
  TraceFit copy = fit;
  CHECK(copy.find("attention_max")->why_not == "no attention kernel of a known op ran without communication");
  CHECK(copy.find("fp8_gemm_max")->why_not == "the run has no FP8 GEMMs (training.precision is not fp8)");
  // Kernels without a shape say nothing of K.
  CHECK_FALSE(e.gemm_half_k.has_value());
  CHECK(copy.find("gemm_half_k")->why_not == "the GEMM kernels that ran alone do not differ in K by a factor of 2");
}

// GEMMs twice as fast as the H100 preset's peak allows are not of a run of the scenario: the
// fit leaves gemm_max (and the GEMM curve fitted with it) out with a note, keeps the attention
// kernels' own figure, and the file it gives is one the reader takes.
TEST_CASE("the trace fit leaves out an efficiency above 1 and writes a file simulate reads") {
  const GpuSpec gpu = io::load_cluster("dgx-h100-ndr", 8).gpu;
  std::vector<MeasuredKernel> ks = kernels_of(h100_with(2.0, 2e10), Precision::bf16, workload::OpClass::gemm, false);
  GpuSpec attention = gpu;
  attention.efficiency.attention_max = 0.6;
  const auto att = kernels_of(attention, Precision::bf16, workload::OpClass::attention, false);
  ks.insert(ks.end(), att.begin(), att.end());
  TraceFit fit = fit_kernels(ks, gpu, Precision::bf16);
  const FittedEfficiency e = fit.efficiency();
  CHECK_FALSE(e.gemm_max.has_value());
  CHECK_FALSE(e.gemm_half_flops.has_value());
  REQUIRE(e.attention_max.has_value());
  CHECK(*e.attention_max == Approx(0.6).epsilon(1e-6));
  CHECK(fit.find("gemm_max")->why_not ==
        "the kernels imply 2, above 1, faster than the GPU's peak: the trace is not of this scenario");
  CHECK(fit.find("gemm_half_flops")->why_not ==
        "fitted with gemm_max, which the kernels put out of bounds: the trace is not of this scenario");
  Calibration c;
  c.provenance.gpu = gpu.name;
  c.compute.efficiency = e;
  CHECK(parse_calibration(calibration_json(c), "f.json").compute.efficiency.attention_max == e.attention_max);
  CHECK(out_of_bounds("hbm", 1.2) == "above 1, faster than the GPU's HBM bandwidth");
  CHECK(out_of_bounds("comm_slowdown", 12) == "above 10, the most a calibration file holds");
  CHECK(out_of_bounds("gemm_max", 0.9).empty());
}

// GEMMs of every size at every inner dimension: the depth and the size bend the curve apart,
// and the fit finds both (the preset's depth is 350 elements, the kernels' 600).
TEST_CASE("the trace fit recovers a GEMM's depth half point from kernels of several K") {
  const GpuSpec gpu = io::load_cluster("dgx-h100-ndr", 8).gpu;
  GpuSpec truth = h100_with(0.65, 2e10);
  truth.efficiency.gemm_half_k = 600;
  const hardware::GpuModel model(truth, Precision::bf16);
  std::vector<MeasuredKernel> ks;
  for (long long mn = 1024; mn <= 16384; mn *= 2)
    for (long long k = 256; k <= 16384; k *= 4) {
      MeasuredKernel kernel;
      kernel.op.cls = workload::OpClass::gemm;
      kernel.op.m = kernel.op.n = mn;
      kernel.op.k = k;
      kernel.op.flops = 2.0 * static_cast<double>(mn) * static_cast<double>(mn) * static_cast<double>(k);
      kernel.op.bytes = Bytes(1000);
      kernel.time_us = model.duration(kernel.op).us();
      kernel.matched = true;
      ks.push_back(kernel);
    }
  const FittedEfficiency e = fit_kernels(ks, gpu, Precision::bf16).efficiency();
  REQUIRE(e.gemm_half_k.has_value());
  CHECK(*e.gemm_half_k == Approx(600).epsilon(1e-3));
  CHECK(*e.gemm_half_flops == Approx(2e10).epsilon(1e-3));
  CHECK(*e.gemm_max == Approx(0.65).epsilon(1e-4));
  // Made without the term, the same kernels fit none.
  truth.efficiency.gemm_half_k = 0;
  const hardware::GpuModel flat(truth, Precision::bf16);
  for (MeasuredKernel& kernel : ks) kernel.time_us = flat.duration(kernel.op).us();
  const FittedEfficiency none = fit_kernels(ks, gpu, Precision::bf16).efficiency();
  REQUIRE(none.gemm_half_k.has_value());
  CHECK(*none.gemm_half_k == 0.0);
  CHECK(*none.gemm_max == Approx(0.65).epsilon(1e-4));
}

// Under FP8 training the FP8 GEMMs run against the FP8 peak and the BF16 ones (the LM head)
// against the BF16 peak: each maximum comes from its own GEMMs, the half-size from both.
TEST_CASE("the trace fit gives FP8 and BF16 GEMMs their own maximum") {
  const GpuSpec gpu = io::load_cluster("dgx-h100-ndr", 8).gpu;
  GpuSpec truth = h100_with(0.75, 3e10);
  truth.efficiency.fp8_gemm_max = 0.45;
  std::vector<MeasuredKernel> ks = kernels_of(truth, Precision::fp8, workload::OpClass::gemm, true);
  const auto bf16 = kernels_of(truth, Precision::fp8, workload::OpClass::gemm, false);
  ks.insert(ks.end(), bf16.begin(), bf16.begin() + 2);
  const FittedEfficiency e = fit_kernels(ks, gpu, Precision::fp8).efficiency();
  REQUIRE(e.fp8_gemm_max.has_value());
  REQUIRE(e.gemm_max.has_value());
  CHECK(*e.fp8_gemm_max == Approx(0.45).epsilon(1e-4));
  CHECK(*e.gemm_max == Approx(0.75).epsilon(1e-4));
  CHECK(*e.gemm_half_flops == Approx(3e10).epsilon(1e-3));
}

// FlashAttention-2 kernels reach 0.55 of attention_max on Hopper in the GPU model; the fit
// divides that out, so that a flash2 scenario calibrated on its own trace predicts that trace.
TEST_CASE("the trace fit gives FlashAttention-2 kernels' attention_max as the fused attention's figure") {
  const GpuSpec gpu = io::load_cluster("dgx-h100-ndr", 8).gpu;
  GpuSpec truth = gpu;
  truth.efficiency.attention_max = 0.5;
  const auto ks = kernels_of(truth, Precision::bf16, workload::OpClass::attention, false, true);
  const FittedEfficiency e = fit_kernels(ks, gpu, Precision::bf16).efficiency();
  REQUIRE(e.attention_max.has_value());
  CHECK(*e.attention_max == Approx(0.5).epsilon(1e-6));
}

// Just past a table's largest or smallest size the scaled model must start where the
// measurement ends: a collective 1 % larger cannot cost 2 % more when the model itself,
// latency-bound there, grows by 0.04 %.
TEST_CASE("the correction outside a table is continuous at the table's edges") {
  const ClusterSpec cluster = io::load_cluster("dgx-a100-80g-hdr", 8);
  Calibration c = parse_calibration(kMinimal, "c.json");
  // The first 14 sizes of the shipped A100 log (8 B to 64 KiB): latency-bound throughout.
  c.collectives[0].points = {{8, 40.12},    {16, 39.64},    {32, 39.06},    {64, 38.89},   {128, 39.53},
                             {256, 39.08},  {512, 39.17},   {1024, 42.05},  {2048, 38.39}, {4096, 39.12},
                             {8192, 39.39}, {16384, 39.47}, {32768, 40.93}, {65536, 40.97}};
  const MeasuredTables t({c});
  const auto at = [&](std::int64_t bytes) {
    return calibrate_collective(t, cluster, {}, {CollOp::allreduce, Bytes(bytes), {8, 1, 8}});
  };
  REQUIRE(at(65536).source == Source::measured);
  REQUIRE(at(66191).source == Source::scaled);
  CHECK(at(66191).choice.time().us() == Approx(40.97).epsilon(1e-3));
  REQUIRE(at(7).source == Source::scaled);
  CHECK(at(7).choice.time().us() == Approx(40.12).epsilon(1e-3));
  // The bandwidth-bound end of the whole log too.
  const MeasuredTables whole({parse_calibration(kMinimal, "c.json")});
  const auto big = calibrate_collective(whole, cluster, {}, {CollOp::allreduce, Bytes(1048576 + 1048), {8, 1, 8}});
  CHECK(big.source == Source::scaled);
  CHECK(big.choice.time().us() == Approx(40 * 1.001).epsilon(2e-3));
}

// A table of one latency-bound size fixes neither scale by the two ends' equations; its size
// alone must still carry to its neighbours. Measured 2006 us at 8 B (the A100 log's 40.12 us
// x 50), 4 B and 16 B, where the model stays within 0.01 % of its 8 B time, take 2006 us, not
// the model's 40 us (the one point's latency went unscaled: nothing but the measured size
// itself was slow).
TEST_CASE("a one-size table carries its time to the sizes beside it") {
  const ClusterSpec cluster = io::load_cluster("dgx-a100-80g-hdr", 8);
  Calibration c = parse_calibration(kMinimal, "c.json");
  c.collectives[0].points = {{8, 2006}};
  const MeasuredTables t({c});
  const auto at = [&](std::int64_t bytes) {
    return calibrate_collective(t, cluster, {}, {CollOp::allreduce, Bytes(bytes), {8, 1, 8}});
  };
  REQUIRE(at(8).source == Source::measured);
  for (const std::int64_t bytes : {4, 16}) {
    INFO(bytes << " B");
    REQUIRE(at(bytes).source == Source::scaled);
    CHECK(at(bytes).choice.time().us() == Approx(2006).epsilon(1e-4));
  }
  CHECK(at(16).choice.time().us() >= at(8).choice.time().us());
  CHECK(at(4).choice.time().us() <= at(8).choice.time().us());
}

// Each element type has a curve of its own. The block-scaled types once indexed past the end
// of a five-type array: an MXFP8 GEMM point landed in BF16's forward attention curve and an
// NVFP4 one in FP16's, so a calibration of FP4 GEMMs made attention "measured".
TEST_CASE("block-scaled GEMM points stay in their own type's curve") {
  Calibration c = parse_calibration(kMinimal, "c.json");
  c.compute.gemm = {{8192, 8192, 8192, stepsim::Precision::mxfp8, 250.0},
                    {8192, 8192, 8192, stepsim::Precision::nvfp4, 130.0}};
  const MeasuredTables t({c});
  const double flops = 2.0 * 8192 * 8192 * 8192;
  CHECK(t.gemm_us(8192, 8192, 8192, flops, stepsim::Precision::mxfp8) == Approx(250.0));
  CHECK(t.gemm_us(8192, 8192, 8192, flops, stepsim::Precision::nvfp4) == Approx(130.0));
  for (const auto dtype : {stepsim::Precision::bf16, stepsim::Precision::fp16, stepsim::Precision::fp8})
    CHECK_FALSE(t.gemm_us(8192, 8192, 8192, flops, dtype).has_value());
  for (const bool backward : {false, true})
    for (const auto dtype : {stepsim::Precision::bf16, stepsim::Precision::fp16})
      CHECK_FALSE(t.attention_us(flops, backward, dtype).has_value());
}

namespace stepsim::calibration {

// Every value a writer may put beyond the reader's range is left out with a note, so that the
// text written is one the reader takes: the reader's own answer is the oracle.
TEST_CASE("leave_out_unreadable leaves what the reader refuses, and the reader takes the rest") {
  Calibration c;
  c.provenance.gpu = "NVIDIA A100-SXM4-80GB";
  c.compute.launch_overhead_us = 12000;
  c.compute.dispatch_us = 899999999995;
  c.compute.comm_slowdown = 0.2;
  c.compute.efficiency.gemm_max = 1.3;
  c.compute.efficiency.hbm = 0.8;
  c.compute.gemm = {{1024, 1024, 1024, Precision::bf16, 0.0}, {2048, 2048, 2048, Precision::bf16, 100.0}};
  CollectiveTable t;
  t.op = CollOp::allreduce;
  t.ranks = 8;
  t.ranks_per_node = 8;
  t.points = {{1024, 0.0}, {1 << 20, 50.0}, {1 << 24, 400.0}};
  t.fit = fit_alpha_beta(t.points, t.op, t.ranks, 0.0);
  c.collectives = {t};
  CHECK_THROWS_AS(parse_calibration(calibration_json(c), "before.json"), InputError);
  const std::vector<std::string> notes = leave_out_unreadable(c);
  REQUIRE(notes.size() == 5);
  CHECK(notes[0] == "compute.launch_overhead_us 12000 left out: a calibration file holds microseconds from 0 to 10000");
  CHECK(notes[1].starts_with("compute.dispatch_us 899999999995 left out"));
  CHECK(notes[2] == "compute.efficiency.gemm_max 1.3 left out: a calibration file holds a fraction from 0.01 to 1");
  CHECK(notes[3].starts_with("compute.gemm/0 0 left out"));
  CHECK(notes[4].starts_with("collectives/0 (allreduce of 8 ranks) point/0 0 left out"));
  const Calibration back = parse_calibration(calibration_json(c), "after.json");
  CHECK_FALSE(back.compute.launch_overhead_us);
  CHECK_FALSE(back.compute.dispatch_us);
  CHECK(back.compute.comm_slowdown == 0.2);
  CHECK_FALSE(back.compute.efficiency.gemm_max);
  CHECK(back.compute.efficiency.hbm == 0.8);
  CHECK(back.compute.gemm.size() == 1);
  REQUIRE(back.collectives.size() == 1);
  CHECK(back.collectives[0].points.size() == 2);
}

}  // namespace stepsim::calibration

// Unfused attention's scores are one batched kernel of b·h/t GEMMs of s × s × d: on GPT 22B with
// TP 8 and micro-batch 4 (korthikanti-22b), 4 · 64/8 = 32 GEMMs of 2048 × 2048 × 96, 32 · 2 ·
// 2048² · 96 = 25.77 GFLOP. `calibrate plan` names the shape 2048x2048x96, and one GEMM of it
// measured (0.805 GFLOP in 4.027 us at 200 TFLOPS) is no time for the batch of 32: at the
// rate every point here shows, the batch takes 25.77e9 / 200e12 = 128.85 us.
TEST_CASE("a measured GEMM shape times one GEMM of it, not a batch of them") {
  Calibration c = parse_calibration(kMinimal, "c.json");
  const auto at_200_tflops = [](long long m, long long n, long long k) {
    return GemmPoint{m, n, k, stepsim::Precision::bf16, 2.0 * m * n * k / 200e12 * 1e6};
  };
  c.compute.gemm = {at_200_tflops(2048, 2048, 96), at_200_tflops(8192, 6144, 8192)};
  const MeasuredTables t({c});
  const double one = 2.0 * 2048 * 2048 * 96;
  CHECK(*t.gemm_us(2048, 2048, 96, one, stepsim::Precision::bf16) == Approx(4.026).epsilon(1e-3));
  CHECK(*t.gemm_us(2048, 2048, 96, 32 * one, stepsim::Precision::bf16) == Approx(128.85).epsilon(1e-3));
}

// A grouped GEMM of 8 local experts over 4,096 routed tokens (hidden 7,168, 2,048 outputs an
// expert) is 8 GEMMs of 512 tokens. With the expert's shape measured at 100 TFLOPS and the whole
// layer's at 500, the forward takes 8 × 2·512·2048·7168 / 100e12 = 8 × 150.32 us = 1202.6 us,
// not the 240.5 us of one GEMM of 4,096 rows; the weight gradient, whose K is the tokens, 8 times
// its 7168 × 2048 × 512 GEMM's time. Ungrouped, the op is the one GEMM of its shape.
TEST_CASE("a calibrated grouped GEMM is its experts' GEMMs, each timed at its own shape") {
  Calibration c = parse_calibration(kMinimal, "c.json");
  const auto at = [](long long m, long long n, long long k, double tflops) {
    return GemmPoint{m, n, k, Precision::bf16, 2.0 * m * n * k / (tflops * 1e12) * 1e6};
  };
  c.compute.gemm = {at(512, 2048, 7168, 100), at(4096, 2048, 7168, 500), at(7168, 2048, 512, 80),
                    at(7168, 2048, 4096, 500)};
  const MeasuredTables t({c});
  const hardware::GpuModel gpu(io::load_cluster("dgx-h100-ndr", 8).gpu, Precision::bf16);
  workload::OpCost fwd;
  fwd.cls = workload::OpClass::gemm;
  fwd.m = 4096;
  fwd.n = 2048;
  fwd.k = 7168;
  fwd.flops = 2.0 * 4096 * 2048 * 7168;
  fwd.groups = 8;
  const CalibratedTime grouped = calibrate_compute(t, gpu, fwd);
  CHECK(grouped.measured);
  CHECK(grouped.time.us() == Approx(8 * 150.324).epsilon(1e-4));
  workload::OpCost wgrad = fwd;
  wgrad.pass = workload::Pass::backward_weight;
  wgrad.m = 7168;
  wgrad.k = 4096;
  CHECK(calibrate_compute(t, gpu, wgrad).time.us() == Approx(8 * 2.0 * 7168 * 2048 * 512 / 80e12 * 1e6).epsilon(1e-4));
  fwd.groups = 1;
  CHECK(calibrate_compute(t, gpu, fwd).time.us() == Approx(240.518).epsilon(1e-4));
}

// CUDA names the H200's PCIe card "NVIDIA H200 NVL" (600 W, NVLink bridges of 2 or 4 cards, no
// NVSwitch); the preset "h200" is the H200 SXM (configs/gpus/h200.json: "NVIDIA H200 SXM 141
// GB", 700 W, in DGX/HGX H200 on NVSwitch). Its name says no form factor, so the family alone
// let the card's measurements stand for the SXM board.
TEST_CASE("a PCIe or NVL board stands only for a GPU whose name says that form") {
  CHECK(gpu_stands_for("NVIDIA H200", "h200"));
  CHECK(gpu_stands_for("NVIDIA B200", "b200"));
  CHECK(gpu_stands_for("NVIDIA H100 80GB HBM3", "h100-sxm5-80gb"));
  CHECK_FALSE(gpu_stands_for("NVIDIA H200 NVL", "h200"));
  CHECK_FALSE(gpu_stands_for("NVIDIA H100 PCIe", "h100"));
  CHECK(gpu_stands_for("NVIDIA H200 NVL", "h200-nvl"));
  CHECK(gpu_stands_for("NVIDIA H100 PCIe", "h100-pcie"));
  // Two CUDA names of one run still agree where one says less ("8x NVIDIA H100" in a comment).
  CHECK(gpu_matches("NVIDIA H100 PCIe", "NVIDIA H100"));
  Calibration c = parse_calibration(kMinimal, "c.json");
  c.provenance.gpu = "NVIDIA H200 NVL";
  CHECK_THROWS_WITH(check_gpu(c, "h200"),
                    "c.json: /provenance/gpu: measured on 'NVIDIA H200 NVL', but the scenario's GPU is 'h200', the "
                    "SXM board: an NVL board stands only for a GPU whose name says nvl (calibrate on that GPU, or "
                    "choose a cluster with the measured GPU)");
}
