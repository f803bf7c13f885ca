// Boost.Program_options wrappers shared by every subcommand.
#include "cli/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "report/output_target.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::cli {

void add_output_options(po::options_description& desc, OutputOptions& out) {
  desc.add_options()(
      "json", po::value<std::string>()->value_name("FILE")->notifier([&out](const std::string& s) { out.json = s; }),
      "write the JSON report to FILE ('-' for stdout)")(
      "trace", po::value<std::string>()->value_name("FILE")->notifier([&out](const std::string& s) { out.trace = s; }),
      "write a Chrome/Perfetto trace to FILE ('-' for stdout)");
}

namespace {

// An option given both as a positional argument and by its flag ("simulate s.json --scenario
// s.json"): Boost says it "cannot be specified more than once", though the flag was given once.
void refuse_positional_and_flag(const std::string& command, const po::parsed_options& parsed,
                                const po::options_description& desc, const po::multiple_occurrences& e) {
  const std::string flag = e.get_option_name();
  bool positional = false, named = false;
  for (const po::option& o : parsed.options) {
    if ("--" + o.string_key != flag) continue;
    (o.position_key >= 0 ? positional : named) = true;
  }
  if (!positional || !named) return;
  const std::string key = flag.substr(2);
  const po::option_description* d = desc.find_nothrow(key, false);
  const std::string argument = d != nullptr ? d->semantic()->name() : key;
  throw InputError(
      "<command line>", fmt::format("stepsim {}", command),
      fmt::format("the {} is given twice, as the argument {} and with {}: give it once", key, argument, flag));
}

}  // namespace

po::variables_map parse_args(const std::string& command, const Args& args, const po::options_description& desc,
                             const po::positional_options_description& positional) {
  po::variables_map vm;
  po::parsed_options parsed(&desc);
  try {
    // No guessing: Boost would take a prefix of one option for it (--ranks for --ranks-per-node,
    // --sc for --scenario), so a misspelt or misremembered flag silently set another.
    parsed = po::command_line_parser(args)
                 .options(desc)
                 .positional(positional)
                 .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
                 .run();
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::multiple_occurrences& e) {
    refuse_positional_and_flag(command, parsed, desc, e);
    throw InputError("<command line>", fmt::format("stepsim {}", command),
                     fmt::format("{} (see 'stepsim {} --help')", e.what(), command));
  } catch (const po::error& e) {
    throw InputError("<command line>", fmt::format("stepsim {}", command),
                     fmt::format("{} (see 'stepsim {} --help')", e.what(), command));
  }
  return vm;
}

std::function<void(const std::vector<std::string>&)> given_once(const std::string& flag) {
  return [flag](const std::vector<std::string>& values) {
    // Boost's own words for a repeated single value; parse_args names the command.
    if (values.size() > 1) throw po::error(fmt::format("option '{}' cannot be specified more than once", flag));
  };
}

namespace {

// A rank from 0 to kMaxGpus - 1, in the words of what it is not.
InputError rank_refusal(const std::string& text) {
  const auto rank = number_of<long long>(text);
  const bool digits = text.size() > 1 && text.find_first_not_of("0123456789", 1) == std::string::npos;
  if ((rank && *rank < 0) || (digits && text.front() == '-'))
    return InputError("<command line>", "--rank", fmt::format("expected a rank of 0 or more, got {}", text));
  if (rank || (digits && text.front() != '-'))
    return InputError("<command line>", "--rank", fmt::format("expected a rank below {}, got {}", kMaxGpus, text));
  return InputError("<command line>", "--rank",
                    fmt::format("expected a rank from 0 to {} (a whole number), got {}", kMaxGpus - 1, text));
}

}  // namespace

void add_trace_options(po::options_description& desc, TraceSelection& selection) {
  // The step as a list: GCC 12 warns (-Wnull-dereference) inside Boost's
  // typed_value<std::string>::notify when several string options are inlined in one function.
  desc.add_options()(
      "step", po::value(&selection.step)->value_name("N")->notifier([](const std::vector<std::string>& steps) {
        given_once("--step")(steps);
        if (steps.front().empty())
          throw InputError("<command line>", "--step", "expected a step number N or its name ProfilerStep#N, got ''");
      }),
      "measure only ProfilerStep#N (N or the full name)")(
      "rank", number_value(selection.rank, "--rank", rank_refusal, 0, kMaxGpus - 1)->value_name("R"),
      "which rank of a folder or file to measure: the global rank its distributedInfo gives (a file without "
      "one: its place among the folder's files, from 0; a stepsim trace: its process); default: the lowest");
}

std::optional<std::string> TraceSelection::step_name() const {
  if (step.empty()) return std::nullopt;
  return step.front();
}

namespace {

std::vector<report::Output> outputs_of(const OutputOptions& out, const Writer& json, const Writer& trace) {
  std::vector<report::Output> outputs;
  if (out.json) outputs.push_back({"--json", *out.json, json});
  if (out.trace) outputs.push_back({"--trace", *out.trace, trace});
  return outputs;
}

}  // namespace

void check_outputs(const OutputOptions& out) { report::check_outputs(outputs_of(out, {}, {})); }

void emit(const OutputOptions& out, const Writer& table, const Writer& json, const Writer& trace) {
  // The table only once every other output is written (a failing one leaves stdout empty), and
  // not at all when an output is stdout itself ('-', /dev/stdout).
  report::write_outputs(outputs_of(out, json, trace), table);
}

void write_with_log(const report::Output& output, const std::string& log) {
  if (report::is_stdout(output.path)) {
    std::cerr << log;
    report::write_outputs({output});
    return;
  }
  report::write_outputs({output}, [&](std::ostream& out) { out << log; });
}

void refuse_empty(const po::variables_map& vm, std::initializer_list<std::pair<const char*, const char*>> flags) {
  for (const auto& [name, expected] : flags) {
    if (vm.count(name) == 0) continue;
    const boost::any& value = vm[name].value();
    bool empty = false;
    if (const auto* text = boost::any_cast<std::string>(&value)) empty = text->empty();
    if (const auto* texts = boost::any_cast<std::vector<std::string>>(&value))
      empty = std::find(texts->begin(), texts->end(), "") != texts->end();
    if (empty)
      throw InputError("<command line>", fmt::format("--{}", name), fmt::format("expected {}, got ''", expected));
  }
}

void require_scenario_name(const std::string& given) {
  if (given.empty())
    throw InputError("<command line>", "SCENARIO",
                     "the scenario file name is empty (omit it to simulate the embedded default)");
}

void require_trace_names(const std::vector<std::string>& paths) {
  if (std::find(paths.begin(), paths.end(), "") != paths.end())
    throw InputError("<command line>", "TRACE", "the trace file or folder name is empty");
}

void require_stdin_once(const std::string& command, const std::vector<std::string>& inputs) {
  if (std::count(inputs.begin(), inputs.end(), "-") < 2) return;
  throw InputError("<command line>", "stepsim " + command,
                   "'-' (standard input) is given twice, but it can be read only once: give all but one of "
                   "them as files");
}

bool help_requested(const po::variables_map& vm, const std::string& usage, const po::options_description& desc,
                    const std::string& examples) {
  if (vm.count("help") == 0) return false;
  std::cout << usage << "\n\n" << desc << "\n";
  if (!examples.empty()) std::cout << "Examples:\n" << examples << "\n";
  return true;
}

}  // namespace stepsim::cli
