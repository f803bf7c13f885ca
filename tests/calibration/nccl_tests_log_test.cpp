// The nccl-tests log parser: current and legacy rows, N/A, MPI prefixes, and bad lines.
#include <catch2/catch.hpp>

#include <sstream>

#include "calibration/nccl_tests_log.hpp"
#include "stepsim/error.hpp"

using stepsim::Bytes;
using stepsim::InputError;
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
          "time algbw busbw #wrong time algbw busbw #wrong), or 9 (in-place only) or 21 (with per-iteration "
          "statistics), got 2 column(s)");
  }
}

TEST_CASE("the shipped A100 sweep parses into 30 rows") {
  const auto log = stepsim::calibration::read_nccl_tests(STEPSIM_TEST_DATA "/nccl-tests/a100-80g-8gpu-allreduce-a.txt");
  REQUIRE(log.rows.size() == 30);
  CHECK(log.rows.back().size == Bytes(4294967296LL));
  CHECK(log.rows.back().out_of_place.busbw.gbytes_per_s() == Approx(232.44));
}
