// resolve_output(): follows an output path's symlinks one at a time, so that a link to a
// regular file replaces the target (the link survives) and a link to anything else, or a
// path into /proc (/dev/stdout, /dev/fd/N of a process substitution), is written through.
#include "report/output_target.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>

#include "stepsim/error.hpp"

namespace stepsim::report {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxLinks = 40;  // Linux's own limit (ELOOP)

[[noreturn]] void fail_errno(const std::string& path, const std::string& flag, int error) {
  throw InputError(path, flag, fmt::format("cannot write to it: {}", std::strerror(error)));
}

// The real (symlink-free) folder `p` lives in.
fs::path real_folder(const fs::path& p) {
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  fs::path real = fs::weakly_canonical(parent, ec);
  if (!ec) return real;
  return fs::absolute(parent, ec).lexically_normal();
}

std::string identity_of(const struct stat& st) { return fmt::format("inode {}:{}", st.st_dev, st.st_ino); }

OutputTarget fd_target(int fd) {
  OutputTarget t;
  t.kind = TargetKind::fd;
  t.fd = fd;
  struct stat st {};
  t.identity = ::fstat(fd, &st) == 0 ? identity_of(st) : fmt::format("descriptor {}", fd);
  return t;
}

// /proc/<this process>/fd/N, where /dev/stdout and /dev/fd/N lead: a descriptor we hold.
std::optional<int> own_descriptor(const fs::path& folder, const std::string& name) {
  if (folder != fs::path(fmt::format("/proc/{}/fd", ::getpid()))) return std::nullopt;
  int fd = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), fd);
  if (ec != std::errc() || end != name.data() + name.size() || ::fcntl(fd, F_GETFD) == -1) return std::nullopt;
  return fd;
}

OutputTarget through_target(const std::string& path) {
  OutputTarget t;
  t.kind = TargetKind::through;
  t.path = path;
  struct stat st {};
  t.identity = ::stat(path.c_str(), &st) == 0 ? identity_of(st) : "path " + path;
  return t;
}

OutputTarget file_target(const fs::path& folder, const std::string& name, const struct stat* existing) {
  OutputTarget t;
  t.kind = TargetKind::file;
  t.folder = folder.string();
  t.path = (folder / name).string();
  t.mode = existing != nullptr ? existing->st_mode & 07777 : 0;
  t.identity = existing != nullptr ? identity_of(*existing) : "new " + t.path;
  return t;
}

fs::path link_target(const fs::path& link, const fs::path& folder, const std::string& path, const std::string& flag) {
  std::array<char, 4096> buffer{};
  const ssize_t n = ::readlink(link.c_str(), buffer.data(), buffer.size());
  if (n < 0) fail_errno(path, flag, errno);
  if (static_cast<std::size_t>(n) == buffer.size()) fail_errno(path, flag, ENAMETOOLONG);
  const fs::path target(std::string(buffer.data(), static_cast<std::size_t>(n)));
  return target.is_absolute() ? target : folder / target;
}

}  // namespace

bool is_stdout(const std::string& path) {
  if (path == "-") return true;
  try {
    const OutputTarget t = resolve_output("-o", path);
    return t.kind == TargetKind::fd && t.fd == STDOUT_FILENO;
  } catch (const InputError&) {
    return false;
  }
}

bool is_written_through(const std::string& path) {
  if (path == "-") return true;
  try {
    return resolve_output("-o", path).kind != TargetKind::file;
  } catch (const InputError&) {
    return false;  // the output's own check says why
  }
}

bool is_being_written(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  const bool locked =
      ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return locked;
}

OutputTarget resolve_output(const std::string& flag, const std::string& path) {
  fs::path p = path;
  for (int hop = 0; hop < kMaxLinks; ++hop) {
    const fs::path folder = real_folder(p);
    const std::string name = p.filename().string();
    if (name.empty() || name == "." || name == "..") throw InputError(path, flag, "names a folder, not a file");
    if (const std::optional<int> fd = own_descriptor(folder, name)) return fd_target(*fd);
    if (folder.string().starts_with("/proc/")) return through_target(path);
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno != ENOENT) fail_errno(path, flag, errno);
      // A new name in a folder that is not there is refused now, not after the command's work.
      struct stat in {};
      const int error = ::stat(folder.c_str(), &in) != 0 ? errno : S_ISDIR(in.st_mode) ? 0 : ENOTDIR;
      if (error != 0) throw InputError(path, flag, fmt::format("cannot create the file: {}", std::strerror(error)));
      return file_target(folder, name, nullptr);
    }
    if (S_ISLNK(st.st_mode)) {
      p = link_target(p, folder, path, flag);
      continue;
    }
    if (S_ISDIR(st.st_mode)) throw InputError(path, flag, "is a folder, not a file");
    if (S_ISREG(st.st_mode)) {
      // The new content replaces the file through a rename, which needs only the folder's
      // permission: a file the user may not write is refused as the shell's > refuses it.
      if (::faccessat(AT_FDCWD, p.c_str(), W_OK, AT_EACCESS) != 0 && (errno == EACCES || errno == EROFS))
        throw InputError(path, flag, fmt::format("cannot write the file: {}", std::strerror(errno)));
      return file_target(folder, name, &st);
    }
    return through_target(path);
  }
  fail_errno(path, flag, ELOOP);
}

OutputTarget stdout_target() { return fd_target(STDOUT_FILENO); }

}  // namespace stepsim::report
