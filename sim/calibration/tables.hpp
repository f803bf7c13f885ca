// Measured tables of one or more calibration files, ready for lookup: log-log interpolation
// inside the measured range, nothing outside it (the model answers there); a table found by
// its shape and a size by binary search.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "calibration/calibration.hpp"

namespace stepsim::calibration {

// y at x on the polyline through `points` (sorted by x, x and y positive) in log-log space;
// empty outside [first x, last x].
std::optional<double> interpolate_loglog(const std::vector<std::pair<double, double>>& points, double x);

// The measured time of `table` at `bytes`, when inside its measured sizes.
std::optional<double> measured_us(const CollectiveTable& table, double bytes);

class MeasuredTables {
 public:
  MeasuredTables() = default;
  // Collective tables keep the shapes they were measured on, in hosts: right for compute tables
  // and for a cluster whose NVLink domain is its node.
  explicit MeasuredTables(std::vector<Calibration> files);
  // Collective tables looked up by their shape on `cluster`, in NVLink domains as the
  // collective model counts them (a GB200 NVL72 rack's 18 trays are one domain).
  MeasuredTables(std::vector<Calibration> files, const ClusterSpec& cluster);

  bool empty() const { return files_.empty(); }
  const std::vector<Calibration>& files() const { return files_; }

  // Measured durations (µs) of compute kernels, inside the measured range only.
  std::optional<double> gemm_us(long long m, long long n, long long k, double flops, Precision dtype) const;
  std::optional<double> attention_us(double flops, bool backward, Precision dtype) const;
  std::optional<double> memory_us(double bytes) const;

  // The table measured on exactly this communicator shape (NVLink domains, ranks in each, when
  // built for a cluster), or null: in element type `dtype` (nccl-tests' name) where one was, else
  // of any type (the last file's; its times are matched by bytes). "": any type.
  const CollectiveTable* exact(CollOp op, int ranks, int nodes, int ranks_per_node,
                               const std::string& dtype = "") const;
  // The measured table that best stands for this shape: the exact one, else one of the same
  // op on the same tier (inside one node, or across nodes) with the nearest rank count, of
  // type `dtype` where the tier has one.
  const CollectiveTable* reference(CollOp op, int ranks, int nodes, int ranks_per_node,
                                   const std::string& dtype = "") const;

 private:
  void index(const ClusterSpec* cluster);

  std::vector<Calibration> files_;
  std::vector<CollectiveTable> collectives_;  // of every file, in file order
  // Where each shape's table is (the last file's), and the tables of each op and tier (one
  // node, or several), so that a lookup costs no more with many tables or points.
  std::map<std::tuple<CollOp, int, int, int>, std::size_t> by_shape_;
  std::map<std::tuple<CollOp, int, int, int, std::string>, std::size_t> by_typed_shape_;
  std::map<std::pair<CollOp, bool>, std::vector<std::size_t>> by_tier_;
  std::vector<GemmPoint> gemm_;
  // time (µs) over FLOPs per dtype (indexed by Precision, nvfp4 the last) and pass, and
  // achieved GB/s over bytes
  static constexpr std::size_t kDtypes = static_cast<std::size_t>(Precision::nvfp4) + 1;
  std::vector<std::pair<double, double>> gemm_curve_[kDtypes], attention_curve_[2][kDtypes];
  std::vector<std::pair<double, double>> memory_curve_;
};

}  // namespace stepsim::calibration
