// compare_clusters(): one job, several clusters; the table a pre-purchase question needs.
#include "cli/cluster_comparison.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <ostream>

#include "io/on_cluster.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"
#include "sweep/plan.hpp"

namespace stepsim::cli {
namespace {

// The scenario's assignments on the preset of "NAME" or "NAME@PRICE" (as plan's --cluster takes
// it): the preset with the scenario's own cluster keys, of its file and of --set, carried to it
// as plan carries them (io::sets_on_cluster), and the price of @PRICE. The scenario's price
// (its file's or --set cluster.gpu_hour_price) is its own cluster's: another preset given
// without @PRICE has none, rather than a price nobody gave it; the scenario's own preset keeps it.
std::vector<std::string> sets_for(const std::vector<std::string>& sets, const std::vector<std::string>& carried,
                                  const sweep::PlanCluster& cluster, const std::string& own) {
  std::vector<std::string> out = io::sets_on_cluster(cluster.name, carried, sets);
  if (cluster.gpu_hour_price > 0)
    out.push_back(fmt::format("cluster.gpu_hour_price={}", cluster.gpu_hour_price));
  else if (cluster.name != own)
    out.push_back("cluster.gpu_hour_price=0");
  return out;
}

std::string or_dash(bool known, const std::string& text) { return known ? text : "-"; }

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

std::vector<ClusterColumn> compare_clusters(const io::ScenarioInput& input, const std::vector<std::string>& sets,
                                            const Scenario& scenario, const Report& own,
                                            const std::vector<std::string>& others) {
  std::vector<ClusterColumn> columns{{scenario.cluster.name, own}};
  const std::vector<std::string> clusters = sweep::split_cluster_lists(others);
  if (clusters.empty()) return columns;
  const std::vector<std::string> carried =
      io::carried_cluster_sets(input, sets, "--compare-cluster", "compare without --compare-cluster");
  for (const std::string& spec : clusters) {
    const sweep::PlanCluster cluster = sweep::parse_cluster_spec(spec, "--compare-cluster");
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

void write_cluster_comparison(const std::vector<ClusterColumn>& columns, const std::string& layout, std::ostream& out) {
  using Cell = std::function<std::string(const Report&)>;
  const std::pair<const char*, Cell> rows[] = {
      {"step time", [](const Report& r) { return fmt::format("{:.3f} s", r.step_time_s); }},
      {"tokens per second", [](const Report& r) { return fmt::format("{:.0f}", r.throughput.tokens_per_s); }},
      {"MFU", [](const Report& r) { return fmt::format("{:.1f} %", 100 * r.throughput.mfu); }},
      {"exposed communication",
       [](const Report& r) { return fmt::format("{:.1f} %", 100 * r.overlap.exposed_fraction_of_step); }},
      {"memory per GPU",
       [](const Report& r) {
         return fmt::format("{:.1f} GiB{}", r.memory_bytes.device / 1073741824.0,
                            r.memory_bytes.fits ? "" : " (too large)");
       }},
      // Significant digits, as the report's own table writes them: fixed decimals made 0.0081,
      // 0.0067 and 0.0056 kWh (A100, H100, B200) all "0.01 kWh", the difference the table is for.
      {"energy per M tokens",
       [](const Report& r) {
         return or_dash(r.cost.gpu_power_w > 0, fmt::format("{:.3g} kWh", r.cost.energy_per_mtoken_kwh));
       }},
      {"cost per M tokens",
       [](const Report& r) {
         return or_dash(r.cost.gpu_hour_price > 0, fmt::format("{:.4g}", r.cost.cost_per_mtoken));
       }},
      {"GPU-hour price",
       [](const Report& r) { return or_dash(r.cost.gpu_hour_price > 0, fmt::format("{:g}", r.cost.gpu_hour_price)); }},
  };
  // Each column as wide as its widest cell and two spaces more (at least 20), so that a long
  // cell ("126.3 GiB (too large)") never runs into the one before it.
  std::vector<std::size_t> widths;
  for (const ClusterColumn& c : columns) {
    std::size_t width = std::max<std::size_t>(20, c.cluster.size() + 2);
    for (const auto& [label, cell] : rows) width = std::max(width, cell(c.report).size() + 2);
    widths.push_back(width);
  }
  out << "\nsame job on other clusters, with the same layout (" << layout
      << ") held fixed: a layout chosen for one cluster can mislead on another ('stepsim plan' finds each "
         "cluster's own fastest layout)\n"
      << fmt::format("  {:<24}", "");
  for (std::size_t i = 0; i < columns.size(); ++i) out << fmt::format("{:>{}}", columns[i].cluster, widths[i]);
  out << '\n';
  for (const auto& [label, cell] : rows) {
    out << fmt::format("  {:<24}", label);
    for (std::size_t i = 0; i < columns.size(); ++i) out << fmt::format("{:>{}}", cell(columns[i].report), widths[i]);
    out << '\n';
  }
  // The scenario's price beside a cluster without one: say why that one's cost is "-".
  const auto unpriced = [](const ClusterColumn& c) { return c.report.cost.gpu_hour_price <= 0; };
  if (!unpriced(columns.front()) && std::any_of(columns.begin() + 1, columns.end(), unpriced))
    out << "  -: no price given for that cluster (--compare-cluster NAME@PRICE); the scenario's price is its own "
           "cluster's\n";
}

}  // namespace stepsim::cli
