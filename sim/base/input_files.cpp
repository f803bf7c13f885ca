// The registry behind note_input_file(): a file is known by its device and inode, so that
// any spelling of its name (a symlink, "./x", a hard link) is recognised.
#include "stepsim/input_files.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <map>
#include <mutex>
#include <utility>

namespace stepsim {
namespace {

using FileId = std::pair<dev_t, ino_t>;

struct Registry {
  std::mutex mutex;
  std::map<FileId, std::string> read_as;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::optional<FileId> regular_file_id(const std::string& path) {
  struct stat st {};
  if (path.empty() || path == "-" || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

}  // namespace

void note_input_file(const std::string& path) {
  const auto id = regular_file_id(path);
  if (!id) return;
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.read_as.emplace(*id, path);
}

std::optional<std::string> input_file_read_as(const std::string& path) {
  const auto id = regular_file_id(path);
  if (!id) return std::nullopt;
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  const auto it = r.read_as.find(*id);
  if (it == r.read_as.end()) return std::nullopt;
  return it->second;
}

std::string input_clash(const std::string& read_as) {
  return fmt::format(
      "is '{}', an input of this run: writing it would replace what was read (give the output "
      "another name)",
      read_as);
}

}  // namespace stepsim
