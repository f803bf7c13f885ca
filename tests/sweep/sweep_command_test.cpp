// `stepsim sweep` end to end: a sweep killed with SIGKILL and resumed writes exactly the
// rows of an uninterrupted one; shards merge into the unsharded rows; bad flags exit 2.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include <algorithm>
#include <boost/json.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/run_stepsim.hpp"
#include "sweep/long_sweep.hpp"

using stepsim::testing::Run;
using stepsim::testing::Scratch;
using stepsim::testing::slurp;
namespace fs = std::filesystem;

using stepsim::testing::count_lines;
using stepsim::testing::kLongSweep;
using stepsim::testing::start_long_sweep;

TEST_CASE("a sweep killed with SIGKILL and resumed has exactly the rows of an uninterrupted run", "[slow]") {
  const Scratch dir("sweep");
  const Run whole = dir.run("sweep " + kLongSweep + " -o " + (dir.work() / "whole.csv").string());
  REQUIRE(whole.status == 0);
  const std::string expected = slurp(dir.work() / "whole.csv");
  REQUIRE(count_lines(expected) == 1001);

  const fs::path out = dir.work() / "killed.csv";
  const pid_t pid = start_long_sweep(out);
  REQUIRE(pid > 0);
  // Kill it once a few rows are there and well before the last.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (count_lines(slurp(out)) < 20 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  const std::string partial = slurp(out);
  INFO("rows before the kill: " << count_lines(partial) - 1);
  REQUIRE(count_lines(partial) < 1001);
  REQUIRE(expected.starts_with(partial.substr(0, partial.rfind('\n') + 1)));
  // A torn write as a kill inside write(2) would leave it: half a row, no newline.
  std::ofstream(out, std::ios::app) << expected.substr(partial.rfind('\n') + 1, 30);

  const Run resumed = dir.run("sweep " + kLongSweep + " -o " + out.string() + " --resume");
  REQUIRE(resumed.status == 0);
  CHECK(slurp(out) == expected);
  CHECK(resumed.err.find("already written") != std::string::npos);

  // Resuming a complete sweep runs nothing and changes nothing.
  const Run again = dir.run("sweep " + kLongSweep + " -o " + out.string() + " --resume");
  REQUIRE(again.status == 0);
  CHECK(again.err.find("1000 already written") != std::string::npos);
  CHECK(slurp(out) == expected);
}

TEST_CASE("shards of a sweep merge into the rows of the unsharded sweep") {
  const Scratch dir("sweep");
  const std::string sweep = "sweep --vary data_parallel.bucket_cap_mb=1:64:x2 --vary parallel.tp=1,2,3,4,8 --gpus 64";
  REQUIRE(dir.run(sweep + " -o " + (dir.work() / "all.jsonl").string()).status == 0);
  for (int k = 0; k < 3; ++k)
    REQUIRE(dir.run(sweep + " --shard " + std::to_string(k) + "/3 -o " + (dir.work() / "part.jsonl").string()).status ==
            0);
  REQUIRE(fs::exists(dir.work() / "part.shard-2-of-3.jsonl"));
  const Run merge = dir.run("sweep --merge " + (dir.work() / "merged.jsonl").string() + " " +
                            (dir.work() / "part.shard-2-of-3.jsonl").string() + " " +
                            (dir.work() / "part.shard-0-of-3.jsonl").string() + " " +
                            (dir.work() / "part.shard-1-of-3.jsonl").string() + " " +
                            (dir.work() / "part.shard-1-of-3.jsonl").string());
  REQUIRE(merge.status == 0);
  CHECK(merge.err.find("merged 35 rows from 4 files") != std::string::npos);
  CHECK(merge.err.find("(12 duplicates dropped: points 1, 4, 7, 10, 13, 16, 19, 22 and 4 more)\n") !=
        std::string::npos);
  CHECK(merge.err.find("lacks") == std::string::npos);
  CHECK(slurp(dir.work() / "merged.jsonl") == slurp(dir.work() / "all.jsonl"));
}

// Resuming a merge of two shards of four (points 0, 1, 4, 5 present) appended points 2, 3, 6
// and 7 after them: rows 0,1,4,5,2,3,6,7. The resumed file is in point order, the rows of the
// sweep run in one go, byte for byte, in CSV and in JSON lines.
TEST_CASE("a sweep resumed on a merged file with gaps writes its rows in point order") {
  const Scratch dir("sweep-resume-gaps");
  const std::string sweep = "sweep --vary parallel.tp=1:8:x2 --vary data_parallel.bucket_cap_mb=25,100 --gpus 64";
  for (const std::string extension : {".csv", ".jsonl"}) {
    INFO(extension);
    REQUIRE(dir.run(sweep + " -o whole" + extension).status == 0);
    for (const char* shard : {"0/4", "1/4"})
      REQUIRE(dir.run(sweep + " --shard " + shard + " -o out" + extension).status == 0);
    const Run merge =
        dir.run("sweep --merge part" + extension + " out.shard-0-of-4" + extension + " out.shard-1-of-4" + extension);
    REQUIRE(merge.status == 0);
    REQUIRE(merge.err.find("lacks 4 of the sweep's 8 points") != std::string::npos);
    const Run resumed = dir.run(sweep + " --resume -o part" + extension);
    INFO(resumed.err);
    REQUIRE(resumed.status == 0);
    CHECK(resumed.err.find("4 already written") != std::string::npos);
    CHECK(slurp(dir.file("part" + extension)) == slurp(dir.file("whole" + extension)));
    // In order already: resumed again, nothing runs and nothing changes.
    REQUIRE(dir.run(sweep + " --resume -o part" + extension).status == 0);
    CHECK(slurp(dir.file("part" + extension)) == slurp(dir.file("whole" + extension)));
  }
  // No temporary file is left beside the rows.
  for (const std::string& name : dir.entries()) CHECK(name.find("stepsim") == std::string::npos);
}

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line + "\n");
  return out;
}

}  // namespace

// A sweep of five points written whole as CSV and as JSON lines, for the resume tests: the
// header and five rows, and five rows.
const std::string kFivePoints = "sweep --vary data_parallel.bucket_cap_mb=1,2,5,10,25";

std::pair<std::vector<std::string>, std::vector<std::string>> five_point_rows(const Scratch& dir) {
  REQUIRE(dir.run(kFivePoints + " -o whole.csv").status == 0);
  REQUIRE(dir.run(kFivePoints + " -o whole.jsonl").status == 0);
  auto csv = lines_of(slurp(dir.file("whole.csv")));
  auto jsonl = lines_of(slurp(dir.file("whole.jsonl")));
  REQUIRE(csv.size() == 6);
  REQUIRE(jsonl.size() == 5);
  return {std::move(csv), std::move(jsonl)};
}

// README: --resume refuses a file that is not this sweep's rows, one per point in point order
// (gaps are the points still to run); CSV and JSON lines alike. Each refusal names the file and
// the line, exits 2 and leaves the file as it was.
TEST_CASE("a sweep resumed on rows that are not this sweep's, one per point in order, is refused") {
  const Scratch dir("sweep-resume-bad-rows");
  const std::string sweep = kFivePoints;
  const auto rows = five_point_rows(dir);
  const std::vector<std::string>& csv = rows.first;
  const std::vector<std::string>& jsonl = rows.second;
  const auto refused = [&](const std::string& name, const std::string& text, const std::string& message) {
    INFO(name);
    dir.write(name, text);
    const Run run = dir.run(sweep + " --resume -o " + name);
    CHECK(stepsim::testing::refusal(run, name + ": " + message) == "");
    CHECK(slurp(dir.file(name)) == text);
  };
  // Point 0 twice.
  refused("dup.csv", csv[0] + csv[1] + csv[2] + csv[1],
          "line 4: point 0 after point 1 (line 3): expected one row per point, in point order");
  refused("dup.jsonl", jsonl[0] + jsonl[1] + jsonl[0],
          "line 3: point 0 after point 1 (line 2): expected one row per point, in point order");
  // Out of order.
  refused("order.csv", csv[0] + csv[2] + csv[1], "line 3: point 0 after point 1 (line 2)");
  // Point 3 with point 2's point_id: not this sweep's point 3.
  const std::string id2 = csv[3].substr(2, 16), id3 = csv[4].substr(2, 16);
  std::string row3 = csv[4];
  row3.replace(2, 16, id2);
  refused("badid.csv", csv[0] + csv[1] + csv[2] + row3,
          "line 4: point 3 has point_id " + id2 + ", but this sweep's point 3 is " + id3);
  // A JSON row without a key the first has, and one whose point is a string.
  auto missing = boost::json::parse(jsonl[1]).as_object();
  missing.erase("mfu");
  refused("missing.jsonl", jsonl[0] + boost::json::serialize(missing) + "\n",
          "line 2: has no key 'mfu': expected the keys of line 1");
  auto text_point = boost::json::parse(jsonl[1]).as_object();
  text_point["point"] = "1";
  refused("string.jsonl", jsonl[0] + boost::json::serialize(text_point) + "\n",
          "line 2, key 'point': expected a whole number, got \"1\"");
  // A merge's rows with a gap are still taken: the gap is run and the file is the whole sweep's.
  dir.write("gap.csv", csv[0] + csv[1] + csv[3] + csv[5]);
  const Run gap = dir.run(sweep + " --resume -o gap.csv");
  INFO(gap.err);
  REQUIRE(gap.status == 0);
  CHECK(slurp(dir.file("gap.csv")) == slurp(dir.file("whole.csv")));
}

// A shard's file holds that shard's points alone (index mod N = K): resumed with --shard K/N, a
// row of another shard's point is refused naming the file and its line, exit 2, the file left
// as it was (its torn last line too); the merged file of every shard resumes without --shard.
// Points 0 to 4 in two shards: shard 0 runs 0, 2 and 4, shard 1 runs 1 and 3.
TEST_CASE("a shard resumed on a file holding another shard's rows is refused, the file untouched") {
  const Scratch dir("sweep-resume-shard");
  const std::string sweep = kFivePoints;
  const auto rows = five_point_rows(dir);
  const std::vector<std::string>& csv = rows.first;
  const std::vector<std::string>& jsonl = rows.second;
  const auto refused = [&](const std::string& shard, const std::string& output, const std::string& name,
                           const std::string& text, const std::string& message) {
    INFO(name);
    dir.write(name, text);
    const Run run = dir.run(sweep + " --shard " + shard + " --resume -o " + output);
    CHECK(stepsim::testing::refusal(run, name + ": " + message) == "");
    CHECK(slurp(dir.file(name)) == text);
  };
  // Shard 0's file with point 1 (shard 1's) after point 0, and a torn last line.
  refused("0/2", "part.csv", "part.shard-0-of-2.csv", csv[0] + csv[1] + csv[2] + csv[3].substr(0, 10),
          "line 3: point 1 is shard 1/2's (its index mod 2), not this run's shard 0/2");
  refused("0/2", "part.jsonl", "part.shard-0-of-2.jsonl", jsonl[0] + jsonl[1],
          "line 2: point 1 is shard 1/2's (its index mod 2), not this run's shard 0/2");
  // Shard 1 resumed on the whole sweep's rows: point 0 is shard 0's.
  refused("1/2", "all.csv", "all.shard-1-of-2.csv", slurp(dir.file("whole.csv")),
          "line 2: point 0 is shard 0/2's (its index mod 2), not this run's shard 1/2");
  // Shard 1's own rows resume: point 3 is run after point 1.
  dir.write("own.shard-1-of-2.csv", csv[0] + csv[2]);
  const Run own = dir.run(sweep + " --shard 1/2 --resume -o own.csv");
  INFO(own.err);
  REQUIRE(own.status == 0);
  CHECK(slurp(dir.file("own.shard-1-of-2.csv")) == csv[0] + csv[2] + csv[4]);
  // The merge of both shards, points 0 to 3 written, is completed without --shard.
  dir.write("merged.csv", csv[0] + csv[1] + csv[2] + csv[3] + csv[4]);
  const Run merged = dir.run(sweep + " --resume -o merged.csv");
  INFO(merged.err);
  REQUIRE(merged.status == 0);
  CHECK(slurp(dir.file("merged.csv")) == slurp(dir.file("whole.csv")));
}

// --spec FILE is the --vary flags written in a file: the same rows, sweep_id included, byte
// for byte; with --vary the file's keys come first, as if their flags came first.
TEST_CASE("a sweep's spec file gives the rows of the same --vary flags, and names a bad line") {
  const Scratch dir("sweep-spec");
  const std::string tp = "parallel.tp=1,2,4", buckets = "data_parallel.bucket_cap_mb=25:100:x2";
  const std::string scope = R"(training.cuda_graph_scope=["attn"],["attn","mlp"])";
  const std::string common = " --set model=llama3-8b --gpus 64";
  const Run flags = dir.run("sweep --vary " + tp + " --vary " + buckets + " --vary '" + scope + "'" + common);
  REQUIRE(flags.status == 0);
  REQUIRE(std::count(flags.out.begin(), flags.out.end(), '\n') == 1 + 3 * 3 * 2);
  std::ofstream(dir.file("axes.txt")) << "# the layout first\n"
                                      << tp << "\n\n  " << buckets << "  \r\n"
                                      << scope << "\n";
  const Run file = dir.run("sweep --spec axes.txt" + common);
  INFO(file.err);
  REQUIRE(file.status == 0);
  CHECK(file.out == flags.out);
  std::ofstream(dir.file("first.txt")) << tp << "\n" << buckets << "\n";
  const Run both = dir.run("sweep --spec first.txt --vary '" + scope + "'" + common);
  REQUIRE(both.status == 0);
  CHECK(both.out == flags.out);

  std::ofstream(dir.file("bad.txt")) << tp << "\n# fine\nparallel.pp\n";
  CHECK(stepsim::testing::refusal(dir.run("sweep --spec bad.txt"),
                                  "bad.txt: line 3: parallel.pp: expected KEY=V1,V2,... or KEY=LO:HI:xF or "
                                  "KEY=LO:HI:+S") == "");
  std::ofstream(dir.file("range.txt")) << "parallel.tp=8:1:x2\n";
  CHECK(stepsim::testing::refusal(dir.run("sweep --spec range.txt"),
                                  "range.txt: line 1: parallel.tp: the range's upper bound 1 is below its lower "
                                  "bound 8") == "");
  std::ofstream(dir.file("twice.txt")) << "training.micro_batch=1\n\ntraining.micro_batch=2\n";
  CHECK(stepsim::testing::refusal(dir.run("sweep --spec twice.txt"),
                                  "twice.txt: line 3: training.micro_batch: the key is varied twice (line 1 varies "
                                  "it too)") == "");
  std::ofstream(dir.file("empty.txt")) << "# nothing\n\n";
  CHECK(stepsim::testing::refusal(dir.run("sweep --spec empty.txt"), "empty.txt: lists no variation") == "");
  CHECK(stepsim::testing::refusal(dir.run("sweep --spec missing.txt"),
                                  "missing.txt: cannot read the spec file: No such file or directory") == "");
  CHECK(stepsim::testing::refusal(dir.run("sweep --spec axes.txt --spec axes.txt"),
                                  "option '--spec' cannot be specified more than once") == "");
}

// A key the scenario lacks was refused as --vary's, naming neither the file nor the line; a
// blank before '=' was part of the key ('tp '); a comment after the values was a value.
TEST_CASE("a spec file's key and values are trimmed, a comment may end a line, and every error names the line") {
  const Scratch dir("sweep-spec-lines");
  const std::string common = " --set model=llama3-8b --gpus 64";
  const Run flags = dir.run("sweep --vary parallel.tp=4,8 --vary data_parallel.bucket_cap_mb=25,100" + common);
  REQUIRE(flags.status == 0);
  std::ofstream(dir.file("spaced.txt")) << "parallel.tp = 4, 8   # the layout\n"
                                        << "\tdata_parallel.bucket_cap_mb\t=25 ,100\n";
  const Run spaced = dir.run("sweep --spec spaced.txt" + common);
  INFO(spaced.err);
  REQUIRE(spaced.status == 0);
  CHECK(spaced.out == flags.out);
  // A '#' after no blank is the value's: "100#x" is a value of its own, an invalid point whose
  // reason names the key as --vary would (the rows of a file are those of the --vary flags).
  std::ofstream(dir.file("hash.txt")) << "parallel.tp=4,8\ndata_parallel.bucket_cap_mb=25,100#x\n";
  const Run hash = dir.run("sweep --spec hash.txt" + common);
  REQUIRE(hash.status == 0);
  CHECK(hash.out == dir.run("sweep --vary parallel.tp=4,8 --vary 'data_parallel.bucket_cap_mb=25,100#x'" + common).out);
  CHECK(hash.out.find(",100#x,") != std::string::npos);
  std::ofstream(dir.file("commented.txt")) << "parallel.tp = 4,8 # comment\n"
                                           << "data_parallel.bucket_cap_mb=25,100\t# sizes in MiB\n";
  const Run commented = dir.run("sweep --spec commented.txt" + common);
  REQUIRE(commented.status == 0);
  CHECK(commented.out == flags.out);
  // A '#' inside a JSON string is the value's (here an unknown one, refused at its line).
  std::ofstream(dir.file("quoted.txt")) << "parallel.tp=4\ntraining.cuda_graph_scope=[\"a #b\"]\n";
  CHECK(dir.run("sweep --spec quoted.txt" + common).err ==
        "stepsim: error: quoted.txt: line 2: training.cuda_graph_scope[0]: unknown value 'a #b' (expected one of "
        "attn, mlp, moe, moe_router, moe_preprocess)\n");

  std::ofstream(dir.file("sp4.txt")) << "# c\nparallel.tp=4,8\nparallel.tpp=1,2\n";
  CHECK(dir.run("sweep --spec sp4.txt --gpus 64 -o -").err ==
        "stepsim: error: sp4.txt: line 3: parallel.tpp: unknown key 'tpp' (did you mean 'tp'?)\n");
  std::ofstream(dir.file("column.txt")) << "parallel.tp=4\n\nstatus=1\n";
  CHECK(dir.run("sweep --spec column.txt").err ==
        "stepsim: error: column.txt: line 3: status: is a column of the sweep's rows, not a scenario key\n");
  std::ofstream(dir.file("dp.txt")) << "parallel.dp=2,4\n";
  CHECK(stepsim::testing::refusal(dir.run("sweep --spec dp.txt --gpus 64"),
                                  "dp.txt: line 1: parallel.dp: cannot be combined with --gpus") == "");
  std::ofstream(dir.file("tp.txt")) << "parallel.tp=4,8\n";
  CHECK(dir.run("sweep --spec tp.txt --vary parallel.tp=2").err ==
        "stepsim: error: --vary: parallel.tp: the key is varied twice (tp.txt line 1 varies it too)\n");
}

TEST_CASE("points that do not divide --gpus or do not validate are rows with their reason") {
  const Scratch dir("sweep");
  const Run run = dir.run("sweep --vary parallel.tp=3,8 --set model=llama3-8b --gpus 64");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("0,") != std::string::npos);
  CHECK(run.out.find(",3,,invalid,tp·pp·cp = 3·1·1 = 3 does not divide --gpus 64,") != std::string::npos);
  CHECK(run.out.find(",8,8,ok,,") != std::string::npos);
}

// --gpus derives dp from the point's own tp, pp and cp, also when a varied or set object of the
// parallel section gives them: 64 / 4 = 16 and 64 / (2·2) = 16, never the base scenario's tp.
TEST_CASE("a sweep with --gpus derives dp from a varied parallel object's degrees") {
  const Scratch dir("sweep");
  const Run run = dir.run("sweep --vary 'parallel={\"tp\":4},{\"tp\":2,\"pp\":2}' --set model=gpt-1.3b --gpus 64");
  REQUIRE(run.status == 0);
  INFO(run.out);
  CHECK(run.out.find(",\"{\"\"tp\"\":4}\",16,ok,,") != std::string::npos);
  CHECK(run.out.find(",\"{\"\"tp\"\":2,\"\"pp\"\":2}\",16,ok,,") != std::string::npos);
  const Run set =
      dir.run("sweep --set 'parallel={\"tp\":2}' --vary training.micro_batch=1 --set model=gpt-1.3b --gpus 64");
  CHECK(set.out.find(",1,32,ok,,") != std::string::npos);
  CHECK(refusal(dir.run("sweep --vary 'parallel={\"tp\":4,\"dp\":16}' --gpus 64"),
                "--vary: parallel: {\"tp\":4,\"dp\":16} sets dp, which cannot be combined with --gpus") == "");
}

// A varied example preset brings its own parallel section: dp is --gpus over its degrees, not over
// the base scenario's (the embedded default's tp 8). ddp-1.3b-64xa100 runs tp 1, pp 1: 64 / 1 = 64;
// gpt-530b-selene tp 8, pp 35: 280 GPUs a replica, which 64 does not hold.
TEST_CASE("a sweep with --gpus derives dp from a varied example preset's own degrees") {
  const Scratch dir("sweep");
  const Run run = dir.run("sweep --vary preset=ddp-1.3b-64xa100,gpt-530b-selene --gpus 64");
  REQUIRE(run.status == 0);
  INFO(run.out);
  CHECK(run.out.find(",ddp-1.3b-64xa100,64,ok,,") != std::string::npos);
  CHECK(run.out.find(",gpt-530b-selene,,invalid,tp·pp·cp = 8·35·1 = 280 does not divide --gpus 64,") !=
        std::string::npos);
}

// The scenario with --set alone is no point of a sweep that varies keys or derives dp: a --set
// that the points' values make valid runs. A global batch of 36 sequences of micro-batches of 1
// splits over dp 36 / 1 = 36 and 36 / 2 = 18, not over the embedded default's own dp 8; micro-batches
// of 3 over dp 8 split 24 = 3 x 8 and 48 = 3 x 8 x 2, not the default's 128. Where no point loads,
// the --set is refused as before.
TEST_CASE("a sweep runs whose --set only its points' values and --gpus make valid") {
  const Scratch dir("sweep");
  const std::string gpus =
      "sweep --set model=gpt-1.3b --set training.global_batch=36 --set training.micro_batch=1 --vary parallel.tp=1,2 "
      "--gpus 36 -o g.csv";
  const Run run = dir.run(gpus);
  REQUIRE(run.status == 0);
  const std::string rows = slurp(dir.work() / "g.csv");
  INFO(rows);
  CHECK(rows.find(",1,36,ok,,") != std::string::npos);
  CHECK(rows.find(",2,18,ok,,") != std::string::npos);
  // One sweep, run again: its sweep_id is the same, so --resume keeps its rows.
  const Run resumed = dir.run(gpus + " --resume");
  REQUIRE(resumed.status == 0);
  CHECK(resumed.err.find("2 already written") != std::string::npos);
  const Run batches = dir.run(
      "sweep --set model=gpt-1.3b --set training.micro_batch=3 --set parallel.dp=8 --vary training.global_batch=24,48");
  REQUIRE(batches.status == 0);
  INFO(batches.out);
  CHECK(batches.out.find(",24,ok,,") != std::string::npos);
  CHECK(batches.out.find(",48,ok,,") != std::string::npos);
  CHECK(stepsim::testing::refusal(
            dir.run("sweep --set model=gpt-1.3b --set parallel.tp=3 --vary training.micro_batch=1,2 --gpus 48"),
            "--set: model.heads: model.heads (16) is not divisible by tp (3)") == "");
}

// The points apply their values as assignments; a value of the wrong type is the --vary's.
TEST_CASE("a varied value that is not its key's type is an invalid point naming --vary") {
  const Scratch dir("sweep");
  const Run run = dir.run("sweep --vary data_parallel.bucket_cap_mb=25,lots --set model=llama3-8b");
  REQUIRE(run.status == 0);
  INFO(run.out);
  CHECK(run.out.find(",lots,invalid,\"--vary: data_parallel.bucket_cap_mb: ") != std::string::npos);
  CHECK(run.out.find("--set") == std::string::npos);
  CHECK(run.out.find(",25,ok,,") != std::string::npos);
}

// A varied value that fails validation is the --vary's too, named by the key as --set's
// errors name it, and a parallel.dp that --gpus derives is --gpus's.
TEST_CASE("a varied value that does not validate is an invalid point naming --vary and the key") {
  const Scratch dir("sweep");
  const Run run = dir.run(
      "sweep --set simulation.ranks=all --vary 'simulation.variation.gpu_speed=[{\"rank\":70,\"factor\":0.5}],"
      "[{\"rank\":3,\"factor\":0.5}]' --vary model.layers=32,100000");
  REQUIRE(run.status == 0);
  INFO(run.out);
  CHECK(run.out.find(",32,invalid,\"--vary: simulation.variation.gpu_speed[0].rank: must be a rank from 0 to 63 (the "
                     "job has 64 GPUs), got 70\",") != std::string::npos);
  CHECK(run.out.find(",100000,invalid,\"--vary: model.layers: must be between 1 and 2048, got 100000\",") !=
        std::string::npos);
  CHECK(run.out.find(",32,ok,,") != std::string::npos);
  const Run gpus = dir.run("sweep --vary parallel.tp=1,8 --gpus 2000000");
  REQUIRE(gpus.status == 0);
  INFO(gpus.out);
  CHECK(gpus.out.find(",1,2000000,invalid,\"--gpus: parallel.dp: must be between 1 and 1048576, got 2000000\",") !=
        std::string::npos);
}

TEST_CASE("merging files whose columns differ is refused") {
  const Scratch dir("sweep");
  REQUIRE(dir.run("sweep --vary parallel.tp=4,8 -o " + (dir.work() / "a.csv").string()).status == 0);
  REQUIRE(dir.run("sweep --vary training.micro_batch=1,2 -o " + (dir.work() / "b.csv").string()).status == 0);
  const Run merge = dir.run("sweep --merge " + (dir.work() / "m.csv").string() + " " + (dir.work() / "a.csv").string() +
                            " " + (dir.work() / "b.csv").string());
  CHECK(merge.status == 2);
  CHECK(merge.err == "stepsim: error: " + (dir.work() / "b.csv").string() +
                         ": line 1: the columns differ from those of " + (dir.work() / "a.csv").string() + "\n");
  CHECK_FALSE(fs::exists(dir.work() / "m.csv"));
}

TEST_CASE("bad sweep flags exit with status 2 and a message naming the flag") {
  const Scratch dir("sweep");
  const auto err = [&](const std::string& args) {
    const Run run = dir.run("sweep " + args);
    CHECK(run.status == 2);
    return run.err;
  };
  CHECK(err("--vary parallel.tp=") ==
        "stepsim: error: --vary: parallel.tp: no values given (expected e.g. parallel.tp=1,2,4)\n");
  CHECK(err("--vary parallel.tpp=1,2") ==
        "stepsim: error: --vary: parallel.tpp: unknown key 'tpp' (did you mean 'tp'?)\n");
  CHECK(err("--vary parallel.tp=1:8:x1") ==
        "stepsim: error: --vary: parallel.tp: the range's factor must be greater than 1, got 1\n");
  CHECK(err("--vary a=1:1000:+1 --vary b=1:1000:+1 --vary c=1,2") ==
        "stepsim: error: --vary: c: the sweep would have more than 1000000 points; narrow the ranges\n");
  CHECK(err("--vary parallel.tp=1,2 -o out.txt") ==
        "stepsim: error: -o: out.txt: expected a file name ending in .csv or .jsonl (or '-', a device or a FIFO for "
        "CSV written through)\n");
  CHECK(err("'' --vary parallel.tp=1,2") ==
        "stepsim: error: <command line>: SCENARIO: the scenario file name is empty (omit it to sweep the embedded "
        "default)\n");
  CHECK(err("--vary parallel.dp=1,2 --gpus 8") ==
        "stepsim: error: --vary: parallel.dp: cannot be combined with --gpus, which derives parallel.dp per point\n");
  CHECK(err("--vary parallel.tp=1,2 --resume") ==
        "stepsim: error: --resume: needs an output file (-o FILE), not stdout\n");
  CHECK(err("") == "stepsim: error: --vary: expected at least one --vary KEY=VALUES (or --spec FILE, or --best K)\n");
}

TEST_CASE("the search for the best configuration ranks the configurations that fit and names what limits the first",
          "[slow]") {
  const Scratch dir("sweep");
  const Run run = dir.run(
      "sweep --set model=gpt-1.3b --set data_parallel.kind=ddp --set training.recompute=none "
      "--set training.micro_batch=2 --gpus 8 --best 2");
  REQUIRE(run.status == 0);
  CHECK(run.out.starts_with("8 GPUs: "));
  CHECK(run.out.find("\nfixed by --set: training.micro_batch, data_parallel.kind, training.recompute\n") !=
        std::string::npos);
  // Each column says what it holds: the DP degree and the DP kind are not both "dp".
  CHECK(run.out.find("  #   TP  PP  CP   DP  mb  schedule       DP kind   bucket TP ovl precision recompute") !=
        std::string::npos);
  CHECK(run.out.find("\n  1    1   1   1    8   2  ") != std::string::npos);
  CHECK(run.out.find("\n  2 ") != std::string::npos);
  CHECK(run.out.find("\n  3 ") == std::string::npos);
  CHECK(run.out.find("what limits #1 (tp=1 pp=1 cp=1 dp=8 ") != std::string::npos);
  CHECK(dir.run("sweep --best 2").err ==
        "stepsim: error: --best: 2: the search needs the GPU count whose layouts it tries: give --gpus N (1 or "
        "more)\n");
  // Given, --gpus is a count of 1 or more: 0 would derive no parallel.dp, and is refused as -8 is.
  CHECK(dir.run("sweep --best 2 --gpus 0").err ==
        "stepsim: error: --gpus: 0: expected a GPU count of 1 to 2147483647\n");
  CHECK(dir.run("sweep --best 2 --gpus -8").err ==
        "stepsim: error: --gpus: -8: expected a GPU count of 1 to 2147483647\n");
  const Run rows = dir.run("sweep --vary parallel.tp=1,2 --gpus 0");
  CHECK(rows.status == 2);
  CHECK(rows.out.empty());
  CHECK(rows.err == "stepsim: error: --gpus: 0: expected a GPU count of 1 to 2147483647\n");
}
