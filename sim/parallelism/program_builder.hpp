// From a validated Scenario and the model's work to the per-rank engine Program: placement,
// communicators, links, and each simulated rank's step (micro-batches, TP, DP, optimizer).
#pragma once

#include <string>

#include "engine/program.hpp"
#include "hardware/gpu_model.hpp"
#include "parallelism/costs.hpp"
#include "stepsim/scenario.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

// One training step with the real cost models.
engine::Program build_program(const Scenario& scenario, const workload::ModelWork& work, const hardware::GpuModel& gpu);

// How the ranks of a pipeline stage after its first get their ops: by replaying the first
// rank's step on their own communicators (the default), or by writing each rank's step anew
// (slower; tests check that the two give the same program).
enum class StageRanks { replay, write };

// The same with any cost model (tests use hand-made costs).
engine::Program build_program(const Scenario& scenario, const workload::ModelWork& work, const Costs& costs,
                              StageRanks stage_ranks = StageRanks::replay);

// Placement and gradient buckets in a few sentences, for the report notes.
std::string placement_notes(const Scenario& scenario);

}  // namespace stepsim::parallelism
