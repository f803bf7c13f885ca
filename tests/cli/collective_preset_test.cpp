// `stepsim collective` on the shipped cluster preset against the real nccl-tests log:
// the preset that users get, not a copy of its numbers.
#include <catch2/catch.hpp>

#include <string>

#include "calibration/nccl_tests_log.hpp"
#include "collectives/collective.hpp"
#include "io/scenario_loader.hpp"

namespace stepsim {
namespace {

double predicted_busbw(const ClusterSpec& cluster, Bytes size) {
  collectives::Request req;
  req.op = CollOp::allreduce;
  req.size = size;
  req.shape = {8, 1, 8};
  const auto choice = collectives::predict(cluster, CollectivesSpec{}, req);
  const double algbw = size.as_double() / choice.time().seconds();
  return algbw * collectives::bus_factor(CollOp::allreduce, 8) * 1e-9;
}

// Checks the preset's busbw against every row of an nccl-tests log from `from` up, within
// `tolerance`; returns the rows checked.
int rows_checked(const char* file, Bytes from, double tolerance) {
  const ClusterSpec cluster = io::load_cluster("dgx-a100-80g-hdr", 8);
  const auto log = calibration::read_nccl_tests(std::string(STEPSIM_TEST_DATA "/nccl-tests/") + file);
  int checked = 0;
  for (const auto& row : log.rows) {
    if (row.size < from) continue;
    const double measured = row.out_of_place.busbw.gbytes_per_s();
    INFO(file << " size " << row.size.count() << " B: measured " << measured << " GB/s");
    CHECK(predicted_busbw(cluster, row.size) == Approx(measured).epsilon(tolerance));
    ++checked;
  }
  return checked;
}

}  // namespace

TEST_CASE("the dgx-a100-80g-hdr preset matches its fitted nccl-tests log within 12 percent from 4 MiB") {
  CHECK(rows_checked("a100-80g-8gpu-allreduce-a.txt", Bytes::mib(4), 0.12) == 11);
}

TEST_CASE("the dgx-a100-80g-hdr preset predicts the unfitted nccl-tests log within 10 percent from 1 MiB") {
  CHECK(rows_checked("a100-80g-8gpu-allreduce-b.txt", Bytes::mib(1), 0.10) == 8);
}

TEST_CASE("the dgx-a100-80g-hdr preset's latency floor is within 25 percent of nccl-tests") {
  const ClusterSpec cluster = io::load_cluster("dgx-a100-80g-hdr", 8);
  const auto log = calibration::read_nccl_tests(STEPSIM_TEST_DATA "/nccl-tests/a100-80g-8gpu-allreduce-a.txt");
  for (const auto& row : log.rows) {
    if (row.size > Bytes::kib(4)) continue;
    collectives::Request req{CollOp::allreduce, row.size, {8, 1, 8}};
    const double predicted_us = collectives::predict(cluster, CollectivesSpec{}, req).time().us();
    INFO("size " << row.size.count() << " B");
    CHECK(predicted_us == Approx(row.out_of_place.time.us()).epsilon(0.25));
  }
}

TEST_CASE("the dgx-h100-ndr preset predicts about 480 GB/s NVLS AllReduce busbw at large sizes") {
  const ClusterSpec cluster = io::load_cluster("dgx-h100-ndr", 8);
  CHECK(predicted_busbw(cluster, Bytes::gib(8)) == Approx(480).epsilon(0.05));
}

}  // namespace stepsim

namespace stepsim {
namespace {

double two_node_busbw(const char* preset, Bytes size, Algorithm algorithm) {
  const ClusterSpec cluster = io::load_cluster(preset, 16);
  collectives::Request req;
  req.op = CollOp::allreduce;
  req.size = size;
  req.shape = {16, 2, 8};
  CollectivesSpec forced;
  forced.algorithm = algorithm;
  const auto choice = collectives::predict(cluster, forced, req);
  return size.as_double() / choice.time().seconds() * collectives::bus_factor(CollOp::allreduce, 16) * 1e-9;
}

}  // namespace

// NVIDIA's published peaks (GTC 2024, S62129), compared at 8 GiB per rank (docs/validation.md).
TEST_CASE("two-node AllReduce on the DGX presets is within 10 percent of NVIDIA's published peaks") {
  CHECK(two_node_busbw("dgx-a100-80g-hdr", Bytes::gib(8), Algorithm::ring) == Approx(192).epsilon(0.10));
  CHECK(two_node_busbw("dgx-h100-ndr", Bytes::gib(8), Algorithm::ring) == Approx(380).epsilon(0.10));
  CHECK(two_node_busbw("dgx-h100-ndr", Bytes::gib(8), Algorithm::automatic) == Approx(480).epsilon(0.10));
  // stepsim collective allreduce --cluster dgx-h100-ndr --gpus 16 --ranks-per-node 8 --size 1GiB --algorithm ring
  CHECK(two_node_busbw("dgx-h100-ndr", Bytes::gib(1), Algorithm::ring) == Approx(380).epsilon(0.10));
}

}  // namespace stepsim
