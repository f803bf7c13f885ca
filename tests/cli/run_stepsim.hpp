// The stepsim program run as users run it, from a scratch folder that tests inspect
// afterwards (what was written, what was left behind).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace stepsim::testing {

namespace fs = std::filesystem;

struct Run {
  int status;
  std::string out;
  std::string err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Empty when `r` is a refusal that says `message`: exit status 2 and the message on stderr;
// otherwise what it was instead, for the failing check to print.
inline std::string refusal(const Run& r, const std::string& message) {
  if (r.status == 2 && r.err.find(message) != std::string::npos) return {};
  return "exit status " + std::to_string(r.status) + ", stderr: " + r.err + "(expected exit status 2 and: " + message +
         ")";
}

// work(): the folder the outputs go to; stdout and stderr are captured beside it.
class Scratch {
 public:
  explicit Scratch(const std::string& name)
      : root_(fs::temp_directory_path() / ("stepsim-cli-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_ / "work");
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  fs::path work() const { return root_ / "work"; }
  fs::path file(const std::string& name) const { return work() / name; }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name), std::ios::binary) << text;
    return file(name);
  }
  // The names in work(), sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(work())) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  Run run(const std::string& args) const { return shell(std::string(STEPSIM_BINARY) + " " + args); }

  // A shell command line run in work(), as is (for limits set with ulimit first, say).
  Run shell(const std::string& command) const {
    const fs::path out = root_ / "stdout.txt";
    const fs::path err = root_ / "stderr.txt";
    const std::string cmd = "cd " + work().string() + " && " + command + " >" + out.string() + " 2>" + err.string();
    const int raw = std::system(cmd.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
  }

 private:
  fs::path root_;
};

}  // namespace stepsim::testing
