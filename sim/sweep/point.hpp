// One point of a sweep: its --set assignments, the scenario they resolve to, and the outcome
// of simulating it (a row's worth of results, or why there is none).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"
#include "sweep/axes.hpp"

namespace stepsim::sweep {

struct SweepSpec {
  io::ScenarioInput scenario;     // path empty: the embedded default scenario
  std::vector<std::string> sets;  // --set, applied before the varied keys
  std::vector<Axis> axes;         // --vary
  int gpus = 0;                   // --gpus: dp = gpus / (tp·pp·cp) per point; 0: not derived
  bool keep_oom = false;          // --keep-oom: a point that does not fit is still `ok`
  // tp, pp, cp of the scenario with `sets` alone: the degrees of points that do not vary them.
  int base_tp = 1, base_pp = 1, base_cp = 1;
  // Set by prepare(): the number of points, and the sweep_id every row carries (what resume
  // and merge check, so that rows of another sweep are never taken for this one's).
  std::size_t points = 0;
  std::uint64_t sweep_id = 0;
  // The precisions a best-configuration search chooses from (SearchSpace::precisions, plan's
  // --precision; empty: the scenario's own): where the scenario refuses its own precision
  // beside the user's --set (training.fp8_scaling current on a bf16 scenario), the search's base
  // loads with the first of them it accepts, as it would from a file of that precision.
  std::vector<std::string> precisions;
  // Set by prepare() where an axis varies `cluster`: the keys the scenario's own cluster section
  // writes (io::carried_cluster_sets), which every point applies on its cluster preset before
  // --set, as plan applies them on each --cluster.
  std::vector<std::string> cluster_sets;
};

enum class Status { ok, invalid, oom, error };
const char* to_string(Status s);

struct PointResult {
  std::size_t index = 0;
  std::vector<std::string> values;  // of the axes, in axis order
  std::string dp;                   // the derived parallel.dp ("" without --gpus or when it does not divide)
  std::uint64_t id = 0;             // point_id
  Status status = Status::ok;
  std::string reason;
  std::optional<Report> report;  // absent unless the point was simulated
  // It failed for want of memory (std::bad_alloc, or simulate()'s "out of memory" error): with
  // other simulations running at once, not a fault of the point's own.
  bool out_of_memory = false;
};

// FNV-1a, 64 bits: the point_id of a resolved scenario, stable across runs and machines.
std::uint64_t fnv1a64(const std::string& text);

// Loads the base scenario once (the scenario with --set alone; where it does not validate, its
// keys read unvalidated, refused only if no point loads either): checks --set and --gpus against
// it, fills the base degrees, the point count and the sweep_id (a hash of stepsim's version, the
// resolved scenario (its text where it does not resolve), the
// contents of every calibration file a point may read, --set's and --vary's alike, --set, the
// axes, --gpus and --keep-oom), and checks each axis key on its first value so that a misspelt
// key fails up front (exit 2) rather than once per point. The calibration files are noted as
// inputs of the run (no output may replace one).
void prepare(SweepSpec& spec);

// The assignments of point `index` (base sets, varied keys, derived dp: --gpus over the tp, pp
// and cp the point's keys give, a varied example preset's included). `dp` receives the derived
// degree, or stays empty with `problem` set when the degrees do not divide --gpus.
std::vector<std::string> point_sets(const SweepSpec& spec, const std::vector<std::string>& values, std::string& dp,
                                    std::string& problem);

// Resolves point `index` (its id) without simulating it.
PointResult resolve_point(const SweepSpec& spec, std::size_t index);

// Resolves and simulates: never throws for one point's failure; an InputError becomes
// status invalid, anything else status error.
PointResult run_point(const SweepSpec& spec, std::size_t index);

// Runs `body`; an InputError marks `r` invalid, any other exception an error, each with its
// message as the reason, so that one failing point never stops a sweep; running out of memory
// sets r.out_of_memory too.
void record_failures(PointResult& r, const std::function<void()>& body);

}  // namespace stepsim::sweep
