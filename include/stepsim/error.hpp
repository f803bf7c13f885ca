// The two kinds of failure: bad input (InputError, exit status 2) and bugs (STEPSIM_CHECK,
// an always-on assertion that reports file and line, exit status 1).
#pragma once

#include <stdexcept>
#include <string>

namespace stepsim {

// Bad user input: a file (or "--set", "<command line>"), a location in it (a JSON pointer
// such as "/cluster/inter_node/nic_bandwidth", or "line 3, column 7") and what was expected.
// Messages follow LLVM style: lower-case first word, no final period.
class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::string where, std::string message);
  const std::string& file() const { return file_; }
  const std::string& where() const { return where_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  std::string where_;
  std::string message_;
};

struct Scenario;

// The InputError for a bad value of scenario `s` at JSON pointer `where`: named by the --set
// assignment that gave the value where one did (file "--set", the key as the command line
// writes it: "simulation.variation.gpu_speed[0].rank"), else by the scenario's file and the
// pointer.
InputError scenario_error(const Scenario& s, const std::string& where, std::string message);

// A violated internal invariant: a bug in stepsim, never the user's fault.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void check_failed(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace stepsim

#define STEPSIM_CHECK(cond, msg)                                            \
  do {                                                                      \
    if (!(cond)) ::stepsim::check_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (false)
