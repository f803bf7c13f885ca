// How a profiler names communication: HolisticTraceAnalysis' kernel classes, NCCL kernel
// and PyTorch collective names to CollOp, dtype sizes, and process-group kinds.
#pragma once

#include <string_view>

#include "analysis/kineto_trace.hpp"
#include "stepsim/timeline.hpp"

namespace stepsim::analysis {

// HTA: a kernel whose name starts with "nccl" or contains "ncclKernel" is communication.
bool is_comm_kernel(std::string_view name);

// HTA: Memcpy/Memset activities are memory, whatever their category says.
bool is_memory_name(std::string_view name);

// HolisticTraceAnalysis' classes by name (hta/common/types.py, matched from the name's start
// as Python's re.match does, "." not crossing a newline): communication ^nccl, ^hip, ^hccl or
// ncclKernel anywhere; memory ^Memcpy, ^Memset (also hip-prefixed) or ^dma; computation
// every other name except those with Memcpy, Memset, dma or Sync, or starting with
// "Stream Wait Event", "cuda...LaunchKernel", "runFunction" and a few accelerator runtimes'
// names; the rest other.
HtaKernelType hta_kernel_type(std::string_view name);

// From the "Collective name" argument ("allreduce", "_allgather_base", "all_to_all", ...)
// or, when it is absent, from the kernel name: old "ncclKernel_AllReduce_RING_LL_Sum_float"
// and new "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)", "ncclDevKernel_SendRecv".
CollOp coll_op_of(std::string_view collective_name, std::string_view kernel_name);

// Bytes per element of a PyTorch dtype name ("Float", "BFloat16", "c10::Half", ...); 0 unknown.
int dtype_bytes(std::string_view dtype);

// A process group's kind from its description or name: Megatron-Core's descriptions as the
// simulator classes the same communicators (EXPERT_DATA_PARALLEL_GROUP is dp, the experts'
// gradient reduction; EXPERT_TENSOR_PARALLEL_GROUP ep), else the first word that names a
// parallelism ("tp", "data_parallel", ...); `other` when nothing says (PyTorch's "default_pg"
// could be any).
CommKind kind_of_group(std::string_view name, std::string_view description);

}  // namespace stepsim::analysis
