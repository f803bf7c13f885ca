// Every file under configs/ is embedded and loads; the preset listing covers them all.
#include <catch2/catch.hpp>

#include <boost/json/value.hpp>
#include <filesystem>
#include <set>

#include "io/embedded_files.hpp"
#include "io/json_document.hpp"
#include "io/presets.hpp"
#include "io/scenario_loader.hpp"
#include "io/scenario_schema.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;

TEST_CASE("every file under configs is embedded") {
  std::set<std::string> on_disk, embedded;
  const std::filesystem::path root = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs";
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    const std::string path = std::filesystem::relative(entry.path(), root).generic_string();
    // configs/validation/ holds scenario files that tools/validate runs by path, not presets.
    if (entry.is_regular_file() && entry.path().extension() == ".json" && !path.starts_with("validation/"))
      on_disk.insert(path);
  }
  for (const auto& file : io::embedded_files()) embedded.insert(std::string(file.path));
  CHECK(embedded == on_disk);
}

TEST_CASE("every embedded preset loads") {
  for (const auto& file : io::embedded_files()) {
    INFO(file.path);
    const std::string_view folder = io::preset_folder(file);
    const boost::json::value name(boost::json::string(io::preset_name(file)));
    const io::Reader r("test", true);
    if (folder == "gpus") {
      GpuSpec g;
      io::read_gpu(g, name, r);
      CHECK(g.name == io::preset_name(file));
      CHECK(g.flops.bf16.positive());
      CHECK(g.memory_bandwidth.positive());
    } else if (folder == "clusters") {
      const ClusterSpec c = io::load_cluster(std::string(io::preset_name(file)), 16);
      CHECK(c.name == io::preset_name(file));
      CHECK(c.nodes == 16 / c.gpus_per_node);
      CHECK(c.domain_gpus() % c.gpus_per_node == 0);
    } else if (folder == "models") {
      ModelSpec m;
      io::read_model(m, name, r);
      CHECK(m.name == io::preset_name(file));
      // Loaded in a one-GPU scenario so that validation checks the dimensions.
      const std::string base = R"({"cluster": "dgx-h100-ndr", "training": {"global_batch": 1}})";
      const std::vector<std::string> sets{"model=" + std::string(io::preset_name(file))};
      const Scenario s = io::load_scenario_text(base, "test.json", sets);
      CHECK(s.model.layers > 0);
    } else {
      REQUIRE(folder == "examples");
      const Scenario s = io::load_scenario(std::string(io::preset_name(file)));
      CHECK(s.cluster.gpus() >= s.parallel.gpus());
    }
  }
}

// A key a GPU preset leaves out takes the schema's default, which no measurement stands for: every
// efficiency of the compute model is written out in every GPU preset (0 where a term is off), and
// the low-precision GEMM fractions wherever the GPU has that precision's peak.
TEST_CASE("every GPU preset states each efficiency of the compute model") {
  for (const auto& file : io::embedded_files()) {
    if (io::preset_folder(file) != "gpus") continue;
    INFO(file.path);
    const boost::json::value doc = io::parse_json(file.text, std::string(file.path));
    const boost::json::object& efficiency = doc.at("efficiency").as_object();
    for (const char* key :
         {"gemm_max", "gemm_half_flops", "gemm_half_k", "attention_max", "hbm", "kernel_min", "comm_slowdown"}) {
      INFO(key);
      CHECK(efficiency.contains(key));
    }
    GpuSpec g;
    io::read_gpu(g, boost::json::value(boost::json::string(io::preset_name(file))), io::Reader("test", true));
    CHECK(g.flops.fp8.positive() == efficiency.contains("fp8_gemm_max"));
    CHECK(g.flops.fp4.positive() == efficiency.contains("fp4_gemm_max"));
  }
}

// Blackwell Ultra (B300, GB300) has Blackwell's tensor-core generation and no run of its own to
// fit: its FP8 and FP4 GEMM fractions are the same-form Blackwell part's fitted ones (B200's on
// the B300, GB200's on the GB300), not the H100's FP8 figure, which made GB300 2.06x GB200 on
// NVFP4 GEMMs where the FP4 peaks differ by 1.5x.
TEST_CASE("the Blackwell Ultra GPU presets carry Blackwell's fitted FP8 and FP4 GEMM fractions") {
  const auto gpu = [](const char* name) {
    GpuSpec g;
    io::read_gpu(g, boost::json::value(boost::json::string(name)), io::Reader("test", true));
    return g;
  };
  const GpuSpec b200 = gpu("b200"), gb200 = gpu("gb200"), b300 = gpu("b300"), gb300 = gpu("gb300");
  CHECK(b300.efficiency.fp8_gemm_max == b200.efficiency.fp8_gemm_max);
  CHECK(b300.efficiency.fp4_gemm_max == b200.efficiency.fp4_gemm_max);
  CHECK(gb300.efficiency.fp8_gemm_max == gb200.efficiency.fp8_gemm_max);
  CHECK(gb300.efficiency.fp4_gemm_max == gb200.efficiency.fp4_gemm_max);
  // The large NVFP4 GEMM's rate, fraction times peak, is then the peaks' ratio: 15000 / 10000.
  CHECK(gb300.efficiency.fp4_gemm_max * gb300.flops.fp4.tflops() /
            (gb200.efficiency.fp4_gemm_max * gb200.flops.fp4.tflops()) ==
        Approx(1.5));
}

TEST_CASE("the GPU presets carry the datasheet figures") {
  const Scenario a100 = io::load_scenario_text(
      R"({"model": "gpt-1.3b", "cluster": "dgx-a100-80g-hdr", "training": {"global_batch": 1}})", "t.json");
  CHECK(a100.cluster.gpu.flops.bf16.tflops() == Approx(312));
  CHECK(a100.cluster.gpu.flops.fp32.tflops() == Approx(19.5));
  CHECK(a100.cluster.gpu.sms == 108);
  CHECK(a100.cluster.gpu.arch == GpuArch::ampere);
  CHECK_FALSE(a100.cluster.intra_node.nvls);
  CHECK(a100.cluster.inter_node.nic_bandwidth.bytes_per_s() == 25e9);
  const Scenario h200 = io::load_scenario_text(
      R"({"model": "gpt-1.3b", "cluster": "dgx-h200-ndr", "training": {"global_batch": 1}})", "t.json");
  // The capacity the driver reports (143771 MiB, about 140.4 GiB), not 141·10⁹ bytes.
  CHECK(h200.cluster.gpu.memory.count() == 143771LL * 1024 * 1024);
  CHECK(h200.cluster.gpu.memory_bandwidth.bytes_per_s() == Approx(4.8e12));
  CHECK(h200.cluster.gpu.flops.fp8.tflops() == Approx(1979));
}

// B300's TF32, FP32 and FP4 peaks from the figures the preset cites, NVIDIA's HGX B300 over 8
// GPUs: TF32 18 PFLOPS with sparsity (half without), FP32 600 TFLOPS, FP4 108 PFLOPS dense. The
// TF32 rate was 1100 TFLOPS, a per-GPU table's rounding, where B200's, the same tensor core's
// from the same kind of figure, is 1125.
TEST_CASE("the B300 preset's TF32, FP32 and FP4 peaks are its HGX figures over 8 GPUs") {
  const auto gpu = [](const char* name) {
    GpuSpec g;
    io::read_gpu(g, boost::json::value(boost::json::string(name)), io::Reader("test", true));
    return g;
  };
  const GpuSpec b300 = gpu("b300");
  CHECK(b300.flops.tf32.tflops() == Approx(18000.0 / 8 / 2));
  CHECK(b300.flops.tf32.tflops() == Approx(gpu("b200").flops.tf32.tflops()));
  CHECK(b300.flops.fp32.tflops() == Approx(600.0 / 8));
  CHECK(b300.flops.fp4.tflops() == Approx(108000.0 / 8));
}

// torchtitan's hosts, as pytorch/torchtitan docs/performance.md says: "Each H100 GPU is
// equipped with 96GB HBM2e with 2.4 TB/sec peak memory bandwidth", at "the default 500W power
// limit". The preset had the 80 GB HBM3 part's 3.35 TB/s.
TEST_CASE("the 500 W H100 has the HBM2e bandwidth torchtitan states for its hosts") {
  GpuSpec g;
  io::read_gpu(g, boost::json::value(boost::json::string("h100-sxm5-96gb-500w")), io::Reader("test", true));
  CHECK(g.memory_bandwidth.bytes_per_s() == Approx(2.4e12));
  CHECK(g.board_power_w == 500);
}

TEST_CASE("the preset listing has a summary for every preset") {
  // The parameter count is the caller's (the simulator's, a layer above); here one per layer.
  const auto presets = io::list_presets([](const ModelSpec& m) { return 1'000'000'000LL * m.layers; });
  CHECK(presets.size() == io::embedded_files().size());
  std::set<std::string> kinds;
  for (const auto& p : presets) {
    INFO(p.name);
    CHECK_FALSE(p.summary.empty());
    kinds.insert(p.kind);
  }
  CHECK(kinds == std::set<std::string>{"gpu", "cluster", "model", "example"});
  for (const auto& p : presets)
    if (p.name == "llama3-8b" && p.kind == "model") CHECK(p.summary.starts_with("~32.0B params: 32 layers,"));
}

TEST_CASE("a preset's text is its file, and unknown presets are named") {
  CHECK(io::preset_text("gpu", "h200").find("\"4.8 TB/s\"") != std::string::npos);
  CHECK_THROWS_WITH(io::preset_text("model", "llama3-9b"),
                    "presets: model: unknown model preset 'llama3-9b' (did you mean 'llama3-8b'?)");
  CHECK_THROWS_WITH(io::preset_text("modle", "x"), "presets: unknown preset kind 'modle' (did you mean 'model'?)");
}

// A validation scenario states the run as published; a feature stepsim does not simulate yet
// must be refused by name, never accepted and ignored.
TEST_CASE("every validation scenario loads or names the feature it needs") {
  const std::filesystem::path root = std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    INFO(entry.path().string());
    try {
      const Scenario s = io::load_scenario(entry.path().string());
      CHECK(s.parallel.gpus() > 0);
    } catch (const InputError& e) {
      CHECK_THAT(e.message(), Catch::Matchers::Contains("not simulated yet"));
    }
  }
  CHECK(files == 28);
}
