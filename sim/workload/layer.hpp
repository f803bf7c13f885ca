// One Megatron transformer layer on one GPU: its ops in execution order, parameters and the
// activation memory it keeps per micro-batch.
#pragma once

#include <string>
#include <vector>

#include "workload/shape.hpp"
#include "workload/work.hpp"

namespace stepsim::workload {

// HBM bytes per element of one LayerNorm or RMSNorm forward, fused or eager.
double norm_bytes(const LayerShape& shape);
// A LayerNorm or RMSNorm op of `norms` norms (normed by norm_bytes): its operators, forward and
// backward, as the host issues them (eager RMSNorm: a chain of PyTorch operators).
OpCost with_norm_operators(OpCost op, const LayerShape& shape, int norms = 1);
// A norm of the residual stream (each layer's two, the final one) over the rank's rows: fp32 in
// under autocast (LayerShape::stream_bytes).
OpCost stream_norm(const std::string& name, Role role, const LayerShape& shape);
// Forward ops of the attention core alone (what selective recomputation re-runs).
std::vector<OpCost> attention_core_forward(const LayerShape& shape);
// All forward ops of one layer, in execution order.
std::vector<OpCost> layer_forward(const LayerShape& shape);
// Backward ops of one layer: forward reversed, each weight GEMM as dgrad then wgrad.
std::vector<OpCost> layer_backward(const LayerShape& shape);

// Parameters of one layer's attention held by one GPU (the latents' norms included).
long long attention_param_count(const LayerShape& shape);
// Parameters of one layer held by one GPU (row-parallel biases and norms are replicated).
long long layer_param_count(const LayerShape& shape);
// Of those, the weights of the GPU's routed experts (none in a dense layer).
long long layer_expert_param_count(const LayerShape& shape);
// Of those, the Linear layers' weights: attention's projections, the MLP's or the routed and
// shared experts' (no norm, bias or router), the weights Transformer Engine runs in a low
// precision.
long long layer_linear_param_count(const LayerShape& shape);
// Activation bytes one layer keeps per micro-batch (Korthikanti et al. 2022, generalised to
// GQA and SwiGLU).
Bytes layer_activations(const LayerShape& shape, Recompute recompute);

LayerWork build_layer(const LayerShape& shape, Recompute recompute);

}  // namespace stepsim::workload
