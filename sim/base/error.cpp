// Formatting of the two failure kinds declared in stepsim/error.hpp.
#include "stepsim/error.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "stepsim/scenario.hpp"
#include "stepsim/text.hpp"

namespace stepsim {
namespace {

std::string describe(const std::string& file, const std::string& where, const std::string& message) {
  if (file.empty() && where.empty()) return message;
  if (where.empty()) return fmt::format("{}: {}", file, message);
  if (file.empty()) return fmt::format("{}: {}", where, message);
  return fmt::format("{}: {}: {}", file, where, message);
}

// Whether the value at JSON pointer `where` lies at or below `pointer`.
bool within(const std::string& where, const std::string& pointer) {
  return where.starts_with(pointer) && (where.size() == pointer.size() || where[pointer.size()] == '/');
}

// "/a/b/0/c" as --set writes the key: "a.b[0].c" (scenario keys are never all digits, list
// indices always are).
std::string dotted(const std::string& pointer) {
  std::string out;
  std::size_t at = 1;
  while (at <= pointer.size()) {
    const std::size_t end = std::min(pointer.find('/', at), pointer.size());
    const std::string part = pointer.substr(at, end - at);
    const bool index =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (index)
      out += "[" + part + "]";
    else
      out += (out.empty() ? "" : ".") + part;
    at = end + 1;
  }
  return out;
}

}  // namespace

InputError scenario_error(const Scenario& s, const std::string& where, std::string message) {
  const bool assigned = !where.empty() && std::any_of(s.set_pointers.begin(), s.set_pointers.end(),
                                                      [&](const std::string& p) { return within(where, p); });
  if (assigned) return InputError("--set", dotted(where), std::move(message));
  return InputError(s.source, where, std::move(message));
}

InputError::InputError(std::string file, std::string where, std::string message)
    : std::runtime_error(describe(printable(file), printable(where), printable(message))),
      file_(printable(file)),
      where_(printable(where)),
      message_(printable(message)) {}

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("internal error at {}:{}: check '{}' failed: {}", file, line, expr, msg));
}

}  // namespace stepsim
