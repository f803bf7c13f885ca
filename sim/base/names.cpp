// Names of the enumerations shared by every layer, as they appear in reports and traces.
#include "stepsim/scenario.hpp"
#include "stepsim/timeline.hpp"

namespace stepsim {

int element_bytes(Precision p) {
  switch (p) {
    case Precision::fp8:
    case Precision::mxfp8:
      return 1;
    case Precision::bf16:
    case Precision::fp16:
    case Precision::nvfp4:
      return 2;
    case Precision::tf32:
    case Precision::fp32:
      return 4;
  }
  return 2;
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "fp16";
    case Precision::fp8:
      return "fp8";
    case Precision::tf32:
      return "tf32";
    case Precision::fp32:
      return "fp32";
    case Precision::mxfp8:
      return "mxfp8";
    case Precision::nvfp4:
      return "nvfp4";
  }
  return "?";
}

const char* to_string(DpKind k) {
  switch (k) {
    case DpKind::ddp:
      return "ddp";
    case DpKind::zero1:
      return "zero1";
    case DpKind::zero2:
      return "zero2";
    case DpKind::fsdp:
      return "fsdp";
    case DpKind::hsdp:
      return "hsdp";
  }
  return "?";
}

const char* to_string(Fp8Scaling s) { return s == Fp8Scaling::current ? "current" : "delayed"; }

const char* to_string(CudaGraphScope s) {
  switch (s) {
    case CudaGraphScope::attn:
      return "attn";
    case CudaGraphScope::mlp:
      return "mlp";
    case CudaGraphScope::moe:
      return "moe";
    case CudaGraphScope::moe_router:
      return "moe_router";
    case CudaGraphScope::moe_preprocess:
      return "moe_preprocess";
  }
  return "?";
}

bool low_precision(Precision p) { return p == Precision::fp8 || block_scaled(p); }

bool block_scaled(Precision p) { return p == Precision::mxfp8 || p == Precision::nvfp4; }

double operand_bytes(Precision p) {
  switch (p) {
    case Precision::fp8:
      return 1.0;
    case Precision::mxfp8:
      return 1.0 + 1.0 / 32.0;
    case Precision::nvfp4:
      return 0.5 + 1.0 / 16.0;
    default:
      return element_bytes(p);
  }
}

bool runs_precision(const GpuSpec& gpu, Precision p) {
  return gpu.flops.for_precision(p).positive() && (!block_scaled(p) || gpu.arch == GpuArch::blackwell);
}

std::optional<Precision> precision_named(const std::string& name) {
  for (const Precision p : {Precision::bf16, Precision::fp16, Precision::fp8, Precision::tf32, Precision::fp32,
                            Precision::mxfp8, Precision::nvfp4})
    if (name == to_string(p)) return p;
  return std::nullopt;
}

FlopRate GpuFlops::for_precision(Precision p) const {
  switch (p) {
    case Precision::bf16:
      return bf16;
    case Precision::fp16:
      return fp16;
    case Precision::fp8:
    case Precision::mxfp8:
      return fp8;
    case Precision::nvfp4:
      return fp4;
    case Precision::tf32:
      return tf32;
    case Precision::fp32:
      return fp32;
  }
  return bf16;
}

const char* to_string(CommKind k) {
  static constexpr const char* names[] = {"tp", "cp", "ep", "dp", "fsdp", "pp", "other"};
  return names[static_cast<int>(k)];
}

const char* to_string(CollOp op) {
  static constexpr const char* names[] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                          "reduce",    "alltoall",  "sendrecv",      "other"};
  return names[static_cast<int>(op)];
}

const char* nccl_name(CollOp op) {
  static constexpr const char* names[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                          "Reduce",    "AllToAll",  "SendRecv",      "Generic"};
  return names[static_cast<int>(op)];
}

const char* to_string(Activity a) {
  static constexpr const char* names[] = {"compute", "comm", "memory", "bubble"};
  return names[static_cast<int>(a)];
}

const char* to_string(Phase p) {
  static constexpr const char* names[] = {"forward", "backward", "recompute", "optimizer", "other"};
  return names[static_cast<int>(p)];
}

}  // namespace stepsim
