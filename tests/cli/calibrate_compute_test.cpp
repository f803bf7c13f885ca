// The compute side of calibration end to end: measured tables looked up in each op's own
// precision, efficiencies fitted back from stepsim's own traces, and what the report says
// after a calibration.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include "cli/run_stepsim.hpp"
#include "cli/simulate_support.hpp"

namespace stepsim {
namespace {

using testing::Scratch;

boost::json::value parsed(const std::string& text) { return boost::json::parse(text); }

double number_at(const boost::json::value& v, const char* key) { return v.at(key).to_number<double>(); }

bool contains(const boost::json::array& a, const std::string& s) {
  for (const auto& v : a)
    if (v.is_string() && v.as_string() == s) return true;
  return false;
}

// BF16 GEMM and attention tables reaching from a tiny kernel to far beyond any op of the
// default scenario (8 KFLOP to 5.6e14 FLOPs; attention 2e6 to 2e16), and nothing in FP8.
constexpr const char* kBf16Tables = R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA H100 80GB HBM3"},
  "compute": {
    "gemm": [{"m": 16, "n": 16, "k": 16, "dtype": "bf16", "time_us": 5},
             {"m": 65536, "n": 65536, "k": 65536, "dtype": "bf16", "time_us": 1000000}],
    "attention": [
      {"pass": "forward", "batch": 1, "heads": 1, "kv_heads": 1, "seq": 128, "head_dim": 64, "dtype": "bf16",
       "time_us": 5},
      {"pass": "forward", "batch": 64, "heads": 128, "kv_heads": 128, "seq": 65536, "head_dim": 256,
       "dtype": "bf16", "time_us": 100000000},
      {"pass": "backward", "batch": 1, "heads": 1, "kv_heads": 1, "seq": 128, "head_dim": 64, "dtype": "bf16",
       "time_us": 5},
      {"pass": "backward", "batch": 64, "heads": 128, "kv_heads": 128, "seq": 65536, "head_dim": 256,
       "dtype": "bf16", "time_us": 100000000}]}})";

// The efficiencies a trace is written with, away from every preset value.
constexpr const char* kChanged =
    "--set cluster.gpu.efficiency.gemm_max=0.7 --set cluster.gpu.efficiency.fp8_gemm_max=0.5 "
    "--set cluster.gpu.efficiency.attention_max=0.45 --set cluster.gpu.efficiency.gemm_half_flops=1e10 "
    "--set cluster.gpu.efficiency.hbm=0.7 --set cluster.gpu.efficiency.comm_slowdown=0.2";

struct RoundTrip {
  boost::json::value efficiency;   // what from-trace fitted
  double trace_step_s = 0;         // the step the trace was written from
  double recalibrated_step_s = 0;  // the scenario simulated with what was fitted
};

// Writes stepsim's Kineto-format trace of the default scenario with `scenario` and the changed
// efficiencies, fits it back and simulates the scenario (preset efficiencies) with the fit.
RoundTrip round_trip(const Scratch& s, const std::string& scenario) {
  const auto sim =
      s.run("simulate " + scenario + " " + kChanged + " --trace step.json --trace-format kineto --json report.json");
  REQUIRE(sim.status == 0);
  const auto fit = s.run("calibrate from-trace step.json \"\" " + scenario + " -o fitted.json");
  REQUIRE(fit.status == 0);
  const auto again = s.run("simulate " + scenario + " --calibration fitted.json --json -");
  REQUIRE(again.status == 0);
  return {parsed(testing::slurp(s.file("fitted.json"))).at("compute").at("efficiency"),
          number_at(parsed(testing::slurp(s.file("report.json"))), "step_time_s"),
          number_at(parsed(again.out), "step_time_s")};
}

void check_recovered(const RoundTrip& r) {
  CHECK(number_at(r.efficiency, "gemm_max") == Approx(0.7).epsilon(0.02));
  CHECK(number_at(r.efficiency, "fp8_gemm_max") == Approx(0.5).epsilon(0.02));
  CHECK(number_at(r.efficiency, "attention_max") == Approx(0.45).epsilon(0.02));
  CHECK(r.recalibrated_step_s == Approx(r.trace_step_s).epsilon(0.02));
}

}  // namespace

// The BF16 GEMMs of an FP8 run (the LM head) against the BF16 peak, the FP8 ones against the
// FP8 peak, attention BF16: each maximum from its own kernels.
TEST_CASE("from-trace recovers gemm_max, fp8_gemm_max and attention_max from an FP8 run") {
  Scratch s("calib-rt-fp8");
  check_recovered(round_trip(s, "--set training.precision=fp8"));
}

// An NVFP4 run's Linear GEMMs run at fp4_gemm_max of the FP4 peak, which calibration files do
// not hold: fp8_gemm_max is not fitted from them (it was, to whatever moving it did to the
// FP4 kernels, which is nothing, and their sizes moved gemm_half_flops); the BF16 LM head and
// attention still give their maxima. The LM head is one GEMM size, so the trace keeps the
// preset's gemm_half_flops, which the fit cannot find.
TEST_CASE("from-trace fits no fp8_gemm_max from an NVFP4 run's FP4 GEMMs") {
  Scratch s("calib-rt-nvfp4");
  const auto sim = s.run(
      "simulate --set cluster=dgx-b200 --set training.precision=nvfp4 --set cluster.gpu.efficiency.gemm_max=0.7 "
      "--set cluster.gpu.efficiency.fp4_gemm_max=0.3 --set cluster.gpu.efficiency.attention_max=0.45 "
      "--set cluster.gpu.efficiency.hbm=0.7 --trace step.json --trace-format kineto");
  REQUIRE(sim.status == 0);
  const auto fit =
      s.run("calibrate from-trace step.json \"\" --set cluster=dgx-b200 --set training.precision=nvfp4 -o fitted.json");
  REQUIRE(fit.status == 0);
  const auto efficiency = parsed(testing::slurp(s.file("fitted.json"))).at("compute").at("efficiency");
  CHECK_FALSE(efficiency.as_object().contains("fp8_gemm_max"));
  CHECK(number_at(efficiency, "gemm_max") == Approx(0.7).epsilon(0.02));
  CHECK(number_at(efficiency, "attention_max") == Approx(0.45).epsilon(0.02));
}

// Context parallelism runs the attention core in cp pieces beside the K/V ring; the trace
// gives each piece its own FLOPs, the last one included (it keeps the op's name).
TEST_CASE("from-trace recovers the efficiencies from a context-parallel run's attention pieces") {
  Scratch s("calib-rt-cp");
  check_recovered(round_trip(s, "--set training.precision=fp8 --set parallel.cp=2 --set parallel.dp=4"));
}

// TP communication overlap splits the GEMMs into pieces beside ring steps and ReduceScatters.
TEST_CASE("from-trace recovers the efficiencies from a TP-overlap run's GEMM pieces") {
  Scratch s("calib-rt-tp-overlap");
  const RoundTrip r = round_trip(
      s, "--set training.precision=fp8 --set parallel.sequence_parallel=true --set tensor_parallel.comm_overlap=true");
  check_recovered(r);
  CHECK(number_at(r.efficiency, "gemm_half_flops") == Approx(1e10).epsilon(0.02));
}

// Under FP8 training the Linear layers' GEMMs run in FP8, but the LM head and attention stay
// BF16 (Transformer Engine): BF16 tables are theirs, FP8 tables none of theirs.
TEST_CASE("an FP8 run's BF16 ops use BF16 tables") {
  Scratch s("calib-fp8-dtype");
  s.write("bf16.json", kBf16Tables);
  const auto run = s.run("simulate --set training.precision=fp8 --calibration bf16.json --json -");
  REQUIRE(run.status == 0);
  const auto report = parsed(run.out);
  const auto& c = report.at("calibration");
  CHECK(contains(c.at("measured").as_array(), "gemm bf16: measured"));
  CHECK(contains(c.at("measured").as_array(), "attention bf16: measured"));
  CHECK(number_at(c, "compute_fraction") > 0);
  // The BF16 run uses them for every GEMM and attention kernel, so for more of its compute.
  const auto bf16 = s.run("simulate --calibration bf16.json --json -");
  REQUIRE(bf16.status == 0);
  CHECK(number_at(parsed(bf16.out).at("calibration"), "compute_fraction") > number_at(c, "compute_fraction"));
}

}  // namespace stepsim

namespace stepsim {
namespace {

const boost::json::object* value_of(const boost::json::value& calibration, const std::string& key) {
  for (const auto& v : calibration.at("values").as_array())
    if (v.at("key").as_string() == key) return &v.as_object();
  return nullptr;
}

bool has_note(const boost::json::value& report, const std::string& text) {
  for (const auto& n : report.at("notes").as_array())
    if (std::string(n.as_string()).find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

// Calibrated from a trace, the step moves; the report says by which values, fitted where, and
// its config shows them in place of the preset's.
TEST_CASE("the report after a from-trace fit shows the fitted values and their source") {
  Scratch s("calib-report-fit");
  round_trip(s, "");
  const auto plain = s.run("simulate --json -");
  const auto run = s.run("simulate --calibration fitted.json --json -");
  REQUIRE(plain.status == 0);
  REQUIRE(run.status == 0);
  const auto preset = parsed(plain.out), report = parsed(run.out);
  const auto& preset_efficiency = preset.at("config").at("cluster").at("gpu").at("efficiency");
  const auto& efficiency = report.at("config").at("cluster").at("gpu").at("efficiency");
  CHECK(number_at(efficiency, "gemm_max") == Approx(0.7).epsilon(0.02));
  CHECK(number_at(efficiency, "attention_max") == Approx(0.45).epsilon(0.02));
  CHECK(number_at(efficiency, "hbm") == Approx(0.7).epsilon(0.02));
  const auto* gemm = value_of(report.at("calibration"), "gemm_max");
  REQUIRE(gemm != nullptr);
  CHECK(gemm->at("value").to_number<double>() == Approx(0.7).epsilon(0.02));
  CHECK(gemm->at("preset").to_number<double>() == number_at(preset_efficiency, "gemm_max"));
  CHECK(gemm->at("source").as_string() == "fitted.json: fitted to trace step.json");
  // The default scenario runs no FP8 GEMM: nothing to fit, nothing set.
  CHECK(value_of(report.at("calibration"), "fp8_gemm_max") == nullptr);
  CHECK(has_note(report, "in force: gemm_max 0.7"));
  CHECK(has_note(report, "(preset 0.681; fitted.json: fitted to trace step.json)"));
  CHECK_FALSE(has_note(report, "nothing this step uses"));
}

// FSDP over the 8 GPUs of one node gathers and reduce-scatters its parameters and gradients
// and runs no AllReduce: a one-node AllReduce table is of no use to it.
TEST_CASE("a calibration that changes nothing the job uses says which measurements the job would need") {
  Scratch s("calib-report-needs");
  s.write("allreduce.json", R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA H100 80GB HBM3"},
    "collectives": [{"op": "allreduce", "ranks": 8, "nodes": 1, "ranks_per_node": 8,
                     "fit": {"alpha_us": 9.99047278, "algbw_gbps": 107.481562, "busbw_gbps": 188.092733, "max_error": 9.08606523e-13, "alpha_fitted": true},
                     "points": [{"bytes": 1024, "time_us": 10}, {"bytes": 1073741824, "time_us": 10000}]}]})");
  const auto plain = s.run("simulate fsdp-llama2-7b-8xh100 --json -");
  const auto run = s.run("simulate fsdp-llama2-7b-8xh100 --calibration allreduce.json --json -");
  REQUIRE(plain.status == 0);
  REQUIRE(run.status == 0);
  const auto report = parsed(run.out);
  CHECK(number_at(report, "step_time_s") == number_at(parsed(plain.out), "step_time_s"));
  const auto& needed = report.at("calibration").at("not_measured").as_array();
  CHECK(contains(needed, "allgather 8 ranks on 1 node(s) x 8"));
  CHECK(contains(needed, "reducescatter 8 ranks on 1 node(s) x 8"));
  CHECK(contains(needed, "gemm bf16"));
  CHECK(contains(needed, "attention bf16"));
  CHECK(has_note(report, "the calibration changes nothing this job uses; it would need measurements of: "));
}

namespace {

bool has_unused(const boost::json::value& calibration, const std::string& key) {
  for (const auto& v : calibration.at("unused_values").as_array())
    if (v.at("key").as_string() == key) return true;
  return false;
}

}  // namespace

// An FP8 GEMM efficiency under BF16 training runs no GEMM of the step at it: the step time is
// the uncalibrated run's to the bit, so it is no figure in force, and the note says the
// calibration changes nothing and that the figure is set but unused. Under FP8 training it is
// in force and the step slower (0.1 against the preset's 0.525).
TEST_CASE("a figure the job does not use is reported as set but unused, not in force") {
  Scratch s("calib-report-unused");
  s.write("f.json", R"({"stepsim_calibration":1,"provenance":{"gpu":"h100-sxm5-80gb"},
    "compute":{"efficiency":{"fp8_gemm_max":0.1}}})");
  const auto plain = s.run("simulate --json -");
  const auto run = s.run("simulate --calibration f.json --json -");
  REQUIRE(plain.status == 0);
  REQUIRE(run.status == 0);
  const auto report = parsed(run.out);
  CHECK(number_at(report, "step_time_s") == number_at(parsed(plain.out), "step_time_s"));
  CHECK(value_of(report.at("calibration"), "fp8_gemm_max") == nullptr);
  CHECK(has_unused(report.at("calibration"), "fp8_gemm_max"));
  CHECK_FALSE(has_note(report, "in force"));
  CHECK(has_note(report, "the calibration changes nothing this job uses; it would need measurements of: "));
  CHECK(has_note(report, "; set but unused by this job: fp8_gemm_max 0.1 (preset 0.525; f.json)"));
  const auto fp8_plain = s.run("simulate --set training.precision=fp8 --json -");
  const auto fp8 = s.run("simulate --set training.precision=fp8 --calibration f.json --json -");
  REQUIRE(fp8.status == 0);
  const auto fp8_report = parsed(fp8.out);
  CHECK(number_at(fp8_report, "step_time_s") > number_at(parsed(fp8_plain.out), "step_time_s"));
  CHECK(value_of(fp8_report.at("calibration"), "fp8_gemm_max") != nullptr);
  CHECK(has_note(fp8_report, "in force: fp8_gemm_max 0.1 (preset 0.525; f.json)"));
  // A slowdown beside communication on one GPU, where nothing communicates: unused; the GEMM
  // efficiency beside it is in force.
  s.write("g.json", R"({"stepsim_calibration":1,"provenance":{"gpu":"h100-sxm5-80gb"},
    "compute":{"efficiency":{"gemm_max":0.5,"comm_slowdown":0.2}}})");
  const auto one = s.run(
      "simulate --calibration g.json --set cluster.nodes=1 --set parallel.tp=1 --set parallel.dp=1 --set "
      "training.global_batch=8 --json -");
  REQUIRE(one.status == 0);
  const auto one_report = parsed(one.out);
  CHECK(value_of(one_report.at("calibration"), "gemm_max") != nullptr);
  CHECK(value_of(one_report.at("calibration"), "comm_slowdown") == nullptr);
  CHECK(has_unused(one_report.at("calibration"), "comm_slowdown"));
  CHECK(has_note(one_report,
                 "; in force: gemm_max 0.5 (preset 0.681; g.json); set but unused by this job: "
                 "comm_slowdown 0.2 (preset 0.12; g.json)"));
}

}  // namespace stepsim

namespace stepsim {

// A host-bound step (eager GPT-3 Small, whose kernels are shorter than the CPU takes to issue
// them) with an 8 us kernel launch: its trace gives the launch back, and eager PyTorch's 12 us
// of dispatch (docs/scenario-reference.md, training.framework), and the step simulated with the
// fit is the trace's within 2 %, the tolerance of the other round trips here.
TEST_CASE("from-trace recovers a host-bound step's kernel launch and dispatch, and the step with them") {
  Scratch s("calib-host-rt");
  s.write("small.json", test::kEagerGpt3Small);
  const auto sim = s.run(
      "simulate small.json --set cluster.gpu.efficiency.gemm_max=0.5 --set cluster.gpu.efficiency.hbm=0.6 "
      "--set \"cluster.gpu.kernel_launch=8 us\" --trace-format kineto --trace slow.json --json report.json");
  INFO(sim.err);
  REQUIRE(sim.status == 0);
  const auto fit = s.run("calibrate from-trace slow.json small.json -o fit.json");
  INFO(fit.out << fit.err);
  REQUIRE(fit.status == 0);
  const auto file = parsed(testing::slurp(s.file("fit.json")));
  const auto& compute = file.at("compute");
  CHECK(number_at(compute, "launch_overhead_us") == Approx(8.0).margin(0.05));
  CHECK(number_at(compute, "dispatch_us") == Approx(12.0).margin(0.05));
  CHECK(number_at(compute.at("efficiency"), "gemm_max") == Approx(0.5).epsilon(0.02));
  CHECK(fit.out.find("kernel launch 8.0 us") != std::string::npos);
  const auto again = s.run("simulate small.json --calibration fit.json --json -");
  INFO(again.err);
  REQUIRE(again.status == 0);
  const auto report = parsed(again.out);
  const double trace_step = number_at(parsed(testing::slurp(s.file("report.json"))), "step_time_s");
  CHECK(number_at(report, "step_time_s") == Approx(trace_step).epsilon(0.02));
  // In force, from the trace, and in the config as the simulation used it.
  const auto* launch = value_of(report.at("calibration"), "kernel_launch_us");
  REQUIRE(launch != nullptr);
  CHECK(launch->at("value").to_number<double>() == Approx(8.0).margin(0.05));
  CHECK(launch->at("source").as_string() == "fit.json: fitted to trace slow.json");
  const auto* dispatch = value_of(report.at("calibration"), "dispatch_us");
  REQUIRE(dispatch != nullptr);
  CHECK(dispatch->at("value").to_number<double>() == Approx(12.0).margin(0.05));
  CHECK(report.at("config").at("cluster").at("gpu").at("kernel_launch").as_string() == "8 us");
  CHECK(has_note(report, "the CPU issues each operator in 20 us (8 us launch, 12 us dispatch)"));
}

}  // namespace stepsim

namespace stepsim {

// A trace whose kernel launches take 12 ms and whose CPU operators 9e11 us: from-trace fits a
// launch and a dispatch beyond what a calibration file holds (0 to 10000 us). It leaves them
// out, says so, and writes a file `simulate` reads.
TEST_CASE("from-trace leaves out a host cost beyond a calibration file's range, and simulate reads what it wrote") {
  Scratch s("calib-host-range");
  s.write("ddp.json", R"({"model": "gpt-1.3b", "cluster": "dgx-a100-80g-hdr", "parallel": {"tp": 1, "pp": 1, "dp": 8},
    "training": {"framework": "pytorch", "global_batch": 16, "micro_batch": 2, "precision": "bf16"},
    "data_parallel": {"kind": "ddp", "bucket_cap_mb": 25}})");
  const auto sim = s.run("simulate ddp.json --set cluster.nodes=1 --trace-format kineto --trace step.json");
  INFO(sim.err);
  REQUIRE(sim.status == 0);
  auto trace = parsed(testing::slurp(s.file("step.json")));
  int launches = 0, operators = 0;
  for (auto& e : trace.at("traceEvents").as_array()) {
    auto& o = e.as_object();
    if (!o.contains("dur")) continue;
    const auto text = [&](const char* key) {
      return o.contains(key) && o.at(key).is_string() ? std::string(o.at(key).get_string()) : std::string();
    };
    if (text("name") == "cudaLaunchKernel") {
      o["dur"] = 12000.0;
      ++launches;
    } else if (text("cat") == "cpu_op") {
      o["dur"] = 9e11;
      ++operators;
    }
  }
  REQUIRE(launches > 0);
  REQUIRE(operators > 0);
  s.write("slow.json", boost::json::serialize(trace));
  const auto fit = s.run("calibrate from-trace slow.json ddp.json --set cluster.nodes=1 -o fit.json");
  INFO(fit.out << fit.err);
  REQUIRE(fit.status == 0);
  const auto file = parsed(testing::slurp(s.file("fit.json")));
  const auto& compute = file.at("compute").as_object();
  CHECK_FALSE(compute.contains("launch_overhead_us"));
  CHECK_FALSE(compute.contains("dispatch_us"));
  CHECK(fit.out.find("not written: compute.launch_overhead_us 12000 left out: a calibration file holds microseconds "
                     "from 0 to 10000") != std::string::npos);
  CHECK(fit.out.find("not written: compute.dispatch_us ") != std::string::npos);
  const auto again = s.run("simulate ddp.json --set cluster.nodes=1 --calibration fit.json --json -");
  INFO(again.err);
  CHECK(again.status == 0);
}

}  // namespace stepsim
