// Where an output path leads. Only a regular file (or a name not yet taken) may be replaced
// through a temporary file and a rename; devices, FIFOs, pipes behind /dev/fd/N and stdout
// are written through, so that `--json /dev/null` can never replace /dev/null.
#pragma once

#include <sys/types.h>

#include <string>

namespace stepsim::report {

enum class TargetKind {
  file,     // a regular file or a new name: replaced atomically at `path`
  through,  // a device or FIFO: opened and written in place
  fd,       // a descriptor this process already holds (stdout, /dev/fd/N, /proc/self/fd/N)
};

struct OutputTarget {
  TargetKind kind = TargetKind::file;
  std::string path;      // file: symlinks resolved (real folder + name); through: as given
  std::string folder;    // file: the real folder the file lives in
  int fd = -1;           // fd: the descriptor
  mode_t mode = 0;       // file: the permissions of the file it replaces; 0 for a new file
  std::string identity;  // equal for two paths that lead to the same file
};

// Resolves `path` (not empty, not "-") given to `flag`. Throws InputError(path, flag, ...)
// when it cannot be an output: a folder, a symlink loop, a name too long, no permission.
OutputTarget resolve_output(const std::string& flag, const std::string& path);

// stdout as a target.
OutputTarget stdout_target();

// Whether an output named `path` goes to this process's stdout ('-', /dev/stdout, /dev/fd/1).
bool is_stdout(const std::string& path);

// Whether `path` is an output written through ('-', a device, a FIFO, /dev/stdout, a process
// substitution): such a name has no extension to choose a format by.
bool is_written_through(const std::string& path);

// Whether a regular file at `path` is locked by a sweep writing its rows now (the exclusive
// flock sweep -o holds): no other output may replace it under the sweep.
bool is_being_written(const std::string& path);

}  // namespace stepsim::report
