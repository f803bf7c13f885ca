// NCCL's tuning constants, carried over as data: the values of NCCL 2.28.9 (tag v2.28.9-1),
// src/graph/tuning.cc (ncclTunerConstantsDefaults, nvlsEfficiency) and src/graph/search.cc
// (the speed arrays), all of one version; docs/model.md lists the most important ones.
#include "collectives/nccl_facts.hpp"

#include <cmath>

#include "stepsim/error.hpp"

namespace stepsim::collectives {
namespace {

constexpr std::array<double, 13> kAmpereIntra{40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
constexpr std::array<double, 19> kAmpereInter{48, 30, 28, 24, 20, 18,  15,  12,   10,  9,
                                              7,  6,  5,  4,  3,  2.4, 1.2, 0.24, 0.12};
constexpr std::array<double, 11> kHopperIntra{60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
constexpr std::array<double, 17> kHopperInter{48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
constexpr std::array<double, 11> kBlackwellIntra{90, 80, 70, 60, 50, 40, 30, 24, 20, 19, 18};
constexpr std::array<double, 18> kBlackwellInter{96,   48, 45.1, 42, 40, 30,  24,  22,   20,
                                                 17.5, 15, 12,   6,  3,  2.4, 1.2, 0.24, 0.12};

const ArchFacts kAmpere{
    .nvlink_fraction = 20.0 / 25.0,
    .intra_speeds = kAmpereIntra,
    .inter_speeds = kAmpereInter,
    .dup_min_speed = 25.0,
    .dup_many_channels_speed = 25.0,  // ccMin 80: the 4-channel rule does not apply
    .ll_max_bw = {87.7, 39.0, 20.4},
    .ring_ll128_per_channel = {20.0, 20.0, 20.0},
    .tree_ll128_per_channel = {20.0, 20.0, 20.0},
    .tree_per_channel = {24.0, 23.6, 17.8},
    .nvls_tree_per_channel = {24.0, 23.6, 17.8},
    .nvls_efficiency = 0.0,
    .tree_pattern_penalty = false,
};

const ArchFacts kHopper{
    .nvlink_fraction = 20.6 / 25.0,
    .intra_speeds = kHopperIntra,
    .inter_speeds = kHopperInter,
    .dup_min_speed = 25.0,
    .dup_many_channels_speed = 50.0,
    .ll_max_bw = {141.0, 39.0, 20.4},
    .ring_ll128_per_channel = {36.7, 36.7, 36.7},
    .tree_ll128_per_channel = {36.7, 36.7, 29.0},
    .tree_per_channel = {38.7, 41.4, 36.0},
    .nvls_tree_per_channel = {0.0, 57.7, 45.5},
    .nvls_efficiency = 0.85,
    .tree_pattern_penalty = true,
};

const ArchFacts kBlackwell{
    .nvlink_fraction = 40.1 / 50.0,
    .intra_speeds = kBlackwellIntra,
    .inter_speeds = kBlackwellInter,
    .dup_min_speed = 25.0,
    .dup_many_channels_speed = 50.0,
    .ll_max_bw = {282.0, 39.0, 20.4},
    // 2 · 36.7 on one node and beyond two, 34.6 on two (NCCL 2.25 to 2.28.3 had 2 · 36.7 on
    // two nodes as well; 2.29 has {34.5, 34.6, 34.5} and 2.30 {40, 40, 40}).
    .ring_ll128_per_channel = {73.4, 34.6, 73.4},
    .tree_ll128_per_channel = {55.6, 31.67, 20.0},
    .tree_per_channel = {70.0, 42.8, 24.0},
    .nvls_tree_per_channel = {0.0, 96.0, 43.8},
    .nvls_efficiency = 0.74,
    .tree_pattern_penalty = true,
};

// Rows: Tree, Ring, NVLS, NVLS-Tree, PAT; columns LL, LL128, Simple.
constexpr int kRows = 5;
using LatencyTable = std::array<std::array<double, 3>, kRows>;
constexpr LatencyTable kBase{{{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}}};
constexpr LatencyTable kNvlink{{{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}}};
constexpr LatencyTable kPci{{{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}}};
constexpr LatencyTable kNet{{{5.0, 8.5, 14}, {2.7, 4.0, 14}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}}};

// NCCL keeps no latency row for CollNet (off here) or Direct (point-to-point, which uses
// the Ring figures for its one hop).
int latency_row(Algorithm a) {
  switch (a) {
    case Algorithm::tree:
      return 0;
    case Algorithm::nvls:
      return 2;
    case Algorithm::nvls_tree:
      return 3;
    case Algorithm::pat:
      return 4;
    default:
      return 1;
  }
}

constexpr std::array<std::array<double, 23>, 3> kTreeCorrection{{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
}};

// Where log2(bytes / 64) reaches the next whole number.
constexpr std::array<double, 23> kTreeCorrectionSteps = [] {
  std::array<double, 23> steps{};
  for (std::size_t k = 0; k < steps.size(); ++k) steps[k] = 128.0 * static_cast<double>(1LL << k);
  return steps;
}();

}  // namespace

int protocol_index(Protocol p) {
  STEPSIM_CHECK(p != Protocol::automatic, "a concrete protocol is needed");
  return static_cast<int>(p) - 1;
}

const ArchFacts& arch_facts(GpuArch arch) {
  switch (arch) {
    case GpuArch::ampere:
      return kAmpere;
    case GpuArch::hopper:
      return kHopper;
    case GpuArch::blackwell:
      return kBlackwell;
  }
  return kHopper;
}

int nodes_index(int nodes) { return nodes <= 2 ? nodes - 1 : 2; }

double ll_max_bw_gbps(const ArchFacts& arch, HostCpu cpu, int nodes) {
  // llMaxBws' second row, which NCCL reads across nodes where the CPU vendor is AMD (or mixed).
  constexpr std::array<double, 3> kAmdHosts{87.7, 22.5, 19.0};
  const auto i = static_cast<std::size_t>(nodes_index(nodes));
  return i > 0 && cpu == HostCpu::amd ? kAmdHosts[i] : arch.ll_max_bw[i];
}

double net_overhead_us(HostCpu cpu) { return cpu == HostCpu::amd ? 2.0 : 1.0; }

double base_latency_us(Algorithm a, Protocol p) {
  return kBase[static_cast<std::size_t>(latency_row(a))][static_cast<std::size_t>(protocol_index(p))];
}

double hop_latency_us(Hw hw, Algorithm a, Protocol p) {
  const LatencyTable& table = hw == Hw::nvlink ? kNvlink : hw == Hw::pci ? kPci : kNet;
  return table[static_cast<std::size_t>(latency_row(a))][static_cast<std::size_t>(protocol_index(p))];
}

double tree_correction(Protocol p, double bytes) {
  const double chunks = std::floor(bytes / 64.0);
  // Below 64 B NCCL's index is log2Down(0) = -1, and it applies no factor.
  if (chunks < 1) return 1.0;
  const int index = static_cast<int>(std::floor(std::log2(chunks)));
  if (index >= 23) return 1.0;
  return kTreeCorrection[static_cast<std::size_t>(protocol_index(p))][static_cast<std::size_t>(index)];
}

std::span<const double> tree_correction_steps() { return kTreeCorrectionSteps; }

}  // namespace stepsim::collectives
