// What each training framework (training.framework) runs: the kernel keys it sets and the CPU's
// cost to issue one operator beyond its kernel launch (docs/model.md, "The host").
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "stepsim/scenario.hpp"
#include "stepsim/units.hpp"

namespace stepsim {

struct FrameworkTraits {
  Framework framework = Framework::unspecified;
  std::string_view name;  // the key's value: "megatron", "torchtitan-compile", ...
  // The kernel keys it sets where no layer of the scenario gives them (io/scenario_schema.cpp).
  Fusion fusion = Fusion::fused;
  AttentionKind attention = AttentionKind::flash;
  CrossEntropy cross_entropy = CrossEntropy::fused;
  bool grad_clip = true;
  // CPU per operator beyond its kernel launch (cluster.gpu.kernel_launch): PyTorch's dispatcher,
  // autograd and the framework's Python around it.
  Time dispatch = Time::zero();
  // The optimizer step reads the gradients' global norm on the CPU (Megatron's clip_grad_norm
  // calls .item()): the host waits there for every gradient before it issues the step.
  bool syncs_grad_norm = false;
  std::string_view kernels;  // the report's note: what it runs, in words
  // The step runs on Megatron-Core with Transformer Engine, and so does what only it does:
  // low-precision weights quantized on a step's first micro-batch only (its schedules call
  // set_is_first_microbatch() before each model chunk's first forward, and Transformer Engine's
  // Linear layers reuse the quantized copy on the others: get_weight_workspace with
  // update_workspace = is_first_microbatch), its DDP's main-gradient buffer (zeroed each step,
  // every autograd gradient added into it), and the options scenarios may ask of it alone
  // (the EP all-to-all overlap, activation offload, recompute_modules).
  bool megatron_core = false;
  // The model code is torchtitan's Llama: the attention repeats the K/V heads up to the query
  // heads before scaled_dot_product_attention (repeat_kv), so every K/V tensor the attention and
  // its context parallelism hold or move is as wide as the queries.
  bool torchtitan_attention = false;
  // CPU per expert GEMM of a grouped GEMM beyond the first, beyond the GEMM's launch:
  // Transformer Engine's GroupedLinear (Megatron-Core's experts) works on the host per expert
  // around each of its GEMMs, forward and backward (docs/model.md, "The host"). Fitted
  // (docs/validation.md); zero where the experts are not TE's.
  Time expert_gemm_host = Time::zero();
  // Its data_parallel.kind ddp is PyTorch's DistributedDataParallel (torchtitan's replicate
  // too), whose reducer copies each gradient into its bucket unless gradient_as_bucket_view
  // (PyTorch's default: off). Megatron-Core's DDP reduces its gradient buffer as it is.
  bool pytorch_ddp = false;
};

// How the framework's optimizer step runs its kernels: one fused kernel per step (Transformer
// Engine's or Apex's FusedAdam and FusedSGD under Megatron-Core, falling back to torch.optim
// only where neither is installed; DeepSpeed's FusedAdam for its "Adam" and "AdamW";
// torchtitan's optimizer.implementation, "fused" by default), or torch.optim's foreach path,
// one multi-tensor kernel per arithmetic operator (torch.optim's default on CUDA:
// _default_to_fused_or_foreach picks foreach unless fused=True is asked; eager PyTorch, and
// DeepSpeed's SGD, which it takes from torch.optim).
enum class OptimizerKernels : std::uint8_t { fused, foreach };
OptimizerKernels optimizer_kernels(Framework f, std::string_view optimizer);

// What the framework does each step under fp16 mixed precision (training.precision fp16) to
// check the loss-scaled gradients for overflow before the optimizer step:
// - megatron_core: MixedPrecisionOptimizer._unscale_main_grads_and_check_for_nan, one
//   _amp_foreach_non_finite_check_and_unscale_ over the main gradients (read and written), an
//   all_reduce(found_inf, MAX) over the gradient-statistics group (the model-parallel group;
//   every rank under the distributed optimizer) and found_inf.item();
// - grad_scaler: torch.amp.GradScaler, the same kernel in unscale_ and the .item() of
//   found_inf in step; ShardedGradScaler (FSDP) all-reduces found_inf over its process group
//   (the world by default) first;
// - deepspeed: the ZeRO and FP16 optimizers' has_overflow, each gradient cast to fp32 and
//   summed (_has_inf_or_nan), the flag all-reduced over the data-parallel group (ZeRO-2's
//   partitioned gradients) and the model-parallel group, and .item();
// - none: no loss scaling (torchtitan has no GradScaler).
enum class LossScaling : std::uint8_t { none, megatron_core, grad_scaler, deepspeed };
LossScaling loss_scaling(Framework f);

// Whether the framework has data-parallel kind `kind` (data_parallel.kind): Megatron-Core's DDP,
// distributed optimizer (zero1, zero2) and FSDP under megatron, nemo and the unspecified
// framework; DeepSpeed's ZeRO stages 0 to 3 (ddp, zero1, zero2, fsdp), without PyTorch FSDP's
// HYBRID_SHARD; PyTorch's DistributedDataParallel, FSDP and HSDP alone under pytorch and
// torchtitan (torchtitan's replicate and fully_shard). dp_kind_absence says why not.
bool has_dp_kind(Framework f, DpKind kind);
std::string_view dp_kind_absence(Framework f);

// PyTorch's DDP with torch.optim (data_parallel.kind ddp under a framework whose DDP is PyTorch's:
// pytorch, torchtitan, torchtitan-compile): the optimizer steps the parameters themselves, which
// keep their gradients' precision (training.main_grad), and no master copy exists
// (io's tie_gradient_buffer).
bool optimizer_on_parameters(const Scenario& scenario);

// The step runs under torch.autocast over an fp32 model: PyTorch's mixed precision beside DDP
// (torchtitan's maybe_enable_amp for DDP and single-device runs, PyTorch's AMP recipe), a
// training.precision below fp32 with fp32 parameters and gradients (optimizer_on_parameters, main
// gradients fp32). The memory model counts its bf16 weight copies and the workload its casts
// (docs/model.md, "Autocast").
bool runs_autocast(const Scenario& scenario);

// HSDP's ranks of the scenario's DP group per shard group (base/framework.cpp says how the
// default is chosen): of the gradient scenario's (cp folded into dp), the shard group's DP ranks
// times the cp folded in. Shared by the validation of a scenario and its simulation.
int hsdp_shard_ranks(const Scenario& scenario);

// Every framework, unspecified first.
std::span<const FrameworkTraits> frameworks();
const FrameworkTraits& traits_of(Framework f);

// A Megatron-Core option is asked for under this framework: Megatron-Core's own, or the
// unspecified one, whose kernel keys default to Megatron-Core's.
inline bool runs_megatron_options(Framework f) { return f == Framework::unspecified || traits_of(f).megatron_core; }

// Tensor parallelism runs on Megatron-Core's Linear layers (Transformer Engine's): megatron, nemo
// and the unspecified framework, whose kernels are Megatron-Core's. Under sequence parallelism
// they save the rank's shard of a column-parallel input and all-gather it again for the weight
// gradient (LinearWithGradAccumulationAndAsyncCommunication, TE's _LayerNormLinear). Elsewhere
// tensor parallelism is PyTorch's DTensor (torchtitan's plan, parallelize_module): F.linear saves
// the tensor PrepareModuleInput gathered, and nothing is gathered again.
inline bool regathers_inputs(Framework f) { return runs_megatron_options(f); }

// The framework captures the transformer layers of a training step in CUDA graphs (Megatron's
// --enable-cuda-graph, NeMo's, PyTorch's make_graphed_callables); torchtitan's and DeepSpeed's
// steps are not captured.
inline bool captures_cuda_graphs(Framework f) {
  return f != Framework::torchtitan && f != Framework::torchtitan_compile && f != Framework::deepspeed;
}

// Context parallelism is PyTorch's torch.distributed.tensor.experimental.context_parallel, eager
// PyTorch's only one (torchtitan's too): _templated_ring_attention and its backward, the K/V
// all-gathered (_AllGatherRotater, rotate method "allgather", started before the attention of the
// rank's own block, which runs while it is in flight) or passed around the ring ("alltoall"), the
// dK/dV around the ring in float32. Elsewhere it is Transformer Engine's, as Megatron-Core runs
// it (the unspecified framework's kernels are Megatron-Core's); DeepSpeed has none (io refuses it).
inline bool pytorch_context_parallel(Framework f) {
  return f == Framework::torchtitan || f == Framework::torchtitan_compile || f == Framework::pytorch;
}

// torchtitan runs the step, eager or compiled: its parallelize_llama decides more than the
// kernels (its TP plan shards the sequence, its FSDP reshards by its own policy).
inline bool torchtitan(Framework f) { return f == Framework::torchtitan || f == Framework::torchtitan_compile; }

// The pipeline runs under torch.distributed.pipelining (PipelineStage and its schedules), as
// torchtitan and eager PyTorch run one, and as the unspecified framework's FSDP stages do;
// Megatron-Core runs its own schedules (with its own DDP or its FSDP alike), DeepSpeed its
// pipeline engine.
inline bool pytorch_pipelining(Framework f, DpKind kind, int pp) {
  if (pp <= 1 || traits_of(f).megatron_core || f == Framework::deepspeed) return false;
  return f != Framework::unspecified || kind == DpKind::fsdp || kind == DpKind::hsdp;
}
inline bool pytorch_pipelining(const Scenario& s) {
  return pytorch_pipelining(s.training.framework, s.data_parallel.kind, s.parallel.pp);
}

// Gradient buckets as Megatron-Core makes them, sized in parameters (data_parallel.
// bucket_parameters, by default max(4e7, 1e6·dp)): the distributed optimizer's (zero1, zero2)
// under every framework, and DDP's where the DDP is Megatron-Core's (training.framework megatron
// or nemo). Elsewhere DDP's buckets are PyTorch's, sized in MiB (bucket_cap_mb, first_bucket_mb).
inline bool megatron_buckets(DpKind kind, Framework f) {
  return kind == DpKind::zero1 || kind == DpKind::zero2 || (kind == DpKind::ddp && traits_of(f).megatron_core);
}

// DeepSpeed's pipeline engine (training.framework deepspeed with pp > 1) schedules the gradient
// reduction itself: every stage reduces its gradients after the whole schedule (TrainSchedule's
// ReduceGrads step), never during the backward, under ZeRO stage 0 or 1 only.
inline bool deepspeed_pipeline_engine(Framework f, int pp) { return f == Framework::deepspeed && pp > 1; }
inline bool deepspeed_pipeline_engine(const Scenario& s) {
  return deepspeed_pipeline_engine(s.training.framework, s.parallel.pp);
}

// A bucket size in parameters applies (data_parallel.bucket_parameters): Megatron-Core's
// buckets and DeepSpeed ZeRO's, outside DeepSpeed's pipeline engine, which reduces in buffers of
// its own after the schedule.
inline bool buckets_in_parameters(DpKind kind, Framework f, int pp) {
  return megatron_buckets(kind, f) && !deepspeed_pipeline_engine(f, pp);
}

}  // namespace stepsim
