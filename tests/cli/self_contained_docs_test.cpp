// Everything a user reads points only at documents that ship with the repository: every
// `*.md` path named in a source, config, doc or script, in `--help` and in the presets' output
// exists, and no `§` cites a section of a document the repository does not have.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_stepsim.hpp"

namespace fs = std::filesystem;
using stepsim::testing::Scratch;

namespace {

const fs::path kRoot = STEPSIM_SOURCE_DIR;

bool is_text_source(const fs::path& p) {
  static const std::set<std::string> exts = {".md", ".cpp", ".hpp",   ".h",      ".json", ".txt",
                                             ".sh", ".py",  ".cmake", ".sbatch", ".yml",  ".yaml"};
  const std::string name = p.filename().string();
  return exts.count(p.extension().string()) > 0 || name == "CMakeLists.txt" || name == "run";
}

// The repository's own files: sources, configs, docs, tests and tools, without build outputs,
// version control and the binary trace samples.
std::vector<fs::path> repository_files() {
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path rel = fs::relative(it->path(), kRoot);
    const std::string first = rel.begin()->string();
    if (it->is_directory() &&
        (first == "build" || first == "shared" || (!first.empty() && first[0] == '.' && first != ".ci"))) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && is_text_source(it->path())) files.push_back(it->path());
  }
  return files;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A named `*.md` document exists beside the file that names it, or from the repository's root.
bool document_exists(const std::string& name, const fs::path& from_dir) {
  return fs::exists(from_dir / name) || fs::exists(kRoot / name);
}

// Every dangling reference in `text`, as "where: what".
std::vector<std::string> dangling_references(const std::string& where, const std::string& text,
                                             const fs::path& from_dir) {
  static const std::regex md_path(R"(([A-Za-z0-9_][A-Za-z0-9_./-]*)\.md\b)");
  static const std::regex outside(R"((/work/shared|\.\./shared|\bshared/(DESIGN|REFERENCE|VALIDATION|data)))");
  std::vector<std::string> found;
  std::istringstream lines(text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    const std::string at = where + ":" + std::to_string(n) + ": ";
    bool names_existing_doc = false;
    for (std::sregex_iterator m(line.begin(), line.end(), md_path), end; m != end; ++m) {
      const std::string name = (*m)[1].str() + ".md";
      // "pytorch/torchtitan docs/performance.md": a file of another public repository, named
      // with its owner and repository, is a citation of a public source.
      static const std::regex other_repository(R"((^|\s)[A-Za-z0-9_-]+/[A-Za-z0-9_.-]+ $)");
      if (std::regex_search(line.substr(0, static_cast<std::size_t>(m->position(0))), other_repository)) continue;
      if (document_exists(name, from_dir))
        names_existing_doc = true;
      else
        found.push_back(at + "names " + name + ", which is not in the repository");
    }
    if (std::regex_search(line, outside)) found.push_back(at + "points outside the repository: " + line);
    // A section sign cites a paper (authors and year) or a document of the repository.
    static const std::regex paper(R"(et al\.|\b(19|20)\d\d\b)");
    if (line.find("§") != std::string::npos && !names_existing_doc && !std::regex_search(line, paper))
      found.push_back(at + "cites a section without naming its document: " + line);
  }
  return found;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

}  // namespace

TEST_CASE("No file of the repository refers to a document the repository does not have", "[slow]") {
  const std::vector<fs::path> files = repository_files();
  REQUIRE(files.size() > 100);
  std::vector<std::string> found;
  for (const fs::path& f : files) {
    if (f.filename() == "self_contained_docs_test.cpp") continue;  // this file names the patterns
    const auto here = dangling_references(fs::relative(f, kRoot).string(), read_all(f), f.parent_path());
    found.insert(found.end(), here.begin(), here.end());
  }
  INFO(joined(found));
  CHECK(found.empty());
}

TEST_CASE("The reference check notices a document that does not exist") {
  CHECK(dangling_references("x", "see DESIGN.md §2", kRoot).empty() == false);
  CHECK(dangling_references("x", "// facts (REFERENCE.md §8)", kRoot).empty() == false);
  CHECK(dangling_references("x", "copied from ../shared/data/x.txt", kRoot).empty() == false);
  CHECK(dangling_references("x", "// source: pytorch/torchtitan docs/performance.md @ eaea6f6", kRoot).empty());
  CHECK(dangling_references("x", "// see docs/performance.md", kRoot).empty() == false);
  CHECK(dangling_references("x", "defined in §3", kRoot).empty() == false);
  CHECK(dangling_references("x", "see docs/report.md and Korthikanti et al. 2022 §4", kRoot).empty());
  CHECK(dangling_references("x", "see README.md", kRoot).empty());
}

TEST_CASE("No help text, preset listing or key list refers to a document the repository does not have") {
  Scratch scratch("docs-refs");
  const auto top = scratch.run("--help");
  REQUIRE(top.status == 0);
  // The commands are the first word of each indented line under "Commands:".
  std::vector<std::string> commands;
  std::istringstream lines(top.out.substr(top.out.find("Commands:")));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line) && line.rfind("  ", 0) == 0)
    commands.push_back(line.substr(2, line.find(' ', 2) - 2));
  REQUIRE(commands.size() >= 6);

  std::vector<std::string> found = dangling_references("stepsim --help", top.out, kRoot);
  auto check = [&](const std::string& args) {
    const auto run = scratch.run(args);
    INFO(args << "\n" << run.err);
    REQUIRE(run.status == 0);
    const auto here = dangling_references("stepsim " + args, run.out, kRoot);
    found.insert(found.end(), here.begin(), here.end());
  };
  for (const auto& c : commands) check(c + " --help");
  check("presets");
  check("presets --keys");
  for (const char* name :
       {"default", "gpt3-175b-selene", "example/bloom-176b", "model/bloom-176b", "a100-sxm4-80gb", "dgx-h100-ndr"})
    check(std::string("presets ") + name);
  INFO(joined(found));
  CHECK(found.empty());
}
