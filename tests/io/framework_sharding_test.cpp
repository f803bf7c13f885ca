// The data-parallel kinds and FSDP keys each framework has: PyTorch and torchtitan have DDP, FSDP
// and HSDP and no ZeRO-1 or ZeRO-2; torchtitan's FSDP is fully_shard (FSDP2) alone; DeepSpeed's
// kind fsdp is its ZeRO-3, which has no PyTorch FSDP setting and no HYBRID_SHARD.
#include <catch2/catch.hpp>

#include <algorithm>
#include <boost/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "io/scenario_loader.hpp"
#include "load_error.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;

namespace {

// Llama 3 8B on 64 H100, data parallelism over all of them.
const std::string kShardingJob =
    R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": { "tp": 1, "dp": 64 },
  "training": { "global_batch": 128, "micro_batch": 2 } })";

std::string sharding_error(const std::vector<std::string>& sets) { return test::load_error(kShardingJob, sets); }

std::string kind_error(const std::string& framework, const std::string& kind) {
  return sharding_error({"training.framework=" + framework, "data_parallel.kind=" + kind});
}

}  // namespace

// torchtitan's parallelize functions apply replicate (DDP) or fully_shard (FSDP, HSDP over a 2-D
// mesh) and nothing else; eager PyTorch's nearest to ZeRO-1, ZeroRedundancyOptimizer, all-reduces
// every gradient through DDP and broadcasts each rank's updated parameters (_sync_params), not the
// distributed optimizer's ReduceScatter and AllGather that zero1 simulates.
TEST_CASE("a data-parallel kind the framework does not have is refused, naming both keys") {
  for (const char* framework : {"pytorch", "torchtitan", "torchtitan-compile"}) {
    INFO(framework);
    for (const char* kind : {"ddp", "fsdp", "hsdp"}) CHECK(kind_error(framework, kind) == "no error");
    for (const char* kind : {"zero1", "zero2"})
      CHECK(kind_error(framework, kind) ==
            std::string("--set: data_parallel.kind: data_parallel.kind ") + kind +
                " is not a kind of training.framework " + framework +
                ": it has PyTorch's DDP, FSDP and HSDP (ddp, fsdp, hsdp); zero1 and zero2 are Megatron-Core's "
                "distributed optimizer and DeepSpeed's ZeRO-1 and ZeRO-2, and PyTorch's ZeroRedundancyOptimizer (the "
                "gradients all-reduced, the updated parameters broadcast) is not simulated");
  }
  for (const char* kind : {"ddp", "zero1", "zero2", "fsdp"}) CHECK(kind_error("deepspeed", kind) == "no error");
  CHECK(kind_error("deepspeed", "hsdp") ==
        "--set: data_parallel.kind: data_parallel.kind hsdp is not a kind of training.framework deepspeed: DeepSpeed "
        "has ZeRO stages 0 to 3 (ddp, zero1, zero2, fsdp) and no PyTorch FSDP HYBRID_SHARD (its sharding within "
        "groups, MiCS and ZeRO++'s hpZ, is not simulated)");
  for (const char* framework : {"megatron", "nemo"})
    for (const char* kind : {"ddp", "zero1", "zero2", "fsdp", "hsdp"}) CHECK(kind_error(framework, kind) == "no error");
  // The key set last is the one named: the file's kind and a --set framework.
  const std::string zero2 = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": { "tp": 1, "dp": 64 },
    "training": { "global_batch": 128, "micro_batch": 2 }, "data_parallel": { "kind": "zero2" } })";
  CHECK(test::load_error(zero2, {"training.framework=torchtitan"})
            .starts_with("--set: training.framework: data_parallel.kind zero2 is not a kind of training.framework "
                         "torchtitan: "));
}

// torchtitan's apply_fsdp calls fully_shard: FSDP2, whose prefetch has no keys. Not given, the
// version follows the framework and the kind, and the resolved scenario lists it as derived.
TEST_CASE("torchtitan runs FSDP2 unless told, and refuses FSDP1 and its keys") {
  const Scenario titan =
      io::load_scenario_text(kShardingJob, "s.json", {"training.framework=torchtitan", "data_parallel.kind=fsdp"});
  CHECK(titan.data_parallel.fsdp_version == 2);
  CHECK(io::load_scenario_text(kShardingJob, "s.json",
                               {"training.framework=torchtitan-compile", "data_parallel.kind=hsdp"})
            .data_parallel.fsdp_version == 2);
  CHECK(io::load_scenario_text(kShardingJob, "s.json", {"training.framework=pytorch", "data_parallel.kind=fsdp"})
            .data_parallel.fsdp_version == 1);
  // DDP has no FSDP version to derive: it stays at its inert default.
  CHECK(io::load_scenario_text(kShardingJob, "s.json", {"training.framework=torchtitan"}).data_parallel.fsdp_version ==
        1);
  const auto resolved = boost::json::parse(titan.resolved_json);
  const auto& derived = resolved.at("derived").as_array();
  CHECK(std::find(derived.begin(), derived.end(), "data_parallel.fsdp_version") != derived.end());
  // The resolved scenario follows a framework set on it, as its source would.
  CHECK(io::load_scenario_text(titan.resolved_json, "r.json", {"training.framework=pytorch"})
            .data_parallel.fsdp_version == 1);
  CHECK(sharding_error({"training.framework=torchtitan", "data_parallel.kind=fsdp", "data_parallel.fsdp_version=1"}) ==
        "--set: data_parallel.fsdp_version: 1 (FullyShardedDataParallel) under training.framework torchtitan: "
        "torchtitan shards with fully_shard (FSDP2) alone; use 2 or leave it out");
  CHECK(sharding_error({"training.framework=torchtitan", "data_parallel.kind=fsdp", "data_parallel.fsdp_version=2"}) ==
        "no error");
  for (const char* set : {"data_parallel.backward_prefetch=none", "data_parallel.forward_prefetch=true",
                          "data_parallel.max_inflight_all_gathers=8"}) {
    INFO(set);
    const std::string error = sharding_error({"training.framework=torchtitan", "data_parallel.kind=fsdp", set});
    CHECK(error.find(": is FSDP1's: FSDP2 (training.framework torchtitan's only FSDP) gathers the next unit ahead") !=
          std::string::npos);
  }
}

// DeepSpeed's stage3.py and partitioned_param_coordinator.py gather module by module within
// stage3_prefetch_bucket_size and reduce-scatter gradients in reduce_bucket_size buckets: none of
// PyTorch FSDP's version, prefetch, rate limiter or resharding choice exists there.
TEST_CASE("DeepSpeed's ZeRO-3 takes none of PyTorch FSDP's keys") {
  const std::vector<std::string> zero3{"training.framework=deepspeed", "data_parallel.kind=fsdp"};
  CHECK(sharding_error(zero3) == "no error");
  for (const char* key : {"fsdp_version=2", "backward_prefetch=none", "backward_prefetch=post", "forward_prefetch=true",
                          "max_inflight_all_gathers=8", "reshard_after_forward=false"}) {
    INFO(key);
    std::vector<std::string> sets = zero3;
    sets.push_back(std::string("data_parallel.") + key);
    const std::string name(key, std::string_view(key).find('='));
    CHECK(sharding_error(sets) ==
          "--set: data_parallel." + name +
              ": is PyTorch FSDP's: under training.framework deepspeed, kind fsdp is DeepSpeed's ZeRO-3, which has no "
              "such setting (it prefetches within stage3_prefetch_bucket_size and keeps parameters gathered by "
              "stage3_max_reuse_distance, which are not simulated); leave it at its default");
  }
  // A bucket size is refused for what ZeRO-3 does: its own buckets, which are not modelled.
  std::vector<std::string> bucket = zero3;
  bucket.emplace_back("data_parallel.bucket_parameters=100000000");
  CHECK(sharding_error(bucket) ==
        "--set: data_parallel.bucket_parameters: sizes the gradient buckets of Megatron-Core and of DeepSpeed's ZeRO-1 "
        "and ZeRO-2 (kind zero1 or zero2): under training.framework deepspeed, kind fsdp is DeepSpeed's ZeRO-3, which "
        "reduce-scatters its gradients in buckets of reduce_bucket_size (5e8 elements by default) during the backward "
        "(overlap_comm); stepsim reduces a layer's gradients at a time there and models neither setting (leave it at "
        "its default)");
  CHECK(sharding_error({"training.framework=deepspeed", "data_parallel.kind=zero2",
                        "data_parallel.bucket_parameters=100000000"}) == "no error");
}

// A refusal's hint offers only kinds the framework has: an HSDP mixture of experts under
// Megatron-Core is told to use ddp, zero1, zero2 or fsdp. FSDP of a mixture of experts runs, but
// under DeepSpeed, whose engine asserts "MoE not supported with Stage 3"
// (deepspeed/runtime/engine.py).
TEST_CASE("the hint of an HSDP refusal names only the kinds the framework has") {
  const std::vector<std::string> moe = {"model=mixtral-8x7b", "parallel.ep=8"};
  auto with = [&](const char* framework, const char* kind) {
    std::vector<std::string> sets = moe;
    sets.push_back(std::string("training.framework=") + framework);
    sets.push_back(std::string("data_parallel.kind=") + kind);
    return sharding_error(sets);
  };
  // torchtitan's HSDP shards the routed experts inside its shard groups; Megatron-Core's is not
  // simulated.
  CHECK(with("torchtitan", "hsdp") == "no error");
  CHECK(with("megatron", "hsdp") ==
        "--set: data_parallel.kind: HSDP of a mixture of experts under training.framework megatron is not simulated "
        "yet (torchtitan's and PyTorch's are; use ddp, zero1, zero2 or fsdp)");
  CHECK(with("torchtitan", "fsdp") == "no error");
  CHECK(with("megatron", "fsdp") == "no error");
  // 64 DP ranks at tp 1: the default shard group is a node's 8 DP ranks, which an EP group of 8
  // fills; one of 4 ranks cannot hold it, nor can an EP group of 16 be borrowed from 8.
  std::vector<std::string> four = moe;
  four.insert(four.end(), {"training.framework=torchtitan", "data_parallel.kind=hsdp", "data_parallel.shard_group=4"});
  CHECK(sharding_error(four) ==
        "--set: data_parallel.shard_group: HSDP of a mixture of experts needs each expert group inside a shard "
        "group: ep·etp (8) does not divide tp·cp·shard_group (1·1·4 = 4)");
  four.back() = "data_parallel.shard_group=8";
  CHECK(sharding_error(four) == "no error");
  CHECK(with("deepspeed", "fsdp") ==
        "--set: data_parallel.kind: DeepSpeed's ZeRO-3 does not train mixture-of-experts models (its engine refuses "
        "them at stage 3; use ddp, zero1 or zero2)");
}

// torchtitan's ParallelDims._validate: expert TP is tp or 1; with etp = tp, EP takes all of cp and
// part of dp_shard (ep % cp == 0, dp_shard·cp % ep == 0); with etp = 1, all of cp and tp too
// (ep % (cp·tp) == 0, dp_shard·cp·tp % ep == 0); its DDP has dp_shard 1. Qwen3-30B-A3B on 16
// GPUs.
TEST_CASE("torchtitan's expert parallelism is refused where its ParallelDims refuses it") {
  const std::string job =
      R"({ "model": "qwen3-30b-a3b", "cluster": "dgx-h100-ndr", "parallel": { "tp": 1, "dp": 16, "ep": 8 },
  "training": { "framework": "torchtitan", "global_batch": 64, "micro_batch": 1 }, "data_parallel": { "kind": "fsdp" } })";
  const std::vector<std::string> tp4{"parallel.tp=4", "parallel.sequence_parallel=true", "parallel.dp=4"};
  auto with = [&](std::vector<std::string> sets, const std::vector<std::string>& more) {
    sets.insert(sets.end(), more.begin(), more.end());
    return test::load_error(job, sets);
  };
  CHECK(test::load_error(job, {}) == "no error");
  CHECK(test::load_error(job, {"data_parallel.kind=ddp"}) ==
        "s.json: /parallel/ep: 8 under training.framework torchtitan with data_parallel.kind ddp: torchtitan takes "
        "EP's ranks from cp (1) and the FSDP shard ranks, of which its DDP (dp_replicate) has none (ParallelDims); "
        "use data_parallel.kind fsdp");
  CHECK(with(tp4, {"parallel.ep=4", "parallel.etp=2"}) ==
        "--set: parallel.etp: 2 under training.framework torchtitan: torchtitan's expert tensor parallelism is tp "
        "(4) or 1");
  CHECK(with(tp4, {"parallel.ep=2", "parallel.etp=1"}) ==
        "--set: parallel.ep: 2 under training.framework torchtitan: torchtitan takes EP's ranks from all of cp·tp "
        "(4) and part of the FSDP shard ranks, dp (4): ep must be a multiple of 4 that divides 16 (ParallelDims)");
  CHECK(with(tp4, {"parallel.ep=8", "parallel.etp=1"}) == "no error");
  CHECK(with(tp4, {"parallel.ep=4", "parallel.etp=4"}) == "no error");
  // Megatron-Core folds EP out of tp·cp·dp whatever the kind: the same DDP layout runs there.
  CHECK(test::load_error(job, {"data_parallel.kind=ddp", "training.framework=megatron"}) == "no error");
}
