// Measured costs in place of modelled ones, and the α–β fit of a measured collective table.
#include "calibration/apply.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <limits>
#include <map>

#include "stepsim/error.hpp"

namespace stepsim::calibration {
namespace {

// The model's time (us) of `bytes` on `shape`.
double model_us(const ClusterSpec& cluster, const CollectivesSpec& forced, CollOp op,
                const collectives::GroupShape& shape, double bytes) {
  const collectives::Request r{op, Bytes(static_cast<std::int64_t>(std::llround(bytes))), shape};
  return collectives::predict(cluster, forced, r).time().us();
}

collectives::GroupShape shape_of(const CollectiveTable& t) { return {t.ranks, t.nodes, t.ranks_per_node}; }

// The model's time of a collective split in two: its latency, the time of a one-byte message
// on the same shape, and the rest, the time its bytes take. Both grow with the size (the
// model's time does), unlike the choice's own latency and transfer: under the latency floor
// one gives way as the other grows, and a change of protocol trades one for the other.
struct ModelSplit {
  double latency_us = 0, transfer_us = 0;
};

ModelSplit split_at(const ClusterSpec& cluster, const CollectivesSpec& forced, CollOp op,
                    const collectives::GroupShape& shape, double bytes) {
  const double latency = model_us(cluster, forced, op, shape, 1);
  return {latency, std::max(0.0, model_us(cluster, forced, op, shape, bytes) - latency)};
}

// A scale the measurement gives, when it gives one: positive and finite. The measured times
// are checked against physics (the links' bound, at most a day), so no scale of any size is
// refused here: a fabric measured far slower than the model is what the model must follow.
bool usable_scale(double r) { return std::isfinite(r) && r > 0; }

// The measured table's correction of the model: its latency times `latency`, its transfer
// times `transfer`.
struct Corrections {
  double latency = 1, transfer = 1;
  // The corrected model's time (us) on the table's own shape at its smallest and largest
  // sizes, where the measurement takes over.
  double small_us = 0, big_us = 0;

  double us(const ModelSplit& m) const { return latency * m.latency_us + transfer * m.transfer_us; }
};

// What the table says about the model on the table's own shape: the scales under which the
// model gives the measured time at both ends of the table (a · latency + b · transfer =
// measured at the smallest and at the largest size), so that the corrected model outside the
// table starts where the measurement ends. Where the two ends do not fix both (one size, a
// model that takes as long at both ends, or a scale not above zero), each end's ratio: the
// transfer's at the largest size when the model spends most of that time moving bytes, then
// the latency's at the smallest when the model spends most of that time in latency.
Corrections corrections(const ClusterSpec& cluster, const CollectivesSpec& forced, const CollectiveTable& t) {
  const CollectivePoint& small = t.points.front();
  const CollectivePoint& big = t.points.back();
  const double l = model_us(cluster, forced, t.op, shape_of(t), 1);
  const ModelSplit at_small{l, std::max(0.0, model_us(cluster, forced, t.op, shape_of(t), small.bytes) - l)};
  const ModelSplit at_big{l, std::max(0.0, model_us(cluster, forced, t.op, shape_of(t), big.bytes) - l)};
  Corrections k;
  const double grows = at_big.transfer_us - at_small.transfer_us;
  const bool solvable = t.points.size() >= 2 && l > 0 && grows > 1e-9 * at_big.transfer_us;
  const double b = solvable ? (big.time_us - small.time_us) / grows : 0;
  const double a = solvable ? (small.time_us - b * at_small.transfer_us) / l : 0;
  if (usable_scale(a) && usable_scale(b)) {
    k.latency = a;
    k.transfer = b;
  } else {
    if (at_big.transfer_us >= 0.5 * (l + at_big.transfer_us) && usable_scale((big.time_us - l) / at_big.transfer_us))
      k.transfer = (big.time_us - l) / at_big.transfer_us;
    if (t.points.size() >= 2 && l > 0 && l >= 0.5 * (l + at_small.transfer_us) &&
        usable_scale((small.time_us - k.transfer * at_small.transfer_us) / l))
      k.latency = (small.time_us - k.transfer * at_small.transfer_us) / l;
  }
  k.small_us = k.us(at_small);
  k.big_us = k.us(at_big);
  return k;
}

// The time (us) of `bytes` on the table's own shape: measured inside its sizes; outside them
// the corrected model `corrected_us`, carried to the measured time at the nearer end (the
// scales of each end's ratio need not give it there) and bounded by it, so that the time
// neither jumps at the table's edges nor falls below the largest size's (or rises above the
// smallest's), however far the measurement is from the model.
double shape_us(const CollectiveTable& t, const Corrections& k, double bytes, double corrected_us) {
  if (const auto us = measured_us(t, bytes)) return *us;
  const bool above = bytes > t.points.back().bytes;
  const double edge_us = above ? t.points.back().time_us : t.points.front().time_us;
  const double edge_model_us = above ? k.big_us : k.small_us;
  const double us = edge_model_us > 0 ? corrected_us * edge_us / edge_model_us : corrected_us;
  return above ? std::max(us, edge_us) : std::min(us, edge_us);
}

// The choice's latency and bandwidth scaled alike so that it takes `us`, to the picosecond:
// its latency is what the transfer leaves, so that rounding cannot make a longer time shorter.
void set_time(collectives::Choice& c, double us) {
  const double f = us / c.time().us();
  if (c.algbw.positive()) c.algbw = c.algbw.scaled(1.0 / f);
  const Time transfer = c.algbw.positive() ? transfer_time(c.size, c.algbw) : Time::zero();
  c.latency = max(Time::zero(), Time::from_us(us) - transfer);
}

// The fastest algorithm bandwidth (GB/s) a member's own links carry `choice`'s bytes at, loaded
// as the simulation's flows load them (collectives::link_load): its NVLink port over the
// intra-node load, its share of its node's NICs over the cross-node load.
double links_algbw_gbps(const ClusterSpec& cluster, const collectives::Request& request,
                        const collectives::Choice& choice) {
  const collectives::LinkLoad load = collectives::link_load(request, choice);
  double limit = std::numeric_limits<double>::infinity();
  if (load.intra > 0) limit = std::min(limit, cluster.intra_node.bandwidth.gbytes_per_s() / load.intra);
  const double nic = cluster.inter_node.nic_bandwidth.gbytes_per_s() * cluster.inter_node.nics_per_node /
                     std::max(1, cluster.gpus_per_node);
  if (load.inter > 0 && nic > 0) limit = std::min(limit, nic / load.inter);
  return limit;
}

// The choice that takes `us`: the model's, its latency and bandwidth scaled to it, where its
// links carry that bandwidth. A time they cannot carry was not run as the model runs it (on two
// nodes NCCL's tree moves half of what the model's ring moves across them, and its busbw passes
// the NICs' line rate), and the simulation's flows would hold it to its links, slower than
// measured: the first other candidate whose links carry it, scaled alike, runs in its place.
// Where none does, the model's stays.
collectives::Choice carried(const ClusterSpec& cluster, const CollectivesSpec& forced,
                            const collectives::Request& request, collectives::Choice c, double us) {
  set_time(c, us);
  constexpr double kMargin = 1 + 1e-9;  // the rounding of the time to picoseconds
  if (!c.algbw.positive() || c.algbw.gbytes_per_s() <= links_algbw_gbps(cluster, request, c) * kMargin) return c;
  for (collectives::Choice other : collectives::candidates(cluster, forced, request)) {
    if (!(other.time() > Time::zero()) || !other.algbw.positive()) continue;
    set_time(other, us);
    if (other.algbw.gbytes_per_s() <= links_algbw_gbps(cluster, request, other) * kMargin) return other;
  }
  return c;
}

// Whether shape a is table b's shape grown (as many or more ranks, nodes and ranks on each
// node) or shrunk: a collective of one size takes longer, or less long, on it.
int growth(const collectives::GroupShape& a, const CollectiveTable& b) {
  if (a.ranks >= b.ranks && a.nodes >= b.nodes && a.ranks_per_node >= b.ranks_per_node) return 1;
  if (a.ranks <= b.ranks && a.nodes <= b.nodes && a.ranks_per_node <= b.ranks_per_node) return -1;
  return 0;
}

// A file `calibrate from-trace` wrote.
bool from_trace(const Calibration& c) { return c.provenance.command.starts_with("stepsim calibrate from-trace"); }

// "fitted.json: fitted to trace rank0.json" for a file `calibrate from-trace` wrote.
std::string fitted_source(const Calibration& c) {
  if (c.provenance.sources.empty()) return c.source;
  const bool trace = from_trace(c);
  return fmt::format("{}: fitted to {}{}", c.source, trace ? "trace " : "", fmt::join(c.provenance.sources, ", "));
}

boost::json::object& member_object(boost::json::object& o, const char* key) {
  boost::json::value& v = o[key];
  if (!v.is_object()) v.emplace_object();
  return v.as_object();
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
    if (point_to_point(t.op)) continue;  // NCCL_ALGO and NCCL_PROTO do not reach them
    check_setting(c, i, t.algorithm, collectives::to_string(forced.algorithm), "algorithm");
    check_setting(c, i, t.protocol, collectives::to_string(forced.protocol), "protocol");
  }
}

CollectivesSpec measured_as(const CollectiveTable& t) {
  CollectivesSpec out;
  for (int i = 0; i <= static_cast<int>(Algorithm::direct); ++i)
    if (t.algorithm == collectives::to_string(static_cast<Algorithm>(i))) out.algorithm = static_cast<Algorithm>(i);
  for (int i = 0; i <= static_cast<int>(Protocol::simple); ++i)
    if (t.protocol == collectives::to_string(static_cast<Protocol>(i))) out.protocol = static_cast<Protocol>(i);
  return out;
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
      if (c.time() > Time::zero()) {
        c = carried(cluster, forced, request, c, *us);
        out.source = Source::measured;
        out.table = t;
        return out;
      }
    }
  }
  const CollectiveTable* ref = tables.reference(request.op, s.ranks, s.nodes, s.ranks_per_node, dtype);
  if (ref == nullptr) return out;
  const Corrections k = corrections(cluster, forced, *ref);
  const double bytes = request.size.as_double();
  const double model_time_us = c.time().us();
  const double latency_us = model_us(cluster, forced, request.op, s, 1);
  double us = k.us({latency_us, std::max(0.0, model_time_us - latency_us)});
  if (ref == tables.exact(request.op, s.ranks, s.nodes, s.ranks_per_node, dtype)) {
    us = shape_us(*ref, k, bytes, us);
  } else if (const int grown = growth(s, *ref); grown != 0) {
    // A larger communicator never takes less time than the measured one at the same size,
    // a smaller one never more: the model's growth from the measured shape counts only where
    // it keeps to that (its scales alone can fall short of an interpolated measurement).
    const double ref_us = shape_us(*ref, k, bytes, k.us(split_at(cluster, forced, ref->op, shape_of(*ref), bytes)));
    us = grown > 0 ? std::max(us, ref_us) : std::min(us, ref_us);
  }
  // The choice's latency and bandwidth scaled as the model's latency and transfer are, then
  // both alike to give that time.
  c.latency = c.latency.scaled(k.latency);
  if (c.algbw.positive()) c.algbw = c.algbw.scaled(1.0 / k.transfer);
  if (c.time() > Time::zero()) c = carried(cluster, forced, request, c, us);
  out.source = Source::scaled;
  out.table = ref;
  return out;
}

CalibratedTime calibrate_compute(const MeasuredTables& tables, const hardware::GpuModel& gpu,
                                 const workload::OpCost& op) {
  const Precision precision = gpu.dtype(op);
  std::optional<double> us;
  switch (op.cls) {
    case workload::OpClass::gemm: {
      // A grouped GEMM (the local experts') is `groups` GEMMs of equal shares of the tokens, each
      // as long as one GEMM of its own shape, as the model times them.
      const double groups = static_cast<double>(std::max(op.groups, 1LL));
      const workload::GemmShape g = workload::one_gemm(op);
      if (const auto one = tables.gemm_us(g.m, g.n, g.k, op.flops / groups, precision)) us = *one * groups;
      break;
    }
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
                                      from_trace(c) ? fitted_source(c) : c.source + ": measured"};
  }
  if (measured_slowdown) in_force["comm_slowdown"] = *measured_slowdown;
  std::vector<CalibratedValue> out;
  for (const EfficiencyField& f : kEfficiencyFields)
    if (const auto it = in_force.find(f.key); it != in_force.end()) out.push_back(it->second);
  if (const auto it = in_force.find("kernel_launch_us"); it != in_force.end()) out.push_back(it->second);
  return out;
}

std::optional<CalibratedValue> calibrated_dispatch(const MeasuredTables& tables, Time framework_dispatch) {
  std::optional<CalibratedValue> out;
  for (const Calibration& c : tables.files())
    if (c.compute.dispatch_us)
      out = CalibratedValue{"dispatch_us", *c.compute.dispatch_us, framework_dispatch.us(),
                            from_trace(c) ? fitted_source(c) : c.source + ": measured"};
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
