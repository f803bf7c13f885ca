// Defaults that depend on other keys, and the consistency checks of a scenario: the last
// step before a Scenario is handed to the simulator.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepsim/scenario.hpp"

namespace stepsim::io {

// Fills kv_heads, ffn_hidden, expert_ffn_hidden, names and cluster.nodes, then checks the
// scenario; InputError names `s.source` and the JSON path of the offending key.
void complete_and_validate(Scenario& s);

// Whether the scenario's main gradients are the buffer its data-parallel reduction carries
// (Megatron-Core's DDP and distributed optimizer; PyTorch's DDP, whose buckets reduce the
// parameters' own gradients), so that training.main_grad and data_parallel.grad_reduce_dtype
// are one precision.
bool main_grad_is_reduced_buffer(const Scenario& s);

// The --set assignments that switching `s` to data-parallel kind `kind` needs besides the kind:
// each key of another kind that `s` sets away from its default (which `kind` would refuse,
// doing nothing with it) back to that default, unless `keep(key)`, for keys the user fixed.
std::vector<std::string> kind_switch_sets(const Scenario& s, DpKind kind,
                                          const std::function<bool(const std::string&)>& keep);

// Whether data-parallel kind `kind` under `framework` acts on `key` (a data_parallel key,
// without the prefix): the keys the kinds do not share belong to some of them only (an FSDP key
// is FSDP's, a bucket size in MiB PyTorch DDP's, one in parameters Megatron-Core's); every
// other key to all.
bool kind_runs_key(DpKind kind, Framework framework, std::string_view key);

// The data-parallel kind of that data_parallel.kind value, if it is one.
std::optional<DpKind> dp_kind_named(std::string_view name);

// What the simulator runs of the layout keys the best-configuration search chooses
// (sweep/best_space.cpp), given the rest of the scenario: its model above all. Each mirrors
// rules of complete_and_validate, which refuses the rest, so that the search enumerates only
// layouts the scenario can run. `s` is a scenario that validated; the key in question is the
// only one that changes.

// Model dimensions that split over `tp` ranks: heads, the FFN, key/value heads (which TP
// divides, never replicates), and with multi-token prediction the hidden width.
bool splits_over_tp(const ModelSpec& m, int tp);

// Context parallelism (cp > 1): inside fused attention kernels, and not with latent attention,
// multi-token prediction or sliding-window attention, which are not simulated with it yet.
bool runs_context_parallel(const Scenario& s);

// TP groups (`tp` consecutive ranks, TP innermost) over `ranks` ranks laid out on NVLink domains
// of `domain_gpus` consecutive GPUs: how many of them span two or more domains, and the first
// such group's index (-1 where none does).
struct TpStraddle {
  long long groups = 0;    // TP groups in all
  long long crossing = 0;  // of them spanning two or more domains
  long long first = -1;    // the first of those
};
TpStraddle tp_straddle(int tp, long long ranks, int domain_gpus);

// TP communication overlap, besides what the layout gives it (tp > 1 inside one NVLink domain,
// sequence parallelism): an intra-node fabric of NVLink (not "pcie", which has none), and not
// latent attention, not simulated with it yet, and a framework that has it (not torchtitan eager,
// pytorch nor deepspeed).
bool runs_tp_overlap(const Scenario& s);

// Expert parallelism of degree `ep`: the experts' imbalance must be one an EP rank can hold,
// and Megatron-Core's EP overlap and the flex dispatcher need an EP all-to-all (ep > 1; the
// flex dispatcher outside Megatron-Core an EP group across NVLink domains).
bool runs_expert_degree(const Scenario& s, int ep);

// A pipeline of `pp` stages under `schedule`: DeepSpeed's pipeline engine runs its own 1F1B
// and no mixture of experts, Megatron-Core's EP overlap needs the interleaved schedule, and
// activation offload no pipeline at all.
bool runs_pipeline(const Scenario& s, int pp, Schedule schedule);

// Whether `micro_batches` per replica are what a pipeline of `pp` stages under `schedule` needs:
// under the interleaved schedule a multiple of pp (Megatron-Core's), or under PyTorch's
// pipelining (`pytorch`, stepsim::pytorch_pipelining) a multiple of its max(1, m // pp) rounds;
// under DualPipe an even number of at least 2·pp; any number under the other schedules.
bool fills_schedule(Schedule schedule, int pp, long long micro_batches, bool pytorch);

// Why the scenario cannot train in precision `p` whatever its layout ("" when it can; the
// GPU's own precisions are runs_precision's): Megatron-Core's EP overlap needs a 16-bit model,
// current scaling is FP8's, bf16 main gradients need mixed precision.
std::string precision_refusal(const Scenario& s, Precision p);

// Sizes the cluster for `gpus` GPUs (nodes = ceil(gpus / gpus_per_node)) and checks it.
void complete_and_validate(ClusterSpec& c, int gpus, const std::string& source);

}  // namespace stepsim::io
