// The roofline GPU model: tensor-core ops limited by a size-dependent fraction of the dense
// peak, everything else by the achievable HBM bandwidth.
#include "hardware/gpu_model.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "stepsim/error.hpp"

namespace stepsim::hardware {

// FlashAttention-2 against the fused attention attention_max stands for. On Hopper and
// Blackwell that is FlashAttention-3 or cuDNN, which use the tensor-memory accelerator and
// warp-group MMA that FlashAttention-2 does not: Shah et al. 2024 (FlashAttention-3, causal,
// head dim 128, 8k tokens, H100 SXM5) measure about 335 TFLOPS for FlashAttention-2 forward
// against 610 for FlashAttention-3, and 290 against 530 backward: 0.55. On Ampere
// FlashAttention-2 is the fused attention itself.
double attention_share(bool flash2, GpuArch arch) { return flash2 && arch != GpuArch::ampere ? 0.55 : 1.0; }

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
  // F / (F + peak·t0): half of the maximum at F = gemm_half_flops. A grouped GEMM's experts
  // each run on the curve at their own GEMM's size.
  const double flops = op.flops / static_cast<double>(std::max(op.groups, 1LL));
  const double saturation = flops / (flops + e.gemm_half_flops);
  switch (op.cls) {
    case workload::OpClass::gemm:
      if (!op.fp8) return e.gemm_max * saturation;
      return (precision_ == Precision::nvfp4 ? e.fp4_gemm_max : e.fp8_gemm_max) * saturation;
    case workload::OpClass::attention:
      return e.attention_max * saturation * attention_share(op.flash2, gpu_.arch);
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

Time GpuModel::duration(const workload::OpCost& op) const {
  return max(max(compute_time(op), memory_time(op)), gpu_.efficiency.kernel_min);
}

}  // namespace stepsim::hardware
