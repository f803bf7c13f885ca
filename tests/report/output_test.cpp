// write_output(): a file appears whole or not at all.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

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
  report::write_output(dir.file("report.json"), [](std::ostream& out) { out << "{}\n"; });
  CHECK(read(dir.file("report.json")) == "{}\n");
  CHECK(dir.entries() == 1);
}

TEST_CASE("a writer that throws leaves no file behind") {
  ScratchDir dir("throwing");
  const auto failing = [](std::ostream& out) {
    out << "half";
    throw std::runtime_error("disk on fire");
  };
  CHECK_THROWS_WITH(report::write_output(dir.file("trace.json"), failing), "disk on fire");
  CHECK(dir.entries() == 0);
}

TEST_CASE("a writer that throws keeps the previous file intact") {
  ScratchDir dir("previous");
  report::write_output(dir.file("report.json"), [](std::ostream& out) { out << "old"; });
  CHECK_THROWS(report::write_output(dir.file("report.json"), [](std::ostream&) { throw std::runtime_error("x"); }));
  CHECK(read(dir.file("report.json")) == "old");
  CHECK(dir.entries() == 1);
}

TEST_CASE("an output in a missing directory is an input error naming the path") {
  ScratchDir dir("missing");
  const std::string path = dir.file("no/such/dir/report.json");
  CHECK_THROWS_MATCHES(report::write_output(path, [](std::ostream& out) { out << "x"; }), InputError,
                       Catch::Matchers::Message(path + ": cannot open for writing: No such file or directory"));
}

}  // namespace
}  // namespace stepsim
