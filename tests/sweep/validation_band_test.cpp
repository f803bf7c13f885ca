// plan's uncertainty bands are docs/validation.md's figures: each GPU's mean absolute step-time
// error, recomputed here from the page's rows and the GPU each run's scenario runs on.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "sweep/validation_band.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line.substr(1));
  std::string cell;
  while (std::getline(ss, cell, '|')) {
    const auto first = cell.find_first_not_of(' ');
    const auto last = cell.find_last_not_of(' ');
    out.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
  }
  return out;
}

// The scenario of a published run, in configs/validation/ or its blackwell/ folder; "" if none.
std::string scenario_of(const std::string& run) {
  for (const char* folder : {"/configs/validation/", "/configs/validation/blackwell/"}) {
    const fs::path p = std::string(STEPSIM_SOURCE_DIR) + folder + run + ".json";
    if (fs::exists(p)) return p.string();
  }
  return "";
}

struct Errors {
  double sum = 0;
  int runs = 0;
};

}  // namespace

TEST_CASE("each GPU's band is the mean absolute step-time error docs/validation.md lists for its runs") {
  std::ifstream page(std::string(STEPSIM_SOURCE_DIR) + "/docs/validation.md");
  std::map<std::string, Errors> by_gpu;
  Errors all;
  std::string line;
  while (std::getline(page, line)) {
    if (!line.starts_with("| ")) continue;
    const auto c = cells(line);
    if (c.size() < 7 || !c[5].ends_with(" %")) continue;
    const std::string scenario = scenario_of(c[0]);
    if (scenario.empty() || c[6] == "fit") continue;
    const double error = std::abs(std::stod(c[5]));
    const std::string gpu = stepsim::io::load_scenario(scenario, {}).cluster.gpu.name;
    by_gpu[gpu].sum += error;
    ++by_gpu[gpu].runs;
    all.sum += error;
    ++all.runs;
  }
  REQUIRE(by_gpu.size() == 6);
  for (const auto& [gpu, e] : by_gpu) {
    INFO(gpu);
    const auto band = stepsim::sweep::validation_band(gpu);
    CHECK(band.own_gpu);
    CHECK(band.runs == e.runs);
    CHECK(100 * band.mape == Approx(e.sum / e.runs).margin(0.01));
  }
  const auto other = stepsim::sweep::validation_band("b300");
  CHECK_FALSE(other.own_gpu);
  CHECK(other.runs == all.runs);
  CHECK(100 * other.mape == Approx(all.sum / all.runs).margin(0.01));
}
