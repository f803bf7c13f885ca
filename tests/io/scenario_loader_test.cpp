// Loading scenarios: presets and overrides merge as documented, defaults are filled, --set
// applies after the file, and the resolved scenario loads back to the same values.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;

namespace {

const char* const kBase = R"({
  "model": "llama3-8b",
  "cluster": "dgx-h100-ndr",
  "parallel": { "tp": 8, "dp": 8 },
  "training": { "global_batch": 128, "micro_batch": 2 },
})";

}  // namespace

TEST_CASE("the embedded default is Llama 3 8B on 64 H100 with TP 8 and DDP") {
  const Scenario s = io::load_scenario("");
  CHECK(s.source == "<default>");
  CHECK(s.model.name == "llama3-8b");
  CHECK(s.model.kv_heads == 8);
  CHECK(s.model.ffn_hidden == 14336);
  CHECK(s.cluster.name == "dgx-h100-ndr");
  CHECK(s.cluster.gpu.name == "h100-sxm5-80gb");
  CHECK(s.cluster.nodes == 8);
  CHECK(s.cluster.gpus() == 64);
  CHECK(s.parallel.gpus() == 64);
  CHECK(s.training.micro_batches(s.parallel.dp) == 8);
  CHECK(s.cluster.inter_node.nic_bandwidth.bytes_per_s() == 50e9);
  CHECK(s.cluster.intra_node.bandwidth.bytes_per_s() == 450e9);
  CHECK(s.cluster.gpu.flops.bf16.tflops() == Approx(989));
  CHECK(s.data_parallel.kind == DpKind::ddp);
  CHECK(s.data_parallel.bucket_cap_mb == 25.0);
}

TEST_CASE("an example preset can be loaded by name") {
  const Scenario s = io::load_scenario("korthikanti-22b");
  CHECK(s.model.name == "gpt-22b");
  CHECK(s.cluster.gpu.name == "a100-sxm4-80gb");
  CHECK(s.training.micro_batch == 4);
}

TEST_CASE("a section object overrides its preset key by key") {
  const Scenario s = io::load_scenario_text(R"({
    "model": { "preset": "llama3-8b", "layers": 16 },
    "cluster": { "preset": "dgx-a100-80g-hdr", "inter_node": { "nics_per_node": 4 }, "gpu": { "sms": 100 } },
    "parallel": { "tp": 8, "dp": 8 },
    "training": { "global_batch": 128, "micro_batch": 2 }
  })",
                                            "s.json");
  CHECK(s.model.layers == 16);
  CHECK(s.model.hidden == 4096);
  CHECK(s.cluster.inter_node.nics_per_node == 4);
  CHECK(s.cluster.inter_node.nic_bandwidth.bytes_per_s() == 25e9);
  CHECK(s.cluster.gpu.sms == 100);
  CHECK(s.cluster.gpu.name == "a100-sxm4-80gb");
  CHECK(s.cluster.gpu.memory_bandwidth.bytes_per_s() == Approx(2.04e12));
}

TEST_CASE("a model given by its dimensions gets Megatron's defaults") {
  const Scenario s = io::load_scenario_text(R"({
    "model": { "layers": 4, "hidden": 1024, "heads": 16, "vocab": 51200, "seq_len": 1024 },
    "cluster": "dgx-h100-ndr",
    "training": { "global_batch": 8 }
  })",
                                            "s.json");
  CHECK(s.model.name == "custom");
  CHECK(s.model.kv_heads == 16);
  CHECK(s.model.ffn_hidden == 4096);
  CHECK(s.parallel.gpus() == 1);
  CHECK(s.cluster.nodes == 1);
}

TEST_CASE("overrides from --set apply after the file, and a preset name replaces a section") {
  const Scenario s =
      io::load_scenario_text(kBase, "s.json",
                             {"parallel.tp=4", "parallel.dp=16", "training.global_batch=256", "model=llama3-70b",
                              "cluster.inter_node.nic_bandwidth=200 Gb/s", "data_parallel.bucket_cap_mb=100",
                              "parallel.sequence_parallel=true", "collectives.protocol=ll128"});
  CHECK(s.parallel.tp == 4);
  CHECK(s.parallel.dp == 16);
  CHECK(s.parallel.sequence_parallel);
  CHECK(s.model.name == "llama3-70b");
  CHECK(s.model.heads == 64);
  CHECK(s.model.layers == 80);
  CHECK(s.cluster.inter_node.nic_bandwidth.bytes_per_s() == 25e9);
  CHECK(s.cluster.nodes == 8);
  CHECK(s.data_parallel.bucket_cap_mb == 100.0);
  CHECK(s.collectives.protocol == Protocol::ll128);
}

// Megatron switches sequence parallelism off by itself at tp 1, where it would do nothing:
// asked for there, it is refused as TP communication overlap is.
TEST_CASE("sequence parallelism without tensor parallelism is refused") {
  CHECK_THROWS_WITH(
      io::load_scenario_text(kBase, "s.json", {"parallel.tp=1", "parallel.dp=64", "parallel.sequence_parallel=true"}),
      "--set: parallel.sequence_parallel: needs parallel.tp > 1 (there is no TP group to split the sequence over)");
  const std::string in_file = R"({ "model": "gpt-1.3b", "cluster": "dgx-a100-80g-hdr",
    "parallel": { "tp": 1, "dp": 8, "sequence_parallel": true }, "training": { "global_batch": 64 } })";
  CHECK_THROWS_WITH(
      io::load_scenario_text(in_file, "s.json"),
      "s.json: /parallel/sequence_parallel: needs parallel.tp > 1 (there is no TP group to split the sequence over)");
  CHECK_NOTHROW(io::load_scenario_text(in_file, "s.json", {"parallel.sequence_parallel=false"}));
  CHECK(io::load_scenario_text(in_file, "s.json", {"parallel.tp=2", "parallel.dp=4"}).parallel.sequence_parallel);
}

TEST_CASE("uneven pipeline stages are accepted when they sum to the layers") {
  const Scenario s = io::load_scenario("bloom-176b");
  CHECK(s.parallel.stage_layers.size() == 12);
  CHECK(s.parallel.stage_layers.front() == 5);
  CHECK(s.cluster.inter_node.nics_per_node == 4);
  CHECK(s.cluster.nodes == 48);
  CHECK(s.data_parallel.grad_reduce_dtype == Precision::fp32);
}

TEST_CASE("calibration files, one or a list, stay in the scenario for simulate to apply") {
  CHECK(io::load_scenario_text(kBase, "s.json", {"calibration=h100.json"}).calibration ==
        std::vector<std::string>{"h100.json"});
  CHECK(io::load_scenario_text(kBase, "s.json", {R"(calibration=["a.json", "b.json"])"}).calibration.size() == 2);
  CHECK(io::load_scenario_text(kBase, "s.json", {"calibration=[]"}).calibration.empty());
}

TEST_CASE("the resolved scenario loads back to the same scenario") {
  for (const auto& info : io::list_presets([](const ModelSpec&) { return 0LL; })) {
    if (info.kind != "example") continue;
    INFO(info.name);
    const Scenario first = io::load_scenario(info.name, {"model.name=renamed"});
    const Scenario second = io::load_scenario_text(first.resolved_json, "resolved.json");
    CHECK(second.resolved_json == first.resolved_json);
    CHECK(second.model.hidden == first.model.hidden);
    CHECK(second.cluster.gpu.flops.fp32 == first.cluster.gpu.flops.fp32);
    CHECK(second.cluster.gpu.memory_bandwidth == first.cluster.gpu.memory_bandwidth);
    CHECK(second.cluster.gpu.efficiency.kernel_min == first.cluster.gpu.efficiency.kernel_min);
    CHECK(second.cluster.gpu.efficiency.gemm_half_flops == first.cluster.gpu.efficiency.gemm_half_flops);
    CHECK(second.cluster.intra_node.latency == first.cluster.intra_node.latency);
    CHECK(second.cluster.inter_node.nic_bandwidth == first.cluster.inter_node.nic_bandwidth);
    CHECK(second.cluster.tuning.ramp_half_bytes == first.cluster.tuning.ramp_half_bytes);
    CHECK(second.cluster.nodes == first.cluster.nodes);
    CHECK(second.parallel.stage_layers == first.parallel.stage_layers);
    CHECK(second.data_parallel.bucket_cap_mb == first.data_parallel.bucket_cap_mb);
    CHECK(second.model.name == "renamed");
  }
}

TEST_CASE("the resolved scenario writes quantities with their units") {
  const std::string text = io::load_scenario("").resolved_json;
  CHECK(text.find(R"("nic_bandwidth": "400 Gb/s")") != std::string::npos);
  CHECK(text.find(R"("bandwidth": "450 GB/s")") != std::string::npos);
  CHECK(text.find(R"("bf16": "989 TFLOPS")") != std::string::npos);
  CHECK(text.find(R"("memory": "81559 MiB")") != std::string::npos);
  CHECK(text.find(R"("kernel_launch": "5 us")") != std::string::npos);
  CHECK(text.find(R"("schedule": "1f1b")") != std::string::npos);
}

TEST_CASE("a cluster preset is sized for a number of GPUs") {
  const ClusterSpec c = io::load_cluster("dgx-h100-ndr", 20);
  CHECK(c.nodes == 3);
  CHECK(c.gpus_per_node == 8);
  CHECK(c.intra_node.nvls);
  CHECK_THROWS_WITH(io::load_cluster("dgx-h100", 8),
                    "<command line>: cluster: unknown cluster preset 'dgx-h100' (did you mean 'dgx-h100-ndr'?)");
}

// A cluster file's keys are at its top level: a missing key, a bad unit and a rule between
// keys are all named by pointers into the file, not into a scenario's cluster section.
TEST_CASE("errors in a cluster file point into that file") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "stepsim-cluster-file-pointers";
  std::filesystem::create_directories(dir);
  const auto cluster_error = [&](const std::string& name, const std::string& text) {
    const std::string path = (dir / name).string();
    std::ofstream(path) << text;
    try {
      (void)io::load_cluster(path, 8);
    } catch (const InputError& e) {
      return std::string(e.what()).substr(path.size());
    }
    return std::string("no error");
  };
  CHECK(cluster_error("bare.json", R"({"name": "bare", "gpus_per_node": 8, "gpu": "h100-sxm5-80gb"})") ==
        ": /intra_node/bandwidth: is missing (or 0): expected a bandwidth between 1 Gb/s and 100 TB/s");
  CHECK(cluster_error("unit.json", R"({"name": "bare", "gpus_per_node": 8, "gpu": "h100-sxm5-80gb",
                                   "inter_node": {"nic_bandwidth": "400"}})") ==
        ": /inter_node/nic_bandwidth: '400' has no unit (expected e.g. \"400 Gb/s\" or \"50 GB/s\")");
  CHECK(cluster_error("nvls.json", R"({"name": "bare", "gpus_per_node": 8, "gpu": "a100-sxm4-80gb",
                                   "intra_node": {"bandwidth": "300 GB/s", "nvls": true},
                                   "inter_node": {"nic_bandwidth": "200 Gb/s", "nics_per_node": 8}})") ==
        ": /intra_node/nvls: NVLink SHARP needs a Hopper or later GPU (a100-sxm4-80gb is ampere)");
  std::filesystem::remove_all(dir);
}

TEST_CASE("a scenario can start from an example preset and override it") {
  const Scenario s =
      io::load_scenario_text(R"({ "preset": "korthikanti-22b", "training": { "recompute": "full" } })", "s.json");
  CHECK(s.model.name == "gpt-22b");
  CHECK(s.training.micro_batch == 4);
  CHECK(s.training.recompute == Recompute::full);
}

TEST_CASE("a missing scenario file that is no example preset lists the examples") {
  CHECK_THROWS_WITH(io::load_scenario("nope.json"),
                    Catch::StartsWith("nope.json: cannot open the file, and it is not an example preset (default, "));
  // A near miss gets the example it misses; a model, cluster or GPU preset where a scenario goes
  // is told where it belongs.
  CHECK_THROWS_WITH(io::load_scenario("ddp-1.3b-64xa10"),
                    "ddp-1.3b-64xa10: cannot open the file, and it is not an example preset (did you mean "
                    "'ddp-1.3b-64xa100'?)");
  CHECK_THROWS_WITH(io::load_scenario("llama3-8b"),
                    "llama3-8b: no such file; 'llama3-8b' is a model preset, not a scenario: give it as '--set "
                    "model=llama3-8b' (on the default scenario, or on a scenario file)");
  CHECK_THROWS_WITH(io::load_scenario("dgx-b200"), Catch::Contains("is a cluster preset, not a scenario: give it as "
                                                                   "'--set cluster=dgx-b200'"));
  CHECK_THROWS_WITH(io::load_scenario("h200"),
                    Catch::Contains("is a GPU preset, not a scenario: give it as '--set cluster.gpu=h200'"));
  // An example that is also a model preset's name is the example.
  CHECK(io::load_scenario("bloom-176b").model.name == "bloom-176b");
}

// A key inside a section or a preset keeps its --set value when a later --set replaces the
// section: the H200's own memory is 143771 MiB and dgx-h200-ndr's NVLink 450 GB/s, so the
// assignments' 100 GiB and 900 GB/s can only come from the assignments themselves.
TEST_CASE("a set key survives a set of the section that holds it, in either order") {
  const std::vector<std::vector<std::string>> gpu_orders = {{"cluster.gpu.memory=100 GiB", "cluster.gpu=h200"},
                                                            {"cluster.gpu=h200", "cluster.gpu.memory=100 GiB"}};
  for (const auto& sets : gpu_orders) {
    INFO(sets.front());
    const Scenario s = io::load_scenario("", sets);
    CHECK(s.cluster.gpu.name == "h200");
    CHECK(s.cluster.gpu.memory.count() == 100LL << 30);
    CHECK(s.cluster.gpu.memory_bandwidth.bytes_per_s() == Approx(4.8e12));
  }
  const std::vector<std::vector<std::string>> cluster_orders = {
      {"cluster.intra_node.bandwidth=900 GB/s", "cluster=dgx-h200-ndr"},
      {"cluster=dgx-h200-ndr", "cluster.intra_node.bandwidth=900 GB/s"}};
  for (const auto& sets : cluster_orders) {
    INFO(sets.front());
    const Scenario s = io::load_scenario("", sets);
    CHECK(s.cluster.name == "dgx-h200-ndr");
    CHECK(s.cluster.gpu.name == "h200");
    CHECK(s.cluster.intra_node.bandwidth.bytes_per_s() == 900e9);
  }
  // training.framework sets the kernel keys as a preset would: a --set of one of them, before
  // or after it, overrides it (Megatron's own attention is flash).
  for (const auto& sets :
       std::vector<std::vector<std::string>>{{"training.attention=unfused", "training.framework=megatron"},
                                             {"training.framework=megatron", "training.attention=unfused"}}) {
    INFO(sets.front());
    const Scenario s = io::load_scenario("", sets);
    CHECK(s.training.framework == Framework::megatron);
    CHECK(s.training.attention == AttentionKind::unfused);
  }
}

// training.framework gives only the kernel keys that no layer gives itself. A file that runs
// Megatron with Transformer Engine's cross entropy, given its own framework again, is the same
// scenario (before, the --set put back Megatron's unfused cross entropy); another framework by
// --set keeps the file's cross_entropy and takes its own defaults for the others (torchtitan:
// eager element-wise kernels, FlashAttention-2, and Megatron's grad_clip true either way).
TEST_CASE("a set of training.framework keeps the kernel keys the file or another set gives") {
  const std::string text = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr",
    "parallel": { "tp": 1, "pp": 1, "dp": 8 },
    "training": { "framework": "megatron", "global_batch": 16, "micro_batch": 1, "precision": "bf16",
                  "recompute": "none", "cross_entropy": "te" },
    "data_parallel": { "kind": "fsdp" } })";
  const Scenario own = io::load_scenario_text(text, "off.json", {"cluster.nodes=1"});
  CHECK(own.training.cross_entropy == CrossEntropy::te);
  const Scenario again = io::load_scenario_text(text, "off.json", {"cluster.nodes=1", "training.framework=megatron"});
  CHECK(again.training.cross_entropy == CrossEntropy::te);
  CHECK(again.resolved_json == own.resolved_json);
  const Scenario titan = io::load_scenario_text(text, "off.json", {"training.framework=torchtitan"});
  CHECK(titan.training.cross_entropy == CrossEntropy::te);
  CHECK(titan.training.fusion == Fusion::eager);
  CHECK(titan.training.attention == AttentionKind::flash2);
  // A kernel key set before or after the framework wins over the framework's default.
  for (const auto& sets :
       std::vector<std::vector<std::string>>{{"training.fusion=fused", "training.framework=torchtitan"},
                                             {"training.framework=torchtitan", "training.fusion=fused"}}) {
    INFO(sets.front());
    const Scenario s = io::load_scenario_text(text, "off.json", sets);
    CHECK(s.training.framework == Framework::torchtitan);
    CHECK(s.training.fusion == Fusion::fused);
    CHECK(s.training.cross_entropy == CrossEntropy::te);
    CHECK(s.training.attention == AttentionKind::flash2);
  }
  // Where no layer gives a kernel key, the framework set last gives it.
  const std::string bare = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": { "dp": 8 },
    "training": { "framework": "nemo", "global_batch": 16 } })";
  CHECK(io::load_scenario_text(bare, "bare.json").training.cross_entropy == CrossEntropy::fused);
  CHECK(io::load_scenario_text(bare, "bare.json", {"training.framework=megatron"}).training.cross_entropy ==
        CrossEntropy::unfused);
}

TEST_CASE("assignments apply a section before its keys and otherwise in the order given") {
  CHECK(io::ordered_sets({"cluster.gpu.memory=1 GiB", "parallel.tp=2", "cluster.gpu=h200", "parallel=x",
                          "cluster=dgx-b200", "parallel.tp=4"}) ==
        std::vector<std::string>{"parallel=x", "parallel.tp=2", "cluster=dgx-b200", "cluster.gpu=h200",
                                 "cluster.gpu.memory=1 GiB", "parallel.tp=4"});
  // Keys that only share a prefix are unrelated; the same key twice keeps its order (the last wins).
  CHECK(io::ordered_sets({"model.layers_x=1", "model.layers=2", "model=a", "model=b"}) ==
        std::vector<std::string>{"model=a", "model=b", "model.layers_x=1", "model.layers=2"});
  CHECK(io::load_scenario("", {"parallel.tp=2", "parallel.tp=4"}).parallel.tp == 4);
  CHECK(io::load_scenario("", {"parallel.tp=4", "parallel.tp=2"}).parallel.tp == 2);
}
