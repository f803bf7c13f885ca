// The stepsim program as users run it: exit statuses, error messages that name the file
// and the place in it, and outputs that are whole or absent.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "run_stepsim.hpp"

namespace fs = std::filesystem;
using stepsim::testing::Run;
using stepsim::testing::Scratch;

namespace {

constexpr const char* kScenario = R"({
  "model": "gpt-1.3b",
  "cluster": { "preset": "dgx-a100-80g-hdr", "inter_node": { "nic_bandwidth": 400 } },
  "parallel": { "tp": 1, "dp": 16 },
  "training": { "global_batch": 32 },
})";

// The first row `stepsim collective ARGS --json -` prints.
boost::json::object first_collective_row(const Scratch& dir, const std::string& args) {
  const Run r = dir.run("collective " + args + " --json -");
  INFO(r.err);
  REQUIRE(r.status == 0);
  return boost::json::parse(r.out).as_array().at(0).as_object();
}

}  // namespace

TEST_CASE("stepsim simulate with no arguments prints the default scenario's report") {
  const Scratch dir("commands");
  const Run r = dir.run("simulate");
  CHECK(r.status == 0);
  CHECK(r.out.find("64 GPUs") != std::string::npos);
  CHECK(r.out.find("step time") != std::string::npos);
  CHECK(r.out.find("exposed communication") != std::string::npos);
}

TEST_CASE("a bare number for a bandwidth fails with exit status 2 naming file, path and units") {
  const Scratch dir("commands");
  const fs::path scenario = dir.write("bad-nic.json", kScenario);
  const Run r = dir.run("simulate " + scenario.string());
  CHECK(r.status == 2);
  CHECK(r.err.find(scenario.string()) != std::string::npos);
  CHECK(r.err.find("/cluster/inter_node/nic_bandwidth") != std::string::npos);
  CHECK(r.err.find("Gb/s") != std::string::npos);
  CHECK(r.err.find("GB/s") != std::string::npos);
}

TEST_CASE("malformed JSON is reported with line and column") {
  const Scratch dir("commands");
  const fs::path scenario = dir.write("broken.json", "{\n  \"model\": \"gpt-1.3b\",\n  \"parallel\": { tp: 2 }\n}\n");
  const Run r = dir.run("simulate " + scenario.string());
  CHECK(r.status == 2);
  CHECK(r.err.find("broken.json") != std::string::npos);
  CHECK(r.err.find("line 3") != std::string::npos);
  CHECK(r.err.find("column") != std::string::npos);
}

TEST_CASE("bad input leaves no half-written output file") {
  const Scratch dir("commands");
  const fs::path scenario = dir.write("bad-nic.json", kScenario);
  const fs::path json = dir.work() / "report.json";
  const Run r = dir.run("simulate " + scenario.string() + " --json " + json.string());
  CHECK(r.status == 2);
  CHECK_FALSE(fs::exists(json));
}

TEST_CASE("the JSON report goes to stdout alone with --json -") {
  const Scratch dir("commands");
  const Run r = dir.run("simulate --json -");
  CHECK(r.status == 0);
  REQUIRE_FALSE(r.out.empty());
  CHECK(r.out.front() == '{');
  CHECK(r.out.find("\"step_time_s\"") != std::string::npos);
}

TEST_CASE("bad command lines fail with exit status 2 and say why") {
  const Scratch dir("commands");
  struct Case {
    const char* args;
    const char* says;
  };
  const Case cases[] = {
      {"frobnicate", "unknown command 'frobnicate'"},       {"simulate --bogus", "bogus"},
      {"simulate no-such-file.json", "no-such-file.json"},  {"simulate --set parallel.tpp=2", "tpp"},
      {"simulate --set parallel.tp=3", "parallel"},         {"collective allreduce --size \"12 parsecs\"", "parsecs"},
      {"collective allreduce --size banana", "banana"},     {"collective teleport --size 1MiB", "teleport"},
      {"analyze no-such-trace.json", "no-such-trace.json"},
  };
  for (const Case& c : cases) {
    const Run r = dir.run(c.args);
    INFO("stepsim " << c.args << " said: " << r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find(c.says) != std::string::npos);
  }
}

// Every single-valued option given twice is refused alike, whether Boost keeps it as one value
// (--json) or as a list (--trace-format, --trace-ranks, --step): the same words as --json's.
TEST_CASE("a single-valued option given twice is refused naming it, whichever option it is") {
  const Scratch dir("given-twice");
  const Run json = dir.run("simulate --json a.json --json b.json");
  REQUIRE(json.status == 2);
  REQUIRE(json.err.find("stepsim simulate: option '--json' cannot be specified more than once") != std::string::npos);
  struct Case {
    const char* command;
    const char* args;
    const char* flag;
  };
  const Case cases[] = {
      {"simulate", "--trace t.json --trace-format chrome --trace-format kineto", "--trace-format"},
      {"simulate", "--trace t.json --trace-ranks 0 --trace-ranks 5", "--trace-ranks"},
      {"analyze", "t.json --step 4 --step 5", "--step"},
      {"compare", "t.json default --step 4 --step 5", "--step"},
      {"simulate", "--scenario default --scenario default", "--scenario"},
  };
  for (const Case& c : cases) {
    const Run r = dir.run(std::string(c.command) + " " + c.args);
    INFO("stepsim " << c.command << " " << c.args);
    CHECK(stepsim::testing::refusal(r, fmt::format("<command line>: stepsim {}: option '{}' cannot be specified "
                                                   "more than once (see 'stepsim {} --help')",
                                                   c.command, c.flag, c.command)) == "");
  }
  CHECK_FALSE(std::filesystem::exists(dir.file("t.json")));
  // Given once as the argument and once by its flag, it is named as given twice that way.
  CHECK(stepsim::testing::refusal(dir.run("simulate default --scenario default"),
                                  "<command line>: stepsim simulate: the scenario is given twice, as the argument "
                                  "SCENARIO.json and with --scenario: give it once") == "");
}

TEST_CASE("every command answers --help with examples") {
  const Scratch dir("commands");
  for (const char* command :
       {"simulate", "collective", "analyze", "compare", "presets", "sweep", "plan", "calibrate import-nccl-tests",
        "calibrate check", "calibrate from-trace", "calibrate plan"}) {
    const Run r = dir.run(std::string(command) + " --help");
    INFO(command);
    CHECK(r.status == 0);
    CHECK(r.out.find("xample") != std::string::npos);
  }
}

TEST_CASE("compare puts a simulated trace beside its own scenario with no difference") {
  const Scratch dir("commands");
  const fs::path trace = dir.work() / "step.json";
  REQUIRE(dir.run("simulate ddp-1.3b-64xa100 --trace " + trace.string()).status == 0);
  const Run r = dir.run("compare " + trace.string() + " ddp-1.3b-64xa100");
  CHECK(r.status == 0);
  INFO(r.out);
  // Its one simulated rank stands for the 64 GPUs: not a different world size.
  CHECK(r.out.find("differs:") == std::string::npos);
  CHECK(r.out.find("step time") != std::string::npos);
  CHECK(r.out.find("hidden fraction") != std::string::npos);
  CHECK(r.out.find("+0.0%") != std::string::npos);
  CHECK(r.out.find("-0.0%") == std::string::npos);
  // Every row measured but the GPU's wait for the host: stepsim's own trace format has no
  // launches for HolisticTraceAnalysis' idle breakdown.
  const std::size_t na = r.out.find("n/a");
  CHECK(na == r.out.find("GPU waiting for the host            n/a") + 36);
  CHECK(r.out.find("n/a", na + 1) == std::string::npos);
}

TEST_CASE("analyze prints per-step times, the hidden fraction and DDP's buckets of a real trace") {
  const Scratch dir("commands");
  const Run r = dir.run(std::string("analyze ") + STEPSIM_TEST_DATA + "/traces/resnet50-ddp-a100-rank0of2.json.gz");
  CHECK(r.status == 0);
  CHECK(r.out.find("ProfilerStep#4") != std::string::npos);
  CHECK(r.out.find("hidden fraction") != std::string::npos);
  CHECK(r.out.find("AllReduce") != std::string::npos);
}

TEST_CASE("broken traces fail analyze with exit status 2 and a message naming the file") {
  const Scratch dir("commands");
  const fs::path truncated = dir.write("truncated.json", R"({"traceEvents": [{"ph": "X", "name": "k", "ts": 1)");
  const fs::path not_json = dir.write("not-json.json", "this is not a trace\n");
  const fs::path wrong = dir.write("wrong-schema.json", R"({"traceEvents": {"ph": "X"}})");
  for (const fs::path& p : {truncated, not_json, wrong}) {
    const Run r = dir.run("analyze " + p.string());
    INFO(p.filename().string() << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find(p.filename().string()) != std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("stepsim collective --ranks-per-node spreads the communicator over N/K nodes") {
  const Scratch dir("ranks-per-node");
  const Run filled = dir.run("collective allreduce --cluster dgx-h100-ndr --gpus 16 --size 1GiB --algorithm ring");
  const Run eight =
      dir.run("collective allreduce --cluster dgx-h100-ndr --gpus 16 --ranks-per-node 8 --size 1GiB --algorithm ring");
  const Run one =
      dir.run("collective allreduce --cluster dgx-h100-ndr --gpus 16 --ranks-per-node 1 --size 1GiB --algorithm ring");
  REQUIRE(filled.status == 0);
  REQUIRE(eight.status == 0);
  REQUIRE(one.status == 0);
  CHECK(eight.out == filled.out);
  CHECK(one.out.find("(16 node(s))") != std::string::npos);
  CHECK(one.out != eight.out);
}

// A factor of 1.5 from 1 byte: 1, 1.5, 2.25, 3.4, 5.1, 7.6 ... rounded to whole bytes 1, 2, 2,
// 3, 5, 8, 11, 17, 26, 38, 58, then, as nccl-tests runs them, down to whole 4-byte floats: 0,
// 0, 0, 4, 8, 8, 16, 24, 36, 56: six rounded, three of no element left out, each size once.
TEST_CASE("stepsim collective --sweep lists each whole size once") {
  const Scratch dir("collective-factor");
  const Run run = dir.run("collective allreduce --sweep 1B:64B --factor 1.5 --json -");
  REQUIRE(run.status == 0);
  std::vector<long long> sizes;
  const boost::json::value rows = boost::json::parse(run.out);
  for (const auto& row : rows.as_array()) sizes.push_back(row.as_object().at("size_bytes").to_number<long long>());
  CHECK(sizes == std::vector<long long>{4, 8, 16, 24, 36, 56});
  const Run table = dir.run("collective allreduce --sweep 1B:64B --factor 1.5");
  CHECK(table.out.find("# as nccl-tests runs them: 6 size(s) rounded down to whole float elements, 3 holding none "
                       "left out\n") != std::string::npos);
}

// nccl-tests' all_gather_perf at -b 1000: count 250 floats, 250 / 8 ranks = 31, rounded down
// to a multiple of 4: 28 per rank, 28 x 8 x 4 = 896 bytes, printed as size 896, count 28. Its
// all_reduce_perf at -b 7 runs one float: size 4, count 1.
TEST_CASE("stepsim collective runs and prints the sizes and counts nccl-tests runs") {
  const Scratch dir("collective-nccl-tests-sizes");
  const auto row = [&](const std::string& args) {
    const boost::json::object o = first_collective_row(dir, args);
    return std::pair{o.at("size_bytes").to_number<long long>(), o.at("count").to_number<long long>()};
  };
  CHECK(row("allgather --gpus 8 --size 1000B") == std::pair{896LL, 28LL});
  CHECK(row("reducescatter --gpus 8 --size 1GiB") == std::pair{1073741824LL, 33554432LL});
  CHECK(row("alltoall --gpus 8 --size 1GiB") == std::pair{1073741824LL, 33554432LL});
  CHECK(row("allreduce --size 7B") == std::pair{4LL, 1LL});
  CHECK(row("allreduce --size 1GiB") == std::pair{1073741824LL, 268435456LL});
  // The table's count column is the same.
  CHECK(dir.run("collective allgather --gpus 8 --size 1GiB").out.find("    1073741824     33554432  float") !=
        std::string::npos);
  // Nothing left to run, or an empty value, is refused.
  CHECK(refusal(dir.run("collective allreduce --size 3B"),
                "<command line>: --size: 3 B holds no whole 4-byte float element: nccl-tests would run 0 bytes; "
                "expected at least 4 bytes")
            .empty());
  CHECK(refusal(dir.run("collective allgather --gpus 8 --sweep 8B:64B"),
                "<command line>: --sweep: every size of 8B:64B holds no whole 16-byte piece per rank of 8 ranks: "
                "nccl-tests would run 0 bytes; expected at least 128 bytes")
            .empty());
  CHECK(refusal(dir.run("collective allreduce --size ''"),
                "<command line>: --size: '' is not a size (expected e.g. \"80 GiB\" or \"25 MB\")")
            .empty());
  CHECK(refusal(dir.run("collective allreduce --sweep ''"),
                "<command line>: --sweep: expected MIN:MAX such as 8B:4GiB, got ''")
            .empty());
}

TEST_CASE("stepsim collective refuses a --ranks-per-node that does not divide the GPUs or exceeds a node") {
  const Scratch dir("ranks-per-node-bad");
  const Run split = dir.run("collective allreduce --gpus 16 --ranks-per-node 3");
  CHECK(split.status == 2);
  CHECK(split.err == "stepsim: error: <command line>: --ranks-per-node: 3 does not divide --gpus 16\n");
  const Run wide = dir.run("collective allreduce --gpus 16 --ranks-per-node 16");
  CHECK(wide.status == 2);
  CHECK(wide.err ==
        "stepsim: error: <command line>: --ranks-per-node: expected 1 to 8 (dgx-h100-ndr has 8 GPUs per node), got "
        "16\n");
  const Run zero = dir.run("collective allreduce --gpus 16 --ranks-per-node 0");
  CHECK(zero.status == 2);
  CHECK(zero.err ==
        "stepsim: error: <command line>: --ranks-per-node: expected 1 to the cluster's GPUs per node, got 0\n");
}

// Every other flag of `stepsim collective` is named as the flag; an unknown cluster was named
// "cluster", a scenario key this command line does not take.
TEST_CASE("stepsim collective blames an unknown cluster on --cluster") {
  const Scratch dir("collective-cluster-bad");
  const Run empty = dir.run("collective allreduce --size 1MiB --cluster ''");
  CHECK(empty.status == 2);
  CHECK(
      empty.err.starts_with("stepsim: error: <command line>: --cluster: unknown cluster preset '' (expected one of "));
  const Run typo = dir.run("collective allreduce --size 1MiB --cluster dgx-h100 --ranks-per-node 4 --gpus 8");
  CHECK(typo.status == 2);
  CHECK(
      typo.err ==
      "stepsim: error: <command line>: --cluster: unknown cluster preset 'dgx-h100' (did you mean 'dgx-h100-ndr'?)\n");
}

TEST_CASE("a block-scaled precision on a GPU without block-scaled tensor cores fails with exit status 2") {
  const Scratch dir("precision-gpu");
  const Run run = dir.run("simulate --set cluster=dgx-h100-ndr --set training.precision=nvfp4");
  CHECK(run.status == 2);
  CHECK(run.err.find(
            "--set: training.precision: nvfp4 needs a Blackwell GPU (block-scaled tensor cores); h100-sxm5-80gb is "
            "Hopper") != std::string::npos);
  CHECK(dir.run("simulate --set cluster=dgx-b200 --set training.precision=nvfp4").status == 0);
}

// A value Boost could not read into the flag's type (2147483648 for an int, "abc", "1.5") was
// refused as "the argument ('2147483648') for option '--gpus' is invalid", naming neither what
// was expected nor the flag's range. Now every numeric flag says what its range check says of
// a value out of range: the same error as for an in-range refusal, the value as given.
TEST_CASE("a numeric flag's value that is no number or beyond its type is refused as its range check refuses") {
  const Scratch dir("numeric-flags");
  const std::string log = std::string(STEPSIM_SOURCE_DIR) + "/tests/data/nccl-tests/a100-80g-8gpu-allreduce-a.txt";
  struct Case {
    std::string command, flag, refused;  // `refused`: in the flag's type, out of its range
    std::vector<std::string> values;
  };
  const std::vector<Case> cases = {
      {"sweep --vary parallel.tp=8 -o -", "--gpus", "-7", {"2147483648", "abc", "1.5", "-2147483649"}},
      {"sweep --gpus 8", "--best", "-7", {"99999999999", "x"}},
      {"plan --gpus 8 --tokens 1T --cluster dgx-h100-ndr",
       "--max-layouts",
       "1000001",
       {"9223372036854775808", "many", "2.5"}},
      {"plan --gpus 8 --tokens 1T --cluster dgx-h100-ndr", "--jobs", "4097", {"abc", "99999999999999999999"}},
      {"collective allreduce --size 1MiB", "--gpus", "1048577", {"2147483648", "abc", "1.5"}},
      {"collective allreduce --size 1MiB", "--ranks-per-node", "-7", {"2147483648", "k"}},
      {"collective allreduce --sweep 1MiB:1GiB", "--factor", "1000001", {"x", "1e999"}},
      {"calibrate import-nccl-tests " + log + " -o x.json", "--ranks", "1048577", {"2147483648", "eight"}},
      {"calibrate import-nccl-tests " + log + " -o x.json", "--nodes", "1048577", {"4294967296", "1.0"}},
      {"analyze x.json", "--rank", "-7", {"-99999999999999999999"}},
      {"analyze x.json", "--rank", "1048577", {"99999999999999999999"}},
  };
  for (const Case& c : cases) {
    const Run in_range = dir.run(c.command + " " + c.flag + " " + c.refused);
    INFO(c.command << " " << c.flag << " " << c.refused << ": " << in_range.err);
    REQUIRE(in_range.status == 2);
    const auto at = in_range.err.find(c.refused);
    REQUIRE(at != std::string::npos);
    CHECK(in_range.err.find(c.flag) != std::string::npos);
    for (const std::string& value : c.values) {
      const Run run = dir.run(c.command + " " + c.flag + " " + value);
      INFO(c.flag << " " << value);
      CHECK(run.status == 2);
      CHECK(run.err == std::string(in_range.err).replace(at, c.refused.size(), value));
    }
  }
  CHECK(dir.entries().empty());
}

// `plan --model ''` planned the default model and `plan --deadline ''` ignored the deadline, both
// with exit status 0: "" was taken for the flag left out. A flag whose value names something
// refuses "" naming the flag, as --cluster '' and --precision '' are refused.
TEST_CASE("an empty value of a flag that names something is refused, not taken for the flag left out") {
  const Scratch dir("empty-flags");
  const std::string plan = "plan --gpus 8 --cluster dgx-h100-ndr --max-layouts 1 ";
  const std::string log = std::string(STEPSIM_SOURCE_DIR) + "/tests/data/nccl-tests/a100-80g-8gpu-allreduce-a.txt";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {plan + "--tokens 1T --model ''", "<command line>: --model: expected a model preset name, got ''"},
      {plan + "--tokens 1T --deadline ''", "--deadline: expected a number of days above 0"},
      {plan + "--deadline 10 --tokens ''", "--tokens: expected a whole number of tokens"},
      {"plan --tokens 1T --cluster dgx-h100-ndr --gpus ''",
       "<command line>: --gpus: expected GPU counts from 1 to 1048576, e.g. 256, 128,256 or 64:1024:x2, got ''"},
      {"presets --kind ''", "<command line>: --kind: expected gpu, cluster, model or example, got ''"},
      {"presets ''", "<command line>: NAME: the preset name is empty"},
      {"analyze x.json --step ''", "<command line>: --step: expected a step number N or its name ProfilerStep#N"},
      {"calibrate check " + log + " --scenario ''", "<command line>: --scenario: expected a scenario file or preset"},
      {"calibrate check " + log + " --cluster ''", "<command line>: --cluster: expected a cluster preset, got ''"},
      {"calibrate import-nccl-tests " + log + " -o x.json --op ''", "<command line>: --op: expected the test's name"},
      {"calibrate import-nccl-tests " + log + " -o x.json --gpu ''", "<command line>: --gpu: expected the GPU's name"},
      {"calibrate import-nccl-tests " + log + " -o x.json --algorithm ''", "<command line>: --algorithm: expected"},
      {"calibrate import-nccl-tests " + log + " -o x.json --protocol ''", "<command line>: --protocol: expected"},
  };
  for (const auto& [command, message] : cases) {
    INFO(command);
    CHECK(stepsim::testing::refusal(dir.run(command), message) == "");
  }
  CHECK(dir.entries().empty());
}

// The --help of simulate says what --compare-cluster takes.
TEST_CASE("simulate --help says --compare-cluster takes a comma-separated list, as the program does") {
  const Scratch dir("compare-cluster-list");
  const Run help = dir.run("simulate --help");
  CHECK(help.out.find("comma-separated list") != std::string::npos);
  // The list and the flag given twice are the same question.
  const Run listed = dir.run("simulate ddp-1.3b-64xa100 --compare-cluster dgx-h200-ndr,dgx-b200");
  const Run repeated = dir.run("simulate ddp-1.3b-64xa100 --compare-cluster dgx-h200-ndr --compare-cluster dgx-b200");
  CHECK(listed.status == 0);
  CHECK(listed.out == repeated.out);
}

// README's command table names each flag collective and presets list in their --help (but the
// positional NAME's own flag and the long form of -v), and every calibrate step.
TEST_CASE("the README names every flag of collective and presets and every calibrate step") {
  const Scratch dir("readme-flags");
  const std::string readme = stepsim::testing::slurp(fs::path(STEPSIM_SOURCE_DIR) / "README.md");
  for (const char* command : {"collective", "presets"}) {
    const Run help = dir.run(std::string(command) + " --help");
    REQUIRE(help.status == 0);
    std::istringstream lines(help.out);
    std::vector<std::string> flags;
    for (std::string line; std::getline(lines, line);) {
      // Options are listed as "  --flag ..." or "  -x [ --flag ] ...".
      const std::size_t at = line.find("--");
      if (line.rfind("  -", 0) != 0 || at == std::string::npos || at > 8) continue;
      const std::size_t end = line.find_first_of(" =]", at);
      flags.push_back(line.substr(at, end - at));
    }
    CHECK(flags.size() >= 4);
    for (const std::string& flag : flags) {
      if (flag == "--help" || flag == "--name" || flag == "--verbose") continue;
      INFO(command << " " << flag);
      CHECK(readme.find(flag) != std::string::npos);
    }
  }
  const Run calibrate = dir.run("calibrate --help");
  const std::size_t row = readme.find("| `stepsim calibrate ");
  REQUIRE(row != std::string::npos);
  const std::string table_row = readme.substr(row, readme.find('\n', row) - row);
  for (const char* step : {"import-nccl-tests", "check", "from-trace", "plan"}) {
    INFO(step);
    CHECK(calibrate.out.find("stepsim calibrate " + std::string(step)) != std::string::npos);
    CHECK(table_row.find(std::string(step) + " ") != std::string::npos);
  }
}

// Boost's guessing took a prefix of one option for it: `collective --ranks 64` set
// --ranks-per-node and `simulate --sc FILE` --scenario. A flag is now spelt whole, or refused.
TEST_CASE("an option's prefix is not taken for the option") {
  const Scratch dir("option-prefix");
  const Run ranks = dir.run("collective allreduce --ranks 64 --cluster dgx-h100-ndr");
  CHECK(ranks.status == 2);
  CHECK(ranks.out.empty());
  CHECK(ranks.err.find("unrecognised option '--ranks'") != std::string::npos);
  const Run scenario = dir.run("simulate --sc korthikanti-22b");
  CHECK(scenario.status == 2);
  CHECK(scenario.err.find("unrecognised option '--sc'") != std::string::npos);
  CHECK(dir.run("simulate --scenario korthikanti-22b").status == 0);
}

// The JSON rows say where the communicator's ranks sit, as the table's header does: 8 GPUs fill
// one node of a DGX (8 per node), or with --ranks-per-node 1 span 8 nodes; 4 GPUs sit on one
// node. Without it a DP group across nodes and a TP group inside one gave rows of the same keys.
TEST_CASE("stepsim collective's JSON rows say how many nodes the ranks span") {
  const Scratch dir("collective-json-shape");
  const auto shape = [&](const std::string& args) {
    const boost::json::object o = first_collective_row(dir, "allreduce " + args);
    return std::pair{o.at("nodes").to_number<long long>(), o.at("ranks_per_node").to_number<long long>()};
  };
  CHECK(shape("--gpus 8") == std::pair{1LL, 8LL});
  CHECK(shape("--gpus 8 --ranks-per-node 1") == std::pair{8LL, 1LL});
  CHECK(shape("--gpus 4") == std::pair{1LL, 4LL});
  CHECK(shape("--gpus 64 --ranks-per-node 4") == std::pair{16LL, 4LL});
}

// NCCL's tuning model covers the collectives it tunes (tuning.cc); its AllToAll and SendRecv
// are grouped point-to-point sends it has no model for, so -v does not call their estimate
// NCCL's.
TEST_CASE("stepsim collective -v names NCCL's model only where NCCL has one") {
  const Scratch dir("collective-verbose-model");
  for (const char* op : {"alltoall", "sendrecv"}) {
    const Run r = dir.run(std::string("collective ") + op + " --size 64MiB -v");
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("(stepsim's point-to-point estimate, which NCCL does not model, ") != std::string::npos);
    CHECK(r.out.find("NCCL's model") == std::string::npos);
  }
  const Run all_reduce = dir.run("collective allreduce --size 64MiB -v");
  REQUIRE(all_reduce.status == 0);
  CHECK(all_reduce.out.find("candidate ring/simple (NCCL's model ") != std::string::npos);
}
