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
// (Megatron-Core's DDP and distributed optimizer), so that training.main_grad and
// data_parallel.grad_reduce_dtype are one precision.
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

// Sizes the cluster for `gpus` GPUs (nodes = ceil(gpus / gpus_per_node)) and checks it.
void complete_and_validate(ClusterSpec& c, int gpus, const std::string& source);

}  // namespace stepsim::io
