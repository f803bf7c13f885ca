// StagedFile: O_TMPFILE in the target's folder, linked under a short name and renamed over
// the target at commit. Where O_TMPFILE (or /proc) is missing, a short named temporary
// (".stepsim-XXXXXX") stands in; it is removed on every failure, but not on a signal:
// cleaning up from a signal handler would need global state, and on Linux the unnamed
// file makes it unnecessary. Temporary names stay short so that a 255-byte file name works.
#include "report/staged_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "stepsim/error.hpp"

namespace stepsim::report {

StagedFile::StagedFile(const OutputTarget& target, std::string flag, std::string shown)
    : path_(target.path), folder_(target.folder), flag_(std::move(flag)), shown_(std::move(shown)) {
  if (!open_unnamed()) open_named();
  // The replacement keeps the permissions of the file it replaces.
  if (target.mode != 0) ::fchmod(fd_, target.mode);
}

StagedFile::StagedFile(StagedFile&& other) noexcept
    : path_(std::move(other.path_)),
      folder_(std::move(other.folder_)),
      flag_(std::move(other.flag_)),
      shown_(std::move(other.shown_)),
      temp_(std::move(other.temp_)),
      fd_(other.fd_) {
  other.fd_ = -1;
  other.temp_.clear();
}

StagedFile::~StagedFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

void StagedFile::fail(const char* what, int error) const {
  throw InputError(shown_, flag_, fmt::format("{}: {}", what, std::strerror(error)));
}

bool StagedFile::open_unnamed() {
#ifdef O_TMPFILE
  if (::access("/proc/self/fd", X_OK) != 0) return false;  // commit() links it through /proc
  fd_ = ::open(folder_.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd_ >= 0) return true;
  // Kernels or file systems without O_TMPFILE.
  if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) return false;
  fail("cannot create the file", errno);
#else
  return false;
#endif
}

void StagedFile::open_named() {
  std::string name = folder_ + "/.stepsim-XXXXXX";
  fd_ = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) fail("cannot create the file", errno);
  temp_ = name;
  ::fchmod(fd_, 0644);  // mkstemp's 0600 would hide a new report from its readers
}

std::string StagedFile::link_unnamed() {
  const std::string self = fmt::format("/proc/self/fd/{}", fd_);
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = fmt::format("{}/.stepsim-{}-{}", folder_, ::getpid(), attempt);
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return name;
    if (errno != EEXIST) fail("cannot replace the file", errno);
  }
  fail("cannot replace the file", EEXIST);
}

void StagedFile::commit() {
  if (temp_.empty()) temp_ = link_unnamed();
  if (::rename(temp_.c_str(), path_.c_str()) != 0) fail("cannot replace the file", errno);
  temp_.clear();
}

}  // namespace stepsim::report
