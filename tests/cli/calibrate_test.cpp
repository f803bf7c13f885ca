// `stepsim calibrate` and `--calibration` end to end: nccl-tests logs in, measured sizes
// reproduced; a trace of changed efficiencies in, the changes fitted back; bad files refused.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include "cli/run_stepsim.hpp"

namespace stepsim {
namespace {

using testing::Scratch;

const std::string kData = STEPSIM_TEST_DATA;

boost::json::value json_of(const std::string& text) { return boost::json::parse(text); }

double number(const boost::json::value& v, const char* key) { return v.at(key).to_number<double>(); }

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

TEST_CASE("from-trace fits changed GPU efficiencies back within 2 percent") {
  Scratch s("calib-trace");
  const std::string changed =
      "--set cluster.gpu.efficiency.gemm_max=0.7 --set cluster.gpu.efficiency.gemm_half_flops=1e10 "
      "--set cluster.gpu.efficiency.attention_max=0.5 --set cluster.gpu.efficiency.hbm=0.7 "
      "--set cluster.gpu.efficiency.comm_slowdown=0.2";
  const auto sim = s.run("simulate " + changed + " --trace step.json --json report.json");
  REQUIRE(sim.status == 0);
  const auto fit = s.run("calibrate from-trace step.json \"\" -o fitted.json");
  REQUIRE(fit.status == 0);
  const auto eff = json_of(testing::slurp(s.file("fitted.json"))).at("compute").at("efficiency");
  CHECK(number(eff, "gemm_max") == Approx(0.7).epsilon(0.02));
  CHECK(number(eff, "gemm_half_flops") == Approx(1e10).epsilon(0.02));
  CHECK(number(eff, "attention_max") == Approx(0.5).epsilon(0.02));
  CHECK(number(eff, "hbm") == Approx(0.7).epsilon(0.02));
  CHECK(number(eff, "comm_slowdown") == Approx(0.2).epsilon(0.02));
  const auto again = s.run("simulate --calibration fitted.json --json -");
  REQUIRE(again.status == 0);
  const double trace_step = number(json_of(testing::slurp(s.file("report.json"))), "step_time_s");
  CHECK(number(json_of(again.out), "step_time_s") == Approx(trace_step).epsilon(0.02));
}

TEST_CASE("from-trace on a trace of another model runs and says what it could not fit") {
  Scratch s("calib-real");
  const auto run = s.run("calibrate from-trace " + kData + "/traces/resnet50-ddp-a100-rank0of2.json.gz \"\" -o f.json");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("not fitted: the trace has no attention kernels") != std::string::npos);
  CHECK(run.out.find("0 matched to <default> ops by name") != std::string::npos);
}

TEST_CASE("calibrate check prints each measured point with both errors") {
  Scratch s("calib-check");
  REQUIRE(
      s.run("calibrate import-nccl-tests " + kData + "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o a.json").status ==
      0);
  const auto run = s.run("calibrate check a.json");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("predicted on dgx-a100-80g-hdr") != std::string::npos);
  CHECK(run.out.find("# 30 point(s): mean |error| 0.0% calibrated") != std::string::npos);
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
  CHECK(empty.err.find("<default>: /calibration/0: expected a calibration file name, got \"\"") != std::string::npos);
  CHECK(s.entries().empty());
}

}  // namespace stepsim
