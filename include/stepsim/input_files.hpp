// The regular files this process has read as inputs (scenarios, traces, nccl-tests logs,
// calibration files, sweep rows), so that no output of the same run replaces one of them:
// `analyze t.json --json t.json` would otherwise turn the trace into its own report.
#pragma once

#include <optional>
#include <string>

namespace stepsim {

// Records the file at `path` (followed through symlinks) as read, when it is a regular file.
// Safe to call from several threads.
void note_input_file(const std::string& path);

// The name an input was read under, when the file at `path` (followed through symlinks) is
// one of them; nullopt for a name not taken, a device, a FIFO or any file not read.
std::optional<std::string> input_file_read_as(const std::string& path);

// Why an output cannot be the input read as `read_as`.
std::string input_clash(const std::string& read_as);

}  // namespace stepsim
