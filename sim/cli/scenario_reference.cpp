// The scenario reference table: what each key means and which framework option it mirrors.
// Adding a key to the schema needs one row here; a test fails on a key without one.
#include "cli/scenario_reference.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>
#include <ostream>
#include <string_view>

namespace stepsim::cli {
namespace {

struct KeyDoc {
  std::string_view key;   // "parallel.tp"; a trailing ".*" documents every key below
  std::string_view unit;  // "", "GB/s", "MiB", ...
  std::string_view meaning;
  std::string_view framework;  // the framework option it corresponds to, or ""
};

constexpr KeyDoc kDocs[] = {
    {"model", "", "a model preset name (`stepsim presets --kind model`) or an object of the keys below", ""},
    {"model.name", "", "name shown in the report", ""},
    {"model.layers", "", "transformer layers", "Megatron `--num-layers`; HF `num_hidden_layers`"},
    {"model.hidden", "", "hidden size h", "Megatron `--hidden-size`; HF `hidden_size`"},
    {"model.heads", "", "attention (query) heads", "Megatron `--num-attention-heads`"},
    {"model.kv_heads", "", "key/value heads (grouped-query attention); 0: as many as heads",
     "Megatron `--num-query-groups`; HF `num_key_value_heads`"},
    {"model.ffn_hidden", "", "MLP inner size; 0: 4·hidden", "Megatron `--ffn-hidden-size`; HF `intermediate_size`"},
    {"model.head_dim", "",
     "width of one attention head, when heads·head_dim differs from hidden (Qwen3, GPT-OSS); 0: hidden/heads. At "
     "most 256 with fused attention",
     "Megatron `--kv-channels`; HF `head_dim`"},
    {"model.qk_norm", "",
     "each head's query and key RMS-normalized before the rotary embedding (Qwen3); not with `model.mla`",
     "Megatron `--qk-layernorm`; HF `q_norm`, `k_norm`"},
    {"model.vocab", "", "vocabulary size (padded)", "Megatron `--padded-vocab-size`; HF `vocab_size`"},
    {"model.seq_len", "tokens", "sequence length of one sample", "Megatron `--seq-length`"},
    {"model.mlp", "", "`gelu` (GPT: LayerNorm, biases) or `swiglu` (Llama: RMSNorm, no biases)", "Megatron `--swiglu`"},
    {"model.tied_embeddings", "", "input embedding and LM head share one weight",
     "Megatron without `--untie-embeddings-and-output-weights`"},
    {"model.moe.experts", "", "experts per MoE layer; 0: dense", "Megatron `--num-experts`"},
    {"model.moe.top_k", "",
     "experts each token is routed to; 1 where not given (Megatron's own default is 2; every MoE preset gives its "
     "model's)",
     "Megatron `--moe-router-topk`"},
    {"model.moe.expert_ffn_hidden", "", "MLP inner size of one expert; 0: `model.ffn_hidden`",
     "Megatron `--moe-ffn-hidden-size`"},
    {"model.moe.capacity_factor", "", "tokens an expert takes, as a multiple of an even share; 0: no dropping",
     "Megatron `--moe-expert-capacity-factor`"},
    {"model.moe.dispatcher", "",
     "`alltoall` (every routed copy sent to its expert's rank) or `flex` (DeepEP or HybridEP: a token sent once to "
     "each NVLink domain holding one of its experts, forwarded over NVLink there; under Megatron-Core no sort by "
     "local expert and no all-to-all of the probabilities); `flex` is Megatron-Core's option (training.framework "
     "megatron or nemo; unspecified where an EP group spans NVLink domains) and needs ep > 1; with etp > 1 it "
     "dispatches over the ep·etp ranks of an expert group, every expert's tokens to each of its ETP ranks, and no "
     "ETP AllGather or ReduceScatter runs (Megatron-Core's MoEFlexTokenDispatcher over its tp_ep group). "
     "`alltoall` where not given; Megatron's own default, `allgather`, is not simulated (refused)",
     "Megatron `--moe-token-dispatcher-type alltoall` or `flex` with `--moe-flex-dispatcher-backend deepep` or "
     "`hybridep`"},
    {"model.moe.a2a_overlap", "",
     "Megatron-Core's EP all-to-all overlap: each steady-state forward runs merged layer by layer with the backward of "
     "another micro-batch, each one's dispatch and combine under the other's compute; needs ep > 1 and schedule 1f1b "
     "(pp 1) or interleaved; Megatron-Core's option (training.framework megatron, nemo or unspecified), refused "
     "where Megatron-Core refuses it (full recompute, an fp32 model, more than one MTP layer)",
     "Megatron `--overlap-moe-expert-parallel-comm` with `--delay-wgrad-compute`; Megatron-Bridge `moe_a2a_overlap`"},
    {"model.moe.imbalance", "",
     "the busiest EP rank's routed tokens over the mean (1: even), at most ep·min(top_k, experts/ep)/top_k; it sets "
     "the pace",
     ""},
    {"model.moe.shared_experts", "", "experts every token goes through beside the routed ones",
     "Megatron `--moe-shared-expert-intermediate-size` (as a count of expert-sized MLPs)"},
    {"model.moe.load_balancing", "",
     "the router's load-balancing loss: `none`, `aux_loss` (over the micro-batch) or `seq_aux_loss` (per "
     "sequence); each adds its kernels beside the router, forward and backward, as Megatron-Core's fused router "
     "runs them",
     "Megatron `--moe-router-load-balancing-type` with `--moe-aux-loss-coeff` above 0"},
    {"model.moe.expert_bias", "", "the router counts the tokens per expert for its expert bias (DeepSeek-V3)",
     "Megatron `--moe-router-enable-expert-bias`"},
    {"model.moe.force_balance", "",
     "the router's logits replaced by random ones, as benchmarks run to balance the experts (two kernels a layer)",
     "Megatron `--moe-router-force-load-balancing`"},
    {"model.moe.first_dense_layers", "",
     "the first layers are dense, model.ffn_hidden wide, the rest MoE layers (DeepSeek-V3: 3)",
     "HF `first_k_dense_replace`; Megatron `--moe-layer-freq [0]*3+[1]*58`"},
    {"model.moe.layer_pattern", "",
     "one entry per layer, 1 for an MoE layer and 0 for a dense one (model.ffn_hidden wide); empty: every layer from "
     "first_dense_layers on is MoE",
     "Megatron `--moe-layer-freq` as a list"},
    {"model.mla.q_lora_rank", "",
     "multi-head latent attention: width of the query latent; 0: queries projected from the hidden state",
     "Megatron `--q-lora-rank`; HF `q_lora_rank`"},
    {"model.mla.kv_lora_rank", "", "multi-head latent attention: width of the key/value latent; 0: standard attention",
     "Megatron `--kv-lora-rank`; HF `kv_lora_rank`"},
    {"model.mla.qk_nope_head_dim", "", "per head, the query/key width without rotary positions",
     "Megatron `--qk-head-dim`; HF `qk_nope_head_dim`"},
    {"model.mla.qk_rope_head_dim", "",
     "per head, the query/key width with rotary positions (the key's shared by all heads)",
     "Megatron `--qk-pos-emb-head-dim`; HF `qk_rope_head_dim`"},
    {"model.mla.v_head_dim", "", "per head, the value width", "Megatron `--v-head-dim`; HF `v_head_dim`"},
    {"model.mtp_layers", "",
     "multi-token prediction depths, each one more transformer layer and the shared output head on the last stage "
     "(DeepSeek-V3: 1)",
     "Megatron `--mtp-num-layers`; HF `num_nextn_predict_layers`"},
    {"model.sliding_window", "tokens",
     "sliding-window attention: each query attends to at most this many tokens (gpt-oss: 128); 0: the whole causal "
     "prefix",
     "Megatron `--window-size`; HF `sliding_window`"},
    {"model.window_skip_freq", "",
     "every n-th layer (counted from 1) attends to the whole prefix, the others in the window (gpt-oss: 2); 0: every "
     "layer windowed",
     "Megatron `--window-attn-skip-freq`; HF `layer_types`"},
    {"model.swiglu_limit", "",
     "the routed experts' SwiGLU inputs clamped to this (the gate from above, the linear half both ways; gpt-oss: 7), "
     "in PyTorch operators before the fused activation; 0: no clamp",
     "Megatron `activation_func_clamp_value`; HF `swiglu_limit`"},
    {"model.linear_bias", "",
     "biases on the Linear layers of a SwiGLU model (gpt-oss); the routed experts' fc2 bias is added expert by expert "
     "after the grouped GEMM",
     "Megatron `--add-bias-linear`; HF `attention_bias`"},
    {"model.yarn_factor", "",
     "YaRN's context-extension factor (gpt-oss: 32): cos and sin scaled by 0.1·ln(factor) + 1, so Megatron-Core "
     "applies the rotary embedding in PyTorch operators, not Transformer Engine's fused kernel; 0: plain RoPE",
     "Megatron `yarn_rotary_scaling_factor`; HF `rope_scaling.factor`"},
    {"cluster", "", "a cluster preset name (`stepsim presets --kind cluster`) or an object of the keys below", ""},
    {"cluster.name", "", "name shown in the report", ""},
    {"cluster.nodes", "", "nodes; 0: as many as the job needs", ""},
    {"cluster.gpus_per_node", "", "GPUs in one node", "torchrun `--nproc-per-node`"},
    {"cluster.nvlink_domain", "",
     "GPUs joined by one NVLink fabric, whole nodes (72 in a GB200 NVL72 rack); groups inside it use NVLink across "
     "nodes; 0: one node",
     "NCCL's multi-node NVLink (`NCCL_MNNVL_ENABLE`)"},
    {"cluster.gpu", "", "a GPU preset name (`stepsim presets --kind gpu`) or an object of the keys below", ""},
    {"cluster.gpu.name", "", "name shown in the report", ""},
    {"cluster.gpu.arch", "", "`ampere`, `hopper` or `blackwell`", ""},
    {"cluster.gpu.flops.*", "FLOPS",
     "dense tensor-core peak per precision (datasheet, without sparsity): `bf16`, `fp16`, `fp8` (also MXFP8's), "
     "`tf32`, "
     "`fp32`, `fp4` (NVFP4's); `\"0 TFLOPS\"`: none",
     ""},
    {"cluster.gpu.memory", "bytes", "HBM capacity", ""},
    {"cluster.gpu.memory_bandwidth", "B/s", "HBM bandwidth (datasheet)", ""},
    {"cluster.gpu.sms", "",
     "streaming multiprocessors; acts only where something takes SMs from compute: with "
     "`efficiency.derived_comm_slowdown` true (the NCCL kernels' channels) and with "
     "`tensor_parallel.comm_overlap` (the 16 SMs of its reduce-scatter kernel); elsewhere no value changes the step",
     ""},
    {"cluster.gpu.kernel_launch", "time", "host (CPU) cost to launch one kernel", ""},
    {"cluster.gpu.efficiency.gemm_max", "fraction",
     "sustained fraction of dense peak reached by large GEMMs (0.01 to 1)", ""},
    {"cluster.gpu.efficiency.gemm_half_flops", "FLOPs",
     "GEMM size at which it reaches half of gemm_max, at the 16-bit rate: a fixed time per GEMM, so a GEMM of "
     "every precision reaches half at this times its peak over the 16-bit one (FP8 2, TF32 1/2)",
     ""},
    {"cluster.gpu.efficiency.gemm_half_k", "elements",
     "inner dimension K at which a GEMM reaches half of its rate for its size: each tile's fixed work (pipeline "
     "fill, epilogue) against its K loop, K / (K + this) in 16-bit elements (a GEMM of another precision: this "
     "times its peak over the 16-bit one); 0: none",
     ""},
    {"cluster.gpu.efficiency.fp8_gemm_max", "fraction",
     "sustained fraction of the FP8 dense peak reached by large FP8 GEMMs (training.precision fp8 or mxfp8; 0.01 "
     "to 1)",
     ""},
    {"cluster.gpu.efficiency.fp4_gemm_max", "fraction",
     "sustained fraction of the FP4 dense peak reached by large NVFP4 GEMMs (training.precision nvfp4; 0.01 to 1)", ""},
    {"cluster.gpu.efficiency.attention_max", "fraction",
     "fraction of dense peak reached by fused attention (0.01 to 1)", ""},
    {"cluster.gpu.efficiency.hbm", "fraction", "achievable fraction of HBM bandwidth (0.01 to 1)", ""},
    {"cluster.gpu.efficiency.kernel_min", "time", "shortest duration of any kernel", ""},
    {"cluster.gpu.efficiency.comm_slowdown", "fraction",
     "compute runs this much slower while a communication kernel shares the GPU", "NCCL's SMs (`NCCL_MAX_NCHANNELS`)"},
    {"cluster.gpu.efficiency.derived_comm_slowdown", "",
     "instead of `comm_slowdown`: a compute-bound kernel slows by the SMs the running NCCL kernels' channels take, a "
     "memory-bound one by the HBM bandwidth their bytes take (docs/model.md)",
     "one thread block per NCCL channel"},
    {"cluster.gpu.board_power_w", "W", "board power (TDP) for energy per step; 0: unknown", ""},
    {"cluster.gpu.provenance.fitted", "",
     "whether the efficiencies are fitted to measurements: `true`, `false` or `\"partly\"` (some of them); the "
     "report's notes warn unless `true`",
     ""},
    {"cluster.gpu.provenance.source", "", "what they are fitted to, or which datasheet and assumptions", ""},
    {"cluster.intra_node.fabric", "",
     "`nvswitch` or `pcie`; `nvlink-mesh` (NVLink point to point, as on DGX-1 and HGX A100 4-GPU boards) is refused as "
     "not simulated yet",
     ""},
    {"cluster.intra_node.bandwidth", "B/s",
     "NVLink bandwidth per GPU per direction; on a `pcie` fabric the line rate of each GPU's PCIe link, at most its "
     "x16 rate (Gen4 32, Gen5 64, Gen6 128 GB/s)",
     ""},
    {"cluster.intra_node.latency", "time",
     "per-hop latency inside a node; on a `pcie` fabric NCCL's PCI hop latency (1 us for LL) scaled by it / 1 us, "
     "and refused under 1 us",
     "NCCL's hwLat (src/graph/tuning.cc)"},
    {"cluster.intra_node.nvls", "", "NVLink SHARP (reductions in the NVSwitch)", "`NCCL_NVLS_ENABLE`"},
    {"cluster.inter_node.fabric", "",
     "`infiniband` or `roce` (modelled as InfiniBand: NCCL drives both with its IB verbs transport); `ethernet` "
     "(NCCL's socket transport) is refused as not simulated yet",
     ""},
    {"cluster.inter_node.nics_per_node", "", "network adapters per node", ""},
    {"cluster.inter_node.nic_bandwidth", "b/s", "bandwidth of one NIC per direction", ""},
    {"cluster.inter_node.latency", "time", "per-hop network latency", "NCCL's hwLat (src/graph/tuning.cc)"},
    {"cluster.inter_node.topology", "", "`rail-optimized` or `fat-tree`", ""},
    {"cluster.inter_node.oversubscription", "ratio", "leaf-to-spine oversubscription (1: non-blocking)", ""},
    {"cluster.inter_node.nodes_per_leaf", "",
     "nodes under one leaf switch (on a rail-optimized fabric, under each rail's leaf); traffic between leaves "
     "shares the leaf's uplinks, whose bandwidth is its nodes' NIC bandwidth over the oversubscription (so it "
     "matters only above 1); 1: every cross-node byte crosses the spine",
     ""},
    {"cluster.host_link.bandwidth", "B/s",
     "bandwidth per direction of one link between GPUs and their host's memory (NVLink-C2C from a Grace CPU, PCIe "
     "from an x86 host), which activation offload copies over; `\"0 GB/s\"`: none described (offload refused); a link "
     "no faster "
     "than the GPU's PCIe x16 line rate is the GPU's PCIe link, whose copies share it with the GPU's NIC traffic",
     ""},
    {"cluster.host_link.gpus_per_link", "",
     "GPUs sharing one host link (2 on a GB200 or GB300 superchip), consecutive GPUs of a node; each of the job's "
     "GPUs on a link gets the link over their number while they copy",
     ""},
    {"cluster.host_cpu", "",
     "`intel`, `amd` or `arm`: the hosts' CPU vendor, which NCCL's tuning reads for communicators across nodes: on "
     "AMD hosts LL's bus bandwidth is capped at 22.5 GB/s on two nodes and 19.0 on more (39.0 and 20.4 on others) "
     "and each network step of a ring costs at least 2 us (6 us with Simple) where others take 1 (3)",
     "NCCL `NCCL_NET_OVERHEAD` (the step overhead)"},
    {"cluster.collective_tuning.launch_overhead", "time",
     "added to NCCL's modelled time of every collective (launch and synchronisation)", ""},
    {"cluster.collective_tuning.bus_efficiency", "fraction",
     "achieved fraction of NCCL's modelled bus bandwidth (0.01 to 1)", ""},
    {"cluster.collective_tuning.ramp_half_bytes", "bytes",
     "per-rank size around which NCCL's model falls shortest: efficiency bus_efficiency / (1 + x^e / (1 + x²)), "
     "x = ramp_half_bytes / size, e = ramp_exponent, taken on the fastest Simple pair's bandwidth for whichever "
     "pair NCCL chooses; `\"0 B\"`: no size shortfall",
     ""},
    {"cluster.collective_tuning.ramp_exponent", "", "how slowly that shortfall falls above it (0.01 to 1)", ""},
    {"cluster.collective_tuning.latency_floor", "time", "no collective is faster (nccl-tests floor)", ""},
    {"cluster.gpu_hour_price", "currency/GPU-hour",
     "price of one GPU-hour for cost per step and per million tokens; 0: not given (no default)", ""},
    {"cluster.provenance.fitted", "",
     "whether collective_tuning is fitted to measurements: `true`, `false` or `\"partly\"`; the report's notes "
     "warn unless `true`",
     ""},
    {"cluster.provenance.source", "", "what it is fitted to, or which datasheet and assumptions", ""},
    {"parallel.tp", "", "tensor-parallel size (Megatron's column/row split of each layer)",
     "Megatron `--tensor-model-parallel-size`"},
    {"parallel.pp", "", "pipeline stages", "Megatron `--pipeline-model-parallel-size`"},
    {"parallel.dp", "", "data-parallel replicas", "world size / (tp·pp·cp)"},
    {"parallel.cp", "",
     "context-parallel size: the sequence split over cp ranks (2·cp chunks, causal load balance). Transformer "
     "Engine's context parallelism under training.framework `megatron`, `nemo` and `unspecified`; PyTorch's "
     "`context_parallel` under `torchtitan`, `torchtitan-compile` and `pytorch`; refused under `deepspeed` "
     "(DeepSpeed's long-sequence parallelism is Ulysses, not simulated)",
     "Megatron `--context-parallel-size`; torchtitan `context_parallel_degree`"},
    {"parallel.ep", "",
     "expert-parallel size: the experts of an MoE layer split over ep ranks, folded out of the ranks of one "
     "pipeline stage (ep·etp divides tp·cp·dp); under `torchtitan` and `torchtitan-compile` as its ParallelDims "
     "allows: with etp = tp a multiple of cp dividing cp·dp under `fsdp`, with etp = 1 a multiple of cp·tp dividing "
     "cp·tp·dp, and under `ddp` (whose DDP shards nothing) exactly cp with etp = tp or cp·tp with etp = 1",
     "Megatron `--expert-model-parallel-size`; torchtitan `--parallelism.expert_parallel_degree`"},
    {"parallel.sequence_parallel", "",
     "shard LayerNorm and dropout activations over TP (AllGather/ReduceScatter "
     "instead of AllReduce); needs tp > 1; under `torchtitan` and `torchtitan-compile` with tp > 1 true unless "
     "given, and false refused (its TP plan always shards the sequence)",
     "Megatron `--sequence-parallel`; torchtitan's `apply_tp` always"},
    {"parallel.schedule", "",
     "`1f1b`, `gpipe`, `interleaved`, `zb-h1` or `zb-h2` (zero bubble), `dualpipe` "
     "(bidirectional, pp even, micro-batches ≥ 2·pp); other than `1f1b` needs pp > 1",
     "Megatron's default 1F1B; `--num-layers-per-virtual-pipeline-stage` for interleaved; DeepSeek's DualPipe"},
    {"parallel.virtual_stages", "", "model chunks per stage (interleaved schedule)",
     "Megatron `--virtual-pipeline-model-parallel-size`"},
    {"parallel.etp", "",
     "expert tensor parallelism: each expert's fc1 split by columns and fc2 by rows over etp ranks, which gather "
     "their tokens (AllGather) before the experts and reduce-scatter after (the `alltoall` dispatcher); ep·etp "
     "divides tp·cp·dp and etp divides `model.moe.expert_ffn_hidden`. Not given: `parallel.tp` for a mixture of "
     "experts under `training.framework` megatron or nemo (Megatron-Core's default), 1 elsewhere (torchtitan's "
     "default); torchtitan refuses any but tp and 1",
     "Megatron `--expert-tensor-parallel-size`"},
    {"parallel.stage_layers", "",
     "layers per model chunk, first to last in the model's order: pp entries (one a stage; under DualPipe stage s "
     "holds chunks s and pp − 1 − s), or under the interleaved schedule pp·virtual_stages, stage s holding chunks "
     "s, s + pp, s + 2·pp, …; empty: an even split",
     "Megatron `--decoder-first-pipeline-num-layers` and `--decoder-last-pipeline-num-layers`"},
    {"training.global_batch", "sequences", "samples per optimizer step, all replicas together",
     "Megatron `--global-batch-size`"},
    {"training.micro_batch", "sequences", "samples per forward/backward pass", "Megatron `--micro-batch-size`"},
    {"training.precision", "",
     "`bf16`, `fp16`, `fp8`, `tf32`, `fp32`, or Transformer Engine's block-scaled `mxfp8` and `nvfp4` (Blackwell "
     "only); fp8, mxfp8 and nvfp4 run the Linear layers' GEMMs in that format, the rest in BF16; picks the peak MFU "
     "divides by; fp16 adds dynamic loss scaling's check before the optimizer step as the framework runs it (a pass "
     "over the gradients, the overflow flag's all-reduce, the CPU's wait for it; none under torchtitan)",
     "Megatron `--bf16`, `--fp16`, `--fp8-format`, `--fp8-recipe mxfp8`, `--fp4-recipe nvfp4`"},
    {"training.fp8_scaling", "",
     "per-tensor FP8's scales: `delayed` (from the amax history, taken inside the cast) or `current` (each tensor's "
     "own amax, a pass of its own before the cast); only with precision fp8; not given, `current` under "
     "`torchtitan` and `torchtitan-compile` (torchao's tensorwise recipe; torchao has had no delayed scaling "
     "since 0.10, so `delayed` is refused there) and `delayed` elsewhere",
     "Megatron `--fp8-recipe delayed` or `tensorwise`"},
    {"training.recompute", "",
     "`none`, `selective` (attention core), `full` (whole layer: every layer keeps only its input and recomputes its "
     "forward before its backward, one layer at a time; Megatron's `block` method, or a part of the layers, is not "
     "simulated) or `selective-op` (torchtitan: every other matmul output kept)",
     "Megatron `--recompute-activations` (selective), `--recompute-granularity full --recompute-method uniform "
     "--recompute-num-layers 1` (full)"},
    {"training.recompute_modules", "",
     "what `selective` recomputes, Megatron-Core's names: `core_attn` (the default alone), `layernorm` (norms not "
     "fused into a Linear: before MLA's down projections and before a MoE layer), `mla_up_proj` (MLA's up "
     "projections, latent norms and rotary embedding), `mlp` (dense layers' MLP), `moe_act` (the experts' "
     "activation); only with `selective`; `moe` and `shared_experts` refused (not simulated yet), as is a module "
     "the model lacks",
     "Megatron `--recompute-modules` (Megatron-Bridge `recompute_modules`)"},
    {"training.framework", "",
     "the framework that runs the step: `megatron`, `nemo`, `torchtitan`, `torchtitan-compile`, `pytorch` (eager "
     "DDP/FSDP) or `deepspeed`; sets `fusion`, `attention`, `cross_entropy`, `grad_clip` and "
     "`data_parallel.gradient_as_bucket_view` (and, under `megatron` and `nemo`, a mixture of experts' "
     "`parallel.etp`: tp; under `deepspeed` with zero1 or zero2, `data_parallel.overlap_grad_reduce`: off; under "
     "`torchtitan`, `parallel.sequence_parallel` with TP and `data_parallel.reshard_after_forward` with a "
     "pipeline) as it runs them (only those no layer gives: a key in the file, its "
     "preset or any --set wins, whatever the order) and the CPU's cost per "
     "operator (12 us of dispatch beside the launch; Megatron and NeMo "
     "also wait on the CPU for the gradient norm, and spend 73.4 us on it per expert GEMM of a grouped GEMM after the "
     "first); `unspecified`: the keys' own defaults, the launch alone",
     "Megatron-LM, NeMo, torchtitan (`--training.compile`), PyTorch, DeepSpeed"},
    {"training.cuda_graphs", "",
     "CUDA graphs replay the transformer layers' kernels and their TP/CP/EP communication: the CPU does not issue "
     "them (refused with torchtitan, DeepSpeed and FSDP, which do not capture them; under Megatron-Core refused with "
     "full recompute, which its per-layer graphs do not take, and in a GeLU model, with its dropout, with selective "
     "recompute of a module they capture: `core_attn` with whole layers or `attn`, `mlp` with whole layers or `mlp`)",
     "Megatron `--enable-cuda-graph`; torch.compile `mode=\"reduce-overhead\"`"},
    {"training.cuda_graph_scope", "",
     "with `cuda_graphs`, only these parts of each layer are replayed, as Megatron-Core's Transformer Engine graphs "
     "capture them: `attn` (the attention block with its TP and CP communication), `mlp` (a dense layer's MLP "
     "block), `moe_router` (a MoE layer's pre-MLP norm and router), `moe_preprocess` (the token dispatcher's "
     "preprocessing: the `alltoall` dispatcher's count of the tokens per expert and its AllGather over the EP "
     "group, and the permutation before the dispatch; with `moe_router` only, and not for the `alltoall` dispatcher "
     "with a capacity factor); the rest, the "
     "experts and the EP all-to-alls included, is issued by the "
     "CPU. Empty: the whole layer (refused for a mixture of experts, whose token counts vary). `moe` is refused as "
     "not simulated yet",
     "Megatron-Core `--cuda-graph-scope` (`--cuda-graph-impl transformer_engine`)"},
    {"training.activation_offload_layers", "",
     "transformer layers whose activations go to host memory during the forward and come back before their "
     "backward, over `cluster.host_link` on copy streams beside the compute (Transformer Engine's CPU offload); "
     "refused with pp > 1, recompute, CUDA graphs, `model.moe.a2a_overlap`, as many layers as the model has, or "
     "no host link",
     "Megatron-Core `cpu_offloading` with `cpu_offloading_num_layers` (Megatron-Bridge "
     "`cpu_offloading_num_layers`)"},
    {"training.attention", "",
     "`flash` (the GPU's fastest fused attention: cuDNN or FlashAttention-3 on Hopper), `flash2` "
     "(FlashAttention-2, PyTorch's scaled_dot_product_attention) or `unfused` (materialised s×s softmax)",
     "Megatron `--use-flash-attn`; torchtitan's SDPA: `flash2`"},
    {"training.fusion", "",
     "`fused` (element-wise work in fused kernels: Transformer Engine, Megatron, torch.compile) or `eager` "
     "(PyTorch eager: one kernel per operator, fp32 upcasts in RMSNorm, rotary embedding and the loss)",
     "torchtitan `--training.compile` (off: eager)"},
    {"training.cross_entropy", "",
     "`fused` (one kernel over the logits), `unfused` (Megatron's vocab-parallel cross entropy: fp32 copy, max, "
     "subtract, exp, sum and divide as separate kernels), `eager` (PyTorch's cross_entropy on the fp32 upcast "
     "logits outside torch.compile, with TP DTensor's loss_parallel: fp32 buffers of the logits' size), "
     "`compiled` (the same under torch.compile: the logits kept, the softmax recomputed in the backward) or `te` "
     "(Transformer Engine's `parallel_cross_entropy`: the gradient written into the logits in the forward, the "
     "logits alone kept; its forward timed as `fused`, its backward as one read and write of the logits)",
     "Megatron `--cross-entropy-loss-fusion` (absent: `unfused`; with `--cross-entropy-fusion-impl te`: `te`); "
     "torchtitan's loss: `eager` before 2025, `compiled` with `--training.compile` since"},
    {"training.memory_headroom", "bytes",
     "memory `fits` leaves free beyond the live tensors, the CUDA context and NCCL's buffers at the peak (the "
     "allocator's reserve takes what is left, up to its estimate); `sweep`, `--best` and the advice drop what "
     "does not fit with it",
     ""},
    {"training.expandable_segments", "",
     "PyTorch's caching allocator maps its memory in pages it gives back before an allocation fails: the reserve "
     "beyond the live tensors is the last 20 MiB page of its large pool and 2 MiB page of its small pool, not the "
     "13.3 % of the activations fitted to runs without it",
     "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`"},
    {"training.optimizer", "",
     "`adam`, `adamw` or `sgd` (with momentum); one fused kernel (FusedAdam, FusedSGD) under every framework but "
     "`pytorch`, whose torch.optim runs its foreach path (Adam 7 passes, AdamW 8, SGD 3), as `deepspeed` does SGD",
     "Megatron `--optimizer`"},
    {"training.grad_clip", "",
     "clip gradients by their global norm: the optimizer step also reads them for the norm "
     "and scales them in place",
     "Megatron `--clip-grad` (0: `false`); torchtitan `--training.max_norm`"},
    {"training.optimizer_state", "",
     "precision of the optimizer's moments: `fp32` or `bf16` (master weights stay fp32)",
     "Megatron `--use-precision-aware-optimizer` with `--exp-avg-dtype` and `--exp-avg-sq-dtype`"},
    {"training.main_grad", "",
     "precision of the main gradients micro-batches accumulate into: `fp32` or `bf16`; under `megatron` and `nemo` "
     "with `data_parallel.kind` `ddp` or `zero1` the buffer `data_parallel.grad_reduce_dtype` reduces, so one given "
     "sets the other, both given must agree, and neither given is `fp32` for both; under PyTorch's DDP (`ddp` under "
     "`pytorch`, `torchtitan`, `torchtitan-compile`) the parameters' own gradients, which its buckets reduce as they "
     "are: tied alike, neither given is `fp32`, as autocast (PyTorch's mixed precision beside DDP, torchtitan's for "
     "DDP) keeps the parameters and their gradients, with no master copy; `bf16` is a model cast to bf16",
     "Megatron `--accumulate-allreduce-grads-in-fp32` (`grad_reduce_in_fp32`), `--main-grads-dtype`"},
    {"data_parallel.kind", "",
     "`ddp`, `zero1` (Megatron's distributed optimizer: gradients reduce-scattered in the last micro-batch), "
     "`zero2` (the same with the gradients sharded too, so reduce-scattered in every micro-batch, as DeepSpeed's "
     "ZeRO-2), `fsdp` (ZeRO-3) or `hsdp`; a key of another kind "
     "(the ones below marked with their kinds) set away from its default is refused, as it would do nothing; so is "
     "a kind the framework lacks: `pytorch` and `torchtitan` have `ddp`, `fsdp` and `hsdp`, `deepspeed` all but "
     "`hsdp`, and its `fsdp` is ZeRO-3, which takes none of PyTorch FSDP's keys (`fsdp_version`, "
     "`reshard_after_forward`, the prefetch keys, `max_inflight_all_gathers`). Of a mixture of experts, `zero1`, "
     "`zero2` and `fsdp` shard the routed experts' states over the expert-dp group (tp·cp·dp / (ep·etp) ranks), "
     "`fsdp` gathering and reducing them with their layer over that group (torchtitan's experts unit on its "
     "`dp_shard_mod_ep` mesh), `hsdp` over the expert-dp ranks inside a shard group, their shard all-reduced across "
     "the shard groups (torchtitan's experts unit on (dp_replicate, dp_shard_mod_ep); ep·etp must divide "
     "tp·cp·shard_group; refused under Megatron-Core's frameworks as not simulated yet), and `fsdp` under "
     "`deepspeed` is refused as DeepSpeed refuses it (ZeRO-3 does not train a mixture of experts)",
     "PyTorch DDP; Megatron `--use-distributed-optimizer`; DeepSpeed `zero_optimization.stage` 2; FSDP "
     "FULL_SHARD / HYBRID_SHARD"},
    {"data_parallel.bucket_cap_mb", "MiB",
     "ddp (PyTorch's): gradient bucket size; Megatron-Core's buckets (zero1, zero2, and ddp under framework megatron "
     "or nemo) are sized by `bucket_parameters`. No bucket key applies under DeepSpeed's pipeline engine (framework "
     "`deepspeed` with pp > 1): one set is refused",
     "PyTorch DDP `bucket_cap_mb`"},
    {"data_parallel.first_bucket_mb", "MiB",
     "ddp (PyTorch's): size of the first (smallest) bucket; under `pytorch`, `torchtitan` and `torchtitan-compile`, "
     "where only `bucket_cap_mb` is given, that size, as PyTorch caps the first bucket at 1 MiB only when "
     "`bucket_cap_mb` is left unset",
     "PyTorch DDP's first bucket (`dist._DEFAULT_FIRST_BUCKET_BYTES`)"},
    {"data_parallel.bucket_parameters", "parameters",
     "zero1, zero2, and ddp under framework megatron or nemo (Megatron-Core's buckets): parameters per gradient "
     "bucket, each closed once it holds at least that many, in the first pipeline stage's first "
     "model chunk (every other chunk is one bucket; zero2 splits every chunk of every stage alike); `0` (default) "
     "makes it max(4e7, 1e6·dp), Megatron-Core's "
     "default. Under framework `deepspeed` (ZeRO's `reduce_bucket_size`, 5e8 by default) a bucket holds at most "
     "that many, and two buffers of that size hold the gradients it copies in (one without overlap_grad_reduce, its "
     "default there); refused under its pipeline "
     "engine, pp > 1, which reduces in buffers of its own",
     "Megatron `--ddp-bucket-size` (`DistributedDataParallelConfig.bucket_size`); DeepSpeed "
     "`zero_optimization.reduce_bucket_size`"},
    {"data_parallel.overlap_grad_reduce", "",
     "ddp, zero1, zero2: reduce gradient buckets during the backward; false: one reduction of all gradients after "
     "the backward (zero2: each bucket still as the backward fills it, but on the compute stream, the backward "
     "waiting for it, one bucket held unsharded). Under framework deepspeed it defaults to false with ddp (ZeRO "
     "stage 0: the engine all-reduces every gradient after the backward, in buffers of 5e8 elements), zero1 and "
     "zero2 (DeepSpeed's `overlap_comm` is on by default for ZeRO stage 3 only), and with pp > 1 it is false "
     "whatever it says (the notes say so): DeepSpeed's pipeline engine reduces after the whole schedule",
     "Megatron `--overlap-grad-reduce`; DeepSpeed `overlap_comm`; for DDP, false stands for `no_sync()` until the "
     "last micro-batch and one flat AllReduce after it"},
    {"data_parallel.gradient_as_bucket_view", "",
     "ddp: gradients are views of their buckets, scaled there in place; `false` copies each gradient into its "
     "bucket and back after the AllReduce (a kernel and a PyTorch operator per parameter each way) and keeps the "
     "buckets as a second gradient buffer. Default `false` under `pytorch`, `torchtitan` and `torchtitan-compile` "
     "(PyTorch's default), `true` otherwise; `false` is refused under `megatron`, `nemo` and `deepspeed`, whose "
     "DDP does not copy, and with any other `data_parallel.kind`",
     "PyTorch DDP `gradient_as_bucket_view`"},
    {"data_parallel.grad_reduce_dtype", "",
     "precision gradients are reduced in; under `megatron` and `nemo` with `ddp` or `zero1`, and under PyTorch's DDP, "
     "that of the main gradients (`training.main_grad`); elsewhere `bf16` by default, `fp32` where "
     "`training.precision` keeps fp32 parameters (`fp32`, `tf32`)",
     "Megatron `--accumulate-allreduce-grads-in-fp32`"},
    {"data_parallel.reshard_after_forward", "",
     "fsdp, hsdp: free gathered parameters after the forward; under `torchtitan` and `torchtitan-compile` with "
     "pp > 1 false unless given (its default policy)",
     "FSDP `reshard_after_forward` / FULL_SHARD vs SHARD_GRAD_OP; torchtitan `fsdp_reshard_after_forward`"},
    {"data_parallel.forward_prefetch", "",
     "fsdp, hsdp (PyTorch FSDP 1; FSDP 2 and Megatron-FSDP always do, refused there): gather the next unit's "
     "parameters during the forward",
     "FSDP `forward_prefetch`"},
    {"data_parallel.backward_prefetch", "",
     "fsdp, hsdp (PyTorch FSDP 1; FSDP 2 and Megatron-FSDP always gather ahead, refused there): `pre`, `post` or "
     "`none`",
     "FSDP `backward_prefetch`"},
    {"data_parallel.max_inflight_all_gathers", "",
     "fsdp, hsdp (FSDP 1; FSDP 2 has no limit): AllGathers in flight before waiting; with prefetch, the layers "
     "held gathered at once (memory)",
     "FSDP `limit_all_gathers` (rate limiter of 2)"},
    {"data_parallel.overlap_param_gather", "",
     "zero1/zero2: gather updated parameters during the next forward; refused under framework `deepspeed`, whose "
     "ZeRO gathers them after its optimizer step",
     "Megatron `--overlap-param-gather`"},
    {"data_parallel.fsdp_version", "",
     "fsdp, hsdp: 1 (FlatParameter FSDP) or 2 (per-parameter `fully_shard`); not given, 2 under framework "
     "`torchtitan` (its only FSDP: 1 is refused there) and 1 elsewhere",
     "`FullyShardedDataParallel` vs `fully_shard`"},
    {"data_parallel.fsdp_impl", "",
     "fsdp, hsdp: whose FSDP holds the memory: `pytorch` (PyTorch's, as `fsdp_version` says) or `megatron` "
     "(Megatron-FSDP under Megatron-Core, training.framework `megatron` or `nemo`: its sharded BF16 or FP8 "
     "model-weight buffer beside the fp32 main weights, a double buffer of two layers' gathered weights and two "
     "layers' gradients, the embedding and LM head kept gathered, the embedding's gradient held only after the "
     "peak; docs/model.md). The step is timed as FSDP1's in-place gathers either way, so `megatron` needs "
     "`fsdp_version` 1, `reshard_after_forward` true and `max_inflight_all_gathers` 2, and refuses MXFP8 and NVFP4",
     "Megatron-Core `use_megatron_fsdp` with `data_parallel_sharding_strategy` `optim_grads_params` and "
     "`fsdp_double_buffer`"},
    {"data_parallel.shard_group", "DP ranks",
     "hsdp: DP ranks per shard group, each with its whole CP group (FSDP shards over shard_group·cp GPUs and "
     "replicates over dp / shard_group); 0: the DP ranks of one NVLink domain (node, or cluster.nvlink_domain)",
     "HSDP `device_mesh`; torchtitan `data_parallel_shard_degree` (sharded over the `dp_shard_cp` mesh)"},
    {"tensor_parallel.comm_overlap", "",
     "overlap TP communication with GEMMs (needs sequence parallelism, an NVLink fabric (not `pcie`) and every TP "
     "group inside one NVLink domain: tp at most the domain's GPUs, and no group of consecutive ranks across a "
     "domain's boundary); refused under `training.framework` `torchtitan` (torchtitan's async TP needs "
     "torch.compile), `pytorch` and `deepspeed`, which have none",
     "Megatron `--tp-comm-overlap` (Transformer Engine userbuffers); torchtitan-compile's async TP "
     "(`enable_async_tensor_parallel`)"},
    {"collectives.algorithm", "",
     "force an NCCL algorithm on the collectives, or `auto` for NCCL's choice (AllToAll and SendRecv, point to point "
     "in NCCL, keep NCCL's own)",
     "`NCCL_ALGO`"},
    {"collectives.protocol", "",
     "force an NCCL protocol on the collectives, or `auto` (AllToAll and SendRecv keep NCCL's own)", "`NCCL_PROTO`"},
    {"calibration", "", "calibration files applied after the presets (`stepsim calibrate`)", "`--calibration FILE`"},
    {"simulation.ranks", "", "`representative` (one rank per pipeline stage) or `all` (every GPU)", ""},
    {"simulation.variation.gpu_speed", "",
     "GPUs that compute at another speed: a list of `{\"rank\": R, \"factor\": F}`, F from 0.01 to 10 (0.8: "
     "every kernel takes 1/0.8 as long); a GPU's entries and its node's `node_speed` entries multiply, their "
     "product in the same range; needs `simulation.ranks` `all`",
     ""},
    {"simulation.variation.node_speed", "",
     "nodes whose GPUs all compute at another speed: a list of `{\"node\": N, \"factor\": F}`, F from 0.01 to "
     "10; needs `all`",
     ""},
    {"simulation.variation.links", "",
     "links that carry a share of their bandwidth: a list of `{\"rank\": R}` or `{\"node\": N}` with `\"link\"` "
     "`nic` or `nvlink` and `\"factor\"` F from 0.01 to 10 (above 1 a faster link, as on a partly upgraded "
     "cluster; the entries for a GPU's link and its node's multiply, their product in the same range); a group's "
     "collectives cost what NCCL predicts on its slowest links (the same factor on every node is the cluster with "
     "that bandwidth); needs `all`",
     ""},
    {"simulation.variation.failed_nics", "",
     "NICs that are down: a list of `{\"node\": N, \"count\": C}` (C 1 unless given); entries for one node add "
     "up; the node's GPUs share the NICs left, and NCCL, which finds the NICs at init, costs a communicator on the "
     "NICs left on its node with the fewest (a node built with that many); needs `all`",
     ""},
    {"simulation.variation.jitter.distribution", "",
     "per-kernel jitter: `none`, `normal`, `lognormal` or `uniform`, of mean 1; in representative mode each collective "
     "waits the expected time for its slowest member instead (the expected maximum of that distribution's drift)",
     ""},
    {"simulation.variation.jitter.sigma", "fraction",
     "relative standard deviation of a kernel's duration (0.05: 5 %), at most 0.3 for a normal, 0.577 for a uniform, 1 "
     "for a lognormal",
     ""},
    {"simulation.variation.jitter.seed", "",
     "seed of the draws (the same seed gives the same step); used by `simulation.ranks` `all`", ""},
    {"simulation.variation.background_traffic", "fraction",
     "share of every GPU's network bandwidth taken by other jobs' traffic (0: none); NCCL never sees it, so its "
     "rings and trees stay those of the NICs' line rate",
     ""},
    {"derived", "",
     "written by `stepsim presets NAME --resolved` and the report's `config`: the keys no layer of the scenario gave, "
     "whose values there are the defaults or follow other keys (`cluster.nodes`, `parallel.etp`, "
     "`training.framework`'s keys, "
     "`first_bucket_mb` after `bucket_cap_mb`, ...); loading the file derives them again, so that it behaves as the "
     "scenario it came from under any `--set`. Take a key out of the list to give its value (a listed value that the "
     "other keys do not give is refused)",
     ""},
    {"context_parallel.comm", "",
     "`p2p` (K/V around the CP ring, overlapped with attention) or `all_gather` (Transformer Engine: an "
     "AllGather of K and one of V; PyTorch's `context_parallel`: one AllGather of K/V, the rank's own block's "
     "attention beside it)",
     "Megatron-Core `--cp-comm-type` p2p / all_gather; torchtitan `context_parallel_rotate_method` and "
     "PyTorch's `set_rotate_method` alltoall / allgather"},
};

const KeyDoc* find_doc(std::string_view key) {
  for (const KeyDoc& d : kDocs) {
    if (d.key == key) return &d;
    if (d.key.ends_with(".*") && key.starts_with(d.key.substr(0, d.key.size() - 1))) return &d;
  }
  return nullptr;
}

void collect(const boost::json::value& v, const std::string& prefix,
             std::vector<std::pair<std::string, boost::json::value>>& out) {
  const bool leaf = !v.is_object() || (!prefix.empty() && v.get_object().empty());
  if (leaf) {
    out.emplace_back(prefix, v);
    return;
  }
  for (const auto& [key, value] : v.get_object())
    collect(value, prefix.empty() ? std::string(key) : prefix + "." + std::string(key), out);
}

std::string cell(std::string_view text) { return text.empty() ? "" : std::string(text); }

}  // namespace

std::string value_text(const boost::json::value& v) {
  if (v.is_double()) return fmt::format("{}", v.get_double());
  if (v.is_array()) {
    std::string s = "[";
    for (const auto& e : v.get_array()) s += (s.size() > 1 ? ", " : "") + value_text(e);
    return s + "]";
  }
  return boost::json::serialize(v);
}

std::vector<std::pair<std::string, boost::json::value>> leaf_keys(const boost::json::value& scenario) {
  std::vector<std::pair<std::string, boost::json::value>> out;
  collect(scenario, "", out);
  return out;
}

std::vector<std::string> undocumented_keys(const boost::json::value& scenario) {
  std::vector<std::string> missing;
  for (const auto& [key, value] : leaf_keys(scenario))
    if (find_doc(key) == nullptr) missing.push_back(key);
  return missing;
}

void write_scenario_reference(const boost::json::value& scenario, std::ostream& out) {
  out << "# Scenario reference\n\n"
         "Generated by `stepsim presets --keys --markdown` from the scenario schema; do not edit by hand\n"
         "(a test checks that this file is up to date). A scenario file is JSON with comments and\n"
         "trailing commas. `model`, `cluster` and `cluster.gpu` are each a preset name (`stepsim presets`)\n"
         "or an object of the keys below with an optional `\"preset\"` whose keys it overrides; every\n"
         "other section is an object of the keys below (a string or a `\"preset\"` key there is\n"
         "refused); the whole file may start from an example scenario with a top-level `\"preset\"`.\n"
         "`--set KEY=VALUE` overrides one key (whatever the order of the assignments, a section's keys\n"
         "apply after the section: `cluster` before `cluster.gpu`). Quantities with a unit are strings\n"
         "with the unit, zero too (`\"400 Gb/s\"`, `\"2.5 us\"`, `\"80 GiB\"`, `\"989 TFLOPS\"`, `\"0 GB/s\"`);\n"
         "bare numbers are plain JSON numbers. The value column is the default scenario's (`stepsim\n"
         "simulate` with no file: Llama 3 8B on 64 H100); keys a preset sets take the preset's value.\n";
  std::string section;
  for (const auto& [key, value] : leaf_keys(scenario)) {
    const std::string top = key.substr(0, key.find('.'));
    if (top != section) {
      section = top;
      out << fmt::format(
          "\n## {}\n\n| key | unit | default scenario | meaning | framework option |\n|---|---|---|---|---|\n",
          section);
    }
    const KeyDoc* d = find_doc(key);
    out << fmt::format("| `{}` | {} | `{}` | {} | {} |\n", key, d ? cell(d->unit) : "", value_text(value),
                       d ? cell(d->meaning) : "(undocumented)", d ? cell(d->framework) : "");
  }
}

}  // namespace stepsim::cli
