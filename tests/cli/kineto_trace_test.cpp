// A simulated step written as a PyTorch profiler (Kineto) trace: `stepsim analyze` reads back
// the simulation's own exposed communication and hidden fraction, and every GPU event carries
// what HolisticTraceAnalysis' parser needs (stream, correlation with a CPU launch, ProfilerStep).
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <set>
#include <string>
#include <vector>

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

// Simulates `job` into a Kineto trace (and sim.json), compares the trace with the job, and
// returns compare's JSON report.
boost::json::value compared_with_own_trace(const Scratch& scratch, const std::string& job) {
  const auto sim = scratch.run("simulate " + job + " --trace-format kineto --trace step.json --json sim.json");
  INFO(sim.err);
  REQUIRE(sim.status == 0);
  const auto compared = scratch.run("compare step.json " + job + " --json compare.json");
  INFO(compared.err);
  REQUIRE(compared.status == 0);
  return boost::json::parse(slurp(scratch.file("compare.json")));
}

}  // namespace

TEST_CASE("A simulated step read back from its Kineto trace gives the same exposed communication and overlap",
          "[slow]") {
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
  // Without --json too: a pipe or a file taking the table would hide the lines.
  CHECK(other.err.find("warning: compare: world size: the trace is of 8 ranks, the scenario of 64 GPUs") !=
        std::string::npos);
  CHECK(other.out.find("pp\n") != std::string::npos);
  REQUIRE(scratch.run("simulate ddp-1.3b-64xa100 --trace-format kineto --trace sim.json").status == 0);
  const auto same = scratch.run("compare sim.json ddp-1.3b-64xa100");
  REQUIRE(same.status == 0);
  CHECK(same.out.find("differs:") == std::string::npos);
  CHECK(same.out.find("+0.0pp") != std::string::npos);
}

// The default scenario is TP 8 inside each node and DP 8 across the nodes: its trace's NCCL
// kernels say "Group size" 8 for both. Against TP 2 and DP 32 (the same 64 GPUs, the same
// model) only the groups' sizes tell that the layouts differ.
TEST_CASE("compare says when the trace's process groups are of other sizes than the scenario's, on stderr too") {
  Scratch scratch("compare-group-sizes");
  REQUIRE(scratch.run("simulate default --trace-format kineto --trace tp8.json").status == 0);
  const auto other = scratch.run("compare tp8.json default --set parallel.tp=2 --set parallel.dp=32");
  REQUIRE(other.status == 0);
  const std::string tp = "tp process groups: the trace's have 8 ranks, the scenario's 2; they are different layouts";
  const std::string dp = "dp process groups: the trace's have 8 ranks, the scenario's 32; they are different layouts";
  CHECK(other.out.find("differs: " + tp + "\n") != std::string::npos);
  CHECK(other.out.find("differs: " + dp + "\n") != std::string::npos);
  CHECK(other.out.find("differs: world size") == std::string::npos);
  // The table may go to a pipe or a file: the warnings reach the terminal all the same.
  CHECK(other.err.find("warning: compare: " + tp + "\n") != std::string::npos);
  CHECK(other.err.find("warning: compare: " + dp + "\n") != std::string::npos);
  const auto json = scratch.run("compare tp8.json default --set parallel.tp=2 --set parallel.dp=32 --json -");
  REQUIRE(json.status == 0);
  CHECK(json.err.find("warning: compare: " + tp + "\n") != std::string::npos);
  // With one TP group fewer than the scenario has, none: the scenario has no tp communicator.
  const auto no_tp = scratch.run("compare tp8.json default --set parallel.tp=1 --set parallel.dp=64");
  REQUIRE(no_tp.status == 0);
  CHECK(no_tp.out.find("differs: tp process groups: the trace's have 8 ranks, the scenario has no tp communicator; "
                       "they are different layouts\n") != std::string::npos);
  const auto same = scratch.run("compare tp8.json default");
  REQUIRE(same.status == 0);
  CHECK(same.out.find("differs:") == std::string::npos);
  CHECK(same.err.find("warning") == std::string::npos);
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

TEST_CASE("stepsim's own traces read back as the job they are, its world size and rank in distributedInfo") {
  Scratch scratch("trace-world-size");
  // ddp-1.3b-64xa100 is a job of 64 GPUs; representative mode simulates rank 0 for all of them.
  REQUIRE(scratch.run("simulate ddp-1.3b-64xa100 --trace chrome.json").status == 0);
  REQUIRE(scratch.run("simulate ddp-1.3b-64xa100 --trace-format kineto --trace kineto.json").status == 0);
  for (const char* file : {"chrome.json", "kineto.json"}) {
    INFO(file);
    const auto table = scratch.run(std::string("analyze ") + file);
    REQUIRE(table.status == 0);
    CHECK(table.out.find("(rank 0 of 64, nccl)") != std::string::npos);
    const auto js = scratch.run(std::string("analyze ") + file + " --json -");
    REQUIRE(js.status == 0);
    const boost::json::value v = boost::json::parse(js.out);
    CHECK(v.at("rank").as_int64() == 0);
    CHECK(v.at("world_size").as_int64() == 64);
    CHECK(v.at("gpus").as_int64() == 64);
    const auto same = scratch.run(std::string("compare ") + file + " ddp-1.3b-64xa100");
    REQUIRE(same.status == 0);
    CHECK(same.out.find("differs: world size") == std::string::npos);
    const auto other = scratch.run(std::string("compare ") + file + " ddp-1.3b-64xa100 --set parallel.dp=8");
    REQUIRE(other.status == 0);
    CHECK(other.out.find("differs: world size: the trace is of 64 ranks, the scenario of 8 GPUs") != std::string::npos);
  }
  // HTA's figures need a Kineto trace: the chrome one says so rather than leaving them out.
  CHECK(scratch.run("analyze chrome.json").out.find("HolisticTraceAnalysis' figures: n/a") != std::string::npos);
  CHECK(scratch.run("analyze kineto.json").out.find("comm-comp overlap:") != std::string::npos);
  // A real trace of rank 0 of 2, analysed and written again, is still rank 0 of 2.
  const std::string real = std::string(STEPSIM_TEST_DATA) + "/traces/resnet50-ddp-a100-rank0of2.json.gz";
  REQUIRE(scratch.run("analyze " + real + " --trace again.json").status == 0);
  const auto again = scratch.run("analyze again.json --json -");
  REQUIRE(again.status == 0);
  CHECK(boost::json::parse(again.out).at("rank").as_int64() == 0);
  CHECK(boost::json::parse(again.out).at("world_size").as_int64() == 2);
  // One chosen rank of an all-ranks run of 16 GPUs is that rank of 16.
  REQUIRE(scratch
              .run("simulate ddp-1.3b-64xa100 --set parallel.dp=16 --set training.global_batch=128 "
                   "--set simulation.ranks=all --trace rank3.json --trace-ranks 3")
              .status == 0);
  const auto rank3 = scratch.run("analyze rank3.json --json -");
  REQUIRE(rank3.status == 0);
  CHECK(boost::json::parse(rank3.out).at("rank").as_int64() == 3);
  CHECK(boost::json::parse(rank3.out).at("world_size").as_int64() == 16);
}

TEST_CASE("a stepsim trace whose process is beyond its world size is refused") {
  Scratch scratch("trace-pid-beyond-world");
  scratch.write("t.json", R"({"traceEvents": [
{"ph": "X", "pid": 5, "tid": 1, "ts": 0, "dur": 10, "cat": "compute", "name": "gemm"}],
"distributedInfo": {"backend": "nccl", "world_size": 4}})");
  const auto r = scratch.run("analyze t.json");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "stepsim: error: t.json: /distributedInfo/world_size: is 4, but the trace holds rank 5 (its process 5)\n");
}

// Under kernel jitter every rank waits at some AllReduce for its slowest member. The Kineto
// trace writes each NCCL kernel from its rank's arrival, as a real trace shows it, so the
// trace read back holds the report's communication, wait included (60.8 ms of the 123.9 ms of
// DP communication on rank 0 here): before, it started when the data moved and lost the wait.
TEST_CASE("A Kineto trace under jitter holds each collective's wait for its slowest member inside its kernel") {
  const Scratch dir("kineto-waits");
  const std::string job =
      "ddp-1.3b-64xa100 --set simulation.ranks=all --set simulation.variation.jitter.distribution=normal "
      "--set simulation.variation.jitter.sigma=0.05";
  const auto c = compared_with_own_trace(dir, job);
  const double waited = c.at("predicted").at("wait_s").to_number<double>();
  CHECK(waited > 0.01);  // the case this checks: a wait of more than 10 ms on the rank
  CHECK(c.at("measured_rank") == c.at("predicted_rank"));
  const double measured = c.at("measured").at("comm_s").at("dp").to_number<double>();
  const double predicted = c.at("predicted").at("comm_s").at("dp").to_number<double>();
  CHECK(measured == Approx(predicted).epsilon(0.001));
  CHECK(measured > waited);
}

namespace {

struct TraceComms {
  long long reduced_elements = 0;  // "In msg nelems" of the dp ReduceScatters
  std::set<std::string> reduce_names, reduce_dtypes;
  long long all_to_alls = 0;
  std::set<std::string> all_to_all_names;
};

TraceComms comms_of(const boost::json::value& trace) {
  TraceComms out;
  for (const auto& e : trace.at("traceEvents").as_array()) {
    const auto& o = e.as_object();
    if (o.at("ph").as_string() != "X" || o.at("cat").as_string() != "kernel") continue;
    const auto& args = o.at("args").as_object();
    if (!args.contains("Collective name")) continue;
    const std::string name(o.at("name").as_string());
    const std::string collective(args.at("Collective name").as_string());
    if (collective == "_reduce_scatter_base" && args.at("Process Group Name").as_string() == "dp") {
      out.reduced_elements += args.at("In msg nelems").as_int64();
      out.reduce_names.insert(name);
      out.reduce_dtypes.insert(std::string(args.at("dtype").as_string()));
    }
    if (collective == "all_to_all") {
      ++out.all_to_alls;
      out.all_to_all_names.insert(name);
    }
  }
  return out;
}

}  // namespace

// Mixtral's example reduces its gradients in FP32 (data_parallel.grad_reduce_dtype): NCCL runs
// ncclDevKernel_ReduceScatter_Sum_f32 on a Float tensor of bytes/4 elements, and reduces as many
// elements as it does in BF16. NCCL has no all-to-all kernel: PyTorch's all_to_all_single runs as
// grouped sends and receives, ncclDevKernel_SendRecv, which `analyze` classes as an all-to-all of
// the EP group by its collective name. The trace had said BFloat16 with bytes/2 elements, twice
// the gradients, and ncclDevKernel_AllToAll_RING_LL.
TEST_CASE("A Kineto trace names each collective's kernel and element type as NCCL and PyTorch do") {
  Scratch scratch("kineto-dtypes");
  const std::string job = "mixtral-8x7b-ep8-64xh100 --trace-format kineto --trace ";
  REQUIRE(scratch.run("simulate " + job + "fp32.json").status == 0);
  REQUIRE(scratch.run("simulate " + job + "bf16.json --set data_parallel.grad_reduce_dtype=bf16").status == 0);
  const TraceComms fp32 = comms_of(boost::json::parse(slurp(scratch.file("fp32.json"))));
  const TraceComms bf16 = comms_of(boost::json::parse(slurp(scratch.file("bf16.json"))));
  CHECK(fp32.reduce_names == std::set<std::string>{"ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"});
  CHECK(fp32.reduce_dtypes == std::set<std::string>{"Float"});
  CHECK(bf16.reduce_names == std::set<std::string>{"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"});
  CHECK(bf16.reduce_dtypes == std::set<std::string>{"BFloat16"});
  CHECK(fp32.reduced_elements > 0);
  CHECK(fp32.reduced_elements == bf16.reduced_elements);
  CHECK(fp32.all_to_alls > 0);
  CHECK(fp32.all_to_all_names == std::set<std::string>{"ncclDevKernel_SendRecv"});
  // Read back, every one of them is an all-to-all of the EP group.
  const auto analyzed = scratch.run("analyze fp32.json --json measured.json");
  INFO(analyzed.err);
  REQUIRE(analyzed.status == 0);
  long long all_to_alls = 0;
  const boost::json::value measured = boost::json::parse(slurp(scratch.file("measured.json")));
  for (const auto& c : measured.at("collectives").as_array()) {
    if (c.at("kernel").as_string() != "ncclDevKernel_SendRecv") continue;
    CHECK(c.at("op").as_string() == "alltoall");
    CHECK(c.at("group").as_string() == "ep");
    ++all_to_alls;
  }
  CHECK(all_to_alls == fp32.all_to_alls);
}

// The report of a pipeline is measured on its critical rank, here rank 56 of stage 7, whose
// first kernel starts 479.7 ms into the step while it waits for stage 0's activations (the
// embedding untied: a tied one's AllReduce after stage 0's last backward makes stage 0 the
// critical rank). The Kineto trace's step (ProfilerStep#1) starts at 0 on both sides, CPU and
// GPU: read back, the step is the report's 13405.3 ms with its 479 ms of bubble, not 12925.6 ms
// from the rank's first kernel with the wait lost.
TEST_CASE("A later pipeline stage's Kineto trace reads back over the report's whole step") {
  const Scratch dir("kineto-late-stage");
  const std::string job =
      "gpt3-175b-selene --set parallel.schedule=zb-h2 --set parallel.virtual_stages=1 --set "
      "model.tied_embeddings=false";
  const auto sim = dir.run("simulate " + job + " --trace-format kineto --trace step.json --json sim.json");
  INFO(sim.err);
  REQUIRE(sim.status == 0);
  const auto s = boost::json::parse(slurp(dir.file("sim.json")));
  const auto compared = dir.run("compare step.json " + job + " --json compare.json");
  INFO(compared.err);
  REQUIRE(compared.status == 0);
  const auto c = boost::json::parse(slurp(dir.file("compare.json")));
  REQUIRE(c.at("measured_rank") == c.at("predicted_rank"));
  REQUIRE(c.at("measured_rank").to_number<int>() != 0);  // the case this checks: not stage 0
  const double step = s.at("step_time_s").to_number<double>();
  CHECK(c.at("measured").at("step_time_s").to_number<double>() == Approx(step).epsilon(0.001));
  CHECK(c.at("predicted").at("step_time_s").to_number<double>() == Approx(step).epsilon(0.001));
  const auto analyzed = dir.run("analyze step.json --json measured.json");
  REQUIRE(analyzed.status == 0);
  const auto m = boost::json::parse(slurp(dir.file("measured.json")));
  CHECK(m.at("step_time_s").to_number<double>() == Approx(step).epsilon(0.001));
  // A real trace has no bubble of its own: the idle time, the report's bubble, is "other".
  const auto& predicted = s.at("breakdown_s");
  CHECK(m.at("breakdown_s").at("other").to_number<double>() ==
        Approx(predicted.at("bubble").to_number<double>() + predicted.at("other").to_number<double>()).epsilon(0.001));
}

namespace {

// The "Collective name", "dtype", "In msg nelems" and "Out msg nelems" of each NCCL kernel.
struct TraceCall {
  std::string collective, dtype, group;
  long long in = -1, out = -1;
  int group_size = 0;
};

std::vector<TraceCall> calls_of(const boost::json::value& trace) {
  std::vector<TraceCall> calls;
  for (const auto& e : trace.at("traceEvents").as_array()) {
    const auto& o = e.as_object();
    if (o.at("ph").as_string() != "X" || o.at("cat").as_string() != "kernel") continue;
    const auto& args = o.at("args").as_object();
    if (!args.contains("Collective name")) continue;
    TraceCall c{std::string(args.at("Collective name").as_string()), std::string(args.at("dtype").as_string()),
                args.contains("Process Group Name") ? std::string(args.at("Process Group Name").as_string()) : ""};
    c.in = args.at("In msg nelems").as_int64();
    if (args.contains("Out msg nelems")) c.out = args.at("Out msg nelems").as_int64();
    if (args.contains("Group size")) c.group_size = static_cast<int>(args.at("Group size").as_int64());
    calls.push_back(c);
  }
  return calls;
}

}  // namespace

// PyTorch's ProcessGroupNCCL records each side's element count (record_param_comms): an
// AllGather's shard in and the gathered whole out, a ReduceScatter the reverse; a pipeline's
// receive is "recv". The chrome trace of the same run names each transfer ("... from stage 6":
// a receive) and gives each collective's bytes: an FP8 run's FSDP2 AllGathers of a layer move a
// byte buffer (FP8 weights at 1 byte beside BF16 norms: foreach_all_gather views inputs of mixed
// dtypes as uint8), labelled Byte, one element a byte, and of the root, all BF16, BFloat16;
// FSDP1's move BF16.
TEST_CASE("The Kineto trace's NCCL fields are PyTorch's: each side's count, recv, and an FP8 gather's bytes",
          "[slow]") {
  const Scratch dir("kineto-nccl-fields");
  SECTION("pipeline receives") {
    REQUIRE(dir.run("simulate gpt3-175b-selene --trace-format kineto --trace k.json").status == 0);
    REQUIRE(dir.run("simulate gpt3-175b-selene --trace c.json").status == 0);
    const auto kineto = boost::json::parse(slurp(dir.file("k.json")));
    const auto rank = kineto.at("distributedInfo").at("rank").to_number<int>();
    long long receives = 0, sends = 0;
    const auto chrome = boost::json::parse(slurp(dir.file("c.json")));
    for (const auto& e : chrome.at("traceEvents").as_array()) {
      const auto& o = e.as_object();
      if (!o.contains("cat") || o.at("cat").as_string() != "comm" || o.at("pid").to_number<int>() != rank) continue;
      if (o.at("args").at("op").as_string() != "sendrecv") continue;
      const std::string name(o.at("name").as_string());
      if (name.find(" from stage ") != std::string::npos) ++receives;
      if (name.find(" to stage ") != std::string::npos) ++sends;
    }
    REQUIRE(receives > 0);
    REQUIRE(sends > 0);
    long long recv = 0, send = 0;
    for (const TraceCall& c : calls_of(kineto)) {
      recv += c.collective == "recv";
      send += c.collective == "send";
      if (c.collective == "recv" || c.collective == "send") CHECK(c.in == c.out);
    }
    CHECK(recv == receives);
    CHECK(send == sends);
  }
  // FSDP2 views its inputs of mixed types as one uint8 buffer; FSDP1's FlatParameter is gathered
  // in its param_dtype, BF16, two bytes an element: Llama 2 7B's layer of 4·4096² + 3·4096·11008
  // + 2·4096 = 202,383,360 parameters is 404,766,720 bytes.
  struct Fp8Gather {
    const char* version;
    const char* dtype;
    long long bytes_per_element;
  };
  for (const Fp8Gather& v : {Fp8Gather{"2", "Byte", 1}, Fp8Gather{"1", "BFloat16", 2}}) {
    SECTION(std::string("an FP8 run's FSDP") + v.version + " gathers and reductions") {
      const std::string job =
          std::string("fsdp-llama2-7b-8xh100 --set training.precision=fp8 --set data_parallel.fsdp_version=") +
          v.version;
      REQUIRE(dir.run("simulate " + job + " --trace-format kineto --trace k.json").status == 0);
      REQUIRE(dir.run("simulate " + job + " --trace c.json --trace-ranks 0").status == 0);
      std::multiset<long long> gathered;  // the bytes of rank 0's FSDP AllGathers
      long long first_layer = 0;
      const auto chrome = boost::json::parse(slurp(dir.file("c.json")));
      for (const auto& e : chrome.at("traceEvents").as_array()) {
        const auto& o = e.as_object();
        if (!o.contains("cat") || o.at("cat").as_string() != "comm") continue;
        const auto& args = o.at("args").as_object();
        if (args.at("op").as_string() != "allgather" || args.at("kind").as_string() != "fsdp") continue;
        gathered.insert(args.at("bytes").as_int64());
        if (std::string(o.at("name").as_string()).find("AllGather fsdp L0 forward") != std::string::npos)
          first_layer = args.at("bytes").as_int64();
      }
      REQUIRE(!gathered.empty());
      if (v.bytes_per_element == 2) CHECK(first_layer == 404'766'720);
      // FP8 Linear weights at 1 byte, the two RMSNorms' 2 · 4096 at 2.
      if (v.bytes_per_element == 1) CHECK(first_layer == 202'375'168 + 2 * 8192);
      std::multiset<long long> out_bytes;
      long long scatters = 0, roots = 0;
      const auto kineto = boost::json::parse(slurp(dir.file("k.json")));
      for (const TraceCall& c : calls_of(kineto)) {
        INFO(c.collective << " " << c.group << " " << c.in << " -> " << c.out);
        REQUIRE(c.group_size == 8);
        if (c.collective == "_allgather_base") {
          // The root (embedding, final norm, LM head: 32000·4096·2 + 4096) holds no FP8 weight:
          // FSDP2 gathers it in its one dtype, BF16, as FSDP1 does.
          const bool root = c.out == 262'148'096 && c.dtype == "BFloat16";
          roots += root;
          if (!root) CHECK(c.dtype == v.dtype);
          CHECK(c.in == c.out / 8);
          out_bytes.insert(c.out * (root ? 2 : v.bytes_per_element));
        }
        if (c.collective == "_reduce_scatter_base") {
          ++scatters;
          CHECK(c.dtype == "Float");  // the example reduces in FP32
          CHECK(c.out == c.in / 8);
        }
      }
      CHECK(out_bytes == gathered);
      CHECK(scatters > 0);
      CHECK(roots > 0);
    }
  }
}

// stepsim's own Kineto trace names expert tensor parallelism's communicator "etp", whose
// gathers and scatters simulate counts as ep: compared with the scenario it came from, every
// kind's exposed and busy time is the same on both sides (the oracle: the job compared with
// itself), and nothing is left as "other".
TEST_CASE("compare of a Kineto trace with expert tensor parallelism against its own scenario differs in nothing") {
  const Scratch dir("kineto-etp");
  const std::string job =
      "mixtral-8x7b-ep8-64xh100 --set model.layers=2 --set parallel.tp=2 --set parallel.dp=4 --set parallel.ep=2 "
      "--set parallel.etp=2 --set parallel.sequence_parallel=true --set training.global_batch=8";
  const auto c = compared_with_own_trace(dir, job);
  const auto& measured = c.at("measured");
  const auto& predicted = c.at("predicted");
  const auto& report = boost::json::parse(slurp(dir.file("sim.json")));
  REQUIRE(report.at("comm_s").at("ep").to_number<double>() > 0);
  // The trace keeps times to the nanosecond: a kind's sum over its collectives (fewer than 100
  // each) may be that many nanoseconds off.
  for (const char* part : {"comm_s", "exposed_comm_s"}) {
    for (const auto& [kind, value] : predicted.at(part).as_object()) {
      INFO(part << " " << std::string(kind));
      CHECK(measured.at(part).at(kind).to_number<double>() ==
            Approx(value.to_number<double>()).epsilon(1e-6).margin(100e-9));
    }
  }
  CHECK(measured.at("comm_s").at("other").to_number<double>() == 0);
  // The table: "+0.0%" on each kind's line, and no "other" line.
  const auto table = dir.run("compare step.json " + job);
  REQUIRE(table.status == 0);
  CHECK(table.out.find("exposed other") == std::string::npos);
  CHECK(table.out.find("  exposed ep") != std::string::npos);
  for (const char* line : {"  exposed ep", "  exposed tp", "comm busy (sum of kinds)"}) {
    INFO(line);
    const auto at = table.out.find(line);
    REQUIRE(at != std::string::npos);
    const std::string row = table.out.substr(at, table.out.find('\n', at) - at);
    CHECK(row.ends_with("+0.0%"));
  }
}
