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

// What a rank's links carry per direction: its NVLink port inside a domain; across domains
// also its share of the host's NICs (a rank may spread its bytes over both).
double rank_links_gbps(const ClusterSpec& cluster, int domains) {
  const double nvlink = cluster.intra_node.bandwidth.gbytes_per_s();
  if (domains <= 1) return nvlink;
  const double nics = cluster.inter_node.nic_bandwidth.gbytes_per_s() * cluster.inter_node.nics_per_node /
                      std::max(1, cluster.gpus_per_node);
  return nvlink + nics;
}

std::string links_text(const ClusterSpec& cluster, int domains) {
  if (domains <= 1) return fmt::format("any link of {} ({:g} GB/s)", cluster.name, rank_links_gbps(cluster, domains));
  return fmt::format("a GPU's links of {} together ({:g} GB/s: NVLink {:g} and its share of the NICs {:g})",
                     cluster.name, rank_links_gbps(cluster, domains), cluster.intra_node.bandwidth.gbytes_per_s(),
                     rank_links_gbps(cluster, domains) - cluster.intra_node.bandwidth.gbytes_per_s());
}

// Hosts an NVLink domain spans: the 18 trays of a GB200 NVL72 rack, one DGX.
int hosts_per_domain(const ClusterSpec& cluster) {
  return std::max(1, cluster.domain_gpus() / std::max(1, cluster.gpus_per_node));
}

// The share of S each domain moves over its NICs, with `per_domain` of the `ranks` ranks in it.
double domain_traffic_share(CollOp op, int ranks, int domains, int per_domain) {
  const double d = domains;
  switch (op) {
    case CollOp::allgather:
    case CollOp::reducescatter:
      return (d - 1) / d;
    case CollOp::alltoall:
      return static_cast<double>(per_domain) * (ranks - per_domain) / ranks;
    default:
      return 1;
  }
}

}  // namespace

collectives::GroupShape domain_shape(const ClusterSpec& cluster, int ranks, int hosts) {
  hosts = std::max(1, hosts);
  const int per_host = std::max(1, ranks / hosts);
  const int span = hosts_per_domain(cluster);
  if (span == 1 || hosts == 1) return {ranks, hosts, per_host};
  const int rest = hosts % span;
  const int domains = hosts / span + (rest > 0 ? 1 : 0);
  if (domains == 1) return {ranks, 1, ranks};
  int fewest = per_host * (rest > 0 ? rest : span);
  while (ranks % fewest != 0) --fewest;
  return {ranks, ranks / fewest, fewest};
}

double min_traffic_share(CollOp op, int ranks, bool switch_reduces) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  switch (op) {
    case CollOp::allgather:
    case CollOp::reducescatter:
    case CollOp::alltoall:
      return (n - 1) / n;
    case CollOp::allreduce:
      return switch_reduces ? 1 : 2 * (n - 1) / n;
    default:
      return 1;
  }
}

void check_within_links(const ClusterSpec& cluster, CollOp op, int ranks, int hosts, double bytes, double time_us,
                        const std::string& file, const std::string& place) {
  const collectives::GroupShape shape = domain_shape(cluster, ranks, hosts);
  const int domains = shape.nodes;
  // A relative margin for the rounding of printed times; physics allows nothing more.
  constexpr double kMargin = 1 - 1e-6;
  // Each rank over its own links. Across domains a rank's AllReduce share is S whatever the
  // switches do (each rank sends and receives at least one value per element).
  const double share = min_traffic_share(op, ranks, cluster.intra_node.nvls || domains > 1);
  const double links = rank_links_gbps(cluster, domains);
  if (share > 0 && links > 0) {
    const double least_us = share * bytes / (links * 1e3);
    if (time_us < least_us * kMargin)
      throw InputError(file, place,
                       fmt::format("{:.0f} B of {} in {:g} us needs {:.1f} GB/s out of or into each rank, faster "
                                   "than {}; expected at least {:.6g} us",
                                   bytes, to_string(op), time_us, share * bytes / (time_us * 1e3),
                                   links_text(cluster, domains), least_us));
  }
  if (domains <= 1) return;
  // Each domain over its hosts' NICs (the hosts of the fullest domain, the most NICs any has).
  const int domain_hosts = std::min(std::max(1, hosts), hosts_per_domain(cluster));
  const double nics = cluster.inter_node.nic_bandwidth.gbytes_per_s() * cluster.inter_node.nics_per_node * domain_hosts;
  const double domain_share = domain_traffic_share(op, ranks, domains, shape.ranks_per_node);
  if (!(nics > 0) || domain_share <= 0) return;
  const double least_us = domain_share * bytes / (nics * 1e3);
  if (time_us < least_us * kMargin)
    throw InputError(file, place,
                     fmt::format("{:.0f} B of {} in {:g} us over {} NVLink domain(s) needs {:.1f} GB/s out of or "
                                 "into each domain, faster than the {:g} GB/s of its hosts' NICs in {}; expected at "
                                 "least {:.6g} us",
                                 bytes, to_string(op), time_us, domains, domain_share * bytes / (time_us * 1e3), nics,
                                 cluster.name, least_us));
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
    if (!gpu_stands_for(gpu, spec.gpu.name)) continue;
    if (!best || rank_links_gbps(spec, 2) > rank_links_gbps(*best, 2)) best = std::move(spec);
  }
  return best;
}

int most_gpus_per_host(const std::string& gpu) {
  int most = 0;
  for (std::string_view name : io::preset_names("clusters")) {
    const ClusterSpec spec = io::load_cluster(std::string(name), 8);
    if (gpu_stands_for(gpu, spec.gpu.name)) most = std::max(most, spec.gpus_per_node);
  }
  return most;
}

void check_fits(const Calibration& c, const ClusterSpec& cluster, const std::optional<CollectivesSpec>& forced) {
  check_gpu(c, cluster.gpu.name);
  check_within_peak(c, cluster.gpu);
  check_within_links(c, cluster);
  if (forced) check_measured_as(c, *forced);
}

}  // namespace stepsim::calibration
