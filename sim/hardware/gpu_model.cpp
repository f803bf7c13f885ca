// The roofline GPU model: tensor-core ops limited by a size-dependent fraction of the dense
// peak, everything else by the achievable HBM bandwidth.
#include "hardware/gpu_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "stepsim/error.hpp"

namespace stepsim::hardware {

// FlashAttention-2 against the fused attention attention_max stands for. On Hopper and
// Blackwell that is FlashAttention-3 or cuDNN, which use the tensor-memory accelerator and
// warp-group MMA that FlashAttention-2 does not: Shah et al. 2024 (FlashAttention-3, causal,
// head dim 128, 8k tokens, H100 SXM5) measure about 335 TFLOPS for FlashAttention-2 forward
// against 610 for FlashAttention-3, and 290 against 530 backward: 0.55. On Ampere
// FlashAttention-2 is the fused attention itself.
double attention_share(bool flash2, GpuArch arch) { return flash2 && arch != GpuArch::ampere ? 0.55 : 1.0; }

// Shah et al. 2024 (FlashAttention-3), figures 5 and 6: cuDNN's fused attention on an H100
// SXM5, BF16, head dim 128, 16k tokens per batch, without causal mask, forward and backward
// TFLOPS per sequence length: the backward, five GEMMs against the forward's two and the
// softmax's gradient between them, reaches 305/497 of the forward's rate at 512 keys, rising to
// 516/595 at 16k. FlashAttention-2 and -3 keep about the same shares (FlashAttention-3
// 542/638 at 4k). Applies to every fused attention on Hopper; Ampere's and Blackwell's
// attention_max stay one figure for both passes until such measurements are at hand.
double attention_backward_share(long long keys, GpuArch arch) {
  if (arch != GpuArch::hopper) return 1.0;
  struct Point {
    double keys, forward, backward;
  };
  static constexpr std::array<Point, 6> measured{
      {{512, 497, 305}, {1024, 574, 408}, {2048, 617, 465}, {4096, 609, 499}, {8192, 600, 518}, {16384, 595, 516}}};
  const auto share = [](const Point& p) { return p.backward / p.forward; };
  const double k = static_cast<double>(keys);
  if (k <= measured.front().keys) return share(measured.front());
  for (std::size_t i = 1; i < measured.size(); ++i) {
    if (k > measured[i].keys) continue;
    const Point& a = measured[i - 1];
    const Point& b = measured[i];
    const double x = std::log2(k / a.keys) / std::log2(b.keys / a.keys);
    return share(a) + x * (share(b) - share(a));
  }
  return share(measured.back());
}

// Of a fused attention kernel's rate at head dim 128, where attention_max stands, the share it
// reaches at a narrower head. Every score costs the softmax its exponential and rescaling
// whatever the head's width, while the tensor-core work per score grows with the width, so a
// narrow head spends more of the kernel off the tensor cores. Shah et al. 2024
// (FlashAttention-3, figures 5 and 6: BF16, H100 SXM5, 4k tokens; the ratio moves by under
// 0.05 from 1k to 16k tokens) measure cuDNN, the kernel Transformer Engine runs, at 363
// TFLOPS causal forward at head dim 64 against 518 at 128 and 417 against 499 backward (the
// backward figures are without the causal mask), and FlashAttention-2 at 284 against 319 and
// 279 against 310. Between 64 and 128 the share goes linearly with the width; below 64 it
// stays at 64's (no narrower figure); from 128 up it is 1.
// Blackwell takes Hopper's figures: none is published for B200 at head dim 64, and its
// exponential units per SM run at Hopper's rate under tensor cores twice as fast (Zadouri et
// al. 2026, FlashAttention-4), so a narrow head weighs on it at least as much. Ampere keeps 1:
// no figure taken. A head of unknown width (0) keeps 1.
double head_dim_share(const workload::OpCost& op, GpuArch arch) {
  if (arch == GpuArch::ampere || op.k <= 0 || op.k >= 128) return 1.0;
  const bool backward = op.pass != workload::Pass::forward;
  const double at_64 =
      op.flash2 ? (backward ? 279.0 / 310.0 : 284.0 / 319.0) : (backward ? 417.0 / 499.0 : 363.0 / 518.0);
  const double width = static_cast<double>(std::max(op.k, 64LL));
  return at_64 + (1.0 - at_64) * (width - 64.0) / 64.0;
}

// A GEMM's rate beside its size: each output tile fills its pipeline before its K loop and
// writes its result after it, a fixed time whatever K, so a short K runs below the rate a deep
// one reaches: K / (K + gemm_half_k), in elements at the 16-bit rate, and at another precision's
// rate (its peak over the 16-bit one) that many more (FP8, FP4) or fewer (TF32, FP32) in the
// same time. The presets' half points
// and size curves come from OpenXLA's measured GEMM table (matmul_interpolator_data.h, 2025;
// tests/data/gemm/): 70 on Hopper (sm_90 BF16 rows), 40 on Blackwell (sm_100 BF16 and FP8
// rows), least squares beside the size curve. DeepGEMM's block-scaled FP8 kernels on an H800
// fit 670 FP8 elements, 335 at the 16-bit rate, beside the earlier size curve (their README at
// a6d97a1); those are not the library GEMMs the frameworks call.
// A grouped weight gradient's K is one expert's tokens. The unfused attention core's batched
// GEMMs (K the head or the keys) are left out: the fit's rows reach down to K = 256, not to a
// head's 128.
double GpuModel::depth_k(const workload::OpCost& op) const {
  if (op.cls != workload::OpClass::gemm || op.k <= 0 || op.role == workload::Role::attention_core) return 0.0;
  double k = static_cast<double>(op.k);
  if (op.pass == workload::Pass::backward_weight && op.groups > 1) k /= static_cast<double>(op.groups);
  return k / rate_ratio(op);
}

// The op's tensor-core peak over the 16-bit (bf16) one, at which the half points are given: FP8 2,
// NVFP4 4, TF32 1/2, FP32 on an H100 0.068. The fixed time per GEMM is the same whatever the
// precision, so a slower format reaches half its rate at fewer FLOPs and a shorter K. A GPU
// without a bf16 peak takes its fp16 peak as the 16-bit one (a V100), and one with neither
// takes the half points at its own rate.
double GpuModel::rate_ratio(const workload::OpCost& op) const {
  const FlopRate sixteen_bit = gpu_.flops.bf16.positive() ? gpu_.flops.bf16 : gpu_.flops.fp16;
  if (!sixteen_bit.positive()) return 1.0;
  return (op.fp8 ? peak_ : tensor_peak_).flops_per_s() / sixteen_bit.flops_per_s();
}

double GpuModel::depth_share(const workload::OpCost& op) const {
  const double half = gpu_.efficiency.gemm_half_k;
  const double k = depth_k(op);
  if (half <= 0.0 || k <= 0.0) return 1.0;
  return k / (k + half);
}

GpuModel::GpuModel(const GpuSpec& gpu, Precision precision)
    : gpu_(gpu),
      precision_(precision),
      tensor_precision_(low_precision(precision) ? Precision::bf16 : precision),
      peak_(gpu.flops.for_precision(precision)),
      tensor_peak_(gpu.flops.for_precision(tensor_precision_)) {
  if (!peak_.positive()) {
    throw InputError("scenario", "/training/precision",
                     fmt::format("{} has no {} peak FLOP rate", gpu.name, to_string(precision)));
  }
  if (!tensor_peak_.positive()) {
    throw InputError(
        "scenario", "/cluster/gpu/flops/bf16",
        fmt::format("{} needs a bf16 peak for the work {} training leaves in BF16", gpu.name, to_string(precision)));
  }
  if (!gpu.memory_bandwidth.positive()) {
    throw InputError("scenario", "/cluster/gpu/memory_bandwidth",
                     fmt::format("{} needs a positive memory_bandwidth", gpu.name));
  }
}

double GpuModel::efficiency(const workload::OpCost& op) const {
  const GpuEfficiency& e = gpu_.efficiency;
  // A fixed per-kernel cost t0 (launch ramp, tail wave) in front of the peak-rate work gives
  // F / (F + peak·t0): half of the maximum at F = gemm_half_flops, given at the 16-bit rate. The
  // same t0 in front of another precision's work is that many more FLOPs at a faster peak (FP8,
  // FP4) and fewer at a slower one (TF32, FP32): its half point scales with its peak (XLA's measured table,
  // docs/model.md: BF16 and FP8 rows on Blackwell fit one curve at 8.0 % RMS this way, at best 10.9 % with one half
  // point in FLOPs). A grouped GEMM's experts each run on the curve at their own GEMM's size.
  const double flops = op.flops / static_cast<double>(std::max(op.groups, 1LL));
  const double saturation = flops / (flops + e.gemm_half_flops * rate_ratio(op));
  switch (op.cls) {
    case workload::OpClass::gemm: {
      const double max = !op.fp8 ? e.gemm_max : precision_ == Precision::nvfp4 ? e.fp4_gemm_max : e.fp8_gemm_max;
      return max * saturation * depth_share(op);
    }
    case workload::OpClass::attention: {
      // attention_max is the forward's at head dim 128; the backward (and only it) runs at its
      // share of that, and a narrower head at its own share of either pass.
      const double pass = op.pass == workload::Pass::forward ? 1.0 : attention_backward_share(op.n, gpu_.arch);
      return e.attention_max * saturation * attention_share(op.flash2, gpu_.arch) * pass *
             head_dim_share(op, gpu_.arch);
    }
    default:
      return 1.0;
  }
}

FlopRate GpuModel::rate(const workload::OpCost& op) const {
  const bool tensor_core = op.cls == workload::OpClass::gemm || op.cls == workload::OpClass::attention;
  // Low-precision GEMMs run at their format's peak (MXFP8 at FP8's, NVFP4 at FP4's);
  // attention and every other GEMM at the 16-bit one.
  if (tensor_core) return (op.fp8 ? peak_ : tensor_peak_).scaled(efficiency(op));
  // Element-wise kernels run on the CUDA cores at the fp32 vector rate.
  return gpu_.flops.fp32.positive() ? gpu_.flops.fp32 : peak_;
}

Time GpuModel::compute_time(const workload::OpCost& op) const {
  return op.flops > 0 ? stepsim::compute_time(op.flops, rate(op)) : Time::zero();
}

Time GpuModel::memory_time(const workload::OpCost& op) const {
  return transfer_time(op.bytes, gpu_.memory_bandwidth.scaled(gpu_.efficiency.hbm));
}

// An op that stands for a chain of PyTorch operators runs a kernel for each: none shorter than
// kernel_min.
Time GpuModel::floor(const workload::OpCost& op) const {
  return gpu_.efficiency.kernel_min * static_cast<double>(std::max(op.operators, 1));
}

Time GpuModel::duration(const workload::OpCost& op) const {
  return max(max(compute_time(op), memory_time(op)), floor(op));
}

}  // namespace stepsim::hardware
