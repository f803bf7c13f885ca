// Measured costs in place of modelled ones, and the α–β fit of a measured collective table.
#include "calibration/apply.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <map>

#include "stepsim/error.hpp"

namespace stepsim::calibration {
namespace {

collectives::Choice model_at(const ClusterSpec& cluster, const CollectivesSpec& forced, const CollectiveTable& t,
                             double bytes) {
  const collectives::Request r{
      t.op, Bytes(static_cast<std::int64_t>(std::llround(bytes))), {t.ranks, t.nodes, t.ranks_per_node}};
  return collectives::predict(cluster, forced, r);
}

// Scales bounded so that one odd measurement cannot make a collective free or endless.
double clamp_ratio(double r) { return std::isfinite(r) ? std::clamp(r, 0.05, 20.0) : 1.0; }

struct Corrections {
  double latency = 1, bandwidth = 1;
};

// What the table says about the model on the table's own shape: bandwidth from its largest
// size, when the model spends most of that time moving bytes; latency from its smallest,
// when the model spends most of that time in latency.
Corrections heuristic_corrections(const ClusterSpec& cluster, const CollectivesSpec& forced, const CollectiveTable& t) {
  Corrections c;
  const CollectivePoint& big = t.points.back();
  const collectives::Choice at_big = model_at(cluster, forced, t, big.bytes);
  const double big_bw_us = at_big.time().us() - at_big.latency.us();
  if (big_bw_us >= 0.5 * at_big.time().us()) {
    const double measured_bw_us = big.time_us - at_big.latency.us();
    if (measured_bw_us > 0) c.bandwidth = clamp_ratio(big_bw_us / measured_bw_us);
  }
  if (t.points.size() > 1) {
    const CollectivePoint& small = t.points.front();
    const collectives::Choice at_small = model_at(cluster, forced, t, small.bytes);
    const double lat_us = at_small.latency.us();
    if (lat_us > 0 && lat_us >= 0.5 * at_small.time().us()) {
      const double bw_us = (at_small.time().us() - lat_us) / c.bandwidth;
      c.latency = clamp_ratio((small.time_us - bw_us) / lat_us);
    }
  }
  return c;
}

// "fitted.json: fitted to trace rank0.json" for a file `calibrate from-trace` wrote.
std::string fitted_source(const Calibration& c) {
  if (c.provenance.sources.empty()) return c.source;
  const bool trace = c.provenance.command.starts_with("stepsim calibrate from-trace");
  return fmt::format("{}: fitted to {}{}", c.source, trace ? "trace " : "", fmt::join(c.provenance.sources, ", "));
}

boost::json::object& member_object(boost::json::object& o, const char* key) {
  boost::json::value& v = o[key];
  if (!v.is_object()) v.emplace_object();
  return v.as_object();
}

// The latency and bandwidth scales under which the model gives the measured time at both
// ends of the table: a · latency + b · bytes/algbw = measured at the smallest and at the
// largest size, so that the corrected model outside the table starts where the measurement
// ends (continuous at its edges). Where the two ends do not fix a and b (one point, both
// ends in one regime, or a scale of no physical sense), the heuristic of each end's ratio.
Corrections corrections(const ClusterSpec& cluster, const CollectivesSpec& forced, const CollectiveTable& t) {
  if (t.points.size() < 2) return heuristic_corrections(cluster, forced, t);
  const CollectivePoint& small = t.points.front();
  const CollectivePoint& big = t.points.back();
  const collectives::Choice at_small = model_at(cluster, forced, t, small.bytes);
  const collectives::Choice at_big = model_at(cluster, forced, t, big.bytes);
  const double ls = at_small.latency.us(), bs = at_small.time().us() - ls;
  const double lb = at_big.latency.us(), bb = at_big.time().us() - lb;
  const double det = ls * bb - lb * bs;
  if (!(std::abs(det) > 1e-9 * std::abs(ls * bb))) return heuristic_corrections(cluster, forced, t);
  const double a = (small.time_us * bb - big.time_us * bs) / det;
  const double b = (ls * big.time_us - lb * small.time_us) / det;
  if (!(a > 0 && b > 0) || clamp_ratio(a) != a || clamp_ratio(1 / b) != 1 / b)
    return heuristic_corrections(cluster, forced, t);
  return {a, 1 / b};
}

// One of a table's two run settings (algorithm or protocol) against the collectives'.
void check_setting(const Calibration& c, std::size_t i, const std::string& measured, const char* forced,
                   const char* what) {
  const std::string table = measured.empty() ? "auto" : measured;
  if (table == forced) return;
  const std::string where = fmt::format("/collectives/{}", i);
  if (measured.empty())
    throw InputError(c.source, where,
                     fmt::format("measured with NCCL's own choice of {0}, but the collectives are forced to {1} "
                                 "(collectives.{0}, --{0}): its times are not {1}'s (measure with {1} forced and "
                                 "give the table \"{0}\": \"{1}\", or let NCCL choose)",
                                 what, forced));
  if (std::string_view(forced) == "auto")
    throw InputError(c.source, where,
                     fmt::format("measured with {0} {1} forced, but NCCL chooses the collectives' {0} here (force "
                                 "collectives.{0} or --{0} to {1}, or measure with NCCL's own choice)",
                                 what, measured));
  throw InputError(c.source, where,
                   fmt::format("measured with {0} {1} forced, but the collectives are forced to {2} (collectives.{0}, "
                               "--{0})",
                               what, measured, forced));
}

}  // namespace

void check_measured_as(const Calibration& c, const CollectivesSpec& forced) {
  for (std::size_t i = 0; i < c.collectives.size(); ++i) {
    const CollectiveTable& t = c.collectives[i];
    check_setting(c, i, t.algorithm, collectives::to_string(forced.algorithm), "algorithm");
    check_setting(c, i, t.protocol, collectives::to_string(forced.protocol), "protocol");
  }
}

const char* to_string(Source s) {
  switch (s) {
    case Source::model:
      return "model";
    case Source::measured:
      return "measured";
    case Source::scaled:
      return "scaled";
  }
  return "model";
}

CalibratedChoice calibrate_collective(const MeasuredTables& tables, const ClusterSpec& cluster,
                                      const CollectivesSpec& forced, const collectives::Request& request,
                                      const std::string& dtype) {
  CalibratedChoice out{collectives::predict(cluster, forced, request), Source::model, nullptr};
  if (tables.empty()) return out;
  const auto& s = request.shape;
  collectives::Choice& c = out.choice;
  if (const CollectiveTable* t = tables.exact(request.op, s.ranks, s.nodes, s.ranks_per_node, dtype)) {
    if (const auto us = measured_us(*t, request.size.as_double())) {
      const double model_us = c.time().us();
      if (model_us > 0) {
        const double f = *us / model_us;
        c.latency = c.latency.scaled(f);
        if (c.algbw.positive()) c.algbw = c.algbw.scaled(1.0 / f);
        out.source = Source::measured;
        out.table = t;
        return out;
      }
    }
  }
  const CollectiveTable* ref = tables.reference(request.op, s.ranks, s.nodes, s.ranks_per_node, dtype);
  if (ref == nullptr) return out;
  const Corrections k = corrections(cluster, forced, *ref);
  c.latency = c.latency.scaled(k.latency);
  if (c.algbw.positive()) c.algbw = c.algbw.scaled(k.bandwidth);
  out.source = Source::scaled;
  out.table = ref;
  return out;
}

CalibratedTime calibrate_compute(const MeasuredTables& tables, const hardware::GpuModel& gpu,
                                 const workload::OpCost& op) {
  const Precision precision = gpu.dtype(op);
  std::optional<double> us;
  switch (op.cls) {
    case workload::OpClass::gemm:
      us = tables.gemm_us(op.m, op.n, op.k, op.flops, precision);
      break;
    case workload::OpClass::attention:
      us = tables.attention_us(op.flops, op.pass != workload::Pass::forward, precision);
      break;
    default:
      if (op.bytes.count() > 0) us = tables.memory_us(op.bytes.as_double());
      break;
  }
  if (!us) return {gpu.duration(op), false};
  return {max(Time::from_us(*us), gpu.spec().efficiency.kernel_min), true};
}

std::vector<CalibratedValue> values_in_force(const MeasuredTables& tables, const GpuSpec& preset) {
  std::map<std::string, CalibratedValue> in_force;
  std::optional<CalibratedValue> measured_slowdown;
  for (const Calibration& c : tables.files()) {
    for (const EfficiencyField& f : kEfficiencyFields)
      if (const auto& v = c.compute.efficiency.*f.fitted)
        in_force[f.key] = {f.key, *v, preset.efficiency.*f.preset, fitted_source(c)};
    if (c.compute.comm_slowdown)
      measured_slowdown = {"comm_slowdown", *c.compute.comm_slowdown, preset.efficiency.comm_slowdown,
                           c.source + ": measured beside a running collective"};
    if (c.compute.launch_overhead_us)
      in_force["kernel_launch_us"] = {"kernel_launch_us", *c.compute.launch_overhead_us, preset.kernel_launch.us(),
                                      c.source + ": measured"};
  }
  if (measured_slowdown) in_force["comm_slowdown"] = *measured_slowdown;
  std::vector<CalibratedValue> out;
  for (const EfficiencyField& f : kEfficiencyFields)
    if (const auto it = in_force.find(f.key); it != in_force.end()) out.push_back(it->second);
  if (const auto it = in_force.find("kernel_launch_us"); it != in_force.end()) out.push_back(it->second);
  return out;
}

GpuSpec calibrated_gpu(const MeasuredTables& tables, GpuSpec gpu) {
  for (const CalibratedValue& v : values_in_force(tables, gpu)) {
    if (v.key == "kernel_launch_us") gpu.kernel_launch = Time::from_us(v.value);
    // A slowdown measured beside a running collective wins over the one derived from shares.
    if (v.key == "comm_slowdown") gpu.efficiency.derived_comm_slowdown = false;
    for (const EfficiencyField& f : kEfficiencyFields)
      if (v.key == f.key) gpu.efficiency.*f.preset = v.value;
  }
  return gpu;
}

std::string config_in_force(const std::string& resolved_json, const std::vector<CalibratedValue>& values) {
  boost::json::parse_options options;
  options.allow_comments = true;
  options.allow_trailing_commas = true;
  boost::system::error_code ec;
  boost::json::value config = boost::json::parse(resolved_json, ec, {}, options);
  if (ec || !config.is_object()) return resolved_json;
  boost::json::object& gpu = member_object(member_object(config.as_object(), "cluster"), "gpu");
  for (const CalibratedValue& v : values) {
    if (v.key == "kernel_launch_us")
      gpu["kernel_launch"] = fmt::format("{} us", v.value);
    else
      member_object(gpu, "efficiency")[v.key] = v.value;
  }
  return boost::json::serialize(config);
}

AlphaBeta fit_alpha_beta(const std::vector<CollectivePoint>& points, CollOp op, int ranks, double fallback_alpha_us) {
  AlphaBeta f;
  const double factor = collectives::bus_factor(op, ranks);
  auto finish = [&](double alpha, double inv_bw) {
    f.alpha_us = alpha;
    f.algbw_gbps = inv_bw > 0 ? 1e-3 / inv_bw : 0;
    f.busbw_gbps = f.algbw_gbps * factor;
    for (const auto& p : points)
      f.max_error = std::max(f.max_error, std::abs(alpha + p.bytes * inv_bw - p.time_us) / p.time_us);
    return f;
  };
  if (points.empty()) return f;
  if (points.size() == 1) {
    f.alpha_fitted = false;
    const double alpha = std::min(fallback_alpha_us, 0.5 * points[0].time_us);
    return finish(alpha, (points[0].time_us - alpha) / points[0].bytes);
  }
  // α is the latency of the smallest message, algbw the bandwidth of the largest: the two
  // ends of the curve where each term dominates (a least-squares line through all sizes
  // would trade the bandwidth for the protocol changes in the middle). Two rounds remove
  // each term's share from the other end.
  const CollectivePoint& small = points.front();
  const CollectivePoint& big = points.back();
  double alpha = small.time_us, x = big.time_us / big.bytes;
  for (int round = 0; round < 2; ++round) {
    alpha = std::max(0.0, small.time_us - small.bytes * x);
    x = std::max(1e-15, (big.time_us - std::min(alpha, 0.5 * big.time_us)) / big.bytes);
  }
  return finish(alpha, x);
}

}  // namespace stepsim::calibration
