// stepsim-calibrate's GPU-free parts: sweep plans, statistics over timings, the output file.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "calibrate_core.hpp"
#include "calibration/calibration.hpp"

using namespace stepsim;
using namespace stepsim::calibrate_tool;

TEST_CASE("the GEMM plan covers transformer shapes without repeats, smallest first") {
  const auto all = gemm_plan(0);
  REQUIRE(all.size() > 100);
  for (std::size_t i = 1; i < all.size(); ++i) {
    CHECK(all[i - 1].flops() <= all[i].flops());
    CHECK(all[i - 1] != all[i]);
  }
  // Llama-3-8B's MLP up-projection at 8192 tokens with TP 8.
  CHECK(std::find(all.begin(), all.end(), GemmShape{8192, 14336 / 8, 4096}) != all.end());
  const auto some = gemm_plan(12);
  CHECK(some.size() <= 12);
  CHECK(some.front() == all.front());
  CHECK(some.back() == all.back());
}

// The shapes `stepsim calibrate plan` asks for, as --gemm MxNxK:dtype.
TEST_CASE("a --gemm shape is MxNxK with its precision") {
  const GemmRequest g = parse_gemm("8192x14336x4096:fp8");
  CHECK(g.shape == GemmShape{8192, 14336, 4096});
  CHECK(g.dtype == Precision::fp8);
  CHECK(parse_gemm("64x128x256").dtype == Precision::bf16);
  CHECK_THROWS_WITH(parse_gemm("8192x14336:bf16"),
                    "--gemm: expected MxNxK[:bf16|fp8] with whole M, N, K from 1 to 16777216, got '8192x14336:bf16'");
  CHECK_THROWS_WITH(parse_gemm("8x8x8:int4"),
                    "--gemm: expected MxNxK[:bf16|fp8] with whole M, N, K from 1 to 16777216, got '8x8x8:int4'");
  CHECK_THROWS_AS(parse_gemm("0x8x8"), std::invalid_argument);
}

// GEMMs on zeros hold higher clocks than on data: inputs are random, and finite read as
// BF16 (byte pairs) or as FP8 E4M3 (bytes), whose only NaNs are 0x7f and 0xff.
TEST_CASE("GEMM inputs are random bytes that are finite as BF16 and as FP8") {
  const std::vector<unsigned char> a = random_inputs(1 << 16, 1), b = random_inputs(1 << 16, 2);
  REQUIRE(a.size() == 1 << 16);
  CHECK(a != b);
  std::size_t zeros = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK((a[i] & 0x7f) != 0x7f);
    zeros += a[i] == 0 ? 1 : 0;
    if (i % 2 == 1) {
      const unsigned exponent = (static_cast<unsigned>(a[i] & 0x7f) << 1) | (a[i - 1] >> 7);
      CHECK(exponent != 0xff);  // not Inf or NaN as BF16
    }
  }
  CHECK(zeros < a.size() / 64);
}

TEST_CASE("size plans and group sizes follow nccl-tests' -b -e -f and the local GPUs") {
  CHECK(size_plan(8, 128, 2) == std::vector<double>{8, 16, 32, 64, 128});
  CHECK(size_plan(1, 100, 10) == std::vector<double>{1, 10, 100});
  CHECK_THROWS_AS(size_plan(0, 8, 2), std::invalid_argument);
  CHECK_THROWS_AS(size_plan(8, 4, 2), std::invalid_argument);
  CHECK_THROWS_AS(size_plan(8, 64, 1), std::invalid_argument);
  CHECK(group_sizes(8) == std::vector<int>{2, 4, 8});
  CHECK(group_sizes(6) == std::vector<int>{2, 4, 6});
  CHECK(group_sizes(1).empty());
}

TEST_CASE("a summary is the median of positive timings and refuses zeros") {
  const Summary s = summarize({5, 1, 3, 100}, "x");
  CHECK(s.median == 4);
  CHECK(s.min == 1);
  CHECK(s.max == 100);
  CHECK(s.samples == 4);
  CHECK(summarize({2, 9, 4}, "x").median == 4);
  CHECK_THROWS_WITH(summarize({}, "GEMM"), "GEMM: no timing was taken");
  CHECK_THROWS_WITH(summarize({1, 0}, "copy"), "copy: a timing of 0 us is not a measurement");
  CHECK_THROWS_AS(summarize({1, std::numeric_limits<double>::quiet_NaN()}, "copy"), std::runtime_error);
}

TEST_CASE("the recorder writes a calibration file that stepsim reads back") {
  calibration::Provenance p;
  p.gpu = "NVIDIA H200";
  p.gpu_count = 8;
  p.nccl = "2.27.3";
  Recorder rec(p);
  rec.gemm({8192, 8192, 8192}, Precision::bf16, summarize({1400, 1390, 1410}, "g"));
  rec.copy(2e9, summarize({500}, "c"));
  rec.launch_overhead(summarize({4.5}, "l"));
  rec.collective(CollOp::allreduce, 8, 1048576, summarize({60}, "a"));
  rec.collective(CollOp::allreduce, 8, 8, summarize({20}, "a"));
  rec.slowdown(summarize({1000}, "alone"), summarize({1150}, "beside"));
  const calibration::Calibration c = calibration::parse_calibration(rec.json(), "out.json");
  CHECK(c.provenance.gpu == "NVIDIA H200");
  REQUIRE(c.compute.gemm.size() == 1);
  CHECK(c.compute.gemm[0].time_us == 1400);
  CHECK(c.compute.memory[0].gbytes_per_s == Approx(4000));
  CHECK(*c.compute.launch_overhead_us == 4.5);
  CHECK(*c.compute.comm_slowdown == Approx(0.15));
  REQUIRE(c.collectives.size() == 1);
  CHECK(c.collectives[0].points.front().bytes == 8);  // sorted on output
  CHECK(c.collectives[0].fit.alpha_us > 0);
}

// NCCL reads NCCL_ALGO and NCCL_PROTO from the environment of the process whose collectives it
// runs (tuning.cc: "NCCL_ALGO set by environment to Ring"), so what stepsim-calibrate times under
// NCCL_ALGO=Ring is ring's time: its tables say so, as import-nccl-tests labels such a log, and
// stand only for collectives forced alike.
TEST_CASE("collectives timed under NCCL_ALGO and NCCL_PROTO are recorded as forced to them") {
  CHECK(nccl_forced(nullptr, nullptr).algorithm.empty());
  CHECK(nccl_forced("", "").protocol.empty());
  const RunSettings ring = nccl_forced("Ring", "simple");
  CHECK(ring.algorithm == "ring");
  CHECK(ring.protocol == "simple");
  CHECK(nccl_forced("NVLSTree", nullptr).algorithm == "nvls-tree");
  CHECK_THROWS_WITH(nccl_forced("^NVLS", nullptr),
                    "NCCL_ALGO=^NVLS: expected one of Ring, Tree, NVLS, NVLSTree, CollnetDirect, PAT (or the variable "
                    "unset): a calibration table stands for one forced setting or NCCL's own choice");
  CHECK_THROWS_WITH(nccl_forced(nullptr, "LL,LL128"), Catch::StartsWith("NCCL_PROTO=LL,LL128: expected one of LL, "
                                                                        "LL128, Simple"));
  calibration::Provenance p;
  p.gpu = "NVIDIA H200";
  Recorder rec(p, ring);
  rec.collective(CollOp::allreduce, 8, 1048576, summarize({60}, "a"));
  rec.collective(CollOp::allreduce, 8, 8, summarize({20}, "a"));
  const calibration::Calibration c = calibration::parse_calibration(rec.json(), "out.json");
  REQUIRE(c.collectives.size() == 1);
  CHECK(c.collectives[0].algorithm == "ring");
  CHECK(c.collectives[0].protocol == "simple");
  // Unforced, a table is NCCL's own choice, as before.
  Recorder plain(p);
  plain.collective(CollOp::allreduce, 8, 8, summarize({20}, "a"));
  CHECK(calibration::parse_calibration(plain.json(), "out.json").collectives[0].algorithm.empty());
}

// stepsim-calibrate's slowdown is (GEMM beside a collective) / (GEMM alone) - 1. Starting the
// collective takes the host a thread per GPU and an NCCL enqueue each, tens to hundreds of
// microseconds against an 8192^3 BF16 GEMM's ~1.5 ms on an H100: inside the timed window they
// read as slowdown of the GEMM. On a clock where starting the background costs 100 us and the
// GEMM beside it 1000 us, the window holds the 1000 us alone.
TEST_CASE("a GEMM timed beside a collective is timed after the collective has been started") {
  double now = 0, started = -1, stopped = -1;
  run_beside([&] { started = now; }, [&] { stopped = now; }, [&] { now += 100; }, [&] { now += 1000; });
  CHECK(stopped - started == 1000);
  CHECK(started == 100);
}
