// The search for the fastest configurations that fit: parallel degrees (TP, PP, CP), micro-batch,
// pipeline schedule and virtual stages, precision, recompute, data-parallel kind, bucket size and
// TP communication overlap for a model on a GPU count. `--best` and `plan` both run it.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include "sweep/point.hpp"

namespace stepsim::sweep {

// What the search may choose beyond what it always searches.
struct SearchSpace {
  std::vector<std::string> precisions;  // training.precision values to try; empty: the scenario's own
  std::size_t refine = 3;               // the fastest layouts whose secondary knobs are searched in full
  std::size_t keep = 1;                 // how many of the fastest the bound may never leave out
  std::size_t max_layouts = 0;          // layouts simulated at most in the first stage; 0: no limit
};

struct Candidate {
  std::vector<std::string> sets;                // the search's assignments, after the user's --set
  std::vector<std::vector<std::string>> alike;  // other candidates whose results are identical
};

struct BestResult {
  // candidates: enumerated; pruned: left unsimulated because even their compute at the GPU's
  // best efficiency, with the schedule's bubble, is slower than the ranked ones they would join.
  // unsearched: left unsimulated by SearchSpace::max_layouts although their bound was below the fastest.
  std::size_t candidates = 0, invalid = 0, oom = 0, errors = 0, pruned = 0, unsearched = 0;
  std::vector<std::string> fixed;                    // search keys the user fixed with --set
  std::vector<std::string> notes;                    // what the search leaves out, and why
  std::vector<std::string> unrun_precisions;         // allowed precisions the GPU does not run (in notes too)
  std::vector<std::string>
      refused_precisions;  // "bf16: why": allowed precisions the scenario does not run (in notes too)
  std::string first_refusal;                         // the first refused configuration's reason
  // The configuration that misses the capacity by the least memory, its choices and figures
  // ("tp=8 ... recompute=full: does not fit: 812.3 GiB in use ... > capacity 79.6 GiB").
  std::string closest_oom;
  std::string no_layout;                             // why no layout was enumerated, when none was
  std::vector<std::pair<Candidate, Report>> ranked;  // fitting, fastest first, identical results merged
};

// The layouts for spec.gpus GPUs (first stage of the search): degrees, micro-batch, schedule,
// precision and the data-parallel kind, with TP overlap on where it can be and no recompute
// assignment (the search picks the least recompute that fits). Keys the user --set are kept.
std::vector<Candidate> enumerate_layouts(const SweepSpec& spec, const SearchSpace& space, BestResult& result);

// The scenario the search starts from: SCENARIO with the user's --set. Its own layout is what
// the search replaces, so where that layout alone is refused (MoE layers at tp > 1 without
// sequence parallelism, which every searched layout with tp > 1 turns on; heads that its tp
// does not divide), the search starts from it with sequence parallelism, or at tp 1, unless
// the user's --set fixes that key; otherwise the scenario's own refusal, or where the plainest
// layout (one replica, one sequence a micro-batch) is refused for its global batch (a schedule
// the user fixes that needs more micro-batches per replica than the batch gives any layout),
// that refusal, which every layout shares.
std::vector<std::string> base_sets(const SweepSpec& spec);
Scenario load_base(const SweepSpec& spec);

// The second stage for one layout: every data-parallel kind, bucket size and TP overlap the
// user did not --set, on the layout's degrees, schedule and precision (the search then picks
// the least recompute that fits each).
std::vector<Candidate> refinements(const SweepSpec& spec, const Candidate& layout);

// Refuses what the user's --set `sets` cannot fix in a search over a GPU count: parallel.dp,
// which the count derives.
void check_search_sets(const std::vector<std::string>& sets);

// Refuses a list of precisions to search (--precision) of which the GPU of `spec`'s cluster, or
// its scenario, runs none (unrun_precision_reason), naming --precision and each one's reason.
void check_precisions(const SweepSpec& spec, const std::vector<std::string>& precisions);

// The value `key` is assigned in `c`, or `otherwise`.
std::string value_of(const Candidate& c, const std::string& key, const std::string& otherwise);

// The lower bound on `layout`'s step time that orders and prunes the search: the compute of one
// micro-batch through the model on its TP and CP group, simulated, times its micro-batches over
// its stages, with the fill and drain its pipeline schedule cannot hide (docs/plan.md). 0 where
// that micro-batch does not simulate.
double step_lower_bound(const SweepSpec& spec, const Candidate& layout);

// Throws the InputError that refuses the scenario's calibration files (unreadable, measured
// on another GPU, beating the cluster's links or peak, timed under other collective settings):
// they depend on the cluster and the collectives' settings, which no searched layout changes,
// so every layout would be refused for the same reason.
void check_calibration(const SweepSpec& spec);

// Why a search on `base` leaves `precision` out ("" when it runs it, or when it is ""): the GPU
// has no peak for it (FP4 or MXFP8 before Blackwell), or the scenario does not run it
// (io::precision_refusal: Megatron-Core's EP overlap runs a 16-bit model only, say).
std::string unrun_precision_reason(const Scenario& base, const std::string& precision);

// Enumerates the layouts, simulates those that validate and fit (each with the least recompute
// that fits, memory checked before simulating), fastest-bound first, leaving out those whose
// lower bound cannot reach the ranked ones; then searches the secondary knobs of the fastest
// `space.refine` layouts, and ranks everything by step time on `jobs` threads. A calibration
// refused (check_calibration) is thrown before any search.
BestResult search_best(const SweepSpec& spec, unsigned jobs, bool progress, const SearchSpace& space = {});

// The table of the K fastest of `best`: their breakdown, and what limits the first.
void write_best(const SweepSpec& spec, const BestResult& best, std::size_t k, std::ostream& out);

// search_best (never leaving out any of the K fastest) and write_best.
void print_best(const SweepSpec& spec, std::size_t k, unsigned jobs, bool progress, std::ostream& out,
                SearchSpace space = {});

}  // namespace stepsim::sweep
