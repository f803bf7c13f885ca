// `stepsim sweep` outputs that others share: merge writes through FIFOs, symlinks and stdout
// as every other output does; one output file has one writer; rows of another sweep are
// never resumed nor merged; a merge says which points are missing or twice.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "cli/run_stepsim.hpp"
#include "sweep/long_sweep.hpp"

using stepsim::testing::count_lines;
using stepsim::testing::Run;
using stepsim::testing::Scratch;
using stepsim::testing::slurp;
using stepsim::testing::start_long_sweep;
namespace fs = std::filesystem;

namespace {

const std::string kShards = "sweep --vary parallel.tp=1,2,4 --gpus 8";

// The three shards of kShards as part.shard-K-of-3.csv, and the unsharded rows as all.csv.
void write_shards(const Scratch& dir) {
  REQUIRE(dir.run(kShards + " -o all.csv").status == 0);
  for (int k = 0; k < 3; ++k)
    REQUIRE(dir.run(kShards + " --shard " + std::to_string(k) + "/3 -o part.csv").status == 0);
}

// Reads a FIFO without blocking its open, until its writer has gone and `done` is set; so
// that a merge that replaces the FIFO instead of writing to it fails the test, not hangs it.
std::string drain_fifo(const fs::path& fifo, const std::atomic<bool>& done) {
  const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) return "cannot open";
  std::string got;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      got.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0 && done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::close(fd);
  return got;
}

}  // namespace

TEST_CASE("a merge into a FIFO writes through it and leaves it a FIFO") {
  const Scratch dir("merge-fifo");
  write_shards(dir);
  REQUIRE(::mkfifo(dir.file("merged.csv").c_str(), 0600) == 0);
  std::atomic<bool> done{false};
  std::string got;
  std::thread reader([&] { got = drain_fifo(dir.file("merged.csv"), done); });
  const Run merge =
      dir.run("sweep --merge merged.csv part.shard-0-of-3.csv part.shard-1-of-3.csv part.shard-2-of-3.csv");
  done = true;
  reader.join();
  CHECK(merge.status == 0);
  CHECK(fs::is_fifo(dir.file("merged.csv")));
  CHECK(got == slurp(dir.file("all.csv")));
}

TEST_CASE("a merge through a symlink keeps the link and writes its target, and '-' is stdout") {
  const Scratch dir("merge-link");
  write_shards(dir);
  dir.write("target.csv", "old");
  fs::create_symlink("target.csv", dir.file("link.csv"));
  const std::string shards = " part.shard-0-of-3.csv part.shard-1-of-3.csv part.shard-2-of-3.csv";
  REQUIRE(dir.run("sweep --merge link.csv" + shards).status == 0);
  CHECK(fs::is_symlink(dir.file("link.csv")));
  CHECK(slurp(dir.file("target.csv")) == slurp(dir.file("all.csv")));

  const Run to_stdout = dir.run("sweep --merge -" + shards);
  CHECK(to_stdout.status == 0);
  CHECK(to_stdout.out == slurp(dir.file("all.csv")));
  CHECK_FALSE(fs::exists(dir.file("-")));
  for (const std::string& name : dir.entries()) CHECK(name.find(".tmp") == std::string::npos);
}

TEST_CASE("a second sweep writing the same output file is refused while the first runs") {
  const Scratch dir("sweep-lock");
  const fs::path out = dir.file("rows.csv");
  const pid_t first = start_long_sweep(out);
  REQUIRE(first > 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (count_lines(slurp(out)) < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const Run second = dir.run("sweep --vary training.micro_batch=1,2 -o rows.csv");
  const Run resumed = dir.run("sweep --vary data_parallel.bucket_cap_mb=1:1000:+1 -o rows.csv --resume");
  const std::string rows = slurp(out);
  ::kill(first, SIGKILL);
  int status = 0;
  ::waitpid(first, &status, 0);
  CHECK(second.status == 2);
  CHECK(second.err ==
        "stepsim: error: rows.csv: -o: another process is writing it (it holds the file's lock); wait for it to "
        "finish or choose another output\n");
  CHECK(resumed.status == 2);
  CHECK(resumed.err == second.err);
  // The first sweep's rows are all there, its header first, and nothing of the others.
  CHECK(rows.starts_with("point,point_id,sweep_id,sweep_points,data_parallel.bucket_cap_mb,"));
  CHECK(rows.find("training.micro_batch") == std::string::npos);
  CHECK(rows.find("\n0,") != std::string::npos);
}

TEST_CASE("resuming or merging the rows of another sweep with the same columns is refused") {
  const Scratch dir("sweep-other");
  REQUIRE(dir.run("sweep --vary parallel.tp=1,2 --set training.micro_batch=1 -o a.csv").status == 0);
  const std::string before = slurp(dir.file("a.csv"));
  const Run resumed = dir.run("sweep --vary parallel.tp=1,2 --set training.micro_batch=2 -o a.csv --resume");
  CHECK(resumed.status == 2);
  CHECK(resumed.err.starts_with("stepsim: error: a.csv: line 2: written by another sweep (sweep_id "));
  CHECK(resumed.err.find("the scenario, --set, --vary, --gpus, --keep-oom, the files they read or the stepsim "
                         "version differ") != std::string::npos);
  CHECK(slurp(dir.file("a.csv")) == before);

  REQUIRE(dir.run("sweep --vary parallel.tp=1,2 --set training.micro_batch=2 -o b.csv").status == 0);
  const Run merge = dir.run("sweep --merge m.csv a.csv b.csv");
  CHECK(merge.status == 2);
  CHECK(merge.err.starts_with("stepsim: error: b.csv: line 2: written by another sweep (sweep_id "));
  CHECK_FALSE(fs::exists(dir.file("m.csv")));
}

TEST_CASE("a changed calibration file makes another sweep") {
  const Scratch dir("sweep-files");
  REQUIRE(dir.run("calibrate import-nccl-tests " + std::string(STEPSIM_TEST_DATA) +
                  "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o cal.json")
              .status == 0);
  const std::string sweep = "sweep --vary parallel.tp=1,2 --set 'calibration=[\"cal.json\"]' -o c.csv";
  REQUIRE(dir.run(sweep).status == 0);
  REQUIRE(dir.run(sweep + " --resume").status == 0);  // the same sweep: nothing to do
  std::string text = slurp(dir.file("cal.json"));
  dir.write("cal.json", text + "\n");
  const Run changed = dir.run(sweep + " --resume");
  CHECK(changed.status == 2);
  CHECK(changed.err.find("written by another sweep") != std::string::npos);
}

TEST_CASE("a merge names the points it lacks and those given twice") {
  const Scratch dir("merge-missing");
  write_shards(dir);
  const Run merge = dir.run("sweep --merge m.csv part.shard-0-of-3.csv part.shard-0-of-3.csv");
  CHECK(merge.status == 0);
  CHECK(merge.err ==
        "stepsim: sweep: merged 1 rows from 2 files into m.csv (1 duplicates dropped: point 0)\n"
        "stepsim: sweep: m.csv lacks 2 of the sweep's 3 points: 1-2 (merge the other shards' files too)\n");
  CHECK(count_lines(slurp(dir.file("m.csv"))) == 2);
}

// A calibration file is an input of the sweep whether --set or a --vary value names it: an
// output leading to it, through a symlink or by its own name, is refused and it stays as it was.
TEST_CASE("a sweep refuses an output that is one of its calibration files, by any name") {
  const Scratch dir("sweep-calibration-output");
  REQUIRE(dir.run("calibrate import-nccl-tests " + std::string(STEPSIM_TEST_DATA) +
                  "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o cal.json")
              .status == 0);
  const std::string calibration = slurp(dir.file("cal.json"));
  fs::create_symlink("cal.json", dir.file("rows.csv"));
  const Run linked = dir.run("sweep --vary parallel.tp=1,2 --set 'calibration=[\"cal.json\"]' -o rows.csv");
  CHECK(refusal(linked, "stepsim: error: rows.csv: -o: is 'cal.json', an input of this run") == "");
  CHECK(slurp(dir.file("cal.json")) == calibration);

  dir.write("cal.jsonl", calibration);
  const Run varied = dir.run("sweep --vary 'calibration=[],[\"cal.jsonl\"]' -o cal.jsonl");
  CHECK(refusal(varied, "stepsim: error: cal.jsonl: -o: is 'cal.jsonl', an input of this run") == "");
  CHECK(slurp(dir.file("cal.jsonl")) == calibration);
}

// The points of `--vary calibration=...` read the files its values name: the sweep_id covers
// their contents, so that rows simulated with the old file are not resumed as the new one's.
TEST_CASE("a changed calibration file that a varied value names makes another sweep") {
  const Scratch dir("sweep-varied-calibration");
  REQUIRE(dir.run("calibrate import-nccl-tests " + std::string(STEPSIM_TEST_DATA) +
                  "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o cal.json")
              .status == 0);
  const std::string sweep = "sweep --vary 'calibration=[],[\"cal.json\"]' -o c.csv";
  REQUIRE(dir.run(sweep).status == 0);
  const Run same = dir.run(sweep + " --resume");
  REQUIRE(same.status == 0);
  CHECK(same.err.find("2 already written") != std::string::npos);
  dir.write("cal.json", slurp(dir.file("cal.json")) + "\n");
  const Run changed = dir.run(sweep + " --resume");
  CHECK(changed.status == 2);
  CHECK(changed.err.find("written by another sweep") != std::string::npos);
}

// /dev/stdout, /dev/fd/1 and /proc/self/fd/1 are stdout, as '-' is: the file behind a shell's
// >> gets the rows after what it had, never emptied.
TEST_CASE("rows to /dev/stdout are appended to the file stdout is, as with -o -") {
  const Scratch dir("sweep-dev-stdout");
  const std::string sweep = STEPSIM_BINARY " sweep --vary parallel.tp=1,2";
  const Run dash = dir.run("sweep --vary parallel.tp=1,2 -o -");
  REQUIRE(dash.status == 0);
  for (const std::string name : {"/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"}) {
    INFO(name);
    dir.write("log.csv", "earlier\n");
    const Run run = dir.shell("(" + sweep + " -o " + name + " >> log.csv)");
    CHECK(run.status == 0);
    CHECK(slurp(dir.file("log.csv")) == "earlier\n" + dash.out);
  }
}

// A sweep killed while writing its first line leaves that line torn, without a newline: resumed,
// it is cut and the file becomes the uninterrupted sweep's. A file of something else is refused.
TEST_CASE("resuming cuts a torn first line and refuses a file that is no sweep's rows") {
  const Scratch dir("sweep-torn-first");
  const std::string sweep = "sweep --vary parallel.tp=1,2 -o ";
  for (const std::string name : {"whole.csv", "whole.jsonl"}) REQUIRE(dir.run(sweep + name).status == 0);
  for (const std::string ext : {".csv", ".jsonl"}) {
    INFO(ext);
    const std::string whole = slurp(dir.file("whole" + ext));
    for (const std::size_t torn : {std::size_t{1}, std::size_t{25}, whole.find('\n') - 1}) {
      dir.write("torn" + ext, whole.substr(0, torn));
      REQUIRE(dir.run(sweep + "torn" + ext + " --resume").status == 0);
      CHECK(slurp(dir.file("torn" + ext)) == whole);
    }
  }
  dir.write("other.csv", "hello world");
  const Run other = dir.run(sweep + "other.csv --resume");
  CHECK(refusal(other, "stepsim: error: other.csv: line 1: is not the start of a sweep's rows") == "");
  CHECK(slurp(dir.file("other.csv")) == "hello world");
}

// A varied value out of a double's range is no JSON number: the rows stay JSON, so that stepsim
// resumes and merges its own file.
TEST_CASE("JSON rows of a value out of range resume and merge") {
  const Scratch dir("sweep-infinity");
  const std::string sweep = "sweep --vary data_parallel.bucket_cap_mb=1e400,-0,1E2 -o big.jsonl";
  REQUIRE(dir.run(sweep).status == 0);
  const std::string rows = slurp(dir.file("big.jsonl"));
  CHECK(rows.find("\"data_parallel.bucket_cap_mb\":\"1e400\"") != std::string::npos);
  const Run resumed = dir.run(sweep + " --resume");
  CHECK(resumed.status == 0);
  CHECK(resumed.err.find("3 already written") != std::string::npos);
  CHECK(slurp(dir.file("big.jsonl")) == rows);
  const Run merged = dir.run("sweep --merge m.jsonl big.jsonl");
  CHECK(merged.status == 0);
  CHECK(slurp(dir.file("m.jsonl")) == rows);
}

TEST_CASE("a merge names each file whose torn last line it left out") {
  const Scratch dir("merge-torn");
  write_shards(dir);
  std::ofstream(dir.file("part.shard-1-of-3.csv"), std::ios::app) << "1,0123";
  const Run merge = dir.run("sweep --merge m.csv part.shard-0-of-3.csv part.shard-1-of-3.csv part.shard-2-of-3.csv");
  CHECK(merge.status == 0);
  CHECK(merge.err.find("stepsim: warning: left out the torn last line of part.shard-1-of-3.csv\n") !=
        std::string::npos);
  CHECK(slurp(dir.file("m.csv")) == slurp(dir.file("all.csv")));
}
