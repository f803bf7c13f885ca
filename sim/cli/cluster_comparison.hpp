// `simulate --compare-cluster NAME[@PRICE]`: the same job on other clusters, side by side with
// step time, tokens/s, MFU, exposed communication, memory, energy and cost per million tokens.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"

namespace stepsim::cli {

struct ClusterColumn {
  std::string cluster;
  Report report;
};

// The scenario (as read once, with sets; `scenario` as loaded) simulated again on each "NAME" or
// "NAME@PRICE" (price of one GPU-hour) in `others`, or in their comma-separated lists, each parsed
// as plan's --cluster is (sweep::parse_cluster_spec); the first column is the scenario's own
// cluster. The keys of the scenario's own cluster (its file's cluster section and the --set
// cluster keys, but the preset and the node count) carry to each preset as plan carries them
// (io::sets_on_cluster): the scenario's own preset as a column runs exactly the scenario. The
// price is not carried: a cluster's price is its @PRICE, and one given without @PRICE has none
// (its cost "-"), but the scenario's own preset, whose price the scenario gives. Variation given by node is
// refused on a cluster with other GPUs (or, for failed NICs, other NICs) per node, naming its key: node N would be
// other hardware there.
std::vector<ClusterColumn> compare_clusters(const io::ScenarioInput& input, const std::vector<std::string>& sets,
                                            const Scenario& scenario, const Report& own,
                                            const std::vector<std::string>& others);

// `layout` names the parallel layout every column runs: it is held fixed, not searched per
// cluster, and the heading says so (and that `stepsim plan` searches it).
void write_cluster_comparison(const std::vector<ClusterColumn>& columns, const std::string& layout, std::ostream& out);

}  // namespace stepsim::cli
