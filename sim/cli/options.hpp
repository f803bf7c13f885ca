// Shared command-line plumbing of the subcommands: Boost.Program_options parsing that turns
// bad flags into InputError, the common output options, and help formatting.
#pragma once

#include <boost/program_options.hpp>
#include <charconv>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stepsim/text.hpp"

#include "cli/commands.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"

namespace stepsim::cli {

namespace po = boost::program_options;

// Output options shared by simulate, analyze and compare; absent when not given (an empty
// name is given, and refused).
struct OutputOptions {
  std::optional<std::string> json;   // --json FILE or "-"
  std::optional<std::string> trace;  // --trace FILE or "-"
};

void add_output_options(po::options_description& desc, OutputOptions& out);

// Which rank and profiler step of a trace to measure (analyze, compare).
struct TraceSelection {
  std::vector<std::string> step;  // at most one (given_once); empty: every step
  std::optional<int> rank;        // the global rank (see add_trace_options); none: the lowest
  std::optional<std::string> step_name() const;
};

void add_trace_options(po::options_description& desc, TraceSelection& selection);

// The notifier of a single-valued option read into a list (GCC 12 warns inside Boost's
// typed_value<std::string>::notify when several string options are inlined in one function):
// refuses it when repeated, as parse_args refuses any other single-valued option, with Boost's
// words ("option '--step' cannot be specified more than once").
std::function<void(const std::vector<std::string>&)> given_once(const std::string& flag);

// What a numeric flag says of a value it refuses (the text as given): the one error of the
// flag's range check, for a value outside the range and one that is no number or that the
// flag's type cannot hold alike ("--gpus: 2147483648: expected a GPU count of 1 to ...").
using Refusal = std::function<InputError(const std::string& text)>;

// number_of (stepsim/text.hpp): a number as the whole of a flag's text.

template <typename T>
struct NumberOf {
  using type = T;
};
template <typename T>
struct NumberOf<std::optional<T>> {
  using type = T;
};

// A numeric flag given once, read into `target` (a T, or a std::optional<T> left empty when the
// flag is not given; a whole number for an integral T): a value that is no such number, or that
// T cannot hold, is refused by `refuse`, as its range check refuses one out of range (Boost
// would say only "the argument ('X') for option '--F' is invalid"). Read as text, so that the
// flag keeps its own words. With `lo` and `hi`, a value outside them is refused alike.
template <typename Target, typename T = typename NumberOf<Target>::type>
po::typed_value<std::vector<std::string>>* number_value(Target& target, const std::string& flag, Refusal refuse,
                                                        T lo = std::numeric_limits<T>::lowest(),
                                                        T hi = std::numeric_limits<T>::max()) {
  return po::value<std::vector<std::string>>()->notifier(
      [&target, flag, refuse = std::move(refuse), lo, hi](const std::vector<std::string>& values) {
        given_once(flag)(values);
        const auto value = number_of<T>(values.front());
        if (!value || *value < lo || *value > hi) throw refuse(values.front());
        target = *value;
      });
}

using Writer = std::function<void(std::ostream&)>;

// Refuses outputs that cannot be written (the same file twice, a folder, ...) before any
// work is done.
void check_outputs(const OutputOptions& out);

// Writes what `out` asks for: the table on stdout (unless the JSON goes there), then the
// JSON report and the trace, all or none (report::write_outputs).
void emit(const OutputOptions& out, const Writer& table, const Writer& json, const Writer& trace);

// Writes `output`, then prints `log` (what the command says about what it wrote) on stdout; on
// stderr, before the output, when the output is stdout itself. A failing output leaves stdout
// empty.
void write_with_log(const report::Output& output, const std::string& log);

// Parses `args` for `command`; unknown options, missing values and bad numbers become
// InputError("<command line>", "stepsim COMMAND", message). Returns the variables map.
po::variables_map parse_args(const std::string& command, const Args& args, const po::options_description& desc,
                             const po::positional_options_description& positional);

// Each flag of `flags` (long names, as --help lists them) given "" where its value must name
// something: InputError naming the flag and what it expects ("expected a preset name, got ''"),
// rather than "" read as the flag left out. A text or a list of texts.
void refuse_empty(const po::variables_map& vm, std::initializer_list<std::pair<const char*, const char*>> flags);

// A scenario argument that was given must name something: "" is an error, not the default.
void require_scenario_name(const std::string& given);

// Trace arguments must name files or folders: "" is named as the argument TRACE, not looked
// for as a file.
void require_trace_names(const std::vector<std::string>& paths);

// Standard input can be read once: InputError naming `command` when '-' is among `inputs`
// (the command's file arguments) more than once.
void require_stdin_once(const std::string& command, const std::vector<std::string>& inputs);

// With --help in `vm`, prints "usage", the options and the examples, and returns true.
bool help_requested(const po::variables_map& vm, const std::string& usage, const po::options_description& desc,
                    const std::string& examples);

}  // namespace stepsim::cli
