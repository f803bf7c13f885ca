// The frameworks' table: each row is how that framework runs a transformer step (docs/model.md).
#include "stepsim/framework.hpp"

#include <algorithm>
#include <array>
#include <numeric>

namespace stepsim {
namespace {

// CPU per operator beyond its launches: the median, over the innermost CPU operators around a
// kernel launch, of each one's duration less the launches it encloses (the operators' median
// 18 us, the cudaLaunchKernel's 6 us), over the 14,113 operators of the three
// PyTorch profiler traces in tests/data/traces (`stepsim calibrate from-trace --host`).
constexpr Time kEagerDispatch = Time::from_ps(12'000'000);

// CPU per further expert GEMM of Transformer Engine's GroupedLinear beyond its launch, fitted
// to Megatron-Bridge's Qwen3 30B-A3B MXFP8 run at micro-batch 1 on 8 B200 (26.02), the most
// host-bound run at hand (docs/validation.md).
constexpr Time kExpertGemmHost = Time::from_ps(73'400'000);

constexpr std::array kFrameworks{
    FrameworkTraits{Framework::unspecified, "unspecified", Fusion::fused, AttentionKind::flash, CrossEntropy::fused,
                    true, Time::zero(), false,
                    "the kernel keys' own defaults (fused element-wise kernels, the GPU's fastest fused attention, "
                    "fused cross entropy, as Megatron-Core with Transformer Engine runs them) and each kernel's "
                    "launch alone on the CPU; set training.framework to say which framework runs the step",
                    false},
    FrameworkTraits{Framework::megatron, "megatron", Fusion::fused, AttentionKind::flash, CrossEntropy::unfused, true,
                    kEagerDispatch, true,
                    "Megatron-Core with Transformer Engine: fused element-wise kernels, cuDNN fused attention, "
                    "vocab-parallel cross entropy without --cross-entropy-loss-fusion, gradients clipped with the "
                    "norm read on the CPU",
                    true, false, kExpertGemmHost},
    FrameworkTraits{Framework::nemo, "nemo", Fusion::fused, AttentionKind::flash, CrossEntropy::fused, true,
                    kEagerDispatch, true,
                    "NeMo on Megatron-Core with Transformer Engine: fused element-wise kernels, cuDNN fused "
                    "attention, fused cross entropy, gradients clipped with the norm read on the CPU",
                    true, false, kExpertGemmHost},
    FrameworkTraits{Framework::torchtitan, "torchtitan", Fusion::eager, AttentionKind::flash2, CrossEntropy::eager,
                    true, kEagerDispatch, false,
                    "torchtitan in eager mode: one kernel per PyTorch operator, scaled_dot_product_attention "
                    "(FlashAttention-2), PyTorch's cross entropy, gradients clipped on the GPU",
                    false, true, Time::zero(), true},
    FrameworkTraits{Framework::torchtitan_compile, "torchtitan-compile", Fusion::fused, AttentionKind::flash2,
                    CrossEntropy::compiled, true, kEagerDispatch, false,
                    "torchtitan with torch.compile: Inductor's fused element-wise kernels, "
                    "scaled_dot_product_attention (FlashAttention-2), the compiled cross entropy, gradients "
                    "clipped on the GPU",
                    false, true, Time::zero(), true},
    FrameworkTraits{
        Framework::pytorch, "pytorch", Fusion::eager, AttentionKind::flash2, CrossEntropy::eager, false, kEagerDispatch,
        false,
        "eager PyTorch (DDP or FSDP): one kernel per operator, scaled_dot_product_attention "
        "(FlashAttention-2), PyTorch's cross entropy, torch.optim's foreach optimizer, no gradient clipping "
        "unless asked for",
        false, false, Time::zero(), true},
    FrameworkTraits{Framework::deepspeed, "deepspeed", Fusion::eager, AttentionKind::flash2, CrossEntropy::eager, false,
                    kEagerDispatch, false,
                    "DeepSpeed on an eager PyTorch model: one kernel per operator, scaled_dot_product_attention "
                    "(FlashAttention-2), PyTorch's cross entropy, gradient_clipping off (DeepSpeed's default)",
                    false},
};

}  // namespace

std::span<const FrameworkTraits> frameworks() { return kFrameworks; }

const FrameworkTraits& traits_of(Framework f) { return kFrameworks[static_cast<std::size_t>(f)]; }

OptimizerKernels optimizer_kernels(Framework f, std::string_view optimizer) {
  if (f == Framework::pytorch) return OptimizerKernels::foreach;
  if (f == Framework::deepspeed && optimizer == "sgd") return OptimizerKernels::foreach;
  return OptimizerKernels::fused;
}

bool has_dp_kind(Framework f, DpKind kind) {
  switch (f) {
    case Framework::deepspeed:
      return kind != DpKind::hsdp;
    case Framework::pytorch:
    case Framework::torchtitan:
    case Framework::torchtitan_compile:
      return kind == DpKind::ddp || kind == DpKind::fsdp || kind == DpKind::hsdp;
    default:
      return true;
  }
}

// Megatron-Core's distributed optimizer (zero1, zero2) reduce-scatters the gradients and
// all-gathers the updated parameters; PyTorch's nearest, torch.distributed.optim's
// ZeroRedundancyOptimizer, shards the optimizer states only, beside a DDP that all-reduces every
// gradient, and broadcasts each rank's updated parameters from it (_sync_params): another
// step, not simulated. DeepSpeed's ZeRO-3 partitions over the whole data-parallel group, or over
// groups of its own with MiCS or ZeRO++'s hpZ, neither simulated.
std::string_view dp_kind_absence(Framework f) {
  switch (f) {
    case Framework::deepspeed:
      return "DeepSpeed has ZeRO stages 0 to 3 (ddp, zero1, zero2, fsdp) and no PyTorch FSDP HYBRID_SHARD (its "
             "sharding within groups, MiCS and ZeRO++'s hpZ, is not simulated)";
    case Framework::pytorch:
    case Framework::torchtitan:
    case Framework::torchtitan_compile:
      return "it has PyTorch's DDP, FSDP and HSDP (ddp, fsdp, hsdp); zero1 and zero2 are Megatron-Core's "
             "distributed optimizer and DeepSpeed's ZeRO-1 and ZeRO-2, and PyTorch's ZeroRedundancyOptimizer (the "
             "gradients all-reduced, the updated parameters broadcast) is not simulated";
    default:
      return "";
  }
}

LossScaling loss_scaling(Framework f) {
  switch (f) {
    case Framework::unspecified:
    case Framework::megatron:
    case Framework::nemo:
      return LossScaling::megatron_core;
    case Framework::pytorch:
      return LossScaling::grad_scaler;
    case Framework::deepspeed:
      return LossScaling::deepspeed;
    case Framework::torchtitan:
    case Framework::torchtitan_compile:
      return LossScaling::none;
  }
  return LossScaling::none;
}

bool optimizer_on_parameters(const Scenario& s) {
  return s.data_parallel.kind == DpKind::ddp && traits_of(s.training.framework).pytorch_ddp;
}

bool runs_autocast(const Scenario& s) {
  return optimizer_on_parameters(s) && element_bytes(s.training.precision) < 4 &&
         element_bytes(s.training.main_grad) == 4;
}

// DP ranks per shard group: data_parallel.shard_group, or the DP ranks of one NVLink domain
// (the node, or the rack cluster.nvlink_domain joins: FSDP's gathers then stay on NVLink).
// Ranks are placed TP and CP innermost, so a domain holds domain_gpus / (tp·cp) consecutive DP
// ranks (at least one: a TP group wider than a domain spreads over several); when that does
// not divide dp, the largest group inside a domain that does (their greatest common divisor),
// as the (replicas, shard) device mesh must tile the DP ranks. A group of one shards
// nothing: each unit's gradient is then all-reduced whole across the replicas.
//
// CP ranks hold the same weights, so FSDP shards over them too, over DP × CP, as torchtitan's
// HSDP does on its flattened dp_shard_cp mesh (replicating over dp_replicate): a shard group of
// the gradient scenario, whose DP group is the job's DP × CP with each DP rank's CP group
// consecutive in it, is that many DP ranks' whole CP groups.
int hsdp_shard_ranks(const Scenario& s) {
  const int folded = std::max(s.parallel.folded_cp, 1);
  if (s.data_parallel.shard_group > 0) return s.data_parallel.shard_group * folded;
  const int inner = s.parallel.tp * s.parallel.cp * folded;
  const int per_domain = std::max(s.cluster.domain_gpus() / inner, 1);
  return std::gcd(per_domain, std::max(s.parallel.dp / folded, 1)) * folded;
}

}  // namespace stepsim
