// `stepsim plan`'s tables. Bands are the step time's validation error carried to the
// time and cost of the budget, which are proportional to it.
#include "cli/plan_output.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>

namespace stepsim::cli {
namespace {

using sweep::PlanRow;

constexpr double GiB = 1073741824.0;

std::string layout_text(const PlanRow& r) {
  const auto v = [&](const char* key) { return sweep::layout_value(r, key); };
  const std::string pp = v("parallel.pp");
  std::string schedule;
  if (pp != "1")
    schedule = v("parallel.schedule") == "interleaved"
                   ? fmt::format(" (interleaved, {} virtual stages)", v("parallel.virtual_stages"))
                   : " (" + v("parallel.schedule") + ")";
  const std::string kind = v("data_parallel.kind");
  // A mixture of experts: its EP and ETP degrees (the config's model.moe.experts is 0 for a dense
  // model).
  const std::string ep =
      v("model.moe.experts") == "0" ? "" : fmt::format(", EP {}, ETP {}", v("parallel.ep"), v("parallel.etp"));
  return fmt::format("TP {}, PP {}{}, CP {}, DP {}{}; micro-batch {}; {}{}; TP overlap {}; {}; recompute {}",
                     v("parallel.tp"), pp, schedule, v("parallel.cp"), v("parallel.dp"), ep, v("training.micro_batch"),
                     kind, r.bucket.empty() ? "" : ", bucket " + r.bucket,
                     v("tensor_parallel.comm_overlap") == "true" ? "on" : "off", v("training.precision"),
                     v("training.recompute"));
}

std::string money(double x) { return fmt::format("{:.0f}", x); }

// `x` to `decimals` decimals, or to three significant digits where those decimals would show
// fewer than two: a budget of 1e9 tokens of GPT 1.3B on 8 H100 is 0.0238 days and 0.00319 MWh,
// which one decimal printed as "0.0 days" and "0.0 MWh".
std::string figure(double x, int decimals) {
  if (x == 0 || std::abs(x) >= std::pow(10.0, 1 - decimals)) return fmt::format("{:.{}f}", x, decimals);
  return fmt::format("{:.3g}", x);
}

std::string band_of(double value, double mape, const std::function<std::string(double)>& text) {
  return fmt::format("{} ({} to {})", text(value), text(value * (1 - mape)), text(value * (1 + mape)));
}

// The tokens of the whole steps finished by the deadline; none where one step takes longer.
std::string deadline_text(const sweep::PlanSpec& spec, const PlanRow& r) {
  if (*r.deadline_tokens <= 0)
    return fmt::format(
        "0 tokens in {:g} days: one step ({:.0f} tokens) takes {:.3f} s, longer than the deadline's "
        "{:g} s",
        spec.deadline_days, r.step_tokens, r.report->step_time_s, spec.deadline_days * 86400);
  return fmt::format("{:.3g} tokens in {:g} days ({:.0f} whole steps){}", *r.deadline_tokens, spec.deadline_days,
                     *r.deadline_tokens / r.step_tokens,
                     spec.tokens <= 0                     ? ""
                     : r.train_days <= spec.deadline_days ? ": the budget fits"
                                                          : ": the budget does not fit");
}

void write_cluster(const sweep::PlanSpec& spec, const PlanRow& r, std::ostream& out) {
  const auto line = [&](const char* label, const std::string& text) {
    out << fmt::format("  {:<23}{}\n", label, text);
  };
  out << fmt::format("\n{}: {} x {}{}\n", r.cluster.name, r.gpus, r.gpu,
                     r.cluster.gpu_hour_price > 0 ? fmt::format(" at {:g} per GPU-hour", r.cluster.gpu_hour_price)
                                                  : std::string(", no price given"));
  line("search", fmt::format("{} configurations: {} refused by validation, {} do not fit, {} left out by the bound, "
                             "{} not simulated past --max-layouts, {} distinct results fit ({:.1f} s)",
                             r.search.candidates + r.search.pruned + r.search.unsearched, r.search.invalid,
                             r.search.oom, r.search.pruned, r.search.unsearched, r.search.ranked.size(), r.search_s));
  if (!r.search.unrun_precisions.empty())
    line("not searched", fmt::format("{}: {} does not run them", fmt::join(r.search.unrun_precisions, ", "), r.gpu));
  for (const std::string& refused : r.search.refused_precisions) line("not searched", refused);
  if (!r.report) {
    line("layout", r.search.no_layout.empty() ? "none fits on this many GPUs" : "none: " + r.search.no_layout);
    // As sweep --best says it: the reason of the first layout refused, which the others' often share.
    if (r.search.invalid > 0) line("first refused", r.search.first_refusal);
    return;
  }
  const Report& rep = *r.report;
  const double mape = r.band.mape;
  line("layout", layout_text(r));
  line("step time", band_of(rep.step_time_s, mape, [](double s) { return fmt::format("{:.3f} s", s); }));
  line("tokens/s per GPU", fmt::format("{:.0f}", rep.throughput.tokens_per_s / r.gpus));
  line("MFU", fmt::format("{:.1f} %", 100 * rep.throughput.mfu));
  line("exposed comm", fmt::format("{:.1f} % of the step ({:.3f} s)", 100 * rep.overlap.exposed_fraction_of_step,
                                   rep.breakdown_s.exposed_total()));
  line("memory headroom", fmt::format("{:.1f} GiB free of {:.1f} GiB ({:.1f} GiB in use at the peak)",
                                      (rep.memory_bytes.capacity - rep.memory_bytes.device) / GiB,
                                      rep.memory_bytes.capacity / GiB, rep.memory_bytes.device / GiB));
  if (spec.tokens > 0) {
    line("time to train", band_of(r.train_days, mape, [](double d) { return figure(d, 1) + " days"; }) +
                              fmt::format(" for {:g} tokens", spec.tokens));
    line("energy", rep.cost.gpu_power_w > 0
                       ? band_of(r.energy_kwh / 1000, mape, [](double e) { return figure(e, 1) + " MWh"; }) +
                             " (GPU boards at their rated power)"
                       : "- (the GPU preset has no board power)");
    line("cost", r.cluster.gpu_hour_price > 0 ? band_of(r.cost, mape, money) : "- (no price: --cluster NAME@PRICE)");
  }
  if (r.deadline_tokens) line("by the deadline", deadline_text(spec, r));
  line("band", fmt::format("+/- {:.1f} %: {}", 100 * mape, r.band.source));
}

void write_pareto(const sweep::PlanSpec& spec, const std::vector<PlanRow>& rows, std::ostream& out) {
  std::vector<const PlanRow*> found;
  for (const PlanRow& r : rows)
    if (r.report) found.push_back(&r);
  if (found.empty()) return;
  std::stable_sort(found.begin(), found.end(), [](const PlanRow* a, const PlanRow* b) {
    return a->report->throughput.tokens_per_s > b->report->throughput.tokens_per_s;
  });
  // With a budget: its days and cost (the rows' train_days and cost); with a deadline alone: the
  // tokens trained by it and the cost of a million tokens (deadline_tokens, cost_per_mtoken).
  const bool budget = spec.tokens > 0;
  out << (budget ? "\ncost against time to train, fastest first (* on the Pareto front: no other choice is both "
                   "faster and cheaper)\n"
                 : "\ncost per M tokens against tokens trained by the deadline, most first (* on the Pareto front: no "
                   "other choice trains more for less a token)\n");
  out << fmt::format("     {:<20} {:>6}  {:<9} {:>28}  {:>32}\n", "cluster", "GPUs", "precision",
                     budget ? "days to train (band)" : "tokens by the deadline",
                     budget ? "cost (band)" : "cost per M tokens");
  for (const PlanRow* r : found) {
    const double mape = r->band.mape;
    const std::string time = budget ? band_of(r->train_days, mape, [](double d) { return figure(d, 1); })
                                    : fmt::format("{:.3g}", r->deadline_tokens.value_or(0));
    const std::string cost = r->cluster.gpu_hour_price <= 0 ? "-"
                             : budget                       ? band_of(r->cost, mape, money)
                                                            : figure(r->report->cost.cost_per_mtoken, 3);
    out << fmt::format("  {}  {:<20} {:>6}  {:<9} {:>28}  {:>32}\n", r->pareto ? "*" : " ", r->cluster.name, r->gpus,
                       sweep::layout_value(*r, "training.precision"), time, cost);
  }
}

}  // namespace

void write_plan_tables(const sweep::PlanSpec& spec, const std::vector<PlanRow>& rows, std::ostream& out) {
  for (const PlanRow& r : rows) write_cluster(spec, r, out);
  write_pareto(spec, rows, out);
}

}  // namespace stepsim::cli
