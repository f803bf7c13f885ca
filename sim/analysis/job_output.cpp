// Tables and JSON of a job's ranks; times print in milliseconds per step.
#include "analysis/job_output.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <boost/json.hpp>

#include <algorithm>
#include <ostream>

#include "analysis/idle_output.hpp"
#include "report/json_text.hpp"

namespace stepsim::analysis {
namespace {

namespace json = boost::json;

// Step time across ranks: mean, and the fastest and slowest rank.
struct Spread {
  double mean = 0, min = 0, max = 0;
  int min_rank = 0, max_rank = 0;
};

Spread step_spread(const JobAnalysis& job) {
  Spread s;
  bool first = true;
  for (const RankSummary& r : job.ranks) {
    const double t = r.mean(r.total.length);
    s.mean += t / static_cast<double>(job.ranks.size());
    if (first || t < s.min) s.min = t, s.min_rank = r.rank;
    if (first || t > s.max) s.max = t, s.max_rank = r.rank;
    first = false;
  }
  return s;
}

PerKind mean_exposed(const JobAnalysis& job) {
  PerKind out{};
  for (const RankSummary& r : job.ranks)
    for (std::size_t k = 0; k < kCommKinds; ++k)
      out[k] += r.mean(r.total.exposed[k]) / static_cast<double>(job.ranks.size());
  return out;
}

double mean_hidden(const JobAnalysis& job) {
  double sum = 0;
  for (const RankSummary& r : job.ranks) sum += r.total.hidden_fraction();
  return sum / static_cast<double>(job.ranks.size());
}

std::size_t steps_of(const JobAnalysis& job, int rank) {
  for (const RankSummary& r : job.ranks)
    if (r.rank == rank) return std::max<std::size_t>(1, r.steps);
  return 1;
}

std::string kinds_text(const PerKind& v, double scale) {
  std::string s;
  for (std::size_t k = 0; k < kCommKinds; ++k)
    if (v[k] > 0) s += fmt::format("  {} {:.3f}", to_string(static_cast<CommKind>(k)), v[k] * scale);
  return s.empty() ? "  none" : s;
}

void write_rank_rows(const JobAnalysis& job, std::ostream& out) {
  fmt::print(out, "{:>6} {:>6} {:>12} {:>12} {:>9} {:>12}  {}\n", "rank", "steps", "step ms", "exposed ms", "hidden",
             "HTA overlap", "file");
  for (const RankSummary& r : job.ranks) {
    const std::string hta =
        r.hta.overlap_pct ? fmt::format("{:.2f}%", *r.hta.overlap_pct) : std::string(r.hta.available ? "n/a" : "-");
    fmt::print(out, "{:>6} {:>6} {:>12.3f} {:>12.3f} {:>8.1f}% {:>12}  {}\n", r.rank, r.steps,
               r.mean(r.total.length) * 1e3, r.mean(r.total.exposed_total()) * 1e3, r.total.hidden_fraction() * 100,
               hta, r.file);
  }
}

// "ProfilerStep#1 to ProfilerStep#2" for the steps of `rank`.
std::string steps_text(const JobAnalysis& job, int rank) {
  for (const RankSummary& r : job.ranks) {
    if (r.rank != rank) continue;
    if (r.step_names.empty()) return "no step";
    if (r.step_names.size() == 1) return r.step_names.front();
    return r.step_names.front() + " to " + r.step_names.back();
  }
  return "no step";
}

// Which ranks were profiled over steps no other rank has: there is nothing to match their
// calls with, which an empty straggler list alone would not say.
std::string unshared_note(const JobAnalysis& job) {
  if (job.unshared.empty()) return "";
  constexpr std::size_t kShown = 8;
  std::string listed;
  for (std::size_t i = 0; i < std::min(kShown, job.unshared.size()); ++i)
    listed += fmt::format("{}rank {} {}", i == 0 ? "" : ", ", job.unshared[i], steps_text(job, job.unshared[i]));
  if (job.unshared.size() > kShown) listed += fmt::format(", and {} more", job.unshared.size() - kShown);
  if (job.unshared.size() == job.ranks.size())
    return fmt::format(
        "the ranks share no step ({}): no collective call can be matched across them (were they profiled over the "
        "same steps?)",
        listed);
  const bool one = job.unshared.size() == 1;
  return fmt::format("{} no step with the other ranks ({}): {} collective calls are matched with none",
                     one ? "a rank shares" : "ranks share", listed, one ? "its" : "their");
}

void write_stragglers(const JobAnalysis& job, std::ostream& out) {
  fmt::print(out, "\nstragglers: {} collective call(s) found on two or more ranks\n", job.calls);
  if (const std::string note = unshared_note(job); !note.empty()) fmt::print(out, "  note: {}\n", note);
  if (job.stragglers.empty()) {
    fmt::print(out, "  none: no call reached on one rank strictly after all the others\n");
    return;
  }
  fmt::print(out, "{:>6} {:>16} {:>14} {:>22}\n", "rank", "arrived last", "mean lead ms", "others wait ms/step");
  for (const Straggler& s : job.stragglers)
    fmt::print(out, "{:>6} {:>16} {:>14.3f} {:>22.3f}\n", s.rank, fmt::format("{} of {}", s.last, s.calls),
               s.mean_lead_s() * 1e3, s.others_wait.seconds() / static_cast<double>(steps_of(job, s.rank)) * 1e3);
  const Straggler& top = job.stragglers.front();
  fmt::print(out,
             "the others wait most for rank {}: it reached {} of its {} calls last, {:.3f} ms after the next-latest "
             "rank on average\n",
             top.rank, top.last, top.calls, top.mean_lead_s() * 1e3);
}

json::object per_kind_json(const PerKind& v) {
  json::object o;
  for (std::size_t k = 0; k < kCommKinds; ++k) o[to_string(static_cast<CommKind>(k))] = v[k];
  return o;
}

json::object rank_json(const RankSummary& r) {
  json::object o;
  o["rank"] = r.rank;
  o["file"] = r.file;
  o["world_size"] = r.dist.world_size;
  o["steps"] = r.steps;
  o["step_time_s"] = r.mean(r.total.length);
  PerKind exposed{}, busy{};
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    exposed[k] = r.mean(r.total.exposed[k]);
    busy[k] = r.mean(r.total.busy[k]);
  }
  o["exposed_comm_s"] = per_kind_json(exposed);
  o["comm_s"] = per_kind_json(busy);
  o["hidden_fraction"] = r.total.hidden_fraction();
  o["hta_comm_comp_overlap_pctg"] = r.hta.overlap_pct ? json::value(*r.hta.overlap_pct) : json::value(nullptr);
  // As `analyze` of this rank's file alone writes it (its hta.idle_time_breakdown).
  o["idle_time_breakdown"] = r.hta.available ? idle_breakdown_json(r.hta) : json::value(nullptr);
  return o;
}

std::vector<RankIdle> ranks_idle(const JobAnalysis& job) {
  std::vector<RankIdle> out;
  for (const RankSummary& r : job.ranks) out.push_back({r.rank, &r.hta});
  return out;
}

json::value across_idle_json(const JobAnalysis& job) {
  const std::optional<IdleAcrossRanks> a = idle_across_ranks(ranks_idle(job));
  if (!a) return nullptr;
  return json::object{{"ranks", a->ranks},
                      {"idle_s", a->idle_s},
                      {"host_wait_s", a->host_wait_s},
                      {"kernel_wait_s", a->kernel_wait_s},
                      {"other_s", a->other_s},
                      {"host_wait_max_s", a->host_wait_max_s},
                      {"host_wait_max_rank", a->host_wait_max_rank}};
}

}  // namespace

void write_job_table(const JobAnalysis& job, std::ostream& out) {
  fmt::print(out, "{} rank(s), {:.1f} MB of trace read by {} worker(s); each rank measured over its own steps\n\n",
             job.ranks.size(), static_cast<double>(job.content_bytes) / 1e6, job.workers);
  write_rank_rows(job, out);
  const Spread s = step_spread(job);
  fmt::print(out, "\nacross ranks (per step)\n");
  fmt::print(out, "  step time:          mean {:.3f} ms, fastest rank {} {:.3f} ms, slowest rank {} {:.3f} ms\n",
             s.mean * 1e3, s.min_rank, s.min * 1e3, s.max_rank, s.max * 1e3);
  fmt::print(out, "  exposed comm, mean: {}\n", kinds_text(mean_exposed(job), 1e3));
  fmt::print(out, "  hidden fraction:    mean {:.1f}%\n", mean_hidden(job) * 100);
  write_ranks_idle_breakdown(ranks_idle(job), out);
  write_stragglers(job, out);
}

void write_job_json(const JobAnalysis& job, const std::string& version, std::ostream& out) {
  json::object o;
  o["stepsim_version"] = version;
  json::array ranks;
  for (const RankSummary& r : job.ranks) ranks.push_back(rank_json(r));
  o["ranks"] = std::move(ranks);
  const Spread s = step_spread(job);
  json::object across;
  across["step_time_s"] = {
      {"mean", s.mean}, {"min", s.min}, {"min_rank", s.min_rank}, {"max", s.max}, {"max_rank", s.max_rank}};
  across["exposed_comm_s"] = per_kind_json(mean_exposed(job));
  across["hidden_fraction"] = mean_hidden(job);
  across["idle_time_breakdown"] = across_idle_json(job);
  o["across_ranks"] = std::move(across);
  o["collective_calls"] = job.calls;
  json::array stragglers;
  for (const Straggler& st : job.stragglers)
    stragglers.push_back(
        {{"rank", st.rank},
         {"started_last", st.last},
         {"calls", st.calls},
         {"mean_lead_s", st.mean_lead_s()},
         {"others_wait_s_per_step", st.others_wait.seconds() / static_cast<double>(steps_of(job, st.rank))}});
  o["stragglers"] = std::move(stragglers);
  json::array unshared;
  for (int rank : job.unshared) unshared.push_back(rank);
  o["ranks_sharing_no_step"] = std::move(unshared);
  const std::string note = unshared_note(job);
  o["note"] = note.empty() ? json::value(nullptr) : json::value(note);
  report::write_pretty_json(o, out);
}

}  // namespace stepsim::analysis
