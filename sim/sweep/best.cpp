// --best: a grid over the choices Megatron-style training makes, pruned by validation and
// by the memory model before any simulation, then simulated in parallel and ranked.
#include "sweep/best.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"
#include "stepsim/timeline.hpp"
#include "sweep/runner.hpp"

namespace stepsim::sweep {
namespace {

constexpr long long kMaxMicroBatch = 8;
constexpr int kMaxVirtualStages = 8;
const std::vector<std::string> kBuckets = {"25", "100"};  // MiB: PyTorch's default and a large one
const std::vector<std::string> kDpKinds = {"ddp", "zero1", "fsdp"};
const std::vector<std::string> kRecompute = {"none", "selective", "full"};

std::vector<int> divisors(long long n, long long limit) {
  std::vector<int> out;
  for (long long d = 1; d <= std::min(n, limit); ++d)
    if (n % d == 0) out.push_back(static_cast<int>(d));
  return out;
}

bool user_sets(const SweepSpec& spec, const std::string& key) {
  return std::any_of(spec.sets.begin(), spec.sets.end(),
                     [&](const std::string& s) { return s.starts_with(key + "="); });
}

// One searched dimension: its key and its values given the degrees chosen so far.
struct Choice {
  int tp, pp;
  long long dp;
};

void add_schedules(const Scenario& base, const Choice& c, std::vector<std::vector<std::string>>& out) {
  if (c.pp == 1) {
    out.push_back({});
    return;
  }
  out.push_back({"parallel.schedule=1f1b"});
  const int per_stage = base.model.layers / c.pp;
  for (int v = 2; v <= std::min(per_stage, kMaxVirtualStages); ++v)
    if (per_stage % v == 0)
      out.push_back({"parallel.schedule=interleaved", fmt::format("parallel.virtual_stages={}", v)});
}

std::string choice_label(const Candidate& c) {
  std::string label;
  for (const auto& s : c.sets) {
    const auto eq = s.find('=');
    const auto dot = s.rfind('.', eq);
    label += (label.empty() ? "" : " ") + s.substr(dot + 1, eq - dot - 1) + "=" + s.substr(eq + 1);
  }
  return label;
}

std::string value_of(const Candidate& c, const std::string& key, const std::string& otherwise) {
  for (const auto& s : c.sets)
    if (s.starts_with(key + "=")) return s.substr(key.size() + 1);
  return otherwise;
}

// Whatever limits the step most besides compute: exposed communication (with its largest
// kinds), the pipeline bubble, or compute itself when both are small.
std::string limiting_factor(const Report& r) {
  const double exposed = r.breakdown_s.exposed_total();
  const double bubble = r.breakdown_s.bubble;
  const double step = r.step_time_s;
  std::string kinds;
  for (std::size_t k = 0; k < kCommKinds; ++k)
    if (r.breakdown_s.exposed_comm[k] > 0)
      kinds += fmt::format("{}{} {:.3f} s", kinds.empty() ? "" : ", ", to_string(static_cast<CommKind>(k)),
                           r.breakdown_s.exposed_comm[k]);
  const std::string figures =
      fmt::format("step {:.3f} s: compute {:.3f} s, exposed communication {:.3f} s{}, bubble {:.3f} s", step,
                  r.breakdown_s.compute, exposed, kinds.empty() ? "" : " (" + kinds + ")", bubble);
  if (std::max(exposed, bubble) < 0.05 * step) return "compute (" + figures + ")";
  return (exposed >= bubble ? "exposed communication (" : "the pipeline bubble (") + figures + ")";
}

}  // namespace

std::vector<Candidate> enumerate_candidates(const SweepSpec& spec, BestResult& result) {
  const Scenario base = io::load_scenario(spec.scenario, spec.sets);
  const long long n = spec.gpus;
  const bool fix_tp = user_sets(spec, "parallel.tp"), fix_pp = user_sets(spec, "parallel.pp");
  const bool fix_mb = user_sets(spec, "training.micro_batch"), fix_sched = user_sets(spec, "parallel.schedule");
  const bool fix_kind = user_sets(spec, "data_parallel.kind"),
             fix_bucket = user_sets(spec, "data_parallel.bucket_cap_mb");
  const bool fix_recompute = user_sets(spec, "training.recompute");
  for (const auto& [fixed, key] : {std::pair{fix_tp, "parallel.tp"},
                                   {fix_pp, "parallel.pp"},
                                   {fix_mb, "training.micro_batch"},
                                   {fix_sched, "parallel.schedule"},
                                   {fix_kind, "data_parallel.kind"},
                                   {fix_bucket, "data_parallel.bucket_cap_mb"},
                                   {fix_recompute, "training.recompute"}})
    if (fixed) result.fixed.emplace_back(key);
  if (user_sets(spec, "parallel.dp"))
    throw InputError("--set", "parallel.dp", "cannot be combined with --gpus, which derives parallel.dp");
  result.notes.push_back("context parallelism is not searched: cp stays " + std::to_string(base.parallel.cp) +
                         " (choose it with --set parallel.cp)");
  const std::vector<int> tps = fix_tp ? std::vector<int>{base.parallel.tp}
                                      : divisors(std::min<long long>(base.cluster.gpus_per_node, base.model.heads), n);
  std::vector<Candidate> out;
  for (const int tp : tps) {
    if (base.model.heads % tp != 0 || n % tp != 0) continue;
    const std::vector<int> pps = fix_pp ? std::vector<int>{base.parallel.pp} : divisors(base.model.layers, n / tp);
    for (const int pp : pps) {
      const long long model = static_cast<long long>(tp) * pp * base.parallel.cp;
      if (n % model != 0) continue;
      const Choice c{tp, pp, n / model};
      std::vector<long long> mbs;
      for (long long mb = 1; mb <= kMaxMicroBatch; mb *= 2)
        if (!fix_mb && base.training.global_batch % (mb * c.dp) == 0) mbs.push_back(mb);
      if (fix_mb) mbs = {base.training.micro_batch};
      std::vector<std::vector<std::string>> schedules;
      if (fix_sched)
        schedules.push_back({});
      else
        add_schedules(base, c, schedules);
      for (const long long mb : mbs)
        for (const auto& schedule : schedules)
          for (const auto& kind : fix_kind ? std::vector<std::string>{""} : kDpKinds)
            for (const auto& bucket : (fix_bucket || kind == "fsdp") ? std::vector<std::string>{""} : kBuckets)
              for (const auto& recompute : fix_recompute ? std::vector<std::string>{""} : kRecompute) {
                Candidate cand;
                cand.sets.push_back(fmt::format("parallel.tp={}", tp));
                cand.sets.push_back(fmt::format("parallel.pp={}", pp));
                cand.sets.push_back(fmt::format("parallel.dp={}", c.dp));
                if (!user_sets(spec, "parallel.sequence_parallel"))
                  cand.sets.push_back(fmt::format("parallel.sequence_parallel={}", tp > 1));
                cand.sets.push_back(fmt::format("training.micro_batch={}", mb));
                for (const auto& s : schedule) cand.sets.push_back(s);
                if (!kind.empty()) cand.sets.push_back("data_parallel.kind=" + kind);
                if (!bucket.empty()) cand.sets.push_back("data_parallel.bucket_cap_mb=" + bucket);
                if (!recompute.empty()) cand.sets.push_back("training.recompute=" + recompute);
                out.push_back(std::move(cand));
              }
    }
  }
  result.candidates = out.size();
  return out;
}

BestResult search_best(const SweepSpec& spec, unsigned jobs, bool progress) {
  BestResult result;
  const auto candidates = enumerate_candidates(spec, result);
  std::vector<std::size_t> indices(candidates.size());
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = i;
  const auto results = run_points(
      indices, jobs,
      [&](std::size_t i) {
        PointResult r;
        r.index = i;
        record_failures(r, [&] {
          auto sets = spec.sets;
          sets.insert(sets.end(), candidates[i].sets.begin(), candidates[i].sets.end());
          const Scenario scenario = io::load_scenario(spec.scenario, sets);
          const MemoryReport memory = estimate_memory(scenario);
          if (memory.modelled && !memory.fits) {
            r.status = Status::oom;
            return;
          }
          r.report = simulate(scenario, SimulateOptions::report_only()).report;
          if (r.report->memory_bytes.modelled && !r.report->memory_bytes.fits) r.status = Status::oom;
        });
        return r;
      },
      progress);
  for (const auto& r : results) {
    if (r.status == Status::invalid) ++result.invalid;
    if (r.status == Status::oom) ++result.oom;
    if (r.status == Status::error) ++result.errors;
    if (r.status == Status::ok) result.ranked.emplace_back(candidates[r.index], *r.report);
  }
  // Ties keep enumeration order: stable sort on step time.
  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const auto& a, const auto& b) { return a.second.step_time_s < b.second.step_time_s; });
  return result;
}

void print_best(const SweepSpec& spec, std::size_t k, unsigned jobs, bool progress, std::ostream& out) {
  const BestResult best = search_best(spec, jobs, progress);
  out << fmt::format(
      "{} GPUs: {} configurations, {} refused by validation, {} do not fit, {} internal errors, {} fit\n", spec.gpus,
      best.candidates, best.invalid, best.oom, best.errors, best.ranked.size());
  for (const auto& note : best.notes) out << "note: " << note << "\n";
  if (!best.fixed.empty()) {
    std::string fixed;
    for (const auto& key : best.fixed) fixed += (fixed.empty() ? "" : ", ") + key;
    out << "fixed by --set: " << fixed << "\n";
  }
  if (best.ranked.empty()) {
    out << "no configuration fits\n";
    return;
  }
  out << fmt::format(
      "\n{:>3}  {:>3} {:>3} {:>4} {:>3}  {:<14} {:<6} {:>6} {:<9}  {:>9} {:>11} {:>6}  {:>9} {:>9} {:>9} {:>9}\n", "#",
      "tp", "pp", "dp", "mb", "schedule", "dp", "bucket", "recompute", "step s", "tokens/s", "MFU", "compute",
      "exposed", "bubble", "peak GiB");
  for (std::size_t i = 0; i < std::min(k, best.ranked.size()); ++i) {
    const auto& [c, r] = best.ranked[i];
    const std::string schedule =
        value_of(c, "parallel.schedule", "-") == "interleaved"
            ? "interleaved/" + value_of(c, "parallel.virtual_stages", "?")
            : value_of(c, "parallel.schedule", value_of(c, "parallel.pp", "1") == "1" ? "-" : "1f1b");
    out << fmt::format(
        "{:>3}  {:>3} {:>3} {:>4} {:>3}  {:<14} {:<6} {:>6} {:<9}  {:>9.3f} {:>11.0f} {:>5.1f}%  {:>9.3f} {:>9.3f} "
        "{:>9.3f} {:>9.1f}\n",
        i + 1, value_of(c, "parallel.tp", "?"), value_of(c, "parallel.pp", "?"), value_of(c, "parallel.dp", "?"),
        value_of(c, "training.micro_batch", "?"), schedule, value_of(c, "data_parallel.kind", "(set)"),
        value_of(c, "data_parallel.kind", "") == "fsdp" ? "-" : value_of(c, "data_parallel.bucket_cap_mb", "(set)"),
        value_of(c, "training.recompute", "(set)"), r.step_time_s, r.throughput.tokens_per_s, 100 * r.throughput.mfu,
        r.breakdown_s.compute, r.breakdown_s.exposed_total(), r.breakdown_s.bubble,
        r.memory_bytes.device / 1073741824.0);
  }
  out << "\nwhat limits #1 (" << choice_label(best.ranked.front().first)
      << "): " << limiting_factor(best.ranked.front().second) << "\n";
}

}  // namespace stepsim::sweep
