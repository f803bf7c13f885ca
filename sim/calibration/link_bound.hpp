// What physics allows a measured collective: each rank moves at least a share of the bytes
// over its own links, so no measurement can be faster than those links carry it.
#pragma once

#include <optional>
#include <string>

#include "calibration/calibration.hpp"

namespace stepsim::calibration {

// The least a rank of an `op` of `ranks` ranks sends or receives, as a share of nccl-tests'
// size S: all of it for AllReduce (every element leaves or reaches each rank once even when
// the switch reduces), Broadcast, Reduce and SendRecv; (n − 1)/n for AllGather,
// ReduceScatter and AllToAll (S being the whole buffer); nothing for a single rank.
double min_traffic_share(CollOp op, int ranks);

// One measurement's bound: throws an InputError at (`file`, `place`) when `bytes` of `op`
// in `time_us` would need more than a rank's links in `cluster` carry per direction (its
// NVLink port inside a node; that and its share of the node's NICs across nodes).
void check_within_links(const ClusterSpec& cluster, CollOp op, int ranks, int nodes, double bytes, double time_us,
                        const std::string& file, const std::string& place);

// Every measured point of `c`'s collective tables against `cluster`.
void check_within_links(const Calibration& c, const ClusterSpec& cluster);

// The cluster preset whose GPU is `gpu` (CUDA's device name) with the fastest links, to
// check an import against; empty when no preset has that GPU.
std::optional<ClusterSpec> fastest_cluster_with(const std::string& gpu);

// The GPU check, the peak and links checks and the algorithm and protocol check together: what a
// calibration must pass before it stands for measurements on `cluster` of collectives run
// as `forced` says.
void check_fits(const Calibration& c, const ClusterSpec& cluster, const CollectivesSpec& forced);

}  // namespace stepsim::calibration
