// A scenario given as "-" (standard input) or as a pipe (/dev/stdin, a shell's <(...)) can be
// read once only, while a command loads its scenario again and again: the advice for each
// change it simulates, --compare-cluster for each cluster, a sweep for each point, a plan for
// each cluster and layout. The command reads it once, and every load sees that text.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "run_stepsim.hpp"

using stepsim::testing::Run;
using stepsim::testing::Scratch;

namespace {

const std::string kScenario = R"({
  "model": "llama3-8b",
  "cluster": "dgx-h100-ndr",
  "parallel": {"tp": 8, "dp": 8},
  "training": {"global_batch": 512}
})";

// The command's exit status and stderr, for the checks to print.
std::string shown(const Run& r) { return "status " + std::to_string(r.status) + "\nstderr: " + r.err; }

// A plan's CSV rows without their column search_s: the seconds the search took.
std::string without_search_time(const std::string& csv) {
  // The column named search_s, found in the header; the rows here hold no quoted commas.
  const auto cells = [](const std::string& line) {
    std::vector<std::string> out;
    std::size_t from = 0;
    for (std::size_t comma; (comma = line.find(',', from)) != std::string::npos; from = comma + 1)
      out.push_back(line.substr(from, comma - from));
    out.push_back(line.substr(from));
    return out;
  };
  std::string out;
  std::size_t column = std::string::npos;
  std::size_t start = 0;
  while (start < csv.size()) {
    std::size_t end = csv.find('\n', start);
    if (end == std::string::npos) end = csv.size();
    std::vector<std::string> row = cells(csv.substr(start, end - start));
    if (column == std::string::npos)
      column = static_cast<std::size_t>(std::find(row.begin(), row.end(), "search_s") - row.begin());
    if (column < row.size()) row.erase(row.begin() + static_cast<std::ptrdiff_t>(column));
    for (std::size_t i = 0; i < row.size(); ++i) out += (i == 0 ? "" : ",") + row[i];
    out += "\n";
    start = end + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("a scenario on standard input or through a pipe gives what the same file gives, in every command", "[slow]") {
  const Scratch dir("stdin-scenario");
  dir.write("s.json", kScenario);
  const std::string bin = STEPSIM_BINARY;

  // simulate, with the advice's simulated changes and another cluster's column: the same table.
  const std::string flags = " --advise --compare-cluster dgx-b200";
  const Run file = dir.run("simulate s.json" + flags);
  const Run in = dir.run("simulate -" + flags + " < s.json");
  const Run piped = dir.shell("cat s.json | " + bin + " simulate /dev/stdin" + flags);
  INFO(shown(file) << "\n" << shown(in) << "\n" << shown(piped));
  REQUIRE(file.status == 0);
  CHECK(file.out.find("change (simulated)") != std::string::npos);
  CHECK(file.out.find("dgx-b200") != std::string::npos);
  CHECK(in.status == 0);
  CHECK(in.out == file.out);
  CHECK(piped.status == 0);
  CHECK(piped.out == file.out);

  // sweep: every point from the one text, the same rows (the sweep's id included).
  const std::string vary = " --vary parallel.tp=2,4,8 -o ";
  REQUIRE(dir.run("sweep s.json" + vary + "file.csv").status == 0);
  const Run swept = dir.shell("cat s.json | " + bin + " sweep -" + vary + "piped.csv");
  INFO(shown(swept));
  CHECK(swept.status == 0);
  CHECK(swept.err.find("3 points: 2 ok, 0 invalid, 1 oom, 0 error") != std::string::npos);
  CHECK(stepsim::testing::slurp(dir.file("piped.csv")) == stepsim::testing::slurp(dir.file("file.csv")));

  // plan: each cluster's search from the one text.
  // (Few layouts per cluster: the search's size is not what this checks.)
  const std::string plan =
      " --tokens 1e9 --gpus 64 --cluster dgx-h100-ndr@2 --cluster dgx-b200@5 --max-layouts 4 -o ";
  REQUIRE(dir.run("plan s.json" + plan + "file-plan.csv").status == 0);
  const Run planned = dir.run("plan -" + plan + "stdin-plan.csv < s.json");
  INFO(shown(planned));
  CHECK(planned.status == 0);
  const std::string rows = without_search_time(stepsim::testing::slurp(dir.file("file-plan.csv")));
  CHECK(rows.find("dgx-b200,b200,64,5,ok") != std::string::npos);
  CHECK(without_search_time(stepsim::testing::slurp(dir.file("stdin-plan.csv"))) == rows);
}

TEST_CASE("a scenario on standard input that is empty or not JSON is refused naming <stdin>") {
  const Scratch dir("stdin-errors");
  const Run empty = dir.run("simulate - < /dev/null");
  CHECK(stepsim::testing::refusal(empty, "stepsim: error: <stdin>: is empty: expected a JSON document").empty());
  const Run broken = dir.shell("printf '{\\n' | " + std::string(STEPSIM_BINARY) + " sweep - --vary parallel.tp=2,4");
  CHECK(stepsim::testing::refusal(broken, "<stdin>: line 2, column 1: invalid JSON").empty());
}

TEST_CASE("standard input given for two inputs is refused before either is read") {
  const Scratch dir("stdin-twice");
  const std::string bin = STEPSIM_BINARY;
  REQUIRE(dir.run("simulate ddp-1.3b-64xa100 --trace-format kineto --trace sim.json").status == 0);
  const std::string twice = "'-' (standard input) is given twice, but it can be read only once";
  for (const std::string command : {"compare - -", "analyze - -", "calibrate from-trace - - -o fit.json"}) {
    INFO(command);
    const Run r = dir.shell("cat sim.json | " + bin + " " + command);
    const std::string name = command.substr(0, command.find(" -"));
    CHECK(stepsim::testing::refusal(r, "<command line>: stepsim " + name + ": " + twice).empty());
    CHECK(r.out.empty());
  }
  // Once is fine.
  CHECK(dir.shell("cat sim.json | " + bin + " compare - ddp-1.3b-64xa100").status == 0);
}
