// Lookup in measured tables: curves sorted by size with repeated sizes merged (geometric
// mean), then piecewise-linear interpolation of log y over log x; collective tables of one
// shape in several files merged into one.
#include "calibration/tables.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "calibration/apply.hpp"
#include "calibration/link_bound.hpp"
#include "stepsim/error.hpp"

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

namespace {

// y at x on the polyline through `points` (sorted by x) in log-log space, found by binary
// search: a lookup costs log(n), whatever the size of the table.
template <class Point, class X, class Y>
std::optional<double> loglog_at(const std::vector<Point>& points, double x, X x_of, Y y_of) {
  if (points.empty() || !(x > 0)) return std::nullopt;
  // A relative tolerance so that a size printed and read back still counts as measured.
  constexpr double kTol = 1e-9;
  if (x < x_of(points.front()) * (1 - kTol) || x > x_of(points.back()) * (1 + kTol)) return std::nullopt;
  if (points.size() == 1) return y_of(points.front());
  auto hi = std::lower_bound(points.begin(), points.end(), x, [&](const Point& p, double v) { return x_of(p) < v; });
  if (hi == points.end()) return y_of(points.back());
  if (hi == points.begin() || x_of(*hi) == x) return y_of(*hi);
  const auto lo = hi - 1;
  const double t = (std::log(x) - std::log(x_of(*lo))) / (std::log(x_of(*hi)) - std::log(x_of(*lo)));
  return std::exp(std::log(y_of(*lo)) + t * (std::log(y_of(*hi)) - std::log(y_of(*lo))));
}

}  // namespace

std::optional<double> interpolate_loglog(const std::vector<std::pair<double, double>>& points, double x) {
  return loglog_at(
      points, x, [](const auto& p) { return p.first; }, [](const auto& p) { return p.second; });
}

std::optional<double> measured_us(const CollectiveTable& table, double bytes) {
  return loglog_at(
      table.points, bytes, [](const CollectivePoint& p) { return p.bytes; },
      [](const CollectivePoint& p) { return p.time_us; });
}

MeasuredTables::MeasuredTables(std::vector<Calibration> files) : files_(std::move(files)) { index(nullptr); }

MeasuredTables::MeasuredTables(std::vector<Calibration> files, const ClusterSpec& cluster) : files_(std::move(files)) {
  index(&cluster);
}

namespace {

// A table's shape as it was measured (hosts) and how it ran: tables alike in all of it are one.
using TableKey = std::tuple<CollOp, int, int, int, std::string, std::string, std::string>;

TableKey key_of(const CollectiveTable& t) {
  return {t.op, t.ranks, t.nodes, t.ranks_per_node, t.dtype, t.algorithm, t.protocol};
}

// Where a point came from, for the error that names two files measuring one size differently.
struct PointSource {
  const Calibration* file;
  std::size_t table, point;
  std::string where() const { return fmt::format("/collectives/{}/points/{}", table, point); }
};

// The tables of every file, in file order, those of one shape, type and algorithm/protocol
// merged into one: the points of all of them (as if their logs had been imported together),
// refitted, at the place of the last. A size measured twice with the same time is one point;
// with two times it is refused, naming both files: one size has one time.
std::vector<CollectiveTable> merged_tables(const std::vector<Calibration>& files) {
  std::map<TableKey, std::vector<std::pair<const CollectiveTable*, PointSource>>> parts;
  std::vector<std::pair<const CollectiveTable*, TableKey>> order;
  for (const Calibration& c : files)
    for (std::size_t i = 0; i < c.collectives.size(); ++i) {
      const CollectiveTable& t = c.collectives[i];
      STEPSIM_CHECK(std::is_sorted(t.points.begin(), t.points.end(),
                                   [](const auto& a, const auto& b) { return a.bytes < b.bytes; }),
                    "a collective table's points are sorted by size, for the binary search of each lookup");
      parts[key_of(t)].emplace_back(&t, PointSource{&c, i, 0});
      order.emplace_back(&t, key_of(t));
    }
  std::vector<CollectiveTable> out;
  for (const auto& [table, key] : order) {
    const auto& same = parts.at(key);
    if (same.back().first != table) continue;  // merged into the last of its kind
    if (same.size() == 1) {
      out.push_back(*table);
      continue;
    }
    std::map<double, std::pair<double, PointSource>> points;
    for (const auto& [t, from] : same)
      for (std::size_t j = 0; j < t->points.size(); ++j) {
        const CollectivePoint& p = t->points[j];
        PointSource here = from;
        here.point = j;
        const auto [it, fresh] = points.try_emplace(p.bytes, p.time_us, here);
        if (fresh || it->second.first == p.time_us) continue;
        const PointSource& first = it->second.second;
        throw InputError(
            here.file->source, here.where(),
            fmt::format(
                "measures {} of {} rank(s), {} node(s) x {} ({}{}) at {:.0f} B in {:g} us, but {} {} measures "
                "it in {:g} us: the tables of one shape and type in several calibration files are merged, "
                "and a size has one time (import both logs into one file, which averages a size's times, "
                "or give one of the files)",
                to_string(t->op), t->ranks, t->nodes, t->ranks_per_node, t->dtype,
                t->algorithm.empty() ? "" : ", " + t->algorithm + (t->protocol.empty() ? "" : "/" + t->protocol),
                p.bytes, p.time_us, first.file->source, first.where(), it->second.first));
      }
    CollectiveTable merged = *table;
    if (points.size() != table->points.size()) {  // else the others measured no size it did not
      merged.points.clear();
      for (const auto& [bytes, point] : points) merged.points.push_back({bytes, point.first});
      merged.fit = fit_alpha_beta(merged.points, merged.op, merged.ranks, 0.0);
    }
    out.push_back(std::move(merged));
  }
  return out;
}

}  // namespace

void MeasuredTables::index(const ClusterSpec* cluster) {
  collectives_ = merged_tables(files_);
  for (const Calibration& c : files_) {
    for (const GemmPoint& g : c.compute.gemm) {
      gemm_.push_back(g);
      gemm_curve_[index_of(g.dtype)].emplace_back(g.flops(), g.time_us);
    }
    for (const AttentionPoint& a : c.compute.attention)
      attention_curve_[a.backward ? 1 : 0][index_of(a.dtype)].emplace_back(a.flops(), a.time_us);
    for (const BandwidthPoint& m : c.compute.memory) memory_curve_.emplace_back(m.bytes, m.gbytes_per_s);
  }
  // Where files measured a shape in several types (or run settings), the later file's table
  // answers a lookup of any type.
  for (std::size_t i = 0; i < collectives_.size(); ++i) {
    CollectiveTable& t = collectives_[i];
    if (cluster != nullptr) {
      const collectives::GroupShape shape = domain_shape(*cluster, t.ranks, t.nodes);
      t.nodes = shape.nodes;
      t.ranks_per_node = shape.ranks_per_node;
    }
    by_shape_[{t.op, t.ranks, t.nodes, t.ranks_per_node}] = i;
    by_typed_shape_[{t.op, t.ranks, t.nodes, t.ranks_per_node, t.dtype}] = i;
    by_tier_[{t.op, t.nodes > 1}].push_back(i);
  }
  for (auto& c : gemm_curve_) finish_curve(c);
  for (auto& pass : attention_curve_)
    for (auto& c : pass) finish_curve(c);
  finish_curve(memory_curve_);
}

std::optional<double> MeasuredTables::gemm_us(long long m, long long n, long long k, double flops,
                                              Precision dtype) const {
  // The very shape measured wins over the curve in FLOPs (a GEMM's time depends on its shape),
  // for an op that is one GEMM of it. An op of more FLOPs than its shape's 2·m·n·k is a batch of
  // such GEMMs in one kernel (unfused attention's scores and values: one per head and sequence),
  // which one GEMM's time does not time: its FLOPs find it on the curve.
  const double one = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (std::abs(flops - one) <= 1e-9 * one)
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

const CollectiveTable* MeasuredTables::exact(CollOp op, int ranks, int nodes, int ranks_per_node,
                                             const std::string& dtype) const {
  if (!dtype.empty())
    if (const auto it = by_typed_shape_.find({op, ranks, nodes, ranks_per_node, dtype}); it != by_typed_shape_.end())
      return &collectives_[it->second];
  const auto it = by_shape_.find({op, ranks, nodes, ranks_per_node});
  return it == by_shape_.end() ? nullptr : &collectives_[it->second];
}

const CollectiveTable* MeasuredTables::reference(CollOp op, int ranks, int nodes, int ranks_per_node,
                                                 const std::string& dtype) const {
  if (const auto* t = exact(op, ranks, nodes, ranks_per_node, dtype)) return t;
  // One node measures NVLink, two or more the network: a table speaks only for its tier.
  const auto tier = by_tier_.find({op, nodes > 1});
  if (tier == by_tier_.end()) return nullptr;
  // The nearest rank count of the tier in the collective's own type, else of any type.
  for (const bool typed : {true, false}) {
    if (typed && dtype.empty()) continue;
    const CollectiveTable* best = nullptr;
    double best_distance = 0;
    for (std::size_t i : tier->second) {
      const CollectiveTable& t = collectives_[i];
      if (typed && t.dtype != dtype) continue;
      const double distance = std::abs(std::log(static_cast<double>(t.ranks) / ranks)) +
                              std::abs(std::log(static_cast<double>(t.ranks_per_node) / ranks_per_node));
      if (best == nullptr || distance <= best_distance) {
        best = &t;
        best_distance = distance;
      }
    }
    if (best != nullptr) return best;
  }
  return nullptr;
}

}  // namespace stepsim::calibration
