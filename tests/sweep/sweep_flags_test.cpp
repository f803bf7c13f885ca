// `stepsim sweep` flags at their edges: job counts, flags that --best and --merge cannot
// use, degrees spelt as JSON numbers, too few threads, and shard names.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cli/run_stepsim.hpp"

using stepsim::testing::Run;
using stepsim::testing::Scratch;
using stepsim::testing::slurp;
namespace fs = std::filesystem;

namespace {

// Under a sanitizer the program cannot start within an address-space limit (see CMakeLists).
bool limits_apply() {
#ifdef STEPSIM_SANITIZED
  WARN("skipped in a sanitized build: a sanitizer cannot start under ulimit -v");
  return false;
#else
  return true;
#endif
}

}  // namespace

TEST_CASE("a job count is a whole number from 1 on, never wrapped around") {
  const Scratch dir("sweep-jobs");
  for (const std::string jobs : {"-1", "0", "4294967297", "two", "1.5"}) {
    const Run run = dir.run("sweep --vary parallel.tp=1,2 --jobs " + jobs);
    CHECK(run.status == 2);
    CHECK(run.err ==
          "stepsim: error: --jobs: " + jobs + ": expected a whole number of simulations at once from 1 to 4096\n");
  }
}

TEST_CASE("the search for the best refuses the flags of a row sweep instead of ignoring them") {
  const Scratch dir("sweep-best-flags");
  const std::string best = "sweep --set model=gpt-1.3b --gpus 8 --best 2 ";
  for (const std::string flag : {"-o out.csv", "--shard 0/2", "--resume", "--keep-oom"}) {
    const Run run = dir.run(best + flag);
    CHECK(run.status == 2);
    const std::string name = flag.substr(0, flag.find(' '));
    CHECK(run.err ==
          "stepsim: error: " + name + ": cannot be combined with --best, which prints its table on stdout\n");
  }
  CHECK(dir.entries().empty());
}

TEST_CASE("a merge refuses the flags of a sweep that it would ignore") {
  const Scratch dir("sweep-merge-flags");
  REQUIRE(dir.run("sweep --vary parallel.tp=1,2 -o a.csv").status == 0);
  for (const std::string flag : {"--vary parallel.tp=1", "--set model=gpt-1.3b", "--gpus 8", "--best 2", "--resume",
                                 "--shard 0/2", "--keep-oom", "-o x.csv"}) {
    const Run run = dir.run("sweep --merge m.csv a.csv " + flag);
    CHECK(run.status == 2);
    const std::string name = flag.substr(0, flag.find(' '));
    CHECK(run.err == "stepsim: error: " + name + ": cannot be combined with --merge, which only joins files\n");
  }
  CHECK_FALSE(fs::exists(dir.file("m.csv")));
}

TEST_CASE("a degree spelt as any JSON number derives parallel.dp from its value") {
  const Scratch dir("sweep-degree");
  for (const std::string tp : {"4.0", "4e0", "' 4'"}) {
    const Run run = dir.run("sweep --set model=llama3-8b --gpus 64 -o r.jsonl --vary parallel.tp=" + tp);
    REQUIRE(run.status == 0);
    const std::string row = slurp(dir.file("r.jsonl"));
    INFO(row);
    CHECK(row.find("\"parallel.dp\":16,\"status\":\"ok\"") != std::string::npos);
  }
  // A degree that is no whole number is an invalid point, with the scenario's reason.
  const Run half = dir.run("sweep --set model=llama3-8b --gpus 64 -o h.jsonl --vary parallel.tp=4.5");
  REQUIRE(half.status == 0);
  CHECK(slurp(dir.file("h.jsonl")).find("\"status\":\"invalid\"") != std::string::npos);
}

TEST_CASE("a sweep that gets fewer threads than asked runs on those it got") {
  if (!limits_apply()) return;
  const Scratch dir("sweep-threads");
  // Threads' stacks of 2 GB each in an address space of 9 GB: a few threads, not 40.
  const Run run = dir.shell("ulimit -s 2000000 && ulimit -v 9000000 && " STEPSIM_BINARY
                            " sweep --vary data_parallel.bucket_cap_mb=1:40:+1 --jobs 200 -o r.csv");
  INFO(run.err);
  CHECK(run.status == 0);
  CHECK(run.err.find("40 points: 40 ok") != std::string::npos);
  CHECK(run.err.find("could start only") != std::string::npos);
  const std::string rows = slurp(dir.file("r.csv"));
  CHECK(std::count(rows.begin(), rows.end(), '\n') == 41);
}

TEST_CASE("running out of memory says which scenario was too large and exits 2") {
  if (!limits_apply()) return;
  const Scratch dir("out-of-memory");
  // 16,384 ranks simulated one by one take about 650 MB; the process may use 780 MB of
  // address space, most of it the binary and its libraries'.
  const std::string big =
      " --set simulation.ranks=all --set model=llama3-8b --set parallel.dp=2048 --set training.global_batch=4096";
  const Run run = dir.shell("ulimit -v 800000 && " STEPSIM_BINARY " simulate" + big);
  CHECK(run.status == 2);
  CHECK(run.err ==
        "stepsim: error: <default>: out of memory while simulating the step: 16384 GPUs in all-ranks mode (each "
        "rank simulated) need more memory than this process may use (its address space is limited to 781 MiB: "
        "ulimit -v); representative mode (simulation.ranks = \"representative\") simulates one rank per stage\n");
}

// Two simulations of 16,384 ranks each in an address space of 780 MB: a point that runs out of
// memory beside another is no row of its own but the run's failure, exit status 2 with what
// to do; one at a time, the same points are rows that say they are too large for this process.
TEST_CASE("a sweep whose points run out of memory side by side stops with exit status 2") {
  if (!limits_apply()) return;
  const Scratch dir("sweep-out-of-memory");
  const std::string sweep =
      " sweep --set simulation.ranks=all --set model=llama3-8b --set parallel.dp=2048 --set "
      "training.global_batch=4096 --vary training.micro_batch=1,2 ";
  const Run two = dir.shell("ulimit -v 800000 && " STEPSIM_BINARY + sweep + "--jobs 2 -o two.csv");
  CHECK(two.status == 2);
  CHECK(two.err ==
        "stepsim: error: --jobs: 2: point 0 ran out of memory with 2 simulations at once (this process's address "
        "space is limited to 781 MiB: ulimit -v): the rows before it are written; run fewer at once, with --resume "
        "for the rest\n");
  const std::string rows = slurp(dir.file("two.csv"));
  CHECK(std::count(rows.begin(), rows.end(), '\n') == 1);  // the header alone
  const Run one = dir.shell("ulimit -v 800000 && " STEPSIM_BINARY + sweep + "--jobs 1 -o one.csv");
  CHECK(one.status == 0);
  CHECK(one.err == "stepsim: sweep: 2 points: 0 ok, 2 invalid, 0 oom, 0 error -> one.csv\n");
  CHECK(slurp(dir.file("one.csv")).find(",invalid,\"<default>: out of memory while simulating the step: 16384 GPUs") !=
        std::string::npos);
}

TEST_CASE("a varied key that is one of the rows' own columns is refused") {
  const Scratch dir("sweep-column-key");
  // A value that is not UTF-8 got such a key past the check for unknown keys.
  const Run run = dir.shell(STEPSIM_BINARY " sweep --vary \"$(printf 'step_time_s=1\\341')\"");
  CHECK(run.status == 2);
  CHECK(run.err == "stepsim: error: --vary: step_time_s: is a column of the sweep's rows, not a scenario key\n");
  CHECK(dir.run("sweep --vary status=ok").err ==
        "stepsim: error: --vary: status: is a column of the sweep's rows, not a scenario key\n");
}

TEST_CASE("the search for the best searches the precisions --precision allows, and only with --best", "[slow]") {
  const Scratch dir("sweep-best-precision");
  const Run run = dir.run(
      "sweep --set model=gpt-1.3b --set training.micro_batch=2 --gpus 8 --best 40 --precision "
      "bf16,fp8");
  REQUIRE(run.status == 0);
  CHECK(run.out.find(" bf16 ") != std::string::npos);
  CHECK(run.out.find(" fp8 ") != std::string::npos);
  CHECK(dir.run("sweep --set model=gpt-1.3b --gpus 8 --best 2 --precision fp4").err ==
        "stepsim: error: --precision: fp4: expected bf16, fp16, fp8, tf32, fp32, mxfp8 or nvfp4\n");
  CHECK(dir.run("sweep --vary parallel.tp=1,2 --precision fp8").err ==
        "stepsim: error: --precision: fp8: applies to --best (a row sweep varies training.precision)\n");
}

// A precision --set fixes would leave --precision's list unsearched: refused, as plan refuses it.
TEST_CASE("the search for the best refuses --precision beside --set training.precision") {
  const Scratch dir("sweep-best-precision-set");
  const Run fixed =
      dir.run("sweep --set model=gpt-1.3b --set training.precision=fp8 --gpus 8 --best 2 --precision bf16");
  CHECK(fixed.status == 2);
  CHECK(fixed.err ==
        "stepsim: error: --precision: bf16: cannot be combined with --set training.precision=fp8, which fixes the "
        "precision that --precision searches: give one of them\n");
}

// A shard of several writes a file of its own for --merge: stdout, a descriptor, a device or a
// FIFO would get part of the rows, or none while another file took them (the FIFO's reader
// waiting for ever). Each is refused, naming -o and the name given.
TEST_CASE("a shard refuses an output that is not a regular file") {
  const Scratch dir("sweep-shard-output");
  REQUIRE(::mkfifo(dir.file("pipe.csv").c_str(), 0600) == 0);
  const std::string expected =
      ": shard 1/2 writes its rows to a file of its own for --merge to join: expected a "
      "regular file name ending in .csv or .jsonl, not stdout, a device or a FIFO\n";
  const std::string sweep = "sweep --vary parallel.tp=2,4 ";
  for (const std::string out : {"/dev/stdout", "/proc/self/fd/1", "/dev/null", "pipe.csv", "-"}) {
    INFO(out);
    const Run flag = dir.run(sweep + "--shard 1/2 -o " + out);
    CHECK(flag.status == 2);
    CHECK(flag.err == "stepsim: error: -o: " + out + expected);
    CHECK(flag.out.empty());
    const Run slurm =
        dir.shell("SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=2 " STEPSIM_BINARY " " + sweep + "-o " + out);
    CHECK(slurm.status == 2);
    CHECK(slurm.err == flag.err);
  }
  CHECK(dir.entries() == std::vector<std::string>{"pipe.csv"});
  // One shard of one is the whole sweep: stdout stays stdout.
  CHECK(dir.run(sweep + "--shard 0/1 -o -").status == 0);
}
