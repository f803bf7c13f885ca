// Activation offload to host memory as Megatron-Core runs it through Transformer Engine's
// CPU offload: the activations of the first N transformer layers copied to the host on a
// copy stream during the forward, and back on another before their backward.
#pragma once

#include <optional>
#include <vector>

#include "parallelism/step_builder.hpp"
#include "stepsim/scenario.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

// Transformer Engine's AsyncDoubleBufferGroupOffloadHandler (transformer_engine/pytorch/
// cpu_offload.py, cpu_offload_v1.py in later releases), which Megatron-Core's TransformerBlock
// builds with num_layers = cpu_offloading_num_layers and model_layers = the model's layers and
// commits layer by layer (group_prefetch_offload_commit_async). The synchronisations fall on
// its layer_window_map: offload group k (layer k) must be on the host by the end of layer
// window[k]'s forward, and its reload starts at layer window[k]'s backward.
class ActivationOffload {
 public:
  ActivationOffload(const Scenario& s, const workload::ModelWork& work);
  bool active() const { return !window_.empty(); }

  // After layer `layer`'s forward (on_group_commit_forward): the first group's copy starts
  // after layer 0; at a window's end the compute waits for that group's copy, whose GPU
  // memory is then freed, and the next group's copy starts.
  void after_forward(StepBuilder& b, int layer);
  // Before layer `layer`'s backward (on_group_commit_backward): at a window's end the compute
  // waits for the reload before, and the next group's reload starts once the compute issued
  // so far has ended; before layer 0's backward the compute waits for every reload.
  void before_backward(StepBuilder& b, int layer);

  // Which layer's forward ends each group's window (layer_window_map), for `layers` layers of
  // which `offloaded` are offloaded.
  static std::vector<int> windows(int layers, int offloaded);

 private:
  OpIndex copy(StepBuilder& b, int group, bool to_host);
  static void wait_for(StepBuilder& b, std::optional<OpIndex> op);

  const workload::ModelWork& work_;
  std::vector<int> window_;  // empty: no offload
  int offloaded_ = 0;        // TE's offloaded_group_count
  std::optional<OpIndex> to_host_;
  std::optional<OpIndex> from_host_;
};

// The bytes a layer's offload copies each way: the activations it keeps for its backward.
Bytes offloaded_bytes(const workload::ModelWork& work, int layer);

// Whether the cluster's host link is each GPU's PCIe link to an x86 host (DGX), which the
// GPU's NIC traffic also crosses (GPUDirect RDMA: GPU, PCIe switch, NIC), rather than a Grace
// CPU's NVLink-C2C, separate from the NIC path: a host link no faster than the GPU's PCIe x16
// line rate is that link.
bool host_link_is_pcie(const ClusterSpec& cluster);
// Whether the scenario's offload copies cross the GPUs' PCIe links, and so share them with
// the NIC traffic.
bool offload_on_pcie(const Scenario& s);

// How many of the job's GPUs share the host link of global rank `rank`: all of the link's
// (cluster.host_link.gpus_per_link), unless the job ends before the link does.
int host_link_gpus(const Scenario& s, int rank);
// What rank `rank` gets of its host link per direction while the job's GPUs on it copy at
// once (the GPUs of a stage offload in step).
Bandwidth host_link_share(const Scenario& s, int rank);

}  // namespace stepsim::parallelism
