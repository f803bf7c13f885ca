// Published peak memory per GPU (tools/validate, docs/validation.md): every run with a
// `validation-memory-gib` line, against the report field of the quantity its publisher states.
// The MAPE the README and docs/validation.md state is held here, so that a drifting fit fails.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/simulate_support.hpp"

namespace stepsim {
namespace {

struct MeasuredMemory {
  std::filesystem::path path;
  double gib = 0;
  std::string quantity;
  bool fitted = false;
};

MeasuredMemory read_measured_memory(const std::filesystem::path& path) {
  MeasuredMemory m;
  m.path = path;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("// validation-memory-gib: ")) m.gib = std::stod(line.substr(26));
    if (line.starts_with("// validation-memory-quantity: ")) m.quantity = line.substr(31);
    if (line.starts_with("// validation-memory-fitted: ")) m.fitted = line.substr(29) == "yes";
  }
  return m;
}

std::vector<MeasuredMemory> published_peaks() {
  const std::filesystem::path root = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation";
  std::vector<MeasuredMemory> runs;
  for (const auto& folder : {root, root / "memory"}) {
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      if (entry.path().extension() != ".json") continue;
      const MeasuredMemory m = read_measured_memory(entry.path());
      if (m.gib > 0) runs.push_back(m);
    }
  }
  return runs;
}

double predicted_gib(const MemoryReport& r, const std::string& quantity) {
  if (quantity == "reserved") return r.reserved / 1073741824.0;
  if (quantity == "allocated") return r.peak / 1073741824.0;
  REQUIRE(quantity == "device");
  return r.device / 1073741824.0;
}

}  // namespace

// The README: MAPE 2.85 % over the 20 published peaks, 3.00 % over the 19 not used to fit the
// allocator's reserve (each rounded up to a hundredth of a percent).
TEST_CASE("the published peak memory stays within the error the documentation states", "[slow]") {
  double all = 0, unfitted = 0;
  int n_unfitted = 0;
  const std::vector<MeasuredMemory> runs = published_peaks();
  for (const MeasuredMemory& m : runs) {
    INFO(m.path.string());
    const MemoryReport r = test::run(m.path.string()).report.memory_bytes;
    REQUIRE(r.modelled);
    const double error = std::abs(predicted_gib(r, m.quantity) / m.gib - 1.0);
    all += error;
    if (m.fitted) continue;
    unfitted += error;
    ++n_unfitted;
  }
  CHECK(runs.size() == 20);
  CHECK(n_unfitted == 19);
  CHECK(all / static_cast<double>(runs.size()) <= 0.0285);
  CHECK(unfitted / n_unfitted <= 0.0300);
}

// Two torchtitan peaks the model missed by more than 10 %: the 405B interleaved pipeline
// (+22 %: Megatron's every-forward-first rule for m = p, which PyTorch's schedule lacks, kept
// the head's eight micro-batches of logits on the last stage) and the compiled FP8 8B run on
// H200 (+12.5 %: w2's saved output, which torch.compile drops).
TEST_CASE("torchtitan's 405B interleaved and H200 FP8 peaks are within 10 %") {
  const std::filesystem::path root = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation";
  for (const char* run : {"tt-405b-512gpu-3d-interleaved", "tt-h200-32gpu-llama3-8b-fsdp-fp8"}) {
    const MeasuredMemory m = read_measured_memory(root / (std::string(run) + ".json"));
    INFO(run);
    REQUIRE(m.gib > 0);
    const MemoryReport r = test::run(m.path.string()).report.memory_bytes;
    CHECK(std::abs(predicted_gib(r, m.quantity) / m.gib - 1.0) <= 0.10);
  }
}

// torchtitan's four peaks with a step time beside them in its performance tables, which the
// model once missed by up to half (the 70B 2D FP8 run: 34.8 GiB predicted, 71.9 published):
// Llama 3.1 8B on 8 H100 eager BF16 (82.4 GiB, the reserve's fitted run) and compiled FP8
// (76.8), and the 70B at FSDP 32, TP 8 in FP8 with and without async TP (71.9, 67.6).
TEST_CASE("torchtitan's 8B and 70B peaks of its performance tables are within 10 %") {
  const std::filesystem::path root = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation";
  for (const char* run : {"tt-8b-8gpu-fsdp-bf16", "tt-8b-8gpu-fsdp-compile-fp8", "tt-70b-256gpu-fsdp32-tp8-fp8",
                          "tt-70b-256gpu-fsdp32-tp8-fp8-asynctp"}) {
    const MeasuredMemory m = read_measured_memory(root / (std::string(run) + ".json"));
    INFO(run);
    REQUIRE(m.gib > 0);
    const MemoryReport r = test::run(m.path.string()).report.memory_bytes;
    CHECK(std::abs(predicted_gib(r, m.quantity) / m.gib - 1.0) <= 0.10);
  }
}

}  // namespace stepsim
