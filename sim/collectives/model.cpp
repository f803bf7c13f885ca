// NCCL's choice among (algorithm, protocol) pairs: chosen by NCCL's own untuned model, as NCCL
// chooses, then costed with the measured behaviour that model misses (ClusterSpec::tuning).
#include <algorithm>
#include <cmath>
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

// Fraction of NCCL's modelled bandwidth that a message of `size` achieves: Simple fills its
// chunk pipeline only for large messages (ramp), LL and LL128 fall short of their model.
double efficiency(const CollectiveTuning& t, Protocol p, Bytes size) {
  double eff = t.bus_efficiency;
  if (p == Protocol::ll128) eff *= t.ll128_efficiency;
  if (p == Protocol::ll) eff *= t.ll_efficiency;
  if (p == Protocol::simple && t.ramp_half_bytes.count() > 0 && size.count() > 0)
    // Capped so that a steep ramp on a tiny message stays a (very) slow transfer, not zero.
    eff /= 1.0 + std::min(1e9, std::pow(t.ramp_half_bytes.as_double() / size.as_double(), t.ramp_exponent));
  return eff;
}

Choice tuned(const Context& c, Algorithm a, Protocol p, const Estimate& e) {
  const CollectiveTuning& t = c.cluster.tuning;
  Choice choice;
  choice.algorithm = a;
  choice.protocol = p;
  choice.channels = e.channels;
  choice.latency = max(t.latency_floor, t.launch_overhead + Time::from_us(e.latency_us));
  choice.algbw = Bandwidth::gbytes_per_s(e.algbw_gbps * efficiency(t, p, c.size));
  choice.size = c.size;
  choice.nccl_time = Time::from_us(e.latency_us + c.nbytes() / (1e3 * e.algbw_gbps));
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
  throw InputError("", "/collectives/algorithm",
                   fmt::format("'{}' does not apply to {} on {} GPUs over {} node(s): {} (choices: auto, {})",
                               to_string(a), nccl_name(c.op), c.ranks(), c.nodes(), *why, applicable_names(c)));
}

void add_pairs(const Context& c, const AlgorithmRow& row, Protocol forced, std::vector<Choice>& out) {
  for (Protocol p : kProtocols) {
    if (forced != Protocol::automatic && p != forced) continue;
    const Estimate e = row.estimate(c, p);
    if (e.algbw_gbps > 0) out.push_back(tuned(c, row.id, p, e));
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

std::vector<Choice> candidates(const ClusterSpec& cluster, const CollectivesSpec& forced, const Request& request) {
  check_shape(request.shape);
  if (request.shape.ranks == 1) return {single_rank(cluster, request)};
  const Context c = make_context(cluster, request);
  check_forced_algorithm(c, forced.algorithm);
  std::vector<Choice> out;
  for (const AlgorithmRow& row : algorithms()) {
    if (forced.algorithm != Algorithm::automatic && row.id != forced.algorithm) continue;
    if (!row.unsupported(c)) add_pairs(c, row, forced.protocol, out);
  }
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

LinkLoad link_load(const Request& request, const Choice& choice) {
  if (request.shape.ranks <= 1) return {};
  // The loads depend on the group shape only, not on the cluster's figures.
  const ClusterSpec neutral;
  const Context c{neutral, arch_facts(GpuArch::hopper), request.op, request.size, request.shape};
  return algorithm_row(choice.algorithm).load(c);
}

}  // namespace stepsim::collectives
