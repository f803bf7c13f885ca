// Who gave the value a validation error is about: a --set assignment (the key, or anything
// below it) is named as --set with the dotted key, as --set's type errors are; a value the
// scenario file holds is named by the file and the JSON pointer.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "load_error.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;

namespace {

// GPT 1.3B on 16 H100 (2 nodes), TP 2 × DP 8, every rank simulated.
const std::string kAttributed = R"({ "model": "gpt-1.3b", "cluster": "dgx-h100-ndr",
  "parallel": { "tp": 2, "dp": 8 }, "training": { "global_batch": 64, "micro_batch": 2 },
  "simulation": { "ranks": "all" } })";

std::string attributed_error(const std::vector<std::string>& sets, const std::string& text = kAttributed) {
  return test::load_error(text, sets);
}

}  // namespace

TEST_CASE("a value --set gives that fails validation is named by --set and its dotted key") {
  CHECK(attributed_error({"model.layers=1000000"}) == "--set: model.layers: must be between 1 and 2048, got 1000000");
  // Below the assigned key: a list's entry is written as --set's type errors write it.
  CHECK(attributed_error(
            {R"(simulation.variation.gpu_speed=[{"rank": 1, "factor": 0.9}, {"rank": 16, "factor": 0.8}])"}) ==
        "--set: simulation.variation.gpu_speed[1].rank: must be a rank from 0 to 15 (the job has 16 GPUs), got 16");
  // A whole section set by name: its keys are the assignment's, those of the preset too.
  CHECK(attributed_error({"model=llama3-8b", "model.kv_heads=5"}) ==
        "--set: model.kv_heads: kv_heads (5) does not divide heads (32)");
  CHECK(attributed_error({"model=deepseek-v3", "model.layers=3"}) ==
        "--set: model.moe.first_dense_layers: leaves no MoE layer among the 3 layers, got 3 (a dense model has "
        "model.moe.experts 0)");
  // A rule between keys names the one the user changed: here the --set heads, not the file's tp.
  CHECK(attributed_error({"model.heads=1", "model.kv_heads=1"}) ==
        "--set: model.heads: model.heads (1) is not divisible by tp (2)");
}

TEST_CASE("a --set that breaks a TP divisibility rule is named, not the key it is checked against") {
  CHECK(attributed_error({"model.ffn_hidden=8191"}) ==
        "--set: model.ffn_hidden: model.ffn_hidden (8191) is not "
        "divisible by tp (2)");
  CHECK(attributed_error({"parallel.sequence_parallel=true", "model.seq_len=2047"}) ==
        "--set: model.seq_len: model.seq_len (2047) is not divisible by tp (2)");
  // The file's mixture of experts without sequence parallelism, made TP by --set.
  const std::string moe = R"({ "model": { "preset": "mixtral-8x7b", "layers": 2 }, "cluster": "dgx-h100-ndr",
    "parallel": { "tp": 1, "dp": 16, "ep": 8 }, "training": { "global_batch": 64, "micro_batch": 1 } })";
  CHECK(attributed_error({"parallel.tp=2", "parallel.dp=8"}, moe) ==
        "--set: parallel.tp: mixture-of-experts layers with tp > 1 need sequence parallelism (Megatron requires it)");
  // Megatron-Core's shared experts are one MLP over TP: its ColumnParallelLinear divides
  // moe_shared_expert_intermediate_size by tp.
  CHECK(attributed_error({"parallel.tp=2", "parallel.dp=8", "parallel.sequence_parallel=true",
                          "model.moe.shared_experts=1", "model.moe.expert_ffn_hidden=14335"},
                         moe) ==
        "--set: model.moe.expert_ffn_hidden: the shared experts' width (model.moe.shared_experts · "
        "expert_ffn_hidden = 14335) is not divisible by tp (2): Megatron-Core splits the shared experts over TP as "
        "one MLP");
  CHECK(attributed_error({"parallel.tp=2", "parallel.dp=8", "parallel.sequence_parallel=true",
                          "model.moe.shared_experts=2", "model.moe.expert_ffn_hidden=14335"},
                         moe) == "no error");
}

// Transformer Engine's userbuffers (megatron, nemo, the unspecified framework) and torchtitan's
// async TP, which torchtitan runs only compiled (parallelize_llama raises "Async TP requires
// --training.compile"), overlap TP communication; eager PyTorch and DeepSpeed have no such thing.
TEST_CASE("TP communication overlap is refused under frameworks that have none") {
  const std::vector<std::string> overlap{"parallel.sequence_parallel=true", "tensor_parallel.comm_overlap=true"};
  const auto under = [&](const std::string& framework) {
    std::vector<std::string> sets{"training.framework=" + framework};
    // torchtitan trains TP in bf16 under FSDP alone (maybe_enable_amp).
    if (framework.starts_with("torchtitan")) sets.emplace_back("data_parallel.kind=fsdp");
    sets.insert(sets.end(), overlap.begin(), overlap.end());
    return attributed_error(sets);
  };
  for (const char* f : {"megatron", "nemo", "torchtitan-compile"}) CHECK(under(f) == "no error");
  CHECK(attributed_error(overlap) == "no error");
  CHECK(under("torchtitan") ==
        "--set: tensor_parallel.comm_overlap: tensor_parallel.comm_overlap under torchtitan is its async TP, which "
        "needs torch.compile (torchtitan raises \"Async TP requires --training.compile\"): use training.framework "
        "torchtitan-compile or turn the overlap off");
  for (const char* f : {"pytorch", "deepspeed"})
    CHECK(under(f) == fmt::format("--set: tensor_parallel.comm_overlap: tensor_parallel.comm_overlap is Transformer "
                                  "Engine's userbuffers (megatron, nemo) or torchtitan-compile's async TP, not {}'s, "
                                  "which has no TP communication overlap: turn the overlap off",
                                  f));
  // The overlap the file asks for, the framework a --set's: the framework is named.
  const std::string file = R"({ "model": "gpt-1.3b", "cluster": "dgx-h100-ndr",
    "parallel": { "tp": 2, "dp": 8, "sequence_parallel": true }, "tensor_parallel": { "comm_overlap": true },
    "training": { "global_batch": 64, "micro_batch": 2 } })";
  CHECK(attributed_error({"training.framework=pytorch"}, file).starts_with("--set: training.framework: "));
}

TEST_CASE("a value the file holds is still named by the file beside --set assignments") {
  const std::string bad = R"({ "model": { "preset": "gpt-1.3b", "layers": 1000000 }, "cluster": "dgx-h100-ndr",
    "parallel": { "tp": 2, "dp": 8 }, "training": { "global_batch": 64, "micro_batch": 2 } })";
  CHECK(attributed_error({"model.heads=32"}, bad) == "s.json: /model/layers: must be between 1 and 2048, got 1000000");
  // A key whose name begins like an assigned one is not below it.
  CHECK(attributed_error({"training.micro_batch=2", "training.global_batch=12"}) ==
        "--set: training.global_batch: 12 is smaller than micro_batch·dp (2·8): each data-parallel rank needs at "
        "least one micro-batch");
  try {
    io::load_scenario_text(kAttributed, "s.json", {"data_parallel.shard_group=8"});
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.file() == "--set");
    CHECK(e.where() == "data_parallel.shard_group");
  }
}

// A rule between two keys blames the --set that broke it: an Ampere GPU set into a cluster that
// runs NVLink SHARP is the GPU's assignment, with what to change besides; NVLS set true on an
// Ampere cluster is NVLS's.
TEST_CASE("an Ampere GPU set into a cluster with NVLink SHARP names the GPU's assignment and the way out") {
  const std::string ampere =
      "--set: cluster.gpu: gives an Ampere GPU (a100-sxm4-80gb), and the cluster (dgx-h100-ndr) runs NVLink SHARP "
      "(cluster.intra_node.nvls), which needs a Hopper or later GPU: also set cluster.intra_node.nvls=false, or pick a "
      "cluster of these GPUs (--set cluster=dgx-a100-80g-hdr)";
  CHECK(attributed_error({"cluster.gpu=a100-sxm4-80gb"}) == ampere);
  CHECK(attributed_error({"cluster.gpu=a100-sxm4-80gb", "cluster=dgx-h100-ndr"}) == ampere);
  CHECK(attributed_error({"cluster.gpu=a100-sxm4-80gb", "cluster.intra_node.nvls=false"}) == "no error");
  CHECK(attributed_error({"cluster=dgx-a100-80g-hdr", "cluster.intra_node.nvls=true"}) ==
        "--set: cluster.intra_node.nvls: NVLink SHARP needs a Hopper or later GPU (a100-sxm4-80gb is ampere)");
  const std::string file = R"({ "model": "gpt-1.3b", "cluster": { "preset": "dgx-a100-80g-hdr",
    "intra_node": { "nvls": true } }, "parallel": { "tp": 2, "dp": 8 }, "training": { "global_batch": 64 } })";
  CHECK(attributed_error({}, file) ==
        "s.json: /cluster/intra_node/nvls: NVLink SHARP needs a Hopper or later GPU (a100-sxm4-80gb is ampere)");
}

// A fabric without an NVSwitch where the cluster preset runs NVLink SHARP: the fabric is what the
// user changed, so the fabric's key is named (the --set, or the file's pointer), never NVLS's
// key the user did not write, nor <default>; NVLS asked for on that fabric is NVLS's.
TEST_CASE("a PCIe fabric set into a cluster with NVLink SHARP names the fabric's key and the way out") {
  const std::string way_out =
      "cluster.intra_node.fabric: \"pcie\" has no NVSwitch, and the cluster (dgx-h100-ndr) runs NVLink SHARP "
      "(cluster.intra_node.nvls), whose reductions run in the switch: also set cluster.intra_node.nvls=false";
  CHECK(attributed_error({"cluster.intra_node.fabric=pcie"}) == "--set: " + way_out);
  CHECK(attributed_error({"cluster.intra_node.fabric=pcie", "cluster.intra_node.nvls=false",
                          "cluster.intra_node.bandwidth=64GB/s", "cluster.intra_node.latency=1us"}) == "no error");
  // The embedded default scenario (Llama-3-8B on dgx-h100-ndr), as `stepsim simulate --set` runs it.
  std::string on_default = "no error";
  try {
    io::load_scenario("", {"cluster.intra_node.fabric=pcie"});
  } catch (const InputError& e) {
    on_default = e.what();
  }
  CHECK(on_default == "--set: " + way_out);
  const std::string file = R"({ "model": "gpt-1.3b", "cluster": { "preset": "dgx-h100-ndr",
    "intra_node": { "fabric": "pcie", "bandwidth": "32 GB/s", "latency": "1 us" } }, "parallel": { "dp": 16 },
    "training": { "global_batch": 64, "micro_batch": 4 } })";
  CHECK(attributed_error({}, file) ==
        "s.json: /cluster/intra_node/fabric: \"pcie\" has no NVSwitch, and the cluster (dgx-h100-ndr) runs NVLink "
        "SHARP (cluster.intra_node.nvls), whose reductions run in the switch: also set cluster.intra_node.nvls=false");
  CHECK(attributed_error({"cluster.intra_node.nvls=false"}, file) == "no error");
  // NVLS given after the fabric: NVLS is what was asked for on a fabric that has no switch.
  CHECK(attributed_error({"cluster.intra_node.nvls=true"}, file) ==
        "--set: cluster.intra_node.nvls: NVLink SHARP needs \"fabric\": \"nvswitch\" (the reduction runs in the "
        "switch)");
}

// On a PCIe fabric the intra-node bandwidth is each GPU's PCIe x16 link, whose line rate is
// 32 GT/s × 16 lanes (128b/130b) ≈ 63 GB/s each way on Gen5 (Hopper), 64 GB/s as the presets
// write it: an NVLink figure left from the preset names the fabric set after it, with the way
// out; one given for the link itself is the bandwidth's.
TEST_CASE("a PCIe fabric faster than the GPU's PCIe x16 link is refused, naming the key that made it so") {
  const std::vector<std::string> pcie{"cluster.intra_node.nvls=false", "cluster.intra_node.fabric=pcie"};
  CHECK(attributed_error(pcie) ==
        "--set: cluster.intra_node.fabric: the GPUs of a \"pcie\" fabric reach each other over their PCIe links, "
        "and the PCIe Gen5 x16 link of each h100-sxm5-80gb GPU carries at most 64 GB/s each way, where "
        "cluster.intra_node.bandwidth is 450 GB/s (an NVLink figure): also set cluster.intra_node.bandwidth to the "
        "link's rate, or the peer-to-peer bandwidth measured on it");
  auto faster = pcie;
  faster.push_back("cluster.intra_node.bandwidth=100GB/s");
  CHECK(attributed_error(faster) ==
        "--set: cluster.intra_node.bandwidth: the GPUs of a \"pcie\" fabric reach each other over their PCIe "
        "links, and the PCIe Gen5 x16 link of each h100-sxm5-80gb GPU carries at most 64 GB/s each way, got 100 "
        "GB/s: give the link's rate, or the peer-to-peer bandwidth measured on it");
  auto link = pcie;
  link.push_back("cluster.intra_node.bandwidth=64GB/s");
  link.push_back("cluster.intra_node.latency=1us");
  CHECK(attributed_error(link) == "no error");
  // Ampere's PCIe Gen4 x16 carries half as much; Blackwell's Gen6 twice.
  const std::string a100 = R"({ "model": "gpt-1.3b", "cluster": { "preset": "dgx-a100-80g-hdr",
    "intra_node": { "fabric": "pcie", "bandwidth": "48 GB/s" } }, "parallel": { "dp": 16 },
    "training": { "global_batch": 64, "micro_batch": 4 } })";
  CHECK(attributed_error({}, a100) ==
        "s.json: /cluster/intra_node/bandwidth: the GPUs of a \"pcie\" fabric reach each other over their PCIe "
        "links, and the PCIe Gen4 x16 link of each a100-sxm4-80gb GPU carries at most 32 GB/s each way, got 48 "
        "GB/s: give the link's rate, or the peer-to-peer bandwidth measured on it");
  CHECK(attributed_error({"cluster=dgx-b200", "cluster.intra_node.nvls=false", "cluster.intra_node.fabric=pcie",
                          "cluster.intra_node.bandwidth=128GB/s", "cluster.intra_node.latency=1us"}) == "no error");
}

// On a PCIe fabric the intra-node latency scales NCCL's PCI hop latencies (tuning.cc's hwLat
// row, 1 us for LL): the preset's NVLink 0.6 us left in place would cost each PCIe hop at 0.6
// of NCCL's. The fabric set after it is named, with the way out; a latency given below 1 us is
// the latency's.
TEST_CASE("a PCIe fabric with NVLink's hop latency is refused, naming the key that made it so") {
  const std::vector<std::string> pcie{"cluster.intra_node.nvls=false", "cluster.intra_node.bandwidth=64GB/s",
                                      "cluster.intra_node.fabric=pcie"};
  CHECK(attributed_error(pcie) ==
        "--set: cluster.intra_node.fabric: NCCL costs a hop over PCIe at 1 us or more (its PCI hardware latency: "
        "1 us LL, 1.9 LL128, 5.7 Simple), and cluster.intra_node.latency scales those on a \"pcie\" fabric, where "
        "cluster.intra_node.latency is 0.6 us (an NVLink figure): also set cluster.intra_node.latency to 1us, or "
        "more");
  auto low = pcie;
  low.push_back("cluster.intra_node.latency=800ns");
  CHECK(attributed_error(low).starts_with("--set: cluster.intra_node.latency: NCCL costs a hop over PCIe at 1 us"));
  auto measured = pcie;
  measured.push_back("cluster.intra_node.latency=1.5us");
  CHECK(attributed_error(measured) == "no error");
}

// The node size a --set gives against the NVLink domain the cluster preset brought: the file
// wrote neither key, so the --set is named, and where the domain's 72 GPUs came from (it once
// named the file's /cluster/nvlink_domain, which the file never wrote).
TEST_CASE("a --set node size that the preset's NVLink domain does not hold whole is named by --set") {
  const std::string rack = R"({ "model": "llama3-8b", "cluster": {"preset": "gb200-nvl72"},
    "parallel": {"tp": 8, "dp": 2, "sequence_parallel": true},
    "training": {"framework": "megatron", "global_batch": 2, "micro_batch": 1} })";
  CHECK(attributed_error({"cluster.gpus_per_node=16"}, rack) ==
        "--set: cluster.gpus_per_node: gives nodes of 16 GPUs, and the cluster's NVLink domain (cluster.nvlink_domain "
        "of the gb200-nvl72 preset) is 72 GPUs, no whole number of them: also set cluster.nvlink_domain to a multiple "
        "of 16");
  // A domain the file writes is the file's, and the --set still changed what made it wrong.
  const std::string half = R"({ "model": "llama3-8b", "cluster": {"preset": "gb200-nvl72", "nvlink_domain": 36},
    "parallel": {"tp": 8, "dp": 2, "sequence_parallel": true},
    "training": {"framework": "megatron", "global_batch": 2, "micro_batch": 1} })";
  CHECK(attributed_error({"cluster.gpus_per_node=8"}, half) ==
        "--set: cluster.gpus_per_node: gives nodes of 8 GPUs, and the cluster's NVLink domain (cluster.nvlink_domain) "
        "is 36 GPUs, no whole number of them: also set cluster.nvlink_domain to a multiple of 8");
  // Both by --set: the domain's own assignment is named, as before.
  CHECK(attributed_error({"cluster.gpus_per_node=16", "cluster.nvlink_domain=72"}, rack) ==
        "--set: cluster.nvlink_domain: must be a whole number of nodes of 16 GPUs, got 72");
}
