// A regular file's next content, written beside it and put in place only by commit().
// On Linux it is an unnamed O_TMPFILE, so even a run killed by SIGKILL leaves nothing behind.
#pragma once

#include <string>

#include "report/output_target.hpp"

namespace stepsim::report {

class StagedFile {
 public:
  // Opens the temporary file in `target.folder`. Errors name `shown` (the path as the user
  // gave it) and `flag`.
  StagedFile(const OutputTarget& target, std::string flag, std::string shown);
  ~StagedFile();
  StagedFile(StagedFile&& other) noexcept;
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  StagedFile& operator=(StagedFile&&) = delete;

  int fd() const { return fd_; }
  // Replaces the target with what was written. Throws InputError on failure, leaving the
  // target as it was.
  void commit();

 private:
  bool open_unnamed();
  void open_named();
  std::string link_unnamed();
  [[noreturn]] void fail(const char* what, int error) const;

  std::string path_, folder_, flag_, shown_;
  std::string temp_;  // the temporary's name; empty while it has none (O_TMPFILE)
  int fd_ = -1;
};

}  // namespace stepsim::report
