// `stepsim plan`: which cluster to buy. For each candidate cluster (with its GPU-hour price) and
// GPU count, the best-configuration search's fastest layout, and what training a token budget
// on it takes: time, energy, cost, with the band the validation errors put around them.
#pragma once

#include <boost/json/value.hpp>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sweep/best.hpp"
#include "sweep/validation_band.hpp"

namespace stepsim::sweep {

struct PlanCluster {
  std::string name;           // a cluster preset; of the scenario's own cluster, its name once searched
  double gpu_hour_price = 0;  // 0: none given
  bool own = false;           // the scenario's own cluster, planned where no --cluster is given
};

struct PlanSpec {
  io::ScenarioInput scenario;     // the job: model, sequence, global batch (path "": the default)
  std::vector<std::string> sets;  // --set, applied on every cluster
  // The keys the scenario's own cluster section writes but its preset and node count, as
  // "cluster.KEY=VALUE" (io::carried_cluster_sets): applied on every --cluster preset before
  // --set, as --set would apply them.
  std::vector<std::string> cluster_sets;
  double tokens = 0;              // the token budget; 0: none
  double deadline_days = 0;       // 0: none
  std::string deadline_text;      // --deadline as given, for its errors
  std::vector<int> gpus;          // the GPU counts to plan for
  std::vector<PlanCluster> clusters;
  std::vector<std::string> precisions;  // allowed; empty: the scenario's own
  std::size_t max_layouts = 0;          // SearchSpace::max_layouts of each search
};

// Layouts simulated per cluster and GPU count when the request does not say, fastest bound
// first: five clusters in about a minute on two cores.
inline constexpr long long kDefaultPlanLayouts = 96;

// A plan as the command line's flags (and Python's stepsim.plan(), whose arguments stand for
// them) give it, as text; make_plan_spec checks each and names the flag in its errors.
struct PlanRequest {
  io::ScenarioInput scenario;                   // read once (io::read_scenario_input)
  // --model (a model preset), --tokens, --deadline, --gpus: absent when not given; given, ""
  // is refused (it names nothing).
  std::optional<std::string> model, tokens, deadline, gpus;
  std::vector<std::string> clusters;            // --cluster: NAME[@PRICE], or comma-separated lists
  std::vector<std::string> precisions;          // --precision: names, or comma-separated lists
  std::vector<std::string> sets;                // --set
  long long max_layouts = kDefaultPlanLayouts;  // --max-layouts
};

// The error of a --max-layouts value (`text`, as given) that is not a whole number from 0 to
// 1000000.
InputError max_layouts_error(const std::string& text);

// Without --cluster, a scenario given (a file, an example, text) is planned on its own cluster;
// with --cluster, its cluster section's keys carry to every cluster (PlanSpec::cluster_sets)
// but its GPU, which would replace every cluster's own: refused, naming the key.
PlanSpec make_plan_spec(const PlanRequest& request);

// One cluster at one GPU count.
struct PlanRow {
  PlanCluster cluster;
  std::string gpu;  // the cluster's GPU preset
  int gpus = 0;
  BestResult search;                // what was searched; ranked empty: nothing fits
  std::optional<Candidate> layout;  // the fastest, absent when nothing fits
  std::optional<Report> report;
  ValidationBand band;
  double step_tokens = 0;  // tokens one step trains: the global batch times the sequence length
  // The budget's whole steps, ceil(tokens / step_tokens), at the step time; 0 without a budget.
  double train_days = 0;
  double energy_kwh = 0;  // GPU boards, for the budget's steps
  double cost = 0;        // for the budget's steps; 0 without a price
  // The whole steps finished by the deadline, floor(deadline / step time), times step_tokens (0
  // where not one step finishes by it); absent without a deadline.
  std::optional<double> deadline_tokens;
  bool pareto = false;         // no other row trains the budget both sooner and for less
  double search_s = 0;         // wall-clock seconds the search took
  // The layout's gradient bucket size as its kind sizes it ("25 MiB", "40 M parameters"); ""
  // where none applies (FSDP, DeepSpeed's pipeline engine).
  std::string bucket;
  // Parameters per bucket where the kind sizes its buckets so (Megatron-Core's, DeepSpeed
  // ZeRO's), the default resolved; 0 for the others.
  long long bucket_parameters = 0;
};

// "NAME" or "NAME@PRICE" (a price per GPU-hour above 0, at most cluster.gpu_hour_price's
// range); InputError naming `flag` otherwise. plan's --cluster and simulate's --compare-cluster
// both take it.
PlanCluster parse_cluster_spec(const std::string& text, const std::string& flag);
// parse_cluster_spec for --cluster.
PlanCluster parse_plan_cluster(const std::string& text);
// The items of comma-separated lists of clusters ("a@1,b" and "c": a@1, b, c), in order, empty
// items kept for parse_cluster_spec to refuse.
std::vector<std::string> split_cluster_lists(const std::vector<std::string>& lists);

// --precision as the search takes it (sweep --best and plan): comma-separated lists of
// training precisions, each checked and kept once, in order. Refused beside a --set (of
// `sets`) of training.precision, which fixes the precision the list would search.
std::vector<std::string> parse_precisions(const std::vector<std::string>& lists, const std::vector<std::string>& sets);

// A token count: a number with an optional K, M, B (or G) or T suffix ("1T", "300B", "1.5e12").
double parse_tokens(const std::string& text, const std::string& flag);

// Searches every cluster at every GPU count (clusters in the order given); `progress` hears a
// line as each search ends. A deadline shorter than one step on every row that has a layout is
// refused (InputError naming --deadline), as a budget below one step is.
std::vector<PlanRow> run_plan(const PlanSpec& spec, unsigned jobs, const std::function<void(const PlanRow&)>& progress);

// A row's layout key by key ("parallel.tp" -> 4, "tensor_parallel.comm_overlap" -> false), from
// the simulated scenario itself: the value its resolved JSON holds (null for a row without a
// layout).
boost::json::value layout_json(const PlanRow& row, const std::string& key);
// The same as text ("parallel.tp" -> "4"; "" for a row without a layout), as tables print it.
std::string layout_value(const PlanRow& row, const std::string& key);

}  // namespace stepsim::sweep
