// write_output(): a file appears whole or not at all (temporary file, then rename).
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "report/report_io.hpp"
#include "stepsim/error.hpp"

namespace stepsim::report {
namespace {

void write_file(const std::string& path, const std::string& tmp, const std::function<void(std::ostream&)>& writer) {
  errno = 0;
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(path, "", fmt::format("cannot open for writing: {}", std::strerror(errno ? errno : EIO)));
  writer(out);
  out.flush();
  if (!out) throw InputError(path, "", fmt::format("cannot write: {}", std::strerror(errno ? errno : EIO)));
  out.close();
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw InputError(path, "", fmt::format("cannot replace the file: {}", ec.message()));
}

}  // namespace

void write_output(const std::string& path, const std::function<void(std::ostream&)>& writer) {
  if (path == "-") {
    writer(std::cout);
    std::cout.flush();
    return;
  }
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  try {
    write_file(path, tmp, writer);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
}

}  // namespace stepsim::report
