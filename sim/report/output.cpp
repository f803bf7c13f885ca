// write_outputs(): every output appears whole or not at all, and only regular files are
// replaced (see output_target.hpp for what is written through instead).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "report/fd_stream.hpp"
#include "report/output_target.hpp"
#include "report/report_io.hpp"
#include "report/staged_file.hpp"
#include "stepsim/error.hpp"
#include "stepsim/input_files.hpp"

namespace stepsim::report {
namespace {

// The null device, which discards what each output writes to it: any number of outputs may go
// there (--json /dev/null --trace /dev/null), as a shell's redirections may.
bool discards(const OutputTarget& t) {
  static const std::string null_device = resolve_output("", "/dev/null").identity;
  return t.kind == TargetKind::through && t.identity == null_device;
}

std::vector<OutputTarget> resolve_all(const std::vector<Output>& outputs) {
  std::vector<OutputTarget> targets;
  for (const Output& o : outputs) {
    if (o.path.empty()) throw InputError("<command line>", o.flag, "expected a file name or '-', got ''");
    targets.push_back(o.path == "-" ? stdout_target() : resolve_output(o.flag, o.path));
    if (targets.back().kind == TargetKind::file) {
      if (const auto input = input_file_read_as(targets.back().path))
        throw InputError(o.path, o.flag, input_clash(*input));
      if (is_being_written(targets.back().path))
        throw InputError(o.path, o.flag,
                         "a running sweep is writing its rows to it (it holds the file's lock); wait for it to "
                         "finish or choose another output");
    }
    for (std::size_t j = 0; j + 1 < targets.size(); ++j) {
      if (targets[j].identity != targets.back().identity || discards(targets.back())) continue;
      throw InputError(
          "<command line>", fmt::format("{} and {}", outputs[j].flag, o.flag),
          fmt::format("'{}' and '{}' are the same file (give each output its own)", outputs[j].path, o.path));
    }
  }
  return targets;
}

void write_to(int fd, const Output& o) {
  FdStreambuf buffer(fd);
  std::ostream out(&buffer);
  o.write(out);
  out.flush();
  if (buffer.error() == 0 && out) return;
  throw InputError(o.path, o.flag,
                   fmt::format("cannot write: {}", std::strerror(buffer.error() != 0 ? buffer.error() : EIO)));
}

// A device, a FIFO or a descriptor we hold: written in place, never replaced.
void write_through(const OutputTarget& t, const Output& o) {
  if (t.kind == TargetKind::fd) {
    std::cout.flush();  // what went to stdout before (the table) stays first
    std::fflush(stdout);
    write_to(t.fd, o);
    return;
  }
  const int fd = ::open(t.path.c_str(), O_WRONLY | O_TRUNC | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) throw InputError(o.path, o.flag, fmt::format("cannot open for writing: {}", std::strerror(errno)));
  try {
    write_to(fd, o);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw InputError(o.path, o.flag, fmt::format("cannot write: {}", std::strerror(errno)));
}

// Whether a written-through target is this process's stdout ('-', /dev/stdout, /dev/fd/1).
bool writes_stdout(const OutputTarget& t) { return t.kind == TargetKind::fd && t.fd == STDOUT_FILENO; }

std::string written_list(const std::vector<Output>& outputs, const std::vector<bool>& written) {
  std::string list;
  for (std::size_t i = 0; i < outputs.size(); ++i)
    if (written[i]) list += fmt::format("{}{} {}", list.empty() ? "" : ", ", outputs[i].flag, outputs[i].path);
  return list;
}

}  // namespace

void check_outputs(const std::vector<Output>& outputs) { resolve_all(outputs); }

void write_outputs(const std::vector<Output>& outputs, const std::function<void(std::ostream&)>& table) {
  const std::vector<OutputTarget> targets = resolve_all(outputs);
  std::vector<StagedFile> staged;
  std::vector<std::size_t> staged_output;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (targets[i].kind != TargetKind::file) continue;
    staged.emplace_back(targets[i], outputs[i].flag, outputs[i].path);
    staged_output.push_back(i);
    write_to(staged.back().fd(), outputs[i]);
  }
  std::vector<bool> written(outputs.size(), false);
  const auto through = [&](bool to_stdout) {
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      if (targets[i].kind == TargetKind::file || writes_stdout(targets[i]) != to_stdout) continue;
      write_through(targets[i], outputs[i]);
      written[i] = true;
    }
  };
  through(false);
  // An output that is stdout ('-', /dev/stdout, /dev/fd/1) has it to itself: a reader of that
  // JSON or trace gets no table in front of it.
  const bool stdout_taken = std::any_of(targets.begin(), targets.end(), writes_stdout);
  if (table && !stdout_taken) {
    table(std::cout);
    flush_stdout("the report");
  }
  through(true);
  for (std::size_t k = 0; k < staged.size(); ++k) {
    try {
      staged[k].commit();
    } catch (const InputError& e) {
      const std::string done = written_list(outputs, written);
      if (done.empty()) throw;
      throw InputError(e.file(), e.where(), fmt::format("{} (already written: {})", e.message(), done));
    }
    written[staged_output[k]] = true;
  }
}

void write_outputs(const std::vector<Output>& outputs) { write_outputs(outputs, {}); }

namespace {
FdStreambuf* checked_stdout = nullptr;
}

void hold_standard_descriptors() {
  // An output opened while descriptor 1 is closed would get it, and the printed report would
  // land inside that file. A closed descriptor is held by /dev/null opened read-only instead:
  // writing to it still fails (EBADF), as writing to the closed one would.
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int held = ::open("/dev/null", O_RDONLY | O_NOCTTY);
    if (held >= 0 && held != fd) {
      ::dup2(held, fd);
      ::close(held);
    }
  }
}

void check_stdout_writes() {
  if (checked_stdout != nullptr || ::isatty(STDOUT_FILENO) == 1) return;
  // Never freed: std::cout is flushed once more when the program exits.
  checked_stdout = new FdStreambuf(STDOUT_FILENO);
  std::cout.rdbuf(checked_stdout);
}

void flush_stdout(const std::string& what) {
  std::cout.flush();
  int error = checked_stdout != nullptr ? checked_stdout->error() : 0;
  // What went through C's stdio (fmt::print) is checked too: the checked std::cout does not see it.
  errno = 0;
  if (error == 0 && (std::fflush(stdout) != 0 || std::ferror(stdout) != 0)) error = errno != 0 ? errno : EIO;
  if (error == 0 && std::cout) return;
  throw InputError("<stdout>", "", fmt::format("cannot write {}: {}", what, std::strerror(error != 0 ? error : EIO)));
}

void write_output(const Output& output) { write_outputs({output}); }

}  // namespace stepsim::report
