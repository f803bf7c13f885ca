// A sweep's output file: rows appended whole (one write(2) of the line to a file opened with
// O_APPEND, fsync now and then and at the end), so that a killed sweep leaves only whole
// rows; and, to resume, the rows already there, a torn last line cut away.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "report/output_target.hpp"
#include "stepsim/error.hpp"
#include "sweep/rows.hpp"

namespace stepsim::sweep {

// The lines of a sweep file: the header and the data lines; a last line without its newline
// (a torn write) is left out and reported in `torn_bytes`.
struct FileLines {
  std::vector<std::string> header;
  std::vector<std::string> rows;
  std::size_t whole_bytes = 0;  // bytes up to the last newline
  std::size_t torn_bytes = 0;
  std::string torn;  // the torn line itself
};
FileLines read_lines(const std::string& path, Format format);

// Takes `fd`'s advisory lock (flock, exclusive) or throws InputError naming `path` and -o
// when another process holds it.
void lock_or_refuse(int fd, const std::string& path);

// The error for a row whose sweep_id is `found` where `expected` (`whose`) was.
InputError other_sweep(const std::string& file, std::size_t line, std::uint64_t found, std::uint64_t expected,
                       const std::string& whose);

class RowFile {
 public:
  // The rows a resumed file had, each with its line: one per point, in point order (gaps
  // allowed: the points not yet run), or the file was refused.
  struct ExistingRow {
    RowKey key;
    std::size_t line = 0;
  };
  // What the sweep asks of each row a resumed file has (its point_id, its shard): throws
  // InputError to refuse the file, which is then left as it was (its torn last line too).
  using RowCheck = std::function<void(const ExistingRow&)>;

  // "-", or any name report::resolve_output finds written through (/dev/stdout, a device, a
  // FIFO): written in place, never emptied nor locked, and not resumable. Otherwise the file
  // is created (or emptied) and gets the header; with `resume` an existing file keeps its
  // rows, must have the same header, every row this sweep's `sweep_id`, one row per point in
  // point order (the points increasing; gaps are points to run) and each row accepted by
  // `check`, all checked before the file is changed, and loses a torn last line (a torn first
  // line too; a file without a whole line that does not start as a sweep's rows is refused).
  // A regular file is locked (flock) for as long as this object lives: a second writer is
  // refused with InputError.
  RowFile(const std::string& path, Format format, const std::vector<std::string>& header, std::uint64_t sweep_id,
          bool resume, const RowCheck& check = {});
  ~RowFile();
  RowFile(const RowFile&) = delete;
  RowFile& operator=(const RowFile&) = delete;

  const std::set<RowKey>& existing() const { return existing_; }
  const std::vector<ExistingRow>& existing_rows() const { return existing_rows_; }
  const std::string& path() const { return path_; }
  // A resumed file whose rows are not in point order (the rows it had left gaps, which the
  // points run now filled at its end) is written again in point order, as a sweep run in one
  // go writes it: to a temporary file beside it, synced and locked, then renamed over it, so
  // that the file is whole, old or new, whatever stops the program. A file in order, or one
  // written through, is left as it is.
  void put_in_point_order(Format format, const std::vector<std::string>& header);
  void append(const std::string& line);
  void sync();  // fsync (a no-op on pipes and terminals)
  bool is_terminal() const;                  // rows go to a terminal (no -o, or -o /dev/tty)
  bool is_file() const { return regular_; }  // a regular file, which --resume can take up

 private:
  // Reads the rows already there into existing_ (checked against the header and sweep_id)
  // and cuts a torn last line; true when the file has no header yet (empty, or emptied of its
  // torn first line).
  bool take_existing(Format format, const std::vector<std::string>& header, std::uint64_t sweep_id,
                     const RowCheck& check);
  // Takes a target written through (stdout, a descriptor, a device, a FIFO) as it is.
  void open_through(const report::OutputTarget& target, bool resume);

  std::string path_;
  std::string real_path_, folder_;  // a regular file's: symlinks resolved, and its folder
  int fd_ = -1;
  bool owned_ = false;
  bool regular_ = false;
  std::set<RowKey> existing_;
  std::vector<ExistingRow> existing_rows_;
  std::chrono::steady_clock::time_point last_sync_;
};

}  // namespace stepsim::sweep
