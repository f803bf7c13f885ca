// compare_clusters(): one job, several clusters; what a pre-purchase question needs.
#include "sweep/cluster_comparison.hpp"

#include <fmt/format.h>

#include "io/on_cluster.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"
#include "sweep/plan.hpp"

namespace stepsim::sweep {
namespace {

// The scenario's assignments on the preset of "NAME" or "NAME@PRICE" (as plan's --cluster takes
// it): the preset with the scenario's own cluster keys, of its file and of --set, carried to it
// as plan carries them (io::sets_on_cluster), and the price of @PRICE. The scenario's price
// (its file's or --set cluster.gpu_hour_price) is its own cluster's: another preset given
// without @PRICE has none, rather than a price nobody gave it; the scenario's own preset keeps it.
std::vector<std::string> sets_for(const std::vector<std::string>& sets, const std::vector<std::string>& carried,
                                  const PlanCluster& cluster, const std::string& own) {
  std::vector<std::string> out = io::sets_on_cluster(cluster.name, carried, sets);
  if (cluster.gpu_hour_price > 0)
    out.push_back(fmt::format("cluster.gpu_hour_price={}", cluster.gpu_hour_price));
  else if (cluster.name != own)
    out.push_back("cluster.gpu_hour_price=0");
  return out;
}

// The first variation entry that names a node, as its JSON pointer ("" if none): any where a
// node of `other` has another count of GPUs, failed NICs where it has another count of NICs.
std::string node_entry(const VariationSpec& v, const ClusterSpec& own, const ClusterSpec& other) {
  const bool gpus = own.gpus_per_node != other.gpus_per_node;
  if (gpus && !v.node_speed.empty()) return "/simulation/variation/node_speed/0/node";
  for (std::size_t i = 0; gpus && i < v.links.size(); ++i)
    if (v.links[i].node) return fmt::format("/simulation/variation/links/{}/node", i);
  if (!v.failed_nics.empty() && (gpus || own.inter_node.nics_per_node != other.inter_node.nics_per_node))
    return "/simulation/variation/failed_nics/0/node";
  return {};
}

// Variation given by node means that node's GPUs and NICs on the scenario's own cluster; on a
// cluster with other GPUs (or NICs) per node, node N holds other GPUs, or is no node of the
// job. Such an entry is refused, by its key, rather than carried to other hardware.
void check_nodes_carry(const Scenario& own, const Scenario& other, const std::string& spec) {
  const std::string entry = node_entry(own.simulation.variation, own.cluster, other.cluster);
  if (entry.empty()) return;
  const bool nics = entry.find("failed_nics") != std::string::npos;
  const InputError e = scenario_error(
      own, entry,
      fmt::format("names a node of {} ({} GPUs and {} NICs a node), whose {} on {} ({} GPUs and {} NICs a node) "
                  "are others: give the GPUs by rank ({}), or compare without it",
                  own.cluster.name, own.cluster.gpus_per_node, own.cluster.inter_node.nics_per_node,
                  nics ? "NICs" : "GPUs", other.cluster.name, other.cluster.gpus_per_node,
                  other.cluster.inter_node.nics_per_node,
                  nics ? R"(links with "rank" and "link": "nic")" : R"(gpu_speed, or links with "rank")"));
  throw InputError("<command line>", "--compare-cluster", spec + ": " + e.what());
}

}  // namespace

void check_comparable(const Scenario& scenario, const std::vector<std::string>& others) {
  if (!others.empty() && !scenario.calibration.empty())
    throw InputError("<command line>", "--compare-cluster",
                     "cannot be combined with calibration files: they were measured on this scenario's GPUs "
                     "and do not describe the other clusters");
}

std::vector<ClusterColumn> compare_clusters(const io::ScenarioInput& input, const std::vector<std::string>& sets,
                                            const Scenario& scenario, const Report& own,
                                            const std::vector<std::string>& others) {
  std::vector<ClusterColumn> columns{{scenario.cluster.name, own}};
  const std::vector<std::string> clusters = split_cluster_lists(others);
  if (clusters.empty()) return columns;
  check_comparable(scenario, clusters);
  const std::vector<std::string> carried =
      io::carried_cluster_sets(input, sets, "--compare-cluster", "compare without --compare-cluster");
  for (const std::string& spec : clusters) {
    const PlanCluster cluster = parse_cluster_spec(spec, "--compare-cluster");
    Scenario s;
    try {
      s = io::load_scenario(input, sets_for(sets, carried, cluster, scenario.cluster.name));
    } catch (const InputError& error) {
      // The preset and the node count come from this flag: their error is the flag's. Any other
      // names its key and where its value came from, the scenario's file for a key its cluster
      // section carried.
      const InputError e = io::carried_key_error(error, input, carried, sets);
      const bool flag = e.file() == "--set" && (e.where() == "cluster" || e.where() == "cluster.nodes");
      throw InputError("<command line>", "--compare-cluster", spec + ": " + (flag ? e.message() : e.what()));
    }
    check_nodes_carry(scenario, s, spec);
    columns.push_back({s.cluster.name, simulate(s, SimulateOptions::report_only()).report});
  }
  return columns;
}

}  // namespace stepsim::sweep
