// The slowdown of compute derived from what NCCL's kernels take of the GPU
// (cluster.gpu.efficiency.derived_comm_slowdown): the shares each collective takes, by hand,
// and whole scenarios through simulate().
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "collectives/collective.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/costs.hpp"
#include "stepsim/report.hpp"

namespace sp = stepsim::parallelism;
using stepsim::Algorithm;
using stepsim::Bandwidth;
using stepsim::CollOp;

namespace {

stepsim::GpuSpec gpu(stepsim::GpuArch arch, int sms, double hbm_tb_per_s) {
  stepsim::GpuSpec g;
  g.arch = arch;
  g.sms = sms;
  g.memory_bandwidth = Bandwidth::gbytes_per_s(hbm_tb_per_s * 1000);
  return g;
}

sp::CollectiveCost shares(const stepsim::GpuSpec& g, CollOp op, Algorithm algorithm, int channels, int nodes = 1) {
  stepsim::collectives::Request request;
  request.op = op;
  request.shape = {8 * nodes, nodes, 8};
  stepsim::collectives::Choice choice;
  choice.algorithm = algorithm;
  choice.channels = channels;
  // 100 GB/s of algorithm bandwidth; a ring AllReduce's member sends 2(n-1)/n = 1.75 bytes per
  // algorithm byte on its NVLink port, an AllGather's (n-1)/n = 0.875.
  const double per_byte = op == CollOp::allreduce ? 1.75 : 0.875;
  return sp::with_gpu_shares({stepsim::Time::from_us(10), Bandwidth::gbytes_per_s(100), {per_byte, 0}}, g, request,
                             choice);
}

double compute_slowdown(const std::vector<std::string>& sets) {
  return stepsim::simulate(stepsim::io::load_scenario("default", sets)).report.compute_slowdown_s;
}

}  // namespace

TEST_CASE("an NCCL kernel takes an SM for each of its thread blocks and HBM bandwidth for the bytes its links carry") {
  const stepsim::GpuSpec h100 = gpu(stepsim::GpuArch::hopper, 132, 3.35);
  // NCCL doubles the 12 channels of the ring graph its model costs: 24 thread blocks of 132 SMs
  // (the DGX H100 figure of 24 channels). The AllReduce's 175 GB/s each way on NVLink pass HBM
  // three times (read to send, written on receipt, the local operand read for the sum).
  const sp::CollectiveCost ring = shares(h100, CollOp::allreduce, Algorithm::ring, 12);
  CHECK(ring.sm_share == Approx(24.0 / 132));
  CHECK(ring.hbm_share == Approx(3 * 175e9 / 3.35e12));
  // An AllGather reduces nothing: 87.5 GB/s each way, twice through HBM.
  CHECK(shares(h100, CollOp::allgather, Algorithm::ring, 12).hbm_share == Approx(2 * 87.5e9 / 3.35e12));
  // NVLS runs NVLS_NCHANNELS_SM90 = 16 thread blocks on Hopper, whatever its model's heads.
  CHECK(shares(h100, CollOp::allreduce, Algorithm::nvls, 8).sm_share == Approx(16.0 / 132));
  // On Blackwell 24 inside one NVLink domain, 32 across them (NVLS_NCHANNELS_SM100[_NVL]).
  const stepsim::GpuSpec b200 = gpu(stepsim::GpuArch::blackwell, 148, 8.0);
  CHECK(shares(b200, CollOp::allreduce, Algorithm::nvls, 8).sm_share == Approx(24.0 / 148));
  CHECK(shares(b200, CollOp::allreduce, Algorithm::nvls_tree, 8, 2).sm_share == Approx(32.0 / 148));
  // An A100's 108 SMs: the same 24 thread blocks take a larger share.
  CHECK(shares(gpu(stepsim::GpuArch::ampere, 108, 2.039), CollOp::allreduce, Algorithm::ring, 12).sm_share ==
        Approx(24.0 / 108));
}

TEST_CASE("a send and receive between nodes takes the two channels NCCL gives a network peer") {
  const stepsim::GpuSpec h100 = gpu(stepsim::GpuArch::hopper, 132, 3.35);
  // Across nodes: two channels per network peer (ncclTopoGetNchannels), each a thread block
  // serving the send and the receive, whatever the ring graph's 16 channels.
  CHECK(shares(h100, CollOp::sendrecv, Algorithm::ring, 16, 2).sm_share == Approx(2.0 / 132));
  // Inside a node over NVLink, a peer gets up to the communicator's channels, which NCCL
  // doubles from the ring graph's: 32 thread blocks.
  CHECK(shares(h100, CollOp::sendrecv, Algorithm::ring, 16).sm_share == Approx(32.0 / 132));
}

TEST_CASE("the derived slowdown costs time that more SMs per GPU make smaller") {
  const std::string derived = "cluster.gpu.efficiency.derived_comm_slowdown=true";
  const double h100 = compute_slowdown({derived});
  CHECK(h100 > 0);
  // Twice the SMs: the same thread blocks take half the share, so compute-bound kernels lose
  // less (memory-bound ones lose the same HBM share).
  CHECK(compute_slowdown({derived, "cluster.gpu.sms=264"}) < h100);
}

TEST_CASE("the step with the derived slowdown is no shorter than with none") {
  const auto step = [](const std::vector<std::string>& sets) {
    return stepsim::simulate(stepsim::io::load_scenario("default", sets)).report.step_time_s;
  };
  const double none = step({"cluster.gpu.efficiency.comm_slowdown=0"});
  CHECK(step({"cluster.gpu.efficiency.derived_comm_slowdown=true"}) >= none);
}
