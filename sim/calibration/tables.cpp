// Lookup in measured tables: curves sorted by size with repeated sizes merged (geometric
// mean), then piecewise-linear interpolation of log y over log x.
#include "calibration/tables.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace stepsim::calibration {
namespace {

// Sorts by x and merges points with the same x into their geometric mean.
void finish_curve(std::vector<std::pair<double, double>>& c) {
  std::sort(c.begin(), c.end());
  std::vector<std::pair<double, double>> out;
  for (std::size_t i = 0; i < c.size();) {
    std::size_t j = i;
    double log_sum = 0;
    for (; j < c.size() && c[j].first == c[i].first; ++j) log_sum += std::log(c[j].second);
    out.emplace_back(c[i].first, std::exp(log_sum / static_cast<double>(j - i)));
    i = j;
  }
  c = std::move(out);
}

std::size_t index_of(Precision p) { return static_cast<std::size_t>(p); }

}  // namespace

std::optional<double> interpolate_loglog(const std::vector<std::pair<double, double>>& points, double x) {
  if (points.empty() || !(x > 0)) return std::nullopt;
  // A relative tolerance so that a size printed and read back still counts as measured.
  constexpr double kTol = 1e-9;
  if (x < points.front().first * (1 - kTol) || x > points.back().first * (1 + kTol)) return std::nullopt;
  if (points.size() == 1) return points.front().second;
  auto hi = std::lower_bound(points.begin(), points.end(), x, [](const auto& p, double v) { return p.first < v; });
  if (hi == points.end()) return points.back().second;
  if (hi == points.begin() || hi->first == x) return hi->second;
  const auto lo = hi - 1;
  const double t = (std::log(x) - std::log(lo->first)) / (std::log(hi->first) - std::log(lo->first));
  return std::exp(std::log(lo->second) + t * (std::log(hi->second) - std::log(lo->second)));
}

std::optional<double> measured_us(const CollectiveTable& table, double bytes) {
  std::vector<std::pair<double, double>> curve;
  curve.reserve(table.points.size());
  for (const auto& p : table.points) curve.emplace_back(p.bytes, p.time_us);
  return interpolate_loglog(curve, bytes);
}

MeasuredTables::MeasuredTables(std::vector<Calibration> files) : files_(std::move(files)) {
  for (const Calibration& c : files_) {
    collectives_.insert(collectives_.end(), c.collectives.begin(), c.collectives.end());
    for (const GemmPoint& g : c.compute.gemm) {
      gemm_.push_back(g);
      gemm_curve_[index_of(g.dtype)].emplace_back(g.flops(), g.time_us);
    }
    for (const AttentionPoint& a : c.compute.attention)
      attention_curve_[a.backward ? 1 : 0][index_of(a.dtype)].emplace_back(a.flops(), a.time_us);
    for (const BandwidthPoint& m : c.compute.memory) memory_curve_.emplace_back(m.bytes, m.gbytes_per_s);
  }
  for (auto& c : gemm_curve_) finish_curve(c);
  for (auto& pass : attention_curve_)
    for (auto& c : pass) finish_curve(c);
  finish_curve(memory_curve_);
}

std::optional<double> MeasuredTables::gemm_us(long long m, long long n, long long k, double flops,
                                              Precision dtype) const {
  // The very shape measured wins over the curve in FLOPs (a GEMM's time depends on its shape).
  for (auto it = gemm_.rbegin(); it != gemm_.rend(); ++it)
    if (it->dtype == dtype && it->m == m && it->n == n && it->k == k) return it->time_us;
  return interpolate_loglog(gemm_curve_[index_of(dtype)], flops);
}

std::optional<double> MeasuredTables::attention_us(double flops, bool backward, Precision dtype) const {
  return interpolate_loglog(attention_curve_[backward ? 1 : 0][index_of(dtype)], flops);
}

std::optional<double> MeasuredTables::memory_us(double bytes) const {
  const auto gbps = interpolate_loglog(memory_curve_, bytes);
  if (!gbps) return std::nullopt;
  return bytes / (*gbps * 1e3);
}

const CollectiveTable* MeasuredTables::exact(CollOp op, int ranks, int nodes, int ranks_per_node) const {
  const CollectiveTable* found = nullptr;
  for (const auto& t : collectives_)
    if (t.op == op && t.ranks == ranks && t.nodes == nodes && t.ranks_per_node == ranks_per_node) found = &t;
  return found;
}

const CollectiveTable* MeasuredTables::reference(CollOp op, int ranks, int nodes, int ranks_per_node) const {
  if (const auto* t = exact(op, ranks, nodes, ranks_per_node)) return t;
  const CollectiveTable* best = nullptr;
  double best_distance = 0;
  for (const auto& t : collectives_) {
    // One node measures NVLink, two or more the network: a table speaks only for its tier.
    if (t.op != op || (t.nodes > 1) != (nodes > 1)) continue;
    const double distance = std::abs(std::log(static_cast<double>(t.ranks) / ranks)) +
                            std::abs(std::log(static_cast<double>(t.ranks_per_node) / ranks_per_node));
    if (best == nullptr || distance <= best_distance) {
      best = &t;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace stepsim::calibration
