// write_outputs(): a file appears whole or not at all, and only regular files are replaced.
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "report/report_io.hpp"
#include "stepsim/error.hpp"

namespace stepsim {
namespace {

namespace fs = std::filesystem;

// A fresh, empty directory for one test, removed afterwards.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("stepsim-report-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::size_t entries() const { return static_cast<std::size_t>(std::distance(fs::directory_iterator(path_), {})); }

 private:
  fs::path path_;
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("an output file holds what the writer wrote") {
  ScratchDir dir("written");
  report::write_output({"--json", dir.file("report.json"), [](std::ostream& out) { out << "{}\n"; }});
  CHECK(read(dir.file("report.json")) == "{}\n");
  CHECK(dir.entries() == 1);
}

TEST_CASE("a writer that throws leaves no file behind") {
  ScratchDir dir("throwing");
  const auto failing = [](std::ostream& out) {
    out << "half";
    throw std::runtime_error("disk on fire");
  };
  CHECK_THROWS_WITH(report::write_output({"--trace", dir.file("trace.json"), failing}), "disk on fire");
  CHECK(dir.entries() == 0);
}

TEST_CASE("a writer that throws keeps the previous file intact") {
  ScratchDir dir("previous");
  report::write_output({"--json", dir.file("report.json"), [](std::ostream& out) { out << "old"; }});
  CHECK_THROWS(
      report::write_output({"--json", dir.file("report.json"), [](std::ostream&) { throw std::runtime_error("x"); }}));
  CHECK(read(dir.file("report.json")) == "old");
  CHECK(dir.entries() == 1);
}

TEST_CASE("an output in a missing directory is an input error naming the path and the flag") {
  ScratchDir dir("missing");
  const std::string path = dir.file("no/such/dir/report.json");
  CHECK_THROWS_MATCHES(report::write_output({"--json", path, [](std::ostream& out) { out << "x"; }}), InputError,
                       Catch::Matchers::Message(path + ": --json: cannot create the file: No such file or directory"));
}

}  // namespace
}  // namespace stepsim

namespace stepsim {
namespace {

const std::function<void(std::ostream&)> kText = [](std::ostream& out) { out << "text\n"; };

TEST_CASE("a symlink to a regular file survives and its target gets the content") {
  ScratchDir dir("symlink");
  std::ofstream(dir.file("target.json")) << "old";
  fs::create_symlink("target.json", dir.file("link.json"));
  report::write_output({"--json", dir.file("link.json"), kText});
  CHECK(fs::is_symlink(dir.file("link.json")));
  CHECK(read(dir.file("target.json")) == "text\n");
  CHECK(dir.entries() == 2);
}

TEST_CASE("a dangling symlink creates its target") {
  ScratchDir dir("dangling");
  fs::create_symlink("target.json", dir.file("link.json"));
  report::write_output({"--json", dir.file("link.json"), kText});
  CHECK(fs::is_symlink(dir.file("link.json")));
  CHECK(read(dir.file("target.json")) == "text\n");
}

TEST_CASE("a replaced file keeps its permissions") {
  ScratchDir dir("mode");
  std::ofstream(dir.file("report.json")) << "old";
  fs::permissions(dir.file("report.json"), fs::perms(0640));
  report::write_output({"--json", dir.file("report.json"), kText});
  CHECK(fs::status(dir.file("report.json")).permissions() == fs::perms(0640));
}

TEST_CASE("a FIFO is written through, not replaced") {
  ScratchDir dir("fifo");
  REQUIRE(::mkfifo(dir.file("pipe").c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = read(dir.file("pipe")); });
  report::write_output({"--json", dir.file("pipe"), kText});
  reader.join();
  CHECK(got == "text\n");
  CHECK(fs::is_fifo(dir.file("pipe")));
  CHECK(dir.entries() == 1);
}

TEST_CASE("/dev/null is written through and stays a character device") {
  report::write_output({"--json", "/dev/null", kText});
  CHECK(fs::is_character_file("/dev/null"));
}

TEST_CASE("a file name of 255 bytes is written") {
  ScratchDir dir("long-name");
  const std::string name = std::string(250, 'n') + ".json";
  report::write_output({"--json", dir.file(name), kText});
  CHECK(read(dir.file(name)) == "text\n");
  CHECK(dir.entries() == 1);
}

TEST_CASE("two outputs naming one file, however spelled, are refused before anything is written") {
  ScratchDir dir("same");
  fs::create_symlink("x.json", dir.file("link.json"));
  const std::string plain = dir.file("x.json");
  const std::string dotted = (fs::path(dir.file(".")) / "x.json").string();
  for (const std::string& other : {plain, dotted, dir.file("link.json")}) {
    CHECK_THROWS_MATCHES(report::write_outputs({{"--json", plain, kText}, {"--trace", other, kText}}), InputError,
                         Catch::Matchers::Message(fmt::format(
                             "<command line>: --json and --trace: '{}' and '{}' are the same file (give each output "
                             "its own)",
                             plain, other)));
  }
  CHECK(dir.entries() == 1);
}

TEST_CASE("when the second output fails the first is not written and no temporary is left") {
  ScratchDir dir("second");
  std::ofstream(dir.file("report.json")) << "old";
  CHECK_THROWS_AS(report::write_outputs(
                      {{"--json", dir.file("report.json"), kText}, {"--trace", dir.file("missing/trace.json"), kText}}),
                  InputError);
  CHECK(read(dir.file("report.json")) == "old");
  CHECK(dir.entries() == 1);
}

TEST_CASE("a folder, an empty name and a symlink loop are refused naming the flag") {
  ScratchDir dir("refused");
  fs::create_symlink("b", dir.file("a"));
  fs::create_symlink("a", dir.file("b"));
  CHECK_THROWS_MATCHES(report::write_output({"--trace", dir.file(""), kText}), InputError,
                       Catch::Matchers::Message(dir.file("") + ": --trace: names a folder, not a file"));
  CHECK_THROWS_MATCHES(report::write_output({"--json", "", kText}), InputError,
                       Catch::Matchers::Message("<command line>: --json: expected a file name or '-', got ''"));
  CHECK_THROWS_MATCHES(report::write_output({"--json", dir.file("a"), kText}), InputError,
                       Catch::Matchers::Message(dir.file("a") + ": --json: cannot write to it: Too many levels of "
                                                                "symbolic links"));
}

TEST_CASE("a full device is an input error naming the file and the flag") {
  if (!fs::is_character_file("/dev/full")) return;
  CHECK_THROWS_MATCHES(report::write_output({"--trace", "/dev/full", kText}), InputError,
                       Catch::Matchers::Message("/dev/full: --trace: cannot write: No space left on device"));
}

}  // namespace
}  // namespace stepsim

namespace stepsim {
namespace {

TEST_CASE("a commit that fails says so and which outputs were already written") {
  ScratchDir dir("commit");
  const std::string first = dir.file("a.json");
  const std::string second = dir.file("b.json");
  // The first writer runs after both paths were resolved: it turns the second into a folder.
  const auto sabotage = [&](std::ostream& out) {
    fs::create_directory(second);
    out << "a\n";
  };
  CHECK_THROWS_MATCHES(
      report::write_outputs({{"--json", first, sabotage}, {"--trace", second, [](std::ostream& out) { out << "b"; }}}),
      InputError,
      Catch::Matchers::Message(second + ": --trace: cannot replace the file: Is a directory (already written: --json " +
                               first + ")"));
  CHECK(read(first) == "a\n");
  CHECK(dir.entries() == 2);
}

}  // namespace
}  // namespace stepsim
