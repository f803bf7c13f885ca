// --best and plan's search: layouts pruned by validation and by the memory model before any
// simulation, simulated in the order of a lower bound on their step time (their compute, from
// one micro-batch simulated per TP, CP, micro-batch and precision) until the bound cannot
// reach the fastest found, the fastest layouts' secondary knobs searched in full.
#include "sweep/best.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <ostream>
#include <set>

#include "io/scenario_loader.hpp"
#include "io/validate.hpp"
#include "parallelism/grad_buckets.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "simulation/calibrated_costs.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"
#include "stepsim/timeline.hpp"
#include "sweep/progress.hpp"
#include "sweep/runner.hpp"

namespace stepsim::sweep {
namespace {

// Layouts simulated between two checks of the bound.
constexpr std::size_t kBatch = 16;

// The settings that run a recompute mode: the scenario's training.recompute_modules are what
// "selective" recomputes, so any other mode runs without them (they are refused beside it).
void push_recompute(std::vector<std::string>& sets, const std::string& mode) {
  sets.push_back("training.recompute=" + mode);
  if (mode != "selective") sets.push_back("training.recompute_modules=[]");
}

bool fixes(const SweepSpec& spec, const std::string& key) {
  return std::any_of(spec.sets.begin(), spec.sets.end(),
                     [&](const std::string& s) { return s.starts_with(key + "="); });
}

// The compute of one micro-batch through the whole model on one TP x CP group, without the
// slowdown communication causes: the per-GPU work of every layout with these TP, CP,
// micro-batch and precision is this, times the micro-batches, over the stages.
using ProbeKey = std::vector<std::string>;

ProbeKey probe_key(const Candidate& c) {
  return {value_of(c, "parallel.tp", "1"),
          value_of(c, "parallel.cp", "1"),
          value_of(c, "training.micro_batch", "1"),
          value_of(c, "training.precision", ""),
          value_of(c, "parallel.sequence_parallel", ""),
          value_of(c, "parallel.ep", ""),
          value_of(c, "parallel.etp", "")};
}

// 0 when the probe does not run (then the bound prunes nothing).
double probe_compute(const SweepSpec& spec, const ProbeKey& k) {
  auto sets = spec.sets;
  // An expert group (ep·etp ranks) that TP x CP does not hold needs data parallelism under it:
  // the probe runs as many replicas as that takes, one micro-batch each, and their compute is
  // the same. A mixture of experts' layouts carry their searched EP and ETP; where none does,
  // those the user fixed with --set (a dense model has neither).
  const Candidate user{spec.sets, {}};
  const std::string ep = k[5].empty() ? value_of(user, "parallel.ep", "") : k[5];
  const std::string etp = k[6].empty() ? value_of(user, "parallel.etp", "") : k[6];
  long long dp = 1;
  if (!ep.empty() || !etp.empty()) {
    const long long group = std::stoll(k[0]) * std::stoll(k[1]);
    const long long experts = (ep.empty() ? 1 : std::stoll(ep)) * (etp.empty() ? 1 : std::stoll(etp));
    dp = experts / std::gcd(group, experts);
    if (!ep.empty()) sets.push_back("parallel.ep=" + ep);
    if (!etp.empty()) sets.push_back("parallel.etp=" + etp);
  }
  for (const std::string& s :
       {"parallel.tp=" + k[0], "parallel.cp=" + k[1], "training.micro_batch=" + k[2],
        fmt::format("training.global_batch={}", std::stoll(k[2]) * dp), std::string("parallel.pp=1"),
        fmt::format("parallel.dp={}", dp), std::string("parallel.schedule=1f1b"),
        std::string("parallel.virtual_stages=1"), std::string("tensor_parallel.comm_overlap=false")})
    sets.push_back(s);
  // One stage: the scenario's uneven split is for its own stage count.
  if (!fixes(spec, "parallel.stage_layers")) sets.emplace_back("parallel.stage_layers=[]");
  push_recompute(sets, "none");
  if (!k[3].empty()) sets.push_back("training.precision=" + k[3]);
  if (!k[4].empty()) sets.push_back("parallel.sequence_parallel=" + k[4]);
  try {
    const Report r = simulate(io::load_scenario(spec.scenario, sets), SimulateOptions::report_only()).report;
    return std::max(0.0, r.breakdown_s.compute - r.compute_slowdown_s);
  } catch (const std::exception&) {
    return 0;
  }
}

// The micro-batches the pipeline's fill and drain add to a stage's own in the lower bound: the
// last stage starts its first forward once the first micro-batch has run through the p - 1
// stages before it, and the first stage ends once the last micro-batch's backward has come
// back through them, (p - 1) micro-batches under 1F1B and GPipe, (p - 1) / v under the
// interleaved schedule, whose passes are a v-th of a stage. The zero-bubble schedules (ZB-H1,
// ZB-H2) and DualPipe fill that bubble with deferred weight-gradient passes (and DualPipe with
// the micro-batches coming from the other end): what is left of it depends on how the forward,
// input- and weight-gradient passes compare, which the probe does not measure, so none is
// counted.
double fill_and_drain(Schedule schedule, double pp, double v) {
  switch (schedule) {
    case Schedule::gpipe:
    case Schedule::one_f_one_b:
      return pp - 1;
    case Schedule::interleaved:
      return (pp - 1) / v;
    case Schedule::zb_h1:
    case Schedule::zb_h2:
    case Schedule::dualpipe:
      return 0;
  }
  return 0;
}

// A layout's step time from below: each stage computes m micro-batches of 1/pp of the model,
// and the pipeline's fill and drain add fill_and_drain() of them. Every stage is counted as
// the average one, which the heaviest (the last, with the head) exceeds: 1F1B's step is at
// least the last stage's m micro-batches plus one of every other stage's, which is at least the
// average stage's m + pp - 1. A key the layout leaves to the user's --set (the schedule, the
// virtual stages) has the value of `base`, the scenario with that --set.
double bound_of(const Candidate& c, double probe, const Scenario& base) {
  const double pp = std::stod(value_of(c, "parallel.pp", std::to_string(base.parallel.pp)));
  const double v = std::stod(value_of(c, "parallel.virtual_stages", std::to_string(base.parallel.virtual_stages)));
  const double dp = std::stod(value_of(c, "parallel.dp", std::to_string(base.parallel.dp)));
  const double mb = std::stod(value_of(c, "training.micro_batch", std::to_string(base.training.micro_batch)));
  const std::string named = value_of(c, "parallel.schedule", "");
  Schedule schedule = base.parallel.schedule;
  for (const parallelism::ScheduleKind& kind : parallelism::pipeline_schedules())
    if (named == kind.name) schedule = kind.schedule;
  const double micro_batches = static_cast<double>(base.training.global_batch) / (mb * dp);
  return probe / pp * (micro_batches + fill_and_drain(schedule, pp, v));
}

// The recompute modes the search chooses from, least first: those the scenario loads with, as
// validation decides (Megatron-Core's EP overlap and per-layer CUDA graphs refuse full
// recompute, its graphs selective recompute of a graphed module beside dropout, activation
// offload any recompute); "" alone where the user's --set fixes the mode.
std::vector<std::string> recompute_modes(const SweepSpec& spec) {
  if (fixes(spec, "training.recompute")) return {""};
  const std::vector<std::string> base = base_sets(spec);
  std::vector<std::string> out;
  for (const char* mode : {"none", "selective", "full"}) {
    std::vector<std::string> sets = base;
    push_recompute(sets, mode);
    try {
      (void)io::load_scenario(spec.scenario, sets);
      out.emplace_back(mode);
    } catch (const InputError&) {
      // Refused beside the scenario's other keys: not a mode to search.
    }
  }
  return out;
}

// Loads `c` and simulates it with the least of the recompute `modes` that fits (more recompute
// only adds work), written into r.values; a mode "" leaves the recompute as it is.
PointResult evaluate(const SweepSpec& spec, const Candidate& c, std::size_t index,
                     const std::vector<std::string>& modes) {
  PointResult r;
  r.index = index;
  record_failures(r, [&] {
    auto sets = spec.sets;
    sets.insert(sets.end(), c.sets.begin(), c.sets.end());
    for (const auto& mode : modes) {
      auto with = sets;
      if (!mode.empty()) push_recompute(with, mode);
      const Scenario scenario = io::load_scenario(spec.scenario, with);
      const MemoryReport memory = estimate_memory(scenario);
      if (!mode.empty()) r.values = {mode};
      if (memory.modelled && !memory.fits) {
        // Kept for when no mode fits: the memory of the most recompute, the nearest to fitting.
        r.report = Report{};
        r.report->memory_bytes = memory;
        continue;
      }
      r.report = simulate(scenario, SimulateOptions::report_only()).report;
      if (r.report->memory_bytes.modelled && !r.report->memory_bytes.fits) break;
      return;
    }
    r.status = Status::oom;
    if (r.report) r.reason = parallelism::does_not_fit(r.report->memory_bytes);
  });
  return r;
}

// The choices of a configuration, its keys without their sections: "tp=8 pp=1 ... recompute=full".
std::string choice_label(const Candidate& c) {
  std::string label;
  for (const auto& s : c.sets) {
    const auto eq = s.find('=');
    const auto dot = s.rfind('.', eq);
    label += (label.empty() ? "" : " ") + s.substr(dot + 1, eq - dot - 1) + "=" + s.substr(eq + 1);
  }
  return label;
}

// Counts each outcome and keeps what fits, each candidate once.
class Tally {
 public:
  explicit Tally(BestResult& result) : result_(result) {}

  bool first_time(const Candidate& c) {
    auto key = c.sets;
    std::sort(key.begin(), key.end());
    return seen_.insert(std::move(key)).second;
  }

  void add(Candidate c, const PointResult& r) {
    ++result_.candidates;
    if (r.status == Status::invalid && result_.invalid++ == 0) result_.first_refusal = r.reason;
    if (r.status == Status::oom) {
      ++result_.oom;
      note_oom(c, r);
    }
    if (r.status == Status::error) ++result_.errors;
    if (r.status != Status::ok) return;
    // Seen as tried (the second stage does not try it again) and as it ran.
    (void)first_time(c);
    for (const auto& mode : r.values) push_recompute(c.sets, mode);
    (void)first_time(c);
    result_.ranked.emplace_back(std::move(c), *r.report);
  }

  // The step time the k-th fastest so far takes; infinity before there are k.
  double kth_fastest(std::size_t k) const {
    if (k == 0 || result_.ranked.size() < k) return std::numeric_limits<double>::infinity();
    std::vector<double> steps;
    for (const auto& [c, r] : result_.ranked) steps.push_back(r.step_time_s);
    std::nth_element(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(k - 1), steps.end());
    return steps[k - 1];
  }

 private:
  // Keeps the configuration that needs the least memory beyond the capacity, with its figures:
  // why nothing fits, when nothing does.
  void note_oom(Candidate c, const PointResult& r) {
    if (!r.report || r.reason.empty()) return;
    const MemoryReport& m = r.report->memory_bytes;
    const double beyond = m.device + m.headroom - m.capacity;
    if (!result_.closest_oom.empty() && beyond >= closest_beyond_) return;
    closest_beyond_ = beyond;
    for (const auto& mode : r.values) push_recompute(c.sets, mode);
    result_.closest_oom = choice_label(c) + ": " + r.reason;
  }

  BestResult& result_;
  std::set<std::vector<std::string>> seen_;
  double closest_beyond_ = 0;
};

void run_batch(const SweepSpec& spec, const std::vector<Candidate>& batch, const std::vector<std::string>& modes,
               unsigned jobs, Tally& tally) {
  std::vector<std::size_t> indices(batch.size());
  std::iota(indices.begin(), indices.end(), 0);
  const auto results = run_points(
      indices, jobs, [&](std::size_t i) { return evaluate(spec, batch[i], i, modes); }, false);
  for (const auto& r : results) tally.add(batch[r.index], r);
}

// The layouts whose precision the GPU has a peak for and the scenario runs; the others are
// left out with a note.
std::vector<Candidate> supported(const SweepSpec& spec, std::vector<Candidate> layouts, BestResult& result) {
  std::map<std::string, bool> ok;
  std::vector<Candidate> out;
  for (auto& c : layouts) {
    const std::string precision = value_of(c, "training.precision", "");
    if (!ok.contains(precision)) {
      const Scenario base = load_base(spec);
      const std::string why = unrun_precision_reason(base, precision);
      ok[precision] = why.empty();
      if (!why.empty()) {
        const std::optional<Precision> p = precision_named(precision);
        if (!p || !runs_precision(base.cluster.gpu, *p))
          result.unrun_precisions.push_back(precision);
        else
          result.refused_precisions.push_back(fmt::format("{}: {}", precision, why));
        result.notes.push_back(fmt::format("{} is not searched: {}", precision, why));
      }
    }
    if (ok[precision]) out.push_back(std::move(c));
  }
  return out;
}

std::map<ProbeKey, double> probes(const SweepSpec& spec, const std::vector<Candidate>& layouts, unsigned jobs) {
  std::vector<ProbeKey> keys;
  for (const auto& c : layouts)
    if (std::find(keys.begin(), keys.end(), probe_key(c)) == keys.end()) keys.push_back(probe_key(c));
  std::vector<std::size_t> indices(keys.size());
  std::iota(indices.begin(), indices.end(), 0);
  std::vector<double> compute(keys.size(), 0);
  (void)run_points(
      indices, jobs,
      [&](std::size_t i) {
        compute[i] = probe_compute(spec, keys[i]);
        return PointResult{};
      },
      false);
  std::map<ProbeKey, double> out;
  for (std::size_t i = 0; i < keys.size(); ++i) out[keys[i]] = compute[i];
  return out;
}

// The first stage: layouts in the order of their bound, until the bound of the next one is
// above the step time of the `keep`-th fastest found.
void search_layouts(const SweepSpec& spec, const SearchSpace& space, unsigned jobs, bool show, BestResult& result,
                    Tally& tally) {
  const std::vector<Candidate> layouts = supported(spec, enumerate_layouts(spec, space, result), result);
  const Scenario base = load_base(spec);
  const auto compute = probes(spec, layouts, jobs);
  std::vector<std::pair<double, Candidate>> ordered;
  for (const auto& c : layouts) ordered.emplace_back(bound_of(c, compute.at(probe_key(c)), base), c);
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::vector<std::string> modes = recompute_modes(spec);
  const std::size_t keep = std::max<std::size_t>(space.keep, 1);
  Progress progress(ordered.size(), show);
  for (std::size_t start = 0; start < ordered.size(); start += kBatch) {
    if (ordered[start].first >= tally.kth_fastest(keep)) {
      result.pruned += ordered.size() - start;
      break;
    }
    if (space.max_layouts > 0 && result.ranked.size() >= space.max_layouts) {
      for (std::size_t i = start; i < ordered.size(); ++i)
        ++(ordered[i].first < tally.kth_fastest(keep) ? result.unsearched : result.pruned);
      break;
    }
    std::vector<Candidate> batch;
    for (std::size_t i = start; i < std::min(start + kBatch, ordered.size()); ++i) batch.push_back(ordered[i].second);
    run_batch(spec, batch, modes, jobs, tally);
    progress.update(std::min(start + kBatch, ordered.size()));
  }
  progress.finish();
}

bool same_result(const Report& a, const Report& b) {
  return a.step_time_s == b.step_time_s && a.breakdown_s == b.breakdown_s &&
         a.memory_bytes.device == b.memory_bytes.device;
}

// Fastest first, ties in the order found.
void sort_fastest(BestResult& result) {
  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const auto& a, const auto& b) { return a.second.step_time_s < b.second.step_time_s; });
}

// Configurations with identical results become one row, at the place of the first. Sorted by
// step time alone, they need not be neighbours: another result of the same step time (the
// same breakdown with other memory) may sit between them, so every row of that step time is
// looked at.
void merge_alike(BestResult& result) {
  auto& ranked = result.ranked;
  std::vector<std::pair<Candidate, Report>> merged;
  for (auto& entry : ranked) {
    auto row = merged.rbegin();
    while (row != merged.rend() && row->second.step_time_s == entry.second.step_time_s &&
           !same_result(row->second, entry.second))
      ++row;
    if (row != merged.rend() && same_result(row->second, entry.second)) {
      row->first.alike.push_back(entry.first.sets);
      continue;
    }
    merged.push_back(std::move(entry));
  }
  ranked = std::move(merged);
}

// A cell of the row: `cell_of` of the row's configuration and of each whose results are
// identical, each value once, joined by commas.
std::string alike_cell(const Candidate& c, const std::function<std::string(const Candidate&)>& cell_of) {
  std::vector<std::string> values{cell_of(c)};
  for (const auto& sets : c.alike) {
    const std::string v = cell_of(Candidate{sets, {}});
    if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
  }
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ",") + v;
  return out;
}

// The distinct values `key` takes over a row's candidates, joined by commas.
std::string column(const Candidate& c, const std::string& key, const std::string& otherwise) {
  return alike_cell(c, [&](const Candidate& x) { return value_of(x, key, otherwise); });
}

// Whether the row takes a bucket size in MiB (PyTorch's DDP, outside DeepSpeed's pipeline engine,
// which reduces after the schedule; Megatron-Core sizes its buckets in parameters, FSDP has none).
bool row_takes_bucket_size(const Candidate& c, const std::string& kind, Framework framework) {
  const std::optional<DpKind> k = io::dp_kind_named(kind);
  return k && io::kind_runs_key(*k, framework, "bucket_cap_mb") &&
         !deepspeed_pipeline_engine(framework, std::stoi(value_of(c, "parallel.pp", "1")));
}

// A configuration's bucket: MiB for PyTorch's DDP, "40M" parameters for Megatron-Core's buckets
// and DeepSpeed ZeRO's (the default at its DP degree where it sets none), "-" for none.
std::string bucket_of(const Candidate& c, const std::string& kind, const Scenario& base) {
  if (row_takes_bucket_size(c, kind, base.training.framework))
    return value_of(c, "data_parallel.bucket_cap_mb", fmt::format("{:g}", base.data_parallel.bucket_cap_mb));
  const std::optional<DpKind> k = io::dp_kind_named(kind);
  const int pp = std::stoi(value_of(c, "parallel.pp", std::to_string(base.parallel.pp)));
  if (!k || !buckets_in_parameters(*k, base.training.framework, pp)) return "-";
  Scenario s = base;
  s.parallel.dp = std::stoi(value_of(c, "parallel.dp", std::to_string(base.parallel.dp)));
  s.data_parallel.bucket_parameters =
      std::stoll(value_of(c, "data_parallel.bucket_parameters", std::to_string(base.data_parallel.bucket_parameters)));
  return fmt::format("{:g}M", static_cast<double>(parallelism::megatron_bucket_elements(s)) / 1e6);
}

// The row's bucket cell, as column() lists a key's values.
std::string bucket_cell(const Candidate& c, const std::string& kind, const Scenario& base) {
  return alike_cell(c, [&](const Candidate& x) { return bucket_of(x, value_of(x, "data_parallel.kind", kind), base); });
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

// The candidate's schedule, or the one the user's --set fixes.
std::string schedule_of(const SweepSpec& spec, const Candidate& c) {
  const Candidate user{spec.sets, {}};
  const std::string schedule = column(c, "parallel.schedule", value_of(user, "parallel.schedule", ""));
  if (value_of(c, "parallel.pp", "1") == "1") return "-";
  if (schedule == "interleaved")
    return "interleaved/" + column(c, "parallel.virtual_stages", value_of(user, "parallel.virtual_stages", "?"));
  return schedule.empty() ? "(set)" : schedule;
}

}  // namespace

std::string unrun_precision_reason(const Scenario& base, const std::string& precision) {
  if (precision.empty()) return "";
  const std::optional<Precision> p = precision_named(precision);
  if (!p || !runs_precision(base.cluster.gpu, *p))
    return fmt::format("{} {}", base.cluster.gpu.name,
                       p && block_scaled(*p) && base.cluster.gpu.arch != GpuArch::blackwell
                           ? "has no block-scaled tensor cores (Blackwell)"
                           : "has no peak for it");
  return io::precision_refusal(base, *p);
}

double step_lower_bound(const SweepSpec& spec, const Candidate& layout) {
  return bound_of(layout, probe_compute(spec, probe_key(layout)), load_base(spec));
}

void check_precisions(const SweepSpec& spec, const std::vector<std::string>& precisions) {
  if (precisions.empty()) return;
  const Scenario base = load_base(spec);
  std::vector<std::string> why;
  for (const std::string& p : precisions) {
    const std::string reason = unrun_precision_reason(base, p);
    if (reason.empty()) return;  // it runs this one
    why.push_back(p + ": " + reason);
  }
  throw InputError("--precision", fmt::format("{}", fmt::join(precisions, ",")),
                   fmt::format("the cluster runs none of them ({})", fmt::join(why, "; ")));
}

void check_calibration(const SweepSpec& spec) { (void)load_calibration(load_base(spec)); }

BestResult search_best(const SweepSpec& given, unsigned jobs, bool progress, const SearchSpace& space) {
  // The base scenario may load at a searched precision (SweepSpec::precisions).
  SweepSpec spec = given;
  if (spec.precisions.empty()) spec.precisions = space.precisions;
  check_calibration(spec);
  if (!fixes(spec, "training.precision")) check_precisions(spec, space.precisions);
  BestResult result;
  Tally tally(result);
  search_layouts(spec, space, jobs, progress, result, tally);
  sort_fastest(result);
  const std::size_t refined = std::min(space.refine, result.ranked.size());
  std::vector<Candidate> second;
  for (std::size_t i = 0; i < refined; ++i)
    for (auto& c : refinements(spec, result.ranked[i].first))
      if (tally.first_time(c)) second.push_back(std::move(c));
  if (!second.empty()) run_batch(spec, second, recompute_modes(spec), jobs, tally);
  sort_fastest(result);
  merge_alike(result);
  // Only the layouts that fit are refined: say how many there were, none when nothing fits.
  const std::string refinement =
      refined == 0 ? std::string(
                         "no layout fits, so none was tried with every data-parallel kind, bucket size and "
                         "TP overlap")
      : refined == 1 ? std::string(
                           "the fastest layout was then tried with every data-parallel kind, bucket size and TP "
                           "overlap not fixed by --set")
                     : fmt::format(
                           "the {} fastest layouts were then tried with every data-parallel kind, bucket size and TP "
                           "overlap not fixed by --set",
                           refined);
  result.notes.push_back(
      fmt::format("each configuration runs with the least recompute that fits (more only adds work); {}", refinement));
  if (result.unsearched > 0)
    result.notes.push_back(fmt::format(
        "{} layouts not simulated once {} fitted, although their compute alone could have been faster than the "
        "fastest found",
        result.unsearched, space.max_layouts));
  if (result.pruned > 0)
    result.notes.push_back(fmt::format(
        "{} layouts not simulated: their compute alone (one micro-batch through the model on their TP and CP "
        "group, simulated, times their micro-batches over the stages, with the fill and drain their schedule cannot "
        "hide) "
        "already takes longer than the layouts ranked",
        result.pruned));
  return result;
}

void write_best(const SweepSpec& spec, const BestResult& best, std::size_t k, std::ostream& out) {
  out << fmt::format(
      "{} GPUs: {} configurations, {} refused by validation, {} do not fit, {} internal errors, {} left out by the "
      "bound, {} distinct results fit\n",
      spec.gpus, best.candidates + best.pruned + best.unsearched, best.invalid, best.oom, best.errors, best.pruned,
      best.ranked.size());
  for (const auto& note : best.notes) out << "note: " << note << "\n";
  if (!best.fixed.empty()) {
    std::string fixed;
    for (const auto& key : best.fixed) fixed += (fixed.empty() ? "" : ", ") + key;
    out << "fixed by --set: " << fixed << "\n";
  }
  if (best.ranked.empty()) {
    out << "no configuration fits\n";
    if (!best.no_layout.empty()) out << "no layout: " << best.no_layout << "\n";
    if (best.invalid > 0) out << "the first configuration refused by validation: " << best.first_refusal << "\n";
    if (!best.closest_oom.empty()) out << "the configuration nearest to fitting: " << best.closest_oom << "\n";
    return;
  }
  // A key the search left alone has the scenario's value (with the user's --set).
  const Scenario base = load_base(spec);
  // The search sets the kind and recompute unless the user did.
  const std::string kind = value_of(Candidate{spec.sets, {}}, "data_parallel.kind", "?");
  const std::string overlap = base.tensor_parallel.comm_overlap ? "true" : "false";
  // A mixture of experts gets EP and ETP columns after DP (no cells for a dense model).
  const bool moe = base.model.moe.experts > 0;
  const auto ep_cell = [&](const std::string& ep, const std::string& etp) {
    return moe ? fmt::format(" {:>3} {:>3}", ep, etp) : std::string();
  };
  const std::string row = "{:>3}  {:>3} {:>3} {:>3} {:>4}{} {:>3}  {:<14} {:<9} {:>6} {:<6} {:<9} {:<9}  ";
  out << "\n"
      << fmt::format(fmt::runtime(row + "{:>7} {:>11} {:>6}  {:>9} {:>9} {:>8} {:>7}\n"), "#", "TP", "PP", "CP", "DP",
                     ep_cell("EP", "ETP"), "mb", "schedule", "DP kind", "bucket", "TP ovl", "precision", "recompute",
                     "step s", "tokens/s", "MFU", "compute s", "exposed s", "bubble s", "mem GiB");
  for (std::size_t i = 0; i < std::min(k, best.ranked.size()); ++i) {
    const auto& [c, r] = best.ranked[i];
    out << fmt::format(fmt::runtime(row + "{:>7.3f} {:>11.0f} {:>5.1f}%  {:>9.3f} {:>9.3f} {:>8.3f} {:>7.1f}\n"), i + 1,
                       column(c, "parallel.tp", "?"), column(c, "parallel.pp", "?"),
                       column(c, "parallel.cp", std::to_string(base.parallel.cp)), column(c, "parallel.dp", "?"),
                       ep_cell(column(c, "parallel.ep", std::to_string(base.parallel.ep)),
                               column(c, "parallel.etp", std::to_string(base.parallel.etp))),
                       column(c, "training.micro_batch", "?"), schedule_of(spec, c),
                       column(c, "data_parallel.kind", kind), bucket_cell(c, kind, base),
                       column(c, "tensor_parallel.comm_overlap", overlap),
                       column(c, "training.precision", to_string(base.training.precision)),
                       column(c, "training.recompute", value_of(Candidate{spec.sets, {}}, "training.recompute", "?")),
                       r.step_time_s, r.throughput.tokens_per_s, 100 * r.throughput.mfu, r.breakdown_s.compute,
                       r.breakdown_s.exposed_total(), r.breakdown_s.bubble, r.memory_bytes.device / 1073741824.0);
  }
  out << "\ncolumns: DP kind and bucket of data parallelism (MiB for PyTorch's DDP, M parameters for Megatron-Core's "
         "and DeepSpeed's buckets), TP ovl: TP communication overlap, mem GiB: memory in use at the peak; a cell with "
         "commas lists configurations whose results are identical\n";
  out << "\nwhat limits #1 (" << choice_label(best.ranked.front().first)
      << "): " << limiting_factor(best.ranked.front().second) << "\n";
}

void print_best(const SweepSpec& given, std::size_t k, unsigned jobs, bool progress, std::ostream& out,
                SearchSpace space) {
  space.keep = k;
  SweepSpec spec = given;
  if (spec.precisions.empty()) spec.precisions = space.precisions;
  write_best(spec, search_best(spec, jobs, progress, space), k, out);
}

}  // namespace stepsim::sweep
