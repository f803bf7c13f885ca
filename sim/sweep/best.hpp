// The search for the fastest configurations that fit: parallel degrees, micro-batch,
// pipeline schedule, data-parallel kind and bucket size for a model on a GPU count.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include "sweep/point.hpp"

namespace stepsim::sweep {

struct Candidate {
  std::vector<std::string> sets;  // the search's assignments, after the user's --set
};

struct BestResult {
  std::size_t candidates = 0, invalid = 0, oom = 0, errors = 0;
  std::vector<std::string> fixed;                    // search keys the user fixed with --set
  std::vector<std::string> notes;                    // what the search leaves out, and why
  std::vector<std::pair<Candidate, Report>> ranked;  // fitting, fastest first
};

// The candidates for spec.gpus GPUs: every key the user did not --set is searched.
std::vector<Candidate> enumerate_candidates(const SweepSpec& spec, BestResult& result);

// Enumerates, drops what does not validate or fit (memory before simulating), simulates the
// rest on `jobs` threads and ranks them by step time.
BestResult search_best(const SweepSpec& spec, unsigned jobs, bool progress);

// search_best and its table: the K fastest, their breakdown, and what limits the first.
void print_best(const SweepSpec& spec, std::size_t k, unsigned jobs, bool progress, std::ostream& out);

}  // namespace stepsim::sweep
