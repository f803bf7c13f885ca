// A simulated step written as a PyTorch profiler (Kineto) trace: `stepsim analyze` reads back
// the simulation's own exposed communication and hidden fraction, and every GPU event carries
// what HolisticTraceAnalysis' parser needs (stream, correlation with a CPU launch, ProfilerStep).
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <set>

#include "cli/run_stepsim.hpp"

using stepsim::testing::Scratch;
using stepsim::testing::slurp;

namespace {

double exposed(const boost::json::value& report) {
  double sum = 0;
  for (const auto& [kind, s] : report.at("breakdown_s").at("exposed_comm").as_object()) sum += s.to_number<double>();
  return sum;
}

double hidden(const boost::json::value& report) {
  return report.at("overlap").at("hidden_fraction").to_number<double>();
}

// Simulates `job` into a Kineto trace, reads it back with `analyze`, and compares the two
// reports' exposed communication and hidden fraction.
void trace_round_trip(const Scratch& scratch, const std::string& job, bool exposes = true) {
  const auto sim = scratch.run("simulate " + job + " --trace-format kineto --trace step.json --json sim.json");
  INFO(sim.err);
  REQUIRE(sim.status == 0);
  const auto analyzed = scratch.run("analyze step.json --json measured.json");
  INFO(analyzed.err);
  REQUIRE(analyzed.status == 0);
  const auto s = boost::json::parse(slurp(scratch.file("sim.json")));
  const auto m = boost::json::parse(slurp(scratch.file("measured.json")));
  CHECK(exposed(m) == Approx(exposed(s)).epsilon(0.001));
  CHECK(hidden(m) == Approx(hidden(s)).epsilon(0.001));
  // Not 0 against 0: some communication is exposed, or (`exposes` false) all of it hidden.
  if (exposes) {
    CHECK(exposed(s) > 0);
  } else {
    CHECK(exposed(s) == 0);
    CHECK(hidden(s) == Approx(1.0));
  }
}

}  // namespace

TEST_CASE("A simulated step read back from its Kineto trace gives the same exposed communication and overlap") {
  Scratch scratch("kineto-round-trip");
  for (const char* scenario : {"default", "gpt3-175b-selene", "fsdp-llama3-70b",
                               "ddp-1.3b-64xa100 --set data_parallel.gradient_as_bucket_view=true"}) {
    INFO(scenario);
    trace_round_trip(scratch, scenario);
  }
  // PyTorch's default copies each bucket back after its AllReduce on the compute stream,
  // which hides the DDP example's last AllReduce whole.
  trace_round_trip(scratch, "ddp-1.3b-64xa100", false);
}

TEST_CASE("Every GPU event of the Kineto trace has the fields HolisticTraceAnalysis parses") {
  Scratch scratch("kineto-fields");
  REQUIRE(scratch.run("simulate --trace-format kineto --trace step.json").status == 0);
  const auto trace = boost::json::parse(slurp(scratch.file("step.json")));
  CHECK(trace.at("distributedInfo").at("rank").as_int64() == 0);
  std::set<std::int64_t> launches;
  int kernels = 0, nccl = 0, steps = 0;
  for (const auto& e : trace.at("traceEvents").as_array()) {
    const auto& o = e.as_object();
    if (o.at("ph").as_string() == "M") continue;
    for (const char* key : {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args"}) CHECK(o.contains(key));
    const std::string cat(o.at("cat").as_string());
    const std::string name(o.at("name").as_string());
    if (cat == "cuda_runtime") launches.insert(o.at("args").at("correlation").as_int64());
    if (cat == "user_annotation" && name == "ProfilerStep#1") ++steps;
    if (cat != "kernel") continue;
    ++kernels;
    const auto& args = o.at("args").as_object();
    CHECK(args.at("stream").as_int64() == o.at("tid").as_int64());
    CHECK(launches.count(args.at("correlation").as_int64()) == 1);
    if (name.rfind("ncclDevKernel_", 0) == 0) {
      ++nccl;
      CHECK(args.contains("Process Group Name"));
    }
  }
  CHECK(steps == 1);
  CHECK(kernels > 100);
  CHECK(nccl > 10);
}

TEST_CASE("An unknown trace format is refused naming the flag") {
  Scratch scratch("kineto-format");
  const auto run = scratch.run("simulate --trace-format perfetto --trace t.json");
  CHECK(run.status == 2);
  CHECK(run.err ==
        "stepsim: error: <command line>: --trace-format: unknown trace format 'perfetto' (expected chrome or "
        "kineto)\n");
  CHECK(scratch.entries().empty());
}

TEST_CASE("compare says when the trace and the scenario are different jobs, and fractions differ in points") {
  Scratch scratch("compare-jobs");
  const auto other =
      scratch.run(std::string("compare ") + STEPSIM_TEST_DATA + "/traces/recsys-a100-rank3of8.json.gz default");
  REQUIRE(other.status == 0);
  CHECK(other.out.find("differs: world size: the trace is of 8 ranks, the scenario of 64 GPUs") != std::string::npos);
  CHECK(other.out.find("differs: model: the scenario computes") != std::string::npos);
  CHECK(other.out.find("differs: steps: the trace holds 6 profiler steps") != std::string::npos);
  CHECK(other.out.find("pp\n") != std::string::npos);
  REQUIRE(scratch.run("simulate ddp-1.3b-64xa100 --trace-format kineto --trace sim.json").status == 0);
  const auto same = scratch.run("compare sim.json ddp-1.3b-64xa100");
  REQUIRE(same.status == 0);
  CHECK(same.out.find("differs:") == std::string::npos);
  CHECK(same.out.find("+0.0pp") != std::string::npos);
}

TEST_CASE("An all-ranks run's Kineto trace is the rank its report measures, read back to the same figures") {
  // Every GPU simulated, with jitter and a slow GPU: the critical-path rank is one of 16 and
  // is known only once every rank has run; the trace must hold it whole.
  Scratch scratch("kineto-all-ranks");
  trace_round_trip(scratch,
                   "ddp-1.3b-64xa100 --set parallel.dp=16 --set training.global_batch=128 --set simulation.ranks=all "
                   "--set data_parallel.gradient_as_bucket_view=true "
                   "--set simulation.variation.jitter.distribution=normal --set simulation.variation.jitter.sigma=0.05 "
                   "--set 'simulation.variation.gpu_speed=[{\"rank\": 11, \"factor\": 0.8}]'");
}
