// `simulate --trace-ranks`: the Perfetto trace of chosen ranks, each its own process, and
// bad rank lists refused naming the flag.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "cli/run_stepsim.hpp"

using stepsim::testing::Scratch;

namespace {

// GPT 1.3B on 16 H100, DP 16, every rank simulated.
const char* const kJob =
    "simulate --set model=gpt-1.3b --set parallel.tp=1 --set parallel.dp=16 --set training.global_batch=16 --set "
    "training.micro_batch=1 "
    "--set simulation.ranks=all";

// The process names of a trace, in order (the writer puts each on one line).
std::vector<std::string> processes(const std::string& path) {
  std::ifstream in(path);
  const std::string marker = R"("name":"process_name","args":{"name":")";
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find(marker);
    if (at == std::string::npos) continue;
    const auto begin = at + marker.size();
    names.push_back(line.substr(begin, line.find('"', begin) - begin));
  }
  return names;
}

}  // namespace

TEST_CASE("The trace carries only the ranks --trace-ranks lists, each as its own process") {
  Scratch scratch("trace-ranks");
  const auto run = scratch.run(std::string(kJob) + " --trace t.json --trace-ranks 3,10-11");
  INFO(run.err);
  REQUIRE(run.status == 0);
  CHECK(processes(scratch.file("t.json").string()) ==
        std::vector<std::string>{"rank 3 (stage 0)", "rank 10 (stage 0)", "rank 11 (stage 0)"});
}

TEST_CASE("Without --trace-ranks an all-ranks trace has a process for every GPU") {
  Scratch scratch("trace-ranks-all");
  REQUIRE(scratch.run(std::string(kJob) + " --trace t.json").status == 0);
  CHECK(processes(scratch.file("t.json").string()).size() == 16);
}

TEST_CASE("A bad --trace-ranks list is refused naming the flag and the part at fault") {
  Scratch scratch("trace-ranks-bad");
  auto run = scratch.run(std::string(kJob) + " --trace t.json --trace-ranks 3,9-4");
  CHECK(run.status == 2);
  CHECK(run.err == "stepsim: error: <command line>: --trace-ranks: '9-4': the range ends before it starts\n");
  run = scratch.run(std::string(kJob) + " --trace t.json --trace-ranks 16");
  CHECK(run.status == 2);
  CHECK(run.err == "stepsim: error: <command line>: --trace-ranks: '16': the job's ranks are 0 to 15\n");
  run = scratch.run(std::string(kJob) + " --trace t.json --trace-ranks 1,x");
  CHECK(run.status == 2);
  CHECK(run.err ==
        "stepsim: error: <command line>: --trace-ranks: 'x': expected a rank or a range of ranks, e.g. 0,5,100-120\n");
  run = scratch.run("simulate --trace-ranks 0");
  CHECK(run.status == 2);
  CHECK(run.err ==
        "stepsim: error: <command line>: --trace-ranks: needs --trace FILE: it chooses the ranks of that "
        "file\n");
  run = scratch.run("simulate --trace t.json --trace-ranks 5");
  CHECK(run.status == 2);
  CHECK(run.err.find("--trace-ranks: names none of the simulated ranks") != std::string::npos);
}

TEST_CASE("An all-ranks report is the same whether the run keeps every rank for a trace, some or none") {
  Scratch scratch("trace-ranks-report");
  const std::string job = std::string(kJob) +
                          " --set simulation.variation.jitter.distribution=normal --set "
                          "simulation.variation.jitter.sigma=0.05 --set "
                          "'simulation.variation.gpu_speed=[{\"rank\": 6, \"factor\": 0.9}]'";
  REQUIRE(scratch.run(job + " --json none.json").status == 0);
  REQUIRE(scratch.run(job + " --json all.json --trace t.json").status == 0);
  REQUIRE(scratch.run(job + " --json some.json --trace s.json --trace-ranks 2,9").status == 0);
  const std::string none = stepsim::testing::slurp(scratch.file("none.json"));
  CHECK(none.find("\"straggler\"") != std::string::npos);
  CHECK(none == stepsim::testing::slurp(scratch.file("all.json")));
  CHECK(none == stepsim::testing::slurp(scratch.file("some.json")));
  CHECK(processes(scratch.file("s.json").string()) == std::vector<std::string>{"rank 2 (stage 0)", "rank 9 (stage 0)"});
}

TEST_CASE("With -v an all-ranks run says what it simulated and where its time went") {
  Scratch scratch("trace-ranks-verbose");
  const auto run = scratch.run(std::string("-v ") + kJob);
  INFO(run.err);
  REQUIRE(run.status == 0);
  // Sixteen DP replicas of one stage: one op list for all of them.
  CHECK(run.err.find("program: 16 simulated rank(s), ") != std::string::npos);
  CHECK(run.err.find(" in 1 op list(s), ") != std::string::npos);
  CHECK(run.err.find("engine: ") != std::string::npos);
  CHECK(run.err.find("/s), intervals ") != std::string::npos);  // events per second, in M/s, k/s or /s
  // Without -v, nothing of it.
  CHECK(scratch.run(kJob).err.find("engine: ") == std::string::npos);
}
