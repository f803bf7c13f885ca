// Appending rows whole, and reading back what a previous (perhaps killed) run wrote.
#include "sweep/row_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "stepsim/error.hpp"

namespace stepsim::sweep {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", fmt::format("cannot open for reading: {}", std::strerror(errno ? errno : EIO)));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Rows are synced at least this often, and at the end.
constexpr auto kSyncInterval = std::chrono::seconds(2);

}  // namespace

FileLines read_lines(const std::string& path, Format format) {
  const std::string text = slurp(path);
  FileLines lines;
  const auto last_newline = text.rfind('\n');
  lines.whole_bytes = last_newline == std::string::npos ? 0 : last_newline + 1;
  lines.torn_bytes = text.size() - lines.whole_bytes;
  std::size_t begin = 0;
  for (std::size_t line = 1; begin < lines.whole_bytes; ++line) {
    const auto end = text.find('\n', begin);
    std::string content = text.substr(begin, end - begin);
    begin = end + 1;
    if (lines.header.empty()) {
      lines.header = header_of(content, format, path);
      // JSON lines have no header line: the first row gives the keys and is a row too.
      if (format == Format::csv) continue;
    }
    lines.rows.push_back(std::move(content));
  }
  return lines;
}

RowFile::RowFile(const std::string& path, Format format, const std::vector<std::string>& header, bool resume)
    : path_(path), last_sync_(std::chrono::steady_clock::now()) {
  if (path == "-") {
    if (resume) throw InputError("--resume", "", "needs an output file (-o FILE), not stdout");
    fd_ = STDOUT_FILENO;
    append(format_header(header, format));
    return;
  }
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  const bool regular = exists && S_ISREG(st.st_mode);
  bool write_header = true;
  if (resume && regular && st.st_size > 0) {
    const FileLines lines = read_lines(path, format);
    if (!lines.header.empty() && lines.header != header)
      throw InputError(path, "line 1",
                       "the columns differ from this sweep's (same scenario, --vary and --gpus are needed to resume)");
    for (std::size_t i = 0; i < lines.rows.size(); ++i)
      existing_.insert(key_of(lines.rows[i], format, header, path, i + (format == Format::csv ? 2 : 1)));
    if (lines.torn_bytes > 0 && ::truncate(path.c_str(), static_cast<off_t>(lines.whole_bytes)) != 0)
      throw InputError(path, "", fmt::format("cannot cut the torn last line: {}", std::strerror(errno)));
    write_header = lines.header.empty();
  }
  // Regular files are emptied unless resumed; devices and pipes are written as they are.
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (!resume && regular ? O_TRUNC : 0);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) throw InputError(path, "", fmt::format("cannot open for writing: {}", std::strerror(errno)));
  owned_ = true;
  if (write_header) append(format_header(header, format));
}

RowFile::~RowFile() {
  if (!owned_) return;
  ::fsync(fd_);
  ::close(fd_);
}

void RowFile::append(const std::string& line) {
  std::size_t done = 0;
  while (done < line.size()) {
    // One call for the whole line; only a short write (disk full, signal) loops.
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw InputError(path_, "", fmt::format("cannot write: {}", std::strerror(n < 0 ? errno : EIO)));
    done += static_cast<std::size_t>(n);
  }
  if (std::chrono::steady_clock::now() - last_sync_ >= kSyncInterval) sync();
}

void RowFile::sync() {
  last_sync_ = std::chrono::steady_clock::now();
  if (owned_) ::fsync(fd_);
}

}  // namespace stepsim::sweep
