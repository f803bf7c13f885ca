// OpCost constructors: FLOPs and HBM bytes of GEMMs and memory-bound kernels.
#include "workload/op_builder.hpp"

#include <cmath>
#include <utility>

namespace stepsim::workload {
namespace {

Bytes to_bytes(double b) { return Bytes(std::llround(b)); }

// Megatron accumulates weight gradients straight into the main gradients
// (gradient_accumulation_fusion): the output is read and written in their precision (fp32
// unless training.main_grad says bf16).
double main_grad_traffic(const LayerShape& shape) { return 2.0 * shape.main_grad_bytes; }

// The Linear layers of a transformer layer: the GEMMs that FP8 training runs in FP8, the
// experts' (grouped) GEMMs included. The LM head, the router and the attention core stay in
// BF16 (Transformer Engine and torchao both leave them).
bool fp8_linear(Role role) {
  switch (role) {
    case Role::qkv:
    case Role::q_down:
    case Role::kv_down:
    case Role::attn_proj:
    case Role::fc1:
    case Role::fc2:
    case Role::expert_fc1:
    case Role::expert_fc2:
    case Role::shared_fc1:
    case Role::shared_fc2:
      return true;
    default:
      return false;
  }
}

}  // namespace

OpCost gemm(std::string name, Role role, Pass pass, long long m, long long n, long long k, const LayerShape& shape,
            long long batch) {
  OpCost op;
  op.name = std::move(name);
  op.role = role;
  op.pass = pass;
  op.cls = OpClass::gemm;
  op.m = m;
  op.n = n;
  op.k = k;
  const double bm = static_cast<double>(batch);
  const double dm = static_cast<double>(m);
  const double dn = static_cast<double>(n);
  const double dk = static_cast<double>(k);
  op.flops = 2.0 * bm * dm * dn * dk;
  op.fp8 = low_precision(shape.precision) && fp8_linear(role);
  const double in_bytes = op.fp8 ? operand_bytes(shape.precision) : shape.act_bytes;
  const double out_bytes = pass == Pass::backward_weight ? main_grad_traffic(shape) : shape.act_bytes;
  op.bytes = to_bytes(bm * ((dm * dk + dk * dn) * in_bytes + dm * dn * out_bytes));
  return op;
}

OpCost elementwise(std::string name, Role role, OpClass cls, long long elements, double bytes_per_element,
                   double flops_per_element) {
  OpCost op;
  op.name = std::move(name);
  op.role = role;
  op.pass = Pass::forward;
  op.cls = cls;
  const double e = static_cast<double>(elements);
  op.flops = e * flops_per_element;
  op.bytes = to_bytes(e * bytes_per_element);
  return op;
}

OpCost copy_kernels(std::string name, Pass pass, Bytes bytes, int operators) {
  OpCost op;
  op.name = std::move(name);
  op.role = Role::optimizer;
  op.pass = pass;
  op.cls = OpClass::elementwise;
  op.bytes = bytes;
  op.operators = operators;
  return op;
}

int weight_parameters(Role role, bool mla) {
  switch (role) {
    case Role::qkv:
      return mla ? 1 : 3;
    case Role::fc1:
    case Role::expert_fc1:
    case Role::shared_fc1:
      return 2;
    default:
      return 1;
  }
}

bool has_weight(const OpCost& op) {
  switch (op.role) {
    case Role::qkv:
    case Role::q_down:
    case Role::kv_down:
    case Role::attn_proj:
    case Role::fc1:
    case Role::fc2:
    case Role::lm_head:
    case Role::router:
    case Role::expert_fc1:
    case Role::expert_fc2:
    case Role::shared_fc1:
    case Role::shared_fc2:
    case Role::mtp_projection:
      return op.cls == OpClass::gemm;
    default:
      return false;
  }
}

void append_backward(const OpCost& f, const LayerShape& shape, std::vector<OpCost>& out) {
  if (has_weight(f)) {
    // dX[m×k] = dY[m×n]·Wᵀ, then dW[k×n] = Xᵀ·dY: each the FLOPs of the forward.
    // A grouped GEMM's backward is grouped the same way.
    // A GEMM standing for several Linear layers of one input (LayerShape::separate_linears):
    // autograd runs each one's input and weight gradient, and sums the input gradients (an add
    // for each Linear after the first, the autograd engine's InputBuffer::accumulate).
    out.push_back(gemm(f.name + " dgrad", f.role, Pass::backward_data, f.m, f.k, f.n, shape));
    out.back().groups = f.groups;
    out.back().operators = 2 * f.operators - 1;
    out.push_back(gemm(f.name + " wgrad", f.role, Pass::backward_weight, f.k, f.n, f.m, shape));
    out.back().groups = f.groups;
    out.back().operators = f.operators;
    return;
  }
  // The dispatcher's token counts are integers: no gradient flows back through them.
  if (f.role == Role::moe_counts) return;
  OpCost b = f;
  b.name = f.name + " backward";
  b.pass = Pass::backward;
  b.flops = 2.0 * f.flops;
  b.bytes = f.backward_bytes > Bytes(0) ? f.backward_bytes : f.bytes * 2;
  b.backward_bytes = Bytes(0);
  // A chunk sort's backward is the same kernel moving the gradients back (sort_chunks_by_map
  // with is_forward false): the forward's bytes.
  if (f.role == Role::moe_sort || f.role == Role::moe_unsort) b.bytes = f.bytes;
  if (f.backward_operators > 0) b.operators = f.backward_operators;
  b.backward_operators = 0;
  b.host_sync = false;
  out.push_back(std::move(b));
}

}  // namespace stepsim::workload
