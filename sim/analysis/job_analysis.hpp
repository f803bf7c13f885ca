// Every rank of a job: one trace per rank, read by a pool of worker threads, each measured
// on its own and reduced to a summary at once, so memory holds one trace per worker; then
// the ranks side by side and the stragglers that the others' collectives wait for.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/hta_metrics.hpp"
#include "analysis/kineto_trace.hpp"
#include "report/report_io.hpp"

namespace stepsim::analysis {

// One rank, measured over its own step windows.
struct RankSummary {
  std::string file;
  DistributedInfo dist;
  int rank = 0;                 // distributedInfo's rank, else the process (stepsim traces) or file index
  std::size_t steps = 0;        // step windows measured
  std::vector<std::string> step_names;  // theirs, in time order
  report::WindowMetrics total;  // summed over the steps
  HtaMetrics hta;
  // When the rank reached each collective (relative to the job's first timestamp; its NCCL
  // kernel's start, less the wait at the rendezvous a stepsim trace gives apart), by
  // collective: "step|group|op" -> arrivals in order, so that the k-th entries of all ranks
  // are one call.
  std::map<std::string, std::vector<Time>> collective_arrivals;

  double mean(double seconds) const { return steps > 0 ? seconds / static_cast<double>(steps) : 0.0; }
};

// A rank that reached some collectives last: the others' NCCL kernels waited for it.
struct Straggler {
  int rank = 0;
  std::size_t last = 0;   // collective calls it reached last (strictly after every other member)
  std::size_t calls = 0;  // calls it took part in
  Time lead;              // summed over `last`: its arrival minus the next-latest member's
  Time others_wait;       // summed over `last`: the mean over the others of its arrival minus theirs
  double mean_lead_s() const { return last > 0 ? lead.seconds() / static_cast<double>(last) : 0.0; }
};

struct JobAnalysis {
  std::vector<RankSummary> ranks;     // by rank
  std::size_t calls = 0;              // collective calls found on two or more ranks
  std::vector<Straggler> stragglers;  // ranks that reached a call last, most waited-for first
  // Ranks that have none of their steps in common with another rank (profiled over other
  // iterations): their collective calls cannot be matched, so they are no one's straggler.
  std::vector<int> unshared;
  std::uint64_t content_bytes = 0;
  unsigned workers = 1;
};

// Reads `files` (one or more ranks each) with up to `workers` threads and measures every
// rank over all its steps, or only `step`. Errors name the file; the first file's error in
// order wins, as a sequential read would report it.
JobAnalysis analyze_job(const std::vector<std::string>& files, const std::optional<std::string>& step,
                        unsigned workers);

// Whether the trace `files` found under `paths` are measured as one job (every rank summarised)
// rather than one rank: two or more files, unless a rank of one folder or file is picked.
// Picking a rank among several paths is InputError.
bool measured_as_job(const std::vector<std::string>& paths, std::size_t files, bool rank_given);

// Which rank the others wait for, from each rank's collective_arrivals (see Straggler).
std::vector<Straggler> find_stragglers(const std::vector<RankSummary>& ranks, std::size_t& calls);

// The ranks none of whose step names another rank has (JobAnalysis::unshared).
std::vector<int> ranks_sharing_no_step(const std::vector<RankSummary>& ranks);

}  // namespace stepsim::analysis
