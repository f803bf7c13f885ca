// Hostile command lines: every one ends in exit status 0 with a sound answer or exit status
// 2 with a message naming the flag or key, never a crash, a hang or an internal error.
#include <catch2/catch.hpp>

#include <string>

#include "run_stepsim.hpp"

namespace fs = std::filesystem;
using stepsim::testing::refusal;
using stepsim::testing::Run;
using stepsim::testing::Scratch;

namespace {

struct Case {
  const char* args;
  int status;
  const char* says;  // on stderr
};

void check_cases(std::initializer_list<Case> cases) {
  const Scratch dir("commands");
  for (const Case& c : cases) {
    const Run r = dir.run(c.args);
    INFO("stepsim " << c.args << "\nstdout: " << r.out.substr(0, 400) << "\nstderr: " << r.err);
    CHECK(r.status == c.status);
    CHECK(r.err.find(c.says) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("overflowing scenario numbers exit with status 2 and the key") {
  check_cases({
      {"simulate --set training.micro_batch=4611686018427387904 --set parallel.dp=4", 2, "--set: training.micro_batch"},
      {"simulate --set parallel.pp=4611686018427387904", 2,
       "parallel.pp: expected an integer from -2147483648 to 2147483647, got a number (4611686018427387904)"},
      {"simulate --set training.global_batch=1099511627776", 2, "--set: training.global_batch"},
      {"simulate --set 'cluster.gpu.flops.bf16=\"1 FLOPS\"'", 2, "--set: cluster.gpu.flops.bf16: must be between"},
      {"simulate --set 'cluster.intra_node.bandwidth=\"1 b/s\"'", 2, "--set: cluster.intra_node.bandwidth"},
      {"simulate --set 'cluster.intra_node.latency=\"1000 s\"'", 2, "--set: cluster.intra_node.latency"},
      {"simulate --set model.hidden=1e18", 2, "--set: model.hidden: must be between 1 and 262144"},
      {"simulate --set model.hidden=1e999", 2, "model.hidden"},
      {"simulate --set cluster.collective_tuning.ramp_exponent=1000", 2, "ramp_exponent"},
      {"simulate --set cluster.gpu.efficiency.gemm_max=1e-30", 2,
       "--set: cluster.gpu.efficiency.gemm_max: must be a fraction of the dense peak from 0.01 to 1, got 1e-30"},
      {"simulate --set cluster.collective_tuning.bus_efficiency=1e-30", 2,
       "--set: cluster.collective_tuning.bus_efficiency: must be a fraction of NCCL's modelled bus bandwidth from "
       "0.01 to 1"},
      {"simulate --set 'cluster.gpu.flops.bf16=\"1e308 PFLOPS\"'", 2,
       "--set: cluster.gpu.flops.bf16: '1e308 PFLOPS' is out of range"},
  });
}

// Latencies within their ranges can still carry a step past the 10^6 s stepsim simulates,
// which the key ranges' lower bound (compute at peak, gradients over the slowest link) does
// not see: 512 layers' TP collectives at 1 s of latency and launch each take 3.94e6 s. The
// step was reported (exit 0); it is refused with its largest part.
TEST_CASE("a step longer than stepsim simulates is refused with the part that makes it so", "[slow]") {
  check_cases({
      {"simulate --set model.layers=512 --set training.global_batch=2048 --set 'cluster.intra_node.latency=\"1 s\"' "
       "--set 'cluster.collective_tuning.launch_overhead=\"1 s\"'",
       2,
       "the step takes 3.941e+06 s, more than the 1000000 s stepsim simulates; most of it is exposed tp "
       "communication"},
  });
}

TEST_CASE("an empty scenario name is an error, not the default scenario") {
  check_cases({{"simulate ''", 2, "the scenario file name is empty"},
               {"compare trace.json ''", 2, "the scenario file name is empty"}});
}

// An empty TRACE is named as the argument, as an empty SCENARIO is, not looked for as a file
// whose error names nothing.
TEST_CASE("an empty trace name is an error naming TRACE") {
  check_cases({{"analyze ''", 2, "stepsim: error: <command line>: TRACE: the trace file or folder name is empty\n"},
               {"analyze - ''", 2, "stepsim: error: <command line>: TRACE: the trace file or folder name is empty\n"}});
}

// A NUL ends a C string: the file opened would be the name's part before it. Refused at the
// key's pointer, and the whole name printed, the NUL escaped as JSON writes it.
TEST_CASE("a NUL in a scenario file's calibration file name is refused at its pointer") {
  const Scratch dir("nul-calibration");
  dir.write("c.json", R"({"preset": "ddp-1.3b-64xa100", "calibration": "a100.calib.json\u0000junk"})");
  dir.write("m.json", R"({"preset": "ddp-1.3b-64xa100", "model": "x\u0000y"})");
  CHECK(refusal(dir.run("simulate c.json"),
                "stepsim: error: c.json: /calibration/0: expected a calibration file name without NUL characters, "
                "got \"a100.calib.json\\u0000junk\"\n") == "");
  CHECK(refusal(dir.run("simulate m.json"), "stepsim: error: m.json: /model: unknown model preset 'x\\u0000y' (") ==
        "");
}

TEST_CASE("a forced algorithm that does not apply names where it was given and the key") {
  check_cases({
      {"simulate --set collectives.algorithm=nvls", 2, "--set: collectives.algorithm: 'nvls' does not apply"},
      {"collective allreduce --gpus 16 --algorithm nvls", 2, "<command line>: --algorithm: 'nvls' does not apply"},
  });
}

TEST_CASE("collective sizes, factors and GPU counts have limits") {
  check_cases({
      {"collective allreduce --size 1e18B", 2, "--size: 1000000000000000000 bytes is more than the 1 TiB"},
      {"collective allreduce --sweep 1MiB:2MiB --factor 1.0000000000000002", 2,
       "--factor: expected a factor between 1.001 and 1000000"},
      {"collective allreduce --sweep 1MiB:2MiB --factor nan", 2, "--factor"},
      {"collective allreduce --sweep 8B:1TiB --factor 1.001", 2, "at most 10000 (raise --factor)"},
      {"collective allreduce --gpus 2147483647", 2, "--gpus: expected 2 to 1048576 GPUs"},
      {"collective allreduce --gpus 1", 2, "--gpus: a collective over 1 GPU moves no data"},
      {"collective allreduce --size 1TiB", 0, ""},
  });
}

TEST_CASE("a collective over more than a node but not whole nodes says how the GPUs must fill nodes") {
  const char* says =
      "<command line>: --gpus: expected at most 8 GPUs (one node of dgx-h100-ndr) or a multiple of 8 (whole "
      "nodes), got ";
  check_cases({
      {"collective allreduce --gpus 9", 2, says},
      {"collective allgather --gpus 12", 2,
       "a multiple of 8 (whole nodes), got 12; or place K on each of 12/K nodes "
       "with --ranks-per-node K"},
      {"collective alltoall --gpus 20", 2, says},
      {"collective allreduce --gpus 12 --ranks-per-node 4", 0, ""},
      {"collective allreduce --gpus 7", 0, ""},
  });
}

TEST_CASE("a negative rank is refused as written, not wrapped to 2^64 - 1") {
  check_cases({{"analyze x.json --rank -1", 2, "--rank: expected a rank of 0 or more, got -1"}});
}

TEST_CASE("a scenario path that is a directory or /dev/zero is an error naming it") {
  check_cases({
      {"simulate /", 2, "/: is a directory, not a scenario file"},
      {"simulate /dev/zero", 2, "/dev/zero: is larger than 64 MiB"},
  });
}

// The collective cost's shortfall is one for every protocol: the per-protocol efficiencies it
// replaced would do nothing, so a scenario that sets them is refused, saying why.
TEST_CASE("the retired LL and LL128 efficiencies are refused with what replaced them") {
  check_cases({
      {"simulate --set cluster.collective_tuning.ll128_efficiency=0.58", 2,
       "cluster.collective_tuning.ll128_efficiency: 'll128_efficiency' is no longer read: one shortfall of NCCL's "
       "model, the same for every protocol"},
      {"simulate --set cluster.collective_tuning.ll_efficiency=0.85", 2, "'ll_efficiency' is no longer read"},
      {"simulate --set cluster.collective_tuning.ramp_exponent=1.5", 2, "must be between 0.01 and 1"},
  });
}

TEST_CASE("the earlier internal errors on natural input are gone") {
  check_cases({
      {"simulate --set cluster.collective_tuning.ramp_exponent=1", 0, ""},
      {"simulate --set \"model.name=$(printf '\\377')\" --json -", 2, "not valid UTF-8"},
  });
}

// An error message quotes the input that is wrong: control characters in it (an ESC sequence
// that would clear the terminal) and bytes that are not UTF-8 are escaped, as NUL is; a file
// that is not UTF-8 says so and where, rather than "syntax error".
TEST_CASE("control characters and bytes that are not UTF-8 are escaped in errors, and named as such") {
  const Scratch dir("escapes");
  dir.write("esc.txt",
            "\x1b[2J\x1b]0;owned\x07"
            "data_parallel.bucket_cap_mb\n");
  dir.write("esc2.json", R"({"model": "\u001b[31mred"})");
  dir.write("bin.txt", std::string("\x97\x86\xefP\x99\x01\xff", 7) + "=1,2\n");
  dir.write("nu.json", "{\n  \"model\": \"gpt-1.3b\",\n  \xff\"cluster\": \"dgx-h100-ndr\"\n}\n");
  dir.write("bom.txt",
            "\xEF\xBB\xBF"
            "data_parallel.bucket_cap_mb\xff=1,2\n");
  const Run esc = dir.run("sweep --spec esc.txt");
  CHECK(refusal(esc,
                "stepsim: error: esc.txt: line 1: \\u001b[2J\\u001b]0;owned\\u0007data_parallel.bucket_cap_mb: "
                "expected KEY=V1,V2,...") == "");
  CHECK(esc.err.find('\x1b') == std::string::npos);
  const Run esc2 = dir.run("simulate esc2.json");
  CHECK(refusal(esc2, "stepsim: error: esc2.json: /model: unknown model preset '\\u001b[31mred' (") == "");
  CHECK(esc2.err.find('\x1b') == std::string::npos);
  // The spec file is read as UTF-8 text: its first bad byte is named, counted from 1.
  CHECK(refusal(dir.run("sweep --spec bin.txt"),
                "stepsim: error: bin.txt: line 1, column 1: not valid UTF-8 at byte 1 (0x97): expected UTF-8 text\n") ==
        "");
  CHECK(
      refusal(dir.run("simulate nu.json"),
              "stepsim: error: nu.json: line 3, column 3: not valid UTF-8 at byte 28 (0xFF): expected UTF-8 text\n") ==
      "");
  // After a byte order mark, which is skipped, the byte still counts from the file's first.
  CHECK(refusal(dir.run("sweep --spec bom.txt"), "bom.txt: line 1, column 28: not valid UTF-8 at byte 31 (0xFF)") ==
        "");
}

// A UTF-8 byte order mark first is accepted in every text input, as in scenario files: a spec
// file's first key and an nccl-tests log's first line are read as without it.
TEST_CASE("a byte order mark is skipped in spec files and nccl-tests logs as in scenario files") {
  const Scratch dir("bom");
  const std::string bom = "\xEF\xBB\xBF";
  dir.write("spec.txt", bom + "data_parallel.bucket_cap_mb=1,2\n");
  dir.write("plain.txt", "data_parallel.bucket_cap_mb=1,2\n");
  const Run with = dir.run("sweep --spec spec.txt");
  INFO(with.err);
  REQUIRE(with.status == 0);
  CHECK(with.out == dir.run("sweep --spec plain.txt").out);
  const std::string log =
      "# all_reduce_perf -b 1024 -e 2048 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
      "1024 256 float sum -1 25.00 0.04 0.07 0 25.00 0.04 0.07 0\n"
      "2048 512 float sum -1 30.00 0.07 0.12 0 30.00 0.07 0.12 0\n";
  dir.write("bom-log.txt", bom + log);
  dir.write("log.txt", log);
  const Run imported = dir.run("calibrate import-nccl-tests bom-log.txt -o a.json");
  INFO(imported.err);
  REQUIRE(imported.status == 0);
  REQUIRE(dir.run("calibrate import-nccl-tests log.txt -o b.json").status == 0);
  CHECK(stepsim::testing::slurp(dir.file("a.json")).find("\"points\"") != std::string::npos);
  dir.write("bom-log.json", bom + R"({"version":2,"args":["./build/all_reduce_perf"],"config":{"nthreads":1,"ngpus":8,
    "devices":[{"rank":0,"hostname":"gpu01","device_info":"NVIDIA H200"}]},
    "results":[{"size":1024,"count":256,"type":"float","redop":"sum","root":"-1","out_of_place":null,
    "in_place":{"time":21.0,"alg_bw":0.05,"bus_bw":0.09,"nwrong":0.0}}]})");
  const Run json = dir.run("calibrate import-nccl-tests bom-log.json -o c.json");
  INFO(json.err);
  CHECK(json.status == 0);
}
