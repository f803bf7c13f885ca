// Ranges of the scenario's numeric keys and limits on their products (validate_limits.cpp).
#pragma once

#include <string>

#include "stepsim/scenario.hpp"

namespace stepsim::io {

// Every numeric key within its range; run before anything multiplies keys together.
// InputError names `s.source`, the key's JSON path and the range.
void check_key_ranges(const Scenario& s);

// Sizes and work that keys multiply into (GPUs, tokens, parameters, activations, the step's
// compute and gradient traffic) within what the simulator represents exactly.
void check_products(const Scenario& s);

// The layer passes representative mode simulates per step: micro-batches × layers, each layer
// weighed by what it costs to simulate (context parallelism's ring steps, TP communication
// overlap's pieces); at most kMaxLayerPasses (about 10 s and 1.2 GB).
inline constexpr double kMaxLayerPasses = 262144;
double layer_passes(double micro_batches, int layers, int cp, int tp, bool tp_overlap);

// The cluster keys alone, for commands that take a cluster without a scenario.
void check_cluster_ranges(const ClusterSpec& c, const std::string& source);

}  // namespace stepsim::io
