// The real cost models behind the Costs interface, and the program built with them.
#include "parallelism/costs.hpp"
#include "parallelism/program_builder.hpp"

#include <algorithm>

namespace stepsim::parallelism {

ClusterSpec with_shares(const ClusterSpec& cluster, const LinkShares& shares) {
  ClusterSpec out = cluster;
  out.intra_node.bandwidth = cluster.intra_node.bandwidth.scaled(shares.nvlink);
  out.inter_node.nic_bandwidth = cluster.inter_node.nic_bandwidth.scaled(shares.nic);
  if (shares.nics > 0) out.inter_node.nics_per_node = shares.nics;
  return out;
}

namespace {

// The thread blocks NCCL launches for `choice`, one per channel: the NVLS channels its init
// sets (collectives::nvls_channels), or for the other algorithms the channels of the graph its tuning model costs,
// which ncclTopoPostset doubles (connect.cc: comm->nChannels = min(MAXCHANNELS, nChannels * 2)).
int thread_blocks(const collectives::Choice& choice, GpuArch arch, const collectives::Request& request) {
  constexpr int kMaxChannels = 64;  // MAXCHANNELS since NCCL 2.19
  if (choice.channels == 0) return 0;
  // A send and a receive between nodes: two channels per network peer (paths.cc,
  // ncclTopoGetNchannels), and a communicator's peers take the fewest any pair needs
  // (ncclTopoComputeP2pChannels: p2pnChannelsPerPeer), each channel one thread block that
  // serves the send and the receive.
  if (request.op == CollOp::sendrecv && request.shape.nodes > 1) return 2;
  if (choice.algorithm == Algorithm::nvls || choice.algorithm == Algorithm::nvls_tree)
    return collectives::nvls_channels(arch, request.shape.nodes);
  return std::min(kMaxChannels, 2 * choice.channels);
}

}  // namespace

// Each of NCCL's thread blocks holds an SM (REFERENCE: 512–640 threads and most of its shared
// memory). Each byte a member's links carry passes its HBM once: read to be sent, written
// when received; a reduction also reads the local operand it adds to.
CollectiveCost with_gpu_shares(CollectiveCost cost, const GpuSpec& gpu, const collectives::Request& request,
                               const collectives::Choice& choice) {
  if (gpu.sms > 0)
    cost.sm_share = std::min(1.0, static_cast<double>(thread_blocks(choice, gpu.arch, request)) / gpu.sms);
  const bool reduces =
      request.op == CollOp::allreduce || request.op == CollOp::reducescatter || request.op == CollOp::reduce;
  const double per_link_byte = reduces ? 3.0 : 2.0;
  const double link_rate = (cost.load.intra + cost.load.inter) * cost.algbw.bytes_per_s();
  if (gpu.memory_bandwidth.bytes_per_s() > 0)
    cost.hbm_share = std::min(1.0, per_link_byte * link_rate / gpu.memory_bandwidth.bytes_per_s());
  return cost;
}

CollectiveCost Costs::degraded_collective(const collectives::Request& request, const LinkShares& shares) const {
  CollectiveCost cost = collective(request);
  cost.algbw = cost.algbw.scaled(std::min(shares.nvlink, shares.nic));
  return cost;
}

ModelCosts::ModelCosts(const Scenario& scenario, const hardware::GpuModel& gpu) : scenario_(scenario), gpu_(gpu) {}

Time ModelCosts::compute(const workload::OpCost& op) const { return gpu_.duration(op); }

CollectiveCost ModelCosts::collective(const collectives::Request& request) const {
  const collectives::Choice choice = collectives::predict(scenario_.cluster, scenario_.collectives, request);
  return with_gpu_shares({choice.latency, choice.algbw, collectives::link_load(request, choice)}, scenario_.cluster.gpu,
                         request, choice);
}

CollectiveCost ModelCosts::degraded_collective(const collectives::Request& request, const LinkShares& shares) const {
  const collectives::Choice choice =
      collectives::predict(with_shares(scenario_.cluster, shares), scenario_.collectives, request);
  return with_gpu_shares({choice.latency, choice.algbw, collectives::link_load(request, choice)}, scenario_.cluster.gpu,
                         request, choice);
}

Time ModelCosts::kernel_launch() const { return gpu_.kernel_launch(); }

double ModelCosts::comm_slowdown() const { return gpu_.comm_slowdown(); }

bool ModelCosts::memory_bound(const workload::OpCost& op) const { return gpu_.memory_time(op) > gpu_.compute_time(op); }

bool ModelCosts::derived_slowdown() const { return gpu_.spec().efficiency.derived_comm_slowdown; }

// Here rather than in program_builder.cpp so that programs built with other costs do not
// pull in the hardware and collective models.
engine::Program build_program(const Scenario& scenario, const workload::ModelWork& work,
                              const hardware::GpuModel& gpu) {
  const ModelCosts costs(scenario, gpu);
  return build_program(scenario, work, costs);
}

}  // namespace stepsim::parallelism
