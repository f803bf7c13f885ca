// Absurd numbers in scenarios: every numeric key has a range, products of keys stay inside
// what the simulator represents, and JSON that readers would silently misread is refused.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "io/reader.hpp"
#include "load_error.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;

namespace {

constexpr const char* kTp8Base = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": { "tp": 8, "dp": 8 },
  "training": { "global_batch": 128, "micro_batch": 2 } })";

std::string error_of(const std::vector<std::string>& sets, const std::string& text = kTp8Base) {
  return test::load_error(text, sets);
}

}  // namespace

TEST_CASE("products of integer keys that would overflow are refused with the key and the range") {
  CHECK(error_of({"training.micro_batch=4611686018427387904"}) ==
        "--set: training.micro_batch: must be between 1 and 1048576, got 4611686018427387904");
  CHECK(error_of({"parallel.pp=2147483647"}) == "--set: parallel.pp: must be between 1 and 2048, got 2147483647");
  CHECK(error_of({"parallel.dp=2147483647"}) == "--set: parallel.dp: must be between 1 and 1048576, got 2147483647");
  CHECK(
      error_of({"parallel.dp=1048576", "parallel.tp=8"}) ==
      "s.json: /parallel: tp·pp·dp·cp = 8·1·1048576·1 = 8388608 GPUs; stepsim simulates jobs of at most 1048576 GPUs");
}

TEST_CASE("more micro-batches than a step can simulate are refused up front") {
  CHECK(error_of({"training.global_batch=1099511627776"}) ==
        "--set: training.global_batch: 68719476736 micro-batches per step (global_batch / (micro_batch·dp)) times 32 "
        "layers is 2199023255552 layer passes, more than the 262144 stepsim simulates per step: raise micro_batch or "
        "dp");
  CHECK(error_of({"training.global_batch=131072"}) == "no error");  // 8192 micro-batches × 32 layers
  CHECK(error_of({"simulation.ranks=all", "training.global_batch=131072"}) ==
        "--set: simulation.ranks: simulating every rank is 16777216 layer passes (micro-batches × layers × "
        "tp·dp·cp), more than the 8388608 stepsim simulates per step: use \"representative\"");
  // TP 8 × CP 16 = 128 ranks, 32 layers, each counting 1 + 15/2 = 8.5 for its ring: 240
  // micro-batches of 2 are 8,355,840 passes, within the limit; 241 are 8,390,656, past it.
  CHECK(error_of({"simulation.ranks=all", "parallel.dp=1", "parallel.cp=16", "training.global_batch=480"}) ==
        "no error");
  CHECK(error_of({"simulation.ranks=all", "parallel.dp=1", "parallel.cp=16", "training.global_batch=482"}) ==
        "--set: simulation.ranks: simulating every rank is 8390656 layer passes (micro-batches × layers × "
        "tp·dp·cp, a layer counting 1 + (cp - 1)/2 for its ring's steps), more than the 8388608 stepsim simulates "
        "per step: use \"representative\"");
  // Representative mode weighs a layer by what it costs to simulate: CP 1024 with 16 layers and
  // 128 micro-batches is 2048 plain passes, but 2048 · (1 + 1023/5) = 421,069 weighted (it took
  // 20 s and 2 GiB where the limit stands for about 10 s and 1.2 GB); CP 16 at 4096 micro-batches
  // of 16 layers is 65,536 · 4 = 262,144, at the limit.
  CHECK(error_of({"model.layers=16", "training.global_batch=128", "training.micro_batch=1", "parallel.tp=1",
                  "parallel.dp=1", "parallel.cp=1024", "cluster.nodes=0"}) ==
        "--set: training.global_batch: 128 micro-batches per step (global_batch / (micro_batch·dp)) times 16 layers, a "
        "layer counting 1 + (cp - 1)/5 for its ring's steps, is 421069 layer passes, more than the 262144 stepsim "
        "simulates per step: raise micro_batch or dp");
  CHECK(error_of({"model.layers=16", "training.global_batch=4096", "training.micro_batch=1", "parallel.tp=1",
                  "parallel.dp=1", "parallel.cp=16", "cluster.nodes=0"}) == "no error");
  CHECK(error_of({"model.layers=16", "training.global_batch=4100", "training.micro_batch=1", "parallel.tp=1",
                  "parallel.dp=1", "parallel.cp=16", "cluster.nodes=0"}) != "no error");
  // TP 8 with its communication overlap: 1 + 7/4 = 2.75 per layer; 8192 micro-batches of 32
  // layers were at the limit without it.
  CHECK(
      error_of(
          {"training.global_batch=131072", "parallel.sequence_parallel=true", "tensor_parallel.comm_overlap=true"}) ==
      "--set: training.global_batch: 8192 micro-batches per step (global_batch / (micro_batch·dp)) times 32 layers, a "
      "layer counting 1 + (tp - 1)/4 for TP overlap's pieces, is 720896 layer passes, more than the 262144 stepsim "
      "simulates "
      "per step: raise micro_batch or dp");
  CHECK(error_of({"model.layers=100000"}) == "--set: model.layers: must be between 1 and 2048, got 100000");
  CHECK(error_of({"training.global_batch=4"}) ==
        "--set: training.global_batch: 4 is smaller than micro_batch·dp (2·8): each data-parallel rank needs at "
        "least one micro-batch");
}

TEST_CASE("absurdly slow hardware is refused instead of overflowing into a fast step") {
  CHECK(error_of({R"(cluster.gpu.flops.bf16="1 FLOPS")"}) ==
        "--set: cluster.gpu.flops.bf16: must be between 1 GFLOPS and 1000 EFLOPS (or 0: not available), got 1 FLOPS");
  CHECK(error_of({R"(cluster.intra_node.bandwidth="1 b/s")"}) ==
        "--set: cluster.intra_node.bandwidth: must be between 1 Gb/s and 100 TB/s, got 1 b/s");
  CHECK(error_of({R"(cluster.inter_node.latency="1000 s")"}) ==
        "--set: cluster.inter_node.latency: must be between 0 and 1 s, got 1000 s");
  CHECK(error_of({R"(cluster.gpu.flops.bf16="1e308 PFLOPS")"}) ==
        "--set: cluster.gpu.flops.bf16: '1e308 PFLOPS' is out of range");
  CHECK(error_of({"cluster.collective_tuning.ramp_exponent=1000"}) ==
        "--set: cluster.collective_tuning.ramp_exponent: must be between 0.01 and 1, got 1000");
}

// Ranges and values in the units scenarios write (README: link bandwidths 1 Gb/s–100 TB/s),
// each in the unit that makes it the shortest whole number, never in exponent form.
TEST_CASE("range messages give quantities in the units a scenario writes") {
  CHECK(error_of({R"(cluster.gpu.memory="1 KiB")"}) ==
        "--set: cluster.gpu.memory: must be between 1 MiB and 1024 TiB, got 1 KiB");
  CHECK(error_of({R"(cluster.inter_node.nic_bandwidth="1 Gb/s")"}) == "no error");
  CHECK(error_of({R"(cluster.inter_node.nic_bandwidth="999999 b/s")"}) ==
        "--set: cluster.inter_node.nic_bandwidth: must be between 1 Gb/s and 100 TB/s, got 999999 b/s");
  CHECK(error_of({R"(cluster.gpu.memory_bandwidth="2000 TB/s")"}) ==
        "--set: cluster.gpu.memory_bandwidth: must be between 1 GB/s and 1000 TB/s, got 2000 TB/s");
  CHECK(error_of({R"(cluster.host_link.bandwidth="0.5 MB/s")"}) ==
        "--set: cluster.host_link.bandwidth: must be between 1 MB/s and 100 TB/s (or 0: not available), got 500 kB/s");
}

// A cluster given as an object without a link's bandwidth left it 0, refused as out of a range
// in bytes per second; the key is said to be missing.
TEST_CASE("a bandwidth a cluster object leaves out is said to be missing") {
  const std::string inline_cluster = R"({ "model": "llama3-8b", "parallel": { "tp": 8, "dp": 1 },
    "cluster": { "name": "x", "gpus_per_node": 8, "gpu": "h100-sxm5-80gb",
                 "inter_node": { "nic_bandwidth": "400 Gb/s", "nics_per_node": 8 } },
    "training": { "global_batch": 8 } })";
  CHECK(error_of({}, inline_cluster) ==
        "s.json: /cluster/intra_node/bandwidth: is missing (or 0): expected a bandwidth between 1 Gb/s and 100 TB/s");
  CHECK(error_of({R"(cluster.intra_node.bandwidth="450 GB/s")", R"(cluster.inter_node.nic_bandwidth="0 Gb/s")"},
                 inline_cluster) ==
        "--set: cluster.inter_node.nic_bandwidth: is missing (or 0): expected a bandwidth between 1 Gb/s and 100 TB/s");
}

TEST_CASE("slow but valid hardware whose step would outlast the time range names the rate") {
  const std::string error = error_of({R"(cluster.gpu.flops.bf16="1 GFLOPS")", "training.global_batch=1048576",
                                      "training.micro_batch=1024", "parallel.dp=8"});
  CHECK(error.rfind("s.json: /cluster/gpu/flops: one step is at least", 0) == 0);
  CHECK(error.find("stepsim simulates steps of up to 1000000 s") != std::string::npos);
}

// An efficiency far below any hardware's carried the step past the simulator's range of
// durations, refused then without the key: it is refused up front, naming the key and the
// range, from 1 % of the peak (what calibration files take) to all of it, and the reason of the
// side it falls beyond.
TEST_CASE("efficiencies below 1 % of the peak or above it are refused with the key, the range and why") {
  struct Key {
    const char* key;
    const char* of;
  };
  for (const Key& k : {Key{"cluster.gpu.efficiency.gemm_max", "the dense peak"},
                       Key{"cluster.gpu.efficiency.fp8_gemm_max", "the dense FP8 peak"},
                       Key{"cluster.gpu.efficiency.fp4_gemm_max", "the dense FP4 peak"},
                       Key{"cluster.gpu.efficiency.attention_max", "the dense peak"},
                       Key{"cluster.gpu.efficiency.hbm", "the HBM bandwidth"},
                       Key{"cluster.collective_tuning.bus_efficiency", "NCCL's modelled bus bandwidth"}}) {
    INFO(k.key);
    for (const char* value : {"1e-30", "0", "0.0099"})
      CHECK(error_of({std::string(k.key) + "=" + value}) ==
            "--set: " + std::string(k.key) + ": must be a fraction of " + k.of + " from 0.01 to 1, got " + value +
                ": no hardware runs a training step's work at less than 1 % of its peak");
    for (const char* value : {"1.0001", "1.5", "2"})
      CHECK(error_of({std::string(k.key) + "=" + value}) ==
            "--set: " + std::string(k.key) + ": must be a fraction of " + k.of + " from 0.01 to 1, got " + value +
                ": above 1 the work would run faster than " + k.of + " allows");
    for (const char* value : {"0.01", "1"}) CHECK(error_of({std::string(k.key) + "=" + value}) == "no error");
  }
  const std::string slow_file = R"({ "model": "llama3-8b", "parallel": { "tp": 8, "dp": 8 },
    "cluster": { "preset": "dgx-h100-ndr", "gpu": { "preset": "h100-sxm5-80gb", "efficiency": { "hbm": 0.001 } } },
    "training": { "global_batch": 128, "micro_batch": 2 } })";
  CHECK(error_of({}, slow_file) ==
        "s.json: /cluster/gpu/efficiency/hbm: must be a fraction of the HBM bandwidth from 0.01 to 1, got 0.001: no "
        "hardware runs a training step's work at less than 1 % of its peak");
}

TEST_CASE("model sizes have an upper bound and memory cannot go negative") {
  CHECK(error_of({"model.hidden=1e18"}) ==
        "--set: model.hidden: must be between 1 and 262144, got 1000000000000000000");
  // Within every key's range, but s·b·h·(34 + 5·a·s/h) ≈ 3.7e20 bytes for one layer.
  const std::string error = error_of({"model.seq_len=8388608", "model.heads=4096", "model.kv_heads=4096",
                                      "model.hidden=4096", "training.micro_batch=256", "training.global_batch=2048"});
  CHECK(error.rfind("--set: model.seq_len: one layer's activations for one micro-batch exceed", 0) == 0);
}

TEST_CASE("a number beyond double range is refused with its line and column") {
  const std::string text = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr",
  "parallel": { "tp": 8, "dp": 8 }, "training": { "global_batch": 1e999 } })";
  CHECK(
      error_of({}, text) ==
      "s.json: line 2, column 72: the number 1e999 at /training/global_batch is out of range (at most about 1.8e308)");
}

TEST_CASE("duplicate keys are refused, not silently resolved to the last") {
  const std::string text = R"({ "model": "llama3-8b", "model": "gpt3-175b", "cluster": "dgx-h100-ndr" })";
  CHECK(error_of({}, text) ==
        "s.json: line 1, column 31: duplicate key 'model' at /model (each key may appear once in an object)");
  const std::string nested = R"({ "model": { "preset": "llama3-8b", "layers": 2,
    "layers": 4 } })";
  CHECK(error_of({}, nested).find("duplicate key 'layers' at /model/layers") != std::string::npos);
  const std::string in_list = R"({ "calibration": [ {}, { "a": 1, "a": 2 } ] })";
  CHECK(error_of({}, in_list).find("duplicate key 'a' at /calibration/1/a") != std::string::npos);
}

TEST_CASE("a --set value that is not UTF-8 is refused, so the report stays valid JSON") {
  CHECK(error_of({"model.name=\xff"}) ==
        "--set: the assignment is not valid UTF-8 text (scenario keys and names are UTF-8)");
  CHECK(error_of({"model.name=caf\xc3\xa9"}) == "no error");
  CHECK(io::valid_utf8("plain"));
  CHECK(io::valid_utf8("\xe2\x82\xac"));            // the euro sign
  CHECK_FALSE(io::valid_utf8("\xc0\xaf"));          // an overlong '/'
  CHECK_FALSE(io::valid_utf8("\xed\xa0\x80"));      // a UTF-16 surrogate
  CHECK_FALSE(io::valid_utf8("\xe2\x82"));          // cut short
  CHECK_FALSE(io::valid_utf8("\xf4\x90\x80\x80"));  // beyond U+10FFFF
}

TEST_CASE("a 10 MB unknown name is answered at once and quoted short") {
  const std::string huge(10'000'000, 'x');
  const std::string error = error_of({"model=" + huge});
  CHECK(error.find("unknown model preset 'xxxxxxxx") != std::string::npos);
  CHECK(error.find("(10000000 bytes)") != std::string::npos);
  CHECK(error.size() < 2000);
}

TEST_CASE("TP overlap, context parallelism and its variant are refused where they cannot run") {
  CHECK(error_of({"tensor_parallel.comm_overlap=true"}) ==
        "--set: tensor_parallel.comm_overlap: needs \"sequence_parallel\": true (Transformer Engine overlaps the "
        "AllGather and ReduceScatter of sequence parallelism)");
  CHECK(error_of({"tensor_parallel.comm_overlap=true", "parallel.tp=1"}) ==
        "--set: tensor_parallel.comm_overlap: needs parallel.tp > 1 (there is no TP communication)");
  CHECK(error_of({"tensor_parallel.comm_overlap=true", "parallel.sequence_parallel=true"}) == "no error");
  CHECK(error_of({"context_parallel.comm=all_gather"}) ==
        "--set: context_parallel.comm: \"all_gather\" needs parallel.cp > 1 (there are no other ranks' keys and "
        "values to gather)");
  CHECK(error_of({"parallel.cp=2", "training.attention=unfused"}) ==
        "--set: training.attention: context parallelism (cp 2) needs \"attention\": \"flash\" or \"flash2\" (the "
        "ring runs "
        "inside the fused kernel)");
  CHECK(error_of({"parallel.cp=2", "context_parallel.comm=all_gather"}) == "no error");
}

// DeepSpeed's long-sequence parallelism is Ulysses (deepspeed/sequence/layer.py,
// DistributedAttention: all-to-alls over the sequence-parallel group around the attention);
// it has no K/V ring or gather for context parallelism to stand for.
TEST_CASE("context parallelism under DeepSpeed is refused, under eager PyTorch it runs") {
  CHECK(error_of({"parallel.cp=2", "training.framework=deepspeed"}) ==
        "--set: parallel.cp: context parallelism (cp 2) under training.framework deepspeed is not simulated: "
        "DeepSpeed has no ring or all-gather context parallelism, its long-sequence parallelism is Ulysses "
        "(all-to-alls that move the sequence shards onto the attention heads), which is not simulated");
  CHECK(error_of({"training.framework=deepspeed"}) == "no error");
  CHECK(error_of({"parallel.cp=2", "training.framework=pytorch"}) == "no error");
}

TEST_CASE("NVLink SHARP is refused on Ampere and without an NVSwitch") {
  const std::string a100 =
      R"({ "model": "gpt-1.3b", "cluster": "dgx-a100-80g-hdr", "training": { "global_batch": 8 } })";
  CHECK(error_of({"cluster.intra_node.nvls=true"}, a100) ==
        "--set: cluster.intra_node.nvls: NVLink SHARP needs a Hopper or later GPU (a100-sxm4-80gb is ampere)");
  CHECK(error_of({"cluster.intra_node.fabric=pcie", "cluster.intra_node.nvls=true"}) ==
        "--set: cluster.intra_node.nvls: NVLink SHARP needs \"fabric\": \"nvswitch\" (the reduction runs in the "
        "switch)");
}

TEST_CASE("the DualPipe schedule needs an even pipeline and whole gradients") {
  CHECK(error_of({"parallel.schedule=dualpipe", "parallel.pp=3"}) ==
        "--set: parallel.pp: the DualPipe schedule needs an even pp >= 2, got 3");
  CHECK(error_of({"parallel.schedule=dualpipe", "parallel.pp=2", "parallel.dp=4", "data_parallel.kind=fsdp"}) ==
        "--set: data_parallel.kind: ZeRO-2, FSDP and HSDP under the DualPipe schedule are not simulated yet (use ddp "
        "or zero1)");
}

// With one stage there is no pipeline to schedule: GPipe would hold every micro-batch's
// activations at once and zero bubble split the backward, with nothing to gain.
TEST_CASE("a schedule other than 1F1B is refused without a pipeline") {
  for (const char* schedule : {"gpipe", "interleaved", "zb-h1", "zb-h2", "dualpipe"}) {
    INFO(schedule);
    CHECK(error_of({std::string("parallel.schedule=") + schedule}) ==
          "--set: parallel.schedule: \"" + std::string(schedule) +
              "\" needs parallel.pp > 1 (with one stage there is no pipeline to schedule; leave it \"1f1b\")");
  }
  CHECK(error_of({"parallel.schedule=1f1b"}) == "no error");
  CHECK(error_of({"parallel.schedule=gpipe", "parallel.pp=2", "parallel.dp=4"}) == "no error");
}

TEST_CASE("the zero-bubble schedules are refused with FSDP and HSDP") {
  for (const char* schedule : {"zb-h1", "zb-h2"}) {
    CHECK(error_of({std::string("parallel.schedule=") + schedule, "parallel.pp=2", "parallel.dp=4",
                    "data_parallel.kind=fsdp"}) ==
          "--set: data_parallel.kind: FSDP and HSDP under the zero-bubble schedules are not simulated yet (use ddp, "
          "zero1 or zero2)");
  }
}

TEST_CASE("mixture-of-experts keys are refused where they would do nothing or cannot run") {
  CHECK(error_of({"model.moe.top_k=2"}) ==
        "s.json: /model/moe: top_k, expert_ffn_hidden, capacity_factor, dispatcher, imbalance, shared_experts, "
        "first_dense_layers, layer_pattern, load_balancing, expert_bias and force_balance need model.moe.experts > 0 "
        "(the model is dense)");
  for (const char* key :
       {"model.moe.load_balancing=aux_loss", "model.moe.expert_bias=true", "model.moe.force_balance=true"})
    CHECK(error_of({key}) ==
          "s.json: /model/moe: top_k, expert_ffn_hidden, capacity_factor, dispatcher, imbalance, shared_experts, "
          "first_dense_layers, layer_pattern, load_balancing, expert_bias and force_balance need model.moe.experts > 0 "
          "(the model is dense)");
  // Megatron-Core's global_aux_loss is not simulated: not a value.
  CHECK(error_of({"model=mixtral-8x7b", "model.moe.load_balancing=global_aux_loss"}) ==
        "--set: model.moe.load_balancing: unknown value 'global_aux_loss' (expected one of none, aux_loss, "
        "seq_aux_loss)");
  CHECK(error_of({"model=mixtral-8x7b", "model.moe.imbalance=1.5"}) ==
        "--set: model.moe.imbalance: is the load of the busiest EP rank over the mean and needs parallel.ep > 1, got "
        "1.5");
  CHECK(error_of({"model=mixtral-8x7b"}) ==
        "s.json: /parallel/sequence_parallel: mixture-of-experts layers with tp > 1 need sequence parallelism "
        "(Megatron requires it)");
  CHECK(error_of({"model=mixtral-8x7b", "parallel.sequence_parallel=true", "parallel.ep=8",
                  "model.moe.imbalance=1.5"}) == "no error");
  CHECK(error_of({"model=mixtral-8x7b", "parallel.tp=1", "parallel.ep=8", "data_parallel.kind=hsdp"}) == "no error");
  CHECK(error_of({"model=mixtral-8x7b", "parallel.tp=1", "parallel.ep=8", "data_parallel.kind=hsdp",
                  "training.framework=megatron"}) ==
        "--set: data_parallel.kind: HSDP of a mixture of experts under training.framework megatron is not simulated "
        "yet (torchtitan's and PyTorch's are; use ddp, zero1, zero2 or fsdp)");
  CHECK(error_of({"model=mixtral-8x7b", "parallel.tp=1", "parallel.dp=4", "parallel.ep=8"}) ==
        "--set: parallel.ep: ep (8) must divide tp·cp·dp (4): expert groups are folded out of the ranks of one "
        "pipeline stage");
}

// The flex dispatcher is Megatron-Core's: it sends fewer bytes out of an NVLink domain and,
// under Megatron-Core, does without the all-to-all dispatcher's sort and probability
// all-to-all. Where it would change nothing it is refused: at ep 1, under frameworks without
// Megatron-Core's options, and under the unspecified framework inside one NVLink domain.
TEST_CASE("the flex dispatcher is refused where it would change nothing or is not the framework's") {
  // Mixtral at EP 8 on the base's 64 H100: the EP group is one node.
  const std::vector<std::string> ep8 = {"model=mixtral-8x7b", "parallel.sequence_parallel=true", "parallel.ep=8",
                                        "model.moe.dispatcher=flex"};
  const auto with = [](std::vector<std::string> sets, const std::string& more) {
    sets.push_back(more);
    return sets;
  };
  CHECK(error_of({"model=mixtral-8x7b", "parallel.sequence_parallel=true", "model.moe.dispatcher=flex"}) ==
        "--set: model.moe.dispatcher: \"flex\" needs parallel.ep > 1 (without expert parallelism there is no EP "
        "all-to-all to dispatch)");
  for (const char* framework : {"megatron", "nemo"})
    CHECK(error_of(with(ep8, std::string("training.framework=") + framework)) == "no error");
  for (const char* framework : {"pytorch", "torchtitan", "deepspeed"})
    CHECK(error_of(with(ep8, std::string("training.framework=") + framework)) ==
          "--set: training.framework: model.moe.dispatcher \"flex\" is Megatron-Core's token dispatcher (megatron "
          "or nemo), not " +
              std::string(framework) + "'s");
  CHECK(error_of(ep8) ==
        "--set: model.moe.dispatcher: \"flex\" changes nothing here: it sends fewer bytes only where the EP group "
        "spans NVLink domains (ep·etp = 8 GPUs, in one domain of 8), and the all-to-all dispatcher's sort by local "
        "expert and all-to-all of the probabilities, which flex does without, are Megatron-Core's, simulated under "
        "training.framework megatron or nemo");
  // EP 16 (Mixtral made of 16 experts) over two nodes: fewer bytes between them.
  CHECK(error_of({"model=mixtral-8x7b", "model.moe.experts=16", "parallel.sequence_parallel=true", "parallel.ep=16",
                  "model.moe.dispatcher=flex"}) == "no error");
}

// Whether an EP group crosses an NVLink domain is a matter of where it lies, not of ep·etp
// against the domain's size: EP groups of 8 on 36-GPU domains of GB200 trays, ranks 32 to 39
// across the first boundary; EP 64 pipeline stages on 72-GPU racks, every stage but the first
// across a boundary. Counted as ep·etp / GPUs per domain (0 and 1 domains), both were refused.
TEST_CASE("the flex dispatcher is taken where some EP group crosses an NVLink domain, however large the domain") {
  const std::string mixtral = R"({ "model": "mixtral-8x7b", "cluster": "gb200-nvl72",
    "parallel": { "tp": 1, "dp": 64, "ep": 8 }, "training": { "global_batch": 64, "micro_batch": 1 } })";
  CHECK(error_of({"cluster.nodes=16", "cluster.nvlink_domain=36", "model.moe.dispatcher=flex"}, mixtral) == "no error");
  // All 64 GPUs in one rack: every EP group inside it.
  CHECK(error_of({"cluster.nodes=16", "model.moe.dispatcher=flex"}, mixtral) ==
        "--set: model.moe.dispatcher: \"flex\" changes nothing here: it sends fewer bytes only where the EP group "
        "spans NVLink domains (ep·etp = 8 GPUs, in one domain of 72), and the all-to-all dispatcher's sort by local "
        "expert and all-to-all of the probabilities, which flex does without, are Megatron-Core's, simulated under "
        "training.framework megatron or nemo");
  const std::string dsv3 = R"({ "model": "deepseek-v3", "cluster": "gb200-nvl72",
    "parallel": { "tp": 1, "pp": 8, "dp": 64, "ep": 64, "stage_layers": [7, 8, 8, 8, 8, 8, 7, 7] },
    "training": { "global_batch": 1024, "micro_batch": 1, "recompute": "full" } })";
  for (const char* domain : {"cluster.nvlink_domain=72", "cluster.nvlink_domain=36"}) {
    INFO(domain);
    CHECK(error_of({"cluster.nodes=128", domain, "model.moe.dispatcher=flex"}, dsv3) == "no error");
  }
}

// An EP rank receives the copies of the EP group's tokens routed to its experts. A token's
// top_k copies go to distinct experts, so at most min(top_k, experts/ep) of them land on one
// rank: ep·min(top_k, experts/ep)/top_k times the mean of top_k copies per rank's token.
TEST_CASE("expert tensor parallelism is refused where it cannot split the experts or fold into the stage") {
  CHECK(error_of({"model=mixtral-8x7b", "parallel.tp=1", "parallel.ep=4", "parallel.etp=2"}) == "no error");
  CHECK(error_of({"model=mixtral-8x7b", "parallel.tp=1", "parallel.ep=8", "parallel.etp=2"}) ==
        "--set: parallel.etp: ep·etp (8·2) must divide tp·cp·dp (8): expert groups are folded out of the ranks of "
        "one pipeline stage");
  CHECK(error_of({"model=mixtral-8x7b", "parallel.tp=1", "parallel.ep=1", "parallel.etp=8",
                  "model.moe.expert_ffn_hidden=1004"}) ==
        "--set: parallel.etp: etp (8) does not divide model.moe.expert_ffn_hidden (1004): each expert's fc1 and fc2 "
        "are split over etp ranks");
  CHECK(error_of({"parallel.etp=2"}) ==
        "--set: parallel.etp: expert tensor parallelism needs an MoE model (model.moe.experts > 0)");
}

TEST_CASE("an imbalance beyond what top-k routing can send to one EP rank is refused at the bound") {
  const std::vector<std::string> mixtral = {"model=mixtral-8x7b", "parallel.sequence_parallel=true", "parallel.ep=8"};
  auto with = [](std::vector<std::string> sets, const std::string& more) {
    sets.push_back(more);
    return sets;
  };
  // Mixtral at EP 8: one expert per rank, at most one of each token's two copies: 8·1/2 = 4.
  CHECK(error_of(with(mixtral, "model.moe.imbalance=4")) == "no error");
  CHECK(error_of(with(mixtral, "model.moe.imbalance=4.01")) ==
        "--set: model.moe.imbalance: must be at most 4 with 8 experts, top_k 2 and parallel.ep 8, got 4.01: an EP "
        "rank holds 1 expert(s) and a token's 2 routed copies go to distinct experts, so at most 1 of them lands on "
        "one rank, ep·1/top_k = 4 times the mean");
  // EP 2: four experts per rank take both copies of a token at most: 2·2/2 = 2.
  const std::vector<std::string> ep2 = {"model=mixtral-8x7b", "parallel.sequence_parallel=true", "parallel.ep=2"};
  CHECK(error_of(with(ep2, "model.moe.imbalance=2")) == "no error");
  CHECK(error_of(with(ep2, "model.moe.imbalance=2.5"))
            .find("--set: model.moe.imbalance: must be at most 2 with 8 experts, "
                  "top_k 2 and parallel.ep 2, got 2.5") != std::string::npos);
  // Top-1 routing at EP 8: a rank may receive every token, 8 times the mean.
  const std::vector<std::string> top1 = with(mixtral, "model.moe.top_k=1");
  CHECK(error_of(with(top1, "model.moe.imbalance=8")) == "no error");
  CHECK(error_of(with(top1, "model.moe.imbalance=8.5")).find("must be at most 8 with") != std::string::npos);
}

TEST_CASE("a training section without global_batch is told the key is missing, not given a 0 it never wrote") {
  // The required key left out: no value to range-check, the message names the key and what to give.
  const std::string no_batch = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": { "tp": 8, "dp": 8 },
  "training": { "micro_batch": 1 }, "data_parallel": { "kind": "ddp" } })";
  const std::string error = error_of({}, no_batch);
  CHECK(error ==
        "s.json: /training/global_batch: is missing (or 0): expected the global batch, the sequences of one optimizer "
        "step over every data-parallel rank, a whole number divisible by micro_batch·dp (1·8), e.g. "
        "\"global_batch\": 64");
  CHECK(error.find("got 0") == std::string::npos);
  // The example's value is one the loader takes.
  CHECK(error_of({"training.global_batch=64"}, no_batch) == "no error");
  // A value given is range-checked as before.
  CHECK(error_of({"training.global_batch=-8"}) ==
        "--set: training.global_batch: must be between 1 and 1099511627776, got -8");
}
