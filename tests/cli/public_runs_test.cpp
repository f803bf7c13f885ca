// The published training runs of configs/validation/ (tools/validate): the error the README
// and docs/validation.md state is held here, so that a change that moves it fails.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "cli/simulate_support.hpp"
#include "stepsim/error.hpp"

namespace stepsim {
namespace {

// The measured step time and whether the run was used for fitting, from the file's comments.
struct Measured {
  double step_s = 0;
  bool fitted = false;
  std::string group;
};

Measured read_measured(const std::filesystem::path& path) {
  Measured m;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("// validation-step-s: ")) m.step_s = std::stod(line.substr(22));
    if (line.starts_with("// validation-fitted: ")) m.fitted = line.substr(22) == "yes";
    if (line.starts_with("// validation-group: ")) m.group = line.substr(21);
  }
  return m;
}

}  // namespace

// Over the runs whose features are simulated (all 28): MAPE 4.9 % overall (4.86 %), 5.6 % on
// the 24 not used for fitting (5.59 %); per group 8.1 % (Megatron-LM README, 8.09 %), 2.7 %
// (NeMo 24.07, 2.68 %), 3.6 % (torchtitan) (docs/validation.md); held at 4.9 % and 5.6 %, and
// per group to the tenth of a percent above the exact figure.
TEST_CASE("the simulated public runs stay within the validation error the documentation states") {
  const std::filesystem::path root = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation";
  double all = 0, unfitted = 0;
  int n_all = 0, n_unfitted = 0;
  std::map<std::string, std::pair<double, int>> groups;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (entry.path().extension() != ".json") continue;
    const Measured m = read_measured(entry.path());
    REQUIRE(m.step_s > 0);
    double predicted = 0;
    try {
      predicted = test::run(entry.path().string()).report.step_time_s;
    } catch (const InputError& e) {
      CHECK_THAT(e.message(), Catch::Matchers::Contains("not simulated yet"));
      continue;
    }
    const double error = std::abs(predicted / m.step_s - 1.0);
    all += error;
    ++n_all;
    groups[m.group].first += error;
    ++groups[m.group].second;
    if (!m.fitted) {
      unfitted += error;
      ++n_unfitted;
    }
  }
  CHECK(n_all == 28);
  CHECK(n_unfitted == 24);
  CHECK(all / n_all <= 0.049);
  CHECK(unfitted / n_unfitted <= 0.056);
  REQUIRE(groups.size() == 3);
  const std::map<std::string, double> stated = {
      {"megatron_readme", 0.081}, {"nemo_24.07", 0.027}, {"torchtitan", 0.037}};
  for (const auto& [group, sum] : groups) {
    INFO(group);
    REQUIRE(stated.count(group) == 1);
    CHECK(sum.first / sum.second <= stated.at(group));
  }
}

// The dense FP8 runs of Megatron-Bridge's performance summary on DGX B200 and GB200 NVL72
// (configs/validation/blackwell/), none used for fitting: the Blackwell presets carry Hopper's
// fitted efficiencies. Errors -3.2 % and -8.8 % (Llama 3 8B on 8 B200 and 8 GB200), -4.4 % and
// +13.5 % (Llama 3.1 405B on 128 B200 and 256 GB200), MAPE 7.5 % (docs/validation.md).
TEST_CASE("the simulated Blackwell runs stay within the validation error the documentation states") {
  const std::filesystem::path root = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation" / "blackwell";
  double all = 0;
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const Measured m = read_measured(entry.path());
    REQUIRE(m.step_s > 0);
    CHECK(!m.fitted);
    const double error = std::abs(test::run(entry.path().string()).report.step_time_s / m.step_s - 1.0);
    INFO(entry.path().filename().string() << ": error " << error);
    CHECK(error <= 0.14);
    all += error;
    ++n;
  }
  CHECK(n == 4);
  CHECK(all / n <= 0.075);
}

}  // namespace stepsim
