// Autocast's casts (PyTorch's aten/src/ATen/autocast_mode.cpp): a Linear layer's F.linear is on
// CUDA's lower-precision list, so autocast's wrapper passes each of its floating-point arguments
// through cached_cast, which casts an fp32 tensor to the autocast dtype (an aten::_to_copy: one
// copy kernel reading 4 bytes and writing 2 per element). A leaf that requires grad (a weight, a
// bias) is cast once and cached until the outermost autocast region exits, which a training loop
// does after each micro-batch's forward and loss: so every micro-batch's forward casts each weight
// once, and a recomputed forward, re-entering autocast (torch.utils.checkpoint restores its
// state), casts again. The cast is differentiable: its backward, _to_copy_backward
// (derivatives.yaml, FunctionsManual.cpp), casts the weight's 16-bit gradient from the wgrad GEMM
// back to fp32 before it is accumulated into the parameter's gradient, once per micro-batch.
#include "workload/autocast.hpp"

#include <string>

#include "workload/op_builder.hpp"

namespace stepsim::workload {
namespace {

constexpr double kCastBytes = 4.0 + 2.0;  // fp32 read and 16-bit written, or the reverse

const char* autocast_dtype(const LayerShape& s) { return s.precision == Precision::fp16 ? "fp16" : "bf16"; }

// A GEMM against weights that autocast casts: not a low-precision one, whose quantization
// (with_fp8_casts) casts its weights from their own precision.
bool casts_weights(const OpCost& op) { return has_weight(op) && !op.fp8; }

// Linear layers (each weight a tensor of its own, cast alone) that one GEMM stands for: Llama's
// attention and MLP (its reference code, torchtitan's) have wq, wk and wv and w1 and w3 apart,
// here one QKV and one fc1 GEMM (torchtitan's experts likewise their w1 and w3); one elsewhere.
long long weight_tensors(Role role, const LayerShape& s) {
  if (!s.llama_style) return 1;
  switch (role) {
    case Role::qkv:
      return s.mla() ? 1 : 3;
    case Role::fc1:
    case Role::expert_fc1:
    case Role::shared_fc1:
      return 2;
    default:
      return 1;
  }
}

// A GPT layer's QKV and fc1 add their bias in the GEMM (F.linear's bias), which autocast casts
// as it casts the weight; the projection's and fc2's are added with the residual (layer.cpp).
bool gemm_bias(Role role, const LayerShape& s) { return !s.llama_style && (role == Role::qkv || role == Role::fc1); }

// The weights' casts of `gemm` (a forward GEMM or its wgrad: the weights are k·n of the first,
// m·n of the second, per group) as one op of one operator and kernel per tensor.
OpCost casts(const OpCost& gemm, const LayerShape& s, const std::string& name) {
  const bool forward = gemm.pass == Pass::forward;
  const long long weights = (forward ? gemm.k : gemm.m) * gemm.n * gemm.groups;
  const bool bias = gemm_bias(gemm.role, s);
  OpCost op = elementwise(name, Role::fp8_cast, OpClass::elementwise, weights + (bias ? gemm.n : 0), kCastBytes, 0.0);
  op.pass = gemm.pass;
  op.cast_of = gemm.role;
  op.operators = static_cast<int>(weight_tensors(gemm.role, s)) + (bias ? 1 : 0);
  return op;
}

// A bias gradient that eager autograd sums apart after the weight's (layer.cpp, bias_gradient).
bool bias_gradient_of(const OpCost& op, const OpCost& wgrad) {
  return op.role == wgrad.role && op.pass == Pass::backward && op.cls == OpClass::elementwise;
}

}  // namespace

std::vector<OpCost> with_autocast_casts(const std::vector<OpCost>& forward, const LayerShape& s) {
  if (!s.autocast) return forward;
  std::vector<OpCost> out;
  for (const OpCost& op : forward) {
    if (op.pass == Pass::forward && casts_weights(op))
      out.push_back(casts(op, s, op.name + " " + autocast_dtype(s) + " cast"));
    out.push_back(op);
  }
  return out;
}

std::vector<OpCost> with_autocast_gradient_casts(const std::vector<OpCost>& backward, const LayerShape& s) {
  if (!s.autocast) return backward;
  std::vector<OpCost> out;
  for (std::size_t i = 0; i < backward.size(); ++i) {
    const OpCost& op = backward[i];
    out.push_back(op);
    if (op.pass != Pass::backward_weight || !casts_weights(op)) continue;
    out.back().gradient_cast_follows = true;
    if (i + 1 < backward.size() && bias_gradient_of(backward[i + 1], op)) {
      out.push_back(backward[++i]);
      out.back().gradient_cast_follows = true;
    }
    out.push_back(casts(op, s, op.name + " fp32 cast"));
  }
  return out;
}

}  // namespace stepsim::workload
