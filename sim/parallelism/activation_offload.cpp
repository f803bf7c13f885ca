// Activation offload's copies and synchronisations, placed as Transformer Engine's CPU
// offload handler places them (see activation_offload.hpp).
#include "parallelism/activation_offload.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace stepsim::parallelism {

Bytes offloaded_bytes(const workload::ModelWork& work, int layer) { return work.block(layer).activations; }

// Rank r runs on GPU r (mesh.cpp), and a link's GPUs are consecutive GPUs of one node
// (gpus_per_link divides the node's GPUs), so link k holds GPUs [k·n, (k + 1)·n) and the job
// fills every link but perhaps its last.
int host_link_gpus(const Scenario& s, int rank) {
  const int per_link = s.cluster.host_link.gpus_per_link;
  const int first = rank / per_link * per_link;
  return std::min(per_link, s.parallel.gpus() - first);
}

Bandwidth host_link_share(const Scenario& s, int rank) { return s.cluster.host_link.per_gpu(host_link_gpus(s, rank)); }

// The host link's figure is a line rate (64 GB/s each way for Gen5 x16), as the GPU's PCIe
// link's is (gpu_pcie_link).
bool host_link_is_pcie(const ClusterSpec& cluster) {
  const double line_rate = gpu_pcie_link(cluster.gpu.arch).line_gbps;
  const double link = cluster.host_link.bandwidth.gbytes_per_s();
  return link > 0 && link <= line_rate * (1 + 1e-9);
}

bool offload_on_pcie(const Scenario& s) {
  return s.training.activation_offload_layers > 0 && host_link_is_pcie(s.cluster);
}

// TE spreads the synchronisations evenly over the model's layers: window k ends after
// (layers / offloaded)·(k + 1) − 1 layers, the first layers % offloaded windows one layer
// later each, to balance the copies against the compute.
std::vector<int> ActivationOffload::windows(int layers, int offloaded) {
  std::vector<int> window(static_cast<std::size_t>(offloaded));
  int constant = 0;
  for (int i = 0; i < offloaded; ++i) {
    int w = (layers / offloaded) * (i + 1) - 1;
    if (i < layers % offloaded) {
      w += i + 1;
      constant = i + 1;
    } else {
      w += constant;
    }
    window[static_cast<std::size_t>(i)] = w;
  }
  return window;
}

ActivationOffload::ActivationOffload(const Scenario& s, const workload::ModelWork& work) : work_(work) {
  const int n = s.training.activation_offload_layers;
  if (n > 0) window_ = windows(s.model.layers, n);
}

OpIndex ActivationOffload::copy(StepBuilder& b, int group, bool to_host) {
  const Bytes bytes = offloaded_bytes(work_, group);
  const Time duration = transfer_time(bytes, b.host_share());
  const std::uint32_t name =
      b.state().name(fmt::format("L{} activations {}", group, to_host ? "to host" : "from host"));
  // The GPU copy is freed once the host has it; the reload allocates it again.
  const Bytes delta = to_host ? Bytes(0) - bytes : bytes;
  return b.host_copy(to_host, name, bytes, duration, delta, to_host ? Phase::forward : Phase::backward,
                     b.last_compute());
}

void ActivationOffload::wait_for(StepBuilder& b, std::optional<OpIndex> op) {
  if (op) b.defer_wait(*op, WaitRule::next_op, workload::Role::optimizer);
}

void ActivationOffload::after_forward(StepBuilder& b, int layer) {
  if (!active()) return;
  const int groups = static_cast<int>(window_.size());
  if (layer == 0) {
    offloaded_ = 0;
    to_host_ = copy(b, 0, true);
  }
  if (offloaded_ < groups && window_[static_cast<std::size_t>(offloaded_)] == layer) {
    wait_for(b, to_host_);
    if (offloaded_ + 1 < groups) to_host_ = copy(b, offloaded_ + 1, true);
    ++offloaded_;
  }
}

void ActivationOffload::before_backward(StepBuilder& b, int layer) {
  if (!active()) return;
  if (offloaded_ > 0 && window_[static_cast<std::size_t>(offloaded_ - 1)] == layer) {
    wait_for(b, from_host_);
    from_host_ = copy(b, offloaded_ - 1, false);
    // TE stops counting down at the first group, which is reloaded once.
    if (offloaded_ > 1) --offloaded_;
  }
  if (layer == 0) {
    wait_for(b, from_host_);
    from_host_.reset();
    offloaded_ = 0;
  }
}

}  // namespace stepsim::parallelism
