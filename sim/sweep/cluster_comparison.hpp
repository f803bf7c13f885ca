// `simulate --compare-cluster NAME[@PRICE]` and stepsim.simulate(compare_cluster=...): the same
// job on other clusters, each simulated with the layout held fixed.
#pragma once

#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::sweep {

struct ClusterColumn {
  std::string cluster;
  Report report;
};

// The scenario (as read once, with sets; `scenario` as loaded) simulated again on each "NAME" or
// "NAME@PRICE" (price of one GPU-hour) in `others`, or in their comma-separated lists, each parsed
// as plan's --cluster is (parse_cluster_spec); the first column is the scenario's own
// cluster. The keys of the scenario's own cluster (its file's cluster section and the --set
// cluster keys, but the preset and the node count) carry to each preset as plan carries them
// (io::sets_on_cluster): the scenario's own preset as a column runs exactly the scenario. The
// price is not carried: a cluster's price is its @PRICE, and one given without @PRICE has none
// (its cost "-"), but the scenario's own preset, whose price the scenario gives. Variation given by node is
// refused on a cluster with other GPUs (or, for failed NICs, other NICs) per node, naming its key: node N would be
// other hardware there, and so is a scenario with calibration files (check_comparable). Errors
// name --compare-cluster, the Python argument's words as well.
std::vector<ClusterColumn> compare_clusters(const io::ScenarioInput& input, const std::vector<std::string>& sets,
                                            const Scenario& scenario, const Report& own,
                                            const std::vector<std::string>& others);

// Refuses comparing a scenario that has calibration files with `others` (when there are any):
// the files were measured on its own GPUs and do not describe the other clusters.
void check_comparable(const Scenario& scenario, const std::vector<std::string>& others);

}  // namespace stepsim::sweep
