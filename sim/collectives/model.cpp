// NCCL's choice among (algorithm, protocol) pairs: chosen by NCCL's own untuned model, as NCCL
// chooses, then costed with the measured behaviour that model misses (ClusterSpec::tuning).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "collectives/algorithm.hpp"
#include "collectives/collective.hpp"
#include "collectives/topology.hpp"
#include "stepsim/error.hpp"

namespace stepsim::collectives {
namespace {

constexpr Protocol kProtocols[] = {Protocol::ll, Protocol::ll128, Protocol::simple};

bool allowed(const AlgorithmRow& row, const CollectivesSpec& forced) {
  return forced.algorithm == Algorithm::automatic || row.id == forced.algorithm;
}

bool allowed(Protocol p, const CollectivesSpec& forced) {
  return forced.protocol == Protocol::automatic || p == forced.protocol;
}

// NCCL's modelled time of one pair (µs), by which NCCL chooses.
double nccl_us(const Context& c, const Estimate& e) { return e.latency_us + c.nbytes() / (1e3 * e.algbw_gbps); }

// NCCL's modelled time of the pair it chooses: the shortest among the pairs `forced` allows.
double chosen_nccl_us(const Context& c, const CollectivesSpec& forced) {
  double best = std::numeric_limits<double>::infinity();
  for (const AlgorithmRow& row : algorithms()) {
    if (row.unsupported(c) || !allowed(row, forced)) continue;
    for (Protocol p : kProtocols) {
      if (!allowed(p, forced)) continue;
      const Estimate e = row.estimate(c, p);
      if (e.algbw_gbps > 0) best = std::min(best, nccl_us(c, e));
    }
  }
  return best;
}

// NCCL's Tree correction is a step table, so NCCL's modelled time of its choice drops where a
// step rises (a 4 MiB AllReduce across nodes modelled faster than one of 4 MiB less a byte).
// A larger buffer never takes less time: the cost holds the longest modelled time of any
// smaller buffer, and between the steps every pair's time grows with the buffer, so the
// sizes just below the steps are the only ones to look at. The time held is that of NCCL's
// choice among the pairs a forced algorithm or protocol leaves it, so a forced Tree's cost
// never drops either. It is at least that of NCCL's choice among every pair (the fewer pairs,
// the longer the shortest), and a pair whose own time grows with the buffer (every pair but
// Tree's) costs the same forced as listed among every candidate.
double held_nccl_us(const ClusterSpec& cluster, const CollectivesSpec& forced, const Request& request,
                    const Context& c) {
  if (algorithm_row(Algorithm::tree).unsupported(c) || !allowed(algorithm_row(Algorithm::tree), forced)) return 0;
  double held = 0;
  for (double step : tree_correction_steps()) {
    if (step > request.size.as_double()) break;
    Request before = request;
    before.size = Bytes(static_cast<std::int64_t>(step) - 1);
    const double chosen = chosen_nccl_us(make_context(cluster, before), forced);
    if (std::isfinite(chosen)) held = std::max(held, chosen);
  }
  return held;
}

// The fastest Simple pair's bandwidth without NCCL's size corrections, among every algorithm
// that applies: the bandwidth the shortfall is taken on, whichever pair NCCL then picks or is
// forced to run.
double reference_gbps(const Context& c) {
  double best = 0;
  for (const AlgorithmRow& row : algorithms())
    if (!row.unsupported(c)) best = std::max(best, row.estimate(c, Protocol::simple).peak());
  return best;
}

// What NCCL's model misses (µs), the same whatever pair it picks, so that the cost does not
// step where its model switches pair: the bus efficiency, and a shortfall that rises with the
// buffer, is largest around ramp_half_bytes (LL128, and Simple before its chunk pipeline
// fills) and falls away as the pipeline fills: efficiency bus_efficiency / (1 + x^a / (1 + x²)),
// x = ramp_half_bytes / S. With a ≤ 1 it grows with the size and shrinks with the bandwidth.
double shortfall_us(const CollectiveTuning& t, Bytes size, double nbytes, double reference) {
  if (reference <= 0 || nbytes <= 0) return 0;
  double ramp = 0;
  if (t.ramp_half_bytes.count() > 0 && size.count() > 0) {
    const double x = t.ramp_half_bytes.as_double() / size.as_double();
    ramp = std::pow(x, t.ramp_exponent) / (1.0 + x * x);
  }
  return nbytes / (1e3 * reference) * ((1.0 + ramp) / t.bus_efficiency - 1.0);
}

// What every pair of one request pays beyond NCCL's model of it.
struct Extra {
  double shortfall_us = 0;
  double held_us = 0;  // the longest modelled time of NCCL's choice for a smaller buffer
};

// The pair's cost: the launch, NCCL's modelled time (no less than that held for smaller
// buffers) and the shortfall, no less than the latency floor. It depends on the pair only
// through NCCL's modelled time, so the pair NCCL chooses costs least of all and its cost is
// monotone in the size and the bandwidth as that time is. The transfer (the pair's modelled
// transfer and the shortfall) is what link sharing slows; the time is rounded once.
Choice tuned(const Context& c, Algorithm a, Protocol p, const Estimate& e, const Extra& x) {
  const CollectiveTuning& t = c.cluster.tuning;
  const double modelled_us = std::max(x.held_us, nccl_us(c, e));
  const Time total = max(t.latency_floor, Time::from_us(t.launch_overhead.us() + modelled_us + x.shortfall_us));
  const double transfer_us = c.nbytes() / (1e3 * e.algbw_gbps) + x.shortfall_us;
  Choice choice;
  choice.algorithm = a;
  choice.protocol = p;
  choice.channels = e.channels;
  choice.size = c.size;
  choice.algbw = Bandwidth::gbytes_per_s(transfer_us > 0 ? c.nbytes() / (1e3 * transfer_us) : e.algbw_gbps);
  choice.latency = max(Time::zero(), total - transfer_time(c.size, choice.algbw));
  choice.nccl_time = Time::from_us(nccl_us(c, e));
  return choice;
}

std::string applicable_names(const Context& c) {
  std::string names;
  for (const AlgorithmRow& row : algorithms()) {
    if (row.unsupported(c)) continue;
    if (!names.empty()) names += ", ";
    names += to_string(row.id);
  }
  return names;
}

void check_forced_algorithm(const Context& c, Algorithm a) {
  if (a == Algorithm::automatic) return;
  const auto why = algorithm_row(a).unsupported(c);
  if (!why) return;
  throw InputError(
      "", "/collectives/algorithm",
      fmt::format("'{}' does not apply to {} on {} GPUs over {} {}(s): {} (choices: auto, {})", to_string(a),
                  nccl_name(c.op), c.ranks(), c.nodes(), c.node_name(), *why, applicable_names(c)));
}

void add_pairs(const Context& c, const AlgorithmRow& row, const CollectivesSpec& forced, const Extra& x,
               std::vector<Choice>& out) {
  for (Protocol p : kProtocols) {
    if (!allowed(p, forced)) continue;
    const Estimate e = row.estimate(c, p);
    if (e.algbw_gbps > 0) out.push_back(tuned(c, row.id, p, e, x));
  }
}

// A group of one: nothing moves, only the launch is paid.
Choice single_rank(const ClusterSpec& cluster, const Request& request) {
  Choice choice;
  choice.latency = max(cluster.tuning.latency_floor, cluster.tuning.launch_overhead);
  choice.size = request.size;
  choice.channels = 0;
  return choice;
}

void check_shape(const GroupShape& s) {
  STEPSIM_CHECK(s.ranks >= 1 && s.nodes >= 1 && s.ranks_per_node >= 1, "group shape must be positive");
  STEPSIM_CHECK(s.ranks == s.nodes * s.ranks_per_node, "ranks must equal nodes × ranks_per_node");
}

}  // namespace

Time Choice::time() const {
  if (!algbw.positive()) return latency;
  return latency + transfer_time(size, algbw);
}

double bus_factor(CollOp op, int ranks) {
  const double n = ranks;
  switch (op) {
    case CollOp::allreduce:
      return 2.0 * (n - 1) / n;
    case CollOp::allgather:
    case CollOp::reducescatter:
    case CollOp::alltoall:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

const char* to_string(Algorithm a) {
  static constexpr const char* names[] = {"auto", "ring", "tree", "nvls", "nvls-tree", "collnet", "pat", "direct"};
  return names[static_cast<int>(a)];
}

const char* to_string(Protocol p) {
  static constexpr const char* names[] = {"auto", "ll", "ll128", "simple"};
  return names[static_cast<int>(p)];
}

std::vector<Choice> candidates(const ClusterSpec& cluster, const CollectivesSpec& setting, const Request& request) {
  check_shape(request.shape);
  if (request.shape.ranks == 1) return {single_rank(cluster, request)};
  const Context c = make_context(cluster, request);
  // Point-to-point transfers never see NCCL_ALGO or NCCL_PROTO (enqueue.cc appends them as
  // send and receive tasks, LL or Simple by size): a scenario that forces the collectives'
  // algorithm leaves its pipeline's and experts' transfers as they are.
  const CollectivesSpec forced = point_to_point(c.op) ? CollectivesSpec{} : setting;
  check_forced_algorithm(c, forced.algorithm);
  // What each pair pays beyond NCCL's model does not depend on the pairs allowed: a forced
  // algorithm or protocol narrows NCCL's choice, not the cost of any pair.
  const Extra extra{shortfall_us(cluster.tuning, c.size, c.nbytes(), reference_gbps(c)),
                    held_nccl_us(cluster, forced, request, c)};
  std::vector<Choice> out;
  for (const AlgorithmRow& row : algorithms())
    if (allowed(row, forced) && !row.unsupported(c)) add_pairs(c, row, forced, extra, out);
  if (out.empty())
    throw InputError("", "/collectives/protocol",
                     fmt::format("no algorithm runs {} with protocol '{}' here (choices: auto, ll, ll128, simple "
                                 "where the algorithm has them; NVLS, NVLS-Tree and PAT are Simple only)",
                                 nccl_name(c.op), to_string(forced.protocol)));
  // NCCL runs the pair its own model finds fastest, whatever the pair then achieves; a
  // forced algorithm or protocol narrows the pairs it chooses among.
  const auto key = [](const Choice& x) { return std::pair(x.nccl_time, x.time()); };
  std::stable_sort(out.begin(), out.end(), [&](const Choice& a, const Choice& b) { return key(a) < key(b); });
  return out;
}

Choice predict(const ClusterSpec& cluster, const CollectivesSpec& forced, const Request& request) {
  return candidates(cluster, forced, request).front();
}

// ncclTopoPostset doubles the graph's channels up to MAXCHANNELS (connect.cc), and across nodes
// on Hopper and later doubles them again while a ring channel is faster than 45 GB/s and they
// are fewer than 16.
int comm_channels(const Context& c) {
  constexpr int kMaxChannels = 64;
  int channels = std::min(kMaxChannels, 2 * c.ring.channels);
  if (c.cluster.gpu.arch != GpuArch::ampere && c.nodes() > 1 && c.ring.bw_intra > 45.0 && channels < 16)
    channels = std::min(kMaxChannels, 2 * channels);
  return channels;
}

// NVLS runs on comm->nvlsChannels, set apart from the rings' (nvls.cc, ncclNvlsTuning): 16 on
// Hopper (NVLS_NCHANNELS_SM90); on Blackwell 24 inside one node (NVLS_NCHANNELS_SM100_NVL) and
// 32 across several (NVLS_NCHANNELS_SM100), a node being an NVLink domain to multi-node NVLink.
int nvls_channels(GpuArch arch, int nodes) {
  if (arch != GpuArch::blackwell) return 16;
  return nodes > 1 ? 32 : 24;
}

int nccl_channels(const ClusterSpec& cluster, const Request& request, Algorithm a) {
  if (a == Algorithm::nvls || a == Algorithm::nvls_tree) return nvls_channels(cluster.gpu.arch, request.shape.nodes);
  return comm_channels(make_context(cluster, request));
}

LinkLoad link_load(const Request& request, const Choice& choice) {
  if (request.shape.ranks <= 1) return {};
  // The loads depend on the group shape only, not on the cluster's figures.
  const ClusterSpec neutral;
  const Context c{neutral, arch_facts(GpuArch::hopper), request.op, request.size, request.shape};
  return algorithm_row(choice.algorithm).load(c);
}

}  // namespace stepsim::collectives
