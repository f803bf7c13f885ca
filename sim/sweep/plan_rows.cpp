// `stepsim plan`'s rows: the fields of each in column order, as CSV cells or JSON values.
#include "sweep/plan_rows.hpp"

#include <fmt/format.h>
#include <boost/json.hpp>

#include <functional>
#include <ostream>

#include "sweep/rows.hpp"

namespace stepsim::sweep {
namespace {

constexpr double GiB = 1073741824.0;

// ok: a layout fits; "no layout": none is enumerated for this GPU count (the reason says why);
// "none fits": every layout is refused or too large.
const char* status_of(const PlanRow& r) {
  if (r.report) return "ok";
  return r.search.no_layout.empty() ? "none fits" : "no layout";
}

std::string reason_of(const PlanRow& r) {
  const BestResult& s = r.search;
  if (!s.no_layout.empty()) return s.no_layout;
  std::string text = fmt::format("{} configurations: {} do not fit in memory, {} refused by validation",
                                 s.candidates + s.pruned + s.unsearched, s.oom, s.invalid);
  if (!s.first_refusal.empty()) text += " (the first: " + s.first_refusal + ")";
  return text;
}

// The rows' fields, in column order: name and value (a JSON value, written as text in CSV).
std::vector<std::pair<std::string, boost::json::value>> fields(const PlanRow& r) {
  // A figure that is not known is null (an empty CSV cell), never 0: the price of a cluster
  // given without one, the budget's days, energy and cost without a token budget, the energy
  // without the GPU's board power, the cost without a price, the deadline's tokens without one.
  // The deadline's 0 tokens where not one step finishes by it are known, and a number.
  const auto known = [](bool given, double v) { return given ? boost::json::value(v) : boost::json::value(nullptr); };
  std::vector<std::pair<std::string, boost::json::value>> f = {
      {"cluster", boost::json::value(r.cluster.name)},
      {"gpu", boost::json::value(r.gpu)},
      {"gpus", r.gpus},
      {"gpu_hour_price", known(r.cluster.gpu_hour_price > 0, r.cluster.gpu_hour_price)},
      {"status", boost::json::value(status_of(r))},
  };
  const auto add = [&](const char* name, boost::json::value v) { f.emplace_back(name, r.report ? v : nullptr); };
  // Layout keys as the scenario holds them: numbers, true or false, names (a sweep's rows write
  // a varied key so too).
  const auto key = [&](const char* name, const char* k) { add(name, layout_json(r, k)); };
  key("tp", "parallel.tp");
  key("pp", "parallel.pp");
  key("cp", "parallel.cp");
  key("dp", "parallel.dp");
  key("micro_batch", "training.micro_batch");
  key("schedule", "parallel.schedule");
  key("virtual_stages", "parallel.virtual_stages");
  key("dp_kind", "data_parallel.kind");
  // PyTorch DDP's bucket size, in MiB: a ddp row's whose buckets are not sized in parameters
  // (Megatron-Core's) and are made at all (not under DeepSpeed's pipeline engine); the other
  // kinds have none.
  const bool pytorch_buckets =
      r.report && layout_value(r, "data_parallel.kind") == "ddp" && r.bucket_parameters == 0 && !r.bucket.empty();
  add("bucket_cap_mb", pytorch_buckets ? layout_json(r, "data_parallel.bucket_cap_mb") : nullptr);
  key("tp_comm_overlap", "tensor_parallel.comm_overlap");
  key("precision", "training.precision");
  key("recompute", "training.recompute");
  key("ep", "parallel.ep");
  key("etp", "parallel.etp");
  add("bucket_parameters", r.bucket_parameters > 0 ? boost::json::value(r.bucket_parameters) : nullptr);
  const Report* rep = r.report ? &*r.report : nullptr;
  const auto num = [&](const char* name, const std::function<double(const Report&)>& of, bool given = true) {
    add(name, rep && given ? boost::json::value(of(*rep)) : nullptr);
  };
  const bool budget = r.train_days > 0;
  const bool energy = budget && rep != nullptr && rep->cost.gpu_power_w > 0;
  const bool cost = budget && r.cluster.gpu_hour_price > 0;
  const double m = r.band.mape;
  num("step_time_s", [](const Report& x) { return x.step_time_s; });
  num("step_time_low_s", [&](const Report& x) { return x.step_time_s * (1 - m); });
  num("step_time_high_s", [&](const Report& x) { return x.step_time_s * (1 + m); });
  num("tokens_per_s_per_gpu", [&](const Report& x) { return x.throughput.tokens_per_s / r.gpus; });
  num("mfu", [](const Report& x) { return x.throughput.mfu; });
  num("exposed_fraction_of_step", [](const Report& x) { return x.overlap.exposed_fraction_of_step; });
  num("memory_in_use_gib", [](const Report& x) { return x.memory_bytes.device / GiB; });
  num("memory_capacity_gib", [](const Report& x) { return x.memory_bytes.capacity / GiB; });
  num(
      "train_days", [&](const Report&) { return r.train_days; }, budget);
  num(
      "train_days_low", [&](const Report&) { return r.train_days * (1 - m); }, budget);
  num(
      "train_days_high", [&](const Report&) { return r.train_days * (1 + m); }, budget);
  num(
      "energy_mwh", [&](const Report&) { return r.energy_kwh / 1000; }, energy);
  num(
      "energy_mwh_low", [&](const Report&) { return r.energy_kwh / 1000 * (1 - m); }, energy);
  num(
      "energy_mwh_high", [&](const Report&) { return r.energy_kwh / 1000 * (1 + m); }, energy);
  num(
      "cost", [&](const Report&) { return r.cost; }, cost);
  num(
      "cost_low", [&](const Report&) { return r.cost * (1 - m); }, cost);
  num(
      "cost_high", [&](const Report&) { return r.cost * (1 + m); }, cost);
  // The price's cost of a million tokens at the step time, budget or not: the Pareto table's
  // cost with a deadline alone.
  num(
      "cost_per_mtoken", [](const Report& x) { return x.cost.cost_per_mtoken; }, r.cluster.gpu_hour_price > 0);
  num(
      "deadline_tokens", [&](const Report&) { return r.deadline_tokens.value_or(0); }, r.deadline_tokens.has_value());
  f.emplace_back("pareto", r.pareto);
  f.emplace_back("band_mape", m);
  f.emplace_back("band_runs", r.band.runs);
  f.emplace_back("band_own_gpu", r.band.own_gpu);
  f.emplace_back("search_s", r.search_s);
  f.emplace_back("reason", r.report ? boost::json::value(nullptr) : boost::json::value(reason_of(r)));
  return f;
}

std::string csv_cell(const boost::json::value& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return std::string(v.as_string());
  if (v.is_double()) return number_text(v.as_double());  // every digit, as a sweep's rows
  return boost::json::serialize(v);
}

}  // namespace

void write_plan_csv(const std::vector<PlanRow>& rows, std::ostream& out) {
  if (rows.empty()) return;
  std::vector<std::string> header;
  for (const auto& [name, v] : fields(rows.front())) header.push_back(name);
  out << csv_line(header);
  for (const PlanRow& r : rows) {
    std::vector<std::string> cells;
    for (const auto& [name, v] : fields(r)) cells.push_back(csv_cell(v));
    out << csv_line(cells);
  }
}

void write_plan_json(const std::vector<PlanRow>& rows, std::ostream& out) {
  boost::json::array array;
  for (const PlanRow& r : rows) {
    boost::json::object o;
    for (auto& [name, v] : fields(r)) o[name] = std::move(v);
    array.push_back(std::move(o));
  }
  out << boost::json::serialize(array) << "\n";
}

}  // namespace stepsim::sweep
