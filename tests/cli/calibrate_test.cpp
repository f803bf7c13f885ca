// `stepsim calibrate` and `--calibration` end to end: nccl-tests logs in, measured sizes
// reproduced; a trace of changed efficiencies in, the changes fitted back; bad files refused.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>

#include "cli/run_stepsim.hpp"

namespace stepsim {
namespace {

using testing::Scratch;

const std::string kData = STEPSIM_TEST_DATA;

boost::json::value json_of(const std::string& text) { return boost::json::parse(text); }

double number(const boost::json::value& v, const char* key) { return v.at(key).to_number<double>(); }

// An AllReduce on two DGX A100 nodes at 230 GB/s of bus bandwidth at 1 GiB: NCCL's Tree on two
// nodes, past the 8 NICs' 200 GB/s that the model's Ring is held to.
const std::string kTwoA100Nodes =
    "# mpirun -np 16 -N 8 all_reduce_perf -b 8 -e 1G -f 8 -g 1 on two DGX A100 nodes, 8x NVIDIA "
    "A100-SXM4-80GB each\n"
    "8 2 float sum -1 60.0 0.00 0.00 0 60.0 0.00 0.00 0\n"
    "134217728 33554432 float sum -1 1100.0 122.02 228.8 0 1100.0 122.02 228.8 0\n"
    "1073741824 268435456 float sum -1 8750.0 122.71 230.1 0 8750.0 122.71 230.1 0\n";

}  // namespace

TEST_CASE("a calibration imported from nccl-tests reproduces every measured size within 5 percent") {
  Scratch s("calib-import");
  const auto import =
      s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o a.json");
  REQUIRE(import.status == 0);
  CHECK(import.out.find("allreduce      8 rank(s), 1 node(s) x 8       30") != std::string::npos);
  const auto run =
      s.run("collective allreduce --cluster dgx-a100-80g-hdr --gpus 8 --sweep 8B:4GiB --calibration a.json --json -");
  REQUIRE(run.status == 0);
  const auto rows = json_of(run.out).as_array();
  REQUIRE(rows.size() == 30);
  double worst_model = 0;
  for (const auto& r : rows) {
    INFO("size " << number(r, "size_bytes"));
    CHECK(r.at("source").as_string() == "measured");
    CHECK(std::abs(number(r, "error")) < 0.05);
    worst_model = std::max(worst_model, std::abs(number(r, "model_error")));
  }
  // The uncalibrated model is shown beside it, and it is further off.
  CHECK(worst_model > 0.05);
}

// The bus bandwidth import prints is the fit's: the largest size's with alpha taken off, by hand
// 134217728 B / (1305.0 - 40.12) us = 106.11 GB/s algbw, x 2(8-1)/8 = 185.69 GB/s, where the log's
// own busbw for that row, latency counted in, is 179.99. The label says which it is.
TEST_CASE("import-nccl-tests prints the fit's bus bandwidth and says it is the fit's") {
  Scratch s("calib-busbw");
  s.write("full.txt",
          "# all_reduce_perf -b 8 -e 128M -f 2 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
          "8 2 float sum -1 40.12 0.00 0.00 0 38.85 0.00 0.00 0\n"
          "1024 256 float sum -1 42.05 0.02 0.04 0 39.65 0.03 0.05 0\n"
          "1048576 262144 float sum -1 52.61 19.93 34.88 0 53.03 19.77 34.60 0\n"
          "134217728 33554432 float sum -1 1305.0 102.85 179.99 0 1312.3 102.27 178.98 0\n");
  const auto run = s.run("calibrate import-nccl-tests full.txt -o a.json");
  INFO(run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("alpha(us)  fit busbw(GB/s)") != std::string::npos);
  const double busbw = 134217728 / (1305.0 - 40.12) / 1e3 * 2 * 7 / 8;
  CHECK(run.out.find(fmt::format(" 40.12 {:>16.2f}", busbw)) != std::string::npos);
  CHECK(fmt::format("{:.2f}", busbw) == "185.69");
  CHECK(run.out.find("fit busbw: the largest size's bus bandwidth with alpha taken off") != std::string::npos);
}

TEST_CASE("sizes outside the measured range fall back to the model scaled by the measured shape") {
  Scratch s("calib-outside");
  REQUIRE(s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/h200-8gpu-allreduce-8GiB.txt -o h.json").status ==
          0);
  const auto run = s.run("collective allreduce --cluster dgx-h200-ndr --sweep 1GiB:8GiB --calibration h.json --json -");
  REQUIRE(run.status == 0);
  const auto rows = json_of(run.out).as_array();
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].at("source").as_string() == "scaled");
  CHECK(rows[3].at("source").as_string() == "measured");
  CHECK(number(rows[3], "time_us") == Approx(31517).epsilon(1e-6));
  // The one measured point is faster than the model: the bandwidth scale carries to 1 GiB.
  CHECK(number(rows[0], "time_us") < number(rows[0], "model_time_us"));
}

// A two-node DGX A100 table where NCCL beats the model (230 GB/s busbw at 1 GiB, above the 8
// HDR NICs' 200: on two nodes NCCL's tree does) scales the model of every cross-node shape. On
// 8 nodes with one rank each, that rank's ring moves 2(n-1)/n of the size over its own HDR NIC,
// 200 Gb/s = 25 GB/s, so the busbw can be no more than 25 GB/s, as the simulation's flows keep
// it (0.0476 s for this size's 674.5 MB bucket: 1.75 x 674.5 MB / 25 GB/s = 47.2 ms plus
// latency); before the limit the row said 28.96 GB/s.
// On two DGX A100 nodes NCCL runs its tree, whose busbw passes the 8 HDR NICs' 200 GB/s (230
// here); the model's ring would move 2(n-1)/n / 8 of the size over each GPU's 25 GB/s NIC and
// cannot, and the simulation held the measured all-reduce to the ring's links: 49.66 ms for
// the one 5026.5 MiB bucket (5270667264 B) where the table says 35000 us x 5270667264 /
// 4294967296 = 42951 us (log-log between 4 GiB and 8 GiB, whose times are proportional to the
// size). The measurement now runs as a candidate whose links carry it (the tree).
TEST_CASE("a measured collective faster than the model's algorithm carries runs as one that carries it") {
  Scratch s("calib-carried");
  std::string log =
      "# mpirun -np 16 -N 8 all_reduce_perf -b 8 -e 8G -g 1 on two DGX A100 nodes, 8x NVIDIA A100-SXM4-80GB "
      "each\n";
  for (const auto& [size, us] : {std::pair<long long, double>{8, 60.0},
                                 {134217728, 1100.0},
                                 {1073741824, 8750.0},
                                 {4294967296, 35000.0},
                                 {8589934592, 70000.0}})
    log += fmt::format("{} {} float sum -1 {} 0 0 0 {} 0 0 0\n", size, size / 4, us, us);
  s.write("two.txt", log);
  REQUIRE(s.run("calibrate import-nccl-tests two.txt -o two.json").status == 0);
  const auto run = s.run(
      "simulate ddp-1.3b-64xa100 --set parallel.dp=16 --set training.global_batch=32 --set "
      "data_parallel.bucket_cap_mb=100000 --set data_parallel.first_bucket_mb=100000 --set "
      "data_parallel.overlap_grad_reduce=false --calibration two.json --json -");
  REQUIRE(run.status == 0);
  const auto report = json_of(run.out);
  CHECK(number(report.at("comm_s"), "dp") == Approx(0.042951).epsilon(1e-4));
  const auto row = json_of(s.run("collective allreduce --cluster dgx-a100-80g-hdr --gpus 16 --size 1GiB "
                                 "--calibration two.json --json -")
                               .out)
                       .as_array()
                       .at(0);
  CHECK(number(row, "time_us") == Approx(8750.0));
  CHECK(row.at("algorithm").as_string() == "tree");
}

TEST_CASE("a calibrated collective is no faster than the fabric carries its bytes") {
  Scratch s("calib-fabric-limit");
  s.write("two.txt", kTwoA100Nodes);
  REQUIRE(s.run("calibrate import-nccl-tests two.txt -o two.json").status == 0);
  const auto run = s.run(
      "collective allreduce --cluster dgx-a100-80g-hdr --gpus 8 --ranks-per-node 1 --size 1GiB --calibration "
      "two.json --json -");
  REQUIRE(run.status == 0);
  const auto row = json_of(run.out).as_array().at(0);
  CHECK(row.at("source").as_string() == "scaled");
  CHECK(number(row, "busbw_gbps") <= 25.0);
  // Still the calibration's, not the model's: faster than the model alone.
  CHECK(number(row, "time_us") < number(row, "model_time_us"));
}

TEST_CASE("a calibrated simulation says which costs were measured and moves the step") {
  Scratch s("calib-simulate");
  REQUIRE(s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/h200-8gpu-allreduce-8GiB.txt -o h.json").status ==
          0);
  const auto plain = s.run("simulate --set cluster=dgx-h200-ndr --json -");
  const auto calibrated = s.run("simulate --set cluster=dgx-h200-ndr --calibration h.json --json -");
  REQUIRE(plain.status == 0);
  REQUIRE(calibrated.status == 0);
  const auto a = json_of(plain.out), b = json_of(calibrated.out);
  CHECK_FALSE(a.as_object().contains("calibration"));
  const auto& c = b.at("calibration");
  CHECK(c.at("files").as_array().size() == 1);
  CHECK(number(c, "comm_scaled_fraction") > 0.5);
  CHECK(number(b, "step_time_s") < number(a, "step_time_s"));
  CHECK(b.at("config").at("calibration").as_array().size() == 1);
}

// The H200 log has one size (8 GiB, float): the default scenario's TP AllReduces (bf16, far
// smaller) are the model scaled by that one point of the same shape, looked up by bytes; its
// data-parallel AllReduce over 8 nodes has no table of its tier.
TEST_CASE("a calibrated simulation labels each cost measured, scaled from N points or the model alone") {
  Scratch s("calib-labels");
  REQUIRE(s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/h200-8gpu-allreduce-8GiB.txt -o h.json").status ==
          0);
  const auto run = s.run("simulate --set cluster=dgx-h200-ndr --calibration h.json --json -");
  REQUIRE(run.status == 0);
  const auto report = json_of(run.out);
  const auto& c = report.at("calibration");
  REQUIRE(c.at("measured").as_array().size() == 1);
  CHECK(c.at("measured").at(0).as_string() ==
        "allreduce 8 ranks on 1 node(s) x 8: scaled from 1 point of allreduce 8 ranks on 1 node(s) x 8 (float, "
        "matched by bytes)");
  CHECK(c.at("not_measured").at(0).as_string() == "allreduce 8 ranks on 8 node(s) x 1");
}

// DDP over one node's 8 H100s reduces its gradients in fp32 or bf16 (grad_reduce_dtype): with
// an nccl-tests log of both types, each run's AllReduce takes its own type's table, and with
// the bf16 table alone the fp32 run takes it by bytes and says so.
TEST_CASE("a collective takes the table of its own element type") {
  Scratch s("calib-dtype");
  std::string log = "# all_reduce_perf -b 1M -e 1G -g 8 on one node with 8x NVIDIA H100 80GB HBM3\n";
  std::string bf16_only = log;
  for (long long size = 1 << 20; size <= (1LL << 30); size *= 2) {
    // float at 300 GB/s, bfloat16 at 200 GB/s algbw, 20 us apart: both slower than NVLS allows.
    const double us_float = 20 + static_cast<double>(size) / 300e3, us_bf16 = 20 + static_cast<double>(size) / 200e3;
    log += fmt::format("{} {} float sum -1 {:.2f} 0 0 0 {:.2f} 0 0 0\n", size, size / 4, us_float, us_float);
    const std::string row =
        fmt::format("{} {} bfloat16 sum -1 {:.2f} 0 0 0 {:.2f} 0 0 0\n", size, size / 2, us_bf16, us_bf16);
    log += row;
    bf16_only += row;
  }
  s.write("both.txt", log);
  s.write("bf16.txt", bf16_only);
  REQUIRE(s.run("calibrate import-nccl-tests both.txt -o both.json").status == 0);
  REQUIRE(s.run("calibrate import-nccl-tests bf16.txt -o bf16.json").status == 0);
  s.write("ddp.json", R"({"model": "gpt-1.3b", "cluster": "dgx-h100-ndr", "parallel": {"tp": 1, "dp": 8},
    "training": {"global_batch": 8, "micro_batch": 1}, "data_parallel": {"kind": "ddp"}})");
  const auto labels = [&](const std::string& grads, const char* file) {
    const auto run = s.run(fmt::format(
        "simulate ddp.json --set data_parallel.grad_reduce_dtype={} --calibration {} --json -", grads, file));
    REQUIRE(run.status == 0);
    const auto report = json_of(run.out);
    std::string all;
    for (const auto& l : report.at("calibration").at("measured").as_array()) all += std::string(l.as_string()) + "\n";
    return all;
  };
  const std::string fp32 = labels("fp32", "both.json");
  INFO(fp32);
  CHECK(fp32.find("allreduce 8 ranks on 1 node(s) x 8: measured (float)\n") != std::string::npos);
  CHECK(fp32.find("bfloat16") == std::string::npos);
  const std::string bf16 = labels("bf16", "both.json");
  INFO(bf16);
  CHECK(bf16.find("allreduce 8 ranks on 1 node(s) x 8: measured (bfloat16)\n") != std::string::npos);
  CHECK(bf16.find("(float") == std::string::npos);
  const std::string by_bytes = labels("fp32", "bf16.json");
  INFO(by_bytes);
  CHECK(by_bytes.find("allreduce 8 ranks on 1 node(s) x 8: measured (bfloat16, matched by bytes)\n") !=
        std::string::npos);
}

TEST_CASE("from-trace fits changed GPU efficiencies back within 2 percent") {
  Scratch s("calib-trace");
  const std::string changed =
      "--set cluster.gpu.efficiency.gemm_max=0.7 --set cluster.gpu.efficiency.gemm_half_flops=1e10 "
      "--set cluster.gpu.efficiency.attention_max=0.5 --set cluster.gpu.efficiency.hbm=0.7 "
      "--set cluster.gpu.efficiency.comm_slowdown=0.2 --set cluster.gpu.efficiency.gemm_half_k=700";
  const auto sim = s.run("simulate " + changed + " --trace step.json --json report.json");
  REQUIRE(sim.status == 0);
  const auto fit = s.run("calibrate from-trace step.json \"\" -o fitted.json");
  REQUIRE(fit.status == 0);
  const auto eff = json_of(testing::slurp(s.file("fitted.json"))).at("compute").at("efficiency");
  CHECK(number(eff, "gemm_max") == Approx(0.7).epsilon(0.02));
  CHECK(number(eff, "gemm_half_flops") == Approx(1e10).epsilon(0.02));
  CHECK(number(eff, "gemm_half_k") == Approx(700).epsilon(0.02));
  CHECK(number(eff, "attention_max") == Approx(0.5).epsilon(0.02));
  CHECK(number(eff, "hbm") == Approx(0.7).epsilon(0.02));
  CHECK(number(eff, "comm_slowdown") == Approx(0.2).epsilon(0.02));
  const auto again = s.run("simulate --calibration fitted.json --json -");
  REQUIRE(again.status == 0);
  const double trace_step = number(json_of(testing::slurp(s.file("report.json"))), "step_time_s");
  CHECK(number(json_of(again.out), "step_time_s") == Approx(trace_step).epsilon(0.02));
}

TEST_CASE("a slowdown measured beside a collective wins over the one derived from NCCL's SMs and HBM bandwidth") {
  Scratch s("calib-derived");
  s.write("measured.json", R"({"stepsim_calibration": 1, "provenance": {"gpu": "h100", "sources": []},
                               "compute": {"comm_slowdown": 0.2}})");
  const auto fitted = s.run("simulate --calibration measured.json --json -");
  const auto derived =
      s.run("simulate --calibration measured.json --set cluster.gpu.efficiency.derived_comm_slowdown=true --json -");
  const auto alone = s.run("simulate --set cluster.gpu.efficiency.derived_comm_slowdown=true --json -");
  REQUIRE(fitted.status == 0);
  REQUIRE(derived.status == 0);
  REQUIRE(alone.status == 0);
  CHECK(number(json_of(derived.out), "step_time_s") == number(json_of(fitted.out), "step_time_s"));
  CHECK(number(json_of(alone.out), "step_time_s") != number(json_of(fitted.out), "step_time_s"));
}

// The trace ran on A100s (its deviceProperties say "NVIDIA A100-PG509-200"): fitted against
// the default scenario on an A100 cluster it runs; against the default's H100 it is refused.
TEST_CASE("from-trace on a trace of another model runs and says what it could not fit") {
  Scratch s("calib-real");
  const std::string trace = kData + "/traces/resnet50-ddp-a100-rank0of2.json.gz";
  const auto run = s.run("calibrate from-trace " + trace + " \"\" -o f.json --set cluster=dgx-a100-80g-hdr");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("not fitted: the trace has no attention kernels") != std::string::npos);
  CHECK(run.out.find("0 matched to <default> ops by name") != std::string::npos);
  CHECK(testing::slurp(s.file("f.json"))
            .find("\"command\": \"stepsim calibrate from-trace " + trace +
                  " <default> --set cluster=dgx-a100-80g-hdr\"") != std::string::npos);
  const auto other_gpu = s.run("calibrate from-trace " + trace + " \"\" -o g.json");
  CHECK(other_gpu.status == 2);
  CHECK(other_gpu.err.find("resnet50-ddp-a100-rank0of2.json.gz: /deviceProperties/0/name: ran on 'NVIDIA "
                           "A100-PG509-200', but the scenario's GPU is 'h100-sxm5-80gb'") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(s.file("g.json")));
}

// stepsim's own chrome trace names the GPU it simulated, as its Kineto trace does: fitted
// against a scenario on another GPU, both are refused alike; on the same GPU both run.
TEST_CASE("from-trace refuses stepsim's own chrome trace of another GPU, as it refuses the Kineto one") {
  Scratch s("calib-own-gpu");
  REQUIRE(s.run("simulate --trace c.json").status == 0);
  REQUIRE(s.run("simulate --trace k.json --trace-format kineto").status == 0);
  for (const std::string trace : {"c.json", "k.json"}) {
    INFO(trace);
    const auto other = s.run("calibrate from-trace " + trace + " default --set cluster=dgx-a100-80g-hdr -o z.json");
    CHECK(other.status == 2);
    CHECK(other.err.find(trace + ": /deviceProperties/0/name: ran on 'h100-sxm5-80gb', but the scenario's GPU is "
                                 "'a100-sxm4-80gb'") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(s.file("z.json")));
    const auto same = s.run("calibrate from-trace " + trace + " default -o same.json");
    INFO(same.err);
    CHECK(same.status == 0);
  }
}

// A relative calibration path is the current directory's, not the scenario file's folder (the
// README's rule), so a file beside the scenario named as if from there is not found: the
// refusal names the key that named it (the scenario's /calibration/N, --set calibration[N],
// --calibration) and says whose folder paths are read from; it named only the missing file.
TEST_CASE("a calibration file that is not there is refused at the key that names it") {
  Scratch s("calib-missing");
  REQUIRE(s.shell("mkdir sub").status == 0);
  REQUIRE(s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o sub/cal.json")
              .status == 0);
  s.write("sub/s.json", R"({"preset": "ddp-1.3b-64xa100", "calibration": ["sub/cal.json", "cal.json"]})");
  const std::string why = "(a relative path is the current directory's, not the scenario file's)\n";
  const auto file = s.run("simulate sub/s.json");
  CHECK(file.status == 2);
  CHECK(
      file.err.starts_with("stepsim: error: sub/s.json: /calibration/1: cannot open the calibration file "
                           "'cal.json': no such file in the current directory, "));
  CHECK(file.err.ends_with(why));
  // Beside a --calibration flag the scenario's own files are still the scenario's.
  const auto beside = s.run("simulate sub/s.json --calibration sub/cal.json");
  CHECK(beside.status == 2);
  CHECK(beside.err.starts_with("stepsim: error: sub/s.json: /calibration/1: cannot open the calibration file "));
  const auto flag = s.run("simulate ddp-1.3b-64xa100 --calibration cal.json");
  CHECK(flag.status == 2);
  CHECK(flag.err.starts_with("stepsim: error: --calibration: cal.json: cannot open the calibration file 'cal.json'"));
  CHECK(flag.err.ends_with(why));
  const auto set = s.run("simulate ddp-1.3b-64xa100 --set 'calibration=[\"sub/cal.json\", \"cal.json\"]'");
  CHECK(set.status == 2);
  CHECK(set.err.starts_with("stepsim: error: --set: calibration[1]: cannot open the calibration file 'cal.json'"));
  REQUIRE(s.run("simulate ddp-1.3b-64xa100 --calibration sub/cal.json").status == 0);
  // A sweep's point that varies the list: its row is refused, named by --vary.
  const auto sweep = s.run("sweep ddp-1.3b-64xa100 --vary 'calibration=[\"cal.json\"],[\"sub/cal.json\"]' -o rows.csv");
  INFO(sweep.err);
  REQUIRE(sweep.status == 0);
  const std::string rows = testing::slurp(s.file("rows.csv"));
  CHECK(rows.find(",invalid,\"--vary: calibration[0]: cannot open the calibration file 'cal.json'") !=
        std::string::npos);
  CHECK(rows.find(",ok,") != std::string::npos);
}

// The trace is of the default job at TP 8 (its NCCL kernels state "Group size" 8 in process
// group "tp"), fitted to the same model at TP 4 and at half its sequence length (half the
// compute per step, as the model's FLOPs count it): the kernels of another job divided by the
// scenario's FLOPs would give another GPU (gemm_half_k 70 -> 151.8 at TP 4). No efficiency is
// written and the run says why, as compare does; the host's costs, which do not depend on the
// job, still are (the trace's 5 us launches).
TEST_CASE("from-trace fits no efficiency to a trace of another job, and says how the jobs differ") {
  Scratch s("calib-other-job");
  REQUIRE(s.run("simulate --trace k.json --trace-format kineto").status == 0);
  const auto same = s.run("calibrate from-trace k.json default -o same.json");
  REQUIRE(same.status == 0);
  CHECK(same.out.find("# differs:") == std::string::npos);
  CHECK(json_of(testing::slurp(s.file("same.json"))).at("compute").as_object().contains("efficiency"));
  const std::pair<std::string, std::string> cases[] = {
      {"--set parallel.tp=4 --set parallel.dp=16", "tp process groups: the trace's have 8 ranks, the scenario's 4"},
      {"--set model.seq_len=4096", "model: the scenario computes 0.5x the trace's compute per step"}};
  for (const auto& [sets, says] : cases) {
    INFO(sets);
    const auto run = s.run("calibrate from-trace k.json default " + sets + " -o other.json");
    INFO(run.out << run.err);
    REQUIRE(run.status == 0);
    CHECK(run.err.find("warning: calibrate from-trace: " + says) != std::string::npos);
    CHECK(run.out.find("# differs: " + says) != std::string::npos);
    CHECK(run.out.find("not fitted: the trace is of another job than the scenario") != std::string::npos);
    const auto compute = json_of(testing::slurp(s.file("other.json"))).at("compute");
    CHECK_FALSE(compute.as_object().contains("efficiency"));
    CHECK(number(compute, "launch_overhead_us") == 5.0);
  }
}

// Oracle: the same figures computed apart from stepsim, by a short script over the traces'
// JSON (for each cudaLaunchKernel, the shortest cpu_op on its thread that encloses it; medians
// of those operators' and of the launches' durations, and of each operator's duration less the
// launches it encloses: an operator that launches several kernels, cuDNN's convolution backward
// or the recommendation model's mm, is charged its launches by the host model and not as
// dispatch).
TEST_CASE("from-trace on the real traces prints the CPU's cost per operator and how many operators it came from") {
  Scratch s("calib-host");
  const auto first = s.run("calibrate from-trace " + kData + "/traces/recsys-a100-rank0of16.json.gz");
  REQUIRE(first.status == 0);
  CHECK(first.out.find("per-operator CPU cost 10.0 us (median of 4900 CPU operators that launched kernels), "
                       "kernel launch 4.0 us") != std::string::npos);
  CHECK(first.out.find("launches): 5.0 us of dispatch beyond its launches") != std::string::npos);
  const auto second = s.run("calibrate from-trace " + kData + "/traces/recsys-a100-rank3of8.json.gz");
  CHECK(second.out.find("per-operator CPU cost 18.0 us (median of 7452 CPU operators that launched kernels), "
                        "kernel launch 6.0 us") != std::string::npos);
  // 798 of its operators launch two kernels (mm, addmm, layer norm's backward): the median less
  // 6 us would say 12.
  CHECK(second.out.find("launches): 11.0 us of dispatch beyond its launches") != std::string::npos);
  // All three pooled: what training.framework's 12 us of dispatch is.
  const auto all = s.run("calibrate from-trace " + kData + "/traces/");
  CHECK(all.out.find("per-operator CPU cost 18.0 us (median of 14113 CPU operators") != std::string::npos);
  CHECK(all.out.find("12.0 us of dispatch beyond its launches") != std::string::npos);
  // With a scenario, beside the efficiencies.
  const auto with = s.run("calibrate from-trace " + kData +
                          "/traces/resnet50-ddp-a100-rank0of2.json.gz \"\" -o f.json --set cluster=dgx-a100-80g-hdr");
  CHECK(with.out.find("# host: per-operator CPU cost") != std::string::npos);
  // cuDNN's convolutions launch 3 to 5 kernels each: 40.5 us of dispatch, not 51.8 - 9.7 = 42.1.
  CHECK(with.out.find("launches): 40.5 us of dispatch beyond its launches") != std::string::npos);
}

namespace {

// The number printed right before `unit` after `label` in `out`, or NaN.
double printed(const std::string& out, const std::string& label, const std::string& unit) {
  const auto at = out.find(label);
  if (at == std::string::npos) return std::nan("");
  const auto end = out.find(unit, at + label.size());
  if (end == std::string::npos) return std::nan("");
  return std::stod(out.substr(at + label.size(), end - at - label.size()));
}

}  // namespace

// The figures the test above checks (computed apart from stepsim) are the file's, as printed:
// the recommendation model's 6.0 us launch and 11.0 us of dispatch, the ResNet's 9.7 us launch.
TEST_CASE("from-trace writes the host costs it prints for a real trace into the calibration file") {
  Scratch s("calib-host-file");
  const auto recsys = s.run("calibrate from-trace " + kData +
                            "/traces/recsys-a100-rank3of8.json.gz \"\" --set cluster=dgx-a100-80g-hdr -o r.json");
  INFO(recsys.out << recsys.err);
  REQUIRE(recsys.status == 0);
  const auto r = json_of(testing::slurp(s.file("r.json")));
  CHECK(number(r.at("compute"), "launch_overhead_us") == 6.0);
  CHECK(number(r.at("compute"), "dispatch_us") == 11.0);
  CHECK(printed(recsys.out, "kernel launch ", " us") == 6.0);
  CHECK(printed(recsys.out, "launches): ", " us of dispatch") == 11.0);
  const auto resnet = s.run("calibrate from-trace " + kData +
                            "/traces/resnet50-ddp-a100-rank0of2.json.gz \"\" --set cluster=dgx-a100-80g-hdr -o n.json");
  INFO(resnet.out << resnet.err);
  REQUIRE(resnet.status == 0);
  const auto n = json_of(testing::slurp(s.file("n.json")));
  CHECK(number(n.at("compute"), "launch_overhead_us") == 9.7);
  CHECK(printed(resnet.out, "kernel launch ", " us") == 9.7);
  CHECK(number(n.at("compute"), "dispatch_us") == printed(resnet.out, "launches): ", " us of dispatch"));
  // Simulated with it: the launch and the dispatch in force, both from the trace, the dispatch in
  // place of the default scenario's framework's (unspecified: none).
  const auto run = s.run("simulate --set cluster=dgx-a100-80g-hdr --calibration r.json --json -");
  INFO(run.err);
  REQUIRE(run.status == 0);
  const auto report = json_of(run.out);
  bool launch = false, dispatch = false, framework_note = false;
  for (const auto& v : report.at("calibration").at("values").as_array()) {
    const std::string source = "r.json: fitted to trace " + kData + "/traces/recsys-a100-rank3of8.json.gz";
    if (v.at("key").as_string() == "kernel_launch_us") {
      launch = true;
      CHECK(number(v, "value") == 6.0);
      CHECK(v.at("source").as_string() == source);
    }
    if (v.at("key").as_string() == "dispatch_us") {
      dispatch = true;
      CHECK(number(v, "value") == 11.0);
      CHECK(number(v, "preset") == 0.0);
      CHECK(v.at("source").as_string() == source);
    }
  }
  for (const auto& note : report.at("notes").as_array())
    if (std::string(note.as_string()).find("the CPU issues each operator in 17 us (6 us launch, 11 us dispatch)") !=
        std::string::npos)
      framework_note = true;
  CHECK(launch);
  CHECK(dispatch);
  CHECK(framework_note);
  CHECK(report.at("config").at("cluster").at("gpu").at("kernel_launch").as_string() == "6 us");
}

// What the trace holds is said as it is: launches without operators, launches of no duration.
TEST_CASE("from-trace says which host events a trace lacks for the CPU's cost per operator") {
  Scratch s("calib-host-lacks");
  const std::string kernel =
      R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
          "args": {"device": 0, "stream": 7, "correlation": 1}})";
  s.write("launch.json", R"({"traceEvents": [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
      "tid": 1, "ts": 2, "dur": 5, "args": {"correlation": 1}}, )" +
                             kernel + "]}");
  const auto launch = s.run("calibrate from-trace launch.json");
  INFO(launch.out << launch.err);
  CHECK(launch.status == 0);
  CHECK(launch.out.find("kernel launch 5.0 us (median of 1 launches); no per-operator cost: no cpu_op events") !=
        std::string::npos);
  s.write("instant.json", R"({"traceEvents": [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
      "pid": 1, "tid": 1, "ts": 2, "dur": 0, "args": {"correlation": 1}}, )" +
                              kernel + "]}");
  const auto instant = s.run("calibrate from-trace instant.json");
  CHECK(instant.out.find("no kernel launch cost in instant.json: its 1 cudaLaunchKernel events last no time") !=
        std::string::npos);
  s.write("none.json", "{\"traceEvents\": [" + kernel + "]}");
  const auto none = s.run("calibrate from-trace none.json");
  CHECK(none.out.find("no kernel launch cost in none.json: no cpu_op and no cudaLaunchKernel events") !=
        std::string::npos);
}

// A cpu_op the reader cannot time (a negative dur; a ts 10^300 us away from the trace's others)
// is left out of the fit, and the message says the trace had it, not that it had none.
TEST_CASE("from-trace says how many cpu_op events it left out when none was left to fit") {
  Scratch s("calib-host-left-out");
  const std::string launch =
      R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 4,
          "args": {"correlation": 1}}, {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20,
          "dur": 5, "args": {"device": 0, "stream": 7, "correlation": 1}})";
  s.write("negative.json", R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1,
      "ts": 0, "dur": -10}, )" +
                               launch + "]}");
  s.write("far.json", R"({"traceEvents": [)" + launch + R"(, {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1,
      "tid": 1, "ts": 1e300, "dur": 10}]})");
  for (const char* file : {"negative.json", "far.json"}) {
    const auto run = s.run(std::string("calibrate from-trace ") + file);
    INFO(file << ": " << run.out << run.err);
    CHECK(run.status == 0);
    CHECK(run.out.find("kernel launch 4.0 us (median of 1 launches); no per-operator cost: no cpu_op events it "
                       "could use (its 1 left out: not complete events with ts and dur, or a negative dur, a ts or "
                       "dur out of range)") != std::string::npos);
  }
}

namespace {

// The row of `size` in the section of `check`'s output that starts at `heading`: size,
// measured, predicted, error, model, error, source.
std::vector<std::string> check_row(const std::string& out, const std::string& heading, const std::string& size) {
  const auto section = out.find(heading);
  REQUIRE(section != std::string::npos);
  std::istringstream lines(out.substr(section));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> row;
    for (std::string w; words >> w;) row.push_back(w);
    if (!row.empty() && row[0] == size) return row;
  }
  FAIL("no row for size " << size);
  return {};
}

const std::string kFourPoints = R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA A100-SXM4-80GB"},
  "collectives": [{"op": "allreduce", "ranks": 8, "nodes": 1, "fit": {"alpha_us": 7.6171875, "algbw_gbps": 0.43007475, "busbw_gbps": 0.752630813, "max_error": 0.314355469, "alpha_fitted": true},
                   "points": [{"bytes": 1024, "time_us": 10}, {"bytes": 4096, "time_us": 25},
                              {"bytes": 16384, "time_us": 40}, {"bytes": 65536, "time_us": 160}]}]})";

}  // namespace

TEST_CASE("calibrate check predicts each point from the others, by hand on four points") {
  Scratch s("calib-check-hand");
  s.write("four.json", kFourPoints);
  const auto run = s.run("calibrate check four.json --cluster dgx-a100-80g-hdr");
  REQUIRE(run.status == 0);
  // Inside the table a left-out point is the log-log line through its neighbours, halfway
  // between them: 4096 B from 10 us at 1024 and 40 us at 16384 is sqrt(10 x 40) = 20 us,
  // 20 % under the 25 measured; 16384 B is sqrt(25 x 160) = 63.25 us, 58.1 % over 40.
  const auto second = check_row(run.out, "# allreduce", "4096");
  REQUIRE(second.size() == 7);
  CHECK(std::stod(second[1]) == 25);
  CHECK(std::stod(second[2]) == Approx(20).epsilon(1e-3));
  CHECK(second[3] == "-20.0%");
  CHECK(second[6] == "measured");
  const auto third = check_row(run.out, "# allreduce", "16384");
  CHECK(std::stod(third[2]) == Approx(std::sqrt(25.0 * 160.0)).epsilon(1e-3));
  CHECK(third[3] == "+58.1%");
  // At the table's ends the others say nothing measured: the model corrected by them.
  CHECK(check_row(run.out, "# allreduce", "1024")[6] == "scaled");
  CHECK(check_row(run.out, "# allreduce", "65536")[6] == "scaled");
  CHECK(run.out.find("# leave-one-out: 4 point(s), mean |error| ") != std::string::npos);
}

// An 8-GPU AllReduce table of two measured points, 10 us at 1 KiB and 40 us at 16 KiB.
constexpr const char* kTwoPointAllReduce =
    R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA A100-SXM4-80GB"},
    "collectives": [{"op": "allreduce", "ranks": 8, "nodes": 1, "fit": {"alpha_us": 7.96875, "algbw_gbps": 0.511500488, "busbw_gbps": 0.895125854, "max_error": 0.0029296875, "alpha_fitted": true},
                     "points": [{"bytes": 1024, "time_us": 10}, {"bytes": 16384, "time_us": 40}]}]})";

TEST_CASE("calibrate check predicts a held-out log's sizes from the file, by hand") {
  Scratch s("calib-check-held");
  s.write("two.json", kTwoPointAllReduce);
  s.write("held.txt",
          "# all_reduce_perf -b 4096 -e 8192 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
          "4096 1024 float sum -1 25.00 0.16 0.29 0 25.00 0.16 0.29 0\n"
          "8192 2048 float sum -1 30.00 0.27 0.48 0 30.00 0.27 0.48 0\n");
  const auto run = s.run("calibrate check two.json --held-out held.txt");
  REQUIRE(run.status == 0);
  // 4096 B is half the way from 1024 to 16384 in log size: sqrt(10 x 40) = 20 us
  // (-20.0 %); 8192 B: 3/4 of the way: 10 x 4^0.75 = 28.28 us (-5.7 %); mean 12.9 %.
  const auto a = check_row(run.out, "# held-out held.txt", "4096");
  CHECK(std::stod(a[2]) == Approx(20).epsilon(1e-3));
  CHECK(a[3] == "-20.0%");
  const auto b = check_row(run.out, "# held-out held.txt", "8192");
  CHECK(std::stod(b[2]) == Approx(10 * std::pow(4.0, 0.75)).epsilon(1e-3));
  CHECK(b[3] == "-5.7%");
  CHECK(run.out.find("# held-out held.txt: 2 point(s), mean |error| 12.9% calibrated (max 20.0%)") !=
        std::string::npos);
}

// A held-out AllGather checked against a file of AllReduce alone: no table reaches it, so the
// "calibrated" prediction of each point is the model's (source "model"), and the summary says
// so rather than presenting the model's errors as the calibration's.
TEST_CASE("calibrate check says when the points it checks were predicted by the model alone") {
  Scratch s("calib-check-model");
  s.write("two.json", kTwoPointAllReduce);
  s.write("gather.txt",
          "# all_gather_perf -b 4096 -e 8192 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
          "4096 128 float none -1 25.00 0.16 0.14 0 25.00 0.16 0.14 0\n"
          "8192 256 float none -1 30.00 0.27 0.24 0 30.00 0.27 0.24 0\n");
  const auto run = s.run("calibrate check two.json --held-out gather.txt");
  REQUIRE(run.status == 0);
  CHECK(check_row(run.out, "# held-out gather.txt", "4096").back() == "model");
  CHECK(run.out.find("# held-out gather.txt: 2 point(s), mean |error| ") != std::string::npos);
  CHECK(run.out.find("; all of them the model alone (source model: no table of the file has their op and tier)\n") !=
        std::string::npos);
  // Where the file reaches every point (leave-one-out, each from the other), nothing more.
  const auto loo = run.out.find("# leave-one-out: 2 point(s), mean |error| ");
  REQUIRE(loo != std::string::npos);
  CHECK(run.out.substr(loo, run.out.find('\n', loo) - loo).find("model alone (source") == std::string::npos);
}

// Outside its measured FLOPs a GEMM costs the model's time (simulate interpolates compute tables
// inside their range only), so a GEMM table's end point left out is the model's, and the help
// says so rather than promising the correction collective tables get there.
TEST_CASE("calibrate check predicts a GEMM table's end points by the model alone, as its help says") {
  Scratch s("calib-check-gemm");
  s.write("gemm.json", R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA A100-SXM4-80GB"},
    "compute": {"gemm": [{"m": 2048, "n": 4096, "k": 4096, "dtype": "bf16", "time_us": 274.88},
                         {"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "time_us": 549.76},
                         {"m": 8192, "n": 4096, "k": 4096, "dtype": "bf16", "time_us": 1099.51}]}})");
  const auto run = s.run("calibrate check gemm.json");
  REQUIRE(run.status == 0);
  for (const char* m : {"2048", "8192"}) {
    const auto row = check_row(run.out, "# GEMM", m);
    REQUIRE(row.size() == 9);
    CHECK(row[5] == row[7]);  // left out == model
  }
  const auto middle = check_row(run.out, "# GEMM", "4096");
  CHECK(std::stod(middle[5]) == Approx(549.76).epsilon(1e-3));  // interpolated at the same rate
  const auto help = s.run("calibrate check --help");
  CHECK(help.out.find("at a GEMM or memory-bound table's ends by the model alone (as simulate costs them)") !=
        std::string::npos);
}

TEST_CASE("calibrate check on the A100 log gives leave-one-out errors, and held-out errors on a second run") {
  Scratch s("calib-check");
  REQUIRE(
      s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o a.json").status ==
      0);
  const auto run = s.run("calibrate check a.json --held-out " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-b.txt");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("predicted on dgx-a100-80g-hdr") != std::string::npos);
  // 2 MiB left out: the log-log midpoint of 1 MiB (52.61 us) and 4 MiB (103.8 us), against 59.30.
  const auto mid = check_row(run.out, "# allreduce", "2097152");
  CHECK(std::stod(mid[2]) == Approx(std::sqrt(52.61 * 103.8)).epsilon(1e-4));
  CHECK(mid[3] == "+24.6%");
  CHECK(run.out.find("# leave-one-out: 30 point(s), mean |error| 3.1% calibrated (max 24.6%), 4.2% model alone "
                     "(max 41.7%)") != std::string::npos);
  // The second run (another host) against the first's tables: its small sizes are 3-5 us
  // faster, so the measured tables do worse there than the model, whose floor the first
  // run's small sizes set.
  const auto small = check_row(run.out, "# held-out", "8");
  CHECK(std::stod(small[1]) == 34.84);
  CHECK(std::stod(small[2]) == Approx(40.12).epsilon(1e-4));
  CHECK(run.out.find("a100-80g-8gpu-allreduce-b.txt: 25 point(s), mean |error| 8.5% calibrated (max 26.9%), 7.6% "
                     "model alone (max 14.8%)") !=
        std::string::npos);  // A held-out log of another GPU is refused naming it (not the calibration's JSON pointer).
  const auto h200 = s.run("calibrate check a.json --held-out " + kData + "/nccl-tests/h200-8gpu-allreduce-8GiB.txt");
  CHECK(h200.status == 2);
  CHECK(h200.err.find("h200-8gpu-allreduce-8GiB.txt: ran on 'H200', but a.json is checked on "
                      "dgx-a100-80g-hdr's GPU 'a100-sxm4-80gb'") != std::string::npos);
}

// A held-out log that cannot be read is refused before the report starts: stdout stays
// empty, as README promises of a failing run.
TEST_CASE("calibrate check with a held-out log it cannot read prints nothing and exits 2") {
  Scratch s("calib-check-bad-held");
  REQUIRE(
      s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o a.json").status ==
      0);
  s.write("garbage.txt", "this is not an nccl-tests log\n");
  s.write("truncated.txt",
          "# all_reduce_perf -b 4096 -e 8192 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
          "4096 1024 float sum -1 25.00 0.16 0.29 0 25.00 0.16 0.29 0\n"
          "8192 2048 float sum -1 30.0");
  for (const char* log : {"nothere.txt", "garbage.txt", "truncated.txt"}) {
    INFO(log);
    const auto run = s.run("calibrate check a.json --held-out " + std::string(log));
    CHECK(run.status == 2);
    CHECK(run.out.empty());
    CHECK(run.err.find(log) != std::string::npos);
  }
  // The same with a readable held-out log first: nothing printed either.
  const auto both = s.run("calibrate check a.json --held-out " + kData +
                          "/nccl-tests/a100-80g-8gpu-allreduce-b.txt --held-out nothere.txt");
  CHECK(both.status == 2);
  CHECK(both.out.empty());
}

// calibrate check composes its whole report before printing it: a table found on the way that
// the model cannot run as it was measured (an AllGather with tree forced: NCCL's tree runs
// AllReduce only), after the AllReduce table's rows, leaves stdout empty, and the error names
// the file and the table.
TEST_CASE("calibrate check that fails after its first table prints nothing and names the table") {
  Scratch s("calib-check-midway");
  const std::string allgather =
      R"({"op": "allgather", "ranks": 8, "nodes": 1, "algorithm": "tree",
          "fit": {"alpha_us": 4.6875, "algbw_gbps": 0.201649231, "busbw_gbps": 0.176443077, "max_error": 0.0234375, "alpha_fitted": true},
          "points": [{"bytes": 1024, "time_us": 10}, {"bytes": 4096, "time_us": 25}]})";
  std::string two = kFourPoints;
  two.insert(two.rfind("]}"), ",\n  " + allgather);
  s.write("two.json", two);
  const auto run = s.run("calibrate check two.json --cluster dgx-a100-80g-hdr");
  CHECK(run.status == 2);
  CHECK(run.out.empty());
  CHECK(run.err ==
        "stepsim: error: two.json: /collectives/1: 'tree' does not apply to AllGather on 8 GPUs over 1 node(s): it "
        "does not implement AllGather (choices: auto, ring)\n");
  // The AllReduce table alone is checked as before.
  s.write("four.json", kFourPoints);
  CHECK(s.run("calibrate check four.json --cluster dgx-a100-80g-hdr").status == 0);
}

TEST_CASE("bad calibration files and logs are refused with the file and the place") {
  Scratch s("calib-bad");
  REQUIRE(
      s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o a.json").status ==
      0);
  SECTION("a table for another GPU than the scenario's") {
    const auto run = s.run("simulate --calibration a.json");
    CHECK(run.status == 2);
    CHECK(run.err.find("a.json: /provenance/gpu: measured on 'NVIDIA A100-SXM4-80GB', but the scenario's GPU is "
                       "'h100-sxm5-80gb'") != std::string::npos);
    CHECK(s.run("collective allreduce --calibration a.json").status == 2);
  }
  SECTION("a truncated file") {
    const std::string text = testing::slurp(s.file("a.json"));
    s.write("cut.json", text.substr(0, text.size() / 2));
    const auto run = s.run("collective allreduce --cluster dgx-a100-80g-hdr --calibration cut.json");
    CHECK(run.status == 2);
    CHECK(run.err.find("cut.json: line ") != std::string::npos);
  }
  SECTION("mixed units") {
    s.write("units.json", R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA A100-SXM4-80GB"},
      "collectives": [{"op": "allreduce", "ranks": 8, "nodes": 1, "fit": {"alpha_us": 40, "algbw_gbps": 100},
                       "points": [{"bytes": 8, "time_us": "40 us"}]}]})");
    const auto run = s.run("collective allreduce --cluster dgx-a100-80g-hdr --calibration units.json");
    CHECK(run.status == 2);
    CHECK(run.err.find("units.json: /collectives/0/points/0/time_us: expected a plain number of microseconds (the key "
                       "names the unit), got a string") != std::string::npos);
  }
  SECTION("a garbage log") {
    s.write("log.txt", "# all_reduce_perf\n8 2 float sum -1 40.1us 0.00 0.00 0 38.85 0.00 0.00 0\n");
    const auto run = s.run("calibrate import-nccl-tests log.txt --gpu A100 --ranks 8 -o x.json");
    CHECK(run.status == 2);
    CHECK(run.err.find("log.txt: line 2: expected a number for time (column 6), got '40.1us'") != std::string::npos);
    CHECK(s.entries() == std::vector<std::string>{"a.json", "log.txt"});
  }
}

TEST_CASE("endless and empty calibration inputs are refused, not waited on") {
  Scratch s("calib-endless");
  const auto zero = s.run("calibrate import-nccl-tests /dev/zero -o x.json");
  CHECK(zero.status == 2);
  CHECK(zero.err.find("/dev/zero: the nccl-tests log is larger than 256 MiB") != std::string::npos);
  CHECK(s.run("simulate --calibration /dev/zero").status == 2);
  const auto empty = s.run("simulate --set 'calibration=[\"\"]'");
  CHECK(empty.status == 2);
  CHECK(empty.err.find("--set: calibration[0]: expected a calibration file name, got \"\"") != std::string::npos);
  const auto flag = s.run("simulate --calibration ''");
  CHECK(flag.status == 2);
  CHECK(flag.err == "stepsim: error: --calibration: expected a calibration file name, got \"\"\n");
  CHECK(s.entries().empty());
}

namespace stepsim {

TEST_CASE("an nccl-tests JSON log whose counts are not whole numbers is refused naming the key") {
  Scratch s("calib-json-counts");
  s.write("log.json", R"({"version":2,"args":["./all_reduce_perf"],"config":{"nthreads":1,"ngpus":1.5,"devices":[]},
    "results":[{"size":1024,"count":256,"type":"float","redop":"sum","root":"    -1","out_of_place":null,
      "in_place":{"time":21.0,"alg_bw":0.05,"bus_bw":0.09,"nwrong":0}}]})");
  const auto run = s.run("calibrate import-nccl-tests log.json --gpu A100 -o x.json");
  CHECK(run.status == 2);
  CHECK(run.err.find("log.json: /config/ngpus: expected GPUs per thread, a whole number from 1 to 4096, got 1.5") !=
        std::string::npos);
  CHECK(s.entries() == std::vector<std::string>{"log.json"});
}

TEST_CASE("a log with no usable row is refused, not imported as an empty calibration") {
  Scratch s("calib-no-rows");
  s.write("zero.txt",
          "# all_reduce_perf -b 0 -e 0 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
          "0 0 float sum -1 0.00 0.00 0.00 0 0.00 0.00 0.00 0\n");
  const auto run = s.run("calibrate import-nccl-tests zero.txt -o x.json");
  CHECK(run.status == 2);
  CHECK(run.err.find("zero.txt: no row has a size and a time above zero (1 row(s) read); nothing to calibrate") !=
        std::string::npos);
  CHECK(s.entries() == std::vector<std::string>{"zero.txt"});
}

// 1 MiB all-reduced in 0 us moves its bytes faster than any link, as a too-fast time does: the
// out-of-place half's 0 was skipped for the in-place 53.03 us, and a row of two zeros dropped
// (29 points). A half nccl-tests did not run is left out (blank, -J null), not 0, and is read so.
TEST_CASE("a time of 0 us is refused naming the line and the column, a half not run is not") {
  Scratch s("calib-zero-time");
  const std::string header = "# all_reduce_perf -b 1M -e 2M -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n";
  const std::string good = "2097152 524288 float sum -1 59.30 35.37 61.89 0 71.33 29.40 51.45 0\n";
  const auto import = [&](const std::string& row) {
    s.write("z.txt", header + row + "\n" + good);
    return s.run("calibrate import-nccl-tests z.txt -o x.json");
  };
  const std::string zero =
      "a time of 0 us for 1048576 B (column {}) is faster than any link carries the bytes; "
      "expected a time above 0 us";
  CHECK(testing::refusal(import("1048576 262144 float sum -1 0 19.93 34.88 0 53.03 19.77 34.60 0"),
                         "z.txt: line 2: " + fmt::format(fmt::runtime(zero), 6)) == "");
  CHECK(testing::refusal(import("1048576 262144 float sum -1 0.00 0.00 0.00 0 0.00 0.00 0.00 0"),
                         "z.txt: line 2: " + fmt::format(fmt::runtime(zero), 6)) == "");
  CHECK(testing::refusal(import("1048576 262144 float sum -1 52.61 19.93 34.88 0 0 19.77 34.60 0"),
                         "z.txt: line 2: " + fmt::format(fmt::runtime(zero), 10)) == "");
  CHECK(testing::refusal(import("1048576 262144 float sum -1 0.00 19.93 34.88 N/A 53.03 19.77 34.60 N/A"),
                         "z.txt: line 2: " + fmt::format(fmt::runtime(zero), 6)) == "");
  s.write("z.json", R"({"args":["./all_reduce_perf"],"config":{"devices":[{"rank":0,"hostname":"a",
    "device_info":"NVIDIA A100-SXM4-80GB"}]},"results":[{"size":1048576,"count":262144,"type":"float","redop":"sum",
    "root":"    -1","out_of_place":null,"in_place":{"time":0,"alg_bw":0,"bus_bw":0,"nwrong":0}}]})");
  CHECK(testing::refusal(s.run("calibrate import-nccl-tests z.json -o x.json"),
                         "z.json: /results/0/in_place/time: a time of 0 us for 1048576 B is faster than any link "
                         "carries the bytes") == "");
  CHECK(s.entries() == std::vector<std::string>{"z.json", "z.txt"});
  // A replay row without its out-of-place half (nccl-tests prints it blank): its in-place time.
  REQUIRE(import("1048576 262144 float sum -1 53.03 19.77 34.60 0").status == 0);
  const auto c = json_of(testing::slurp(s.file("x.json")));
  const auto& points = c.at("collectives").at(0).at("points").as_array();
  REQUIRE(points.size() == 2);
  CHECK(number(points[0], "time_us") == 53.03);
}

TEST_CASE("a row of a run that produced wrong data is refused naming the line") {
  Scratch s("calib-wrong");
  s.write("wrong.txt",
          "# all_reduce_perf -b 8 -e 16 -g 8 on one node with 8x NVIDIA A100-SXM4-80GB\n"
          "8 2 float sum -1 40.12 0.00 0.00 0 38.85 0.00 0.00 0\n"
          "16 4 float sum -1 39.64 0.00 0.00 0 39.19 0.00 0.00 3\n");
  const auto run = s.run("calibrate import-nccl-tests wrong.txt -o x.json");
  CHECK(run.status == 2);
  CHECK(run.err.find("wrong.txt: line 3: the in-place run produced 3 wrong element(s) (#wrong is not 0): a run with "
                     "wrong results is no measurement of the collective; rerun it") != std::string::npos);
  CHECK(s.entries() == std::vector<std::string>{"wrong.txt"});
}

TEST_CASE("collectives faster than any link of the cluster are refused") {
  Scratch s("calib-too-fast");
  // 1 GiB all-reduced in 100 us over 8 A100s, whose NVSwitch does not reduce: each GPU sends
  // at least 2·7/8 of it (Patarasuk and Yuan's bound), 1879048192 B in 100 us = 18790.5 GB/s
  // where its NVLink carries 300 GB/s; at least 1879048192 / 300e3 = 6263.49 us.
  s.write("fast.json", R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA A100-SXM4-80GB"},
    "collectives": [{"op": "allreduce", "ranks": 8, "nodes": 1, "fit": {"alpha_us": 9.99991417, "algbw_gbps": 11930.4533, "busbw_gbps": 20878.2933, "max_error": 9.09494702e-13, "alpha_fitted": true},
                     "points": [{"bytes": 1024, "time_us": 10}, {"bytes": 1073741824, "time_us": 100}]}]})");
  const std::string expected =
      "fast.json: /collectives/0/points/1/time_us: 1073741824 B of allreduce in 100 us needs 18790.5 GB/s out of "
      "or into each rank, faster than any link of dgx-a100-80g-hdr (300 GB/s); expected at least 6263.49 us";
  const auto run = s.run("collective allreduce --cluster dgx-a100-80g-hdr --calibration fast.json");
  CHECK(run.status == 2);
  CHECK(run.err.find(expected) != std::string::npos);
  const auto sim = s.run("simulate --set cluster=dgx-a100-80g-hdr --calibration fast.json");
  CHECK(sim.status == 2);
  CHECK(sim.err.find(expected) != std::string::npos);
  // A one-row log of `row` on 8 A100s of one node (or, without its header's GPU count, as
  // `flags` say), imported: its error.
  const auto refused = [&](const char* name, const std::string& row, const std::string& flags = "") {
    const std::string header = flags.empty() ? "# all_reduce_perf -b 8 -e 4G -g 8 with 8x NVIDIA A100-SXM4-80GB\n"
                                             : "# all_reduce_perf -b 8 -e 4G -g 8\n";
    s.write(name, header + row + "\n");
    const auto run_import = s.run(fmt::format("calibrate import-nccl-tests {} {} -o x.json", name, flags));
    CHECK(run_import.status == 2);
    return run_import.err;
  };
  CHECK(refused("fast.txt", "1073741824 268435456 float sum -1 100.0 10737.42 18790.49 0 100.0 10737.42 18790.49 0")
            .find("fast.txt: line 2: 1073741824 B of allreduce in 100 us needs 18790.5 GB/s out of or into each "
                  "rank, faster than any link of dgx-a100-80g-hdr (300 GB/s)") != std::string::npos);
  CHECK_FALSE(s.run("calibrate check fast.json").status == 0);
  // Just under that bound (4 GiB in 24000 us against 2·7/8·4 GiB / 300 GB/s = 25054.0 us: a
  // bus bandwidth of 313 GB/s, past the 300 the links carry), where the share of 1 that only
  // a reducing switch allows would have let it through.
  CHECK(refused("near.txt", "4294967296 1073741824 float sum -1 24000 178.96 313.18 0 24000 178.96 313.18 0")
            .find("expected at least 25054 us") != std::string::npos);
  // Across two DGX A100 (8 NICs of 25 GB/s each, 200 GB/s a node): every element's result
  // depends on both nodes' data, so each node sends at least S over its NICs, switch reducing
  // or not: 1 GiB in at least 1073741824 / 200e3 = 5368.7 us; 3700 us is refused.
  CHECK(refused("two.txt", "1073741824 268435456 float sum -1 3700 290.2 544.1 0 3700 290.2 544.1 0",
                "--ranks 16 --nodes 2 --gpu \"NVIDIA A100-SXM4-80GB\"")
            .find("two.txt: line 2: 1073741824 B of allreduce in 3700 us over 2 NVLink domain(s) needs 290.2 GB/s "
                  "out of or into each domain, faster than the 200 GB/s of its hosts' NICs in dgx-a100-80g-hdr; "
                  "expected at least 5368.71 us") != std::string::npos);
  // The real logs at hand pass: the A100's busiest size reaches 232 of the 300 GB/s.
  CHECK(s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o a.json").status ==
        0);
  CHECK(s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/h200-8gpu-allreduce-8GiB.txt -o h.json").status ==
        0);
}

// A GB200 NVL72 rack is one NVLink domain of 18 trays of 4 GPUs: an nccl-tests run over the
// whole rack names 18 hosts, yet it measured NVLink (and NVLS), not the NICs. Its table stands
// for the 72-GPU communicator on gb200-nvl72 ("measured"), and not for one across two racks,
// which crosses the NICs (the model alone there, with no table of that tier).
TEST_CASE("a nccl-tests log of one GB200 NVL72 rack calibrates the rack's NVLink, not the network") {
  Scratch s("calib-nvl72");
  std::string log = "# Collective test starting: all_reduce_perf\n";
  for (int r = 0; r < 72; ++r)
    log += fmt::format("#  Rank {:2} Group  0 Pid {} on tray{:02} device  {} [0000:07:00] NVIDIA GB200\n", r, 100 + r,
                       r / 4, r % 4);
  // 1 GiB in 2375.4 us (busbw 891.5 GB/s), 8 GiB in 18000 us: NVLS on a rack.
  log += "1073741824 268435456 float sum -1 2375.4 452.03 891.50 0 2375.4 452.03 891.50 0\n";
  log += "8589934592 2147483648 float sum -1 18000 477.2 941.2 0 18000 477.2 941.2 0\n";
  s.write("rack.txt", log);
  const auto import = s.run("calibrate import-nccl-tests rack.txt -o rack.json");
  REQUIRE(import.status == 0);
  CHECK(import.out.find("72 rank(s), 18 node(s) x 4") != std::string::npos);
  const auto rack = s.run(
      "collective allreduce --cluster gb200-nvl72 --gpus 72 --ranks-per-node 4 --size 1GiB "
      "--calibration rack.json --json -");
  REQUIRE(rack.status == 0);
  const auto row = boost::json::parse(rack.out).as_array().at(0).as_object();
  CHECK(row.at("source").as_string() == "measured");
  CHECK(row.at("time_us").to_number<double>() == Approx(2375.4));
  const auto racks = s.run(
      "collective allreduce --cluster gb200-nvl72 --gpus 144 --ranks-per-node 4 --size 8GiB "
      "--calibration rack.json --json -");
  REQUIRE(racks.status == 0);
  CHECK(boost::json::parse(racks.out).as_array().at(0).as_object().at("source").as_string() == "model");
}

TEST_CASE("calibrate check refuses a scenario and --cluster together") {
  Scratch s("calib-check-both");
  REQUIRE(
      s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o a.json").status ==
      0);
  s.write("sc.json", R"({"cluster": "dgx-a100-80g-hdr"})");
  const auto run = s.run("calibrate check a.json sc.json --cluster dgx-h100-ndr");
  CHECK(run.status == 2);
  CHECK(run.err.find("<command line>: --cluster: give a scenario or --cluster, not both (the scenario names its "
                     "cluster)") != std::string::npos);
}

}  // namespace stepsim

namespace stepsim {

// nccl-tests times NCCL's own choice; a table says "algorithm"/"protocol" only when the run
// forced them (NCCL_ALGO, NCCL_PROTO). Either way it stands only for collectives run alike.
TEST_CASE("a table stands only for collectives of the algorithm and protocol it measured") {
  Scratch s("calib-forced");
  REQUIRE(
      s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o a.json").status ==
      0);
  const std::string base = "collective allreduce --cluster dgx-a100-80g-hdr --gpus 8 --size 1MiB ";
  const auto forced = s.run(base + "--algorithm tree --calibration a.json");
  CHECK(forced.status == 2);
  CHECK(forced.err.find("a.json: /collectives/0: measured with NCCL's own choice of algorithm, but the collectives "
                        "are forced to tree (collectives.algorithm, --algorithm): its times are not tree's") !=
        std::string::npos);
  CHECK(s.run(base + "--protocol ll128 --calibration a.json").status == 2);
  CHECK(s.run(base + "--calibration a.json").status == 0);
  s.write("ring.json", R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA A100-SXM4-80GB"},
    "collectives": [{"op": "allreduce", "ranks": 8, "nodes": 1, "algorithm": "ring", "protocol": "simple",
                     "fit": {"alpha_us": 29.9829042, "algbw_gbps": 59.9039985, "busbw_gbps": 104.831997, "max_error": 5.95561384e-08, "alpha_fitted": true},
                     "points": [{"bytes": 1024, "time_us": 30}, {"bytes": 4194304, "time_us": 100}]}]})");
  const auto ring = s.run(base + "--algorithm ring --protocol simple --calibration ring.json --json -");
  CHECK(ring.status == 0);
  CHECK(ring.out.find("\"source\":\"measured\"") != std::string::npos);
  const auto chosen = s.run(base + "--calibration ring.json");
  CHECK(chosen.status == 2);
  CHECK(chosen.err.find("ring.json: /collectives/0: measured with algorithm ring forced, but NCCL chooses the "
                        "collectives' algorithm here") != std::string::npos);
  s.write("banana.json", R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA A100-SXM4-80GB"},
    "collectives": [{"op": "allreduce", "ranks": 8, "nodes": 1, "algorithm": "banana",
                     "fit": {"alpha_us": 0, "algbw_gbps": 0.0341333333, "busbw_gbps": 0.0597333333, "max_error": 0, "alpha_fitted": false}, "points": [{"bytes": 1024, "time_us": 30}]}]})");
  const auto banana = s.run(base + "--calibration banana.json");
  CHECK(banana.status == 2);
  CHECK(banana.err.find("banana.json: /collectives/0/algorithm: unknown value 'banana' (expected one of ring, tree, "
                        "nvls, nvls-tree, collnet, pat, direct)") != std::string::npos);
}

}  // namespace stepsim

// Llama 3 8B (h 4096, V 128256, s 8192), TP 2 x DP 2 on one node, one sequence per
// micro-batch, fp32 gradient reduction, ring/simple forced. By hand: the TP AllReduce moves
// b·s·h·2 B = 64 MiB; the largest DP bucket holds the LM head's shard and the final norm,
// (128256·4096/2 + 4096)·4 B = 1,050,689,536 B (up to 1G); fc1's forward GEMM is 8192 tokens x
// 2·14336/2 columns x 4096, the LM head's 8192 x 128256/2 x 4096.
TEST_CASE("calibrate plan lists the nccl-tests and GEMM runs a small scenario needs") {
  Scratch s("calib-plan");
  s.write("p.json", R"({"model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": {"tp": 2, "dp": 2},
    "training": {"global_batch": 2, "micro_batch": 1},
    "data_parallel": {"kind": "ddp", "grad_reduce_dtype": "fp32"},
    "collectives": {"algorithm": "ring", "protocol": "simple"}})");
  const auto run = s.run("calibrate plan p.json");
  REQUIRE(run.status == 0);
  // Open MPI sets a variable on every rank with -x (one set before mpirun stays on its node).
  CHECK(run.out.find("mpirun -np 2 -x NCCL_ALGO=Ring -x NCCL_PROTO=Simple "
                     "-x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=ENV all_reduce_perf -b 32K -e 64M -f 2 -g 1 -d "
                     "bfloat16\n") != std::string::npos);
  CHECK(run.out.find("mpirun -np 2 -x NCCL_ALGO=Ring -x NCCL_PROTO=Simple "
                     "-x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=ENV all_reduce_perf -b 32M -e 1G -f 2 -g 1 -d float\n") !=
        std::string::npos);
  CHECK(run.out.find("stepsim-calibrate -o gemm.calib.json --gemm ") != std::string::npos);
  CHECK(run.out.find(" --gemm 8192x14336x4096:bf16") != std::string::npos);
  CHECK(run.out.find(" --gemm 8192x64128x4096:bf16") != std::string::npos);
  const auto json = s.run("calibrate plan p.json --json -");
  REQUIRE(json.status == 0);
  const auto doc = json_of(json.out);
  const auto& dp = doc.at("collectives").at(1);
  CHECK(dp.at("dtype").as_string() == "float");
  CHECK(number(dp, "max_bytes") == 1050689536.0);
  CHECK(number(doc.at("collectives").at(0), "max_bytes") == 67108864.0);
  CHECK(doc.at("commands").as_array().size() == 3);
  CHECK(s.run("calibrate plan").status == 2);
  // FP32 training's GEMMs are not what stepsim-calibrate times: named, with no command.
  const auto fp32 = s.run("calibrate plan p.json --set training.precision=fp32");
  REQUIRE(fp32.status == 0);
  CHECK(fp32.out.find("--gemm") == std::string::npos);
  CHECK(fp32.out.find("GEMM shape(s) stepsim-calibrate does not time (bf16 and fp8 only): 2048x4096x8192:fp32") !=
        std::string::npos);
}

// DeepSeek-V3 at EP 64 (deepseek-v3-ep64-512xh100): each GPU's 4,096 tokens go to 8 of 256
// experts, balanced, so each of a GPU's 4 experts gets 64 · 4096 · 8 / 256 = 8,192 rows; its
// fc1 is 8192 x 2·2048 x 7168 and its fc2 8192 x 7168 x 2048, the GEMMs the grouped kernel runs
// and the calibrated step times one by one. The 4 experts' 32,768 rows as one GEMM are no
// shape the step runs.
TEST_CASE("calibrate plan names one expert's GEMM of a grouped GEMM") {
  Scratch s("calib-plan-experts");
  const auto run = s.run("calibrate plan deepseek-v3-ep64-512xh100");
  REQUIRE(run.status == 0);
  for (const char* shape : {" --gemm 8192x4096x7168:bf16", " --gemm 8192x7168x2048:bf16", " --gemm 7168x4096x8192:bf16",
                            " --gemm 2048x7168x8192:bf16"})
    CHECK(run.out.find(shape) != std::string::npos);
  for (const char* shape : {" --gemm 32768x4096x7168:", " --gemm 32768x7168x2048:", " --gemm 7168x4096x32768:"})
    CHECK(run.out.find(shape) == std::string::npos);
}

TEST_CASE(
    "an nccl-tests log or a calibration file on standard input is read as the file, and folders and missing files "
    "say so") {
  Scratch s("calib-stdin");
  const std::string log = kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt";
  REQUIRE(s.run("calibrate import-nccl-tests " + log + " -o file.json").status == 0);
  REQUIRE(s.run("calibrate import-nccl-tests - -o stdin.json < " + log).status == 0);
  // The same tables; only the sources differ.
  boost::json::object from_file = json_of(testing::slurp(s.file("file.json"))).as_object();
  boost::json::object from_stdin = json_of(testing::slurp(s.file("stdin.json"))).as_object();
  CHECK(from_stdin.at("provenance").at("sources") == boost::json::array{"<stdin>"});
  CHECK(from_stdin.at("collectives") == from_file.at("collectives"));
  const auto check = s.run("calibrate check - < file.json");
  CHECK(check.status == 0);
  CHECK(check.out.starts_with("# <stdin>: measured on NVIDIA A100-SXM4-80GB"));

  CHECK(testing::refusal(s.run("calibrate import-nccl-tests . -o x.json"),
                         ".: is a folder, not a file: expected the nccl-tests log")
            .empty());
  CHECK(testing::refusal(s.run("calibrate import-nccl-tests missing.txt -o x.json"),
                         "missing.txt: cannot open the nccl-tests log: No such file or directory")
            .empty());
  CHECK(testing::refusal(s.run("calibrate check ."), ".: is a folder, not a file: expected the calibration file")
            .empty());
  // A scenario's calibration is read for every simulation of it: standard input cannot be one.
  CHECK(testing::refusal(s.run("simulate --calibration - < file.json"),
                         "--calibration: -: a scenario's calibration file cannot be standard input")
            .empty());
}

// from-trace reads a trace for its kernels and for its CPU operators: once, so that a pipe or
// standard input works as the file does.
TEST_CASE("from-trace and analyze read a trace on standard input as they read the file") {
  Scratch s("calib-trace-stdin");
  REQUIRE(s.run("simulate ddp-1.3b-64xa100 --trace step.json").status == 0);
  REQUIRE(s.run("calibrate from-trace step.json ddp-1.3b-64xa100 -o file.json").status == 0);
  const auto piped = s.shell("cat step.json | " + std::string(STEPSIM_BINARY) +
                             " calibrate from-trace - ddp-1.3b-64xa100 -o stdin.json");
  INFO(piped.err);
  REQUIRE(piped.status == 0);
  CHECK(json_of(testing::slurp(s.file("stdin.json"))).at("compute") ==
        json_of(testing::slurp(s.file("file.json"))).at("compute"));
  const auto analyzed = s.run("analyze - --json - < step.json");
  REQUIRE(analyzed.status == 0);
  const boost::json::value measured = json_of(analyzed.out);
  CHECK(measured.at("source").as_string() == "/dev/stdin");
  CHECK(measured.at("steps").to_number<int>() == 1);
  CHECK(measured.at("step_time_s") == json_of(s.run("analyze step.json --json -").out).at("step_time_s"));
}

}  // namespace stepsim

namespace stepsim {
namespace {

// The shipped A100 log with every time `factor` times longer: rows only when `rows_only`,
// else with its header.
std::string a100_log_times(double factor, bool rows_only) {
  std::istringstream in(testing::slurp(kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt"));
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#")) {
      if (!rows_only) out += line + "\n";
      continue;
    }
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    for (const std::size_t time : {5, 9}) w[time] = fmt::format("{:g}", std::stod(w[time]) * factor);
    out += fmt::format("{}\n", fmt::join(w, " "));
  }
  return out;
}

double time_us(const Scratch& s, const std::string& args) {
  const auto run = s.run("collective allreduce --cluster dgx-a100-80g-hdr --calibration " + args + " --json -");
  REQUIRE(run.status == 0);
  return number(json_of(run.out).as_array().at(0), "time_us");
}

}  // namespace

// A fabric measured 50 times slower than the model (the A100 log's times x 50): the model's
// latency and bandwidth need scales of about 50, far outside what once was clamped to 0.05-20.
// The measured log's own numbers are the oracle: the 8 B row takes 40.12 x 50 = 2006 us and
// the model takes 40.00 us at 4 B as at 8 B, so 4 B takes 2006 us too (the clamp gave
// 800); 4 GiB takes 32336 x 50 = 1616800 us, so 8 GiB takes more (the clamp gave 1309558),
// about twice as much, as 4 GiB takes 1.98 times 2 GiB's 816500.
TEST_CASE("a table fifty times slower than the model is followed past its ends, continuous and never faster") {
  Scratch s("calib-x50");
  s.write("x50.txt", a100_log_times(50, false));
  REQUIRE(s.run("calibrate import-nccl-tests x50.txt -o x50.json").status == 0);
  CHECK(time_us(s, "x50.json --size 8B") == Approx(2006).epsilon(1e-9));
  CHECK(time_us(s, "x50.json --size 4B") == Approx(2006).epsilon(1e-5));
  const double at_4g = time_us(s, "x50.json --size 4GiB");
  CHECK(at_4g == Approx(1616800).epsilon(1e-9));
  const double at_8g = time_us(s, "x50.json --size 8GiB");
  CHECK(at_8g > at_4g);
  CHECK(at_8g == Approx(2 * at_4g).epsilon(0.02));
  // From 1 B to 64 GiB no size takes less time than a smaller one, but between two measured
  // rows, where the measurement itself has its noise (8 B 2006 us, 16 B 1982 us).
  const auto sweep = s.run(
      "collective allreduce --cluster dgx-a100-80g-hdr --calibration x50.json --sweep 1B:64GiB --factor 1.3 "
      "--json -");
  REQUIRE(sweep.status == 0);
  const auto rows = json_of(sweep.out).as_array();
  for (std::size_t i = 1; i < rows.size(); ++i) {
    INFO("size " << number(rows[i], "size_bytes"));
    if (rows[i].at("source").as_string() == "measured" && rows[i - 1].at("source").as_string() == "measured") continue;
    CHECK(number(rows[i], "time_us") >= number(rows[i - 1], "time_us"));
  }
}

// Scaled by 50, the log predicts each of its points from the others with the errors the log
// itself does: a correction is the measurement's own proportion to the model, whatever it is.
// The clamp made the table's two ends -60 % off.
TEST_CASE("calibrate check of a table fifty times slower finds the errors of the table itself") {
  Scratch s("calib-check-x50");
  s.write("x50.txt", a100_log_times(50, false));
  REQUIRE(s.run("calibrate import-nccl-tests x50.txt -o x50.json").status == 0);
  REQUIRE(
      s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o a.json").status ==
      0);
  const auto slow = s.run("calibrate check x50.json");
  const auto plain = s.run("calibrate check a.json");
  REQUIRE(slow.status == 0);
  REQUIRE(plain.status == 0);
  for (const char* size : {"8", "4294967296"}) {
    INFO("size " << size);
    const auto x50 = check_row(slow.out, "# allreduce", size);
    const auto x1 = check_row(plain.out, "# allreduce", size);
    CHECK(x50[3] == x1[3]);
    CHECK(x50[6] == "scaled");
  }
  // "# leave-one-out: 30 point(s), mean |error| 3.1% calibrated (max 24.6%"
  const auto calibrated = [](const std::string& out) {
    const auto from = out.find("# leave-one-out: 30 point(s)");
    return from == std::string::npos ? out : out.substr(from, out.find(')', from) - from);
  };
  CHECK(calibrated(slow.out) == calibrated(plain.out));
}

// The same log as a two-node table of 16 ranks (rows only, shape given by flags), x 50: more
// nodes of the same 8 GPUs take no less time for 256 MiB than the 16 measured (2392.6 x 50 =
// 119630 us); the clamp made 32 and 4096 GPUs faster than that.
TEST_CASE("a communicator grown from a measured one never takes less time than it") {
  Scratch s("calib-x50-nodes");
  s.write("x50.txt", a100_log_times(50, true));
  REQUIRE(s.run("calibrate import-nccl-tests x50.txt --op all_reduce_perf --gpu \"NVIDIA A100-SXM4-80GB\" --ranks 16 "
                "--nodes 2 -o x50.json")
              .status == 0);
  double before = 0;
  for (const int gpus : {16, 32, 64, 512, 4096}) {
    INFO(gpus << " GPUs");
    const double us = time_us(s, fmt::format("x50.json --size 256MiB --gpus {}", gpus));
    if (gpus == 16) CHECK(us == Approx(119630).epsilon(1e-9));
    CHECK(us >= before);
    before = us;
  }
}

}  // namespace stepsim

namespace stepsim {

// The shipped A100 log's first line says the test (all_reduce_perf), 8 GPUs on one node and
// their name: a flag that says otherwise would relabel the measurement (the A100's table
// applied to the H100 preset, past the check that refuses a table of another GPU), so it is
// refused naming the flag and that line; flags that agree change nothing.
TEST_CASE("import-nccl-tests refuses a flag that contradicts the log's header, naming the flag and the line") {
  Scratch s("calib-flags");
  const std::string log = kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt";
  const auto refusal_of = [&](const std::string& flags) {
    return s.run(fmt::format("calibrate import-nccl-tests {} {} -o x.json", log, flags));
  };
  const std::string where = "a100-80g-8gpu-allreduce-a.txt: line 1: ";
  CHECK(testing::refusal(refusal_of("--gpu \"NVIDIA H100 80GB HBM3\""),
                         where + "--gpu 'NVIDIA H100 80GB HBM3' contradicts the log's header, which says the GPU is "
                                 "'NVIDIA A100-SXM4-80GB' here (--gpu is for a log that does not say which GPU ran, "
                                 "one that keeps only its rows: leave it out)") == "");
  CHECK(testing::refusal(refusal_of("--op allgather"), where +
                                                           "--op allgather contradicts the log's header, which says "
                                                           "the test is all_reduce_perf here") == "");
  CHECK(testing::refusal(refusal_of("--ranks 16"),
                         where + "--ranks 16 contradicts the log's header, which says 8 ranks ran the test here") ==
        "");
  CHECK(testing::refusal(refusal_of("--ranks 8 --nodes 2"),
                         where + "--nodes 2 contradicts the log's header, which says the ranks ran on one node here") ==
        "");
  CHECK(s.entries().empty());
  // Agreeing flags, in the header's words or others for the same things.
  CHECK(s.run(fmt::format("calibrate import-nccl-tests {} --gpu \"NVIDIA A100-SXM4-80GB\" --op allreduce --ranks 8 "
                          "--nodes 1 -o x.json",
                          log))
            .status == 0);
}

// A full header: its device lines name the ranks (0 to 3) and the hosts (node-a, node-b) at
// lines 4 to 7; "nThread 1 nGpus 2" (line 2) is one process's ranks, of which the whole run's
// are a multiple when the device lines are not there.
TEST_CASE("a full nccl-tests header's device lines and process counts are what the flags must agree with") {
  Scratch s("calib-flags-full");
  const std::string rows = "1024 256 float sum -1 30.11 0.03 0.06 0 29.80 0.03 0.06 0\n";
  s.write("full.txt",
          "# Collective test starting: all_reduce_perf\n"
          "# nThread 1 nGpus 2 minBytes 1024 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20\n"
          "# Using devices\n"
          "#  Rank  0 Group  0 Pid  11 on     node-a device  0 [0000:07:00] NVIDIA H100 80GB HBM3\n"
          "#  Rank  1 Group  0 Pid  11 on     node-a device  1 [0000:0f:00] NVIDIA H100 80GB HBM3\n"
          "#  Rank  2 Group  0 Pid  12 on     node-b device  0 [0000:07:00] NVIDIA H100 80GB HBM3\n"
          "#  Rank  3 Group  0 Pid  12 on     node-b device  1 [0000:0f:00] NVIDIA H100 80GB HBM3\n" +
              rows);
  CHECK(testing::refusal(s.run("calibrate import-nccl-tests full.txt --nodes 1 -o x.json"),
                         "full.txt: lines 4-7: --nodes 1 contradicts the log's header, which says the ranks ran on 2 "
                         "hosts here") == "");
  CHECK(testing::refusal(s.run("calibrate import-nccl-tests full.txt --ranks 8 -o x.json"),
                         "full.txt: lines 4-7: --ranks 8 contradicts the log's header, which says 4 ranks ran the "
                         "test here") == "");
  CHECK(testing::refusal(s.run("calibrate import-nccl-tests full.txt --gpu \"NVIDIA H100 PCIe\" -o x.json"),
                         "full.txt: line 4: --gpu 'NVIDIA H100 PCIe' contradicts the log's header, which says the GPU "
                         "is 'NVIDIA H100 80GB HBM3' here") == "");
  CHECK(s.run("calibrate import-nccl-tests full.txt --ranks 4 --nodes 2 --gpu \"NVIDIA H100 80GB HBM3\" -o x.json")
            .status == 0);
  // Without the device lines, 2 ranks a process: 6 ranks are three processes, 5 no whole number.
  s.write("process.txt",
          "# Collective test starting: all_reduce_perf\n"
          "# nThread 1 nGpus 2 minBytes 1024 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20\n" +
              rows);
  CHECK(testing::refusal(s.run("calibrate import-nccl-tests process.txt --gpu \"NVIDIA H100 80GB HBM3\" --ranks 5 -o "
                               "x.json"),
                         "process.txt: line 2: --ranks 5 contradicts the log's header, which says each process ran 2 "
                         "rank(s) (nThread x nGpus, -g), of which 5 is no whole number of processes") == "");
  CHECK(s.run("calibrate import-nccl-tests process.txt --gpu \"NVIDIA H100 80GB HBM3\" --ranks 6 --nodes 3 -o x.json")
            .status == 0);
}

}  // namespace stepsim

namespace stepsim {

// --ranks -8 was refused and --ranks 0 taken as not given (the log's 8 ranks used instead):
// 0 ranks or nodes is as far from a communicator as -8, and is refused alike.
TEST_CASE("import-nccl-tests refuses --ranks 0 and --nodes 0 as it refuses a negative count") {
  Scratch s("calib-zero-flags");
  const std::string log = kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt";
  for (const char* ranks : {"-8", "0"}) {
    INFO("--ranks " << ranks);
    CHECK(testing::refusal(s.run(fmt::format("calibrate import-nccl-tests {} --ranks {} -o x.json", log, ranks)),
                           fmt::format("<command line>: --ranks: expected 1 to 1048576 ranks, got {}", ranks)) == "");
  }
  for (const char* nodes : {"-1", "0"}) {
    INFO("--nodes " << nodes);
    CHECK(testing::refusal(s.run(fmt::format("calibrate import-nccl-tests {} --nodes {} -o x.json", log, nodes)),
                           fmt::format("<command line>: --nodes: expected 1 to 1048576 nodes, got {}", nodes)) == "");
  }
  CHECK(testing::refusal(s.run(fmt::format("calibrate import-nccl-tests {} --ranks 0 --nodes 0 -o x.json", log)),
                         "--ranks: expected 1 to 1048576 ranks") == "");
  CHECK(s.entries().empty());
}

// Pipeline SendRecv of 2 ranks runs inside a node (stage 0 to 1) and across nodes (stage 3 to
// 4): two communicators of as many ranks. Rank 0's own communication is the in-node link and
// its TP AllReduce, so the share of its communication measured is above 0 with the in-node
// table, which changes its step, and 0 with the cross-node table alone.
TEST_CASE("the measured share of communication counts the communicators of the measured shape only") {
  Scratch s("calib-sendrecv-shape");
  const std::string rows =
      "33554432 16777216 bfloat16 none -1 332.0 101.07 101.07 0 332.0 101.07 101.07 0\n"
      "67108864 33554432 bfloat16 none -1 541.3 123.98 123.98 0 541.3 123.98 123.98 0\n"
      "134217728 67108864 bfloat16 none -1 934.7 143.59 143.59 0 934.7 143.59 143.59 0\n";
  s.write("in.txt", "# sendrecv_perf -b 32M -e 128M -g 2 on one node with 2x NVIDIA H100 80GB HBM3\n" + rows);
  s.write("across.txt",
          "# sendrecv_perf -b 32M -e 128M with 2x NVIDIA H100 80GB HBM3, one GPU on each of 2 hosts\n" + rows);
  REQUIRE(s.run("calibrate import-nccl-tests in.txt -o in.json").status == 0);
  REQUIRE(s.run("calibrate import-nccl-tests across.txt --nodes 2 -o across.json").status == 0);
  const std::string job =
      "simulate --set parallel.tp=2 --set parallel.pp=8 --set parallel.dp=1 --set training.global_batch=16 --set "
      "cluster=dgx-h100-ndr --set cluster.nodes=2 --json - ";
  const auto plain = s.run(job), in = s.run(job + "--calibration in.json"),
             across = s.run(job + "--calibration across.json");
  REQUIRE(plain.status == 0);
  REQUIRE(in.status == 0);
  REQUIRE(across.status == 0);
  const auto a = json_of(plain.out), b = json_of(in.out), c = json_of(across.out);
  CHECK(number(b, "step_time_s") != number(a, "step_time_s"));
  CHECK(number(b.at("calibration"), "comm_fraction") > 0);
  CHECK(number(c.at("calibration"), "comm_fraction") == 0);
}

// The plan's runs, measured as the model times them and imported, are the very communicators
// the simulation uses: on GB200 NVL72 the 36-rank data-parallel group spans two racks of 18
// trays, one rank a tray (12 trays of 3 would be one rack, a shape the job does not have).
TEST_CASE("the plan's nccl-tests runs measure the communicators the simulation uses") {
  Scratch s("calib-plan-e2e");
  const std::string job =
      "default --set cluster=gb200-nvl72 --set parallel.tp=4 --set parallel.dp=36 --set "
      "training.global_batch=288";
  const auto plan = s.run("calibrate plan " + job + " --json -");
  REQUIRE(plan.status == 0);
  const auto p = json_of(plan.out);
  std::string commands;
  for (const auto& c : p.at("commands").as_array()) commands += std::string(c.at("command").as_string()) + "\n";
  CHECK(commands.find("mpirun -np 36 -N 1 all_reduce_perf") != std::string::npos);
  std::string logs;
  std::vector<std::string> shapes;
  int i = 0;
  for (const auto& n : p.at("collectives").as_array()) {
    const std::string op(n.at("op").as_string()), dtype(n.at("dtype").as_string());
    const int ranks = static_cast<int>(number(n, "ranks")), per_host = static_cast<int>(number(n, "ranks_per_node"));
    REQUIRE(op == "allreduce");
    const auto lo = static_cast<long long>(std::exp2(std::floor(std::log2(number(n, "min_bytes")))));
    const auto hi = static_cast<long long>(std::exp2(std::ceil(std::log2(number(n, "max_bytes")))));
    const auto model = s.run(fmt::format(
        "collective allreduce --cluster gb200-nvl72 --gpus {} --ranks-per-node {} --sweep {}B:{}B --factor 2 --json -",
        ranks, per_host, lo, hi));
    REQUIRE(model.status == 0);
    std::string log = "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 1\n# Using devices\n";
    for (int r = 0; r < ranks; ++r)
      log += fmt::format("#  Rank {} Group  0 Pid {} on tray{} device {} [0x{:02x}] NVIDIA GB200\n", r, 1000 + r,
                         r / per_host, r % per_host, r % 256);
    const auto rows = json_of(model.out);
    for (const auto& row : rows.as_array()) {
      const double us = number(row, "time_us");
      // An all-reduce row's count is its size in elements of the run's type.
      const double size = number(row, "size_bytes");
      log += fmt::format("{:.0f} {:.0f} {} sum -1 {:.6f} 1 1 0 {:.6f} 1 1 0\n", size, size / (dtype == "float" ? 4 : 2),
                         dtype, us, us);
    }
    s.write(fmt::format("run-{}.txt", i), log);
    logs += fmt::format(" run-{}.txt", i++);
  }
  REQUIRE(i == 2);
  REQUIRE(s.run("calibrate import-nccl-tests" + logs + " -o e2e.json").status == 0);
  const auto run = s.run("simulate " + job + " --calibration e2e.json --json -");
  REQUIRE(run.status == 0);
  const auto report = json_of(run.out);
  const auto& c = report.at("calibration");
  std::string measured;
  for (const auto& m : c.at("measured").as_array()) measured += std::string(m.as_string()) + "\n";
  CHECK(measured.find("allreduce 36 ranks on 2 node(s) x 18: measured") != std::string::npos);
  CHECK(measured.find("allreduce 4 ranks on 1 node(s) x 4: measured") != std::string::npos);
  for (const auto& m : c.at("not_measured").as_array())
    CHECK_FALSE(std::string(m.as_string()).starts_with("allreduce"));
}

namespace {

// A run of `test` (all_reduce_perf unless said) on `ranks` H100s of one node, bfloat16, 64 KiB
// to 128 MiB at 40 us + S / 250 GB/s, with NCCL's lines saying what the environment forced
// (none where empty).
std::string ring_log(const std::string& nccl_lines, const std::string& test = "all_reduce_perf", int ranks = 8) {
  std::string log =
      "# Collective test starting: " + test + "\n" + nccl_lines +
      "NCCL version 2.21.5+cuda12.4\n# nThread 1 nGpus 1 minBytes 64KiB maxBytes 128MiB\n# Using devices\n";
  for (int r = 0; r < ranks; ++r)
    log += fmt::format("#  Rank {} Group  0 Pid {} on node0 device {} [0x{:02x}] NVIDIA H100 80GB HBM3\n", r, 1000 + r,
                       r, r);
  for (long long size = 1 << 16; size <= (1 << 27); size *= 2) {
    const double us = 40 + static_cast<double>(size) / 250e3;
    log += fmt::format("{} {} bfloat16 sum -1 {:.3f} 0 0 0 {:.3f} 0 0 0\n", size, size / 2, us, us);
  }
  return log;
}

}  // namespace

// A run with NCCL_ALGO=Ring and NCCL_PROTO=Simple (NCCL's own lines say so, or the flags where
// the log keeps none of them) is a ring/simple table: what a scenario forcing ring and simple
// uses, and `calibrate check` checks against such a scenario as simulate does.
TEST_CASE("a log of a run with the algorithm and protocol forced imports as a table of them") {
  Scratch s("calib-forced");
  s.write("said.txt", ring_log("node0:1000:1000 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n"
                               "node0:1000:1000 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n"));
  s.write("silent.txt", ring_log(""));
  s.write("list.txt", ring_log("node0:1000:1000 [0] NCCL INFO NCCL_ALGO set by environment to Ring,Tree\n"));
  REQUIRE(s.run("calibrate import-nccl-tests said.txt -o said.json").status == 0);
  const auto flags = s.run("calibrate import-nccl-tests silent.txt --algorithm ring --protocol Simple -o flags.json");
  REQUIRE(flags.status == 0);
  CHECK(flags.out.find("bfloat16 (ring/simple forced)") != std::string::npos);
  for (const char* file : {"said.json", "flags.json"}) {
    INFO(file);
    const auto t = json_of(testing::slurp(s.file(file))).at("collectives").at(0);
    CHECK(t.at("algorithm").as_string() == "ring");
    CHECK(t.at("protocol").as_string() == "simple");
  }
  CHECK(testing::refusal(s.run("calibrate import-nccl-tests said.txt --algorithm tree -o x.json"),
                         "said.txt: line 2: --algorithm tree contradicts the log's header, which says NCCL ran with "
                         "NCCL_ALGO set to Ring here") == "");
  CHECK(testing::refusal(s.run("calibrate import-nccl-tests list.txt -o x.json"),
                         "list.txt: line 2: NCCL_ALGO 'Ring,Tree' is not one algorithm stepsim models") == "");
  CHECK(testing::refusal(s.run("calibrate import-nccl-tests silent.txt --protocol fast -o x.json"),
                         "<command line>: --protocol: expected one protocol") == "");
  s.write("ring.json", R"({"model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": {"tp": 8, "dp": 8},
    "training": {"global_batch": 128, "micro_batch": 2}, "collectives": {"algorithm": "ring", "protocol": "simple"}})");
  s.write("auto.json", R"({"model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": {"tp": 8, "dp": 8},
    "training": {"global_batch": 128, "micro_batch": 2}})");
  const auto run = s.run("simulate ring.json --calibration said.json --json -");
  REQUIRE(run.status == 0);
  CHECK(json_of(run.out).at("calibration").at("measured").as_array().size() > 0);
  CHECK(s.run("calibrate check said.json ring.json").status == 0);
  CHECK(s.run("calibrate check said.json").status == 0);
  // As simulate refuses it for a scenario that lets NCCL choose, so does the check.
  const std::string why = "said.json: /collectives/0: measured with algorithm ring forced, but NCCL chooses";
  CHECK(testing::refusal(s.run("simulate auto.json --calibration said.json"), why) == "");
  CHECK(testing::refusal(s.run("calibrate check said.json auto.json"), why) == "");
}

// NCCL 2.24's per-function form of NCCL_ALGO: the list naming the test's collective counts
// ("allgather:ring;allreduce:tree" forces Tree on an AllReduce run), else the unnamed one
// ("ring;allgather:tree": Ring), else none: "allgather:ring" leaves the AllReduce to NCCL, as an
// unlabelled table. A list of several for the collective is still not one algorithm.
TEST_CASE("a per-function NCCL_ALGO forces what it says of the test's collective") {
  Scratch s("calib-per-function");
  const auto algorithm_of = [&](const std::string& value) -> std::string {
    s.write("log.txt", ring_log("node0:1000:1000 [0] NCCL INFO NCCL_ALGO set by environment to " + value + "\n"));
    const auto run = s.run("calibrate import-nccl-tests log.txt -o out.json");
    if (run.status != 0) return run.err;
    const boost::json::value file = json_of(testing::slurp(s.file("out.json")));
    const boost::json::object& table = file.at("collectives").at(0).as_object();
    return table.contains("algorithm") ? std::string(table.at("algorithm").as_string()) : "NCCL's choice";
  };
  CHECK(algorithm_of("allgather:ring;allreduce:tree") == "tree");
  CHECK(algorithm_of("AllReduce:Tree") == "tree");
  CHECK(algorithm_of("ring;allgather:tree") == "ring");
  CHECK(algorithm_of("allgather:ring") == "NCCL's choice");
  CHECK(algorithm_of("allreduce:tree,ring")
            .find("log.txt: line 2: NCCL_ALGO 'allreduce:tree,ring' is not one algorithm stepsim models") !=
        std::string::npos);
}

// A SendRecv log from a run with NCCL_ALGO=Ring set is a measurement of NCCL's own transfers: it
// imports as an unlabelled table, serves scenarios forced or not, and a file that labels a
// point-to-point table with an algorithm is refused at that table.
TEST_CASE("a point-to-point log imports as NCCL's own choice, whatever NCCL_ALGO said") {
  Scratch s("forced-p2p-import");
  s.write("ring.txt",
          ring_log("node0:1000:1000 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n", "sendrecv_perf", 2));
  REQUIRE(s.run("calibrate import-nccl-tests ring.txt -o p2p.json").status == 0);
  const auto doc = json_of(testing::slurp(s.file("p2p.json")));
  const auto& table = doc.at("collectives").at(0).as_object();
  CHECK(table.at("op").as_string() == "sendrecv");
  CHECK_FALSE(table.contains("algorithm"));
  CHECK_FALSE(table.contains("protocol"));
  const std::string scenario =
      "--set model=llama3-8b --set cluster=dgx-h100-ndr --set parallel.tp=4 "
      "--set parallel.pp=2 --set parallel.dp=1 --set training.global_batch=8 "
      "--set calibration=[\\\"p2p.json\\\"]";
  CHECK(s.run("simulate " + scenario).status == 0);
  CHECK(s.run("simulate " + scenario + " --set collectives.algorithm=ring").status == 0);

  std::string labelled = testing::slurp(s.file("p2p.json"));
  labelled.replace(labelled.find("\"op\""), 4, "\"algorithm\": \"ring\", \"op\"");
  s.write("labelled.json", labelled);
  CHECK(testing::refusal(
            s.run("calibrate check labelled.json"),
            "labelled.json: /collectives/0/algorithm: sendrecv runs as point-to-point sends and receives, which "
            "NCCL_ALGO and NCCL_PROTO do not touch; leave \"algorithm\" out") == "");
}

// -d all writes a row per type: the summary says each table's type.
TEST_CASE("the import summary names each table's element type") {
  Scratch s("calib-summary-dtype");
  std::string log = "# all_reduce_perf -g 8 on one node with 8x NVIDIA H100 80GB HBM3\n";
  for (long long size = 1 << 20; size <= (1 << 22); size *= 2)
    for (const char* type : {"float", "bfloat16"})
      log += fmt::format("{} {} {} sum -1 {:.2f} 0 0 0 {:.2f} 0 0 0\n", size,
                         size / (std::string_view(type) == "float" ? 4 : 2), type,
                         20 + static_cast<double>(size) / 200e3, 20 + static_cast<double>(size) / 200e3);
  s.write("mixed.txt", log);
  const auto import = s.run("calibrate import-nccl-tests mixed.txt -o m.json");
  REQUIRE(import.status == 0);
  CHECK(import.out.find("dtype") != std::string::npos);
  CHECK(import.out.find("%  bfloat16\n") != std::string::npos);
  CHECK(import.out.find("%  float\n") != std::string::npos);
  // The collective command's rows are float's: the bfloat16 table alone stands for them by bytes.
  REQUIRE(s.run("calibrate import-nccl-tests mixed.txt --dtype bfloat16 -o bf.json").status == 0);
  const auto one = s.run("collective allreduce --gpus 8 --size 2MiB --calibration bf.json");
  REQUIRE(one.status == 0);
  CHECK(one.out.find("(above: measured, from a bfloat16 table matched by bytes)") != std::string::npos);
  const auto both = s.run("collective allreduce --gpus 8 --size 2MiB --calibration m.json --json -");
  REQUIRE(both.status == 0);
  CHECK(json_of(both.out).at(0).at("table_dtype").as_string() == "float");
}

// A log that keeps only its rows and says 16 ranks but not on how many hosts: an A100 host holds
// 8, so one node of 16 is no run that happened.
TEST_CASE("a rows-only log of more ranks than a host holds needs --nodes") {
  Scratch s("calib-rows16");
  s.write("rows16.txt", "1048576 262144 float sum -1 120.0 0 0 0 120.0 0 0 0\n");
  const std::string base =
      "calibrate import-nccl-tests rows16.txt --op allreduce --gpu \"NVIDIA A100-SXM4-80GB\" --ranks 16";
  CHECK(testing::refusal(s.run(base + " -o x.json"),
                         "rows16.txt: line 1: 16 ranks ran the test, more than a host of NVIDIA A100-SXM4-80GB holds "
                         "(8 GPUs), and the log does not say on how many hosts: give --nodes") == "");
  const auto two = s.run(base + " --nodes 2 -o x.json");
  REQUIRE(two.status == 0);
  CHECK(two.out.find("16 rank(s), 2 node(s) x 8") != std::string::npos);
}

// A 2-node run's times are the network's: read as one node's they would stand for NVLink and
// charge every tensor-parallel collective the network's time. nccl-tests before 2.13 printed
// its device lines without a group ("#   Rank %2d Pid %6d on %10s device %2d [0x%02x] %s"), and
// its -J file lists each process's first rank alone (util.cu, writeDeviceReport).
TEST_CASE("logs of two hosts of 8 GPUs import as 16 ranks on 2 nodes, old text and -J alike") {
  Scratch s("calib-2x8");
  std::string legacy = "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 1048576 step: 2(factor) warmup iters: 5\n";
  for (int r = 0; r < 16; ++r)
    legacy += fmt::format("#   Rank {:2d} Pid {:6d} on {:>10} device {:2d} [0x{:02x}] NVIDIA A100-SXM4-80GB\n", r,
                          4000 + r / 8, r < 8 ? "node0" : "node1", r % 8, r);
  s.write("legacy.txt", legacy + "1048576 262144 float sum 86.21 12.16 22.81 1e-07 86.00 12.19 22.86 1e-07\n");
  const auto old = s.run("calibrate import-nccl-tests legacy.txt --op all_reduce_perf -o a.json");
  INFO(old.err);
  REQUIRE(old.status == 0);
  CHECK(old.out.find("allreduce      16 rank(s), 2 node(s) x 8") != std::string::npos);
  s.write("run.json", R"({"version":2,"args":["./build/all_reduce_perf","-g","8"],"nccl_version":22703,
    "config":{"nthreads":1,"ngpus":8,"devices":[
      {"rank":0,"group":0,"pid":11,"hostname":"node0","device":0,"device_hex":"0000:07:00","device_info":"NVIDIA A100-SXM4-80GB"},
      {"rank":8,"group":0,"pid":12,"hostname":"node1","device":0,"device_hex":"0000:07:00","device_info":"NVIDIA A100-SXM4-80GB"}]},
    "results":[{"size":1048576,"count":262144,"type":"float","redop":"sum","root":"    -1",
      "out_of_place":{"time":86.21,"alg_bw":12.16,"bus_bw":22.81,"nwrong":0.0},
      "in_place":{"time":86.00,"alg_bw":12.19,"bus_bw":22.86,"nwrong":0.0}}]})");
  const auto json = s.run("calibrate import-nccl-tests run.json -o b.json");
  INFO(json.err);
  REQUIRE(json.status == 0);
  CHECK(json.out.find("allreduce      16 rank(s), 2 node(s) x 8") != std::string::npos);
}

}  // namespace stepsim

namespace stepsim {

// calibrate check predicts a held-out point as `stepsim collective` does: 8 ranks one per DGX
// A100 node move 2(n-1)/n = 1.75 of 1 GiB each over a 25 GB/s HDR NIC, at least 1.75 x
// 1073741824 B / 25 GB/s = 75161.9 us, however fast the two-node table (230 GB/s busbw, NCCL's
// tree) scales the model; before the limit the check's prediction was 63686.80 us.
TEST_CASE("calibrate check holds a prediction scaled from another shape to what the fabric carries") {
  Scratch s("calib-check-fabric");
  s.write("two.txt", kTwoA100Nodes);
  s.write("eight.txt",
          "# mpirun -np 8 -N 1 all_reduce_perf -b 1G -e 1G -g 1 on 8 DGX A100 nodes, one NVIDIA A100-SXM4-80GB each\n"
          "1073741824 268435456 float sum -1 80000.0 13.42 23.49 0 80000.0 13.42 23.49 0\n");
  REQUIRE(s.run("calibrate import-nccl-tests two.txt -o two.json").status == 0);
  const auto run = s.run("calibrate check two.json --cluster dgx-a100-80g-hdr --held-out eight.txt");
  REQUIRE(run.status == 0);
  const auto row = check_row(run.out, "# held-out eight.txt", "1073741824");
  REQUIRE(row.size() == 7);
  CHECK(row.back() == "scaled");
  CHECK(std::stod(row[2]) >= 75161.9);
}

// sweep --calibration applies the files to every point as simulate --calibration does: each row's
// step time is the one simulate gives the point with the same file, and a scenario that needs
// its points' values to validate takes the flag too.
TEST_CASE("sweep --calibration calibrates every point as simulate --calibration does") {
  Scratch s("calib-sweep");
  REQUIRE(
      s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o a.json").status ==
      0);
  const auto sweep = s.run("sweep korthikanti-22b --vary training.micro_batch=1,2 --calibration a.json -o rows.jsonl");
  INFO(sweep.err);
  REQUIRE(sweep.status == 0);
  std::istringstream rows(testing::slurp(s.file("rows.jsonl")));
  int seen = 0;
  for (std::string line; std::getline(rows, line); ++seen) {
    const auto row = json_of(line);
    const int mb = static_cast<int>(number(row, "training.micro_batch"));
    const auto alone =
        s.run(fmt::format("simulate korthikanti-22b --set training.micro_batch={} --calibration a.json --json -", mb));
    REQUIRE(alone.status == 0);
    CHECK(number(row, "step_time_s") == number(json_of(alone.out), "step_time_s"));
  }
  CHECK(seen == 2);
  // The calibration moves the step: the rows are not the model's.
  const auto plain = s.run("simulate korthikanti-22b --set training.micro_batch=1 --json -");
  const auto calibrated = s.run("simulate korthikanti-22b --set training.micro_batch=1 --calibration a.json --json -");
  CHECK(number(json_of(plain.out), "step_time_s") != number(json_of(calibrated.out), "step_time_s"));
  // pp 64 does not divide the 48 layers; the points' pp does.
  CHECK(
      s.run("sweep korthikanti-22b --set parallel.pp=64 --vary parallel.pp=1,2 --calibration a.json -o g.csv").status ==
      0);
  CHECK(testing::refusal(s.run("sweep --merge all.csv g.csv --calibration a.json"),
                         "--calibration: cannot be combined with --merge") == "");
}

}  // namespace stepsim
