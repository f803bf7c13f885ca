// Every key of the scenario schema, walked: changing it changes the simulated step (a time
// or a memory figure of the report), or is refused with a reason, or the key is a name. A
// key added to the schema without a row here fails the test, so no key can be accepted and
// ignored unnoticed.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "io/scenario_loader.hpp"
#include "io/scenario_schema.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"

namespace {

enum class Expect { changes, refused, name };

struct Row {
  const char* key;
  Expect expect;
  const char* value = "";                 // the changed value (--set syntax)
  std::vector<std::string> context = {};  // other keys set first, where the key matters only with them
};

// GPT 1.3B on 16 H100 in 2 nodes: TP 2 × PP 2 × DP 4, so that every kind of communication runs.
constexpr const char* kWalkBase = R"({ "model": "gpt-1.3b", "cluster": "dgx-h100-ndr",
  "parallel": { "tp": 2, "pp": 2, "dp": 4 },
  "training": { "global_batch": 32, "micro_batch": 1 } })";

const std::vector<std::string> kMoe{"model.moe.experts=8", "parallel.ep=2", "parallel.sequence_parallel=true"};
// Multi-head latent attention (Llama-style layers), at the base's TP 2.
const std::vector<std::string> kMla{"model.mlp=swiglu", "model.mla.kv_lora_rank=256", "model.mla.qk_nope_head_dim=64",
                                    "model.mla.qk_rope_head_dim=32", "model.mla.v_head_dim=64"};
const std::vector<std::string> kFsdp{"data_parallel.kind=fsdp"};
// Activation offload of 8 of GPT 1.3B's 24 layers, at pp 1.
const std::vector<std::string> kOffload{"parallel.pp=1", "parallel.dp=8", "training.activation_offload_layers=8"};
const std::vector<std::string> kAllRanks{"simulation.ranks=all"};
const std::vector<std::string> kUniformJitter{
    R"(simulation.variation.jitter={"distribution": "uniform", "sigma": 0.05})"};

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A calibration file measured on the base scenario's H100s: a launch overhead and a
// slowdown beside communication unlike the preset's, so that applying it moves the step.
std::string calibration_value() {
  const auto path = std::filesystem::temp_directory_path() / "stepsim-key-walk.calib.json";
  std::ofstream(path) << R"({ "stepsim_calibration": 1, "provenance": { "gpu": "NVIDIA H100 80GB HBM3" },
    "compute": { "launch_overhead_us": 40, "comm_slowdown": 0.5 } })";
  return "[\"" + path.string() + "\"]";
}

const std::vector<Row>& rows() {
  static const std::string calibration = calibration_value();
  static const std::vector<Row> r{
      {"model.name", Expect::name},
      {"model.layers", Expect::changes, "16"},
      {"model.hidden", Expect::changes, "2560"},
      {"model.heads", Expect::changes, "32"},
      {"model.kv_heads", Expect::changes, "8"},
      {"model.ffn_hidden", Expect::changes, "4096"},
      {"model.head_dim", Expect::changes, "64"},
      {"model.qk_norm", Expect::changes, "true"},
      {"model.vocab", Expect::changes, "32000"},
      {"model.seq_len", Expect::changes, "1024"},
      {"model.mlp", Expect::changes, "swiglu"},
      {"model.tied_embeddings", Expect::changes, "false"},
      {"model.moe.experts", Expect::changes, "8", {"parallel.sequence_parallel=true"}},
      {"model.moe.top_k", Expect::changes, "2", kMoe},
      {"model.moe.expert_ffn_hidden", Expect::changes, "2048", kMoe},
      {"model.moe.capacity_factor", Expect::changes, "0.5", kMoe},
      // EP 16 over the base's two nodes, top 4: the flex dispatcher sends each token once per node.
      {"model.moe.dispatcher",
       Expect::changes,
       "flex",
       {"model.moe.experts=16", "model.moe.top_k=4", "parallel.ep=16", "parallel.tp=1", "parallel.pp=1",
        "parallel.dp=16"}},
      // Megatron-Core runs it without a pipeline (or with virtual stages): pp 1, 4 micro-batches.
      {"model.moe.a2a_overlap", Expect::changes, "true", plus(kMoe, {"parallel.pp=1", "parallel.dp=8"})},
      {"model.moe.imbalance", Expect::changes, "2", kMoe},
      {"model.moe.shared_experts", Expect::changes, "1", kMoe},
      {"model.moe.load_balancing", Expect::changes, "\"seq_aux_loss\"", kMoe},
      {"model.moe.expert_bias", Expect::changes, "true", kMoe},
      {"model.moe.force_balance", Expect::changes, "true", kMoe},
      {"model.mla.q_lora_rank", Expect::changes, "512", kMla},
      {"model.mla.kv_lora_rank", Expect::changes, "512", kMla},
      {"model.mla.qk_nope_head_dim", Expect::changes, "128", kMla},
      {"model.mla.qk_rope_head_dim", Expect::changes, "64", kMla},
      {"model.mla.v_head_dim", Expect::changes, "128", kMla},
      {"model.mtp_layers", Expect::changes, "1"},
      {"model.sliding_window", Expect::changes, "256"},
      {"model.window_skip_freq", Expect::changes, "2", {"model.sliding_window=256"}},
      {"model.swiglu_limit", Expect::changes, "7", plus(kMoe, {"model.mlp=swiglu"})},
      {"model.linear_bias", Expect::changes, "true", plus(kMoe, {"model.mlp=swiglu"})},
      {"model.yarn_factor", Expect::changes, "32", {"model.mlp=swiglu"}},
      {"model.moe.first_dense_layers", Expect::changes, "2", kMoe},
      {"model.moe.layer_pattern", Expect::changes, "[0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1]", kMoe},
      {"cluster.name", Expect::name},
      {"cluster.nodes", Expect::refused, "3"},
      {"cluster.gpus_per_node", Expect::changes, "4"},
      {"cluster.nvlink_domain", Expect::changes, "16"},
      {"cluster.gpu.name", Expect::name},
      // At TP 2 NCCL's graphs of both architectures give the pair 360 GB/s, and the latency
      // floor hides where their LL caps differ; at TP 8 their channels and caps differ.
      {"cluster.gpu.arch",
       Expect::changes,
       "ampere",
       {"cluster.intra_node.nvls=false", "parallel.tp=8", "parallel.pp=1", "parallel.dp=2"}},
      {"cluster.gpu.flops.bf16", Expect::changes, "\"500 TFLOPS\""},
      {"cluster.gpu.flops.fp16", Expect::changes, "\"500 TFLOPS\"", {"training.precision=fp16"}},
      {"cluster.gpu.flops.fp8", Expect::changes, "\"1000 TFLOPS\"", {"training.precision=fp8"}},
      {"cluster.gpu.flops.tf32", Expect::changes, "\"200 TFLOPS\"", {"training.precision=tf32"}},
      {"cluster.gpu.flops.fp32", Expect::changes, "\"30 TFLOPS\"", {"training.precision=fp32"}},
      {"cluster.gpu.flops.fp4", Expect::changes, "\"5000 TFLOPS\"", {"cluster=dgx-b200", "training.precision=nvfp4"}},
      {"cluster.gpu.memory", Expect::changes, "\"40 GB\""},
      {"cluster.gpu.memory_bandwidth", Expect::changes, "\"2 TB/s\""},
      {"cluster.gpu.sms",
       Expect::changes,
       "100",
       {"parallel.sequence_parallel=true", "tensor_parallel.comm_overlap=true"}},
      {"cluster.gpu.kernel_launch", Expect::changes, "\"50 us\""},
      {"cluster.gpu.efficiency.gemm_max", Expect::changes, "0.5"},
      {"cluster.gpu.efficiency.gemm_half_flops", Expect::changes, "6e10"},
      {"cluster.gpu.efficiency.gemm_half_k", Expect::changes, "2000"},
      {"cluster.gpu.efficiency.fp8_gemm_max", Expect::changes, "0.3", {"training.precision=fp8"}},
      {"cluster.gpu.efficiency.fp4_gemm_max", Expect::changes, "0.3", {"cluster=dgx-b200", "training.precision=nvfp4"}},
      // Provenance only describes a preset (it sets a note). Board power and the GPU-hour price
      // move the step's energy and cost, not its times.
      {"cluster.gpu.board_power_w", Expect::changes, "500"},
      {"cluster.gpu_hour_price", Expect::changes, "2.5"},
      {"cluster.gpu.provenance.fitted", Expect::name},
      {"cluster.gpu.provenance.source", Expect::name},
      {"cluster.provenance.fitted", Expect::name},
      {"cluster.provenance.source", Expect::name},
      {"cluster.gpu.efficiency.attention_max", Expect::changes, "0.3"},
      {"cluster.gpu.efficiency.hbm", Expect::changes, "0.5"},
      {"cluster.gpu.efficiency.kernel_min", Expect::changes, "\"30 us\""},
      {"cluster.gpu.efficiency.comm_slowdown", Expect::changes, "0.5"},
      {"cluster.gpu.efficiency.derived_comm_slowdown", Expect::changes, "true"},
      {"cluster.intra_node.fabric",
       Expect::changes,
       "pcie",
       {"cluster.intra_node.nvls=false", "cluster.intra_node.bandwidth=\"64 GB/s\"",
        "cluster.intra_node.latency=\"1 us\""}},
      {"cluster.intra_node.bandwidth", Expect::changes, "\"100 GB/s\""},
      {"cluster.intra_node.latency", Expect::changes, "\"20 us\""},
      {"cluster.intra_node.nvls", Expect::changes, "false", {"parallel.tp=8", "parallel.dp=1"}},
      // RoCE runs NCCL's IB verbs transport: the same model; plain Ethernet is refused.
      {"cluster.inter_node.fabric", Expect::refused, "ethernet"},
      {"cluster.inter_node.nics_per_node", Expect::changes, "2"},
      {"cluster.inter_node.nic_bandwidth", Expect::changes, "\"100 Gb/s\""},
      {"cluster.inter_node.latency", Expect::changes, "\"50 us\""},
      // Oversubscription slows the traffic between leaves. A rail-optimized fabric gives each
      // rail its own uplinks: with 3 NICs for 8 GPUs the rail of 3 GPUs is the slowest, where a
      // fat tree's leaf pools its uplinks.
      {"cluster.inter_node.topology",
       Expect::changes,
       "rail-optimized",
       {"cluster.inter_node.topology=fat-tree", "cluster.inter_node.oversubscription=4",
        "cluster.inter_node.nics_per_node=3"}},
      {"cluster.inter_node.oversubscription", Expect::changes, "4", {"cluster.inter_node.topology=fat-tree"}},
      // 4 nodes per leaf: the DP ring crosses the spine twice among 8 nodes, not at every node.
      {"cluster.inter_node.nodes_per_leaf", Expect::changes, "4", {"cluster.inter_node.oversubscription=4"}},
      // The host link carries activation offload's copies: at 1 GB/s they are exposed.
      {"cluster.host_link.bandwidth", Expect::changes, "\"1 GB/s\"", kOffload},
      {"cluster.host_link.gpus_per_link", Expect::changes, "8", kOffload},
      // AMD hosts: each network step of a ring costs at least 6 us with Simple, not 3; at pp 1
      // the DP group spans both nodes, and without NVLS its AllReduce is a ring.
      {"cluster.host_cpu", Expect::changes, "amd", {"parallel.pp=1", "parallel.dp=8", "cluster.intra_node.nvls=false"}},
      {"cluster.collective_tuning.launch_overhead", Expect::changes, "\"20 us\""},
      {"cluster.collective_tuning.bus_efficiency", Expect::changes, "0.5"},
      {"cluster.collective_tuning.ramp_half_bytes", Expect::changes, "\"64 MiB\""},
      {"cluster.collective_tuning.ramp_exponent", Expect::changes, "1"},
      {"cluster.collective_tuning.latency_floor", Expect::changes, "\"100 us\""},
      {"parallel.tp", Expect::changes, "4"},
      {"parallel.pp", Expect::changes, "1"},
      {"parallel.dp", Expect::changes, "2"},
      {"parallel.cp", Expect::changes, "2"},
      {"parallel.ep", Expect::changes, "4", kMoe},
      {"parallel.etp", Expect::changes, "2", kMoe},
      {"parallel.sequence_parallel", Expect::changes, "true"},
      {"parallel.schedule", Expect::changes, "gpipe"},
      {"parallel.schedule", Expect::changes, "dualpipe"},
      {"parallel.virtual_stages", Expect::changes, "3", {"parallel.schedule=interleaved", "parallel.virtual_stages=2"}},
      {"parallel.stage_layers", Expect::changes, "[10,14]"},
      {"training.global_batch", Expect::changes, "64"},
      {"training.micro_batch", Expect::changes, "2"},
      {"training.precision", Expect::changes, "fp32"},
      {"training.fp8_scaling", Expect::changes, "current", {"training.precision=fp8"}},
      {"training.recompute", Expect::changes, "full"},
      // The dense MLP recomputed beside the attention core: more backward work, less memory.
      {"training.recompute_modules", Expect::changes, "[\"core_attn\",\"mlp\"]", {"training.recompute=selective"}},
      {"training.framework", Expect::changes, "pytorch"},
      // Short sequences, so that the CPU sets the pace of the eager step.
      {"training.cuda_graphs", Expect::changes, "true", {"training.framework=pytorch", "model.seq_len=128"}},
      // Only the attention replayed: the MLP's kernels cost the CPU again, which then sets the
      // pace (short sequences, many micro-batches, no pipeline).
      {"training.cuda_graph_scope",
       Expect::changes,
       "[\"attn\"]",
       {"training.framework=megatron", "training.cuda_graphs=true", "model.seq_len=128", "parallel.pp=1",
        "parallel.tp=1", "parallel.dp=16", "training.global_batch=256"}},
      // Offload saves activation memory at the peak (pp 1, as Megatron-Core requires).
      {"training.activation_offload_layers", Expect::changes, "8", {"parallel.pp=1", "parallel.dp=8"}},
      {"training.attention", Expect::changes, "unfused"},
      {"training.fusion", Expect::changes, "eager"},
      {"training.cross_entropy", Expect::changes, "unfused"},
      {"training.grad_clip", Expect::changes, "false"},
      {"training.memory_headroom", Expect::changes, "\"79 GiB\""},
      {"training.expandable_segments", Expect::changes, "true"},
      {"training.optimizer", Expect::changes, "sgd"},
      {"training.optimizer_state", Expect::changes, "bf16"},
      {"training.main_grad", Expect::changes, "bf16"},
      {"data_parallel.kind", Expect::changes, "zero1"},
      {"data_parallel.bucket_cap_mb", Expect::changes, "1"},
      {"data_parallel.first_bucket_mb", Expect::changes, "20"},
      {"data_parallel.bucket_parameters", Expect::changes, "10000000", {"data_parallel.kind=zero1"}},
      {"data_parallel.overlap_grad_reduce", Expect::changes, "false"},
      // The unspecified framework's buckets are views; off, PyTorch's reducer copies.
      {"data_parallel.gradient_as_bucket_view", Expect::changes, "false"},
      {"data_parallel.grad_reduce_dtype", Expect::changes, "fp32"},
      {"data_parallel.reshard_after_forward", Expect::changes, "false", kFsdp},
      {"data_parallel.forward_prefetch", Expect::changes, "true", kFsdp},
      // Without a pipeline, whose stages keep their units gathered between backwards.
      {"data_parallel.backward_prefetch", Expect::changes, "none", plus(kFsdp, {"parallel.pp=1", "parallel.dp=8"})},
      {"data_parallel.max_inflight_all_gathers", Expect::changes, "1", plus(kFsdp, {"data_parallel.fsdp_version=1"})},
      {"data_parallel.overlap_param_gather", Expect::changes, "true", {"data_parallel.kind=zero1"}},
      {"data_parallel.fsdp_version", Expect::changes, "2", kFsdp},
      // Megatron-FSDP's sharded model weights beside its main weights, and its double buffer.
      {"data_parallel.fsdp_impl", Expect::changes, "megatron", plus(kFsdp, {"training.framework=megatron"})},
      {"data_parallel.shard_group", Expect::changes, "2", {"data_parallel.kind=hsdp"}},
      {"tensor_parallel.comm_overlap", Expect::changes, "true", {"parallel.sequence_parallel=true"}},
      // Without a pipeline, whose transfers keep NCCL's own choice whatever is forced, the DP
      // AllReduces NCCL would run otherwise take the ring.
      {"collectives.algorithm", Expect::changes, "ring", {"parallel.pp=1", "parallel.dp=8"}},
      {"collectives.protocol", Expect::changes, "LL"},
      {"calibration", Expect::changes, calibration.c_str()},
      // Representative and all-ranks mode give one answer by contract; all-ranks simulates
      // every GPU (checked below by the number of simulated ranks).
      {"simulation.ranks", Expect::changes, "all"},
      {"context_parallel.comm", Expect::changes, "all_gather", {"parallel.cp=2"}},
      {"simulation.variation.gpu_speed", Expect::changes, R"([{"rank": 3, "factor": 0.8}])", kAllRanks},
      {"simulation.variation.node_speed", Expect::changes, R"([{"node": 1, "factor": 0.8}])", kAllRanks},
      {"simulation.variation.links", Expect::changes, R"([{"node": 0, "link": "nic", "factor": 0.1}])", kAllRanks},
      {"simulation.variation.failed_nics", Expect::changes, R"([{"node": 0, "count": 6}])", kAllRanks},
      {"simulation.variation.jitter.distribution", Expect::changes, "normal", plus(kAllRanks, kUniformJitter)},
      {"simulation.variation.jitter.sigma", Expect::changes, "0.1", kUniformJitter},
      {"simulation.variation.jitter.seed", Expect::changes, "7", plus(kAllRanks, kUniformJitter)},
      {"simulation.variation.background_traffic", Expect::changes, "0.5"},
  };
  return r;
}

void flatten(const boost::json::value& v, const std::string& prefix, std::vector<std::string>& out) {
  if (!v.is_object()) {
    out.push_back(prefix);
    return;
  }
  for (const auto& [key, value] : v.get_object())
    flatten(value, prefix.empty() ? std::string(key) : prefix + "." + std::string(key), out);
}

// What a change must move: the step's times and memory, and how many ranks were simulated.
std::vector<double> signature(const stepsim::SimulationResult& r) {
  const stepsim::Report& p = r.report;
  std::vector<double> out{
      p.step_time_s,          p.memory_bytes.peak,      p.memory_bytes.params,
      p.memory_bytes.grads,   p.memory_bytes.optimizer, p.memory_bytes.activations,
      p.memory_bytes.buffers, p.memory_bytes.capacity,  static_cast<double>(r.timeline.ranks.size()),
      p.memory_bytes.reserved};
  out.push_back(p.memory_bytes.fits ? 1.0 : 0.0);
  out.push_back(p.cost.energy_per_step_j);
  out.push_back(p.cost.cost_per_step);
  for (double t : p.comm_s) out.push_back(t);
  for (double t : p.breakdown_s.exposed_comm) out.push_back(t);
  return out;
}

std::optional<std::string> refusal(const std::vector<std::string>& sets) {
  try {
    stepsim::simulate(stepsim::io::load_scenario_text(kWalkBase, "walk.json", sets));
  } catch (const stepsim::InputError& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("every scenario key has a row in the walk, and every row is a key") {
  const stepsim::Scenario s = stepsim::io::load_scenario_text(kWalkBase, "walk.json");
  std::vector<std::string> keys;
  flatten(stepsim::io::write_scenario(s), "", keys);
  std::set<std::string> walked;
  for (const Row& row : rows()) walked.insert(row.key);
  for (const std::string& key : keys) {
    INFO(key);
    CHECK(walked.count(key) == 1);
  }
  CHECK(walked.size() == keys.size());
}

TEST_CASE("changing any scenario key changes the simulated step or is refused with a reason") {
  for (const Row& row : rows()) {
    if (row.expect == Expect::name) continue;
    const std::vector<std::string> changed = plus(row.context, {std::string(row.key) + "=" + row.value});
    INFO(row.key << " = " << row.value);
    if (row.expect == Expect::refused) {
      const std::optional<std::string> reason = refusal(changed);
      REQUIRE(reason.has_value());
      // Named by the key at fault: the file's, or the --set assignment's.
      CHECK((reason->starts_with("walk.json: /") || reason->starts_with("--set: ")));
      continue;
    }
    const auto before = stepsim::simulate(stepsim::io::load_scenario_text(kWalkBase, "walk.json", row.context));
    const auto after = stepsim::simulate(stepsim::io::load_scenario_text(kWalkBase, "walk.json", changed));
    CHECK(signature(before) != signature(after));
  }
}
