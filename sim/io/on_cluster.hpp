// A scenario put on another cluster preset (`simulate --compare-cluster`, `plan --cluster`,
// `sweep --vary cluster=`): the preset replaces the scenario's cluster, and the keys its own
// cluster section writes (and the --set cluster keys) carry to it, as --set cluster.KEY would
// apply them, but the preset's name and the node count, which the layout derives again.
#pragma once

#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"

namespace stepsim::io {

// The name of a scenario input in errors: its path, or "<default>" for the embedded default.
std::string scenario_name(const ScenarioInput& scenario);

// The keys `scenario`'s own text writes in its cluster section as "cluster.KEY=VALUE" (VALUE
// its JSON text), in the order written, but `preset` and `nodes`; none where the section is a
// preset's name alone (or the scenario is the embedded default), or where `sets` replace the
// section ("cluster=..."). A GPU of the section's own ("gpu") is refused, naming the key: it
// would replace the GPU of every cluster `flag` names ("--cluster"); the message offers
// `alone` ("plan its cluster alone (without --cluster)") or --set cluster.gpu=..., which swaps
// every cluster's GPU.
std::vector<std::string> carried_cluster_sets(const ScenarioInput& scenario, const std::vector<std::string>& sets,
                                              const std::string& flag, const std::string& alone);

// `carried` as it applies on cluster preset (or file) `name`: the scenario's nvlink_domain says
// how many GPUs of its own rack's multi-node NVLink domain the job takes (64 of an NVL72's 72),
// and stays behind on a cluster whose NVLink domain is its node (a DGX), where it would join
// nodes by NVLink they do not have. A name that does not load keeps them all (loading the
// scenario on it refuses it).
std::vector<std::string> carried_to(const std::string& name, const std::vector<std::string>& carried);

// The assignments that put the scenario, with the user's `sets`, on the cluster preset `name`:
// "cluster=NAME", then `carried` (carried_cluster_sets, as carried_to `name`), then `sets` (which win) but those that
// name the scenario's own preset or node count ("cluster=", "cluster.nodes="; of a
// "cluster={...}" object, its other keys are kept as cluster.KEY), then "cluster.nodes=0"
// (derived from the layout again).
std::vector<std::string> sets_on_cluster(const std::string& name, const std::vector<std::string>& carried,
                                         const std::vector<std::string>& sets);

// `e`, an error of loading such assignments: a refusal of a key that `carried` brought from the
// scenario's file (and that `sets` do not also give) is said of the file, where "--set" named it.
InputError carried_key_error(const InputError& e, const ScenarioInput& scenario,
                             const std::vector<std::string>& carried, const std::vector<std::string>& sets);

}  // namespace stepsim::io
