// Gradient tensors of a Megatron GPT as one GPU holds them (after TP sharding), in
// registration order, and PyTorch DDP's assignment of them to buckets (reducer.cpp).
#pragma once

#include <string>
#include <vector>

#include "stepsim/scenario.hpp"
#include "stepsim/units.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

struct GradTensor {
  std::string name;  // "L3 fc1.weight"
  long long elements = 0;
  int block = 0;        // OpSite::block numbering: 0 embedding, 1..layers, layers+1 head
  workload::Role role;  // the op whose backward produces this gradient
  bool expert = false;  // a routed expert's weight: reduced over the expert-dp group
  // A Linear layer's weight (attention's projections, the MLP's, the experts'), which FP8
  // training gathers in its own format; embedding, head, norms, router and biases are not.
  bool quantized = false;
};

struct Bucket {
  Bytes size{0};
  std::vector<int> tensors;  // indices into the tensor list the buckets were made from
};

// Parameters in registration order: word (and, for learned positions, position)
// embeddings; per layer input norm, qkv, proj, post norm, fc1, fc2 (weights, then biases
// where the model has them: GELU models use LayerNorm and biases, SwiGLU models RMSNorm and
// none); final norm; the LM head unless tied (with pp > 1 the last stage's copy of a tied
// embedding). With parallel.stage set, only the tensors of that pipeline stage.
std::vector<GradTensor> gradient_tensors(const ModelSpec& model, const ParallelSpec& parallel);

// The model code's parameters one gradient tensor stands for, each an autograd leaf of its own:
// where the model code keeps Llama's projections apart (workload::LayerShape::separate_linears:
// wq, wk and wv; w1 and w3, the routed and shared experts' too) 3 for a QKV tensor and 2 for an
// fc1; else 1.
int parameters_of(const GradTensor& tensor, bool separate_linears);

// Buckets over `tensors` taken in `order`: the first capped at `first_cap`, the others at
// `cap`; a bucket closes once it reaches its cap, so it exceeds it by at most its last tensor.
// `at_most` (DeepSpeed's ZeRO): a bucket closes before a tensor would take it past its cap, and
// a tensor larger than the cap is a bucket of its own.
std::vector<Bucket> assign_buckets(const std::vector<GradTensor>& tensors, const std::vector<int>& order,
                                   int element_bytes, Bytes first_cap, Bytes cap, bool at_most = false);

struct BucketLayout {
  std::vector<GradTensor> tensors;  // registration order
  std::vector<Bucket> buckets;      // launch order; tensors in reverse registration order
};

// DDP's buckets for `scenario` (data_parallel.bucket_cap_mb, first_bucket_mb,
// grad_reduce_dtype), for the program and for the report notes; where the DDP is
// Megatron-Core's (training.framework megatron or nemo), megatron_bucket_layout; DeepSpeed's
// ZeRO stage 0 without overlap_grad_reduce (its default), deepspeed_engine_layout.
BucketLayout bucket_layout(const Scenario& scenario);

// Megatron's buckets for the distributed optimizer (ZeRO-1/2): megatron_bucket_elements
// parameters each, no smaller first bucket, in the first model chunk of the first pipeline stage only;
// every other chunk is one bucket, as is everything without overlap_grad_reduce (Megatron-LM);
// under DeepSpeed (pp 1) buckets of at most reduce_bucket_size with or without it.
// zero2 (DeepSpeed's ZeRO-2, which Megatron-Core's DDP does not run) splits every chunk of every
// stage alike, with overlap_grad_reduce or without.
BucketLayout megatron_bucket_layout(const Scenario& scenario);

// DeepSpeed's engine's own reduction (engine.py, allreduce_gradients: buffered_allreduce_fallback):
// every gradient all-reduced in buffers of 5e8 elements (MEMORY_OPT_ALLREDUCE_SIZE), in reverse
// registration order; its pipeline engine's after the whole schedule, and ZeRO stage 0's (ddp
// without overlap_grad_reduce) after the backward of the last micro-batch.
BucketLayout deepspeed_engine_layout(const Scenario& scenario);

// DeepSpeed ZeRO's reduce_bucket_size by default: the elements of gradient one reduction of
// stage 1 or 2 takes.
inline constexpr long long kDeepSpeedBucketElements = 500'000'000;

// Parameters per Megatron bucket, data_parallel.bucket_parameters or by default
// max(4e7, 1e6·dp) (under training.framework deepspeed, kDeepSpeedBucketElements): the one
// place the program's buckets and the memory model's ZeRO-2 buffers take it from.
long long megatron_bucket_elements(const Scenario& scenario);
// That size in words, for the notes and the advice: "40 M parameters".
std::string megatron_bucket_text(const Scenario& scenario);

// Buckets of the expert gradients alone (bucket_layout and megatron_bucket_layout hold the
// others), over the expert-data-parallel group; `megatron`: the distributed optimizer's sizes
// (the dense buckets' size, chunked as megatron_bucket_layout).
BucketLayout expert_bucket_layout(const Scenario& scenario, bool megatron);

// Ranks of the expert-data-parallel group: tp·cp·dp / ep (1 for a dense model).
int expert_dp_size(const Scenario& scenario);
// `layout`, or none at dp = 1, where only a mixture of experts' expert gradients are reduced
// (over their expert-dp group) and the dense ones have no group to be reduced over.
BucketLayout dense_layout(const Scenario& scenario, BucketLayout layout);

// Parameters (elements) of bucket `bucket`.
long long bucket_elements(const BucketLayout& layout, const Bucket& bucket);

// Bytes one parameter of `tensor` takes in a parameter AllGather of a run in `precision`: a
// Linear layer's weight at 1 byte in FP8 (Megatron-Core's fp8_param_gather keeps FP8
// parameters in a buffer of their own; torchao's float8 all-gather converts Float8Linear
// weights only), every other tensor in the compute precision's: 2 in mixed precision. MXFP8
// weights too are gathered at 2: Megatron-Core gathers them in BF16 through the gradient
// buffer and quantizes them after (reuse_grad_buf_for_mxfp8_param_ag, which Megatron-Bridge
// requires with fp8_param_gather; param_and_grad_buffer.py), and NVFP4's weights are BF16.
int gathered_bytes(const GradTensor& tensor, Precision precision);
// Whether the optimizer applies weight decay to the tensor: not to a norm's weight nor to any
// bias (Megatron-Core's and Megatron-DeepSpeed's parameter groups leave biases and 1-D
// parameters out of weight decay).
bool weight_decayed(const GradTensor& tensor);
// Bytes of bucket `bucket`'s parameters as gathered (gathered_bytes).
Bytes bucket_gather_bytes(const BucketLayout& layout, const Bucket& bucket, Precision precision);

}  // namespace stepsim::parallelism
