// The registry of collective algorithms: one row per algorithm file. Adding an algorithm
// means one new file and one row here.
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "collectives/algorithm.hpp"
#include "stepsim/error.hpp"

namespace stepsim::collectives {
namespace {

constexpr std::array<AlgorithmRow, 7> kAlgorithms{{
    {Algorithm::tree, tree::unsupported, tree::estimate, tree::load},
    {Algorithm::ring, ring::unsupported, ring::estimate, ring::load},
    {Algorithm::collnet, collnet::unsupported, collnet::estimate, collnet::load},
    {Algorithm::nvls, nvls::unsupported, nvls::estimate, nvls::load},
    {Algorithm::nvls_tree, nvls_tree::unsupported, nvls_tree::estimate, nvls_tree::load},
    {Algorithm::pat, pat::unsupported, pat::estimate, pat::load},
    {Algorithm::direct, direct::unsupported, direct::estimate, direct::load},
}};

}  // namespace

std::span<const AlgorithmRow> algorithms() { return kAlgorithms; }

const AlgorithmRow& algorithm_row(Algorithm a) {
  const auto* it =
      std::find_if(kAlgorithms.begin(), kAlgorithms.end(), [a](const AlgorithmRow& row) { return row.id == a; });
  STEPSIM_CHECK(it != kAlgorithms.end(), "no registry row for this algorithm");
  return *it;
}

double nsteps(CollOp op, int ranks) {
  if (op == CollOp::allreduce) return 2.0 * (ranks - 1);
  if (op == CollOp::allgather || op == CollOp::reducescatter) return ranks - 1.0;
  return ranks;
}

double ll_cap(const Context& c) { return ll_max_bw_gbps(c.arch, c.cluster.host_cpu, c.nodes()); }

double tree_inter_load(const Context& c) {
  if (c.nodes() <= 1) return 0.0;
  const double n = c.nodes();
  return 2.0 * (n - 1) / n / c.ppn();
}

std::optional<std::string> only_ops(const Context& c, std::initializer_list<CollOp> ops) {
  if (std::find(ops.begin(), ops.end(), c.op) != ops.end()) return std::nullopt;
  return fmt::format("it does not implement {}", nccl_name(c.op));
}

// nccl-tests' S already is the whole gathered buffer for AllGather/ReduceScatter, which is
// what NCCL's model divides by the algorithm bandwidth.
double Context::nbytes() const { return size.as_double(); }

}  // namespace stepsim::collectives
