// Several ranks' traces in parallel, each reduced to a RankSummary; see job_analysis.hpp.
#include "analysis/job_analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "analysis/one_job.hpp"
#include "analysis/step_analysis.hpp"
#include "analysis/trace_timeline.hpp"
#include "stepsim/error.hpp"

namespace stepsim::analysis {
namespace {

struct FileResult {
  std::vector<RankSummary> ranks;
  std::int64_t origin_us = 0;
  std::uint64_t content_bytes = 0;
};

std::string collective_key(const Timeline& t, const CollectiveRecord& c) {
  const std::string group =
      c.group >= 0 && static_cast<std::size_t>(c.group) < t.groups.size()
          ? t.groups[static_cast<std::size_t>(c.group)].name + " " + t.groups[static_cast<std::size_t>(c.group)].ranks
          : std::string("world");
  return fmt::format("{}|{}|{}", c.step, group, to_string(c.op));
}

RankSummary summarise(const LoadedTrace& loaded, std::size_t index, std::size_t file_index,
                      const std::optional<std::string>& step) {
  const DistributedInfo& d = loaded.dist[index];
  const TraceMetrics m = measure_steps(loaded.timeline, index, step, d.world_size, loaded.files[index]);
  RankSummary r;
  r.file = loaded.files[index];
  r.dist = d;
  r.rank = d.rank >= 0 ? d.rank : static_cast<int>(file_index);
  r.steps = m.steps.size();
  for (const StepMetrics& s : m.steps) r.step_names.push_back(s.name);
  r.total = m.total.metrics;
  r.hta = loaded.hta[index];
  for (const CollectiveRecord& c : m.collectives)
    r.collective_arrivals[collective_key(loaded.timeline, c)].push_back(c.arrival);
  return r;
}

FileResult read_one(const std::string& file, std::size_t file_index, const std::optional<std::string>& step) {
  TimeOrigin origin;
  const LoadedTrace loaded = load_file(file, origin);
  FileResult out;
  out.origin_us = origin.us;
  out.content_bytes = loaded.content_bytes;
  for (std::size_t i = 0; i < loaded.timeline.ranks.size(); ++i)
    out.ranks.push_back(summarise(loaded, i, file_index, step));
  return out;
}

void require_one_job(const std::vector<FileResult>& results, const std::vector<std::string>& files) {
  std::vector<RankSource> sources;
  for (std::size_t i = 0; i < results.size(); ++i)
    for (const RankSummary& r : results[i].ranks)
      sources.push_back({files[i], r.rank, r.dist.world_size, r.dist.rank >= 0});
  check_one_job(sources);
}

// Each file has its own origin; the job's is the earliest, and every arrival moves onto it.
std::vector<RankSummary> align(std::vector<FileResult>& results, const std::vector<std::string>& files) {
  std::int64_t base = results.front().origin_us;
  for (const FileResult& f : results) base = std::min(base, f.origin_us);
  std::vector<RankSummary> ranks;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::int64_t skew = results[i].origin_us - base;
    if (skew > kMaxRankSkewUs)
      throw InputError(files[i], "", fmt::format("its timestamps start {} us after another rank's: not one job", skew));
    const Time shift = Time::from_ps(skew * 1000000);
    for (RankSummary& r : results[i].ranks) {
      for (auto& [key, arrivals] : r.collective_arrivals)
        for (Time& t : arrivals) t = t + shift;
      ranks.push_back(std::move(r));
    }
  }
  std::stable_sort(ranks.begin(), ranks.end(),
                   [](const RankSummary& a, const RankSummary& b) { return a.rank < b.rank; });
  return ranks;
}

struct Member {
  std::size_t rank_index;
  Time arrival;
};

void add_call(const std::vector<Member>& members, std::vector<Straggler>& by_rank) {
  for (const Member& m : members) ++by_rank[m.rank_index].calls;
  std::size_t latest = 0;
  for (std::size_t i = 1; i < members.size(); ++i)
    if (members[i].arrival > members[latest].arrival) latest = i;
  Time next = members[latest == 0 ? 1 : 0].arrival;
  Time waited;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (i == latest) continue;
    next = max(next, members[i].arrival);
    waited += members[latest].arrival - members[i].arrival;
  }
  if (next >= members[latest].arrival) return;  // a tie for last: nobody held the call back
  Straggler& s = by_rank[members[latest].rank_index];
  ++s.last;
  s.lead += members[latest].arrival - next;
  s.others_wait += Time::from_ps(waited.ps() / static_cast<std::int64_t>(members.size() - 1));
}

}  // namespace

std::vector<Straggler> find_stragglers(const std::vector<RankSummary>& ranks, std::size_t& calls) {
  std::vector<Straggler> by_rank(ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) by_rank[r].rank = ranks[r].rank;
  std::map<std::string, std::vector<std::size_t>> holders;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (const auto& [key, arrivals] : ranks[r].collective_arrivals) holders[key].push_back(r);
  calls = 0;
  std::vector<Member> members;
  for (const auto& [key, rs] : holders) {
    if (rs.size() < 2) continue;
    for (std::size_t k = 0;; ++k) {
      members.clear();
      for (std::size_t r : rs) {
        const std::vector<Time>& arrivals = ranks[r].collective_arrivals.at(key);
        if (k < arrivals.size()) members.push_back({r, arrivals[k]});
      }
      if (members.size() < 2) break;
      ++calls;
      add_call(members, by_rank);
    }
  }
  std::vector<Straggler> out;
  for (const Straggler& s : by_rank)
    if (s.last > 0) out.push_back(s);
  std::stable_sort(out.begin(), out.end(),
                   [](const Straggler& a, const Straggler& b) { return a.others_wait > b.others_wait; });
  return out;
}

std::vector<int> ranks_sharing_no_step(const std::vector<RankSummary>& ranks) {
  std::map<std::string, std::size_t> holders;
  for (const RankSummary& r : ranks)
    for (const std::string& name : r.step_names) ++holders[name];
  std::vector<int> out;
  if (ranks.size() < 2) return out;
  for (const RankSummary& r : ranks)
    if (std::none_of(r.step_names.begin(), r.step_names.end(),
                     [&](const std::string& name) { return holders[name] > 1; }))
      out.push_back(r.rank);
  return out;
}

JobAnalysis analyze_job(const std::vector<std::string>& files, const std::optional<std::string>& step,
                        unsigned workers) {
  STEPSIM_CHECK(!files.empty(), "a job needs at least one trace file");
  std::vector<FileResult> results(files.size());
  std::vector<std::exception_ptr> errors(files.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < files.size(); i = next++) {
      try {
        results[i] = read_one(files[i], i, step);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  JobAnalysis job;
  job.workers = std::max(1U, std::min<unsigned>(workers, static_cast<unsigned>(files.size())));
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < job.workers; ++w) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  require_one_job(results, files);
  for (const FileResult& f : results) job.content_bytes += f.content_bytes;
  job.ranks = align(results, files);
  job.stragglers = find_stragglers(job.ranks, job.calls);
  job.unshared = ranks_sharing_no_step(job.ranks);
  return job;
}

bool measured_as_job(const std::vector<std::string>& paths, std::size_t files, bool rank_given) {
  if (paths.size() > 1 && rank_given)
    throw InputError("<command line>", "--rank", "picks a rank of one folder or file, not of several TRACE arguments");
  return files >= 2 && !(paths.size() == 1 && rank_given);
}

}  // namespace stepsim::analysis
