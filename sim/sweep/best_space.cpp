// The configurations the best-configuration search tries: layouts first (degrees, micro-batch,
// schedule, precision), then the secondary knobs of the fastest layouts.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "io/scenario_loader.hpp"
#include "io/validate.hpp"
#include "io/validate_limits.hpp"
#include "parallelism/grad_buckets.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"
#include "sweep/best.hpp"

namespace stepsim::sweep {
namespace {

constexpr long long kMaxMicroBatch = 8;
constexpr int kMaxVirtualStages = 8;
constexpr int kMaxContextParallel = 8;
const std::vector<std::string> kBuckets = {"25", "100"};  // MiB: PyTorch's default and a large one
const std::vector<std::string> kDpKinds = {"ddp", "zero1", "zero2", "fsdp"};

// Whether a layout of `pp` stages runs data-parallel kind `kind` (io/validate.cpp,
// resolve_pipeline_engine: DeepSpeed's pipeline engine runs ZeRO stage 0 or 1 only).
bool runs_kind_at(const std::string& kind, Framework framework, int pp) {
  return !deepspeed_pipeline_engine(framework, pp) || kind.empty() || kind == "ddp" || kind == "zero1";
}

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

// The degrees chosen so far.
struct Degrees {
  int tp, pp, cp;
  long long dp;
};

// The schedules tried at `pp` stages: 1F1B, and interleaved at each virtual-stage count that
// divides a stage's layers. Each candidate sets both keys, so that the scenario's own schedule
// (interleaved, say) does not follow it to a layout it does not fit; a key the user --set stays.
std::vector<std::vector<std::string>> all_schedules(const SweepSpec& spec, const Scenario& base, int pp) {
  const bool fixed_schedule = user_sets(spec, "parallel.schedule");
  const bool fixed_stages = user_sets(spec, "parallel.virtual_stages");
  const auto with_stages = [&](std::vector<std::string> sets, int v) {
    if (!fixed_stages) sets.push_back(fmt::format("parallel.virtual_stages={}", v));
    return sets;
  };
  const std::vector<std::string> one_f_one_b =
      fixed_schedule ? std::vector<std::string>{} : std::vector<std::string>{"parallel.schedule=1f1b"};
  const std::vector<std::string> interleaved =
      fixed_schedule ? std::vector<std::string>{} : std::vector<std::string>{"parallel.schedule=interleaved"};
  if (pp == 1) return {with_stages(one_f_one_b, 1)};
  if (fixed_schedule && base.parallel.schedule != Schedule::interleaved) return {with_stages({}, 1)};
  std::vector<std::vector<std::string>> out;
  const bool may_1f1b = !fixed_schedule && (!fixed_stages || base.parallel.virtual_stages == 1);
  if (may_1f1b) out.push_back(with_stages(one_f_one_b, 1));
  const int per_stage = base.model.layers / pp;
  for (int v = 2; v <= std::min(per_stage, kMaxVirtualStages); ++v)
    if (per_stage % v == 0 && (!fixed_stages || base.parallel.virtual_stages == v))
      out.push_back(with_stages(interleaved, v));
  // A fixed count no stage splits into: that count, for validation to refuse with its reason.
  if (out.empty()) out.push_back(with_stages(fixed_schedule ? std::vector<std::string>{} : interleaved, 1));
  return out;
}

// A schedule candidate's settings, and whether the scenario runs it at its stages
// (io::runs_pipeline: DeepSpeed's pipeline engine runs its 1F1B alone, Megatron-Core's EP
// overlap the interleaved schedule alone).
struct Pipeline {
  std::vector<std::string> sets;
  bool runs = true;
  Schedule schedule = Schedule::one_f_one_b;
};

std::vector<Pipeline> schedules(const SweepSpec& spec, const Scenario& base, int pp) {
  std::vector<Pipeline> out;
  for (auto& sets : all_schedules(spec, base, pp)) {
    const std::string named = value_of(Candidate{sets, {}}, "parallel.schedule", "");
    const Schedule schedule = named.empty()     ? base.parallel.schedule
                              : named == "1f1b" ? Schedule::one_f_one_b
                                                : Schedule::interleaved;
    out.push_back({std::move(sets), io::runs_pipeline(base, pp, schedule), schedule});
  }
  return out;
}

// Context parallelism's degrees: each rank takes two balanced chunks of the sequence, and with
// sequence parallelism a CP rank's share splits again over TP; where the scenario runs no
// context parallelism, 1 alone.
std::vector<int> context_degrees(const SweepSpec& spec, const Scenario& base, int tp, long long rest) {
  if (user_sets(spec, "parallel.cp")) return {base.parallel.cp};
  // Latent attention, multi-token prediction, sliding windows and unfused attention run
  // without context parallelism only.
  if (!io::runs_context_parallel(base)) return {1};
  std::vector<int> out;
  for (int cp = 1; cp <= kMaxContextParallel && cp <= rest; cp *= 2)
    if (rest % cp == 0 && base.model.seq_len % (2LL * cp) == 0 && base.model.seq_len / cp % tp == 0) out.push_back(cp);
  return out;
}

std::vector<long long> micro_batches(const SweepSpec& spec, const Scenario& base, long long dp) {
  if (user_sets(spec, "training.micro_batch")) return {base.training.micro_batch};
  std::vector<long long> out;
  for (long long mb = 1; mb <= kMaxMicroBatch; mb *= 2)
    if (base.training.global_batch % (mb * dp) == 0) out.push_back(mb);
  return out;
}

// A PyTorch DDP bucket size in MiB, which DeepSpeed's pipeline engine does not use either (it
// reduces after the schedule).
bool takes_bucket_size(std::optional<DpKind> kind, Framework framework, int pp) {
  return kind && io::kind_runs_key(*kind, framework, "bucket_cap_mb") && !deepspeed_pipeline_engine(framework, pp);
}

// The sizes tried: the framework's default at the layout's DP degree (max(4e7, 1e6·dp) under
// Megatron-Core, DeepSpeed's 5e8) and a quarter and four times it, as the advice tries them.
std::vector<std::string> bucket_parameter_sizes(const Scenario& base, long long dp) {
  Scenario s = base;
  s.parallel.dp = static_cast<int>(dp);
  s.data_parallel.bucket_parameters = 0;
  const long long size = parallelism::megatron_bucket_elements(s);
  std::vector<std::string> out{""};
  for (long long n : {size / 4, size * 4})
    if (n >= 1 && n <= DataParallelSpec::kMaxBucketParameters) out.push_back(std::to_string(n));
  return out;
}

bool loads(const SweepSpec& spec, const std::vector<std::string>& sets) {
  try {
    (void)io::load_scenario(spec.scenario, sets);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// A candidate of data-parallel kind `kind` takes another kind's keys that the scenario sets
// away from their defaults back to those defaults (each kind refuses another's keys set so):
// the search compares the kinds as each runs by default. Keys the user --set stay as given,
// and hold the search to the kinds that admit them.
std::vector<std::string> kind_defaults(const SweepSpec& spec, const Scenario& base, const std::string& kind) {
  if (kind.empty()) return {};  // the user's kind: the scenario's keys are theirs to keep
  const std::optional<DpKind> k = io::dp_kind_named(kind);
  if (!k) return {};
  return io::kind_switch_sets(base, *k, [&](const std::string& key) { return user_sets(spec, key); });
}

// The data-parallel kinds the scenario admits whatever the layout: a key the user fixes can
// rule kinds out (gradient_as_bucket_view false is PyTorch DDP's option alone; FSDP refuses
// CUDA graphs and mixture-of-experts models). Tried on the scenario with the user's --set and
// the kind's defaults, and again under 1F1B where the search chooses the schedule (the
// zero-bubble and DualPipe schedules refuse some kinds). When none loads, all of them, to be
// refused with a reason.
std::vector<std::string> admitted_kinds(const SweepSpec& spec, const Scenario& base) {
  // The searched kinds the framework has (has_dp_kind), and the scenario's own (HSDP) beside them.
  std::vector<std::string> universe;
  for (const auto& kind : kDpKinds)
    if (has_dp_kind(base.training.framework, *io::dp_kind_named(kind))) universe.push_back(kind);
  if (std::ranges::find(universe, to_string(base.data_parallel.kind)) == universe.end())
    universe.emplace_back(to_string(base.data_parallel.kind));
  std::vector<std::string> out;
  const std::vector<std::string> from = base_sets(spec);
  for (const auto& kind : universe) {
    auto sets = from;
    sets.push_back("data_parallel.kind=" + kind);
    for (auto& reset : kind_defaults(spec, base, kind)) sets.push_back(std::move(reset));
    bool admitted = loads(spec, sets);
    if (!admitted && !user_sets(spec, "parallel.schedule")) {
      sets.emplace_back("parallel.schedule=1f1b");
      sets.emplace_back("parallel.virtual_stages=1");
      admitted = loads(spec, sets);
    }
    if (admitted) out.push_back(kind);
  }
  return out.empty() ? universe : out;
}

// The first stage's data-parallel kinds: ZeRO-1 everywhere; without pipeline parallelism,
// where they are how such jobs fit, ZeRO-2 (it shards the gradients too, so it fits where
// ZeRO-1 needs recompute or does not fit) and FSDP; the rest, ZeRO-2 on pipelined layouts
// among it, is refined later (tried at every stage count, ZeRO-2 doubled what a large search
// simulates: Llama 3 70B on 512 GB200, 2,251 configurations in place of 1,174, the same winner). Of those,
// the ones the scenario admits and the layout's stages run (DeepSpeed's pipeline engine: no
// ZeRO-2); where the framework has no ZeRO-1 (PyTorch, torchtitan), FSDP; if it admits none of
// these, the ones it does.
std::vector<std::string> layout_kinds(const SweepSpec& spec, int pp, Framework framework,
                                      const std::vector<std::string>& admitted) {
  if (user_sets(spec, "data_parallel.kind")) return {""};
  std::vector<std::string> preferred =
      pp == 1 ? std::vector<std::string>{"zero1", "zero2", "fsdp"} : std::vector<std::string>{"zero1"};
  if (!has_dp_kind(framework, DpKind::zero1)) preferred = {"fsdp"};
  std::vector<std::string> out;
  for (const auto& kind : preferred)
    if (std::ranges::find(admitted, kind) != admitted.end() && runs_kind_at(kind, framework, pp)) out.push_back(kind);
  return out.empty() ? admitted : out;
}

bool sequence_parallel(const SweepSpec& spec, const Scenario& base, int tp) {
  return user_sets(spec, "parallel.sequence_parallel") ? base.parallel.sequence_parallel : tp > 1;
}

// Transformer Engine's TP overlap where it can run: sequence parallelism, every TP group of the
// --gpus ranks inside one NVLink domain, an NVLink fabric and a model it is simulated with
// (io::runs_tp_overlap: not "pcie", not latent attention, a framework that has the overlap).
bool overlap_possible(const SweepSpec& spec, const Scenario& base, int tp) {
  return !user_sets(spec, "tensor_parallel.comm_overlap") && tp > 1 && tp <= base.cluster.domain_gpus() &&
         io::tp_straddle(tp, spec.gpus, base.cluster.domain_gpus()).first < 0 && sequence_parallel(spec, base, tp) &&
         io::runs_tp_overlap(base);
}

// A mixture of experts' expert layout: its EP and ETP degrees, 0 where the search leaves the key
// to the scenario (a dense model, or a degree the user's --set fixes).
struct ExpertDegrees {
  int ep = 0, etp = 0;
};

// Expert tensor parallelism for a mixture of experts the user's --set leaves it to: 1 (each
// expert whole on its GPU, as the recipes of Megatron-Bridge run them) and the layout's TP
// (Megatron-Core's default, expert_tensor_parallel_size = tensor_model_parallel_size), where etp
// divides the experts' width (each expert's fc1 and fc2 split over its ranks). torchtitan runs
// these two alone. 0: the scenario's own (etp fixed by --set).
std::vector<int> expert_tp_degrees(const SweepSpec& spec, const Scenario& base, int tp) {
  if (user_sets(spec, "parallel.etp")) return {0};
  std::vector<int> out{1};
  const long long width = base.model.moe.expert_ffn_hidden;
  if (tp > 1 && width % tp == 0) out.push_back(tp);
  return out;
}

// Expert parallelism for a mixture of experts the user's --set leaves it to, at each ETP degree
// expert_tp_degrees gives: powers of two that divide the experts and, with ETP, the stage's
// tp·cp·dp ranks (Megatron-Core folds the expert groups of ep·etp ranks out of them): 1, the
// largest whose expert group stays inside one NVLink domain, and the largest of all. An ETP
// degree whose ep·etp no stage's ranks hold (a fixed ep) is left out, unless no degree is left.
// {0, 0}: a dense model.
std::vector<ExpertDegrees> expert_degrees(const SweepSpec& spec, const Scenario& base, const Degrees& d) {
  const int experts = base.model.moe.experts;
  if (experts == 0) return {{}};
  const long long ranks = static_cast<long long>(d.tp) * d.cp * d.dp;
  const bool fixed_ep = user_sets(spec, "parallel.ep");
  std::vector<ExpertDegrees> out;
  for (const int etp_set : expert_tp_degrees(spec, base, d.tp)) {
    const long long etp = etp_set > 0 ? etp_set : std::max(base.parallel.etp, 1);
    if (fixed_ep) {
      if (ranks % (base.parallel.ep * etp) == 0) out.push_back({0, etp_set});
      continue;
    }
    int inside = 1;
    int most = 1;
    for (int e = 2; e <= experts; e *= 2) {
      if (experts % e != 0 || ranks % (e * etp) != 0) continue;
      most = e;
      if (e * etp <= base.cluster.domain_gpus()) inside = e;
    }
    std::vector<int> eps{1};
    for (int e : {inside, most})
      if (e != eps.back()) eps.push_back(e);
    for (int e : eps) out.push_back({e, etp_set});
  }
  if (out.empty()) out.push_back({0, expert_tp_degrees(spec, base, d.tp).front()});
  return out;
}

// Whether the scenario runs the expert layout `e` (io::runs_expert_degree at its ETP degree).
bool runs_experts(const Scenario& base, const ExpertDegrees& e) {
  if (e.ep == 0) return true;
  Scenario s = base;
  if (e.etp > 0) s.parallel.etp = e.etp;
  return io::runs_expert_degree(s, e.ep);
}

Candidate layout(const SweepSpec& spec, const Scenario& base, const Degrees& d, long long mb) {
  Candidate c;
  c.sets.push_back(fmt::format("parallel.tp={}", d.tp));
  c.sets.push_back(fmt::format("parallel.pp={}", d.pp));
  c.sets.push_back(fmt::format("parallel.cp={}", d.cp));
  c.sets.push_back(fmt::format("parallel.dp={}", d.dp));
  if (!user_sets(spec, "parallel.sequence_parallel"))
    c.sets.push_back(fmt::format("parallel.sequence_parallel={}", d.tp > 1));
  c.sets.push_back(fmt::format("training.micro_batch={}", mb));
  // TP overlap on where it can run, off elsewhere (the scenario's own may be on).
  if (overlap_possible(spec, base, d.tp))
    c.sets.push_back("tensor_parallel.comm_overlap=true");
  else if (!user_sets(spec, "tensor_parallel.comm_overlap"))
    c.sets.push_back("tensor_parallel.comm_overlap=false");
  // The scenario's uneven split of layers over stages is for its own stage count: where the
  // search chooses the stages, they split the layers evenly.
  if (!user_sets(spec, "parallel.pp") && !user_sets(spec, "parallel.stage_layers"))
    c.sets.push_back("parallel.stage_layers=[]");
  return c;
}

void note_fixed(const SweepSpec& spec, BestResult& result) {
  for (const char* key : {"parallel.tp", "parallel.pp", "parallel.cp", "parallel.ep", "parallel.etp",
                          "training.micro_batch", "parallel.schedule", "parallel.virtual_stages", "training.precision",
                          "data_parallel.kind", "data_parallel.bucket_cap_mb", "data_parallel.bucket_parameters",
                          "tensor_parallel.comm_overlap", "training.recompute"})
    if (user_sets(spec, key)) result.fixed.emplace_back(key);
  check_search_sets(spec.sets);
}

std::vector<std::string> precisions(const SweepSpec& spec, const SearchSpace& space) {
  if (space.precisions.empty() || user_sets(spec, "training.precision")) return {""};
  return space.precisions;
}

// Keys the second stage chooses again.
bool secondary(const std::string& set) {
  for (const char* key :
       {"data_parallel.kind=", "data_parallel.bucket_cap_mb=", "tensor_parallel.comm_overlap=", "training.recompute=",
        "training.recompute_modules=", "data_parallel.fsdp_version=", "data_parallel.reshard_after_forward=",
        "data_parallel.forward_prefetch=", "data_parallel.backward_prefetch=",
        "data_parallel.max_inflight_all_gathers=", "data_parallel.shard_group=", "data_parallel.first_bucket_mb=",
        "data_parallel.bucket_parameters=", "data_parallel.overlap_grad_reduce=", "data_parallel.overlap_param_gather=",
        "data_parallel.gradient_as_bucket_view="})
    if (set.starts_with(key)) return true;
  return false;
}

}  // namespace

void check_search_sets(const std::vector<std::string>& sets) {
  if (std::ranges::any_of(sets, [](const std::string& s) { return s.starts_with("parallel.dp="); }))
    throw InputError("--set", "parallel.dp", "cannot be combined with --gpus, which derives parallel.dp");
}

std::string value_of(const Candidate& c, const std::string& key, const std::string& otherwise) {
  for (const auto& s : c.sets)
    if (s.starts_with(key + "=")) return s.substr(key.size() + 1);
  return otherwise;
}

namespace {

// Throws where the micro-batch the user's --set fixes does not divide the global batch: every
// layout is refused then, whatever DP degree it has, and the scenario's own DP degree (the
// refusal of its own layout) is not what the search tried. `tries` are the layouts base_sets
// tried: one of them loads with a micro-batch of 1 unless something else is refused too.
void refuse_micro_batch(const SweepSpec& spec, const std::vector<std::vector<std::string>>& tries) {
  const std::string given = value_of(Candidate{spec.sets, {}}, "training.micro_batch", "");
  long long micro_batch = 0;
  try {
    std::size_t used = 0;
    micro_batch = std::stoll(given, &used);
    if (used != given.size() || micro_batch < 1) return;
  } catch (const std::exception&) {
    return;  // not a count: loading says so
  }
  for (auto sets : tries) {
    std::erase_if(sets, [](const std::string& s) { return s.starts_with("training.micro_batch="); });
    sets.emplace_back("training.micro_batch=1");
    long long global_batch = 0;
    try {
      global_batch = io::load_scenario(spec.scenario, sets).training.global_batch;
    } catch (const InputError&) {
      continue;
    }
    if (global_batch % micro_batch == 0) return;
    throw InputError("--set", "training.micro_batch",
                     fmt::format("the global batch of {} sequences (training.global_batch) does not split into "
                                 "micro-batches of {}: no data-parallel degree the search tries divides it "
                                 "(micro_batch times DP must divide the global batch)",
                                 global_batch, micro_batch));
  }
}

// Throws where the plainest layout base_sets tries (one replica, one sequence a micro-batch,
// unless the user's --set fixes them: the most micro-batches per replica any layout has) is
// refused for its global batch: a pipeline schedule the user fixes with more micro-batches per
// replica than the batch gives (the interleaved schedule's multiple of pp, DualPipe's even
// number of at least 2·pp) refuses every layout then, whatever its memory, and the scenario's
// own layout is not what the search tried.
void refuse_schedule_batch(const SweepSpec& spec, const std::vector<std::string>& plainest) {
  try {
    (void)io::load_scenario(spec.scenario, plainest);
  } catch (const InputError& e) {
    if (e.where() == "training.global_batch" || e.where() == "/training/global_batch") throw;
  }
}

}  // namespace

std::vector<std::string> base_sets(const SweepSpec& spec) {
  std::vector<std::vector<std::string>> tries{spec.sets};
  for (const char* key : {"parallel.sequence_parallel", "parallel.tp"}) {
    if (user_sets(spec, key)) continue;
    tries.push_back(spec.sets);
    tries.back().emplace_back(std::string(key) + (std::string(key) == "parallel.tp" ? "=1" : "=true"));
    // At TP 1 the scenario's sequence parallelism would be refused (it needs a TP group).
    if (std::string(key) == "parallel.tp" && !user_sets(spec, "parallel.sequence_parallel"))
      tries.back().emplace_back("parallel.sequence_parallel=false");
  }
  // Last, every layout key the search replaces at its plainest (one GPU's layout, one sequence a
  // micro-batch, 1F1B, an even split), but those the user --set: the scenario's own layout may
  // not fit its job (a global batch its micro-batch and DP do not divide, an interleaved
  // schedule --set on a scenario of one stage) while the layouts searched do.
  // A schedule the user fixes needs stages, and interleaving (fixed, or a virtual-stage count
  // above 1 fixed) two chunks a stage.
  const Candidate user{spec.sets, {}};
  const std::string schedule = value_of(user, "parallel.schedule", "1f1b");
  const bool interleaved = schedule == "interleaved" || value_of(user, "parallel.virtual_stages", "1") != "1";
  const bool staged = schedule != "1f1b" || interleaved;
  tries.push_back(spec.sets);
  for (const char* set : {"parallel.tp=1", staged ? "parallel.pp=2" : "parallel.pp=1", "parallel.cp=1", "parallel.dp=1",
                          "parallel.ep=1", "parallel.etp=1", "parallel.sequence_parallel=false",
                          interleaved ? "parallel.schedule=interleaved" : "parallel.schedule=1f1b",
                          interleaved ? "parallel.virtual_stages=2" : "parallel.virtual_stages=1",
                          "parallel.stage_layers=[]", "training.micro_batch=1", "tensor_parallel.comm_overlap=false"}) {
    const std::string key(set, std::string_view(set).find('='));
    if (!user_sets(spec, key)) tries.back().emplace_back(set);
  }
  const std::vector<std::string> plainest = tries.back();
  // A mixture of experts that needs an EP all-to-all (Megatron-Core's EP overlap, the flex
  // dispatcher) or EP ranks to spread an imbalance over refuses one GPU's layout: at its
  // plainest it runs on two GPUs, one expert group of two.
  if (!user_sets(spec, "parallel.ep") && !user_sets(spec, "parallel.dp")) {
    tries.push_back(tries.back());
    for (auto& set : tries.back()) {
      if (set == "parallel.dp=1") set = "parallel.dp=2";
      if (set == "parallel.ep=1") set = "parallel.ep=2";
    }
  }
  std::optional<InputError> refused;
  for (const auto& sets : tries) {
    try {
      (void)io::load_scenario(spec.scenario, sets);
      return sets;
    } catch (const InputError& e) {
      if (!refused) refused = e;
    }
  }
  // A --set that only a searched precision takes (training.fp8_scaling current beside the
  // scenario's bf16): the base at the first searched precision that loads, as a file of that
  // precision would give it; the precisions it refuses are then noted as not searched.
  if (!user_sets(spec, "training.precision"))
    for (const std::string& precision : spec.precisions)
      for (auto sets : tries) {
        sets.push_back("training.precision=" + precision);
        try {
          (void)io::load_scenario(spec.scenario, sets);
          return sets;
        } catch (const InputError&) {
        }
      }
  refuse_micro_batch(spec, tries);
  refuse_schedule_batch(spec, plainest);
  throw *refused;
}

Scenario load_base(const SweepSpec& spec) { return io::load_scenario(spec.scenario, base_sets(spec)); }

namespace {

constexpr const char* kLayoutKeys[] = {"parallel.tp", "parallel.pp", "parallel.cp", "training.micro_batch"};

// Why a GPU count has no layout: it splits into no TP, PP and CP degrees, or the global batch
// splits into whole micro-batches over none of the DP degrees the splits leave.
std::string no_layout_reason(const SweepSpec& spec, const Scenario& base, std::vector<long long> dps,
                             bool batch_splits) {
  const std::string fixed =
      std::any_of(std::begin(kLayoutKeys), std::end(kLayoutKeys), [&](const char* k) { return user_sets(spec, k); })
          ? " (with the degrees and micro-batch --set fixes)"
          : "";
  if (dps.empty())
    return fmt::format(
        "{} GPUs split into no TP degree (dividing the {} heads, inside an NVLink domain of {} GPUs), PP "
        "degree (dividing the {} layers) and CP degree{}",
        spec.gpus, base.model.heads, base.cluster.domain_gpus(), base.model.layers, fixed);
  if (batch_splits) return {};
  std::sort(dps.begin(), dps.end());
  std::string sizes = "1";  // the micro-batches micro_batches() tries
  for (long long mb = 2; mb <= kMaxMicroBatch; mb *= 2)
    sizes += fmt::format("{}{}", 2 * mb > kMaxMicroBatch ? " or " : ", ", mb);
  return fmt::format(
      "the global batch of {} sequences splits into micro-batches of {} sequences over none of the "
      "data-parallel degrees {} GPUs leave ({}){}: another GPU count, or a global batch that one of "
      "them times a micro-batch divides",
      base.training.global_batch, sizes, spec.gpus, fmt::join(dps, ", "), fixed);
}

}  // namespace

std::vector<Candidate> enumerate_layouts(const SweepSpec& spec, const SearchSpace& space, BestResult& result) {
  const Scenario base = load_base(spec);
  const long long n = spec.gpus;
  note_fixed(spec, result);
  const std::vector<std::string> kinds = admitted_kinds(spec, base);
  // TP stays inside one NVLink domain (72 GPUs on an NVL72 rack, the node elsewhere).
  // A schedule other than 1F1B, or virtual stages, the user fixes need stages (one stage has
  // no pipeline to schedule, and is refused with them): one stage is not tried.
  const bool staged = (user_sets(spec, "parallel.schedule") && base.parallel.schedule != Schedule::one_f_one_b) ||
                      (user_sets(spec, "parallel.virtual_stages") && base.parallel.virtual_stages > 1);
  const std::vector<int> tps = user_sets(spec, "parallel.tp")
                                   ? std::vector<int>{base.parallel.tp}
                                   : divisors(std::min<long long>(base.cluster.domain_gpus(), base.model.heads), n);
  // The layouts the scenario runs, and those whose schedule, micro-batches per replica or EP
  // degree it refuses (io::runs_pipeline, io::fills_schedule, io::runs_expert_degree): searched
  // only where it runs none, for validation to refuse them with its reason.
  std::vector<Candidate> out;
  std::vector<Candidate> unrun;
  std::vector<long long> dps;  // the DP degrees the splits leave, and whether the batch splits over one
  bool batch_splits = false;
  for (const int tp : tps) {
    if (!io::splits_over_tp(base.model, tp) || n % tp != 0) continue;
    const std::vector<int> pps =
        user_sets(spec, "parallel.pp") ? std::vector<int>{base.parallel.pp} : divisors(base.model.layers, n / tp);
    for (const int pp : pps) {
      if (n % (static_cast<long long>(tp) * pp) != 0 || (staged && pp == 1)) continue;
      const std::vector<Pipeline> pipelines = schedules(spec, base, pp);
      for (const int cp : context_degrees(spec, base, tp, n / (static_cast<long long>(tp) * pp))) {
        const long long model = static_cast<long long>(tp) * pp * cp;
        if (n % model != 0) continue;
        const Degrees d{tp, pp, cp, n / model};
        if (std::find(dps.begin(), dps.end(), d.dp) == dps.end()) dps.push_back(d.dp);
        batch_splits = batch_splits || !micro_batches(spec, base, d.dp).empty();
        for (const long long mb : micro_batches(spec, base, d.dp))
          for (const Pipeline& schedule : pipelines)
            for (const auto& precision : precisions(spec, space))
              for (const auto& kind : layout_kinds(spec, pp, base.training.framework, kinds))
                for (const ExpertDegrees& e : expert_degrees(spec, base, d)) {
                  Candidate c = layout(spec, base, d, mb);
                  if (e.ep > 0) c.sets.push_back(fmt::format("parallel.ep={}", e.ep));
                  if (e.etp > 0) c.sets.push_back(fmt::format("parallel.etp={}", e.etp));
                  c.sets.insert(c.sets.end(), schedule.sets.begin(), schedule.sets.end());
                  if (!precision.empty()) c.sets.push_back("training.precision=" + precision);
                  if (!kind.empty()) c.sets.push_back("data_parallel.kind=" + kind);
                  for (auto& reset : kind_defaults(spec, base, kind)) c.sets.push_back(std::move(reset));
                  // More layer passes than a step simulates (io::layer_passes) is left for
                  // validation to refuse, as a layout the model does not run.
                  const bool overlap =
                      overlap_possible(spec, base, d.tp) ||
                      (user_sets(spec, "tensor_parallel.comm_overlap") && base.tensor_parallel.comm_overlap);
                  const double passes =
                      io::layer_passes(static_cast<double>(base.training.global_batch) / static_cast<double>(mb * d.dp),
                                       base.model.layers, d.cp, d.tp, overlap);
                  // The micro-batches per replica the schedule needs (io::fills_schedule).
                  const std::optional<DpKind> dp_kind =
                      kind.empty() ? std::optional<DpKind>(base.data_parallel.kind) : io::dp_kind_named(kind);
                  const bool pytorch = dp_kind && pytorch_pipelining(base.training.framework, *dp_kind, pp);
                  const bool filled =
                      io::fills_schedule(schedule.schedule, pp, base.training.global_batch / (mb * d.dp), pytorch);
                  const bool runs = schedule.runs && filled && runs_experts(base, e) && passes <= io::kMaxLayerPasses;
                  (runs ? out : unrun).push_back(std::move(c));
                }
      }
    }
  }
  if (out.empty()) out = std::move(unrun);
  if (out.empty()) result.no_layout = no_layout_reason(spec, base, dps, batch_splits);
  return out;
}

std::vector<Candidate> refinements(const SweepSpec& spec, const Candidate& layout) {
  Candidate core;
  for (const auto& s : layout.sets)
    if (!secondary(s)) core.sets.push_back(s);
  const Scenario base = load_base(spec);
  const int tp = std::stoi(value_of(layout, "parallel.tp", "1"));
  const int pp = std::stoi(value_of(layout, "parallel.pp", std::to_string(base.parallel.pp)));
  const auto kinds = user_sets(spec, "data_parallel.kind") ? std::vector<std::string>{""} : admitted_kinds(spec, base);
  // The layout's own overlap setting is secondary, so it is set again here: both where TP
  // overlap can run, off where it cannot.
  const auto overlaps = overlap_possible(spec, base, tp)                   ? std::vector<std::string>{"true", "false"}
                        : !user_sets(spec, "tensor_parallel.comm_overlap") ? std::vector<std::string>{"false"}
                                                                           : std::vector<std::string>{""};
  const long long dp = std::stoll(value_of(layout, "parallel.dp", std::to_string(base.parallel.dp)));
  std::vector<Candidate> out;
  for (const auto& kind : kinds) {
    if (!runs_kind_at(kind, base.training.framework, pp)) continue;
    const std::optional<DpKind> k =
        kind.empty() ? std::optional<DpKind>(base.data_parallel.kind) : io::dp_kind_named(kind);
    // The bucket key this kind sizes its buckets by, and the sizes tried ("": the default).
    std::string key;
    std::vector<std::string> sizes{""};
    if (!user_sets(spec, "data_parallel.bucket_cap_mb") && takes_bucket_size(k, base.training.framework, pp)) {
      key = "data_parallel.bucket_cap_mb";
      sizes = kBuckets;
    } else if (!user_sets(spec, "data_parallel.bucket_parameters") && k &&
               buckets_in_parameters(*k, base.training.framework, pp)) {
      key = "data_parallel.bucket_parameters";
      sizes = bucket_parameter_sizes(base, dp);
    }
    for (const auto& bucket : sizes)
      for (const auto& overlap : overlaps) {
        Candidate c = core;
        if (!kind.empty()) c.sets.push_back("data_parallel.kind=" + kind);
        for (auto& reset : kind_defaults(spec, base, kind)) {
          if (bucket.empty() || !reset.starts_with(key + "=")) c.sets.push_back(std::move(reset));
        }
        if (!bucket.empty()) c.sets.push_back(key + "=" + bucket);
        if (!overlap.empty()) c.sets.push_back("tensor_parallel.comm_overlap=" + overlap);
        out.push_back(std::move(c));
      }
  }
  return out;
}

}  // namespace stepsim::sweep
