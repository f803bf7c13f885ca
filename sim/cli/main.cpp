// The `stepsim` program: picks the subcommand and turns failures into exit statuses
// (0 success, 2 bad input, 1 internal error).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "engine/huge_pages.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"

namespace {

using Command = int (*)(const stepsim::cli::Args&);

struct CommandRow {
  const char* name;
  Command run;
  const char* summary;
};

// The subcommands, one row each (the README's command table).
constexpr CommandRow kCommands[] = {
    {"simulate", stepsim::cli::run_simulate, "simulate one training step and report exposed communication"},
    {"collective", stepsim::cli::run_collective, "predict one collective's time, algbw and busbw (nccl-tests style)"},
    {"analyze", stepsim::cli::run_analyze, "measure exposed communication in a PyTorch profiler trace"},
    {"compare", stepsim::cli::run_compare, "put a measured trace and a simulated scenario side by side"},
    {"sweep", stepsim::cli::run_sweep, "simulate many variations of a scenario; find the fastest that fits"},
    {"plan", stepsim::cli::run_plan, "find each cluster's fastest layout and what a token budget costs on it"},
    {"calibrate", stepsim::cli::run_calibrate, "make calibration files from nccl-tests logs or traces; check them"},
    {"presets", stepsim::cli::run_presets, "list the embedded GPUs, clusters, models and examples"},
};

void print_usage() {
  std::cout << "usage: stepsim [-v|-q] COMMAND [ARGS...]\n\n"
               "stepsim predicts the step time of large-model training on GPU clusters and how\n"
               "much of the step's communication is exposed rather than hidden behind compute.\n\n"
               "Commands:\n";
  for (const auto& row : kCommands)
    std::cout << "  " << row.name << std::string(12 - std::strlen(row.name), ' ') << row.summary << "\n";
  std::cout << "\nGlobal options:\n"
               "  -v, --verbose   more log output on stderr\n"
               "  -q, --quiet     only errors on stderr\n"
               "  --version       print the version\n"
               "  -h, --help      this help; 'stepsim COMMAND --help' for a command's options\n\n"
               "Run 'stepsim simulate' with no arguments to see the report of the embedded default\n"
               "scenario (Llama-3-8B on 64 H100: TP 8 inside each node, DDP across 8 nodes).\n";
}

int dispatch(std::vector<std::string> args) {
  auto logger = spdlog::stderr_color_mt("stepsim");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("stepsim: %l: %v");
  spdlog::set_level(spdlog::level::warn);
  while (!args.empty() &&
         (args.front() == "-v" || args.front() == "--verbose" || args.front() == "-q" || args.front() == "--quiet")) {
    spdlog::set_level(args.front()[1] == 'q' || args.front() == "--quiet" ? spdlog::level::err : spdlog::level::debug);
    args.erase(args.begin());
  }
  if (args.empty() || args.front() == "-h" || args.front() == "--help" || args.front() == "help") {
    print_usage();
    return args.empty() ? 2 : 0;
  }
  if (args.front() == "--version") {
    std::cout << "stepsim " << stepsim::stepsim_version() << "\n";
    return 0;
  }
  for (const auto& row : kCommands) {
    if (args.front() == row.name) return row.run(stepsim::cli::Args(args.begin() + 1, args.end()));
  }
  throw stepsim::InputError("<command line>", "", "unknown command '" + args.front() + "' (see 'stepsim --help')");
}

}  // namespace

int main(int argc, char** argv) {
  stepsim::engine::keep_freed_memory();  // sweeps and advice simulate many times
  stepsim::report::hold_standard_descriptors();
  stepsim::report::check_stdout_writes();
  try {
    const int status = dispatch(std::vector<std::string>(argv + 1, argv + argc));
    // Whatever a command printed must have reached stdout: `stepsim sweep ... > /dev/full` is
    // an error, not a silent success.
    stepsim::report::flush_stdout("the output");
    return status;
  } catch (const stepsim::InputError& e) {
    std::cerr << "stepsim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    // Simulations say which scenario was too large (simulate()); this is what is left: an
    // input (a trace, a sweep's files) too large for the memory this process may use.
    std::cerr << "stepsim: error: out of memory: the input is too large for the memory this process may use\n";
    return 2;
  } catch (const stepsim::InternalError& e) {
    std::cerr << "stepsim: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "stepsim: internal error: " << e.what() << "\n";
    return 1;
  }
}
