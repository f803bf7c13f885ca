// The validated, typed scenario: what io produces from a scenario file and what every later
// layer consumes. Field names follow the scenario-file keys (docs/scenario-reference.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stepsim/units.hpp"

namespace stepsim {

// mxfp8 and nvfp4 are Transformer Engine's block-scaled recipes on Blackwell (MXFP8BlockScaling:
// 32-element blocks with power-of-two E8M0 scales at the FP8 tensor-core rate;
// NVFP4BlockScaling: E2M1 values in 16-element blocks with FP8 E4M3 scales and a per-tensor
// FP32 scale, at the FP4 rate). Like fp8, they run the Linear layers' GEMMs in that format and
// keep activations, attention and the rest in BF16.
// nvfp4 stays the last: tables indexed by precision are sized by it (calibration/tables.hpp).
enum class Precision { bf16, fp16, fp8, tf32, fp32, mxfp8, nvfp4 };
// How per-tensor FP8 (training.precision fp8) gets its scales: delayed (Transformer Engine's
// DelayedScaling, from the amax history of earlier steps, the amax taken inside the cast) or
// current (Float8CurrentScaling, Megatron's --fp8-recipe tensorwise: each tensor's own amax,
// read in a pass of its own before the cast).
enum class Fp8Scaling { delayed, current };
enum class MlpKind { gelu, swiglu };
// selective: Megatron's (the attention core); selective_op: torchtitan's per-op selective
// checkpointing (every other matmul output saved, the rest and element-wise work recomputed).
enum class Recompute { none, selective, full, selective_op };
// What Megatron-Core's selective recompute re-runs (TransformerConfig.recompute_modules, whose
// default is core_attn alone): the attention core, the MoE experts' activation, the norms that
// are not fused into a Linear, MLA's up projections with their latents' norms and the rotary
// embedding, a dense layer's whole MLP; moe and shared_experts are Megatron's too (refused).
enum class RecomputeModule { core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts };
// What Megatron-Core's CUDA graphs capture of each transformer layer (--cuda-graph-scope with
// Transformer Engine's graphs): the attention block (attn), a dense layer's MLP block (mlp), a
// MoE layer's pre-MLP norm and router (moe_router) and its token dispatcher's preprocessing,
// the permutation before the dispatch (moe_preprocess); moe (the whole MoE block) is
// Megatron's too (refused: it needs fixed token counts).
enum class CudaGraphScope { attn, mlp, moe, moe_router, moe_preprocess };
// Attention kernels: flash (fused, scores never materialised: the GPU's fastest fused
// attention, cuDNN's or FlashAttention-3 on Hopper; Megatron-Core with Transformer Engine),
// flash2 (FlashAttention-2, the kernel behind PyTorch's scaled_dot_product_attention: the same
// work, slower on Hopper and Blackwell) or unfused (Megatron 2022: batched GEMMs with the
// softmax and its dropout in HBM).
enum class AttentionKind { flash, flash2, unfused };
inline bool fused_attention(AttentionKind k) { return k != AttentionKind::unfused; }
// Element-wise work: fused (Transformer Engine and Megatron's fused kernels, torch.compile:
// one kernel per norm, rotary embedding or activation, each tensor read and written once) or
// eager (PyTorch eager mode: one kernel per operator, with the fp32 upcasts the model code
// asks for, each reading and writing HBM).
enum class Fusion { fused, eager };
// The loss: fused (one kernel reads the logits and writes the fp32 softmax: Megatron's
// --cross-entropy-loss-fusion), unfused (Megatron's vocab-parallel cross entropy without that
// flag: fp32 copy, max, subtract, exp, sum and divide as separate kernels over the logits),
// eager (PyTorch's cross_entropy on the fp32 upcast of the logits outside torch.compile; with
// TP, DTensor's loss_parallel) or compiled (the same under torch.compile: one kernel each way,
// the softmax recomputed in the backward).
enum class CrossEntropy { fused, unfused, eager, compiled, te };
// The framework that runs the step (training.framework): it sets the kernel keys above as it
// runs them and the CPU's cost to issue an operator (stepsim/framework.hpp). unspecified keeps
// the keys' own defaults and charges each kernel its launch alone.
enum class Framework : std::uint8_t { unspecified, megatron, nemo, torchtitan, torchtitan_compile, pytorch, deepspeed };
// zb_h1, zb_h2 (zero-bubble schedules, Qi et al. 2024) and dualpipe (DeepSeek-V3) are named
// so that a scenario asking for them is refused as not simulated yet, not as a typo.
enum class Schedule { gpipe, one_f_one_b, interleaved, zb_h1, zb_h2, dualpipe };
enum class DpKind { ddp, zero1, zero2, fsdp, hsdp };
enum class BackwardPrefetch { pre, post, none };
// Whose FSDP runs kind fsdp or hsdp (key data_parallel.fsdp_impl): PyTorch's (FSDP1's flat
// parameter or FSDP2's fully_shard, data_parallel.fsdp_version), or Megatron-FSDP, which
// Megatron-Core and Megatron-Bridge run for use_megatron_fsdp and which holds its states in
// buffers of its own (parallelism/memory_model.cpp).
enum class FsdpImpl { pytorch, megatron };
enum class IntraFabric { nvswitch, nvlink_mesh, pcie };
enum class InterFabric { infiniband, roce, ethernet };
enum class InterTopology { rail_optimized, fat_tree };
enum class RankMode { representative, all };
enum class GpuArch { ampere, hopper, blackwell };
// The vendor of the hosts' CPUs, which NCCL's tuning reads for communicators across nodes
// (src/graph/tuning.cc: the LL bandwidth cap and the network post overhead per ring step).
enum class HostCpu { intel, amd, arm };

// The PCIe link each architecture's GPUs carry: its generation and an x16 link's line rate,
// GB/s each way (Gen4 32 on Ampere, Gen5 64 on Hopper, Gen6 128 on Blackwell). NCCL's topology
// counts 3/4 of it (lane rate × width / 80).
struct PcieLink {
  int generation;
  double line_gbps;
  double nccl_gbps() const { return line_gbps * 3 / 4; }
};
constexpr PcieLink gpu_pcie_link(GpuArch a) {
  switch (a) {
    case GpuArch::ampere:
      return {4, 32.0};
    case GpuArch::hopper:
      return {5, 64.0};
    case GpuArch::blackwell:
      return {6, 128.0};
  }
  return {5, 64.0};
}

// Bytes per element of a precision (fp8 and mxfp8 = 1, bf16/fp16 = 2, tf32/fp32 = 4; nvfp4 = 2:
// its parameters stay BF16 and are quantized for each GEMM). What a parameter takes as
// gathered is parallelism::gathered_bytes, as held the memory model's.
int element_bytes(Precision p);
const char* to_string(Precision p);
const char* to_string(Fp8Scaling s);
const char* to_string(DpKind k);          // the key's value: "ddp", "zero1", ...
const char* to_string(CudaGraphScope s);  // the key's value: "attn", "moe_router", ...
// Whether the Linear layers' GEMMs run in an 8- or 4-bit format (fp8, mxfp8, nvfp4).
bool low_precision(Precision p);
// Whether the format is block-scaled (mxfp8, nvfp4): tensor-core support from Blackwell on.
bool block_scaled(Precision p);
// Bytes one GEMM operand element takes in the format, its share of the scales included:
// fp8 1, mxfp8 1 + 1/32 (one E8M0 byte per 32), nvfp4 1/2 + 1/16 (one E4M3 byte per 16).
double operand_bytes(Precision p);

struct GpuFlops {
  FlopRate bf16, fp16, fp8, tf32, fp32;  // dense peak; fp8 zero when unsupported
  FlopRate fp4;                          // dense FP4 (NVFP4) peak; zero when unsupported
  // The peak a precision's low-precision GEMMs run at: mxfp8 at the FP8 rate, nvfp4 at FP4's.
  FlopRate for_precision(Precision p) const;
};

// Efficiency of the GPU compute model: every number traceable to a published measurement
// (docs/model.md), documented where the preset sets it.
struct GpuEfficiency {
  double gemm_max = 0.8;                 // large-GEMM fraction of dense peak (A100 ≈ 0.82, H100 ≈ 0.80)
  double gemm_half_flops = 2e10;         // GEMM size (FLOPs) at which efficiency is half of gemm_max
  // Inner dimension K (16-bit elements) at which a GEMM's tiles spend as long on their fixed
  // work (filling the pipeline, writing the tile) as on their K loop: efficiency × K / (K + this),
  // a low-precision GEMM's at its format's peak over the 16-bit one times this. 0: no such term.
  double gemm_half_k = 0.0;
  double attention_max = 0.6;            // fused attention fraction of dense peak at long sequences
  double hbm = 0.82;                     // achievable fraction of HBM bandwidth (A100 1.6–1.75 of 2.04 TB/s)
  Time kernel_min = Time::from_us(3.0);  // smallest duration of any kernel
  double comm_slowdown = 0.1;            // compute slows by this fraction while an NCCL kernel runs (docs/model.md)
  double fp8_gemm_max = 0.6;             // large FP8 GEMM fraction of the FP8 dense peak (scaling and the
                                         // narrower operands' overheads keep it below gemm_max)
  double fp4_gemm_max = 0.5;             // large NVFP4 GEMM fraction of the FP4 dense peak
  // Instead of comm_slowdown: compute slows by the SMs (its channels) and the HBM bandwidth
  // the running NCCL kernels take, a compute-bound kernel by the one, a memory-bound by the other.
  bool derived_comm_slowdown = false;
};

// Whether a hardware preset's constants are fitted to measurements: all of them (true), some
// (in JSON "partly": the others from datasheets or carried over from another GPU), or none
// (false: datasheet figures with assumed efficiencies).
enum class Fitted : std::uint8_t { no, partly, yes };

// Where a hardware preset's figures come from: fitted to measurements (and to which), or
// datasheet figures with assumed efficiencies. The report warns when a preset not wholly fitted
// is used.
struct Provenance {
  Fitted fitted = Fitted::no;
  std::string source;  // "fitted to ...", "datasheet only: ..."
};

struct GpuSpec {
  std::string name;
  GpuArch arch = GpuArch::hopper;
  GpuFlops flops;
  Bytes memory;
  Bandwidth memory_bandwidth;
  int sms = 0;
  GpuEfficiency efficiency;
  Time kernel_launch = Time::from_us(5.0);  // host (CPU) cost to launch one kernel
  double board_power_w = 0;                 // board power (TDP) in watts; 0: unknown
  Provenance provenance;
};

// Whether the GPU runs a training precision: it has the peak the precision's GEMMs run at,
// and for the block-scaled formats (mxfp8, nvfp4) Blackwell's block-scaled tensor cores.
bool runs_precision(const GpuSpec& gpu, Precision p);
// The training precision named `name` (to_string's names), or nullopt.
std::optional<Precision> precision_named(const std::string& name);

struct IntraNode {
  IntraFabric fabric = IntraFabric::nvswitch;
  Bandwidth bandwidth;  // per GPU per direction
  Time latency = Time::from_us(0.6);
  bool nvls = false;  // NVLink SHARP (NVSwitch reduction), Hopper and later
};

// The GPU's link to its host's memory, which activation offload copies over: NVLink-C2C from a
// Grace CPU to the GPUs of its superchip (GB200, GB300), PCIe from an x86 host (DGX). Bandwidth
// per direction of one link, shared by the GPUs on it; zero: not described.
struct HostLink {
  Bandwidth bandwidth;
  int gpus_per_link = 1;
  // What one GPU gets per direction while `gpus` GPUs on the link copy at once (the job's GPUs
  // on it, which offload in step: every GPU of the link unless the job leaves some idle).
  Bandwidth per_gpu(int gpus) const { return bandwidth.scaled(1.0 / gpus); }
};

struct InterNode {
  InterFabric fabric = InterFabric::infiniband;
  int nics_per_node = 8;
  Bandwidth nic_bandwidth;  // per NIC per direction
  Time latency = Time::from_us(2.7);
  InterTopology topology = InterTopology::rail_optimized;
  double oversubscription = 1.0;  // ≥ 1
  int nodes_per_leaf = 1;         // nodes under one leaf switch (of each rail when rail-optimized)
};

// Measured NCCL behaviour that NCCL's own tuning model does not capture (nccl-tests floors,
// the shortfall of its bandwidth by size), the same for every (algorithm, protocol) pair so
// that the cost does not step where NCCL's model switches pair. Fitted once per cluster type;
// see the cluster presets and docs/model.md.
struct CollectiveTuning {
  Time launch_overhead = Time::zero();  // added to NCCL's modelled time (kernel launch + sync)
  double bus_efficiency = 1.0;          // achieved fraction of NCCL's modelled bus bandwidth
  // Size shortfall: efficiency bus_efficiency / (1 + x^exponent / (1 + x²)), x = half / size.
  Bytes ramp_half_bytes{0};           // per-rank size around which NCCL's model falls shortest (0: none)
  double ramp_exponent = 1.0;         // how slowly that shortfall falls above it (at most 1)
  Time latency_floor = Time::zero();  // no collective is faster
};

struct ClusterSpec {
  std::string name;
  int nodes = 0;
  int gpus_per_node = 8;
  // GPUs that one NVLink fabric joins (a GB200 NVL72 rack: 72 over 18 trays of 4); inside it
  // every group talks over NVLink whatever node it spans. 0: the node (an 8-GPU NVSwitch).
  int nvlink_domain = 0;
  GpuSpec gpu;
  IntraNode intra_node;
  InterNode inter_node;
  HostLink host_link;
  HostCpu host_cpu = HostCpu::intel;
  CollectiveTuning tuning;
  double gpu_hour_price = 0;  // price of one GPU-hour, any currency; 0: not given (no default)
  static constexpr double kMaxGpuHourPrice = 1e6;
  Provenance provenance;
  int gpus() const { return nodes * gpus_per_node; }
  int domain_gpus() const { return nvlink_domain > 0 ? nvlink_domain : gpus_per_node; }
};

// The EP token dispatcher: Megatron-Core's all-to-all (each routed copy of a token sent to
// its expert's rank), or its flex dispatcher with DeepEP or HybridEP behind it, which sends a
// token once to each NVLink domain holding one of its experts and forwards it to their ranks
// over NVLink there (and combines the same way back).
enum class MoeDispatcher { alltoall, flex };

// The router's load-balancing loss as Megatron-Core computes it (--moe-router-load-balancing-type
// with --moe-aux-loss-coeff above 0): none, over the micro-batch (aux_loss, Switch Transformer's)
// or per sequence (seq_aux_loss, DeepSeek-V3's).
enum class MoeBalancingLoss { none, aux_loss, seq_aux_loss };

struct MoeSpec {
  int experts = 0;  // 0: dense model
  int top_k = 1;
  long long expert_ffn_hidden = 0;
  double capacity_factor = 0;  // tokens an expert takes, in units of its fair share; 0: dropless
  double imbalance = 1.0;      // tokens the busiest EP rank's experts get, over the mean (>= 1)
  int shared_experts = 0;      // experts every token goes through (DeepSeek), expert_ffn_hidden wide
  MoeDispatcher dispatcher = MoeDispatcher::alltoall;
  // Megatron-Core's EP all-to-all overlap (overlap_moe_expert_parallel_comm, with the
  // delay_wgrad_compute Megatron-Bridge's moe_a2a_overlap sets beside it): in the steady state
  // one micro-batch's forward and another's backward run merged layer by layer, each one's
  // dispatch and combine on the communication stream under the other's compute.
  bool a2a_overlap = false;
  // Which layers are MoE layers; the others are dense, model.ffn_hidden wide. Either the first
  // `first_dense_layers` are dense (DeepSeek's first_k_dense_replace) or `layer_pattern` gives
  // each layer, 1 for MoE and 0 for dense (Megatron-Core's moe_layer_freq as a list).
  int first_dense_layers = 0;
  std::vector<int> layer_pattern{};  // empty: from first_dense_layers
  // The router beside its GEMM: its load-balancing loss, DeepSeek-V3's expert bias (the tokens
  // per expert counted each step, --moe-router-enable-expert-bias) and benchmarks' random router
  // logits (--moe-router-force-load-balancing).
  MoeBalancingLoss load_balancing = MoeBalancingLoss::none;
  bool expert_bias = false;
  bool force_balance = false;
};

// Multi-head latent attention (DeepSeek-V2 and -V3; Megatron-Core's MLASelfAttention): the
// queries pass through a q_lora_rank-wide latent, the keys and values are projected up from one
// kv_lora_rank-wide latent per token, each head's query and key are qk_nope_head_dim +
// qk_rope_head_dim wide (the rotary part of the key is one per token, shared by the heads) and
// its value v_head_dim. kv_lora_rank 0: standard attention.
struct MlaSpec {
  long long q_lora_rank = 0;  // 0: queries projected straight from the hidden state
  long long kv_lora_rank = 0;
  long long qk_nope_head_dim = 0;
  long long qk_rope_head_dim = 0;
  long long v_head_dim = 0;
};

struct ModelSpec {
  std::string name;
  int layers = 0;
  long long hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  long long ffn_hidden = 0;
  long long vocab = 0;
  long long seq_len = 0;
  MlpKind mlp = MlpKind::gelu;
  bool tied_embeddings = false;
  MoeSpec moe;
  long long head_dim = 0;  // width of one attention head; 0: hidden / heads
  // Each head's query and key RMS-normalized before the rotary embedding (Qwen3; Megatron-Core's
  // qk_layernorm).
  bool qk_norm = false;
  MlaSpec mla{};
  // Multi-token prediction depths (DeepSeek-V3: 1): after the main head, each predicts one token
  // further with one more transformer layer and the shared output head.
  int mtp_layers = 0;
  // Sliding-window attention (gpt-oss: 128 tokens on every other layer): each query attends to
  // the last `sliding_window` tokens (0: the whole causal prefix) in every layer but each
  // window_skip_freq-th (counted from 1; 0: every layer windowed), Megatron-Core's
  // window_attn_skip_freq.
  long long sliding_window = 0;
  int window_skip_freq = 0;
  bool windowed_layer(int layer) const {
    return sliding_window > 0 && (window_skip_freq == 0 || (layer + 1) % window_skip_freq != 0);
  }
  // gpt-oss as Megatron-Core runs it: the experts' SwiGLU inputs clamped to ±swiglu_limit (the
  // gate only from above; 0: no clamp), Megatron-Core's activation_func_clamp_value; biases on
  // the Linear layers of a SwiGLU model (GeLU models have theirs always), Megatron-Core's
  // add_bias_linear; YaRN's context-extension factor of the rotary embedding (0: plain RoPE),
  // Megatron-Core's yarn_rotary_scaling_factor.
  double swiglu_limit = 0;
  bool linear_bias = false;
  double yarn_factor = 0;
  bool latent_attention() const { return mla.kv_lora_rank > 0; }
  // GeLU models train as GPT does, with dropout 0.1 on the attention probabilities and on each
  // block's output (Megatron's --attention-dropout and --hidden-dropout defaults); SwiGLU models
  // as Llama does, with none (workload::LayerShape::dropout).
  bool trains_with_dropout() const { return mlp == MlpKind::gelu; }
  // Whether layer `layer` (counted from 0) is an MoE layer, and whether the stack mixes dense
  // and MoE layers.
  bool moe_layer(int layer) const {
    if (moe.experts == 0) return false;
    if (!moe.layer_pattern.empty()) return moe.layer_pattern[static_cast<std::size_t>(layer)] != 0;
    return layer >= moe.first_dense_layers;
  }
  bool mixed_layers() const { return moe.experts > 0 && (moe.first_dense_layers > 0 || !moe.layer_pattern.empty()); }
};

// The most GPUs one job may have: a scenario's tp·pp·dp·cp, and a trace's world size.
inline constexpr int kMaxGpus = 1 << 20;

struct ParallelSpec {
  int tp = 1, pp = 1, dp = 1, cp = 1, ep = 1;
  // Where the scenario does not give it, training.framework decides: torchtitan's TP plan always
  // shards the sequence (io/validate.cpp).
  bool sequence_parallel = false;
  bool sequence_parallel_given = false;
  Schedule schedule = Schedule::one_f_one_b;
  int virtual_stages = 1;
  std::vector<int> stage_layers;  // explicit layers per stage; empty = even split
  // Expert tensor parallelism (Megatron-Core's expert_tensor_parallel_size): each expert's fc1
  // split by columns and fc2 by rows over etp ranks, folded with EP out of a stage's tp·cp·dp
  // ranks (ETP innermost). Not given, a mixture of experts under Megatron-Core (training.framework
  // megatron or nemo) takes tp, as Megatron-Core sets expert_tensor_parallel_size when unset
  // (io/validate.cpp); 1 elsewhere.
  int etp = 1;
  bool etp_given = false;  // a layer of the scenario (its file, a preset, a --set) gave etp
  // Not a scenario key: set on the copy of the scenario that one pipeline stage's
  // data-parallel strategy sees, so that it syncs only that stage's gradients (-1: all).
  int stage = -1;
  // Not a scenario key: set on the copy that the data-parallel strategies see, whose dp is the
  // job's dp·cp and cp 1 (parallelism::gradient_scenario): the cp folded into that dp, each of the
  // job's DP ranks being that many consecutive ranks of it (1: none folded).
  int folded_cp = 1;
  int gpus() const { return tp * pp * dp * cp; }
};

struct TrainingSpec {
  long long global_batch = 0;  // sequences
  long long micro_batch = 1;
  Precision precision = Precision::bf16;
  Fp8Scaling fp8_scaling = Fp8Scaling::delayed;  // key training.fp8_scaling (precision fp8 only)
  Recompute recompute = Recompute::none;
  // key training.recompute_modules (recompute selective only); empty: ["core_attn"]
  std::vector<RecomputeModule> recompute_modules;
  Framework framework = Framework::unspecified;  // key training.framework: the kernel keys' defaults
  // CUDA graphs (Megatron's --enable-cuda-graph, torch.compile's reduce-overhead): the
  // transformer layers' kernels and their TP communication replayed without the CPU issuing them.
  bool cuda_graphs = false;
  // key training.cuda_graph_scope (with cuda_graphs): only these parts of each layer are
  // replayed; empty: the whole layer.
  std::vector<CudaGraphScope> cuda_graph_scope;
  // Activation offload to host memory (Megatron-Core's cpu_offloading_num_layers, through
  // Transformer Engine's get_cpu_offload_context): the activations of the first N transformer
  // layers copied to the host during the forward and back before their backward. 0: none.
  int activation_offload_layers = 0;
  AttentionKind attention = AttentionKind::flash;    // key training.attention: "flash" | "flash2" | "unfused"
  Fusion fusion = Fusion::fused;                     // key training.fusion: "fused" | "eager"
  CrossEntropy cross_entropy = CrossEntropy::fused;  // key training.cross_entropy
  // What `fits` leaves free of the GPU's memory beyond the modelled peak, for what the model
  // does not see (allocator spikes, other processes, the model's own error). 2 GiB: NeMo's
  // Nemotron-4 340B run, which ran on 80 GB H100s, is modelled within 3.1 GiB of capacity.
  Bytes memory_headroom = Bytes(2LL << 30);
  // PyTorch's caching allocator with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: what it
  // holds beyond the live tensors at the peak is the pages they leave partly used, not the
  // reserve fitted to runs without it (parallelism/memory_model).
  bool expandable_segments = false;
  std::string optimizer = "adam";
  // Precision of the optimizer's moments (Adam m and v, SGD momentum) and of the main
  // gradients micro-batches accumulate into: fp32 (Megatron's and ZeRO's default) or bf16
  // (recipes that keep them in bf16 to save memory). Master weights stay fp32.
  Precision optimizer_state = Precision::fp32;
  Precision main_grad = Precision::fp32;
  // Whether the scenario (or a --set) gave main_grad itself: under Megatron-Core the main
  // gradients are the buffer data_parallel.grad_reduce_dtype reduces, and one given follows
  // the other (io/validate.cpp).
  bool main_grad_given = false;
  // Gradient clipping by global norm (Megatron's --clip-grad, torchtitan's max_norm, both on
  // by default): the optimizer step also reads the gradients for their norm and scales them.
  bool grad_clip = true;
  // Which kernel keys a layer of the scenario (its file, an example preset it starts from, a
  // --set) gave itself: training.framework's defaults apply to the others only, whatever the
  // order of the layers.
  bool fusion_given = false, attention_given = false, cross_entropy_given = false, grad_clip_given = false;
  bool fp8_scaling_given = false;  // the framework's FP8 library decides where it is not given
  // micro-batches per step on one pipeline replica
  long long micro_batches(int dp) const { return global_batch / (micro_batch * dp); }
};

struct DataParallelSpec {
  DpKind kind = DpKind::ddp;
  double bucket_cap_mb = 25.0;   // MiB, PyTorch's name and meaning
  double first_bucket_mb = 1.0;  // MiB; bucket_cap_mb where only that is given (io/validate.cpp)
  bool bucket_cap_mb_given = false;
  bool first_bucket_mb_given = false;
  // Megatron-Core's gradient buckets (zero1, zero2; ddp under megatron or nemo): parameters per
  // bucket (--ddp-bucket-size), up to kMaxBucketParameters; 0 leaves it Megatron-Core's
  // default, max(4e7, 1e6·dp).
  long long bucket_parameters = 0;
  static constexpr long long kMaxBucketParameters = 1'000'000'000'000;
  // Off under DeepSpeed's pipeline engine whatever the scenario says, and by default under
  // DeepSpeed's ZeRO-1 and ZeRO-2, whose overlap_comm is off unless given (io/validate.cpp).
  bool overlap_grad_reduce = true;
  bool overlap_grad_reduce_given = false;
  // PyTorch DDP's gradient_as_bucket_view: the gradients are views of the buckets, which the
  // reducer scales in place; false (PyTorch's default) copies each gradient into its bucket
  // and back after the AllReduce, and keeps the buckets as a second gradient buffer. When the
  // scenario does not give it, training.framework decides (FrameworkTraits::pytorch_ddp).
  bool gradient_as_bucket_view = true;
  bool gradient_as_bucket_view_given = false;
  Precision grad_reduce_dtype = Precision::bf16;
  bool grad_reduce_dtype_given = false;  // the scenario gave grad_reduce_dtype (see main_grad_given)
  // Where the scenario does not give it, torchtitan's default under pipeline parallelism
  // (false) or true (io/validate.cpp).
  bool reshard_after_forward = true;
  bool reshard_after_forward_given = false;
  bool forward_prefetch = false;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::pre;
  int max_inflight_all_gathers = 2;
  bool overlap_param_gather = false;
  // 1 unless given, but 2 under torchtitan, which shards with fully_shard alone (io/validate.cpp).
  int fsdp_version = 1;
  bool fsdp_version_given = false;
  FsdpImpl fsdp_impl = FsdpImpl::pytorch;
  int shard_group = 0;  // hsdp: DP ranks per shard group, each with its CP group (0 = one NVLink domain)

  // PyTorch's FSDP1 (fsdp or hsdp, fsdp_version 1, fsdp_impl pytorch): each unit is one
  // FlatParameter, all-gathered in its param_dtype, the compute precision. Only FSDP2's
  // per-parameter hooks (fsdp_pre_all_gather, which torchao's enable_fsdp_float8_all_gather
  // implements) and Megatron-FSDP's fp8_param_gather gather FP8 weights at 1 byte.
  bool flat_parameter() const {
    return (kind == DpKind::fsdp || kind == DpKind::hsdp) && fsdp_version == 1 && fsdp_impl == FsdpImpl::pytorch;
  }
};

struct TensorParallelSpec {
  bool comm_overlap = false;  // TransformerEngine userbuffers (--tp-comm-overlap)
};

// How attention gets the keys and values of the other context-parallel ranks: passed around
// the CP ring one block per step, overlapped with attention (Megatron-Core's default `p2p`),
// or gathered whole before attention (`all_gather`, as Llama 3 was trained).
enum class CpComm { p2p, all_gather };

struct ContextParallelSpec {
  CpComm comm = CpComm::p2p;  // key context_parallel.comm
};

enum class Algorithm { automatic, ring, tree, nvls, nvls_tree, collnet, pat, direct };
enum class Protocol { automatic, ll, ll128, simple };

struct CollectivesSpec {
  Algorithm algorithm = Algorithm::automatic;  // forced algorithm, or NCCL's choice
  Protocol protocol = Protocol::automatic;
};

// Ranks that differ (key simulation.variation): GPUs or nodes that compute slower, links
// that carry less, random per-kernel jitter, and other jobs' traffic on the network.
struct GpuSpeed {
  int rank = 0;         // global rank
  double factor = 1.0;  // compute speed relative to the preset (0.8: kernels take 1/0.8 as long)
};

struct NodeSpeed {
  int node = 0;
  double factor = 1.0;  // compute speed of every GPU of the node
};

enum class LinkKind { nic, nvlink };

// One GPU's link (`rank` given) or every GPU's link of a node (`node` given; exactly one of
// the two) carries `factor` of its bandwidth.
struct LinkFactor {
  std::optional<int> rank;
  std::optional<int> node;
  LinkKind link = LinkKind::nic;
  double factor = 1.0;
};

// NICs of a node that are down: the node's network bandwidth drops to the NICs left.
struct FailedNics {
  int node = 0;
  int count = 1;
};

enum class JitterKind { none, normal, lognormal, uniform };

// Every compute kernel's duration times a draw of mean 1 and relative standard deviation
// `sigma`, a pure function of (seed, rank, op): the same seed gives the same step.
struct JitterSpec {
  JitterKind distribution = JitterKind::none;
  double sigma = 0;
  long long seed = 1;
};

struct VariationSpec {
  std::vector<GpuSpeed> gpu_speed;
  std::vector<NodeSpeed> node_speed;
  std::vector<LinkFactor> links;
  std::vector<FailedNics> failed_nics;
  JitterSpec jitter;
  double background_traffic = 0;  // fraction of every GPU's network bandwidth other jobs use
  // Whether some GPUs differ from others (representative mode cannot show that).
  bool singles_out_gpus() const {
    return !gpu_speed.empty() || !node_speed.empty() || !links.empty() || !failed_nics.empty();
  }
  bool jitters() const { return jitter.distribution != JitterKind::none && jitter.sigma > 0; }
};

struct SimulationSpec {
  RankMode ranks = RankMode::representative;
  VariationSpec variation;
};

struct Scenario {
  std::string source;  // file name, or "<default>"
  ModelSpec model;
  ClusterSpec cluster;
  ParallelSpec parallel;
  TrainingSpec training;
  DataParallelSpec data_parallel;
  TensorParallelSpec tensor_parallel;
  CollectivesSpec collectives;
  SimulationSpec simulation;
  ContextParallelSpec context_parallel;
  std::vector<std::string> calibration;  // calibration files (later)
  std::string resolved_json;             // the fully resolved scenario as canonical JSON text
  // The keys no layer of the scenario gave, whose values follow other keys (cluster.nodes,
  // training.framework's kernel keys, ...): resolved_json lists them under "derived", and
  // loading it derives them again (io/derived_keys.hpp).
  std::vector<std::string> derived;
  // The JSON pointers that --set assignments (a sweep's --vary among them) gave values, each
  // with everything below it: a bad value there is the assignment's, not the file's
  // (scenario_error in stepsim/error.hpp).
  std::vector<std::string> set_pointers;
};

// The most NVLink domains any EP group of the job spans (at least 1). Megatron-Core cuts each
// pipeline stage's ranks into blocks of ep·etp consecutive ranks, ETP innermost (expert_group in
// parallelism/mesh.hpp), so an EP group's ranks lie etp apart from the group's first rank,
// stage·i + ep·etp·j + q (q < etp), to (ep − 1)·etp past it, whatever TP and CP are. Whether a
// group crosses a domain boundary depends only on where its first rank falls in its domain:
// those places are found without listing the groups, as the residues modulo the domain size of
// the sums of each term's multiples (each term's repeat within the domain size). Under the flex
// dispatcher with etp > 1 the all-to-alls run over a whole block, stage·i + ep·etp·j to
// ep·etp − 1 past it (parallelism::dispatches_over_block).
inline int ep_domains(const Scenario& s) {
  const ParallelSpec& p = s.parallel;
  if (p.ep <= 1) return 1;
  const long long g = s.cluster.domain_gpus() > 1 ? s.cluster.domain_gpus() : 1;
  const long long etp = p.etp > 1 ? p.etp : 1;
  const bool whole_block = s.model.moe.experts > 0 && s.model.moe.dispatcher == MoeDispatcher::flex && etp > 1;
  const long long stage = static_cast<long long>(p.tp) * p.cp * p.dp;
  const long long block = p.ep * etp;
  std::vector<char> at(static_cast<std::size_t>(g), 0);  // residues of the first ranks seen so far
  at[0] = 1;
  const auto add = [&](long long step, long long count) {
    std::vector<char> next(at.size(), 0);
    const long long distinct = count < g ? count : g;
    for (long long r = 0; r < g; ++r) {
      if (at[static_cast<std::size_t>(r)] == 0) continue;
      for (long long i = 0; i < distinct; ++i) next[static_cast<std::size_t>((r + step % g * i) % g)] = 1;
    }
    at = std::move(next);
  };
  add(stage, p.pp);
  add(block, stage / block > 1 ? stage / block : 1);
  if (!whole_block) add(1, etp);
  const long long reach = whole_block ? p.ep * etp - 1 : (p.ep - 1) * etp;  // the last member past the first
  long long most = 1;
  for (long long r = 0; r < g; ++r) {
    if (at[static_cast<std::size_t>(r)] != 0) most = std::max(most, (r + reach) / g + 1);
  }
  return static_cast<int>(most);
}

}  // namespace stepsim
