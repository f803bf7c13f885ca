// What each training framework (training.framework) runs: the kernel keys it sets and the CPU's
// cost to issue one operator beyond its kernel launch (docs/model.md, "The host").
#pragma once

#include <span>
#include <string_view>

#include "stepsim/scenario.hpp"
#include "stepsim/units.hpp"

namespace stepsim {

struct FrameworkTraits {
  Framework framework = Framework::unspecified;
  std::string_view name;  // the key's value: "megatron", "torchtitan-compile", ...
  // The kernel keys it sets (the keys beside it in the scenario still override them).
  Fusion fusion = Fusion::fused;
  AttentionKind attention = AttentionKind::flash;
  CrossEntropy cross_entropy = CrossEntropy::fused;
  bool grad_clip = true;
  // CPU per operator beyond its kernel launch (cluster.gpu.kernel_launch): PyTorch's dispatcher,
  // autograd and the framework's Python around it.
  Time dispatch = Time::zero();
  // The optimizer step reads the gradients' global norm on the CPU (Megatron's clip_grad_norm
  // calls .item()): the host waits there for every gradient before it issues the step.
  bool syncs_grad_norm = false;
  std::string_view kernels;  // the report's note: what it runs, in words
  // Low-precision weights quantized on a step's first micro-batch only: Megatron-Core's
  // schedules call set_is_first_microbatch() (megatron/core/transformer/module.py) before each
  // model chunk's first forward, and Transformer Engine's Linear layers reuse the quantized
  // copy on the others (get_weight_workspace with update_workspace = is_first_microbatch).
  bool caches_quantized_weights = false;
};

// Every framework, unspecified first.
std::span<const FrameworkTraits> frameworks();
const FrameworkTraits& traits_of(Framework f);

}  // namespace stepsim
