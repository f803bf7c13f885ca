// `stepsim plan`'s search: the best-configuration search once per cluster and GPU count, and
// the token budget's time, energy and cost on the fastest layout found.
#include "sweep/plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>

#include "io/on_cluster.hpp"
#include "io/presets.hpp"
#include "io/reader.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/grad_buckets.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"
#include "stepsim/text.hpp"
#include "sweep/axes.hpp"

namespace stepsim::sweep {
namespace {

constexpr double kSecondsPerDay = 86400;

bool sized_in_parameters(const Scenario& s) {
  return buckets_in_parameters(s.data_parallel.kind, s.training.framework, s.parallel.pp);
}

// The bucket size as the layout's kind takes it: Megatron-Core's in parameters, PyTorch DDP's
// in MiB; none for FSDP and HSDP, nor under DeepSpeed's pipeline engine (it reduces after the
// schedule).
std::string bucket_text(const Scenario& s) {
  const DpKind kind = s.data_parallel.kind;
  if (kind == DpKind::fsdp || kind == DpKind::hsdp || deepspeed_pipeline_engine(s)) return "";
  if (sized_in_parameters(s)) return parallelism::megatron_bucket_text(s);
  return fmt::format("{:g} MiB", s.data_parallel.bucket_cap_mb);
}

SweepSpec search_spec(const PlanSpec& spec, const PlanCluster& cluster, int gpus) {
  SweepSpec s;
  s.scenario = spec.scenario;
  // A --cluster preset with the keys the scenario's own cluster section writes, so that they and
  // the user's --set cluster.KEY change it (io::sets_on_cluster); the scenario's own cluster as
  // it is; the node count derived from the layout again; the price of NAME@PRICE over a --set or
  // scenario one.
  if (cluster.own) {
    s.sets = spec.sets;
    s.sets.push_back("cluster.nodes=0");
  } else {
    s.sets = io::sets_on_cluster(cluster.name, spec.cluster_sets, spec.sets);
  }
  if (cluster.gpu_hour_price > 0) s.sets.push_back(fmt::format("cluster.gpu_hour_price={}", cluster.gpu_hour_price));
  s.gpus = gpus;
  s.precisions = spec.precisions;
  return s;
}

// The budget's figures on the row's layout, in whole steps: a step trains the global batch's
// tokens at once, so a budget takes ceil(tokens / tokens per step) steps and a deadline trains
// floor(deadline / step time) of them. Energy and cost are those steps' (board power, price).
void add_budget(const PlanSpec& spec, const Scenario& chosen, PlanRow& row) {
  const Report& r = *row.report;
  row.step_tokens = static_cast<double>(chosen.training.global_batch) * static_cast<double>(chosen.model.seq_len);
  if (spec.tokens > 0 && r.step_time_s > 0) {
    const double steps = std::ceil(spec.tokens / row.step_tokens);
    row.train_days = steps * r.step_time_s / kSecondsPerDay;
    row.energy_kwh = steps * r.cost.energy_per_step_j / 3.6e6;
    row.cost = steps * r.cost.cost_per_step;
  }
  if (spec.deadline_days > 0 && r.step_time_s > 0)
    row.deadline_tokens = std::floor(spec.deadline_days * kSecondsPerDay / r.step_time_s) * row.step_tokens;
}

// A deadline no row finishes one step by trains nothing anywhere: refused, as a budget below one
// step is, rather than reported as 0 tokens (a row that finishes none beside others that do
// reports its 0).
void check_deadline(const PlanSpec& spec, const std::vector<PlanRow>& rows) {
  const PlanRow* fastest = nullptr;
  for (const PlanRow& r : rows) {
    if (!r.report) continue;
    if (r.deadline_tokens.value_or(0) > 0) return;
    if (fastest == nullptr || r.report->step_time_s < fastest->report->step_time_s) fastest = &r;
  }
  if (fastest == nullptr || spec.deadline_days <= 0) return;
  throw InputError("--deadline", spec.deadline_text,
                   fmt::format("is {:g} s, less than one step of the job on every cluster and GPU count (the fastest, "
                               "{} on {} GPUs, takes {:.6g} s a step for {:.0f} tokens): expected a deadline of at "
                               "least one step",
                               spec.deadline_days * kSecondsPerDay, fastest->cluster.name, fastest->gpus,
                               fastest->report->step_time_s, fastest->step_tokens));
}

// `e`, a refusal of a key the scenario's cluster section carried to a --cluster preset (not one
// the user's --set gave) said of the scenario, where "--set" names it.
InputError of_carried_key(const PlanSpec& spec, const InputError& e) {
  return io::carried_key_error(e, spec.scenario, spec.cluster_sets, spec.sets);
}

// `body`, its refusals said of the cluster: it came from --cluster, not from a key the user
// wrote; a key the scenario's cluster section carried to it is the scenario's. The scenario's
// own cluster's refusals are the scenario's as they stand.
template <class Body>
void on_cluster(const PlanSpec& spec, const PlanCluster& cluster, const Body& body) {
  try {
    body();
  } catch (const InputError& error) {
    if (cluster.own) throw;
    const InputError e = of_carried_key(spec, error);
    const bool preset = e.file() == "--set" && e.where() == "cluster";
    throw InputError(
        "--cluster", cluster.name,
        preset ? e.message() : e.file() + ": " + (e.where().empty() ? "" : e.where() + ": ") + e.message());
  }
}

PlanRow plan_one(const PlanSpec& spec, const PlanCluster& cluster, int gpus, unsigned jobs) {
  PlanRow row;
  row.cluster = cluster;
  row.gpus = gpus;
  const SweepSpec s = search_spec(spec, cluster, gpus);
  on_cluster(spec, cluster, [&] {
    const Scenario base = load_base(s);
    if (cluster.own) row.cluster.name = base.cluster.name;
    row.gpu = base.cluster.gpu.name;
    row.band = validation_band(base.cluster.gpu);
    // The price the search's reports use: NAME@PRICE's, or --set cluster.gpu_hour_price's.
    row.cluster.gpu_hour_price = base.cluster.gpu_hour_price;
    const auto start = std::chrono::steady_clock::now();
    SearchSpace space;
    space.precisions = spec.precisions;
    space.max_layouts = spec.max_layouts;
    row.search = search_best(s, jobs, false, space);
    row.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  if (row.search.ranked.empty()) return row;
  row.layout = row.search.ranked.front().first;
  row.report = row.search.ranked.front().second;
  std::vector<std::string> sets = s.sets;
  sets.insert(sets.end(), row.layout->sets.begin(), row.layout->sets.end());
  const Scenario chosen = io::load_scenario(s.scenario, sets);
  row.bucket = bucket_text(chosen);
  if (sized_in_parameters(chosen)) row.bucket_parameters = parallelism::megatron_bucket_elements(chosen);
  add_budget(spec, chosen, row);
  return row;
}

// A row is on the front when no other row trains at least as fast for no more money and is
// better in one of them. Seconds and cost per token order rows as the budget's days and cost
// do (every row takes the same whole steps for it); with a deadline alone, "as fast" is as many
// tokens by the deadline, which the table prints.
// A row without a price has no cost to compare: the front is the priced rows', and only when
// no row has a price is it the fastest rows by time alone.
void mark_pareto(const PlanSpec& spec, std::vector<PlanRow>& rows) {
  const bool by_deadline = spec.tokens <= 0;
  const auto time_of = [by_deadline](const PlanRow& r) {
    return by_deadline ? -r.deadline_tokens.value_or(0) : 1 / r.report->throughput.tokens_per_s;
  };
  const auto cost_of = [](const PlanRow& r) { return r.report->cost.cost_per_mtoken; };
  const auto priced = [](const PlanRow& r) { return r.cluster.gpu_hour_price > 0; };
  const bool any_priced =
      std::any_of(rows.begin(), rows.end(), [&](const PlanRow& r) { return r.report && priced(r); });
  for (PlanRow& a : rows) {
    if (!a.report || (any_priced && !priced(a))) continue;
    a.pareto = true;
    for (const PlanRow& b : rows) {
      if (!b.report || &a == &b || (any_priced && !priced(b))) continue;
      const bool no_worse = time_of(b) <= time_of(a) && (!any_priced || cost_of(b) <= cost_of(a));
      const bool better = time_of(b) < time_of(a) || (any_priced && cost_of(b) < cost_of(a));
      if (no_worse && better) a.pareto = false;
    }
  }
}

// The items of comma-separated lists, in order (empty items kept, for the check to refuse).
std::vector<std::string> split(const std::vector<std::string>& lists) {
  std::vector<std::string> out;
  for (const std::string& list : lists) {
    std::size_t from = 0;
    while (from <= list.size()) {
      const auto comma = list.find(',', from);
      out.push_back(list.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  return out;
}

std::vector<int> gpu_counts(const std::string& text) {
  std::vector<std::string> values;
  try {
    values = parse_axis("gpus=" + text).values;
  } catch (const InputError& e) {
    throw InputError("--gpus", text, e.message());
  }
  std::vector<int> out;
  for (const std::string& v : values) {
    const std::optional<long long> n = number_of<long long>(v);
    if (!n || *n < 1 || *n > kMaxGpus)
      throw InputError("--gpus", text,
                       fmt::format("expected GPU counts from 1 to {}, e.g. 256, 128,256 or 64:1024:x2", kMaxGpus));
    out.push_back(static_cast<int>(*n));
  }
  return out;
}

double days_of(const std::string& text) {
  const auto days = number_of<double>(text);
  if (!days || !(*days > 0) || *days > 36500)
    throw InputError("--deadline", text, "expected a number of days above 0 (at most 36500)");
  return *days;
}

std::string json_text(const boost::json::value& v) {
  if (v.is_string()) return std::string(v.as_string());
  if (v.is_bool()) return v.as_bool() ? "true" : "false";
  if (v.is_int64()) return std::to_string(v.as_int64());
  if (v.is_uint64()) return std::to_string(v.as_uint64());
  if (v.is_double()) return fmt::format("{:g}", v.as_double());
  return boost::json::serialize(v);
}

}  // namespace

PlanCluster parse_cluster_spec(const std::string& text, const std::string& flag) {
  const auto at = text.find('@');
  PlanCluster c{text.substr(0, at), 0};
  if (c.name.empty()) throw InputError(flag, text, "expected NAME or NAME@PRICE, e.g. dgx-b200@5.5");
  if (at == std::string::npos) return c;
  const auto price = number_of<double>(text.substr(at + 1));
  if (!price || *price <= 0)
    throw InputError(flag, text, "expected a price per GPU-hour above 0 after '@', e.g. dgx-b200@5.5");
  if (*price > ClusterSpec::kMaxGpuHourPrice)
    throw InputError(flag, text,
                     fmt::format("expected a price per GPU-hour of at most {:.0f} after '@' (cluster.gpu_hour_price's "
                                 "range), got {:g}",
                                 ClusterSpec::kMaxGpuHourPrice, *price));
  c.gpu_hour_price = *price;
  return c;
}

PlanCluster parse_plan_cluster(const std::string& text) { return parse_cluster_spec(text, "--cluster"); }

std::vector<std::string> split_cluster_lists(const std::vector<std::string>& lists) { return split(lists); }

double parse_tokens(const std::string& text, const std::string& flag) {
  static constexpr std::pair<char, double> kSuffixes[] = {{'K', 1e3}, {'M', 1e6}, {'B', 1e9}, {'G', 1e9}, {'T', 1e12}};
  double scale = 1;
  std::string digits = text;
  for (const auto& [suffix, factor] : kSuffixes)
    if (!digits.empty() && std::toupper(static_cast<unsigned char>(digits.back())) == suffix) {
      scale = factor;
      digits.pop_back();
      break;
    }
  const auto v = number_of<double>(digits);
  if (!v || *v * scale < 1 || *v * scale > 1e18 || std::floor(*v * scale) != *v * scale)
    throw InputError(flag, text,
                     "expected a whole number of tokens, at least 1, such as 1T, 300B or 1.5e12 (at most 1e18)");
  return *v * scale;
}

std::vector<std::string> parse_precisions(const std::vector<std::string>& lists, const std::vector<std::string>& sets) {
  // A precision --set fixes would leave --precision's list unsearched.
  for (const std::string& set : sets)
    if (!lists.empty() && set.starts_with("training.precision="))
      throw InputError("--precision", fmt::format("{}", fmt::join(lists, ",")),
                       fmt::format("cannot be combined with --set {}, which fixes the precision that --precision "
                                   "searches: give one of them",
                                   set));
  std::vector<std::string> out;
  for (const std::string& p : split(lists)) {
    if (!precision_named(p)) throw InputError("--precision", p, "expected bf16, fp16, fp8, tf32, fp32, mxfp8 or nvfp4");
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);  // each searched once
  }
  return out;
}

InputError max_layouts_error(const std::string& text) {
  return InputError("--max-layouts", text, "expected a number of layouts from 0 (every one) to 1000000");
}

PlanSpec make_plan_spec(const PlanRequest& request) {
  PlanSpec spec;
  spec.scenario = request.scenario;
  if (request.model && request.model->empty())
    throw InputError("<command line>", "--model",
                     "expected a model preset name, got '' (leave --model out for the scenario's model)");
  if (request.model) spec.sets.push_back("model=" + *request.model);
  spec.sets.insert(spec.sets.end(), request.sets.begin(), request.sets.end());
  // The model --model names, said of --model (loading it would say --set model).
  if (request.model) (void)io::find_preset("models", *request.model, io::Reader("--model", true));
  if (!request.tokens && !request.deadline)
    throw InputError("<command line>", "--tokens",
                     "expected a token budget (--tokens N) or a deadline (--deadline DAYS)");
  // Given, each is read, "" too (it is no number).
  if (request.tokens) spec.tokens = parse_tokens(*request.tokens, "--tokens");
  if (request.deadline) spec.deadline_days = days_of(*request.deadline);
  if (request.deadline) spec.deadline_text = *request.deadline;
  if (!request.gpus) throw InputError("<command line>", "--gpus", "expected the GPU count(s) to plan for");
  if (request.gpus->empty())
    throw InputError(
        "<command line>", "--gpus",
        fmt::format("expected GPU counts from 1 to {}, e.g. 256, 128,256 or 64:1024:x2, got ''", kMaxGpus));
  spec.gpus = gpu_counts(*request.gpus);
  for (const std::string& set : spec.sets) {
    if (set.starts_with("cluster="))
      throw InputError("--set", set.substr(0, set.find('=')),
                       "plan takes its clusters from --cluster (NAME or NAME@PRICE, repeatable)");
    if (set.starts_with("cluster.nodes="))
      throw InputError("--set", "cluster.nodes", "plan derives each cluster's node count from the GPU count (--gpus)");
  }
  check_search_sets(spec.sets);
  const std::vector<std::string_view> presets = io::preset_names("clusters");
  for (const std::string& c : split(request.clusters)) {
    PlanCluster cluster = parse_plan_cluster(c);
    // Every name checked before any search runs.
    if (std::find(presets.begin(), presets.end(), cluster.name) == presets.end()) {
      const bool digits = cluster.name.find_first_not_of("0123456789") == std::string::npos;
      throw InputError(
          "--cluster", c,
          fmt::format("unknown cluster preset '{}' (expected one of {}){}", cluster.name, fmt::join(presets, ", "),
                      digits ? "; commas separate clusters, and a price's decimal point is '.'" : ""));
    }
    spec.clusters.push_back(std::move(cluster));
  }
  // Without --cluster, the scenario's own cluster (the embedded default's without a scenario);
  // with it, the keys of the scenario's cluster section carry to each but the preset
  // (--cluster's) and the node count (--gpus'), and a GPU of its own, which would replace each
  // cluster's, is refused.
  if (spec.clusters.empty()) spec.clusters.push_back(PlanCluster{"", 0, true});
  if (!spec.clusters.front().own)
    spec.cluster_sets =
        io::carried_cluster_sets(spec.scenario, spec.sets, "--cluster", "plan its cluster alone (without --cluster)");
  if (request.max_layouts < 0 || request.max_layouts > 1000000)
    throw max_layouts_error(std::to_string(request.max_layouts));
  spec.max_layouts = static_cast<std::size_t>(request.max_layouts);
  spec.precisions = parse_precisions(request.precisions, spec.sets);
  // A price given both ways would leave one unused: --set cluster.gpu_hour_price prices every
  // cluster given without @PRICE, and a cluster with both is refused.
  for (const std::string& set : spec.sets)
    if (set.starts_with("cluster.gpu_hour_price="))
      for (const std::string& c : split(request.clusters))
        if (c.find('@') != std::string::npos)
          throw InputError("--cluster", c,
                           fmt::format("gives a price per GPU-hour and --set {} gives another: give each cluster's "
                                       "price once, with @PRICE or with --set cluster.gpu_hour_price for every "
                                       "cluster without @PRICE",
                                       set));
  return spec;
}

std::vector<PlanRow> run_plan(const PlanSpec& spec, unsigned jobs,
                              const std::function<void(const PlanRow&)>& progress) {
  // The job itself (scenario, --model, --set) is checked once, before any search, on the first
  // cluster: its errors are its own, not a cluster's.
  if (!spec.clusters.empty() && !spec.gpus.empty()) {
    Scenario job;
    try {
      job = load_base(search_spec(spec, spec.clusters.front(), spec.gpus.front()));
    } catch (const InputError& e) {
      throw of_carried_key(spec, e);
    }
    // A budget of less than one step trains nothing: a step takes the global batch's tokens
    // on every cluster.
    const double step_tokens = static_cast<double>(job.training.global_batch) * static_cast<double>(job.model.seq_len);
    if (spec.tokens > 0 && spec.tokens < step_tokens)
      throw InputError("--tokens", fmt::format("{:.0f}", spec.tokens),
                       fmt::format("is less than one step of the job ({:.0f} tokens: a global batch of {} sequences "
                                   "of {}): expected a budget of at least one step",
                                   step_tokens, job.training.global_batch, job.model.seq_len));
  }
  // The calibration files, on every cluster before any search: a file refused on a cluster is
  // refused for each of its layouts alike (measured on another GPU, beyond its links), an
  // error of the request rather than a cluster on which nothing fits.
  for (const PlanCluster& cluster : spec.clusters)
    if (!spec.gpus.empty())
      on_cluster(spec, cluster, [&] { check_calibration(search_spec(spec, cluster, spec.gpus.front())); });
  // The precisions --precision allows, likewise: a cluster whose GPU runs none of them has no
  // layout to search at any GPU count, which is the request's error, not "none fits".
  for (const PlanCluster& cluster : spec.clusters)
    if (!spec.gpus.empty())
      on_cluster(spec, cluster,
                 [&] { check_precisions(search_spec(spec, cluster, spec.gpus.front()), spec.precisions); });
  std::vector<PlanRow> rows;
  for (const PlanCluster& cluster : spec.clusters)
    for (const int gpus : spec.gpus) {
      rows.push_back(plan_one(spec, cluster, gpus, jobs));
      if (progress) progress(rows.back());
    }
  if (spec.deadline_days > 0) check_deadline(spec, rows);
  mark_pareto(spec, rows);
  return rows;
}

boost::json::value layout_json(const PlanRow& row, const std::string& key) {
  if (!row.report) return nullptr;
  const boost::json::value config = boost::json::parse(row.report->config_json);
  const boost::json::value* v = &config;
  std::size_t from = 0;
  while (v != nullptr && from <= key.size()) {
    const auto dot = key.find('.', from);
    const std::string part = key.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    v = v->is_object() ? v->as_object().if_contains(part) : nullptr;
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  STEPSIM_CHECK(v != nullptr, "the report's config has no " + key);
  return *v;
}

std::string layout_value(const PlanRow& row, const std::string& key) {
  return row.report ? json_text(layout_json(row, key)) : "";
}

}  // namespace stepsim::sweep
