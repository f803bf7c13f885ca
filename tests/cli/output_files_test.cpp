// Output files of the stepsim program: regular files replaced whole or not at all, devices,
// FIFOs, pipes and symlinks written through, and nothing left behind, not even by SIGKILL.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "run_stepsim.hpp"

namespace stepsim::testing {
namespace {

constexpr const char* kSimulate = "simulate ddp-1.3b-64xa100";

bool starts_as_json(const std::string& text) { return !text.empty() && text.front() == '{'; }

// Files a staged output could leave behind: the old X.tmp.PID and the .stepsim-* names.
bool has_leftovers(const Scratch& dir) {
  for (const std::string& name : dir.entries())
    if (name.find(".tmp") != std::string::npos || name.starts_with(".stepsim")) return true;
  return false;
}

TEST_CASE("a FIFO given to --json is written through to its reader") {
  const Scratch dir("fifo");
  REQUIRE(::mkfifo(dir.file("report.fifo").c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = slurp(dir.file("report.fifo")); });
  const Run r = dir.run(std::string(kSimulate) + " --json report.fifo");
  reader.join();
  CHECK(r.status == 0);
  CHECK(starts_as_json(got));
  CHECK(fs::is_fifo(dir.file("report.fifo")));
  CHECK(dir.entries() == std::vector<std::string>{"report.fifo"});
}

TEST_CASE("a symlink given to --json survives and its target gets the report") {
  const Scratch dir("symlink");
  dir.write("target.json", "old");
  fs::create_symlink("target.json", dir.file("link.json"));
  const Run r = dir.run(std::string(kSimulate) + " --json link.json");
  CHECK(r.status == 0);
  CHECK(fs::is_symlink(dir.file("link.json")));
  CHECK(starts_as_json(slurp(dir.file("target.json"))));
  CHECK(dir.entries() == std::vector<std::string>{"link.json", "target.json"});
}

TEST_CASE("writing a report to /dev/null leaves it a character device") {
  REQUIRE(fs::is_character_file("/dev/null"));
  const Scratch dir("devnull");
  CHECK(dir.run(std::string(kSimulate) + " --json /dev/null").status == 0);
  CHECK(dir.run("collective allreduce --json /dev/null").status == 0);
  struct stat st {};
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(dir.entries().empty());
}

TEST_CASE("/dev/stdout and a process substitution are written through") {
  const Scratch dir("stdout");
  const Run r = dir.run(std::string(kSimulate) + " --json /dev/stdout");
  CHECK(r.status == 0);
  CHECK(r.out.find("\"step_time_s\"") != std::string::npos);
  // An output on stdout has it to itself, however it is named: no table in front of the JSON.
  CHECK(starts_as_json(r.out));
  for (const char* trace : {" --trace -", " --trace /dev/stdout", " --trace /dev/fd/1"}) {
    INFO(trace);
    const Run t = dir.run(std::string(kSimulate) + trace);
    CHECK(t.status == 0);
    CHECK(starts_as_json(t.out));
    CHECK(t.out.find("step time ") == std::string::npos);
  }
  // The table stays where no output is stdout.
  const Run table = dir.run(std::string(kSimulate) + " --json r.json");
  CHECK(table.out.starts_with("stepsim "));
  CHECK(std::remove(dir.file("r.json").c_str()) == 0);
  const std::string substituted = "bash -c 'cd " + dir.work().string() + " && " + STEPSIM_BINARY + " " + kSimulate +
                                  " --json >(cat > got.json); wait' >/dev/null 2>&1";
  REQUIRE(std::system(substituted.c_str()) == 0);
  for (int i = 0; i < 100 && slurp(dir.file("got.json")).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(starts_as_json(slurp(dir.file("got.json"))));
  CHECK(dir.entries() == std::vector<std::string>{"got.json"});
}

TEST_CASE("two outputs naming the same file are refused with both flags named") {
  const Scratch dir("same");
  fs::create_symlink("x.json", dir.file("link.json"));
  for (const char* other : {"x.json", "./x.json", "link.json", "../work/x.json"}) {
    const Run r = dir.run(std::string(kSimulate) + " --json x.json --trace " + other);
    CHECK(r.status == 2);
    CHECK(r.err == fmt::format("stepsim: error: <command line>: --json and --trace: 'x.json' and '{}' are the same "
                               "file (give each output its own)\n",
                               other));
  }
  CHECK(dir.run(std::string(kSimulate) + " --json - --trace /dev/stdout").status == 2);
  CHECK(dir.entries() == std::vector<std::string>{"link.json"});
}

// The null device discards what is written to it, so any number of outputs may go there, as
// a shell sends several streams to it (they were refused as "the same file").
TEST_CASE("every output may go to /dev/null at once") {
  const Scratch dir("null-device");
  const Run r = dir.run(std::string(kSimulate) + " --json /dev/null --trace /dev/null");
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("step time") != std::string::npos);
  CHECK(dir.entries().empty());
  const Run analyze =
      dir.run("analyze " + std::string(STEPSIM_SOURCE_DIR) +
              "/tests/data/traces/resnet50-ddp-a100-rank0of2.json.gz --json /dev/null --trace /dev/null");
  CHECK(analyze.status == 0);
  CHECK(dir.entries().empty());
}

// Every command that reads a file and writes one: an output that is one of its inputs (by
// any name) is refused before it is written, and the input is left as it was.
TEST_CASE("an output that is one of the run's inputs is refused and the input kept") {
  const Scratch dir("input-output");
  const std::string data = std::string(STEPSIM_SOURCE_DIR) + "/tests/data/";
  const std::string scenario = dir.run("presets ddp-1.3b-64xa100").out;
  REQUIRE(!scenario.empty());
  dir.write("scenario.json", scenario);
  dir.write("scenario.csv", scenario);  // a scenario under a sweep's output name
  fs::copy_file(data + "traces/resnet50-ddp-a100-rank0of2.json.gz", dir.file("trace.json.gz"));
  fs::create_directory(dir.file("job"));
  fs::copy_file(data + "traces/resnet50-ddp-a100-rank0of2.json.gz", dir.file("job/rank0.json.gz"));
  fs::copy_file(data + "nccl-tests/a100-80g-8gpu-allreduce-a.txt", dir.file("log.txt"));
  fs::create_symlink("scenario.json", dir.file("link.json"));
  const std::string trace = slurp(dir.file("trace.json.gz")), log = slurp(dir.file("log.txt"));
  const struct {
    std::string args, output, flag, input;
  } cases[] = {
      {"simulate scenario.json --json scenario.json", "scenario.json", "--json", "scenario.json"},
      {"simulate scenario.json --trace link.json", "link.json", "--trace", "scenario.json"},
      {"analyze trace.json.gz --json trace.json.gz", "trace.json.gz", "--json", "trace.json.gz"},
      {"analyze job --json job/rank0.json.gz", "job/rank0.json.gz", "--json", "job/rank0.json.gz"},
      {"compare trace.json.gz scenario.json --json scenario.json", "scenario.json", "--json", "scenario.json"},
      {"calibrate import-nccl-tests log.txt -o log.txt", "log.txt", "-o", "log.txt"},
      {"sweep scenario.csv --vary data_parallel.bucket_cap_mb=1,2 -o scenario.csv", "scenario.csv", "-o",
       "scenario.csv"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    CHECK(refusal(dir.run(c.args), fmt::format("{}: {}: is '{}', an input of this run: writing it would replace "
                                               "what was read",
                                               c.output, c.flag, c.input)) == "");
  }
  CHECK(slurp(dir.file("scenario.json")) == scenario);
  CHECK(slurp(dir.file("scenario.csv")) == scenario);
  CHECK(slurp(dir.file("trace.json.gz")) == trace);
  CHECK(slurp(dir.file("job/rank0.json.gz")) == trace);
  CHECK(slurp(dir.file("log.txt")) == log);
  CHECK(fs::is_symlink(dir.file("link.json")));
}

TEST_CASE("a 255-byte output file name works") {
  const Scratch dir("long-name");
  const std::string name = std::string(250, 'r') + ".json";
  const Run r = dir.run(std::string(kSimulate) + " --json " + name);
  CHECK(r.status == 0);
  CHECK(starts_as_json(slurp(dir.file(name))));
  CHECK(dir.entries() == std::vector<std::string>{name});
}

TEST_CASE("when the second output fails the first is not written and nothing is left behind") {
  const Scratch dir("second-fails");
  const Run missing = dir.run(std::string(kSimulate) + " --json report.json --trace missing/trace.json");
  CHECK(missing.status == 2);
  CHECK(missing.err ==
        "stepsim: error: missing/trace.json: --trace: cannot create the file: No such file or directory\n");
  fs::create_directory(dir.file("folder"));
  const Run folder = dir.run(std::string(kSimulate) + " --json report.json --trace folder");
  CHECK(folder.status == 2);
  CHECK(folder.err == "stepsim: error: folder: --trace: is a folder, not a file\n");
  if (fs::is_character_file("/dev/full")) {
    const Run full = dir.run(std::string(kSimulate) + " --json report.json --trace /dev/full");
    CHECK(full.status == 2);
    CHECK(full.err == "stepsim: error: /dev/full: --trace: cannot write: No space left on device\n");
  }
  CHECK(dir.entries() == std::vector<std::string>{"folder"});
}

// A sweep's -o is an output like --json and --trace: its errors name the file and the flag,
// as simulate's do for /dev/full (the oracle: the same command's --json error).
TEST_CASE("a sweep's -o that cannot be written is named with its flag, as every other output is") {
  const Scratch dir("sweep-o-errors");
  if (fs::is_character_file("/dev/full")) {
    const Run json = dir.run(std::string(kSimulate) + " --json /dev/full");
    CHECK(json.err == "stepsim: error: /dev/full: --json: cannot write: No space left on device\n");
    const Run rows = dir.run("sweep ddp-1.3b-64xa100 --vary training.micro_batch=1,2 -o /dev/full");
    CHECK(rows.status == 2);
    CHECK(rows.err == "stepsim: error: /dev/full: -o: cannot write the rows: No space left on device\n");
  }
  // A folder this process may not write to (root may write anywhere: nothing to check then).
  if (::geteuid() != 0) {
    fs::create_directory(dir.file("locked"));
    fs::permissions(dir.file("locked"), fs::perms::owner_read | fs::perms::owner_exec);
    const Run locked = dir.run("sweep ddp-1.3b-64xa100 --vary training.micro_batch=1,2 -o locked/rows.csv");
    fs::permissions(dir.file("locked"), fs::perms::owner_all);
    CHECK(locked.status == 2);
    CHECK(locked.err.find("locked/rows.csv: -o: ") != std::string::npos);
  }
}

TEST_CASE("a stdout that cannot take the output fails the run, and a failing output prints no report") {
  if (!fs::is_character_file("/dev/full")) return;
  const Scratch dir("full-stdout");
  const Run device = dir.run(std::string(kSimulate) + " --json /dev/full");
  CHECK(device.status == 2);
  CHECK(device.out.empty());  // no report on stdout before the error
  CHECK(device.err == "stepsim: error: /dev/full: --json: cannot write: No space left on device\n");
  const std::string bin = STEPSIM_BINARY;
  const Run table = dir.shell("(" + bin + " " + kSimulate + " >/dev/full)");
  CHECK(table.status == 2);
  CHECK(table.err == "stepsim: error: <stdout>: cannot write the report: No space left on device\n");
  const Run json = dir.shell("(" + bin + " " + kSimulate + " --json - >/dev/full)");
  CHECK(json.status == 2);
  CHECK(json.err == "stepsim: error: -: --json: cannot write: No space left on device\n");
  const Run rows =
      dir.shell("(" + bin + " sweep ddp-1.3b-64xa100 --vary data_parallel.bucket_cap_mb=25,50 -o - >/dev/full)");
  CHECK(rows.status == 2);
  CHECK(rows.err == "stepsim: error: <stdout>: cannot write the rows: No space left on device\n");
  const Run listing = dir.shell("(" + bin + " presets >/dev/full)");
  CHECK(listing.status == 2);
  CHECK(listing.err == "stepsim: error: <stdout>: cannot write the output: No space left on device\n");
  // Tables printed through C's stdio (collective, calibrate check) are checked as well.
  const Run collective = dir.shell("(" + bin + " collective allreduce >/dev/full)");
  CHECK(collective.status == 2);
  CHECK(collective.err == "stepsim: error: <stdout>: cannot write the report: No space left on device\n");
  CHECK(dir.entries().empty());
}

TEST_CASE("every command prints its table after its outputs, so a failing output leaves stdout empty") {
  if (!fs::is_character_file("/dev/full")) return;
  const Scratch dir("table-after");
  const std::string data = std::string(STEPSIM_SOURCE_DIR) + "/tests/data/";
  const std::string full = "No space left on device";
  for (const std::string& args :
       {std::string("collective allreduce --json /dev/full"),
        "calibrate import-nccl-tests " + data + "nccl-tests/a100-80g-8gpu-allreduce-a.txt -o /dev/full",
        std::string("calibrate plan ddp-1.3b-64xa100 --json /dev/full")}) {
    INFO(args);
    const Run r = dir.run(args);
    CHECK(refusal(r, full) == "");
    CHECK(r.out.empty());
  }
  // A folder that is not there is refused before the search, not after it.
  const Run plan = dir.run("plan --model gpt-1.3b --tokens 10B --gpus 8 --cluster dgx-a100-80g-hdr -o nodir/p.csv");
  CHECK(refusal(plan, "nodir/p.csv: -o: cannot create the file: No such file or directory") == "");
  CHECK(plan.out.empty());
  CHECK(dir.entries().empty());
}

TEST_CASE("flags that would do nothing are refused: collective, calibrate from-trace and presets") {
  const Scratch dir("idle-flags");
  const std::string trace = std::string(STEPSIM_SOURCE_DIR) + "/tests/data/traces/resnet50-ddp-a100-rank0of2.json.gz";
  CHECK(refusal(dir.run("collective allreduce --factor 4"), "<command line>: --factor: applies only with --sweep") ==
        "");
  CHECK(refusal(dir.run("calibrate from-trace " + trace + " -o cpu.json"),
                "<command line>: -o: needs a SCENARIO: 'from-trace TRACE' alone prints the CPU's cost per operator") ==
        "");
  CHECK(refusal(dir.run("calibrate from-trace " + trace + " --set parallel.tp=2"),
                "<command line>: --set: needs a "
                "SCENARIO") == "");
  // presets: --json writes the list only; each flag once.
  CHECK(refusal(dir.run("presets h100-sxm5-80gb --json n.json"), "--json: writes the list of presets") == "");
  CHECK(refusal(dir.run("presets --keys --json n.json"), "--json: writes the list of presets") == "");
  CHECK(refusal(dir.run("presets --json a.json --json b.json"), "--json: given more than once") == "");
  CHECK(refusal(dir.run("presets --resolved"), "--resolved: applies to an example NAME") == "");
  CHECK(refusal(dir.run("presets --kind gpu --keys"), "--kind: applies to the list of presets") == "");
  // --keys lists the default scenario's keys: a NAME beside it was left out, and bloom-176b's
  // keys were printed with Llama 3 8B's values (model.name "llama3-8b", 32 layers).
  CHECK(refusal(dir.run("presets example/bloom-176b --keys"),
                "<command line>: --keys: lists every key with the default scenario's value, not "
                "example/bloom-176b's: leave NAME out (an example's values: stepsim presets NAME --resolved)") == "");
  CHECK(refusal(dir.run("presets nosuch --keys --markdown"), "--keys: lists every key with the default") == "");
  CHECK(dir.entries().empty());
}

TEST_CASE("a closed stdout is not taken by an output file") {
  const Scratch dir("closed-stdout");
  const std::string bin = STEPSIM_BINARY;
  // Without stdout the table cannot be printed: the run fails and report.json is not written,
  // instead of receiving the table after its JSON.
  const Run r = dir.shell("(" + bin + " " + kSimulate + " --json report.json >&-)");
  CHECK(refusal(r, "<stdout>: cannot write the report: Bad file descriptor") == "");
  CHECK(dir.entries().empty());
  // An output that is the only thing written goes through whole.
  const Run json = dir.shell("(" + bin + " collective allreduce --json c.json >&- 2>&-; echo $? >status)");
  CHECK(slurp(dir.file("status")) == "2\n");
  CHECK(dir.entries() == std::vector<std::string>{"status"});
}

TEST_CASE("a file a running sweep writes is not replaced by another output") {
  const Scratch dir("locked");
  dir.write("rows.csv", "point\n");
  // The lock sweep -o holds while it writes its rows.
  const int fd = ::open(dir.file("rows.csv").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  CHECK(refusal(dir.run(std::string(kSimulate) + " --json rows.csv"),
                "rows.csv: --json: a running sweep is writing its rows to it") == "");
  CHECK(refusal(dir.run("collective allreduce --json rows.csv"), "a running sweep is writing its rows to it") == "");
  ::close(fd);
  CHECK(slurp(dir.file("rows.csv")) == "point\n");
  CHECK(dir.run(std::string(kSimulate) + " --json rows.csv").status == 0);
}

TEST_CASE("sweep and plan write CSV through a device or a FIFO") {
  const Scratch dir("sweep-device");
  CHECK(dir.run("sweep ddp-1.3b-64xa100 --vary data_parallel.bucket_cap_mb=25,50 -o /dev/null").status == 0);
  const Run rows = dir.run("sweep ddp-1.3b-64xa100 --vary data_parallel.bucket_cap_mb=25,50 -o /dev/stdout");
  CHECK(rows.status == 0);
  CHECK(rows.out.starts_with("point,point_id,sweep_id,"));
  dir.write("rows.csv", rows.out);
  const Run merged = dir.run("sweep --merge /dev/stdout rows.csv");
  CHECK(merged.status == 0);
  CHECK(merged.out == rows.out);
  CHECK(fs::is_character_file("/dev/null"));
  CHECK(dir.entries() == std::vector<std::string>{"rows.csv"});
}

TEST_CASE("sweep --merge refuses a file of a header alone that is not a sweep's") {
  const Scratch dir("merge-header");
  dir.write("g.csv", "garbage\n");
  CHECK(refusal(dir.run("sweep --merge out.csv g.csv"),
                "g.csv: line 1: has no 'point' column: not the rows of a stepsim sweep") == "");
  CHECK(dir.entries() == std::vector<std::string>{"g.csv"});
}

TEST_CASE("an existing report survives a failed run unchanged") {
  const Scratch dir("survives");
  dir.write("report.json", "old");
  CHECK(dir.run(std::string(kSimulate) + " --json report.json --trace missing/trace.json").status == 2);
  CHECK(slurp(dir.file("report.json")) == "old");
  CHECK(dir.run(std::string(kSimulate) + " --json report.json").status == 0);
  CHECK(starts_as_json(slurp(dir.file("report.json"))));
  CHECK_FALSE(has_leftovers(dir));
}

// True once process `pid` holds an unnamed temporary file (its output, staged).
bool holds_staged_file(pid_t pid) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(fmt::format("/proc/{}/fd", pid), ec)) {
    std::error_code link_ec;
    if (fs::read_symlink(e.path(), link_ec).string().find("(deleted)") != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("a run killed with SIGKILL while writing leaves no temporary file") {
  const Scratch dir("sigkill");
  REQUIRE(::mkfifo(dir.file("trace.fifo").c_str(), 0600) == 0);
  const std::string work = dir.work().string();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The JSON report is staged first; opening the FIFO, which has no reader, then blocks.
    if (::chdir(work.c_str()) != 0) ::_exit(127);
    ::execl(STEPSIM_BINARY, "stepsim", "-q", "simulate", "ddp-1.3b-64xa100", "--json", "report.json", "--trace",
            "trace.fifo", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  bool staged = false;
  for (int i = 0; i < 500 && !staged; ++i) {
    staged = holds_staged_file(pid);
    if (!staged) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(staged);
  CHECK(WIFSIGNALED(status));
  CHECK(dir.entries() == std::vector<std::string>{"trace.fifo"});
}

// A regular output is replaced through a rename, which the folder's permission allows: a file
// its user may not write is refused all the same, as the shell's > refuses it. Root writes any
// file, so under root the runs take an unprivileged user that owns the folder and the file.
TEST_CASE("a file its user may not write is refused as an output and kept") {
  const Scratch dir("write-protected");
  dir.write("ro.json", "keep\n");
  std::string as_user;
  if (::geteuid() == 0) {
    REQUIRE(::chown(dir.work().c_str(), 65534, 65534) == 0);
    REQUIRE(::chown(dir.file("ro.json").c_str(), 65534, 65534) == 0);
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  fs::permissions(dir.file("ro.json"), fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  for (const std::string& flags :
       {std::string(kSimulate) + " --json ro.json", std::string(kSimulate) + " --trace ro.json",
        std::string("collective allreduce --json ro.json")}) {
    INFO(flags);
    const Run r = dir.shell(as_user + STEPSIM_BINARY + " " + flags);
    const std::string flag = flags.substr(flags.rfind(" --") + 1, flags.rfind(' ') - flags.rfind(" --") - 1);
    CHECK(refusal(r, "ro.json: " + flag + ": cannot write the file: Permission denied").empty());
    CHECK(slurp(dir.file("ro.json")) == "keep\n");
  }
  // The folder's own files stay writable: a new name is written.
  CHECK(dir.shell(as_user + STEPSIM_BINARY + " collective allreduce --json new.json").status == 0);
}

}  // namespace
}  // namespace stepsim::testing

// Megatron-Core asserts that tp divides num_query_groups (divide() in its attention), and
// torchtitan's TP plan shards wk and wv over the TP ranks: neither replicates key/value heads,
// so fewer of them than tp is bad input.
TEST_CASE("simulate refuses fewer key/value heads than tp") {
  Scratch dir("kv-heads");
  CHECK(refusal(dir.run("simulate --set model.kv_heads=4"),
                "--set: model.kv_heads: model.kv_heads (4) is not divisible by parallel.tp (8)") == "");
}
