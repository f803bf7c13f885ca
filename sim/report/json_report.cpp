// write_json(): the report of docs/report.md with exactly its field names, in a
// fixed key order, so that two runs give byte-identical files.
#include <boost/json.hpp>

#include "report/json_text.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"

namespace stepsim::report {
namespace {

constexpr CommKind kReportedKinds[] = {CommKind::tp, CommKind::cp,   CommKind::ep,
                                       CommKind::dp, CommKind::fsdp, CommKind::pp};

double of(const PerKind& per_kind, CommKind k) { return per_kind[static_cast<std::size_t>(k)]; }

// The six contract kinds; "other" only when communication of unknown kind (from a real
// trace) took time, so that no measured time disappears from the report.
boost::json::object per_kind_json(const PerKind& per_kind) {
  boost::json::object o;
  for (CommKind k : kReportedKinds) o[to_string(k)] = of(per_kind, k);
  if (of(per_kind, CommKind::other) > 0) o["other"] = of(per_kind, CommKind::other);
  return o;
}

boost::json::object throughput_json(const Throughput& t) {
  return {{"tokens_per_s", t.tokens_per_s},
          {"samples_per_s", t.samples_per_s},
          {"tflops_per_gpu", t.tflops_per_gpu},
          {"mfu", t.mfu},
          {"hardware_tflops_per_gpu", t.hardware_tflops_per_gpu},
          {"hfu", t.hfu}};
}

boost::json::object cost_json(const CostReport& c) {
  return {{"gpu_power_w", c.gpu_power_w},
          {"energy_per_step_j", c.energy_per_step_j},
          {"energy_per_mtoken_kwh", c.energy_per_mtoken_kwh},
          {"gpu_hour_price", c.gpu_hour_price},
          {"cost_per_step", c.cost_per_step},
          {"cost_per_mtoken", c.cost_per_mtoken}};
}

boost::json::object breakdown_json(const Breakdown& b) {
  return {{"compute", b.compute},
          {"exposed_comm", per_kind_json(b.exposed_comm)},
          {"bubble", b.bubble},
          {"optimizer", b.optimizer},
          {"other", b.other}};
}

boost::json::object memory_json(const MemoryReport& m) {
  return {{"peak", m.peak},
          {"params", m.params},
          {"grads", m.grads},
          {"optimizer", m.optimizer},
          {"activations", m.activations},
          {"buffers", m.buffers},
          {"reserved", m.reserved},
          {"device", m.device},
          {"headroom", m.headroom},
          {"capacity", m.capacity},
          {"fits", m.fits}};
}

boost::json::array stages_json(const std::vector<StageReport>& stages) {
  boost::json::array a;
  for (const StageReport& st : stages) {
    boost::json::object o;
    o["stage"] = st.stage;
    o["rank"] = st.rank;
    o["breakdown_s"] = breakdown_json(st.breakdown_s);
    o["compute_slowdown_s"] = st.compute_slowdown_s;
    o["comm_s"] = per_kind_json(st.comm_s);
    o["memory_bytes"] = memory_json(st.memory_bytes);
    a.push_back(std::move(o));
  }
  return a;
}

boost::json::object advice_json(const Report& r) {
  boost::json::array alternatives;
  for (const Advice& a : r.advice) {
    // The step a change gives is known only where it was simulated: null otherwise, never 0.
    const auto simulated = [&](double v) { return a.status == "ok" ? boost::json::value(v) : boost::json::value(); };
    alternatives.push_back({{"change", a.change},
                            {"why", a.why},
                            {"status", a.status},
                            {"step_time_s", simulated(a.step_time_s)},
                            {"exposed_fraction_of_step", simulated(a.exposed_fraction_of_step)}});
  }
  return {{"cause", r.advice_cause}, {"alternatives", std::move(alternatives)}};
}

boost::json::value config_json(const std::string& text) {
  boost::json::parse_options options;
  options.allow_comments = true;
  options.allow_trailing_commas = true;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text.empty() ? "{}" : text, ec, {}, options);
  STEPSIM_CHECK(!ec, "the report's config is not JSON: " + ec.message());
  return v;
}

boost::json::array notes_json(const std::vector<std::string>& notes) {
  boost::json::array a;
  for (const std::string& n : notes) a.emplace_back(n);
  return a;
}

boost::json::object calibration_json(const CalibrationReport& c) {
  boost::json::array files, measured, values, unused, not_measured;
  for (const auto& f : c.files) files.emplace_back(f);
  for (const auto& m : c.measured) measured.emplace_back(m);
  const auto value_json = [](const CalibratedValue& v) -> boost::json::value {
    return {{"key", v.key}, {"value", v.value}, {"preset", v.preset}, {"source", v.source}};
  };
  for (const auto& v : c.values) values.push_back(value_json(v));
  for (const auto& v : c.unused_values) unused.push_back(value_json(v));
  for (const auto& m : c.not_measured) not_measured.emplace_back(m);
  return {{"files", std::move(files)},
          {"compute_fraction", c.compute_fraction},
          {"comm_fraction", c.comm_fraction},
          {"comm_scaled_fraction", c.comm_scaled_fraction},
          {"step_fraction", c.step_fraction},
          {"measured", std::move(measured)},
          {"values", std::move(values)},
          {"unused_values", std::move(unused)},
          {"not_measured", std::move(not_measured)}};
}

boost::json::object spread_json(const RankSpread& s) {
  return {{"min", s.min},
          {"median", s.median},
          {"max", s.max},
          {"min_rank", rank_json(s.min_rank)},
          {"max_rank", rank_json(s.max_rank)}};
}

boost::json::object ranks_json(const RanksReport& r) {
  return {{"simulated", r.simulated},
          {"step_time_s", spread_json(r.step_time_s)},
          {"compute_s", spread_json(r.compute_s)},
          {"rendezvous_wait_s", per_kind_json(r.rendezvous_wait_s)},
          {"rendezvous_wait_max_s", per_kind_json(r.rendezvous_wait_max_s)},
          {"straggler",
           {{"rank", rank_json(r.straggler.rank)},
            {"caused_wait_s", r.straggler.caused_wait_s},
            {"cause", r.straggler.cause}}}};
}

boost::json::array compared_json(const std::vector<ComparedCluster>& compared) {
  boost::json::array a;
  for (const ComparedCluster& c : compared)
    a.push_back(boost::json::object{{"cluster", c.cluster},
                                    {"step_time_s", c.report->step_time_s},
                                    {"throughput", throughput_json(c.report->throughput)},
                                    {"exposed_fraction_of_step", c.report->overlap.exposed_fraction_of_step},
                                    {"memory_bytes", memory_json(c.report->memory_bytes)},
                                    {"cost", cost_json(c.report->cost)}});
  return a;
}

}  // namespace

void write_json(const Report& r, std::ostream& out) { write_json(r, {}, out); }

void write_json(const Report& r, const std::vector<ComparedCluster>& compared, std::ostream& out) {
  boost::json::object o;
  o["stepsim_version"] = r.stepsim_version;
  o["gpus"] = r.gpus;
  o["step_time_s"] = r.step_time_s;
  o["throughput"] = throughput_json(r.throughput);
  o["breakdown_s"] = breakdown_json(r.breakdown_s);
  o["comm_s"] = per_kind_json(r.comm_s);
  o["overlap"] = {{"hidden_fraction", r.overlap.hidden_fraction},
                  {"exposed_fraction_of_step", r.overlap.exposed_fraction_of_step}};
  o["memory_bytes"] = memory_json(r.memory_bytes);
  o["config"] = config_json(r.config_json);
  o["notes"] = notes_json(r.notes);
  if (!r.calibration.files.empty()) o["calibration"] = calibration_json(r.calibration);
  o["compute_slowdown_s"] = r.compute_slowdown_s;
  o["offload_wait_s"] = r.offload_wait_s;
  o["stages"] = stages_json(r.stages);
  o["cost"] = cost_json(r.cost);
  o["flop_convention"] = r.flop_convention;
  o["provenance"] = notes_json(r.provenance);
  o["advice"] = advice_json(r);
  o["ranks"] = ranks_json(r.ranks);
  if (!r.host.framework.empty())
    o["host"] = {{"framework", r.host.framework},
                 {"rank", r.host.rank},
                 {"cpu_issue_s", r.host.cpu_issue_s},
                 {"gpu_wait_s", r.host.gpu_wait_s},
                 {"gpu_wait_fraction_of_step", r.host.gpu_wait_fraction_of_step},
                 {"breakdown_gpu_wait_s", r.host.breakdown_gpu_wait_s}};
  if (!compared.empty()) o["compare_clusters"] = compared_json(compared);
  write_pretty_json(o, out);
}

}  // namespace stepsim::report
