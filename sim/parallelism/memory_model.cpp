// The analytic memory model: states by sharding mode and precision (ZeRO, Rajbhandari et al. 2020)
// and activations by the Korthikanti formulas times the micro-batches kept in flight.
//
// Choices, each the behaviour of the system stepsim models:
// - Megatron mixed precision: bf16 weights (2 B), fp32 main gradients (4 B: Megatron
//   accumulates micro-batch gradients in fp32, and forces it for bf16), fp32 master weights
//   plus the optimizer's fp32 moments (Adam m and v: 12 B in all; SGD momentum: 8 B). Under
//   Megatron-Core in FP8, MXFP8 and NVFP4 the Linear layers' weights are Transformer Engine's
//   quantized tensors (linear_weight_bytes); other frameworks keep them at 2 B.
//   training.main_grad and training.optimizer_state bf16 halve the gradients and the moments
//   (Adam: 2 + 2 + 8 B); the master weights stay fp32.
// - PyTorch's DDP (pytorch, torchtitan) with torch.optim: the optimizer updates the parameters
//   themselves, in their gradients' precision (training.main_grad): fp32 under autocast, PyTorch's
//   mixed precision beside DDP (4 B params, 4 B gradients, no master copy, the moments), bf16 in
//   a model cast to bf16. Autocast's bf16 copy of every Linear weight and of the LM head, cast
//   in the forward and saved for its layer's backward, is held at the peak (2 B per weight,
//   buffers).
// - DDP buckets are views into the contiguous main-gradient buffer (Megatron's grad buffer,
//   PyTorch's gradient_as_bucket_view), so DDP adds no bucket buffer; without
//   gradient_as_bucket_view (PyTorch's default) the reducer's buckets are a second buffer of
//   every gradient, in the gradients' precision (buckets are made per gradient dtype), held for
//   the whole step.
// - ZeRO-2 shards the gradients but holds two buckets unsharded (one filling, one in its
//   ReduceScatter), of the buckets its program reduces. DeepSpeed's ZeRO-1 and 2 copy
//   every gradient into two buffers of reduce_bucket_size elements, whatever the model's size.
// - FSDP's flat parameter shard is fp32 and is the master copy (4 B params, 8 B Adam moments);
//   the root unit (embedding, head) stays gathered for the step; layers are gathered as many at
//   a time as the program gathers them (gathered_units); gradients of two units wait unsharded for ReduceScatter
//   (the current one and the one in flight). Of the root's, only the LM head's is alive when the
//   activations peak (root_grads_at_peak). Under a pipeline schedule (PyTorch's pipelining
//   stages) every backward but the last keeps the stage's units gathered and their gradients
//   unsharded, so all of them count.
// - Megatron-FSDP (data_parallel.fsdp_impl megatron; Megatron-Core's FullyShardedDataParallel
//   under the optim_grads_params strategy and fsdp_double_buffer that Megatron-Bridge's
//   use_megatron_fsdp recipes set) holds its own buffers instead (add_megatron_fsdp below).
// - PyTorch's pipelining (torchtitan) keeps a receive buffer per micro-batch for activations
//   and one for gradients, and every micro-batch's stage output until the step ends (the
//   last stage's logits): PipelineStage in PyTorch's stage.py.
// - PyTorch's caching allocator reserves more than the live tensors at their peak (blocks
//   split and cached, rounding): kAllocatorReserve of the activations at that peak, what is
//   allocated and freed in many sizes within the step, fitted to a published reserved peak
//   (docs/validation.md); under expandable_segments the pages they leave partly used
//   (allocator_reserve, from the allocator's source). Short of memory it frees cached blocks
//   and retries before it fails, so the reserve is cut to what the capacity leaves
//   (press_reserve) and a layout fits when its live tensors do.
// - Outside the allocator: the CUDA context and NCCL's buffers, estimated per communicator.
#include "parallelism/memory_model.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "parallelism/communicators.hpp"
#include "parallelism/data_parallel.hpp"
#include "parallelism/grad_buckets.hpp"
#include "parallelism/stage_layout.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"

namespace stepsim::parallelism {

namespace {

bool mixed_precision(const Scenario& s) { return element_bytes(s.training.precision) < 4; }
bool fully_sharded(const Scenario& s) {
  return s.data_parallel.kind == DpKind::fsdp || s.data_parallel.kind == DpKind::hsdp;
}

Bytes sharded(long long count, int bytes, int shards) {
  const long long total = count * bytes;
  return Bytes((total + shards - 1) / shards);  // FSDP pads the flat parameter to divide
}

// Bytes one Linear-layer weight takes as Megatron-Core holds it in a low precision through
// Transformer Engine, with the settings the gathers assume (gathered_bytes): with
// fp8_param_gather, as Megatron-Bridge's FP8 and MXFP8 recipes set it,
// the weight is the quantized tensor itself and no BF16 copy is kept. FP8 is 1 byte, plus its
// cached transpose on Hopper (TE's FP8 GEMM takes only the TN layout before compute
// capability 10.0, is_non_tn_fp8_gemm_supported); MXFP8 keeps a row- and a column-wise copy,
// each with an E8M0 scale per 32. NVFP4 gathers BF16 weights (its recipes leave
// fp8_param_gather off) and keeps the row- and column-wise NVFP4 copies it quantized on a
// chunk's first micro-batch until the optimizer step (is_first_microbatch). Other frameworks'
// weights are counted at the compute precision (torchao casts them for each GEMM).
double linear_weight_bytes(const Scenario& s) {
  const Precision p = s.training.precision;
  if (!low_precision(p) || !traits_of(s.training.framework).megatron_core) return compute_bytes(s);
  const double quantized = operand_bytes(p);
  switch (p) {
    case Precision::fp8:
      return s.cluster.gpu.arch == GpuArch::blackwell ? quantized : 2.0 * quantized;
    case Precision::nvfp4:
      return compute_bytes(s) + 2.0 * quantized;
    default:
      return 2.0 * quantized;
  }
}

// What `linear` weights held at linear_weight_bytes add to their count at compute_bytes.
Bytes linear_weight_change(const Scenario& s, long long linear) {
  return Bytes(std::llround(static_cast<double>(linear) * (linear_weight_bytes(s) - compute_bytes(s))));
}

struct StageShape {
  long long layers = 0;
  long long layer_params = 0;   // of the transformer layers on this stage
  long long expert_params = 0;  // of those, the routed experts'
  long long linear_params = 0;  // of those, the Linear layers' weights
  long long layer_linear_params = 0;  // of the layers alone, without the root's
  long long root_params = 0;          // embedding and head parameters on this stage
  long long pre_params = 0;     // of those, the embedding's
};

StageShape stage_shape(const Scenario& s, const workload::ModelWork& w, int stage) {
  const std::vector<ChunkLayers> layout = chunk_layers(s.parallel, s.model.layers);
  StageShape out;
  for (int k = 0; k < chunks_per_stage(s.parallel); ++k) {
    const ChunkLayers& c = chunk_of(layout, s.parallel, stage, k);
    out.layers += c.layers;
    for (int l = c.first_layer; l < c.first_layer + c.layers; ++l) {
      out.layer_params += w.block(l).param_count;
      out.expert_params += w.block(l).expert_param_count;
      out.linear_params += w.block(l).linear_param_count;
      out.layer_linear_params += w.block(l).linear_param_count;
    }
    if (c.pre) out.root_params += w.pre.param_count;
    if (c.pre) out.pre_params += w.pre.param_count;
    if (c.post) out.root_params += w.post.param_count;
    if (c.post) out.expert_params += w.post.expert_param_count;  // multi-token prediction's experts
    if (c.post) out.linear_params += w.post.linear_param_count;
  }
  return out;
}

// Layer units whose parameters are gathered at once, as the program gathers them
// (data_parallel_fsdp.cpp). FSDP2 prefetches one unit ahead and its next AllGather waits for
// the unit before to be freed: two. FSDP1's AllGathers are issued by the host, which runs ahead
// of the GPU, and its rate limiter lets a unit's AllGather start only once the free of the unit
// max_inflight_all_gathers before it has run, so with prefetch that many are gathered at once
// (the current unit and those ahead of it: FullyShardedDataParallel's limit_all_gathers,
// _FreeEventQueue); without prefetch the backward's AllGathers queue behind the ReduceScatters
// and the step's peak, at the backward's start, holds one.
long long gathered_units(const DataParallelSpec& d) {
  if (d.fsdp_version == 2) return 2;
  const bool prefetch = d.forward_prefetch || d.backward_prefetch != BackwardPrefetch::none;
  return prefetch ? std::max(d.max_inflight_all_gathers, 1) : 1;
}

// Bytes of the root unit's gradient alive when the activations peak, at the backward's start.
// Autograd computes a gradient in its parameter's dtype, the unsharded parameter's param_dtype
// (the compute precision), and FSDP casts it to reduce_dtype only in the unit's post-backward
// hook, just before its ReduceScatter (FSDP1's _post_backward_hook; FSDP2's foreach_reduce). The
// root's hook runs once every one of its gradients has arrived: FSDP1's FlatParameter has its
// gradient only when the gradients of all its views are in (the embedding's last, after every
// layer's backward), and FSDP2 reduces the root after the whole backward. Until then the root
// holds the LM head's gradient in the compute precision (with the final norm's few), or, where
// the head shares the embedding's weight, that weight's. Under a pipeline schedule earlier
// micro-batches' backwards have left the stage's whole root gradient unreduced beside it.
Bytes root_grads_at_peak(const Scenario& s, const StageShape& shape) {
  if (s.parallel.pp > 1) return Bytes(shape.root_params * element_bytes(s.data_parallel.grad_reduce_dtype));
  const long long head = shape.root_params - (s.model.tied_embeddings ? 0 : shape.pre_params);
  return Bytes(head * compute_bytes(s));
}

// Parameters, and of them the Linear layers' weights, of the model's last `count` layers, each
// at its own size: a stack that mixes dense and MoE layers (Llama 4's alternating ones, a
// layer_pattern) holds a dense unit beside a MoE one where both are among the last.
struct LastLayers {
  long long params = 0;
  long long linear = 0;
};

LastLayers last_layers(const workload::ModelWork& w, int layers, long long count) {
  LastLayers out;
  for (long long l = std::max(layers - count, 0LL); l < layers; ++l) {
    out.params += w.block(static_cast<int>(l)).param_count;
    out.linear += w.block(static_cast<int>(l)).linear_param_count;
  }
  return out;
}

// FSDP's gathered parameters and unsharded gradients on top of the sharded states.
// SHARD_GRAD_OP keeps every layer of the stage gathered; under a pipeline schedule every
// backward but the last leaves its units gathered too, and their gradients unreduced until
// the last. Those are the stage's own layers, each with its own size (DeepSeek-V3's dense
// first layers beside its MoE layers). Otherwise (one stage: the whole model) the peak, at the
// backward's start, holds the few units the prefetch gathers there and the two whose gradients
// wait for their ReduceScatter: the model's last layers, each at its own size, as the program
// gathers and reduces them (data_parallel_fsdp.cpp).
void add_fsdp_units(const Scenario& s, const workload::ModelWork& w, const StageShape& shape, StageMemory& m) {
  const DataParallelSpec& d = s.data_parallel;
  const bool pipelined = s.parallel.pp > 1;
  const bool every_layer = !d.reshard_after_forward || pipelined;
  const LastLayers gathered = last_layers(w, s.model.layers, std::min(gathered_units(d), shape.layers));
  const long long layers = every_layer ? shape.layer_params : gathered.params;
  m.params += Bytes((shape.root_params + layers) * compute_bytes(s));
  // FSDP1's gathered FlatParameter is in the compute precision (DataParallelSpec::flat_parameter).
  const long long linear = every_layer ? shape.layer_linear_params : gathered.linear;
  if (!d.flat_parameter()) m.params += linear_weight_change(s, linear);
  const long long waiting =
      pipelined ? shape.layer_params : last_layers(w, s.model.layers, std::min(2LL, shape.layers)).params;
  m.grads += Bytes(waiting * element_bytes(d.grad_reduce_dtype)) + root_grads_at_peak(s, shape);
}

// Megatron-FSDP, as Megatron-Core runs it for Megatron-Bridge's use_megatron_fsdp (Megatron-LM
// 4415119414, megatron/core/distributed/fsdp/): its FullyShardedDataParallel adapter
// (mcore_fsdp_adapter.py) makes each TransformerLayer an FSDP unit under the optim_grads_params
// strategy that Megatron-Bridge's _set_megatron_fsdp_overrides sets, and its ParamAndGradBuffer
// (param_and_grad_buffer.py, _init_each_parameter_group_buffers) keeps, for every parameter
// group, a model-weight buffer, a main-weight buffer and a main-gradient buffer, all three
// sharded over the data-parallel ranks under that strategy (is_*_buffer_distributed):
// - main weights: main_params_dtype, fp32 by default (MixedPrecisionPolicy): the master copy,
//   4 bytes a parameter sharded, as stepsim counts FSDP's flat shard (state_bytes).
// - model weights: the compute weights themselves, sharded beside the main weights:
//   megatron_fsdp_weight_bytes a Linear weight, the compute precision (BF16) any other.
// - main gradients: main_grads_dtype (training.main_grad), sharded; the optimizer's Adam
//   moments are kept on the main weights' shards (distrib_optimizer.py leaves Megatron-FSDP
//   its weights and gradients): both as state_bytes counts them.
// With fsdp_double_buffer (set by Megatron-Bridge's Llama recipes and forced by nccl_ub) the
// gathered weights and the unsharded gradients of the TransformerLayers come from two
// FixedPoolAllocator pools of UB_BUFFER_NUM = 2 units each, kept in Megatron's global memory
// buffer once allocated (GlobalMemoryBuffer.get_tensor): two layers gathered at their gathered
// bytes (linear_weight_bytes) and two layers' gradients in the precision they are reduced in
// (fetch_bucket with grad_comm_dtype: data_parallel.grad_reduce_dtype), whatever the
// pipeline schedule, since each layer's hooks free its weights after its forward and backward.
// The modules outside the units (embedding, final norm, LM head) are gathered in BF16 at the
// step's first forward and kept so until the step's end (AllGatherPipeline.release_bucket:
// "Non-unit modules should remain persistently allocated"); their gradients are buckets of
// their own, reduced once ready and freed (GradReducePipeline): the head's from the start of
// each backward, when the activations peak, the embedding's only after the layers' backward
// has freed them, on a single stage whose weight is not the head's too. Each bucket's padding
// to a multiple of dp times its rows' length (build_data_parallel_buffer_index) is left out,
// as is the FP32 copy of the gradient shard the optimizer step makes after the backward
// (update_main_grads).
constexpr long long kMegatronFsdpBufferUnits = 2;  // UB_BUFFER_NUM

// Bytes of a Linear weight in Megatron-FSDP's sharded model-weight buffer: FP8 weights
// (fp8_param_gather) are uint8 there, their raw data alone (Transformer Engine's transpose is
// made after each gather and discarded, keep_fp8_transpose_cache off as Megatron-Bridge sets it;
// fp8_discard_transpose_cache); other weights the compute precision. MXFP8 and NVFP4 are refused
// with fsdp_impl megatron (io/validate.cpp).
double megatron_fsdp_weight_bytes(const Scenario& s) {
  return s.training.precision == Precision::fp8 ? operand_bytes(Precision::fp8) : compute_bytes(s);
}

void add_megatron_fsdp(const Scenario& s, const workload::ModelWork& w, const StageShape& shape, int dense_shards,
                       int expert_shards, StageMemory& m) {
  // The model-weight buffer's shard: the routed experts' over their own group.
  const long long experts = shape.expert_params;
  const long long dense = shape.layer_params + shape.root_params - experts;
  const double linear = megatron_fsdp_weight_bytes(s);
  const double dense_bytes =
      static_cast<double>(dense) * compute_bytes(s) +
      static_cast<double>(std::max(shape.linear_params - experts, 0LL)) * (linear - compute_bytes(s));
  m.params += Bytes(std::llround(std::ceil(dense_bytes / dense_shards))) +
              Bytes(std::llround(std::ceil(static_cast<double>(experts) * linear / expert_shards)));
  // Two layers gathered, and the modules outside the units kept gathered.
  const long long units = std::min(kMegatronFsdpBufferUnits, shape.layers);
  m.params += Bytes((shape.root_params + units * w.layer.param_count) * compute_bytes(s)) +
              linear_weight_change(s, units * w.layer.linear_param_count);
  // Two layers' gradients, and of the root's those alive at the peak of the activations.
  const bool embedding_at_peak = s.parallel.pp > 1 || s.model.tied_embeddings;
  const long long root = shape.root_params - (embedding_at_peak ? 0 : shape.pre_params);
  m.grads += Bytes((root + units * w.layer.param_count) * element_bytes(s.data_parallel.grad_reduce_dtype));
}

// The most two consecutive buckets of `layout` hold together, in parameters: one filling while
// the one launched before it is reduced.
long long two_in_flight(const BucketLayout& layout) {
  long long most = 0;
  for (std::size_t k = 0; k < layout.buckets.size(); ++k) {
    const long long pair =
        bucket_elements(layout, layout.buckets[k]) + (k > 0 ? bucket_elements(layout, layout.buckets[k - 1]) : 0);
    most = std::max(most, pair);
  }
  return most;
}

// ZeRO-2's gradients held unsharded on stage `stage`: the buckets the program reduces there,
// made as data_parallel_zero.cpp makes them (megatron_bucket_layout's, closed once they hold at
// least their size, so the LM head alone can be one; the routed experts' own over their group,
// filled beside the dense ones; every stage and model chunk split alike, as DeepSpeed's ZeRO-2
// fills its ipg buffer), two at a time: the one filling and the one before it in its
// ReduceScatter. Without overlap_grad_reduce one: DeepSpeed's hook reduces its one buffer
// whenever the next gradient would overfill it, on the compute stream, which waits for it
// (overlap_comm only picks the stream and the second buffer), and so does the program.
Bytes zero2_buckets(const Scenario& s, int stage, int grad_bytes) {
  Scenario stage_s = gradient_scenario(s);
  if (s.parallel.pp > 1) stage_s.parallel.stage = stage;
  const bool overlap = s.data_parallel.overlap_grad_reduce;
  stage_s.data_parallel.overlap_grad_reduce = true;
  const auto held_in = [overlap](const BucketLayout& layout) {
    if (overlap) return two_in_flight(layout);
    long long most = 0;
    for (const Bucket& b : layout.buckets) most = std::max(most, bucket_elements(layout, b));
    return most;
  };
  long long held = held_in(megatron_bucket_layout(stage_s));
  if (expert_dp_size(stage_s) > 1) held += held_in(expert_bucket_layout(stage_s, true));
  return Bytes(held * grad_bytes);
}

// How the routed experts' states are sharded: as the kind shards data parallelism over the
// expert-dp group (tp·cp·dp / (ep·etp) ranks), under HSDP over its ranks inside a shard group.
Sharding expert_sharding(const Scenario& s) {
  if (s.data_parallel.kind == DpKind::hsdp) {
    const int shard = expert_shard_ranks(s);
    return {shard, shard, shard};
  }
  Scenario out = gradient_scenario(s);
  out.parallel.dp = expert_dp_size(s);
  out.parallel.tp = 1;
  return state_sharding(out);
}

// The CUDA context (about 0.5 GiB with CUDA's lazy module loading) and, per NCCL communicator
// the rank belongs to (communicator_count: the program's own list, for the stage's first
// rank), its channels' buffers (NCCL_BUFFSIZE's 4 MiB for Simple plus LL128's and LL's, on up
// to 32 channels: about 0.25 GiB). Estimates: no publisher states them, and PyTorch's and
// Megatron's memory figures leave them out.
Bytes runtime_memory(const Scenario& s, int stage) {
  Coord first;
  first.pp = stage;
  const long long communicators = communicator_count(s, global_rank(s.parallel, first));
  return Bytes(512LL << 20) + Bytes(256LL << 20) * communicators;
}

StageMemory stage_memory(const Scenario& s, const workload::ModelWork& w, int stage) {
  const StageShape shape = stage_shape(s, w, stage);
  const StateBytes bytes = state_bytes(s);
  const Sharding shards = state_sharding(gradient_scenario(s));
  StageMemory m;
  m.stage = stage;
  m.param_count = shape.layer_params + shape.root_params;
  // Routed experts' states are sharded over their own expert-dp group.
  const long long experts = shape.expert_params;
  const long long dense = m.param_count - experts;
  const Sharding expert_shards = expert_sharding(s);
  m.params = sharded(dense, bytes.params, shards.params) + sharded(experts, bytes.params, expert_shards.params);
  m.grads = sharded(dense, bytes.grads, shards.grads) + sharded(experts, bytes.grads, expert_shards.grads);
  m.optimizer =
      sharded(dense, bytes.optimizer, shards.optimizer) + sharded(experts, bytes.optimizer, expert_shards.optimizer);
  if (fully_sharded(s) && s.data_parallel.fsdp_impl == FsdpImpl::megatron) {
    add_megatron_fsdp(s, w, shape, shards.params, expert_shards.params, m);
  } else if (fully_sharded(s)) {
    add_fsdp_units(s, w, shape, m);
  } else {
    m.params += linear_weight_change(s, shape.linear_params);
  }
  if (deepspeed_ipg_buffers(s)) {
    m.buffers = ipg_buffers(s);
  } else if (s.data_parallel.kind == DpKind::zero2 && s.parallel.dp * s.parallel.cp > 1) {
    m.buffers = zero2_buckets(s, stage, bytes.grads);
  }
  const DataParallelSpec& dp = s.data_parallel;
  if (dp.kind == DpKind::ddp && !dp.gradient_as_bucket_view && s.parallel.dp * s.parallel.cp > 1)
    m.buffers += Bytes(m.param_count * bytes.grads);
  m.buffers += pipeline_buffers(s, stage);
  // The Linear layers' weights and the LM head's (with the final norm's few parameters).
  m.buffers += autocast_weights(s, shape.linear_params + shape.root_params - shape.pre_params);
  const KeptActivations kept = kept_activations(s, w, stage);
  m.activations = kept.bytes;
  m.micro_batches_in_flight = kept.chunks;
  m.reserve_ample = allocator_reserve(s, m.activations);
  m.reserve = m.reserve_ample;
  m.runtime = runtime_memory(s, stage);
  return m;
}

}  // namespace

int compute_bytes(const Scenario& s) { return mixed_precision(s) ? 2 : 4; }

Bytes allocator_reserve(const Scenario& s, Bytes activations) {
  if (s.training.expandable_segments) return Bytes(kExpandableLargePage + kExpandableSmallPage);
  return Bytes(std::llround(activations.as_double() * kAllocatorReserve));
}

void press_reserve(StageMemory& m, Bytes capacity, Bytes headroom) {
  const Bytes room = capacity - headroom - m.runtime - m.peak();
  m.reserve = std::clamp(room, Bytes(0), m.reserve_ample);
}

bool deepspeed_ipg_buffers(const Scenario& s) {
  const DpKind kind = s.data_parallel.kind;
  return s.training.framework == Framework::deepspeed && (kind == DpKind::zero1 || kind == DpKind::zero2) &&
         !deepspeed_pipeline_engine(s);
}

Bytes ipg_buffers(const Scenario& s) {
  const long long buffers = s.data_parallel.overlap_grad_reduce ? 2 : 1;
  return Bytes(buffers * megatron_bucket_elements(s) * compute_bytes(s));
}

StateBytes state_bytes(const Scenario& s) {
  const bool mixed = mixed_precision(s);
  const int moment = element_bytes(s.training.optimizer_state);
  const int moments = s.training.optimizer == "sgd" ? moment : 2 * moment;  // momentum, or Adam's m and v
  const int master = mixed ? 4 : 0;
  const int grads = element_bytes(s.training.main_grad);
  if (fully_sharded(s)) return {4, grads, moments};  // the fp32 shard is the master copy
  if (optimizer_on_parameters(s)) return {grads, grads, moments};
  return {compute_bytes(s), grads, master + moments};
}

Bytes autocast_weights(const Scenario& s, long long linear_params) {
  return Bytes(runs_autocast(s) ? linear_params * 2 : 0);
}

Sharding state_sharding(const Scenario& s) {
  const int dp = std::max(s.parallel.dp, 1);
  switch (s.data_parallel.kind) {
    case DpKind::ddp:
      return {1, 1, 1};
    case DpKind::zero1:
      return {1, 1, dp};
    case DpKind::zero2:
      return {1, dp, dp};
    case DpKind::fsdp:
      return {dp, dp, dp};
    case DpKind::hsdp: {
      const int shard = hsdp_shard_ranks(s);
      return {shard, shard, shard};
    }
  }
  return {1, 1, 1};
}

const StageMemory& MemoryEstimate::peak_stage() const {
  STEPSIM_CHECK(!stages.empty(), "a memory estimate without stages");
  return *std::max_element(stages.begin(), stages.end(), [](const StageMemory& a, const StageMemory& b) {
    return std::pair(a.device(), a.peak()) < std::pair(b.device(), b.peak());
  });
}

MemoryEstimate estimate_memory(const Scenario& s, const workload::ModelWork& w) {
  MemoryEstimate e;
  e.capacity = s.cluster.gpu.memory;
  e.headroom = s.training.memory_headroom;
  for (int stage = 0; stage < std::max(s.parallel.pp, 1); ++stage) {
    e.stages.push_back(stage_memory(s, w, stage));
    press_reserve(e.stages.back(), e.capacity, e.headroom);
  }
  return e;
}

MemoryReport memory_report(const MemoryEstimate& e) {
  const StageMemory& m = e.peak_stage();
  MemoryReport r;
  r.peak = m.peak().as_double();
  r.params = m.params.as_double();
  r.grads = m.grads.as_double();
  r.optimizer = m.optimizer.as_double();
  r.activations = m.activations.as_double();
  r.buffers = m.buffers.as_double();
  r.reserved = m.reserved().as_double();
  r.device = m.device().as_double();
  r.headroom = e.headroom.as_double();
  r.capacity = e.capacity.as_double();
  r.fits = e.fits();
  r.modelled = true;
  return r;
}

namespace {
constexpr double kGiB = 1073741824.0;
}  // namespace

std::string does_not_fit(const MemoryReport& m, int stage) {
  std::string text =
      fmt::format("does not fit: {:.1f} GiB in use at the peak + {:.1f} GiB headroom > capacity {:.1f} GiB",
                  m.device / kGiB, m.headroom / kGiB, m.capacity / kGiB);
  if (stage >= 0) text += fmt::format(" (stage {})", stage);
  return text;
}

std::string memory_note(const MemoryEstimate& e) {
  if (!e.fits()) return does_not_fit(memory_report(e), e.stages.size() > 1 ? e.peak_stage().stage : -1);
  const StageMemory& m = e.peak_stage();
  if (m.reserve >= m.reserve_ample) return {};
  return fmt::format(
      "memory: a close call that fragmentation decides: the caching allocator would hold {:.1f} GiB beyond the "
      "live tensors with memory to spare, and has {:.1f} GiB left{}; it frees its cached blocks and retries an "
      "allocation before failing (num_alloc_retries in torch.cuda.memory_stats), synchronising the GPU each time, "
      "which the step time does not count, and fails if blocks split between live tensors leave no room",
      m.reserve_ample.as_double() / kGiB, m.reserve.as_double() / kGiB,
      e.stages.size() > 1 ? fmt::format(" on stage {}", m.stage) : std::string());
}

}  // namespace stepsim::parallelism
