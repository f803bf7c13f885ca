// Appending rows whole, and reading back what a previous (perhaps killed) run wrote.
#include "sweep/row_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "report/output_target.hpp"
#include "stepsim/error.hpp"
#include "stepsim/input_files.hpp"
#include "stepsim/text.hpp"

namespace stepsim::sweep {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", fmt::format("cannot open for reading: {}", std::strerror(errno ? errno : EIO)));
  note_input_file(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether `text`, a file's content without a newline, is what a sweep killed while writing
// its first line leaves: the start of its CSV header, or of a JSON row (whose first key is
// "point").
bool torn_first_line(const std::string& text, Format format, const std::vector<std::string>& header) {
  const std::string first = format == Format::csv ? format_header(header, format) : std::string("{\"point\":");
  return first.starts_with(text) || (format == Format::jsonl && text.starts_with(first));
}

// Rows are synced at least this often, and at the end.
constexpr auto kSyncInterval = std::chrono::seconds(2);

}  // namespace

void lock_or_refuse(int fd, const std::string& path) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return;
  if (errno == EWOULDBLOCK)
    throw InputError(path, "-o",
                     "another process is writing it (it holds the file's lock); wait for it to finish or choose "
                     "another output");
  throw InputError(path, "-o", fmt::format("cannot lock it: {}", std::strerror(errno)));
}

InputError other_sweep(const std::string& file, std::size_t line, std::uint64_t found, std::uint64_t expected,
                       const std::string& whose) {
  return InputError(file, fmt::format("line {}", line),
                    fmt::format("written by another sweep (sweep_id {}, {} is {}): the scenario, --set, --vary, "
                                "--gpus, --keep-oom, the files they read or the stepsim version differ",
                                format_id(found), whose, format_id(expected)));
}

FileLines read_lines(const std::string& path, Format format) {
  const std::string text = slurp(path);
  FileLines lines;
  const auto last_newline = text.rfind('\n');
  lines.whole_bytes = last_newline == std::string::npos ? 0 : last_newline + 1;
  lines.torn_bytes = text.size() - lines.whole_bytes;
  lines.torn = text.substr(lines.whole_bytes);
  std::size_t begin = 0;
  for (std::size_t line = 1; begin < lines.whole_bytes; ++line) {
    const auto end = text.find('\n', begin);
    std::string content = text.substr(begin, end - begin);
    begin = end + 1;
    if (lines.header.empty()) {
      // A byte order mark an editor put first is no part of the first column's name.
      if (line == 1) content = std::string(without_bom(content));
      lines.header = header_of(content, format, path);
      // JSON lines have no header line: the first row gives the keys and is a row too.
      if (format == Format::csv) continue;
    }
    lines.rows.push_back(std::move(content));
  }
  return lines;
}

RowFile::RowFile(const std::string& path, Format format, const std::vector<std::string>& header, std::uint64_t sweep_id,
                 bool resume, const RowCheck& check)
    : path_(path), last_sync_(std::chrono::steady_clock::now()) {
  // Where the name leads, as every output of stepsim resolves it: stdout ('-', /dev/stdout,
  // /dev/fd/1), another descriptor, a device or a FIFO is written through, never locked nor
  // emptied (`-o /dev/stdout >> log.csv` appends to log.csv as `-o -` does).
  const report::OutputTarget target = path == "-" ? report::stdout_target() : report::resolve_output("-o", path);
  if (target.kind != report::TargetKind::file) {
    open_through(target, resume);
    append(format_header(header, format));
    return;
  }
  if (const auto input = input_file_read_as(path)) throw InputError(path, "-o", input_clash(*input));
  real_path_ = target.path;
  folder_ = target.folder;
  // Opened without truncating: a regular file is emptied (or read, to resume) only once this
  // process holds its lock, so that a second sweep never destroys the rows of a running one.
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError(path, "-o", fmt::format("cannot open for writing: {}", std::strerror(errno)));
  owned_ = true;
  struct stat st {};
  regular_ = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  bool write_header = true;
  if (regular_) {
    lock_or_refuse(fd_, path);
    if (resume) {
      write_header = take_existing(format, header, sweep_id, check);
    } else if (::ftruncate(fd_, 0) != 0) {
      throw InputError(path, "-o", fmt::format("cannot empty the file: {}", std::strerror(errno)));
    }
  }
  if (write_header) append(format_header(header, format));
}

void RowFile::open_through(const report::OutputTarget& target, bool resume) {
  const bool to_stdout = target.kind == report::TargetKind::fd && target.fd == STDOUT_FILENO;
  if (resume)
    throw InputError("--resume", "",
                     to_stdout ? std::string("needs an output file (-o FILE), not stdout")
                               : fmt::format("needs an output file (-o FILE), not {}, which is written through (a "
                                             "device, a FIFO or a descriptor)",
                                             path_));
  if (target.kind == report::TargetKind::fd) {
    fd_ = target.fd;
    return;
  }
  fd_ = ::open(target.path.c_str(), O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
  if (fd_ < 0) throw InputError(path_, "-o", fmt::format("cannot open for writing: {}", std::strerror(errno)));
  owned_ = true;
}

bool RowFile::take_existing(Format format, const std::vector<std::string>& header, std::uint64_t sweep_id,
                            const RowCheck& check) {
  const FileLines lines = read_lines(path_, format);
  if (lines.header.empty()) {
    // No whole line: an empty file, the torn first line of this sweep's file (its header, or
    // the first JSON row), cut; or a file of something else, refused rather than appended to.
    if (lines.torn_bytes == 0) return true;
    if (!torn_first_line(lines.torn, format, header))
      throw InputError(path_, "line 1",
                       "is not the start of a sweep's rows (no header and no row): choose another output, or "
                       "delete the file to start again");
    if (::ftruncate(fd_, 0) != 0)
      throw InputError(path_, "-o", fmt::format("cannot cut the torn first line: {}", std::strerror(errno)));
    return true;
  }
  if (lines.header != header)
    throw InputError(path_, "line 1",
                     "the columns differ from this sweep's (same scenario, --vary and --gpus are needed to resume)");
  const std::size_t first = format == Format::csv ? 2 : 1;
  for (std::size_t i = 0; i < lines.rows.size(); ++i) {
    const RowHead head = head_of(lines.rows[i], format, header, path_, first + i);
    if (head.sweep != sweep_id) throw other_sweep(path_, first + i, head.sweep, sweep_id, "this sweep's");
    if (!existing_rows_.empty() && head.key.point <= existing_rows_.back().key.point)
      throw InputError(path_, fmt::format("line {}", first + i),
                       fmt::format("point {} after point {} (line {}): expected one row per point, in point order "
                                   "(a point after {}); --resume takes only the rows a sweep writes",
                                   head.key.point, existing_rows_.back().key.point, existing_rows_.back().line,
                                   existing_rows_.back().key.point));
    existing_.insert(head.key);
    existing_rows_.push_back({head.key, first + i});
    if (check) check(existing_rows_.back());
  }
  if (lines.torn_bytes > 0 && ::ftruncate(fd_, static_cast<off_t>(lines.whole_bytes)) != 0)
    throw InputError(path_, "-o", fmt::format("cannot cut the torn last line: {}", std::strerror(errno)));
  return false;
}

void RowFile::put_in_point_order(Format format, const std::vector<std::string>& header) {
  if (!regular_ || !owned_) return;
  sync();
  std::ifstream in(real_path_, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in && !in.eof())
    throw InputError(path_, "-o", fmt::format("cannot read the rows back: {}", std::strerror(errno ? errno : EIO)));
  std::string head;  // the CSV header line (JSON lines have none)
  std::vector<std::pair<std::size_t, std::string>> rows;
  std::size_t number = 0;
  for (std::string line; std::getline(text, line);) {
    ++number;
    if (format == Format::csv && number == 1) {
      head = line + "\n";
      continue;
    }
    rows.emplace_back(head_of(line, format, header, path_, number).key.point, line + "\n");
  }
  const auto by_point = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (std::is_sorted(rows.begin(), rows.end(), by_point)) return;
  std::stable_sort(rows.begin(), rows.end(), by_point);
  const auto fail = [&](const std::string& what, const std::string& temporary) {
    const int error = errno ? errno : EIO;
    if (!temporary.empty()) ::unlink(temporary.c_str());
    return InputError(path_, "-o",
                      fmt::format("cannot write the rows again in point order ({}: {}); the file keeps every row, "
                                  "out of order",
                                  what, std::strerror(error)));
  };
  std::string temporary = folder_ + "/.stepsim-rows-XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) throw fail("a temporary file", "");
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || ::fchmod(fd, st.st_mode & 07777) != 0 || ::flock(fd, LOCK_EX) != 0) {
    const InputError e = fail("a temporary file", temporary);
    ::close(fd);
    throw e;
  }
  std::string all = head;
  for (const auto& row : rows) all += row.second;
  for (std::size_t done = 0; done < all.size();) {
    const ssize_t n = ::write(fd, all.data() + done, all.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      const InputError e = fail("writing", temporary);
      ::close(fd);
      throw e;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::rename(temporary.c_str(), real_path_.c_str()) != 0) {
    const InputError e = fail("replacing the file", temporary);
    ::close(fd);
    throw e;
  }
  // The new file, locked already, is this sweep's from now on.
  ::close(fd_);
  fd_ = fd;
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
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      // A file keeps whole rows only: the part of this one that went in (a disk filling up) is
      // cut off again, so that the file reads, and resumes, as the rows before it.
      if (owned_ && done > 0) {
        struct stat st {};
        if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode))
          static_cast<void>(::ftruncate(fd_, st.st_size - static_cast<off_t>(done)));
      }
      // Named as every output error names its file: "FILE: -o: ..." (stdout has no flag).
      if (path_ == "-")
        throw InputError("<stdout>", "", fmt::format("cannot write the rows: {}", std::strerror(error)));
      throw InputError(path_, "-o", fmt::format("cannot write the rows: {}", std::strerror(error)));
    }
    done += static_cast<std::size_t>(n);
  }
  if (std::chrono::steady_clock::now() - last_sync_ >= kSyncInterval) sync();
}

bool RowFile::is_terminal() const { return ::isatty(fd_) == 1; }

void RowFile::sync() {
  last_sync_ = std::chrono::steady_clock::now();
  if (owned_) ::fsync(fd_);
}

}  // namespace stepsim::sweep
