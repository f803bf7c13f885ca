// The physical bound on a measured collective: bytes a rank must move over the bandwidth of
// its links. A calibration that beats it was not measured on this hardware (or not at all).
#include "calibration/link_bound.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "calibration/apply.hpp"
#include "calibration/compute_bound.hpp"
#include "io/presets.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"

namespace stepsim::calibration {
namespace {

// What a rank's links carry per direction: its NVLink port inside a node; across nodes also
// its share of the node's NICs (a rank may spread its bytes over both).
double rank_links_gbps(const ClusterSpec& cluster, int nodes) {
  const double nvlink = cluster.intra_node.bandwidth.gbytes_per_s();
  if (nodes <= 1) return nvlink;
  const double nics = cluster.inter_node.nic_bandwidth.gbytes_per_s() * cluster.inter_node.nics_per_node /
                      std::max(1, cluster.gpus_per_node);
  return nvlink + nics;
}

std::string links_text(const ClusterSpec& cluster, int nodes) {
  if (nodes <= 1) return fmt::format("any link of {} ({:g} GB/s)", cluster.name, rank_links_gbps(cluster, nodes));
  return fmt::format("a GPU's links of {} together ({:g} GB/s: NVLink {:g} and its share of the NICs {:g})",
                     cluster.name, rank_links_gbps(cluster, nodes), cluster.intra_node.bandwidth.gbytes_per_s(),
                     rank_links_gbps(cluster, nodes) - cluster.intra_node.bandwidth.gbytes_per_s());
}

}  // namespace

double min_traffic_share(CollOp op, int ranks) {
  if (ranks <= 1) return 0;
  switch (op) {
    case CollOp::allgather:
    case CollOp::reducescatter:
    case CollOp::alltoall:
      return static_cast<double>(ranks - 1) / ranks;
    default:
      return 1;
  }
}

void check_within_links(const ClusterSpec& cluster, CollOp op, int ranks, int nodes, double bytes, double time_us,
                        const std::string& file, const std::string& place) {
  const double share = min_traffic_share(op, ranks);
  const double links = rank_links_gbps(cluster, nodes);
  if (share <= 0 || !(links > 0)) return;
  const double least_us = share * bytes / (links * 1e3);
  // A relative margin for the rounding of printed times; physics allows nothing more.
  if (time_us >= least_us * (1 - 1e-6)) return;
  throw InputError(file, place,
                   fmt::format("{:.0f} B of {} in {:g} us needs {:.1f} GB/s out of or into each rank, faster than {}; "
                               "expected at least {:.6g} us",
                               bytes, to_string(op), time_us, share * bytes / (time_us * 1e3),
                               links_text(cluster, nodes), least_us));
}

void check_within_links(const Calibration& c, const ClusterSpec& cluster) {
  for (std::size_t i = 0; i < c.collectives.size(); ++i) {
    const CollectiveTable& t = c.collectives[i];
    for (std::size_t j = 0; j < t.points.size(); ++j)
      check_within_links(cluster, t.op, t.ranks, t.nodes, t.points[j].bytes, t.points[j].time_us, c.source,
                         fmt::format("/collectives/{}/points/{}/time_us", i, j));
  }
}

std::optional<ClusterSpec> fastest_cluster_with(const std::string& gpu) {
  std::optional<ClusterSpec> best;
  for (std::string_view name : io::preset_names("clusters")) {
    ClusterSpec spec = io::load_cluster(std::string(name), 8);
    if (!gpu_matches(gpu, spec.gpu.name)) continue;
    if (!best || rank_links_gbps(spec, 2) > rank_links_gbps(*best, 2)) best = std::move(spec);
  }
  return best;
}

void check_fits(const Calibration& c, const ClusterSpec& cluster, const CollectivesSpec& forced) {
  check_gpu(c, cluster.gpu.name);
  check_within_peak(c, cluster.gpu);
  check_within_links(c, cluster);
  check_measured_as(c, forced);
}

}  // namespace stepsim::calibration
