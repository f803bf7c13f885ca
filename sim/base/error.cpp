// Formatting of the two failure kinds declared in stepsim/error.hpp.
#include "stepsim/error.hpp"

#include <fmt/format.h>

namespace stepsim {
namespace {

std::string describe(const std::string& file, const std::string& where, const std::string& message) {
  if (file.empty() && where.empty()) return message;
  if (where.empty()) return fmt::format("{}: {}", file, message);
  if (file.empty()) return fmt::format("{}: {}", where, message);
  return fmt::format("{}: {}: {}", file, where, message);
}

}  // namespace

InputError::InputError(std::string file, std::string where, std::string message)
    : std::runtime_error(describe(file, where, message)),
      file_(std::move(file)),
      where_(std::move(where)),
      message_(std::move(message)) {}

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("internal error at {}:{}: check '{}' failed: {}", file, line, expr, msg));
}

}  // namespace stepsim
