// What physics allows a measured collective: each rank moves at least a share of the bytes
// over its own links, so no measurement can be faster than those links carry it.
#pragma once

#include <optional>
#include <string>

#include "calibration/calibration.hpp"
#include "collectives/collective.hpp"

namespace stepsim::calibration {

// A measured communicator of `ranks` ranks on `hosts` hosts (as nccl-tests logs and calibration
// files count them, ranks filling each host in turn) as the collective model takes it: a node
// of its shape is an NVLink domain (a host on a DGX, a 72-GPU rack of 18 trays on GB200 NVL72),
// with as many ranks in each; where the domains hold different numbers, the fewest, as the
// simulation shapes its groups.
collectives::GroupShape domain_shape(const ClusterSpec& cluster, int ranks, int hosts);

// The least a rank of an `op` of `ranks` ranks inside one NVLink domain sends or receives, as
// a share of nccl-tests' size S: for AllReduce all of it where the switch reduces (NVLS, the
// cluster's intra_node.nvls), else 2(n − 1)/n (every rank's contribution to an element must
// be combined and the result sent back, Patarasuk and Yuan's bound); Broadcast, Reduce and
// SendRecv all of it; (n − 1)/n for AllGather, ReduceScatter and AllToAll (S being the whole
// buffer); nothing for a single rank.
double min_traffic_share(CollOp op, int ranks, bool switch_reduces);

// One measurement's bound: throws an InputError at (`file`, `place`) when `bytes` of `op` in
// `time_us` on `ranks` ranks over `hosts` hosts would need more than `cluster`'s links carry
// per direction. Each rank moves its share over its NVLink port (and, across NVLink domains,
// its share of the NICs besides); across domains each domain also moves over its hosts' NICs
// at least S for AllReduce (each element's final value depends on every domain's data, so
// every domain sends and receives at least one value per element, even with the switch
// reducing), (D − 1)/D · S for AllGather and ReduceScatter, S for Broadcast, Reduce and
// SendRecv, and its ranks' bytes to other domains for AllToAll.
void check_within_links(const ClusterSpec& cluster, CollOp op, int ranks, int hosts, double bytes, double time_us,
                        const std::string& file, const std::string& place);

// Every measured point of `c`'s collective tables against `cluster`.
void check_within_links(const Calibration& c, const ClusterSpec& cluster);

// The cluster preset whose GPU is `gpu` (CUDA's device name) with the fastest links, to
// check an import against; empty when no preset has that GPU.
std::optional<ClusterSpec> fastest_cluster_with(const std::string& gpu);

// The most GPUs a host of the cluster presets whose GPU is `gpu` holds; 0 when no preset has it.
int most_gpus_per_host(const std::string& gpu);

// The GPU check, the peak and links checks and the algorithm and protocol check together: what a
// calibration must pass before it stands for measurements on `cluster` of collectives run
// as `forced` says. Without `forced` each table stands for collectives run as it was measured
// (`calibrate check` without a scenario), and the algorithm and protocol check is left out.
void check_fits(const Calibration& c, const ClusterSpec& cluster, const std::optional<CollectivesSpec>& forced);

}  // namespace stepsim::calibration
