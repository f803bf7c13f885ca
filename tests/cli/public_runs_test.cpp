// The published training runs of configs/validation/ (tools/validate): the error the README
// and docs/validation.md state is held here, so that a change that moves it fails.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
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
  std::string gpu;   // validation-gpu: gb200, b200, h100
  std::string kind;  // validation-kind: dense or moe
};

Measured read_measured(const std::filesystem::path& path) {
  Measured m;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("// validation-step-s: ")) m.step_s = std::stod(line.substr(22));
    if (line.starts_with("// validation-fitted: ")) m.fitted = line.substr(22) == "yes";
    if (line.starts_with("// validation-group: ")) m.group = line.substr(21);
    if (line.starts_with("// validation-gpu: ")) m.gpu = line.substr(19);
    if (line.starts_with("// validation-kind: ")) m.kind = line.substr(20);
  }
  return m;
}

// The run's relative step-time error and whether the memory model lets it fit, or nothing when
// the scenario needs a feature that is not simulated yet (the only refusal a published run may
// get).
struct Outcome {
  double error = 0;
  bool fits = false;
};

std::optional<Outcome> step_error(const std::filesystem::path& path, const Measured& m) {
  try {
    const auto report = test::run(path.string()).report;
    return Outcome{std::abs(report.step_time_s / m.step_s - 1.0), report.memory_bytes.fits};
  } catch (const InputError& e) {
    CHECK_THAT(e.message(), Catch::Matchers::Contains("not simulated yet"));
    return std::nullopt;
  }
}

// Each group's MAPE at or below the figure the documentation states for it.
void check_stated(const std::map<std::string, std::pair<double, int>>& groups,
                  const std::map<std::string, double>& stated) {
  CHECK(groups.size() == stated.size());
  for (const auto& [group, sum] : groups) {
    INFO(group << ": MAPE " << sum.first / sum.second);
    REQUIRE(stated.count(group) == 1);
    CHECK(sum.first / sum.second <= stated.at(group));
  }
}

}  // namespace

// Over the runs whose features are simulated (all 28): MAPE 5.52 % overall, 6.40 % on the 24
// not used for fitting; per group 9.93 % (Megatron-LM README), 1.74 % (NeMo 24.07), 4.03 %
// (torchtitan): the figures the README states, each the exact MAPE rounded up to a hundredth
// of a percent.
TEST_CASE("the simulated public runs stay within the validation error the documentation states", "[slow]") {
  const std::filesystem::path root = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation";
  double all = 0, unfitted = 0;
  int n_all = 0, n_unfitted = 0;
  std::map<std::string, std::pair<double, int>> groups;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (entry.path().extension() != ".json") continue;
    const Measured m = read_measured(entry.path());
    REQUIRE(m.step_s > 0);
    const std::optional<Outcome> outcome = step_error(entry.path(), m);
    if (!outcome) continue;
    const double error = outcome->error;
    // Every one of these runs ran, so each fits in its GPUs' memory.
    INFO(entry.path().filename().string());
    CHECK(outcome->fits);
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
  CHECK(all / n_all <= 0.0552);
  CHECK(unfitted / n_unfitted <= 0.0640);
  check_stated(groups, {{"megatron_readme", 0.0993}, {"nemo_24.07", 0.0174}, {"torchtitan", 0.0403}});
}

// The 24 runs of Megatron-Bridge's performance summary (configs/validation/blackwell/):
// 4 used for fitting (reproduced within 1 %), 20 held out, none refused. MAPE over the
// held-out runs per GPU type and per dense/MoE (each rounded up to a hundredth of a percent):
// GB200 7.63 %, B200 11.68 %, H100 13.84 %, dense 6.88 %, MoE 11.75 %.
TEST_CASE("the simulated Megatron-Bridge runs stay within the validation error the documentation states", "[slow]") {
  const std::filesystem::path root = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation" / "blackwell";
  std::map<std::string, std::pair<double, int>> groups;
  std::set<std::string> does_not_fit;
  int fitted = 0, refused = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const Measured m = read_measured(entry.path());
    INFO(entry.path().filename().string());
    REQUIRE(m.step_s > 0);
    const std::optional<Outcome> outcome = step_error(entry.path(), m);
    if (!outcome) {
      ++refused;
      continue;
    }
    const double error = outcome->error;
    if (!outcome->fits) does_not_fit.insert(entry.path().stem().string());
    if (m.fitted) {
      CHECK(error <= 0.01);
      ++fitted;
      continue;
    }
    for (const std::string& g : {"gpu " + m.gpu, "model " + m.kind}) {
      groups[g].first += error;
      ++groups[g].second;
    }
  }
  CHECK(fitted == 4);
  CHECK(refused == 0);
  // All 24 ran, and each is predicted to fit. Three were predicted not to while the Blackwell
  // presets took the datasheet's GB for the capacity instead of what the driver reports, GB200's
  // Llama 3.1 405B FP8 run while Transformer Engine's FP8 weights were counted at 2 bytes, and
  // four MoE runs while a Megatron-Core MoE layer was counted keeping the expert outputs its
  // combine sums. Two were close calls that the allocator's reserve, estimated as with memory to
  // spare, tipped over: the 405B FP8 run ran with expandable segments (Megatron-Bridge's
  // PERF_ENV_VARS), and Llama 3 70B under Megatron-FSDP, without them, fits as a close call now
  // that the allocator frees its cached blocks before it fails (docs/model.md).
  CHECK(does_not_fit.empty());
  check_stated(groups, {{"gpu b200", 0.1168},
                        {"gpu gb200", 0.0763},
                        {"gpu h100", 0.1384},
                        {"model dense", 0.0688},
                        {"model moe", 0.1175}});
}

// The 405B run on 128 B200 ran, so it fits: with Megatron-Core's gradient buffer in bf16 (its
// grad_reduce_in_fp32 off) and FP8 weights of 1 byte 139.6 GiB in use, of the 179.1 GiB
// (183,359 MiB) a B200's driver reports. With fp32 main gradients and 2-byte weights it was
// 177.2 GiB, over the capacity with the 2 GiB of headroom.
TEST_CASE("the Blackwell 405B run on B200, which ran, fits in memory") {
  const std::filesystem::path run = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation" / "blackwell" /
                                    "mb2511-b200-llama31-405b-fp8cs-cp2.json";
  CHECK(test::run(run.string()).report.memory_bytes.fits);
}

// Llama 3 70B under Megatron-FSDP on 64 GB200, with 40 layers' activations offloaded, ran
// without expandable segments. Its 175.65 GiB of live tensors (149.57 of them activations), 0.75
// GiB of CUDA context and NCCL buffers and the 2 GiB of headroom fit the 185.03 GiB a GB200's
// driver reports; with memory to spare the allocator would hold 13.3 % of the activations beyond
// them, 19.9 GiB, more than the 6.6 GiB left, so it gives back its cached blocks and retries:
// the report calls it a close call rather than refusing a layout that ran.
TEST_CASE("the Megatron-FSDP run on GB200, which ran, fits as a close call that fragmentation decides") {
  const std::filesystem::path run = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation" / "blackwell" /
                                    "mb260401-gb200-llama3-70b-fp8cs-fsdp.json";
  const ::stepsim::Report report = test::run(run.string()).report;
  constexpr double gib = 1073741824.0;
  const ::stepsim::MemoryReport& m = report.memory_bytes;
  CHECK(m.fits);
  CHECK(m.peak / gib == Approx(175.65).margin(0.01));
  CHECK(m.activations / gib == Approx(149.57).margin(0.01));
  CHECK((m.reserved - m.peak) / gib == Approx(185.03 - 2 - 0.75 - 175.65).margin(0.02));
  const std::string expected = fmt::format(
      "would hold {:.1f} GiB beyond the live tensors with memory to spare, and "
      "has 6.6 GiB left",
      0.133 * 149.57);
  CHECK(std::any_of(report.notes.begin(), report.notes.end(),
                    [&](const std::string& n) { return n.find(expected) != std::string::npos; }));
}

// docs/model.md and docs/validation.md say how much longer the program makes torchtitan's eager
// Llama 3 8B step than its torch.compile one (Table 1's rows 'FSDP' and 'FSDP + torch.compile',
// 8 H100): the figure they state is the program's own, from the two scenarios.
TEST_CASE("the documents state the eager step's excess over torch.compile that the program gives") {
  const std::filesystem::path root = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation";
  const double eager = test::run((root / "tt-8b-8gpu-fsdp-bf16.json").string()).report.step_time_s;
  const double compiled =
      test::run((root / "memory" / "tt-8b-8gpu-fsdp-compile-bf16.json").string()).report.step_time_s;
  REQUIRE(eager > compiled);
  const std::string stated = fmt::format("{:.1f} % above torch.compile", 100.0 * (eager / compiled - 1.0));
  const std::string steps = fmt::format("a step of {:.3f} s against {:.3f} s", eager, compiled);
  for (const char* doc : {"docs/model.md", "docs/validation.md"}) {
    INFO(doc);
    std::ifstream in(std::filesystem::path(STEPSIM_SOURCE_DIR) / doc);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Joined into one line, as the paragraph reads.
    std::replace(text.begin(), text.end(), '\n', ' ');
    std::string joined;
    for (char c : text)
      if (c != ' ' || joined.empty() || joined.back() != ' ') joined += c;
    CHECK(joined.find(stated) != std::string::npos);
    CHECK(joined.find(steps) != std::string::npos);
  }
}

}  // namespace stepsim
