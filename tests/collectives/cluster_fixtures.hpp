// Cluster specs built by hand with the values of the presets in configs/clusters, so that the
// collective model is tested without the io layer.
#pragma once

#include "stepsim/scenario.hpp"

namespace stepsim::test {

inline ClusterSpec dgx_a100_80g_hdr(int nodes) {
  ClusterSpec c;
  c.name = "dgx-a100-80g-hdr";
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.gpu.name = "a100-sxm4-80gb";
  c.gpu.arch = GpuArch::ampere;
  c.intra_node = {IntraFabric::nvswitch, Bandwidth::gbytes_per_s(300), Time::from_us(0.6), false};
  c.inter_node = {InterFabric::infiniband,       8,  Bandwidth::gbits_per_s(200), Time::from_us(2.7),
                  InterTopology::rail_optimized, 1.0};
  c.tuning.launch_overhead = Time::from_us(25);
  c.tuning.latency_floor = Time::from_us(36);
  c.tuning.bus_efficiency = 0.97;
  c.tuning.ramp_half_bytes = Bytes::mib(10);
  c.tuning.ramp_exponent = 0.65;
  return c;
}

inline ClusterSpec dgx_hopper(const char* name, int nodes) {
  ClusterSpec c = dgx_a100_80g_hdr(nodes);
  c.name = name;
  c.gpu.arch = GpuArch::hopper;
  c.intra_node.bandwidth = Bandwidth::gbytes_per_s(450);
  c.intra_node.nvls = true;
  c.inter_node.nic_bandwidth = Bandwidth::gbits_per_s(400);
  c.tuning.bus_efficiency = 1.0;
  return c;
}

inline ClusterSpec dgx_b200(int nodes) {
  ClusterSpec c = dgx_hopper("dgx-b200", nodes);
  c.gpu.name = "b200";
  c.gpu.arch = GpuArch::blackwell;
  c.intra_node.bandwidth = Bandwidth::gbytes_per_s(900);
  return c;
}

// Racks of 18 trays of 4 GPUs, each rack one NVLink domain, one 400 Gb/s NIC per GPU.
inline ClusterSpec gb200_nvl72(int racks) {
  ClusterSpec c = dgx_b200(18 * racks);
  c.name = "gb200-nvl72";
  c.gpu.name = "gb200";
  c.gpus_per_node = 4;
  c.nvlink_domain = 72;
  c.inter_node.nics_per_node = 4;
  return c;
}

}  // namespace stepsim::test
