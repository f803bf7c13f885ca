// Boost.Program_options wrappers shared by every subcommand.
#include "cli/options.hpp"

#include <fmt/format.h>

#include <iostream>

#include "stepsim/error.hpp"

namespace stepsim::cli {

void add_output_options(po::options_description& desc, OutputOptions& out) {
  desc.add_options()
      ("json", po::value(&out.json)->value_name("FILE"), "write the JSON report to FILE ('-' for stdout)")
      ("trace", po::value(&out.trace)->value_name("FILE"), "write a Chrome/Perfetto trace to FILE");
}

po::variables_map parse_args(const std::string& command, const Args& args,
                             const po::options_description& desc,
                             const po::positional_options_description& positional) {
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw InputError("<command line>", fmt::format("stepsim {}", command),
                     fmt::format("{} (see 'stepsim {} --help')", e.what(), command));
  }
  return vm;
}

void print_help(const std::string& usage, const po::options_description& desc,
                const std::string& examples) {
  std::cout << usage << "\n\n" << desc << "\n";
  if (!examples.empty()) std::cout << "Examples:\n" << examples << "\n";
}

}  // namespace stepsim::cli
