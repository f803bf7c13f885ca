// Refuses traces of several jobs read as one; see one_job.hpp.
#include "analysis/one_job.hpp"

#include <fmt/format.h>

#include <map>

#include "stepsim/error.hpp"

namespace stepsim::analysis {
namespace {

void check_world_size(const std::vector<RankSource>& ranks) {
  const RankSource* first = nullptr;
  for (const RankSource& r : ranks) {
    if (r.world_size <= 0) continue;
    if (first == nullptr) first = &r;
    if (r.world_size == first->world_size) continue;
    throw InputError(r.file, "/distributedInfo/world_size",
                     fmt::format("is {}, but {}'s is {}: the traces are of two jobs (give one job's rank files)",
                                 r.world_size, first->file, first->world_size));
  }
}

void check_each_rank_once(const std::vector<RankSource>& ranks) {
  std::map<int, const RankSource*> seen;
  for (const RankSource& r : ranks) {
    const auto [it, first] = seen.try_emplace(r.rank, &r);
    if (first) continue;
    const RankSource& other = *it->second;
    if (other.file == r.file) throw InputError(r.file, "", "is given twice: a job's traces hold each rank once");
    const bool numbered = !r.rank_given || !other.rank_given;
    throw InputError(
        r.file, r.rank_given ? "/distributedInfo/rank" : "",
        fmt::format("rank {} is also in {}{}: a job's traces hold each rank once", r.rank, other.file,
                    numbered ? " (a trace without distributedInfo is numbered by its place among the files)" : ""));
  }
}

}  // namespace

void check_one_job(const std::vector<RankSource>& ranks) {
  check_world_size(ranks);
  check_each_rank_once(ranks);
}

}  // namespace stepsim::analysis
