// write_cluster_comparison(): the table of `simulate --compare-cluster`.
#include "cli/cluster_comparison.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <ostream>

namespace stepsim::cli {
namespace {

std::string or_dash(bool known, const std::string& text) { return known ? text : "-"; }

}  // namespace

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
