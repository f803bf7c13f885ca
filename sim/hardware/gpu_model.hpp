// The GPU compute model: a roofline over FLOPs and bytes with efficiency by op kind and
// size, plus the slowdown of compute while NCCL kernels share the GPU.
#pragma once

#include "stepsim/scenario.hpp"
#include "stepsim/units.hpp"
#include "workload/work.hpp"

namespace stepsim::hardware {

// Of efficiency.attention_max, the share a fused-attention op's kernel reaches on `arch`:
// FlashAttention-2 (training.attention "flash2") 0.55 on Hopper and Blackwell, else 1. The
// trace fit divides it out again, so that attention_max stays the fused attention's figure.
double attention_share(bool flash2, GpuArch arch);

// Of a fused attention's forward rate, the share its backward reaches over `keys` keys per
// query on `arch`: cuDNN's measured backward over forward TFLOPS on Hopper, interpolated in
// log2 of the key length (0.82 at 4k keys, 0.86 at 8k); 1 where no measurement is at hand.
double attention_backward_share(long long keys, GpuArch arch);

class GpuModel {
 public:
  GpuModel(const GpuSpec& gpu, Precision precision);

  // Duration of `op` on an otherwise idle GPU: the roofline
  //   max(flops / (peak · efficiency(op)), bytes / (HBM bandwidth · efficiency.hbm)),
  // never below efficiency.kernel_min a kernel (an op of several PyTorch operators runs one each).
  Time duration(const workload::OpCost& op) const;
  // The two sides of that roofline: the FLOPs at the op's rate, and its bytes at the
  // achievable HBM bandwidth.
  Time compute_time(const workload::OpCost& op) const;
  Time memory_time(const workload::OpCost& op) const;
  // The least it lasts: kernel_min for each of its kernels (an op of several operators, one each).
  Time floor(const workload::OpCost& op) const;
  // Fraction of the dense peak `op` reaches when compute-bound: GEMMs and fused attention
  // follow a saturating curve max · F / (F + gemm_half_flops) in their FLOPs F, GEMMs times
  // depth_share; fused attention also by its kernel (attention_share) and, on Hopper and Blackwell, by its head
  // width below 128 (the published share at head dim 64, gpu_model.cpp).
  double efficiency(const workload::OpCost& op) const;
  // A GEMM's share of its size's rate for its inner dimension K: K / (K + gemm_half_k), the
  // half point scaled to a low-precision GEMM's rate (gpu_model.cpp); 1 without gemm_half_k.
  double depth_share(const workload::OpCost& op) const;
  // The K that share is taken at, in elements at the 16-bit rate (a GEMM's K over its peak's
  // ratio to the 16-bit one); 0 for an op it does not apply to.
  double depth_k(const workload::OpCost& op) const;
  // The op's tensor-core peak over the bf16 peak (FP8 2, NVFP4 4 on Blackwell, TF32 1/2, FP32
  // on an H100 0.068; 1 without a bf16 peak). Both GEMM half points, given at the 16-bit rate,
  // scale by it.
  double rate_ratio(const workload::OpCost& op) const;
  // Fraction by which compute slows while a communication kernel runs (GpuEfficiency).
  double comm_slowdown() const { return gpu_.efficiency.comm_slowdown; }
  Time kernel_launch() const { return gpu_.kernel_launch; }
  // The precision `op`'s tensor-core work runs in: a low-precision GEMM in the training
  // precision (fp8, mxfp8, nvfp4), attention and every other GEMM in the 16-bit precision (BF16
  // under those). Measured tables of that precision stand for it.
  Precision dtype(const workload::OpCost& op) const { return op.fp8 ? precision_ : tensor_precision_; }
  // Dense peak of the training precision (the MFU denominator).
  FlopRate peak() const { return peak_; }
  const GpuSpec& spec() const { return gpu_; }

 private:
  FlopRate rate(const workload::OpCost& op) const;

  GpuSpec gpu_;
  Precision precision_;         // the training precision
  Precision tensor_precision_;  // of the tensor-core work that is not an FP8 GEMM
  FlopRate peak_;               // the training precision's dense peak
  FlopRate tensor_peak_;        // peak of the tensor-core work that is not a low-precision GEMM (BF16)
};

}  // namespace stepsim::hardware
