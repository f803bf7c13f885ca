// Traces that `stepsim analyze` and `compare` must refuse with exit status 2 and a message
// naming the file (and the event), and step annotations whose numbers are out of time order.
#include <fmt/format.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <set>
#include <sstream>
#include <vector>

#include "run_stepsim.hpp"

namespace stepsim::testing {
namespace {

std::string trace_of(const std::string& events) { return R"({"traceEvents": [)" + events + "\n]}"; }

std::string kernel(const std::string& ts, const std::string& dur, int correlation = -1) {
  return fmt::format(
      R"(
  {{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": {}, "dur": {}, "args": {{"stream": 7, "correlation": {}}}}})",
      ts, dur, correlation);
}

std::string cpu(const std::string& cat, const std::string& name, int ts, int dur, int correlation = -1) {
  return fmt::format(
      R"(
  {{"ph": "X", "cat": "{}", "name": "{}", "pid": 9, "tid": 9, "ts": {}, "dur": {}, "args": {{"correlation": {}}}}})",
      cat, name, ts, dur, correlation);
}

TEST_CASE("a negative kernel duration is refused naming the file and the event") {
  const Scratch dir("negative-dur");
  dir.write("neg.json", trace_of(kernel("1000", "10") + "," + kernel("1020", "-5")));
  const Run r = dir.run("analyze neg.json");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "stepsim: error: neg.json: /traceEvents/1/dur: event 'gemm': expected a duration from 0 to 1000000000000 us, "
        "got -5\n");
  CHECK(dir.run("compare neg.json ddp-1.3b-64xa100").status == 2);
}

TEST_CASE("durations and timestamps too large for picoseconds are refused, not overflowed") {
  const Scratch dir("huge");
  dir.write("dur.json", trace_of(kernel("1000", "10") + "," + kernel("1020", "9.3e12")));
  const Run dur = dir.run("analyze dur.json");
  CHECK(dur.status == 2);
  CHECK(dur.err ==
        "stepsim: error: dur.json: /traceEvents/1/dur: event 'gemm': expected a duration from 0 to 1000000000000 us, "
        "got 9300000000000\n");
  dir.write("ts.json", trace_of(kernel("1000", "10") + "," + kernel("1e300", "1")));
  const Run ts = dir.run("analyze ts.json");
  CHECK(ts.status == 2);
  CHECK(ts.err.starts_with("stepsim: error: ts.json: /traceEvents/1/ts: event 'gemm': ts 1e+300 is more than"));
  dir.write("digits.json", trace_of(kernel("1000", "10") + "," + kernel("1000", "123456789012345678901234567890")));
  CHECK(dir.run("analyze digits.json").status == 2);
}

TEST_CASE("ProfilerStep numbers out of time order are tiled by time, so no step is empty") {
  const Scratch dir("swapped");
  // ProfilerStep#7 runs first, then ProfilerStep#6; one kernel launched in each.
  dir.write("swapped.json", trace_of(cpu("user_annotation", "ProfilerStep#7", 1000, 100) + "," +
                                     cpu("user_annotation", "ProfilerStep#6", 1100, 100) + "," +
                                     cpu("cuda_runtime", "cudaLaunchKernel", 1001, 1, 1) + "," +
                                     cpu("cuda_runtime", "cudaLaunchKernel", 1101, 1, 2) + "," +
                                     kernel("1010", "40", 1) + "," + kernel("1110", "40", 2)));
  const Run r = dir.run("analyze swapped.json --json -");
  REQUIRE(r.status == 0);
  const boost::json::array steps = boost::json::parse(r.out).at("per_step").as_array();
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].at("name").as_string() == "ProfilerStep#7");
  CHECK(steps[0].at("step_time_s").as_double() == Approx(100e-6));
  CHECK(steps[1].at("name").as_string() == "ProfilerStep#6");
  CHECK(steps[1].at("step_time_s").as_double() == Approx(40e-6));
  CHECK(steps[0].at("breakdown_s").at("compute").as_double() == Approx(40e-6));
  CHECK(steps[1].at("breakdown_s").at("compute").as_double() == Approx(40e-6));
}

TEST_CASE("a trace that does not say its rank is analysed with rank null, not -1") {
  const Scratch dir("unknown-rank");
  // No distributedInfo: the trace names no rank, and -1 would read as one to a consumer.
  dir.write("anonymous.json",
            trace_of(cpu("user_annotation", "ProfilerStep#1", 1000, 100) + "," +
                     cpu("cuda_runtime", "cudaLaunchKernel", 1001, 1, 1) + "," + kernel("1010", "40", 1)));
  const Run r = dir.run("analyze anonymous.json --json -");
  REQUIRE(r.status == 0);
  CHECK(boost::json::parse(r.out).at("rank").is_null());
  const Run table = dir.run("analyze anonymous.json");
  REQUIRE(table.status == 0);
  CHECK(table.out.find("(rank unknown)") != std::string::npos);
}

TEST_CASE("distributedInfo's rank and world size are whole numbers that a job can have") {
  const Scratch dir("distributed-info");
  const std::string world =
      "expected a whole number from 1 to 1048576 (the job's processes; stepsim's GPU limit), got ";
  const std::string rank = "expected a whole number from 0 to 1048575 (the process's rank in its job), got ";
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"("world_size": -3)", "/distributedInfo/world_size: " + world + "-3"},
      {R"("world_size": 0)", "/distributedInfo/world_size: " + world + "0"},
      {R"("world_size": 1e20)", "/distributedInfo/world_size: " + world + "1e+20"},
      {R"("world_size": 2147483649)", "/distributedInfo/world_size: " + world + "2147483649"},
      {R"("world_size": "8")", "/distributedInfo/world_size: " + world + "a string"},
      {R"("rank": 5, "world_size": 2)", "/distributedInfo/rank: expected a rank from 0 to 1 (world_size is 2), got 5"},
      {R"("world_size": 2, "rank": 2)", "/distributedInfo/rank: expected a rank from 0 to 1 (world_size is 2), got 2"},
      {R"("rank": "0", "world_size": 2)", "/distributedInfo/rank: " + rank + "a string"},
      {R"("rank": 0.5, "world_size": 2)", "/distributedInfo/rank: " + rank + "0.5"},
      {R"("rank": -1)", "/distributedInfo/rank: " + rank + "-1"},
      {R"("rank": null)", "/distributedInfo/rank: " + rank + "null"},
  };
  for (const auto& [info, message] : cases) {
    INFO(info);
    dir.write("dist.json", R"({"distributedInfo": {)" + info + "}, " + trace_of(kernel("1000", "10")).substr(1));
    const Run r = dir.run("analyze dist.json --json -");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "stepsim: error: dist.json: " + message + "\n");
  }
  // The largest job, and a whole number written as a fraction, are read.
  dir.write("big.json", R"({"distributedInfo": {"rank": 1048575, "world_size": 1048576.0}, )" +
                            trace_of(kernel("1000", "10")).substr(1));
  const Run big = dir.run("analyze big.json --json -");
  REQUIRE(big.status == 0);
  CHECK(boost::json::parse(big.out).at("rank").as_int64() == 1048575);
  CHECK(boost::json::parse(big.out).at("world_size").as_int64() == 1048576);
}

// A GEMM on stream 7 from 1000 to 1100 us, and an NCCL kernel as `nccl` writes it.
std::string gemm_and(const std::string& nccl) {
  return trace_of(
      R"(
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1000, "dur": 100, "args": {"stream": 7, "correlation": 1}},
  )" + nccl);
}

TEST_CASE("a GPU activity that the step table and HTA's figures would read differently is refused") {
  const Scratch dir("gpu-activity-fields");
  const std::string nccl = R"({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 8, )";
  const std::string at = R"("ts": 1050, "dur": 100, )";
  const std::string stream = "expected the CUDA stream, a whole number of 0 or more, got ";
  const std::vector<std::pair<std::string, std::string>> cases{
      {nccl + at + R"("args": "stream 8"})",
       "/traceEvents/1/args: event 'ncclDevKernel_AllReduce': expected an object (the GPU activity's stream and "
       "correlation id), got a string"},
      {nccl + at.substr(0, at.size() - 2) + "}",
       "/traceEvents/1/args: event 'ncclDevKernel_AllReduce': missing: a GPU activity's args give its CUDA stream "
       "(args.stream)"},
      {nccl + at + R"("args": {"correlation": 2}})",
       "/traceEvents/1/args/stream: event 'ncclDevKernel_AllReduce': missing: expected the CUDA stream, a whole "
       "number of 0 or more"},
      {nccl + at + R"("args": {"stream": "7", "correlation": 2}})",
       "/traceEvents/1/args/stream: event 'ncclDevKernel_AllReduce': " + stream + "a string"},
      {nccl + at + R"("args": {"stream": -1, "correlation": 2}})",
       "/traceEvents/1/args/stream: event 'ncclDevKernel_AllReduce': " + stream + "-1"},
      {nccl + at + R"("args": {"stream": 1e30, "correlation": 2}})",
       "/traceEvents/1/args/stream: event 'ncclDevKernel_AllReduce': " + stream + "1e+30"},
      {nccl + at + R"("args": {"stream": 8, "correlation": 2.5}})",
       "/traceEvents/1/args/correlation: event 'ncclDevKernel_AllReduce': expected the correlation id, a whole "
       "number, got 2.5"},
      {R"({"cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 8, )" + at +
           R"("args": {"stream": 8, "correlation": 2}})",
       "/traceEvents/1/ph: event 'ncclDevKernel_AllReduce': a GPU activity must be a complete event, \"ph\": "
       "\"X\"; got none"},
      {R"({"ph": "B", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 8, )" + at +
           R"("args": {"stream": 8, "correlation": 2}})",
       "/traceEvents/1/ph: event 'ncclDevKernel_AllReduce': a GPU activity must be a complete event, \"ph\": "
       "\"X\"; got \"B\""},
      {R"({"ph": "X", "cat": 5, "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 8, )" + at +
           R"("args": {"stream": 8, "correlation": 2}})",
       "/traceEvents/1/cat: expected a string (the event's category), got a number"},
      {R"({"ph": "X", "cat": "kernel", "name": null, "pid": 0, "tid": 8, )" + at + R"("args": {"stream": 8}})",
       "/traceEvents/1/name: expected a string (the event's name), got null"},
  };
  for (const auto& [event, message] : cases) {
    INFO(event);
    dir.write("bad.json", gemm_and(event));
    const Run r = dir.run("analyze bad.json");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "stepsim: error: bad.json: " + message + "\n");
  }
}

TEST_CASE("beside metadata, instant and flow events both overlap figures count the same kernels") {
  const Scratch dir("gpu-activity-agree");
  // Real traces hold these too (ph M, i, s and f without cat or dur); a kernel without dur
  // occupies nothing in either reading.
  dir.write("ok.json", gemm_and(R"({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 8,
   "ts": 1050, "dur": 100, "args": {"stream": 8, "correlation": 2}},
  {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python"}},
  {"ph": "i", "name": "Record Window End", "pid": "", "tid": "", "ts": 1200, "s": "g"},
  {"ph": "s", "id": 2, "pid": 9, "tid": 9, "ts": 1001, "cat": "ac2g", "name": "ac2g"},
  {"ph": "f", "id": 2, "pid": 0, "tid": 8, "ts": 1050, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "kernel", "name": "no_dur", "pid": 0, "tid": 7, "ts": 1300, "args": {"stream": 7}})"));
  const Run r = dir.run("analyze ok.json --json -");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const boost::json::value v = boost::json::parse(r.out);
  // gemm 1000-1100, AllReduce 1050-1150: 100 us of communication, 50 us of it beside the gemm.
  CHECK(v.at("comm_union_s").as_double() == Approx(100e-6));
  CHECK(v.at("overlap").at("hidden_fraction").as_double() == Approx(0.5));
  CHECK(v.at("hta").at("comm_time_us").as_double() == Approx(100));
  CHECK(v.at("hta").at("overlap_time_us").as_double() == Approx(50));
  CHECK(v.at("hta").at("gpu_activities").as_int64() == 2);
}

// One rank of a job of 8 whose AllReduce kernel (1050 to 1150 us, 4000 bytes of Float in
// the default) has the collective arguments `args`.
std::string collective_trace(const std::string& args) {
  return R"({"distributedInfo": {"rank": 0, "world_size": 8}, )" +
         gemm_and(R"({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 8, "ts": 1050,
   "dur": 100, "args": {"stream": 8, "correlation": 2, "dtype": "Float", "Process Group Name": "0", )" +
                  args + "}}")
             .substr(1);
}

TEST_CASE("collective arguments that no collective has are refused naming the event and the field") {
  const Scratch dir("collective-args");
  const std::string event = "event 'ncclDevKernel_AllReduce': ";
  const std::string elements =
      event + "expected the message's elements, a whole number from 0 to 288230376151711744, got ";
  const std::string group = event + "expected the ranks of the process group, a whole number from 1 to 1048576, got ";
  const std::string in = "/traceEvents/1/args/In msg nelems: ";
  const std::string size = "/traceEvents/1/args/Group size: ";
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"("In msg nelems": 4611686018427387904)", in + elements + "4611686018427387904"},
      {R"("In msg nelems": 9223372036854775808)", in + elements + "9.223372036854776e+18"},
      {R"("In msg nelems": 1e300)", in + elements + "1e+300"},
      {R"("In msg nelems": -5)", in + elements + "-5"},
      {R"("In msg nelems": 0.5)", in + elements + "0.5"},
      {R"("In msg nelems": "many")", in + elements + "\"many\""},
      {R"("Out msg nelems": null)", "/traceEvents/1/args/Out msg nelems: " + elements + "null"},
      {R"("Group size": 0)", size + group + "0"},
      {R"("Group size": -4)", size + group + "-4"},
      {R"("Group size": 1e18)", size + group + "1000000000000000000"},
      {R"("Group size": 2147483649)", size + group + "2147483649"},
      {R"("Group size": "4")", size + group + "a string"},
      {R"("Group size": 100000, "Process Group Ranks": "[0, 1]")",
       size + event + "Group size is 100000, but Process Group Ranks \"[0, 1]\" lists 2 ranks"},
      {R"("Process Group Ranks": "[0, 1, ..., 7]", "Group size": 3)",
       size + event + "Group size is 3, but Process Group Ranks \"[0, 1, ..., 7]\" lists more than 3 ranks"},
      {R"("Group size": 16)", size + event + "Group size is 16, more than the job's world_size 8 (distributedInfo)"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args);
    dir.write("bad.json", collective_trace(args));
    const Run r = dir.run("analyze bad.json");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "stepsim: error: bad.json: " + message + "\n");
  }
}

TEST_CASE("a collective's group size and message size as the trace gives them make its busbw") {
  const Scratch dir("collective-busbw");
  // 1000 Float elements (written as text, which is read too) = 4000 bytes in 100 us: algbw
  // 0.04 GB/s; AllReduce over 4 ranks moves 2 (4 - 1) / 4 = 1.5 times that: busbw 0.06 GB/s.
  for (const std::string ranks : {"[0, 1, 2, 3]", "[]", "[0, ..., 2, ...]"}) {
    INFO(ranks);
    dir.write("ok.json",
              collective_trace(R"("In msg nelems": "1000", "Group size": 4, "Process Group Ranks": ")" + ranks + "\""));
    const Run r = dir.run("analyze ok.json --json -");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const boost::json::value c = boost::json::parse(r.out).at("collectives").at(0);
    CHECK(c.at("ranks").as_int64() == 4);
    CHECK(c.at("bytes").as_int64() == 4000);
    CHECK(c.at("algbw_GBps").as_double() == Approx(0.04));
    CHECK(c.at("busbw_GBps").as_double() == Approx(0.06));
  }
}

// One profiler step of a rank whose CPU launches a 50 us GEMM at 10 us and AllReduces of 2 MB
// (1,000,000 BFloat16) with `args` at the `starts` and of the `durations` given (us);
// `info`: the distributedInfo, or none.
std::string allreduce_trace(const std::string& info, const std::vector<std::pair<int, int>>& kernels,
                            const std::string& args) {
  std::string events = cpu("user_annotation", "ProfilerStep#1", 0, 200) + "," +
                       cpu("cuda_runtime", "cudaLaunchKernel", 1, 1, 1) + "," + kernel("10", "50", 1);
  int correlation = 2;
  for (const auto& [start, dur] : kernels) {
    events += "," + cpu("cuda_runtime", "cudaLaunchKernel", correlation, 1, correlation);
    events += fmt::format(R"x(,
  {{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", "pid": 0, "tid": 20, "ts": {},
   "dur": {}, "args": {{"stream": 20, "correlation": {}, "In msg nelems": 1000000, "dtype": "BFloat16"{}}}}})x",
                          start, dur, correlation, args.empty() ? "" : ", " + args);
    ++correlation;
  }
  const std::string trace = trace_of(events);
  return info.empty() ? trace : R"({"distributedInfo": )" + info + ", " + trace.substr(1);
}

// The collectives table's row of `op`: its words.
std::vector<std::string> collective_row(const std::string& table, const std::string& op) {
  const std::size_t heading = table.find("\ncollectives (");
  REQUIRE(heading != std::string::npos);
  std::istringstream lines(table.substr(heading));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> row;
    for (std::string w; words >> w;) row.push_back(w);
    if (!row.empty() && row[0] == op) return row;
  }
  FAIL("no row " << op);
  return {};
}

TEST_CASE("without distributedInfo or a group size a collective's ranks and busbw are unknown, not 1 and 0") {
  const Scratch dir("unknown-group-size");
  // 2,000,000 bytes in 40 us: algbw 50 GB/s. busbw needs the group's size, which nothing gives.
  dir.write("nodist.json", allreduce_trace("", {{40, 40}}, ""));
  const Run js = dir.run("analyze nodist.json --json -");
  INFO(js.err);
  REQUIRE(js.status == 0);
  const boost::json::value c = boost::json::parse(js.out).at("collectives").at(0);
  CHECK(c.at("ranks").is_null());
  CHECK(c.at("bytes").as_int64() == 2000000);
  CHECK(c.at("algbw_GBps").as_double() == Approx(50));
  CHECK(c.at("busbw_GBps").is_null());
  const Run table = dir.run("analyze nodist.json");
  REQUIRE(table.status == 0);
  // op, group, ranks, per step, size (2 words), bytes, mean, min, max, algbw, busbw.
  const std::vector<std::string> row = collective_row(table.out, "AllReduce");
  REQUIRE(row.size() == 12);
  CHECK(row[1] == "unnamed");
  CHECK(row[2] == "-");
  CHECK(row[10] == "50.00");
  CHECK(row[11] == "-");
  // The job's world size sizes a collective without a process group: AllReduce over 4 ranks
  // moves 2 (4 - 1) / 4 = 1.5 times algbw.
  dir.write("world.json", allreduce_trace(R"({"rank": 0, "world_size": 4})", {{40, 40}}, ""));
  const Run world = dir.run("analyze world.json --json -");
  REQUIRE(world.status == 0);
  const boost::json::value w = boost::json::parse(world.out).at("collectives").at(0);
  CHECK(w.at("ranks").as_int64() == 4);
  CHECK(w.at("busbw_GBps").as_double() == Approx(75));
}

TEST_CASE("a zero-length NCCL kernel is left out of its row's bandwidth, the same in the table and the JSON") {
  const Scratch dir("zero-length-kernel");
  // Two 2,000,000-byte AllReduces over 2 ranks, of 0 and 10 us: the timed one's algbw is
  // 2e6 / 10e-6 = 200 GB/s, and over 2 ranks busbw = algbw (2 (2 - 1) / 2 = 1).
  dir.write("zero.json",
            allreduce_trace(R"({"rank": 0, "world_size": 2})", {{40, 0}, {70, 10}},
                            R"("Group size": 2, "Process Group Name": "0", "Process Group Ranks": "[0, 1]")"));
  const Run table = dir.run("analyze zero.json");
  INFO(table.err);
  REQUIRE(table.status == 0);
  const std::vector<std::string> row = collective_row(table.out, "AllReduce");
  REQUIRE(row.size() == 12);
  CHECK(row[3] == "2.00");     // per step: both kernels
  CHECK(row[7] == "5.0");      // mean us: both kernels
  CHECK(row[10] == "200.00");  // algbw: the timed one
  CHECK(row[11] == "200.00");
  CHECK(table.out.find("\n1 kernel of 0 us left out of algbw and busbw (counted in the times)\n") != std::string::npos);
  const Run js = dir.run("analyze zero.json --json -");
  REQUIRE(js.status == 0);
  const boost::json::array c = boost::json::parse(js.out).at("collectives").as_array();
  REQUIRE(c.size() == 2);
  CHECK(c[0].at("duration_s").to_number<double>() == 0);
  CHECK(c[0].at("algbw_GBps").is_null());
  CHECK(c[0].at("busbw_GBps").is_null());
  CHECK(c[1].at("algbw_GBps").as_double() == Approx(200));
  CHECK(c[1].at("busbw_GBps").as_double() == Approx(200));
}

TEST_CASE("communication on no named process group has one name in the table and the JSON") {
  const Scratch dir("no-group-name");
  // The recommendation model's trace names no process group for its collectives.
  const Run js = dir.run(std::string("analyze ") + STEPSIM_TEST_DATA + "/traces/recsys-a100-rank3of8.json.gz --json -");
  REQUIRE(js.status == 0);
  const boost::json::value v = boost::json::parse(js.out);
  std::set<std::string> groups;
  for (const boost::json::value& c : v.at("collectives").as_array())
    groups.insert(std::string(c.at("group").as_string()));
  CHECK(groups == std::set<std::string>{"unnamed"});
  const boost::json::object& exposed = v.at("exposed_by_group_s").as_object();
  REQUIRE(exposed.size() == 1);
  CHECK(exposed.contains("unnamed"));
  for (const boost::json::value& step : v.at("per_step").as_array())
    for (const auto& kv : step.at("exposed_by_group_s").as_object()) CHECK(kv.key() == "unnamed");
  const Run table = dir.run(std::string("analyze ") + STEPSIM_TEST_DATA + "/traces/recsys-a100-rank3of8.json.gz");
  REQUIRE(table.status == 0);
  CHECK(table.out.find("  by process group:   unnamed ") != std::string::npos);
}

TEST_CASE("a step one rank's file lacks is refused naming that file") {
  const Scratch dir("job-missing-step");
  fs::create_directory(dir.file("job"));
  // Ranks 0 and 1 profiled ProfilerStep#1, rank 2 ProfilerStep#7.
  for (int rank = 0; rank < 3; ++rank) {
    const std::string step = rank == 2 ? "ProfilerStep#7" : "ProfilerStep#1";
    dir.write(fmt::format("job/rank{}.json", rank),
              fmt::format(R"({{"distributedInfo": {{"rank": {}, "world_size": 3}}, )", rank) +
                  trace_of(cpu("user_annotation", step, 1000, 100) + "," +
                           cpu("cuda_runtime", "cudaLaunchKernel", 1001, 1, 1) + "," + kernel("1010", "40", 1))
                      .substr(1));
  }
  const Run r = dir.run("analyze job --step 1");
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "stepsim: error: --step: 1: no such step in job/rank2.json (it has: ProfilerStep#7)\n");
  CHECK(dir.run("analyze job --step 7").err.find("no such step in job/rank0.json (it has: ProfilerStep#1)") !=
        std::string::npos);
  // One file: the file is the trace.
  CHECK(dir.run("analyze job/rank0.json --step 7").err ==
        "stepsim: error: --step: 7: no such step in the trace (it has: ProfilerStep#1)\n");
}

TEST_CASE("analyze and compare measure a folder's rank over its own step, as the rank's file alone") {
  const Scratch dir("rank-own-step");
  fs::create_directory(dir.file("odd"));
  // Ranks 2, 5 and 7 of 8 each run a 50 us GEMM from 10 us and an AllReduce from 40 to 80 us:
  // a 70 us step. Rank 2's times are 9 us later than rank 7's, rank 5's 3 us.
  for (const auto& [rank, shift] : std::vector<std::pair<int, int>>{{2, 9}, {5, 3}, {7, 0}}) {
    std::string events = cpu("user_annotation", "ProfilerStep#1", shift, 100) + "," +
                         cpu("cuda_runtime", "cudaLaunchKernel", shift + 5, 1, 1) + "," +
                         kernel(std::to_string(shift + 10), "50", 1) + "," +
                         cpu("cuda_runtime", "cudaLaunchKernel", shift + 6, 1, 2);
    events += fmt::format(R"x(,
  {{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", "pid": 0, "tid": 20, "ts": {},
   "dur": 40, "args": {{"stream": 20, "correlation": 2, "Group size": 8}}}})x",
                          shift + 40);
    dir.write(
        fmt::format("odd/r{}.json", rank),
        fmt::format(R"({{"distributedInfo": {{"rank": {}, "world_size": 8}}, )", rank) + trace_of(events).substr(1));
  }
  for (const char* args : {"analyze odd --rank 5 --json -", "analyze odd/r5.json --json -"}) {
    INFO(args);
    const Run r = dir.run(args);
    REQUIRE(r.status == 0);
    const boost::json::value v = boost::json::parse(r.out);
    CHECK(v.at("step_time_s").as_double() == Approx(70e-6));
    CHECK(v.at("idle_s").to_number<double>() == Approx(0).margin(1e-15));
  }
  const Run cmp = dir.run("compare odd ddp-1.3b-64xa100 --rank 5 --json -");
  REQUIRE(cmp.status == 0);
  CHECK(boost::json::parse(cmp.out).at("measured").at("step_time_s").as_double() == Approx(70e-6));
}

TEST_CASE("a trace without timed GPU activity is refused, not measured as a 0 s step") {
  const Scratch dir("no-gpu");
  dir.write("cpu-only.json", trace_of(cpu("user_annotation", "ProfilerStep#1", 1000, 100) + "," +
                                      cpu("cuda_runtime", "cudaLaunchKernel", 1001, 1, 1)));
  const Run r = dir.run("analyze cpu-only.json");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "stepsim: error: cpu-only.json: no timed GPU activity (complete events of category kernel, gpu_memcpy or "
        "gpu_memset with ts and dur): nothing to measure (was the profiler recording CUDA activities?)\n");
  dir.write("zero.json", trace_of(kernel("1000", "0")));
  CHECK(dir.run("analyze zero.json").status == 2);
}

TEST_CASE("trace paths that cannot be read fail with exit status 2 naming the file") {
  const Scratch dir("unreadable");
  fs::create_symlink("loop-b.json", dir.file("loop-a.json"));
  fs::create_symlink("loop-a.json", dir.file("loop-b.json"));
  fs::create_directory(dir.file("empty-folder"));
  dir.write("empty.json", "");
  dir.write("cut.json.gz", std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10));
  const std::string long_name(300, 't');
  const std::vector<std::pair<std::string, std::string>> cases{
      {"loop-a.json", "loop-a.json: cannot read the trace: Too many levels of symbolic links"},
      {long_name, long_name + ": cannot read the trace: File name too long"},
      {"empty-folder", "empty-folder: the folder holds no *.json or *.json.gz trace files"},
      {"missing.json", "missing.json: no such file or folder"},
      {"empty.json", "empty.json: the file is empty (expected a JSON trace)"},
      {"cut.json.gz", "cut.json.gz: compressed byte 10: gzip data ends early (truncated file?)"},
  };
  for (const auto& [path, message] : cases) {
    const Run r = dir.run("analyze " + path);
    CHECK(r.status == 2);
    CHECK(r.err == "stepsim: error: " + message + "\n");
  }
  if (::geteuid() != 0) {  // root reads any file
    dir.write("secret.json", trace_of(kernel("1000", "10")));
    fs::permissions(dir.file("secret.json"), fs::perms::none);
    const Run r = dir.run("analyze secret.json");
    CHECK(r.status == 2);
    CHECK(r.err == "stepsim: error: secret.json: cannot open the file for reading: Permission denied\n");
  }
}

}  // namespace
}  // namespace stepsim::testing
