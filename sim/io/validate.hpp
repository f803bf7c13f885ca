// Defaults that depend on other keys, and the consistency checks of a scenario: the last
// step before a Scenario is handed to the simulator.
#pragma once

#include <string>

#include "stepsim/scenario.hpp"

namespace stepsim::io {

// Fills kv_heads, ffn_hidden, expert_ffn_hidden, names and cluster.nodes, then checks the
// scenario; InputError names `s.source` and the JSON path of the offending key.
void complete_and_validate(Scenario& s);

// Whether the scenario's main gradients are the buffer its data-parallel reduction carries
// (Megatron-Core's DDP and distributed optimizer), so that training.main_grad and
// data_parallel.grad_reduce_dtype are one precision.
bool main_grad_is_reduced_buffer(const Scenario& s);

// Sizes the cluster for `gpus` GPUs (nodes = ceil(gpus / gpus_per_node)) and checks it.
void complete_and_validate(ClusterSpec& c, int gpus, const std::string& source);

}  // namespace stepsim::io
