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
//
// The activations a Linear layer takes are cast too where they are fp32: under autocast the
// residual stream is (LayerShape::stream_bytes), so each norm's output is, and an eager Linear
// layer reading it casts it (not cached: not a leaf), an operator and kernel of its own; its
// backward casts the input's bf16 gradient back to fp32. torch.compile fuses that cast into the
// norm (workload/layer.cpp, stream_norm).
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
  return s.llama_style ? weight_parameters(role, s.mla()) : 1;
}

// A GPT layer's QKV and fc1 add their bias in the GEMM (F.linear's bias), which autocast casts
// as it casts the weight; the projection's and fc2's are added with the residual (layer.cpp).
bool gemm_bias(Role role, const LayerShape& s) { return !s.llama_style && (role == Role::qkv || role == Role::fc1); }

// GEMMs whose input is the output of a norm of the residual stream, fp32 under autocast: the
// attention's projections from the input norm (latent attention's up projections from their
// latents' norms, which the fp32 weight of their RMSNorm makes fp32 too), the MLP's first from
// the post-attention norm (a mixture of experts' router, routed experts from the normed tokens
// and shared experts alike), the LM head from the final norm.
bool reads_stream(Role role) {
  switch (role) {
    case Role::qkv:
    case Role::q_down:
    case Role::kv_down:
    case Role::fc1:
    case Role::router:
    case Role::expert_fc1:
    case Role::shared_fc1:
    case Role::lm_head:
      return true;
    default:
      return false;
  }
}

// Eager, each Linear layer a GEMM stands for casts its fp32 input itself (torch.compile casts it
// in the norm's kernel).
bool casts_input(const OpCost& gemm, const LayerShape& s) { return s.eager && reads_stream(gemm.role); }

OpCost cast_op(const OpCost& gemm, const std::string& name, long long elements, int operators) {
  OpCost op = elementwise(name, Role::fp8_cast, OpClass::elementwise, elements, kCastBytes, 0.0);
  op.pass = gemm.pass;
  op.cast_of = gemm.role;
  op.operators = operators;
  return op;
}

// The casts of forward GEMM `gemm`: its weights (k·n per group) and its bias, and, eager, each of
// its Linear layers' copy of its fp32 input (m·k), as one op of one operator and kernel per tensor.
OpCost forward_casts(const OpCost& gemm, const LayerShape& s) {
  const long long tensors = weight_tensors(gemm.role, s);
  const bool bias = gemm_bias(gemm.role, s);
  const long long inputs = casts_input(gemm, s) ? tensors : 0;
  const long long elements = gemm.k * gemm.n * gemm.groups + (bias ? gemm.n : 0) + inputs * gemm.m * gemm.k;
  return cast_op(gemm, gemm.name + " " + autocast_dtype(s) + " cast", elements,
                 static_cast<int>(tensors + inputs) + (bias ? 1 : 0));
}

// After wgrad GEMM `wgrad` (its weight m·n per group), its weights' and bias's gradients to fp32.
OpCost weight_gradient_casts(const OpCost& wgrad, const LayerShape& s) {
  const bool bias = gemm_bias(wgrad.role, s);
  return cast_op(wgrad, wgrad.name + " fp32 cast", wgrad.m * wgrad.n * wgrad.groups + (bias ? wgrad.n : 0),
                 static_cast<int>(weight_tensors(wgrad.role, s)) + (bias ? 1 : 0));
}

// After dgrad GEMM `dgrad` (its output m·n), each Linear layer's input gradient to fp32.
OpCost input_gradient_casts(const OpCost& dgrad, const LayerShape& s) {
  const long long tensors = weight_tensors(dgrad.role, s);
  return cast_op(dgrad, dgrad.name + " fp32 cast", tensors * dgrad.m * dgrad.n, static_cast<int>(tensors));
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
    if (op.pass == Pass::forward && casts_weights(op)) out.push_back(forward_casts(op, s));
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
    if (!casts_weights(op)) continue;
    if (op.pass == Pass::backward_data && casts_input(op, s)) out.push_back(input_gradient_casts(op, s));
    if (op.pass != Pass::backward_weight) continue;
    out.back().gradient_cast_follows = true;
    if (i + 1 < backward.size() && bias_gradient_of(backward[i + 1], op)) {
      out.push_back(backward[++i]);
      out.back().gradient_cast_follows = true;
    }
    out.push_back(weight_gradient_casts(op, s));
  }
  return out;
}

}  // namespace stepsim::workload
