// Memory per GPU and pipeline stage: parameters, gradients and optimizer state by sharding
// mode and precision, the activations the schedule keeps in flight, and buffers.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "engine/program.hpp"
#include "parallelism/stage_layout.hpp"
#include "stepsim/report.hpp"
#include "stepsim/scenario.hpp"
#include "stepsim/units.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

// Bytes per parameter of each state before sharding (Rajbhandari et al. 2020, ZeRO).
struct StateBytes {
  int params = 0;     // what the model holds for compute (FSDP: its fp32 flat-parameter shard)
  int grads = 0;      // main gradients
  int optimizer = 0;  // fp32 master copy (mixed precision) and the optimizer's moments
};

// How many data-parallel ranks share each state (1: replicated).
struct Sharding {
  int params = 1, grads = 1, optimizer = 1;
};

StateBytes state_bytes(const Scenario& scenario);

// What autocast (runs_autocast) holds beyond the fp32 parameters: a bf16 copy of each of
// `linear_params` Linear weights, cast in the forward and saved for the backward.
Bytes autocast_weights(const Scenario& scenario, long long linear_params);

// Bytes of one element as the GPU computes with it, a parameter's or an unsharded gradient's
// (2 under mixed precision: fp8 training keeps a bf16 copy; 4 in fp32).
int compute_bytes(const Scenario& scenario);

// DeepSpeed's ZeRO-1/2 outside its pipeline engine copies the gradients into a contiguous
// bucket buffer of reduce_bucket_size elements in the parameters' precision, two of them with
// overlap_comm (stage_1_and_2.py, setup_buckets: allocated whole, whatever the model's size).
bool deepspeed_ipg_buffers(const Scenario& scenario);
Bytes ipg_buffers(const Scenario& scenario);
Sharding state_sharding(const Scenario& scenario);

// One GPU of a pipeline stage at its peak.
struct StageMemory {
  int stage = 0;
  long long param_count = 0;  // parameters it holds after TP, before DP sharding
  Bytes params{0}, grads{0}, optimizer{0}, buffers{0};
  Bytes activations{0};                   // kept activations at the peak, with one layer's recompute
  long long micro_batches_in_flight = 0;  // model chunks' forwards kept at the peak
  Bytes reserve{0};  // what PyTorch's caching allocator holds beyond the live tensors at the peak, within capacity
  Bytes reserve_ample{0};                 // what it would hold there with memory to spare (allocator_reserve)
  Bytes runtime{0};                       // outside the allocator: the CUDA context and NCCL's buffers
  Bytes states() const { return params + grads + optimizer + buffers; }
  Bytes peak() const { return states() + activations; }  // live tensors (max_memory_allocated)
  Bytes reserved() const { return peak() + reserve; }    // torch.cuda.max_memory_reserved
  Bytes device() const { return reserved() + runtime; }  // what the GPU has in use (nvidia-smi)
};

struct MemoryEstimate {
  std::vector<StageMemory> stages;  // one per pipeline stage
  Bytes capacity{0};
  Bytes headroom{0};                      // training.memory_headroom
  const StageMemory& peak_stage() const;  // the first stage with the largest device total, then live tensors
  Bytes peak() const { return peak_stage().peak(); }
  bool fits() const { return peak_stage().device() + headroom <= capacity; }
};

// Share of the activations at the peak that PyTorch's caching allocator holds on top of the
// live tensors there (its reserved peak less its allocated peak), without expandable segments.
// Its cached blocks come from what is allocated and freed within the step in many sizes with
// interleaved lifetimes, the activations and their temporaries; the states (parameters,
// gradients, optimizer moments, Megatron's contiguous buffers) are allocated once, at their
// sizes, and FSDP's gathered units recur at the same sizes and reuse their blocks. Fitted once to
// torchtitan's Llama 3.1 8B BF16 FSDP run on 8 GPUs: 82.4 GiB reserved over 75.1 GiB of live
// tensors, 54.8 GiB of them activations (docs/validation.md).
inline constexpr double kAllocatorReserve = 0.133;

// Under expandable_segments:True (training.expandable_segments) PyTorch's CUDACachingAllocator
// keeps one segment per pool that it maps in pages, 20 MiB in its large pool (kLargeBuffer) and
// 2 MiB in its small pool (kSmallBuffer); it splits a block down to the request rounded to 512
// bytes (should_split), maps only the pages a request lacks at the segment's end
// (try_allocate_expandable_block), and before an allocation fails unmaps every whole free page
// (release_cached_blocks, unmap_block) and retries. So at a peak that presses on the GPU's
// memory what it holds beyond the live tensors is what pages they leave partly used: at most a
// page of each pool at its segment's end. That is the reserve counted: 22 MiB. Left out: a
// partly used page at the ends of a free gap between live blocks, and where memory is ample the
// free pages it keeps mapped (its reserved peak then above this).
inline constexpr long long kExpandableLargePage = 20LL << 20;
inline constexpr long long kExpandableSmallPage = 2LL << 20;

// What the caching allocator holds beyond the live tensors at a peak with `activations` bytes of
// activations among them, with memory to spare.
Bytes allocator_reserve(const Scenario& scenario, Bytes activations);

// Short of memory the allocator holds less: before an allocation fails, CUDACachingAllocator's
// malloc frees the cached blocks that would serve it (release_available_cached_blocks), then
// every cached block not split (release_cached_blocks), and retries. So a stage's reserve is
// what the capacity leaves beyond the headroom, the CUDA context and NCCL's buffers and the live
// tensors, at most `reserve_ample`; a layout fits when its live tensors do. What the allocator
// cannot free, blocks split between live tensors, is left out: where the reserve is cut, the
// report says that fragmentation decides.
void press_reserve(StageMemory& stage, Bytes capacity, Bytes headroom);

// The analytic model of `scenario` whose per-micro-batch work is `work`.
MemoryEstimate estimate_memory(const Scenario& scenario, const workload::ModelWork& work);

// The report's memory_bytes: the breakdown of the stage with the peak.
MemoryReport memory_report(const MemoryEstimate& estimate);

// "does not fit: 81.2 GiB in use at the peak + 4.0 GiB headroom > capacity 79.6 GiB" (the live
// tensors, the CUDA context and NCCL's buffers: the allocator has freed its reserve by then).
// For a report whose memory does not fit; the one wording of the simulate note, its warning,
// sweeps' out-of-memory rows and the advice. A stage of 0 or more is named after the capacity.
std::string does_not_fit(const MemoryReport& memory, int stage = -1);

// does_not_fit of the stage with the peak, naming the stage where there are several; when it fits only with the
// allocator's reserve cut short (press_reserve), that close call; else empty.
std::string memory_note(const MemoryEstimate& estimate);

// Activations layer `layer` re-materialises before its backward (full: all but its input;
// selective: the attention scores) and holds until that backward frees them.
Bytes layer_working_set(const Scenario& scenario, const workload::ModelWork& work, int layer);

// What a layer's attention backward holds beside the layer's own activations and its recompute
// working set: context parallelism's buffers as each framework's attention backward allocates
// them (K/V received or gathered, dK/dV sent and accumulated, dQ's accumulator) and torchtitan's
// repeated K/V and their gradients.
Bytes attention_backward_buffers(const Scenario& scenario, const workload::ModelWork& work);

// What a zero-bubble weight-gradient (W) pass needs of one micro-batch of `block`, kept
// from its input-gradient (B) pass until then: each wgrad GEMM's input and output gradient.
Bytes weight_pass_inputs(const Scenario& scenario, const workload::LayerWork& block);

struct KeptActivations {
  Bytes bytes{0};        // at the stage's peak, the recompute working set included
  long long chunks = 0;  // model-chunk forwards run and not yet backpropagated at the peak
};

// Replays pipeline stage `stage`'s schedule (GPipe keeps m micro-batches, 1F1B
// min(p − stage, m), interleaved Megatron's warm-up plus one) over its model chunks, each pass
// op by op as the program issues it with what each op allocates and frees (OpMemory), so
// that the peak is the one the trace's memory counter reaches; Megatron-Core's combined
// forward and backward (model.moe.a2a_overlap) in the order combined_order runs their pieces.
// Under PyTorch's pipelining each forward's output stays until the step ends (the last stage's
// logits), and a chunk's input lies in its receive buffer (pipeline_buffers).
KeptActivations kept_activations(const Scenario& scenario, const workload::ModelWork& work, int stage);

// Under torch.distributed.pipelining, the receive buffers pipeline stage `stage` allocates
// once and keeps: per micro-batch, one for its input activations on every model chunk but the
// first, one for its output gradients on every chunk but the last (PipelineStage's
// _prepare_forward_infra and _prepare_backward_infra). Zero for Megatron's pipelines.
Bytes pipeline_buffers(const Scenario& scenario, int stage);

// Under torch.distributed.pipelining, per micro-batch of model chunk `chunk`: the output its
// forward leaves until the step ends, and what of its first layer's kept activations is the
// tensor in its receive buffer (counted by pipeline_buffers). Zero for Megatron's pipelines.
struct ChunkPipelineBytes {
  Bytes output{0};
  Bytes in_buffer{0};
};
ChunkPipelineBytes pipeline_chunk_bytes(const Scenario& scenario, const workload::ModelWork& work,
                                        const ChunkLayers& chunk);

// What each compute op of the step allocates (positive) or frees (negative) when it ends, by
// the op's identity: its block (0 the embedding, l + 1 layer l, layers + 1 the head and
// multi-token prediction), its cost in that block's work and its phase. A block's kept
// activations are allocated by its last forward op, its recompute working set by its last
// recompute op, both freed by its last backward op; its attention backward's buffers are
// allocated by the backward op before the attention's and freed by the attention's; the
// loss's backward buffers by the head's first two backward ops; under a zero-bubble schedule
// the W pass's inputs by the B pass's last op and its own last op.
class OpMemory {
 public:
  OpMemory(const Scenario& scenario, const workload::ModelWork& work);
  Bytes of(int block, const workload::OpCost& cost, Phase phase) const;
  // The same by the ops' names in the program (op_name), for every op of `work`.
  std::unordered_map<std::string, Bytes> by_name(const workload::ModelWork& work) const;

 private:
  void add(int block, const workload::OpCost& cost, Phase phase, Bytes bytes);
  void add_block(int block, const workload::LayerWork& work, Bytes kept, Bytes working);
  void add_attention_buffers(int block, const workload::LayerWork& work, Bytes buffers);
  void add_weight_pass(int block, const workload::LayerWork& work, Bytes kept);
  void add_loss_working(const workload::LayerWork& post);
  void add_mtp_recompute_working(const workload::LayerWork& post);
  void add_pipeline_chunks(const Scenario& scenario, const workload::ModelWork& work);

  int layers_ = 0;
  std::map<std::tuple<int, const workload::OpCost*, Phase>, Bytes> deltas_;
};

// Sets each rank's memory_base (its stage's states) and each op's memory_delta (OpMemory), so
// that the trace's memory counter follows the step and peaks at the analytic estimate.
void annotate_memory(engine::Program& program, const Scenario& scenario, const workload::ModelWork& work);

}  // namespace stepsim::parallelism
