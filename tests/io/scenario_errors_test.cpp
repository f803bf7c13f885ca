// Bad scenarios: each error names the file, the JSON path (or line and column) and what was
// expected, word for word.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;

namespace {

// A scenario with the given sections and a batch of 128 sequences in micro-batches of 2.
std::string scenario(const std::string& model, const std::string& cluster, const std::string& parallel) {
  return R"({ "model": )" + model + R"(, "cluster": )" + cluster + R"(, "parallel": )" + parallel +
         R"(, "training": { "global_batch": 128, "micro_batch": 2 } })";
}

std::string error_in(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    io::load_scenario_text(text, "scenario.json", sets);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

const std::string kModel = R"("llama3-8b")";
const std::string kCluster = R"("dgx-h100-ndr")";
const std::string kParallel = R"({ "tp": 8, "dp": 8 })";

}  // namespace

TEST_CASE("the valid scenario the error tests start from loads") {
  CHECK(error_in(scenario(kModel, kCluster, kParallel)) == "no error");
}

TEST_CASE("a bare number for a NIC bandwidth names the file, the path and the units") {
  const auto text =
      scenario(kModel, R"({ "preset": "dgx-h100-ndr", "inter_node": { "nic_bandwidth": 400 } })", kParallel);
  CHECK(
      error_in(text) ==
      R"(scenario.json: /cluster/inter_node/nic_bandwidth: '400' has no unit (expected e.g. "400 Gb/s" or "50 GB/s"))");
}

TEST_CASE("an unknown key suggests the closest known one") {
  CHECK(error_in(scenario(R"({ "preset": "llama3-8b", "layrs": 4 })", kCluster, kParallel)) ==
        "scenario.json: /model/layrs: unknown key 'layrs' (did you mean 'layers'?)");
  CHECK(
      error_in(scenario(kModel, kCluster, R"({ "tp": 8, "dp": 8, "sequence_paralel": true })")) ==
      "scenario.json: /parallel/sequence_paralel: unknown key 'sequence_paralel' (did you mean 'sequence_parallel'?)");
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 8, "dp": 8, "zzz": 1 })")) ==
        "scenario.json: /parallel/zzz: unknown key 'zzz' (expected one of tp, pp, dp, cp, ep, etp, "
        "sequence_parallel, schedule, virtual_stages, stage_layers)");
}

TEST_CASE("an unknown preset or enumeration value suggests the closest name") {
  CHECK(error_in(scenario(R"("llama3-7b")", kCluster, kParallel)) ==
        "scenario.json: /model: unknown model preset 'llama3-7b' (did you mean 'llama3-8b'?)");
  CHECK(error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "gpu": "h100" })", kParallel)) ==
        "scenario.json: /cluster/gpu: unknown gpu preset 'h100' (did you mean 'h100-sxm5-80gb'?)");
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 8, "dp": 8, "schedule": "1f2b" })")) ==
        "scenario.json: /parallel/schedule: unknown value '1f2b' (did you mean '1f1b'?)");
}

TEST_CASE("a value of the wrong type names the expected type") {
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": "8", "dp": 8 })")) ==
        R"(scenario.json: /parallel/tp: expected an integer, got a string ("8"))");
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 8.5, "dp": 8 })")) ==
        "scenario.json: /parallel/tp: expected an integer, got a number (8.5)");
  CHECK(error_in(scenario(kModel, kCluster, R"([8, 8])")) ==
        "scenario.json: /parallel: expected an object, got a list");
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 8, "dp": 8, "sequence_parallel": 1 })")) ==
        "scenario.json: /parallel/sequence_parallel: expected true or false, got a number (1)");
  CHECK(error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "provenance": { "fitted": "maybe" } })", kParallel)) ==
        R"(scenario.json: /cluster/provenance/fitted: expected true, false or "partly", got a string ("maybe"))");
  CHECK(error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "provenance": { "fitted": "Partly" } })",
                          kParallel)) == "no error");
}

TEST_CASE("malformed JSON is reported with its line and column") {
  const std::string text = "{\n  \"model\": \"llama3-8b\",\n  \"parallel\": { \"tp\": 8 \"dp\": 8 }\n}\n";
  CHECK(error_in(text) == "scenario.json: line 3, column 25: invalid JSON: syntax error at '\"dp\": 8 }'");
  CHECK(error_in("{ \"model\": \"llama3-8b\",\n") ==
        "scenario.json: line 2, column 1: invalid JSON: the document ends before every '{', '[' and '\"' is closed");
  CHECK(error_in("{} x") ==
        "scenario.json: line 1, column 4: invalid JSON: unexpected 'x' after the end of the document");
  // Every bracket closed, and a comment not (comments are allowed): the comment is what is open.
  CHECK(error_in("{} /* the default") ==
        "scenario.json: line 1, column 18: invalid JSON: the document ends inside a /* comment (expected its "
        "closing */)");
  CHECK(error_in("{ \"model\": \"llama3-8b\", /* a */ /* b *") ==
        "scenario.json: line 1, column 39: invalid JSON: the document ends inside a /* comment (expected its "
        "closing */)");
  CHECK(error_in("{} /") ==
        "scenario.json: line 1, column 5: invalid JSON: the document ends with a '/' that starts no comment (// "
        "or /*)");
  // A '/*' inside a string starts no comment.
  CHECK(error_in("{ \"model\": \"a/*b\"") ==
        "scenario.json: line 1, column 18: invalid JSON: the document ends before every '{', '[' and '\"' is closed");
  // Nothing at all is said as such, not as an unclosed '{'.
  CHECK(error_in("") == "scenario.json: is empty: expected a JSON document");
  CHECK(error_in(" \r\n\t\n") == "scenario.json: is empty: expected a JSON document");
  CHECK(error_in("\xEF\xBB\xBF\n") == "scenario.json: is empty: expected a JSON document");
}

TEST_CASE("a UTF-8 byte order mark before the document is skipped, and errors keep the columns an editor shows") {
  const std::string bom = "\xEF\xBB\xBF";
  CHECK(error_in(bom + scenario(kModel, kCluster, kParallel)) == "no error");
  CHECK(error_in(bom + "{} x") ==
        "scenario.json: line 1, column 4: invalid JSON: unexpected 'x' after the end of the document");
  // Anywhere else it is a character JSON does not allow between values.
  CHECK(error_in("{" + bom + "}").starts_with("scenario.json: line 1, column 2: invalid JSON: syntax error"));
}

TEST_CASE("heads that tp does not divide are rejected") {
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 3, "dp": 8 })")) ==
        "scenario.json: /parallel/tp: model.heads (32) is not divisible by tp (3)");
  CHECK(error_in(scenario(R"({ "preset": "llama3-8b", "kv_heads": 8 })", kCluster, R"({ "tp": 8, "dp": 8 })")) ==
        "no error");
  CHECK(error_in(scenario(R"({ "preset": "gpt-18b", "kv_heads": 12 })", kCluster, kParallel)) ==
        "scenario.json: /parallel/tp: model.kv_heads (12) is not divisible by parallel.tp (8): TP splits the key/value "
        "heads over its ranks (Megatron-Core's num_query_groups per partition, torchtitan's wk and wv shards) and "
        "never replicates them; use a tp that divides kv_heads");
}

// Megatron-Core's attention takes divide(num_query_groups, tp) query groups per rank, and divide
// asserts that tp divides them (megatron/core/transformer/attention.py, megatron/core/utils.py);
// torchtitan's TP plan shards wk and wv column-wise and views each rank's share as whole heads.
// Neither replicates key/value heads when tp exceeds them.
TEST_CASE("fewer key/value heads than tp are refused, as Megatron-Core and torchtitan refuse them") {
  CHECK(error_in(scenario(R"({ "preset": "llama3-8b", "kv_heads": 4 })", kCluster, R"({ "tp": 8, "dp": 8 })"))
            .starts_with("scenario.json: /parallel/tp: model.kv_heads (4) is not divisible by parallel.tp (8)"));
  CHECK(error_in(scenario(R"({ "preset": "llama3-8b", "kv_heads": 16 })", kCluster, R"({ "tp": 32, "dp": 2 })"))
            .starts_with("scenario.json: /parallel/tp: model.kv_heads (16) is not divisible by parallel.tp (32)"));
  // A --set of the heads is named as the assignment.
  CHECK(error_in(scenario(kModel, kCluster, kParallel), {"model.kv_heads=4"})
            .starts_with("--set: model.kv_heads: model.kv_heads (4) is not divisible by parallel.tp (8)"));
}

TEST_CASE("a cluster whose GPU count differs from tp·pp·dp·cp is rejected") {
  CHECK(
      error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "nodes": 16 })", kParallel)) ==
      "scenario.json: /cluster/nodes: 16 nodes of 8 GPUs do not match the 64 GPUs of tp·pp·dp·cp (that needs 8 nodes)");
  CHECK(error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "nodes": 8 })", kParallel)) == "no error");
}

TEST_CASE("an NVLink domain is whole nodes on a switched NVLink fabric") {
  CHECK(error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "nvlink_domain": 12 })", kParallel)) ==
        "scenario.json: /cluster/nvlink_domain: must be a whole number of nodes of 8 GPUs, got 12");
  CHECK(error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "nvlink_domain": 4 })", kParallel)) ==
        "scenario.json: /cluster/nvlink_domain: must be a whole number of nodes of 8 GPUs, got 4");
  const std::string pcie =
      R"({ "preset": "dgx-h100-ndr", "nvlink_domain": 16, "intra_node": { "fabric": "pcie", "nvls": false } })";
  CHECK(error_in(scenario(kModel, pcie, kParallel)) ==
        "scenario.json: /cluster/nvlink_domain: an NVLink domain beyond one node needs \"fabric\": \"nvswitch\" "
        "(NVLink Switch trays), got 16 GPUs over a node of 8");
  CHECK(error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "nvlink_domain": -8 })", kParallel))
            .starts_with("scenario.json: /cluster/nvlink_domain: "));
  CHECK(error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "nvlink_domain": 64 })", kParallel)) == "no error");
  CHECK(error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "nvlink_domain": 8 })", kParallel)) == "no error");
}

TEST_CASE("TP communication overlap needs the TP group inside one NVLink domain, not one node") {
  const std::string tp16 = R"({ "tp": 16, "dp": 4, "sequence_parallel": true })";
  // TP 16 needs 16 key/value heads to split.
  const std::string model = R"({ "preset": "llama3-8b", "kv_heads": 32 })";
  const std::vector<std::string> overlap{"tensor_parallel.comm_overlap=true"};
  CHECK(error_in(scenario(model, kCluster, tp16), overlap) ==
        "--set: tensor_parallel.comm_overlap: needs the TP group inside one NVLink domain (tp 16 > 8 GPUs "
        "per domain): the overlap copies over NVLink");
  CHECK(error_in(scenario(model, R"({ "preset": "dgx-h100-ndr", "nvlink_domain": 16 })", tp16), overlap) == "no error");
}

// MXFP8 and NVFP4 GEMMs are block-scaled tensor-core instructions of Blackwell (sm_100):
// Transformer Engine refuses both recipes on Hopper and Ampere, and so does a scenario.
TEST_CASE("block-scaled precisions are refused on GPUs without block-scaled tensor cores") {
  CHECK(error_in(scenario(kModel, kCluster, kParallel), {"training.precision=nvfp4"}) ==
        "--set: training.precision: nvfp4 needs a Blackwell GPU (block-scaled tensor cores); "
        "h100-sxm5-80gb is Hopper");
  CHECK(error_in(scenario(kModel, R"("dgx-a100-80g-hdr")", kParallel), {"training.precision=mxfp8"}) ==
        "--set: training.precision: mxfp8 needs a Blackwell GPU (block-scaled tensor cores); "
        "a100-sxm4-80gb is Ampere");
  CHECK(error_in(scenario(kModel, R"("dgx-b200")", kParallel), {"training.precision=mxfp8"}) == "no error");
  CHECK(error_in(scenario(kModel, R"("dgx-b200")", kParallel),
                 {"training.precision=nvfp4", "cluster.gpu.flops.fp4=\"0 TFLOPS\""}) ==
        "--set: training.precision: nvfp4 needs cluster.gpu.flops.fp4 > 0 (b200 has none)");
}

// Current scaling is a recipe of per-tensor FP8; under another precision it would do nothing.
TEST_CASE("fp8 current scaling is refused with a precision other than fp8") {
  CHECK(error_in(scenario(kModel, kCluster, kParallel), {"training.fp8_scaling=current"}) ==
        "--set: training.fp8_scaling: current scaling is a recipe of training.precision fp8, not of bf16");
  CHECK(error_in(scenario(kModel, kCluster, kParallel), {"training.precision=fp8", "training.fp8_scaling=current"}) ==
        "no error");
}

TEST_CASE("pipeline, batch and precision rules name the key at fault") {
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 8, "pp": 3, "dp": 1 })")) ==
        "scenario.json: /parallel/pp: model.layers (32) is not divisible by pp·virtual_stages (3·1 = 3); give "
        "parallel.stage_layers for an uneven split");
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 8, "pp": 2, "dp": 4, "schedule": "interleaved" })")) ==
        "scenario.json: /parallel/virtual_stages: the interleaved schedule needs virtual_stages >= 2, got 1");
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 8, "dp": 8, "virtual_stages": 2 })")) ==
        "scenario.json: /parallel/virtual_stages: virtual_stages 2 needs \"schedule\": \"interleaved\"");
  CHECK(error_in(scenario(kModel, kCluster, kParallel), {"training.micro_batch=3"}) ==
        "scenario.json: /training/global_batch: 128 is not divisible by micro_batch·dp (3·8)");
  CHECK(error_in(scenario(kModel, R"("dgx-a100-80g-hdr")", kParallel), {"training.precision=fp8"}) ==
        "--set: training.precision: fp8 needs cluster.gpu.flops.fp8 > 0 (a100-sxm4-80gb has none)");
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 8, "dp": 8, "ep": 2 })")) ==
        "scenario.json: /parallel/ep: expert parallelism needs an MoE model (model.moe.experts > 0)");
  CHECK(error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "inter_node": { "oversubscription": 0.5 } })",
                          kParallel)) ==
        "scenario.json: /cluster/inter_node/oversubscription: must be between 1 and 1024, got "
        "0.5");
  CHECK(
      error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "inter_node": { "nodes_per_leaf": 0 } })", kParallel)) ==
      "scenario.json: /cluster/inter_node/nodes_per_leaf: must be between 1 and 1048576, got 0");
  // An oversubscribed rail-optimized fabric is simulated now (each rail's leaf has its uplinks).
  CHECK(error_in(scenario(kModel, R"({ "preset": "dgx-h100-ndr", "inter_node": { "oversubscription": 2 } })",
                          kParallel)) == "no error");
}

TEST_CASE("bad --set overrides name --set and the key") {
  const auto text = scenario(kModel, kCluster, kParallel);
  CHECK(error_in(text, {"model.layrs=4"}) == "--set: model.layrs: unknown key 'layrs' (did you mean 'layers'?)");
  CHECK(error_in(text, {"parallel.tp"}) ==
        "--set: parallel.tp: expected KEY=VALUE, e.g. parallel.tp=4 or cluster.inter_node.nic_bandwidth=\"200 Gb/s\"");
  CHECK(error_in(text, {"cluster.inter_node.nic_bandwidth=400"}) ==
        R"(--set: cluster.inter_node.nic_bandwidth: '400' has no unit (expected e.g. "400 Gb/s" or "50 GB/s"))");
  CHECK(error_in(text, {"parallel.tp=eight"}) == R"(--set: parallel.tp: expected an integer, got a string ("eight"))");
  CHECK(error_in(text, {"modl=llama3-70b"}) == "--set: modl: unknown key 'modl' (did you mean 'model'?)");
  CHECK(error_in(text, {"model..layers=4"}) == "--set: model..layers: empty key name (expected e.g. model.layers)");
}

TEST_CASE("optimizer-state and main-gradient precisions other than fp32 and bf16 are refused") {
  const auto base = scenario(kModel, kCluster, kParallel);
  CHECK(error_in(base, {"training.optimizer_state=fp8"}) ==
        "--set: training.optimizer_state: must be fp32 or bf16, got fp8");
  CHECK(error_in(base, {"training.main_grad=fp16"}) == "--set: training.main_grad: must be fp32 or bf16, got fp16");
  CHECK(error_in(base, {"training.precision=fp32", "training.main_grad=bf16"}) ==
        "--set: training.main_grad: bf16 main gradients need mixed precision (training.precision is fp32)");
  CHECK(error_in(base, {"training.optimizer_state=bf16", "training.main_grad=bf16"}) == "no error");
}

// A data-parallel key set away from its default under a kind that does not run it would do
// nothing; at its default it is inert and accepted.
TEST_CASE("a data-parallel key of another kind than the scenario's is refused away from its default") {
  const std::string text = scenario(kModel, kCluster, kParallel);
  CHECK(error_in(text, {"data_parallel.kind=zero1", "data_parallel.fsdp_version=2"}) ==
        "--set: data_parallel.fsdp_version: is FSDP's (data_parallel.kind fsdp or hsdp): under kind zero1 "
        "there are no FSDP units for it to act on (leave it at its default)");
  for (const char* set : {"data_parallel.reshard_after_forward=false", "data_parallel.forward_prefetch=true",
                          "data_parallel.backward_prefetch=post", "data_parallel.max_inflight_all_gathers=4"}) {
    INFO(set);
    CHECK(error_in(text, {"data_parallel.kind=ddp", set})
              .find("is FSDP's (data_parallel.kind fsdp or hsdp): under "
                    "kind ddp") != std::string::npos);
    CHECK(error_in(text, {"data_parallel.kind=fsdp", set}) == "no error");
    CHECK(error_in(text, {"data_parallel.kind=hsdp", set}) == "no error");
  }
  CHECK(error_in(text, {"data_parallel.kind=fsdp", "data_parallel.shard_group=8"}) ==
        "--set: data_parallel.shard_group: is HSDP's (data_parallel.kind hsdp): kind fsdp has no shard "
        "groups (leave it at 0)");
  CHECK(error_in(text, {"data_parallel.kind=hsdp", "data_parallel.shard_group=8"}) == "no error");
  // Bucket sizes in MiB are DDP's: ZeRO sizes its buckets in parameters, FSDP has none.
  for (const std::string key : {"bucket_cap_mb", "first_bucket_mb"}) {
    INFO(key);
    const std::string set = "data_parallel." + key + "=4";
    CHECK(error_in(text, {"data_parallel.kind=fsdp", set})
              .find("sizes DDP's gradient buckets (data_parallel.kind "
                    "ddp): FSDP's kind fsdp") != std::string::npos);
    CHECK(
        error_in(text, {"data_parallel.kind=zero2", set}) ==
        "--set: data_parallel." + key +
            ": sizes DDP's gradient buckets (data_parallel.kind ddp): the distributed optimizer of kind zero2 sizes "
            "its buckets in parameters, max(4e7, 1e6·dp) as Megatron-Core does unless data_parallel.bucket_parameters "
            "says otherwise (leave this key at its default)");
    CHECK(error_in(text, {"data_parallel.kind=ddp", set}) == "no error");
  }
  // And Megatron-Core's bucket size in parameters is its own: the distributed optimizer's, and
  // its DDP's under the frameworks that run Megatron-Core, where the MiB sizes are refused.
  CHECK(error_in(text, {"data_parallel.kind=ddp", "data_parallel.bucket_parameters=50000000"}) ==
        "--set: data_parallel.bucket_parameters: sizes Megatron-Core's gradient buckets (data_parallel.kind "
        "zero1 or zero2, or ddp under training.framework megatron or nemo): kind ddp under training.framework "
        "unspecified is PyTorch's DDP, which sizes its buckets with bucket_cap_mb and first_bucket_mb (leave it at 0)");
  CHECK(error_in(text, {"data_parallel.kind=hsdp", "data_parallel.bucket_parameters=50000000"})
            .find("FSDP's kind hsdp reduces each unit's gradients instead (leave it at 0)") != std::string::npos);
  CHECK(error_in(text, {"data_parallel.kind=zero1", "data_parallel.bucket_parameters=50000000"}) == "no error");
  for (const char* framework : {"training.framework=megatron", "training.framework=nemo"}) {
    INFO(framework);
    CHECK(error_in(text, {framework, "data_parallel.kind=ddp", "data_parallel.bucket_parameters=50000000"}) ==
          "no error");
    CHECK(
        error_in(text, {framework, "data_parallel.kind=ddp", "data_parallel.first_bucket_mb=4"})
            .find(
                "--set: data_parallel.first_bucket_mb: sizes PyTorch DDP's gradient buckets: under training.framework "
                "") != std::string::npos);
  }
  CHECK(error_in(text, {"training.framework=megatron", "data_parallel.kind=ddp", "data_parallel.bucket_cap_mb=4"}) ==
        "--set: data_parallel.bucket_cap_mb: sizes PyTorch DDP's gradient buckets: under training.framework "
        "megatron the DDP is Megatron-Core's, which sizes its buckets in parameters, max(4e7, 1e6·dp) unless "
        "data_parallel.bucket_parameters says otherwise (leave this key at its default)");
  CHECK(error_in(text, {"training.framework=pytorch", "data_parallel.kind=ddp", "data_parallel.bucket_cap_mb=4"}) ==
        "no error");
  CHECK(error_in(text, {"data_parallel.kind=zero2", "data_parallel.bucket_parameters=-1"}) ==
        "--set: data_parallel.bucket_parameters: must be between 0 and 1000000000000, got -1");
  CHECK(error_in(text, {"data_parallel.kind=hsdp", "data_parallel.overlap_grad_reduce=false"})
            .find("overlaps gradient buckets (data_parallel.kind ddp, zero1, zero2): FSDP's kind hsdp") !=
        std::string::npos);
  CHECK(error_in(text, {"data_parallel.kind=zero2", "data_parallel.overlap_grad_reduce=false"}) == "no error");
  CHECK(error_in(text, {"data_parallel.kind=ddp", "data_parallel.overlap_param_gather=true"}) ==
        "--set: data_parallel.overlap_param_gather: true needs data_parallel.kind zero1 or zero2: only the "
        "distributed optimizer gathers parameters after the step, and kind ddp does not");
  CHECK(error_in(text, {"data_parallel.kind=zero1", "data_parallel.overlap_param_gather=true"}) == "no error");
  // At their defaults they are accepted under every kind.
  CHECK(error_in(text, {"data_parallel.kind=zero1", "data_parallel.fsdp_version=1", "data_parallel.shard_group=0",
                        "data_parallel.reshard_after_forward=true"}) == "no error");
  CHECK(error_in(text, {"data_parallel.kind=fsdp", "data_parallel.bucket_cap_mb=25",
                        "data_parallel.overlap_param_gather=false"}) == "no error");
}

// FSDP2 gathers one unit ahead each way by itself and has no rate limiter.
TEST_CASE("FSDP1's prefetch keys and AllGather limit are refused under FSDP2 away from their defaults") {
  const std::string text = scenario(kModel, kCluster, kParallel);
  for (const char* set : {"data_parallel.forward_prefetch=true", "data_parallel.backward_prefetch=post",
                          "data_parallel.max_inflight_all_gathers=4"}) {
    INFO(set);
    const std::string error = error_in(text, {"data_parallel.kind=fsdp", "data_parallel.fsdp_version=2", set});
    CHECK(error.find("is FSDP1's: FSDP2 (fsdp_version 2) gathers the next unit ahead in the forward and the backward "
                     "by itself and limits no AllGathers (leave it at its default)") != std::string::npos);
    CHECK(error_in(text, {"data_parallel.kind=fsdp", "data_parallel.fsdp_version=1", set}) == "no error");
  }
  CHECK(error_in(text, {"data_parallel.kind=hsdp", "data_parallel.fsdp_version=2",
                        "data_parallel.forward_prefetch=false", "data_parallel.max_inflight_all_gathers=2"}) ==
        "no error");
}

// Megatron-FSDP is Megatron-Core's, gathers two TransformerLayers at most in place and frees
// each after its forward; its buffers are modelled for BF16 and per-tensor FP8 weights.
TEST_CASE("Megatron-FSDP is refused outside Megatron-Core and with settings it does not have") {
  const std::string text = scenario(kModel, kCluster, kParallel);
  const std::string megatron = "data_parallel.fsdp_impl=megatron";
  CHECK(error_in(text, {"data_parallel.kind=fsdp", "training.framework=nemo", megatron}) == "no error");
  CHECK(error_in(text, {"data_parallel.kind=hsdp", "training.framework=megatron", megatron}) == "no error");
  CHECK(error_in(text, {"data_parallel.kind=fsdp", "training.framework=torchtitan", megatron}) ==
        "--set: data_parallel.fsdp_impl: megatron is Megatron-Core's FSDP (use_megatron_fsdp): training.framework "
        "must be megatron or nemo, got torchtitan");
  CHECK(error_in(text, {"data_parallel.kind=zero1", "training.framework=nemo", megatron})
            .find("is FSDP's (data_parallel.kind fsdp or hsdp): under kind zero1") != std::string::npos);
  const auto refused = [&](const std::string& set, const std::string& where) {
    const std::string error = error_in(text, {"data_parallel.kind=fsdp", "training.framework=nemo", megatron, set});
    INFO(error);
    return error.starts_with("--set: " + where + ": ");
  };
  CHECK(refused("data_parallel.fsdp_version=2", "data_parallel.fsdp_version"));
  CHECK(refused("data_parallel.reshard_after_forward=false", "data_parallel.reshard_after_forward"));
  CHECK(refused("data_parallel.max_inflight_all_gathers=4", "data_parallel.max_inflight_all_gathers"));
  // Its hooks gather one layer ahead in both passes, with no setting for either.
  CHECK(refused("data_parallel.forward_prefetch=true", "data_parallel.forward_prefetch"));
  CHECK(refused("data_parallel.backward_prefetch=post", "data_parallel.backward_prefetch"));
  CHECK(refused("data_parallel.backward_prefetch=none", "data_parallel.backward_prefetch"));
  CHECK(refused("training.precision=mxfp8", "training.precision"));
  CHECK(refused("training.precision=nvfp4", "training.precision"));
  CHECK(error_in(text, {"data_parallel.kind=fsdp", "training.framework=nemo", megatron, "training.precision=fp8"}) ==
        "no error");
  CHECK(error_in(text, {"data_parallel.kind=fsdp", "data_parallel.fsdp_impl=typo"}).find("data_parallel.fsdp_impl") !=
        std::string::npos);
}

// Megatron-Core's EP overlap runs each layer through its fine-grained schedule plan, outside the
// transformer block whose CPU offload context offloads the layers: the two together are refused.
TEST_CASE("the EP all-to-all overlap with activation offload is refused") {
  const std::string text =
      std::string(STEPSIM_SOURCE_DIR) + "/configs/validation/blackwell/mb260401-h100-qwen3-30b-fp8.json";
  try {
    (void)io::load_scenario(text, {"model.moe.a2a_overlap=true", "training.activation_offload_layers=24"});
    FAIL("accepted");
  } catch (const stepsim::InputError& e) {
    CHECK(e.file() == "--set");
    CHECK(e.where() == "training.activation_offload_layers");
    CHECK(e.message() ==
          "24 with model.moe.a2a_overlap is not simulated: Megatron-Core's EP overlap runs the layers outside the "
          "transformer block whose CPU offload context offloads them");
  }
  CHECK_NOTHROW(io::load_scenario(text, {"training.activation_offload_layers=24"}));
}

// DeepSpeed's ZeRO stages 1 and 2 all-gather the updated parameters after the optimizer step
// (stage_1_and_2.py, all_gather_dp_groups): the overlap with the next forward is Megatron-Core's,
// refused under DeepSpeed rather than simulated as if it ran.
TEST_CASE("under DeepSpeed overlap_param_gather is refused") {
  const std::string text = scenario(kModel, kCluster, kParallel);
  for (const char* kind : {"zero1", "zero2"}) {
    INFO(kind);
    CHECK(error_in(text, {"training.framework=deepspeed", std::string("data_parallel.kind=") + kind,
                          "data_parallel.overlap_param_gather=true"}) ==
          "--set: data_parallel.overlap_param_gather: true under training.framework deepspeed: DeepSpeed's "
          "ZeRO all-gathers the updated parameters after its optimizer step, before the next forward (overlapping "
          "the gather with the forward is Megatron-Core's --overlap-param-gather); use false");
    CHECK_NOTHROW(io::load_scenario_text(text, "scenario.json",
                                         {"training.framework=megatron", std::string("data_parallel.kind=") + kind,
                                          "data_parallel.overlap_param_gather=true"}));
  }
}

// DeepSpeed's pipeline engine runs ZeRO stage 0 or 1 only and reduces every stage's gradients
// after the whole schedule (deepspeed/runtime/pipe: the engine asserts ZeRO-2 and -3 away, and
// TrainSchedule ends with ReduceGrads): other kinds are refused, and overlap_grad_reduce is off
// whatever the scenario says (the engine has no such choice; the notes say so).
TEST_CASE(
    "under DeepSpeed's pipeline engine only ddp and zero1 run, and the gradients are reduced after the schedule") {
  const std::string text = scenario(kModel, kCluster, R"({ "tp": 8, "pp": 2, "dp": 4 })");
  const std::vector<std::string> deepspeed = {"training.framework=deepspeed"};
  for (const char* kind : {"zero2", "fsdp"}) {
    INFO(kind);
    auto sets = deepspeed;
    sets.push_back(std::string("data_parallel.kind=") + kind);
    CHECK(error_in(text, sets) == "--set: data_parallel.kind: " + std::string(kind) +
                                      " under training.framework deepspeed with parallel.pp 2: DeepSpeed's pipeline "
                                      "engine runs ZeRO stage 0 or 1 only (ZeRO-2 and ZeRO-3 are incompatible with "
                                      "it); use ddp or zero1");
  }
  // HSDP is no kind of DeepSpeed's at all, with or without its pipeline engine.
  CHECK(error_in(text, {"training.framework=deepspeed", "data_parallel.kind=hsdp"})
            .starts_with("--set: data_parallel.kind: data_parallel.kind hsdp is not a kind of training.framework "
                         "deepspeed: "));
  for (const char* kind : {"ddp", "zero1"}) {
    for (const char* overlap : {"true", "false"}) {
      INFO(kind << ", overlap_grad_reduce " << overlap);
      const auto s = io::load_scenario_text(text, "scenario.json",
                                            {"training.framework=deepspeed", std::string("data_parallel.kind=") + kind,
                                             std::string("data_parallel.overlap_grad_reduce=") + overlap});
      CHECK_FALSE(s.data_parallel.overlap_grad_reduce);
    }
  }
  // Its buffers are its own: no bucket size applies, and one set is refused rather than ignored.
  for (const char* key : {"bucket_cap_mb=100", "first_bucket_mb=5", "bucket_parameters=1000000"}) {
    INFO(key);
    const std::string name = std::string(key).substr(0, std::string(key).find('='));
    CHECK(error_in(text,
                   {"training.framework=deepspeed", "data_parallel.kind=zero1", std::string("data_parallel.") + key}) ==
          "--set: data_parallel." + name +
              ": set under training.framework deepspeed with parallel.pp 2: DeepSpeed's pipeline engine all-reduces "
              "each stage's gradients after the schedule in buffers of its own (5e8 elements), so no bucket size "
              "applies; leave it unset");
  }
  // Its schedule is its own 1F1B.
  for (const char* schedule : {"gpipe", "interleaved", "zb-h1", "dualpipe"}) {
    INFO(schedule);
    CHECK(
        error_in(text, {"training.framework=deepspeed", std::string("parallel.schedule=") + schedule,
                        "parallel.virtual_stages=" + std::string(schedule == std::string("interleaved") ? "2" : "1")})
            .find(
                "--set: parallel.schedule: under training.framework deepspeed with parallel.pp 2: DeepSpeed's pipeline "
                "engine runs its own 1F1B schedule (TrainSchedule) and no other; use 1f1b") != std::string::npos);
  }
  // Without a pipeline DeepSpeed's engine at ZeRO stage 0 (ddp) also reduces after the backward
  // unless the scenario gives overlap_grad_reduce (engine.py: allreduce_gradients after the
  // backward), and the other frameworks' pipelines overlap by default.
  const std::string flat = scenario(kModel, kCluster, kParallel);
  CHECK_FALSE(io::load_scenario_text(flat, "scenario.json", deepspeed).data_parallel.overlap_grad_reduce);
  CHECK(io::load_scenario_text(flat, "scenario.json",
                               {"training.framework=deepspeed", "data_parallel.overlap_grad_reduce=true"})
            .data_parallel.overlap_grad_reduce);
  CHECK(
      io::load_scenario_text(text, "scenario.json", {"training.framework=megatron"}).data_parallel.overlap_grad_reduce);
}

// An H100 node runs NVLink SHARP by default, which needs an NVSwitch; a fabric that is not
// simulated at all is refused first, with the same words as when SHARP is off.
TEST_CASE("an NVLink mesh is refused as not simulated before what NVLink SHARP would need of it") {
  const std::string mesh = R"({ "preset": "dgx-h100-ndr", "intra_node": { "fabric": "nvlink-mesh" } })";
  const std::string mesh_without_sharp =
      R"({ "preset": "dgx-h100-ndr", "intra_node": { "fabric": "nvlink-mesh", "nvls": false } })";
  const std::string refusal =
      R"(scenario.json: /cluster/intra_node/fabric: "nvlink-mesh" is not simulated yet (use "nvswitch" or "pcie"))";
  CHECK(error_in(scenario(kModel, mesh_without_sharp, kParallel)) == refusal);
  CHECK(error_in(scenario(kModel, mesh, kParallel)) == refusal);
  CHECK(error_in(scenario(kModel, kCluster, kParallel), {"cluster.intra_node.fabric=nvlink-mesh"})
            .find("\"nvlink-mesh\" is not simulated yet") != std::string::npos);
}

// A NUL ends the C string a file is opened by: "a.json\0junk" would open a.json, and an error
// printed through what() would end at the NUL, the message lost.
TEST_CASE("a NUL in a calibration file name is refused at its pointer, from the file or a --set") {
  const std::string text = R"({ "preset": "ddp-1.3b-64xa100", "calibration": )";
  CHECK(error_in(text + R"("a.calib.json\u0000junk" })") ==
        "scenario.json: /calibration/0: expected a calibration file name without NUL characters, got "
        "\"a.calib.json\\u0000junk\"");
  CHECK(error_in(text + R"(["a.calib.json", "b.calib.json\u0000"] })") ==
        "scenario.json: /calibration/1: expected a calibration file name without NUL characters, got "
        "\"b.calib.json\\u0000\"");
  CHECK(error_in(R"({ "preset": "ddp-1.3b-64xa100" })", {R"(calibration="a.calib.json\u0000junk")"}) ==
        "--set: calibration[0]: expected a calibration file name without NUL characters, got "
        "\"a.calib.json\\u0000junk\"");
}

TEST_CASE("an error naming text with a NUL prints it escaped, whole") {
  CHECK(error_in(scenario(R"("x\u0000y")", kCluster, kParallel))
            .starts_with("scenario.json: /model: unknown model preset 'x\\u0000y' ("));
  const InputError e(std::string("a.json\0b", 8), std::string("/k\0", 3), std::string("got \0\0", 6));
  CHECK(std::string(e.what()) == "a.json\\u0000b: /k\\u0000: got \\u0000\\u0000");
  CHECK(e.file() == "a.json\\u0000b");
  CHECK(e.where() == "/k\\u0000");
  CHECK(e.message() == "got \\u0000\\u0000");
}

// Transformer Engine's TP overlap copies over NVLink: a TP group across two NVLink domains has
// no NVLink between its halves. TP groups of 16 consecutive ranks on 72-GPU racks: group 4,
// ranks 64 to 79, spans racks 0 and 1 (72 = 4·16 + 8); the tp <= 72 check let it through.
TEST_CASE("TP communication overlap is refused when a TP group crosses an NVLink domain's boundary") {
  const auto straddle = [](int dp) {
    // TP 16 needs 16 key/value heads to split.
    return R"({ "model": { "preset": "llama3-70b", "kv_heads": 16 }, "cluster": "gb200-nvl72",
      "parallel": {"tp": 16, "pp": 1, "dp": )" +
           std::to_string(dp) + R"(, "sequence_parallel": true},
      "training": {"framework": "megatron", "global_batch": 36, "micro_batch": 1, "precision": "fp8"},
      "data_parallel": {"kind": "zero1"}, "tensor_parallel": {"comm_overlap": true} })";
  };
  CHECK(error_in(straddle(9)) ==
        "scenario.json: /tensor_parallel/comm_overlap: needs every TP group inside one NVLink domain (the overlap "
        "copies over NVLink), but 1 of 9 TP groups of 16 ranks span two domains of 72 GPUs: TP group 4 (ranks 64 to "
        "79) spans NVLink domains 0 (GPUs 0 to 71) and 1 (GPUs 72 to 143); choose a tp that divides 72, or turn the "
        "overlap off");
  // Four racks: the boundary at 144 falls between groups, those at 72 and 216 inside groups 4 and 13.
  CHECK(error_in(straddle(18))
            .find("but 2 of 18 TP groups of 16 ranks span two domains of 72 GPUs: the first, TP "
                  "group 4 (ranks 64 to 79)") != std::string::npos);
  // Four groups fill 64 GPUs of one rack: none crosses.
  CHECK(error_in(straddle(4)) == "no error");
  // TP 8 divides the rack: none crosses on two racks.
  CHECK(error_in(straddle(9), {"parallel.tp=8", "parallel.dp=18"}) == "no error");
}

// 32 layers split over pp 4 alone, not over 4·3 virtual stages: the virtual stages are at fault,
// and are named, as the key a --set gave is; where --set gave both, the first named is the
// virtual stages and the message names both degrees.
TEST_CASE("the layers' split over pp and virtual stages names the key that broke it") {
  const std::string interleaved = R"({ "tp": 2, "pp": 4, "dp": 8, "schedule": "interleaved", "virtual_stages": 2 })";
  const std::string message =
      "model.layers (32) is not divisible by pp·virtual_stages (4·3 = 12); give parallel.stage_layers for an uneven "
      "split";
  CHECK(error_in(scenario(kModel, kCluster, interleaved), {"parallel.virtual_stages=3"}) ==
        "--set: parallel.virtual_stages: " + message);
  CHECK(error_in(scenario(kModel, kCluster, interleaved), {"parallel.pp=4", "parallel.virtual_stages=3"}) ==
        "--set: parallel.virtual_stages: " + message);
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 2, "pp": 4, "dp": 8, "schedule": "interleaved",
      "virtual_stages": 3 })")) == "scenario.json: /parallel/virtual_stages: " + message);
  // pp 3 divides no split of 32 layers: pp is at fault, and a --set of it is named.
  CHECK(error_in(scenario(kModel, kCluster, interleaved), {"parallel.pp=3"}) ==
        "--set: parallel.pp: model.layers (32) is not divisible by pp·virtual_stages (3·2 = 6); give "
        "parallel.stage_layers for an uneven split");
}

// PyTorch's ScheduleInterleaved1F1B (torch.distributed.pipelining, torchtitan's pipelines) runs
// max(1, m // pp) rounds and takes any m those rounds divide: pp 4 with 10 or 3 micro-batches,
// as its docstring's examples, and 6; not 9 (2 rounds). Megatron-Core keeps its multiple of pp.
TEST_CASE("PyTorch's interleaved schedule takes the micro-batch counts its rounds divide") {
  const auto pipeline = [](const std::string& framework, const std::string& kind, long long batch) {
    return R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr",
      "parallel": { "tp": 2, "pp": 4, "dp": 1, "schedule": "interleaved", "virtual_stages": 2 },
      "training": { "framework": ")" +
           framework + R"(", "global_batch": )" + std::to_string(batch) +
           R"(, "micro_batch": 1 }, "data_parallel": { "kind": ")" + kind + R"(" } })";
  };
  const auto titan = [&](long long batch) { return pipeline("torchtitan", "fsdp", batch); };
  for (const long long m : {10, 3, 6, 8, 1}) {
    INFO(m << " micro-batches");
    CHECK(error_in(titan(m)) == "no error");
  }
  CHECK(error_in(titan(9)) ==
        "scenario.json: /training/global_batch: PyTorch's interleaved schedule (ScheduleInterleaved1F1B) needs the "
        "micro-batches per replica (9) to be a multiple of its rounds, max(1, micro-batches // pp) = 2");
  CHECK(error_in(pipeline("pytorch", "ddp", 3)) == "no error");
  CHECK(
      error_in(pipeline("megatron", "zero1", 10)) ==
      "scenario.json: /training/global_batch: the interleaved schedule needs the micro-batches per replica (10) to be "
      "a multiple of pp (4)");
  CHECK(
      error_in(pipeline("megatron", "fsdp", 10)) ==
      "scenario.json: /training/global_batch: the interleaved schedule needs the micro-batches per replica (10) to be "
      "a multiple of pp (4)");
}

// The pipeline schedules' rules on the micro-batches per replica are refused on loading, before
// anything is asked of the layout (its memory, its step): 128 sequences in micro-batches of 2
// over dp 8 are 8 per replica.
TEST_CASE("a schedule's rule on the micro-batches per replica is refused on loading") {
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 2, "pp": 4, "dp": 8, "schedule": "interleaved",
      "virtual_stages": 2 })")) == "no error");
  // 8 per replica at pp 16 (llama3-8b's 32 layers over 16·2 chunks): not a multiple.
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 1, "pp": 16, "dp": 8, "schedule": "interleaved",
      "virtual_stages": 2 })")) ==
        "scenario.json: /training/global_batch: the interleaved schedule needs the micro-batches per replica (8) to "
        "be a multiple of pp (16)");
  // DualPipe: 8 per replica at pp 8 is fewer than 2·pp.
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 1, "pp": 8, "dp": 8, "schedule": "dualpipe" })")) ==
        "scenario.json: /training/global_batch: the DualPipe schedule needs an even number of micro-batches per "
        "replica, at least 2·pp (16), got 8");
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 2, "pp": 4, "dp": 8, "schedule": "dualpipe" })")) == "no error");
}

// Megatron asserts --overlap-param-gather needs --overlap-grad-reduce of its arguments, whatever
// the data-parallel size: refused on loading at dp 1 as at dp 8.
TEST_CASE("overlap_param_gather without overlap_grad_reduce is refused on loading, whatever dp") {
  const std::vector<std::string> sets{"data_parallel.kind=zero1", "data_parallel.overlap_grad_reduce=false",
                                      "data_parallel.overlap_param_gather=true"};
  const std::string expected = "--set: data_parallel.overlap_param_gather: needs overlap_grad_reduce, as in Megatron";
  CHECK(error_in(scenario(kModel, kCluster, kParallel), sets) == expected);
  CHECK(error_in(scenario(kModel, kCluster, R"({ "tp": 8, "pp": 8, "dp": 1 })"), sets) == expected);
}

// Transformer Engine's TP overlap copies over NVLink: a PCIe node, whose GPUs are one domain of
// the collectives' intra-node tier, has none, and the overlap is refused there.
TEST_CASE("TP communication overlap is refused on a PCIe fabric, naming the fabric") {
  const std::vector<std::string> pcie{"cluster.intra_node.fabric=pcie", "cluster.intra_node.nvls=false",
                                      "cluster.intra_node.bandwidth=64GB/s", "cluster.intra_node.latency=1us",
                                      "parallel.sequence_parallel=true"};
  CHECK(error_in(scenario(kModel, kCluster, kParallel), pcie) == "no error");
  auto overlap = pcie;
  overlap.push_back("tensor_parallel.comm_overlap=true");
  CHECK(error_in(scenario(kModel, kCluster, kParallel), overlap) ==
        "--set: tensor_parallel.comm_overlap: needs NVLink between the GPUs of each TP group (Transformer Engine's "
        "overlap copies over NVLink), and the cluster's intra-node fabric (cluster.intra_node.fabric) is \"pcie\", "
        "with none: turn the overlap off");
  // The same overlap on the NVSwitch the preset has: accepted.
  CHECK(error_in(scenario(kModel, kCluster, kParallel),
                 {"parallel.sequence_parallel=true", "tensor_parallel.comm_overlap=true"}) == "no error");
}
