// Replays saved fuzz inputs through a harness without libFuzzer, so that the inputs under
// tests/fuzz/regressions/ stay fixed in every build.
//
//   replay_TARGET DIR [--skip LIST]   every file of DIR in name order, except those LIST names:
//                                     the first finding aborts the run
//   replay_TARGET DIR --only LIST     only the files LIST names, each in a child process:
//                                     prints which still fail, fails if any does
// LIST holds paths relative to DIR's parent ("TARGET/NAME"); '#' starts a comment.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

std::set<std::string> read_list(const std::string& path) {
  std::set<std::string> names;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string name;
    if (words >> name) names.insert(name);
  }
  return names;
}

void replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

// Runs one input in a child with a time limit; true when it passed.
bool replay_in_child(const fs::path& file) {
  const pid_t child = fork();
  if (child == 0) {
    alarm(30);
    replay(file);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::vector<fs::path> inputs_of(const fs::path& dir) {
  std::vector<fs::path> files;
  if (fs::is_directory(dir))
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string listed_name(const fs::path& dir, const fs::path& file) {
  return (dir.filename() / file.filename()).generic_string();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::fprintf(stderr, "usage: %s DIR [--skip LIST | --only LIST]\n", argv[0]);
    return 2;
  }
  fs::path dir = fs::path(argv[1]).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "DIR/" names DIR too
  const bool only = argc == 4 && std::string(argv[2]) == "--only";
  const std::set<std::string> listed = argc == 4 ? read_list(argv[3]) : std::set<std::string>{};
  int replayed = 0, still_failing = 0;
  for (const fs::path& file : inputs_of(dir)) {
    const std::string name = listed_name(dir, file);
    if (listed.contains(name) != only) continue;
    std::printf("replaying %s\n", name.c_str());
    std::fflush(stdout);
    ++replayed;
    if (!only) {
      replay(file);
      continue;
    }
    if (replay_in_child(file)) {
      std::printf("  passes in this build: remove it from %s once it passes in the asan build too\n", argv[3]);
    } else {
      std::printf("  still fails\n");
      ++still_failing;
    }
  }
  std::printf("replayed %d inputs of %s, %d failing\n", replayed, dir.string().c_str(), still_failing);
  return still_failing == 0 ? 0 : 1;
}
