// Small constructors for OpCost: a GEMM from its shape, an element-wise kernel from its element
// count and bytes per element, and the backward ops derived from a forward op.
#pragma once

#include <string>
#include <vector>

#include "workload/shape.hpp"
#include "workload/work.hpp"

namespace stepsim::workload {

// C[m×n] = A[m×k]·B[k×n], `batch` times (batched GEMMs of the unfused attention core).
OpCost gemm(std::string name, Role role, Pass pass, long long m, long long n, long long k, const LayerShape& shape,
            long long batch = 1);

// A memory-bound kernel touching `elements` elements with `bytes_per_element` bytes of HBM
// traffic and `flops_per_element` vector FLOPs each.
OpCost elementwise(std::string name, Role role, OpClass cls, long long elements, double bytes_per_element,
                   double flops_per_element);

// A framework's own copy (or scaling) kernels beside the model's layers: `bytes` of HBM
// traffic in all, `operators` PyTorch operators each launching one kernel (none shorter than
// kernel_min). Role optimizer: outside the transformer layers, so no CUDA graph replays it.
OpCost copy_kernels(std::string name, Pass pass, Bytes bytes, int operators = 1);

// Appends the backward of forward op `f` to `out`: a weight GEMM gives its data gradient
// then its weight gradient; anything else one op of twice the FLOPs and twice the bytes (or
// the forward op's backward_bytes).
void append_backward(const OpCost& f, const LayerShape& shape, std::vector<OpCost>& out);

// Whether `op` is a GEMM against a weight matrix (it has a weight gradient).
bool has_weight(const OpCost& op);

// The model code's weight parameters that the weight of one of stepsim's GEMMs of `role` stands
// for where the code keeps Llama's linear layers apart: wq, wk and wv for the QKV GEMM (MLA's
// projections are GEMMs of their own: one), w1 and w3 for fc1 (a routed or shared expert's too);
// one otherwise.
int weight_parameters(Role role, bool mla);

}  // namespace stepsim::workload
