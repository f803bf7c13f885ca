// `simulate --compare-cluster NAME[@PRICE]`: the table of the same job on other clusters, side
// by side with step time, tokens/s, MFU, exposed communication, memory, energy and cost per
// million tokens (the columns: sweep::compare_clusters).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "sweep/cluster_comparison.hpp"

namespace stepsim::cli {

using sweep::ClusterColumn;

// `layout` names the parallel layout every column runs: it is held fixed, not searched per
// cluster, and the heading says so (and that `stepsim plan` searches it).
void write_cluster_comparison(const std::vector<ClusterColumn>& columns, const std::string& layout, std::ostream& out);

}  // namespace stepsim::cli
