// Shared command-line plumbing of the subcommands: Boost.Program_options parsing that turns
// bad flags into InputError, the common output options, and help formatting.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "cli/commands.hpp"

namespace stepsim::cli {

namespace po = boost::program_options;

// Output options shared by simulate, analyze and compare.
struct OutputOptions {
  std::string json;   // --json FILE or "-"
  std::string trace;  // --trace FILE
};

void add_output_options(po::options_description& desc, OutputOptions& out);

// Parses `args` for `command`; unknown options, missing values and bad numbers become
// InputError("<command line>", "stepsim COMMAND", message). Returns the variables map.
po::variables_map parse_args(const std::string& command, const Args& args,
                             const po::options_description& desc,
                             const po::positional_options_description& positional);

// Prints "usage" then the options then the examples block.
void print_help(const std::string& usage, const po::options_description& desc,
                const std::string& examples);

}  // namespace stepsim::cli
