// NCCL's cost model: for one collective on one group shape, the (algorithm, protocol) pair
// NCCL would choose (or the forced one), its latency and algorithm bandwidth.
#pragma once

#include <string>
#include <vector>

#include "network/resource.hpp"
#include "stepsim/scenario.hpp"
#include "stepsim/timeline.hpp"
#include "stepsim/units.hpp"

namespace stepsim::collectives {

// How the members of a communicator are spread over the cluster.
struct GroupShape {
  int ranks = 1;
  int nodes = 1;           // nodes spanned
  int ranks_per_node = 1;  // members per node (ranks = nodes · ranks_per_node)

  bool operator==(const GroupShape&) const = default;
};

struct Request {
  CollOp op = CollOp::allreduce;
  Bytes size{0};  // nccl-tests S: per-rank buffer (AllReduce), whole buffer (AllGather, ...)
  GroupShape shape;
  // What communicates: NCCL's cost does not depend on it, but the element type it moves does
  // (gradients in grad_reduce_dtype, activations and parameters in 16 bits), and a measured
  // table is of one type.
  CommKind kind = CommKind::other;
};

struct Choice {
  Algorithm algorithm = Algorithm::ring;
  Protocol protocol = Protocol::simple;
  int channels = 1;
  Time latency;
  Bandwidth algbw;
  Time time() const;  // latency + size / algbw for the request it was made for
  Bytes size{0};
  Time nccl_time;  // NCCL's own untuned estimate, by which NCCL chooses the pair
};

// nccl-tests' bus-bandwidth factor: 2(n−1)/n for AllReduce, (n−1)/n for AllGather, ...
double bus_factor(CollOp op, int ranks);

const char* to_string(Algorithm a);
const char* to_string(Protocol p);

// The fastest enabled (algorithm, protocol) pair, or the one `forced` names.
Choice predict(const ClusterSpec& cluster, const CollectivesSpec& forced, const Request& request);

// How many channels (CTAs) NCCL runs algorithm `a` on for the request by default: the
// communicator's ring channels for every algorithm but NVLS and NVLS-Tree, which have their own
// (nvls_channels, over `nodes` NVLink domains).
int nccl_channels(const ClusterSpec& cluster, const Request& request, Algorithm a);
int nvls_channels(GpuArch arch, int nodes);

// Every enabled pair with its prediction, fastest first (for `stepsim collective -v`).
std::vector<Choice> candidates(const ClusterSpec& cluster, const CollectivesSpec& forced, const Request& request);

}  // namespace stepsim::collectives

namespace stepsim::collectives {

// Link bytes that one member moves per algorithm byte (size / time) on its intra-node port
// and on its NIC, so that concurrent collectives can share links max-min fairly.
struct LinkLoad {
  double intra = 0;
  double inter = 0;
  // The cross-node traffic runs on NCCL's double binary tree over the nodes (Tree, NVLS-Tree),
  // not on its rings: other node pairs, so other bytes over a leaf's uplinks.
  bool tree = false;
};

LinkLoad link_load(const Request& request, const Choice& choice);

}  // namespace stepsim::collectives
