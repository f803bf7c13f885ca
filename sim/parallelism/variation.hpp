// Ranks that differ (simulation.variation) applied to a built Program: compute speeds and
// jitter for the engine, link factors on the ranks' link resources, and in representative
// mode the expected wait for the slowest member of each collective under jitter.
#pragma once

#include <string>
#include <vector>

#include "engine/program.hpp"
#include "parallelism/costs.hpp"
#include "parallelism/fabric.hpp"
#include "parallelism/jitter_max.hpp"
#include "parallelism/mesh.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::parallelism {

// Compute speed of global rank `rank`: its own factor times its node's.
double speed_factor(const Scenario& s, int rank);

// The share of its bandwidth that global rank `rank`'s link of `kind` carries: link factors
// of the rank and of its node, failed NICs of its node, other jobs' traffic (NICs only).
// The one place that maps (rank or node, link kind) to a capacity.
double link_factor(const Scenario& s, int rank, LinkKind kind);

// The speed the slowest NVLink port and the slowest NIC of a group's members run at, as a
// share of their line rate (degraded links, or faster ones above 1): NCCL's cost of the
// group's collectives is the one on those links. Failed NICs leave the rate as it is: NCCL,
// which finds a node's NICs at init, costs the group on the working NICs of its node with the
// fewest (LinkShares::nics), and the node's GPUs share the NICs left (link_factor), as on a
// node built with fewer NICs. Other jobs' traffic, which NCCL never sees, scales the link
// resources only.
LinkShares link_shares(const Scenario& s, const RankGroup& members);
LinkShares link_shares(const Scenario& s, const std::vector<int>& members);

// Applies the scenario's variation to `program`; `links[i]` are the ports of program.ranks[i],
// `members[g]` the real ranks of program.groups[g]. A degraded port or NIC is scaled once,
// however many simulated ranks share it. (Collectives got their cost on degraded links when
// they were built: link_shares.) In representative mode under jitter, the program gets its
// arrival model (jitter_arrivals).
void apply_variation(engine::Program& program, const Scenario& s, const std::vector<RankPorts>& links,
                     const std::vector<RankGroup>& members);

// A GPU's compute speed and the shares of its links (speed_factor, link_factor).
struct Hardware {
  double speed = 1;
  double nic = 1;
  double nvlink = 1;
};

// What singles out GPUs: each figure of a GPU against the largest any GPU of the job has, so
// that what every GPU shares (other jobs' traffic, one factor on every node) singles out none.
class HardwareSpread {
 public:
  explicit HardwareSpread(const Scenario& s);
  // Global rank `rank`'s figures as fractions of the fastest GPU's (1: as fast as any).
  Hardware own(int rank) const;
  // Which varied resource makes `rank` slower than the others, in words ("" when none): for
  // the report's straggler.
  std::string cause(int rank) const;

 private:
  const Scenario& s_;
  Hardware fastest_;
};

}  // namespace stepsim::parallelism
