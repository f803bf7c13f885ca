// `stepsim sweep` at a terminal: the progress line on stderr, run in a pseudo-terminal as a
// user sees it, with rows to a file or to the same terminal.
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli/run_stepsim.hpp"

using stepsim::testing::Scratch;
using stepsim::testing::slurp;

namespace {

// What `stepsim ARGS...` writes to a terminal that is both its stdout and its stderr, run in
// `dir`; and its exit status.
struct TerminalRun {
  int status = -1;
  std::string text;
};

TerminalRun on_terminal(const Scratch& dir, const std::vector<std::string>& args) {
  std::vector<char*> argv{const_cast<char*>(STEPSIM_BINARY)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid == 0) {
    if (::chdir(dir.work().c_str()) != 0) ::_exit(126);
    ::execv(STEPSIM_BINARY, argv.data());
    ::_exit(127);
  }
  TerminalRun run;
  if (pid < 0) return run;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n <= 0) break;  // EIO once the program has closed the terminal
    run.text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(master);
  int raw = 0;
  ::waitpid(pid, &raw, 0);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

}  // namespace

// Resuming a finished sweep simulates nothing: the rows found count as points done, not as
// points simulated at some rate (which made the rate that of reading the file, the ETA 0 s).
TEST_CASE("the progress line's rate counts only the points a resumed sweep simulates") {
  const Scratch dir("sweep-terminal-rate");
  const std::vector<std::string> sweep = {"sweep", "--vary", "data_parallel.bucket_cap_mb=1:40:+1", "-o", "r.csv"};
  REQUIRE(on_terminal(dir, sweep).status == 0);
  std::vector<std::string> resume = sweep;
  resume.emplace_back("--resume");
  const TerminalRun run = on_terminal(dir, resume);
  INFO(run.text);
  CHECK(run.status == 0);
  CHECK(run.text.find("sweep: 40/40 points (100 %), 0.0 points/s, ETA 0 s") != std::string::npos);
  CHECK(run.text.find("40 already written") != std::string::npos);
}

// The rows on stdout and the progress line on stderr share the terminal: the line is erased
// before each row, so that no row is printed after the progress text on its line.
TEST_CASE("rows printed at the terminal never follow the progress text on its line") {
  const Scratch dir("sweep-terminal-rows");
  const TerminalRun run = on_terminal(dir, {"sweep", "--vary", "data_parallel.bucket_cap_mb=1:6:+1", "--jobs", "1"});
  INFO(run.text);
  CHECK(run.status == 0);
  CHECK(run.text.find("sweep: 1/6 points") != std::string::npos);  // drawn after the first row
  CHECK_FALSE(std::regex_search(run.text, std::regex("ETA [^\r\n]*  [0-9]+,[0-9a-f]{16},")));
  for (int point = 0; point < 6; ++point)
    CHECK(std::regex_search(run.text, std::regex("(^|\n|\r)" + std::to_string(point) + ",[0-9a-f]{16},")));
}
