// Scenario validation. Rules follow what Megatron-LM and PyTorch themselves accept, so that
// a scenario that passes here describes a job that could run.
#include "io/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <numeric>

#include "io/derived_keys.hpp"
#include "io/presets.hpp"
#include "io/scenario_schema.hpp"
#include "io/validate_limits.hpp"
#include "io/validate_variation.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"

namespace stepsim::io {
namespace {

constexpr double kMinEfficiency = 0.01;

// Throws InputError(file, where, message) when `ok` is false.
class Checker {
 public:
  // `sets`: the JSON pointers --set assignments gave (Scenario::set_pointers), if any.
  explicit Checker(std::string file, const std::vector<std::string>* sets = nullptr)
      : file_(std::move(file)), sets_(sets) {}
  template <class... A>
  void require(bool ok, const char* where, fmt::format_string<A...> message, A&&... args) const {
    if (!ok) throw InputError(file_, where, fmt::format(message, std::forward<A>(args)...));
  }
  [[noreturn]] void fail(const std::string& where, const std::string& message) const {
    throw InputError(file_, where, message);
  }
  // The deepest --set assignment that gave the value at `where` ("/cluster/gpu" for
  // /cluster/gpu/arch after --set cluster.gpu=NAME), or "" when none did.
  std::string assignment_of(std::string_view where) const {
    std::string deepest;
    if (sets_ == nullptr) return deepest;
    for (const std::string& p : *sets_) {
      const bool covers = where.starts_with(p) && (where.size() == p.size() || where[p.size()] == '/');
      if (covers && p.size() > deepest.size()) deepest = p;
    }
    return deepest;
  }
  // An efficiency: the fraction of a peak (`of`) a kind of work reaches. Below 1 % of it no
  // hardware runs a training step's work (calibration files take the same range), and a far
  // smaller one would only carry the step out of the simulator's range of durations; above 1
  // the work would run faster than the peak itself. The reason given is the violated side's.
  void efficiency(double v, const char* where, const char* of) const {
    require(v <= 1, where,
            "must be a fraction of {} from {} to 1, got {}: above 1 the work would run faster than {} allows", of,
            kMinEfficiency, v, of);
    require(v >= kMinEfficiency, where,
            "must be a fraction of {} from {} to 1, got {}: no hardware runs a training step's work at less than {} % "
            "of its peak",
            of, kMinEfficiency, v, 100 * kMinEfficiency);
  }

 private:
  std::string file_;
  const std::vector<std::string>* sets_;
};

void require_model(const ModelSpec& m, const Checker& c) {
  c.require(m.layers != 0 || m.hidden != 0 || !m.name.empty(), "/model",
            "the scenario has no model (a preset name such as \"llama3-8b\" or an object with its dimensions)");
}

void complete_model(ModelSpec& m) {
  if (m.name.empty()) m.name = "custom";
  if (m.kv_heads == 0) m.kv_heads = m.heads;
  if (m.ffn_hidden == 0) m.ffn_hidden = 4 * m.hidden;
  if (m.moe.experts > 0 && m.moe.expert_ffn_hidden == 0) m.moe.expert_ffn_hidden = m.ffn_hidden;
}

// Ranges are checked by validate_limits.cpp; these are the rules between keys.

// An explicit head_dim (Qwen3, gpt-oss: heads·head_dim differs from hidden) must be one the
// fused attention kernels take: FlashAttention-2 and -3 and cuDNN's fused attention handle
// head dimensions up to 256.
void check_head_dim(const ModelSpec& m, AttentionKind attention, const Checker& c) {
  if (m.head_dim == 0) {
    c.require(m.hidden % m.heads == 0, "/model/heads",
              "hidden ({}) is not divisible by heads ({}); give model.head_dim when heads·head_dim differs from hidden",
              m.hidden, m.heads);
    return;
  }
  if (!fused_attention(attention)) return;
  c.require(m.head_dim <= 256, "/model/head_dim",
            "must be at most 256 for fused attention (training.attention \"{}\"), got {}: FlashAttention and "
            "cuDNN's fused attention take head dimensions up to 256",
            attention == AttentionKind::flash ? "flash" : "flash2", m.head_dim);
}

// Multi-head latent attention: its widths given together, in place of head_dim, one key/value
// head per query head, Llama-style layers (DeepSeek's RMSNorm, no biases).
void check_mla(const ModelSpec& m, AttentionKind attention, const Checker& c) {
  const MlaSpec& a = m.mla;
  if (!m.latent_attention()) {
    c.require(a.q_lora_rank == 0 && a.qk_nope_head_dim == 0 && a.qk_rope_head_dim == 0 && a.v_head_dim == 0,
              "/model/mla",
              "q_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim need "
              "model.mla.kv_lora_rank > 0 (latent attention)");
    return;
  }
  c.require(a.qk_nope_head_dim > 0 && a.v_head_dim > 0, "/model/mla",
            "latent attention needs qk_nope_head_dim and v_head_dim > 0, got {} and {}", a.qk_nope_head_dim,
            a.v_head_dim);
  c.require(m.head_dim == 0, "/model/head_dim",
            "must be 0 with latent attention, got {}: model.mla gives the heads' widths", m.head_dim);
  c.require(m.kv_heads == m.heads, "/model/kv_heads",
            "must equal heads ({}) with latent attention, got {}: every head has its own key and value", m.heads,
            m.kv_heads);
  c.require(m.mlp == MlpKind::swiglu, "/model/mlp", "latent attention is modelled in Llama-style layers (swiglu)");
  const long long qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
  c.require(!fused_attention(attention) || std::max(qk, a.v_head_dim) <= 256, "/model/mla",
            "heads of {} (query, key) and {} (value) are wider than the 256 fused attention takes", qk, a.v_head_dim);
}

// Which layers are MoE layers: the first first_dense_layers dense, or one 0/1 entry per layer.
void check_layer_pattern(const ModelSpec& m, const Checker& c) {
  const MoeSpec& moe = m.moe;
  c.require(moe.first_dense_layers < m.layers, "/model/moe/first_dense_layers",
            "leaves no MoE layer among the {} layers, got {} (a dense model has model.moe.experts 0)", m.layers,
            moe.first_dense_layers);
  if (moe.layer_pattern.empty()) return;
  c.require(moe.first_dense_layers == 0, "/model/moe/layer_pattern",
            "and model.moe.first_dense_layers ({}) both say which layers are dense: give one of them",
            moe.first_dense_layers);
  c.require(static_cast<long long>(moe.layer_pattern.size()) == m.layers, "/model/moe/layer_pattern",
            "has {} entries but model.layers is {}: one entry per layer, 1 for MoE and 0 for dense",
            moe.layer_pattern.size(), m.layers);
  for (std::size_t i = 0; i < moe.layer_pattern.size(); ++i) {
    const int v = moe.layer_pattern[i];
    c.require(v == 0 || v == 1, "/model/moe/layer_pattern",
              "entry {} must be 1 (an MoE layer) or 0 (a dense layer), got {}", i, v);
  }
  c.require(std::count(moe.layer_pattern.begin(), moe.layer_pattern.end(), 1) > 0, "/model/moe/layer_pattern",
            "has no MoE layer (a dense model has model.moe.experts 0)");
}

// Per-head query and key norms are not latent attention's: Megatron-Core's qk_layernorm under
// MLA normalizes the latents, which model.mla always runs.
void check_qk_norm(const ModelSpec& m, const Checker& c) {
  c.require(!m.qk_norm || !m.latent_attention(), "/model/qk_norm",
            "per-head query and key norms are not those of latent attention (model.mla), whose latent norms always "
            "run; leave it false");
}

// A window shorter than the sequence, and window_skip_freq only beside a window.
void check_window(const ModelSpec& m, const Checker& c) {
  c.require(m.sliding_window < m.seq_len, "/model/sliding_window",
            "must be below model.seq_len ({}), got {}: a window as long as the sequence is causal attention", m.seq_len,
            m.sliding_window);
  c.require(m.window_skip_freq == 0 || m.sliding_window > 0, "/model/window_skip_freq",
            "needs model.sliding_window > 0 (the layers it leaves unwindowed are all layers without one), got {}",
            m.window_skip_freq);
}

// gpt-oss's clamp, biases and YaRN as Megatron-Core runs them (workload/layer.cpp): in the routed
// experts of a stack of MoE layers only (TEGroupedMLP), the rotary embedding of standard heads.
void check_gpt_oss_layer(const Scenario& s, const Checker& c) {
  const ModelSpec& m = s.model;
  if (m.swiglu_limit == 0 && !m.linear_bias && m.yarn_factor == 0) return;
  const bool swiglu = m.mlp == MlpKind::swiglu;
  c.require(m.swiglu_limit == 0 || swiglu, "/model/swiglu_limit", "clamps SwiGLU's inputs: needs model.mlp \"swiglu\"");
  c.require(!m.linear_bias || swiglu, "/model/linear_bias",
            "is for SwiGLU models: GeLU models (model.mlp \"gelu\") have their biases already");
  c.require(m.yarn_factor == 0 || m.yarn_factor > 1, "/model/yarn_factor",
            "must be above 1 (YaRN extends the context by that factor) or 0 for plain RoPE, got {}", m.yarn_factor);
  c.require(m.yarn_factor == 0 || swiglu, "/model/yarn_factor",
            "scales the rotary embedding: needs model.mlp \"swiglu\" (GeLU models learn their positions)");
  c.require(m.yarn_factor == 0 || !m.latent_attention(), "/model/yarn_factor",
            "with latent attention (model.mla) is not simulated yet");
  const bool experts_only = m.moe.experts > 0 && !m.mixed_layers() && m.moe.shared_experts == 0;
  c.require(m.swiglu_limit == 0 || experts_only, "/model/swiglu_limit",
            "is simulated in the routed experts of a stack of MoE layers only (no dense layers, no shared experts)");
  c.require(!m.linear_bias || experts_only, "/model/linear_bias",
            "is simulated in the routed experts of a stack of MoE layers only (no dense layers, no shared experts)");
  const Framework f = s.training.framework;
  c.require(runs_megatron_options(f), "/training/framework",
            "model.swiglu_limit, linear_bias and yarn_factor are simulated as Megatron-Core runs them (megatron or "
            "nemo), not {}",
            traits_of(f).name);
}

void check_model(const ModelSpec& m, AttentionKind attention, const Checker& c) {
  check_head_dim(m, attention, c);
  check_mla(m, attention, c);
  check_window(m, c);
  check_qk_norm(m, c);
  c.require(m.heads % m.kv_heads == 0, "/model/kv_heads", "kv_heads ({}) does not divide heads ({})", m.kv_heads,
            m.heads);
  if (m.moe.experts == 0) {
    const MoeSpec dense;
    const bool untouched = m.moe.top_k == dense.top_k && m.moe.expert_ffn_hidden == 0 &&
                           m.moe.capacity_factor == dense.capacity_factor && m.moe.imbalance == dense.imbalance &&
                           m.moe.shared_experts == dense.shared_experts &&
                           m.moe.first_dense_layers == dense.first_dense_layers && m.moe.layer_pattern.empty() &&
                           m.moe.load_balancing == dense.load_balancing && m.moe.expert_bias == dense.expert_bias &&
                           m.moe.force_balance == dense.force_balance && m.moe.dispatcher == dense.dispatcher;
    c.require(untouched, "/model/moe",
              "top_k, expert_ffn_hidden, capacity_factor, dispatcher, imbalance, shared_experts, first_dense_layers, "
              "layer_pattern, load_balancing, expert_bias and force_balance need model.moe.experts > 0 (the model is "
              "dense)");
    return;
  }
  c.require(m.moe.top_k <= m.moe.experts, "/model/moe/top_k", "must be between 1 and experts ({}), got {}",
            m.moe.experts, m.moe.top_k);
  check_layer_pattern(m, c);
}

// `imbalance` is the busiest EP rank's routed copies over the mean, top_k per token of the
// EP group. A token's copies go to distinct experts, so a rank holding experts/ep of them
// receives at most min(top_k, experts/ep) of each token's: ep·min(top_k, experts/ep)/top_k
// times the mean.
void check_imbalance(const MoeSpec& moe, int ep, const Checker& c) {
  const int local = moe.experts / ep;
  const int most = std::min(moe.top_k, local);
  const double bound = static_cast<double>(ep * most) / moe.top_k;
  c.require(moe.imbalance * moe.top_k <= ep * most, "/model/moe/imbalance",
            "must be at most {} with {} experts, top_k {} and parallel.ep {}, got {}: an EP rank holds {} expert(s) "
            "and a token's {} routed copies go to distinct experts, so at most {} of them lands on one rank, "
            "ep·{}/top_k = {} times the mean",
            bound, moe.experts, moe.top_k, ep, moe.imbalance, local, moe.top_k, most, most, bound);
}

void check_gpu(const GpuSpec& g, const Checker& c) {
  c.efficiency(g.efficiency.gemm_max, "/cluster/gpu/efficiency/gemm_max", "the dense peak");
  c.efficiency(g.efficiency.fp8_gemm_max, "/cluster/gpu/efficiency/fp8_gemm_max", "the dense FP8 peak");
  c.efficiency(g.efficiency.fp4_gemm_max, "/cluster/gpu/efficiency/fp4_gemm_max", "the dense FP4 peak");
  c.efficiency(g.efficiency.attention_max, "/cluster/gpu/efficiency/attention_max", "the dense peak");
  c.efficiency(g.efficiency.hbm, "/cluster/gpu/efficiency/hbm", "the HBM bandwidth");
  c.require(g.efficiency.comm_slowdown >= 0 && g.efficiency.comm_slowdown < 1, "/cluster/gpu/efficiency/comm_slowdown",
            "must be in [0, 1), got {}", g.efficiency.comm_slowdown);
}

// The cluster presets of `gpu` (its name and architecture), as the --set that picks one
// ("--set cluster=dgx-a100-80g-hdr").
std::string clusters_of(const GpuSpec& gpu) {
  std::string out;
  for (const std::string_view name : preset_names("clusters")) {
    ClusterSpec preset;
    read_cluster(preset, boost::json::value(boost::json::string(name)), Reader("presets", true));
    if (preset.gpu.name == gpu.name && preset.gpu.arch == gpu.arch)
      out += fmt::format("{}--set cluster={}", out.empty() ? "" : " or ", name);
  }
  return out;
}

// An Ampere GPU under NVLS. When a --set gave the GPU after the cluster's NVLS came (from the
// file, or from a --set of the whole cluster), that assignment is what changed: it is named,
// with what to change besides.
[[noreturn]] void refuse_nvls_gpu(const ClusterSpec& cl, const Checker& c) {
  const std::string gpu_set = c.assignment_of("/cluster/gpu/arch");
  if (gpu_set.size() > c.assignment_of("/cluster/intra_node/nvls").size()) {
    const std::string clusters = clusters_of(cl.gpu);
    c.fail(gpu_set,
           fmt::format("gives an Ampere GPU ({}), and the cluster ({}) runs NVLink SHARP (cluster.intra_node.nvls), "
                       "which needs a Hopper or later GPU: also set cluster.intra_node.nvls=false{}",
                       cl.gpu.name, cl.name,
                       clusters.empty() ? "" : ", or pick a cluster of these GPUs (" + clusters + ")"));
  }
  c.fail("/cluster/intra_node/nvls",
         fmt::format("NVLink SHARP needs a Hopper or later GPU ({} is ampere)", cl.gpu.name));
}

// The intra-node fabric's name as a scenario writes it.
const char* fabric_name(IntraFabric f) {
  switch (f) {
    case IntraFabric::nvswitch:
      return "nvswitch";
    case IntraFabric::nvlink_mesh:
      return "nvlink-mesh";
    case IntraFabric::pcie:
      return "pcie";
  }
  return "?";
}

// NVLS on a fabric without an NVSwitch. Of the two keys, the one the user changed last is
// named: a --set of the fabric given after what gave NVLS (the cluster preset, the file, a --set
// of the whole cluster), or a fabric that differs from its cluster preset's while NVLS is the
// preset's own, is the fabric's, with what to change besides; otherwise NVLS was asked for on
// this fabric, and is named.
[[noreturn]] void refuse_nvls_fabric(const ClusterSpec& cl, const Checker& c) {
  const std::string fabric_set = c.assignment_of("/cluster/intra_node/fabric");
  const std::string nvls_set = c.assignment_of("/cluster/intra_node/nvls");
  // A --set of the fabric given over what gave NVLS (a --set of the whole cluster or of
  // intra_node, the file); two --set assignments of the keys themselves both ask, and NVLS is
  // named. Both from one place (the file, one --set): the one that differs from the cluster
  // preset's.
  bool fabric_changed = fabric_set.size() > nvls_set.size() && fabric_set.starts_with(nvls_set);
  if (fabric_set == nvls_set && lookup_preset("clusters", cl.name) != nullptr) {
    ClusterSpec preset;
    read_cluster(preset, boost::json::value(boost::json::string(cl.name)), Reader("presets", true));
    fabric_changed = preset.intra_node.nvls && preset.intra_node.fabric != cl.intra_node.fabric;
  }
  if (fabric_changed)
    c.fail("/cluster/intra_node/fabric",
           fmt::format("\"{}\" has no NVSwitch, and the cluster ({}) runs NVLink SHARP (cluster.intra_node.nvls), "
                       "whose reductions run in the switch: also set cluster.intra_node.nvls=false",
                       fabric_name(cl.intra_node.fabric), cl.name));
  c.fail("/cluster/intra_node/nvls", "NVLink SHARP needs \"fabric\": \"nvswitch\" (the reduction runs in the switch)");
}

// NVLink SHARP is a feature of Hopper's and later NVSwitches.
void check_nvls(const ClusterSpec& cl, const Checker& c) {
  if (!cl.intra_node.nvls) return;
  if (cl.gpu.arch == GpuArch::ampere) refuse_nvls_gpu(cl, c);
  if (cl.intra_node.fabric != IntraFabric::nvswitch) refuse_nvls_fabric(cl, c);
}

// Fabrics the collective model tells apart: NCCL drives RoCE with the same IB verbs
// transport as InfiniBand, so their nic_bandwidth and latency say all; an NVLink mesh
// (point-to-point links, no switch) and NCCL's socket transport over plain Ethernet are not
// modelled yet, so they are refused rather than simulated as an NVSwitch or InfiniBand.
void check_fabrics(const ClusterSpec& cl, const Checker& c) {
  c.require(cl.intra_node.fabric != IntraFabric::nvlink_mesh, "/cluster/intra_node/fabric",
            "\"nvlink-mesh\" is not simulated yet (use \"nvswitch\" or \"pcie\")");
  c.require(cl.inter_node.fabric != InterFabric::ethernet, "/cluster/inter_node/fabric",
            "\"ethernet\" (NCCL's socket transport) is not simulated yet (use \"infiniband\" or \"roce\")");
}

// An NVLink domain is whole nodes joined by NVLink Switch trays: a node's GPUs share its
// fabric, and only a switched fabric reaches past the node.
// A domain that is no whole number of nodes where a --set gave the node size after what gave the
// domain (the file, the cluster preset, a --set of the whole cluster): that assignment changed
// it, and is named, with where the domain came from.
void check_domain(const ClusterSpec& cl, const Checker& c) {
  if (cl.nvlink_domain == 0) return;
  if (cl.nvlink_domain % cl.gpus_per_node != 0) {
    const std::string node_set = c.assignment_of("/cluster/gpus_per_node");
    const std::string domain_set = c.assignment_of("/cluster/nvlink_domain");
    if (node_set.size() > domain_set.size()) {
      std::string from = domain_set.empty() ? "" : " (a --set)";
      if (lookup_preset("clusters", cl.name) != nullptr && domain_set != "/cluster/nvlink_domain") {
        ClusterSpec preset;
        read_cluster(preset, boost::json::value(boost::json::string(cl.name)), Reader("presets", true));
        if (preset.nvlink_domain == cl.nvlink_domain) from = fmt::format(" of the {} preset", cl.name);
      }
      c.fail(node_set, fmt::format("gives nodes of {} GPUs, and the cluster's NVLink domain (cluster.nvlink_domain{}) "
                                   "is {} GPUs, no whole number of them: also set cluster.nvlink_domain to a multiple "
                                   "of {}",
                                   cl.gpus_per_node, from, cl.nvlink_domain, cl.gpus_per_node));
    }
  }
  c.require(cl.nvlink_domain % cl.gpus_per_node == 0, "/cluster/nvlink_domain",
            "must be a whole number of nodes of {} GPUs, got {}", cl.gpus_per_node, cl.nvlink_domain);
  c.require(cl.nvlink_domain == cl.gpus_per_node || cl.intra_node.fabric == IntraFabric::nvswitch,
            "/cluster/nvlink_domain",
            "an NVLink domain beyond one node needs \"fabric\": \"nvswitch\" (NVLink Switch trays), got {} GPUs "
            "over a node of {}",
            cl.nvlink_domain, cl.gpus_per_node);
}

// The --set of the intra-node fabric where it came after what gave `other` (an NVLink cluster
// preset, most often), so that the fabric is what changed; "" otherwise.
std::string fabric_set_after(const Checker& c, const char* other) {
  const std::string fabric_set = c.assignment_of("/cluster/intra_node/fabric");
  const std::string other_set = c.assignment_of(other);
  return fabric_set.size() > other_set.size() && fabric_set.starts_with(other_set) ? fabric_set : std::string();
}

// On a "pcie" fabric the intra-node bandwidth is each GPU's PCIe link, which carries no more
// than the line rate of an x16 link of the GPU's generation. A --set of the fabric given after
// what gave the bandwidth (an NVLink cluster preset's, most often) is named, with what to set
// besides; otherwise the bandwidth is.
void check_pcie_fabric(const ClusterSpec& cl, const Checker& c) {
  if (cl.intra_node.fabric != IntraFabric::pcie) return;
  const PcieLink link = gpu_pcie_link(cl.gpu.arch);
  const double gbps = cl.intra_node.bandwidth.gbytes_per_s();
  if (gbps <= link.line_gbps * (1 + 1e-9)) return;
  const std::string fabric_set = fabric_set_after(c, "/cluster/intra_node/bandwidth");
  const std::string limit = fmt::format(
      "the GPUs of a \"pcie\" fabric reach each other over their PCIe links, and the PCIe Gen{} x16 "
      "link of each {} GPU carries at most {:g} GB/s each way",
      link.generation, cl.gpu.name, link.line_gbps);
  if (!fabric_set.empty())
    c.fail(fabric_set, fmt::format("{}, where cluster.intra_node.bandwidth is {:g} GB/s (an NVLink figure): also set "
                                   "cluster.intra_node.bandwidth to the link's rate, or the peer-to-peer bandwidth "
                                   "measured on it",
                                   limit, gbps));
  c.fail("/cluster/intra_node/bandwidth",
         fmt::format("{}, got {:g} GB/s: give the link's rate, or the peer-to-peer bandwidth measured on it", limit,
                     gbps));
}

// On a "pcie" fabric intra_node.latency scales NCCL's per-hop latencies for PCI (tuning.cc's
// hwLat row: 1 us LL, 1.9 LL128, 5.7 Simple) by latency / 1 us; an NVLink preset's 0.6 us left
// in place (a --set of the fabric alone) would cost each PCIe hop at 0.6 of NCCL's. A PCIe hop
// below NCCL's own figure is refused, naming the fabric's assignment where it came last.
void check_pcie_latency(const ClusterSpec& cl, const Checker& c) {
  if (cl.intra_node.fabric != IntraFabric::pcie) return;
  const double us = cl.intra_node.latency.us();
  if (us >= 1.0 - 1e-9) return;
  const std::string fabric_set = fabric_set_after(c, "/cluster/intra_node/latency");
  const char* limit =
      "NCCL costs a hop over PCIe at 1 us or more (its PCI hardware latency: 1 us LL, 1.9 LL128, 5.7 Simple), and "
      "cluster.intra_node.latency scales those on a \"pcie\" fabric";
  if (!fabric_set.empty())
    c.fail(fabric_set, fmt::format("{}, where cluster.intra_node.latency is {:g} us (an NVLink figure): also set "
                                   "cluster.intra_node.latency to 1us, or more",
                                   limit, us));
  c.fail("/cluster/intra_node/latency", fmt::format("{}, got {:g} us: give 1us, or more", limit, us));
}

void check_cluster(const ClusterSpec& cl, const Checker& c) {
  // A fabric not simulated is refused first: what it would need of the rest says nothing.
  check_fabrics(cl, c);
  check_nvls(cl, c);
  check_domain(cl, c);
  check_pcie_fabric(cl, c);
  check_pcie_latency(cl, c);
  // A host link joins GPUs of one node to their CPU (a GB200 tray's two superchips: 2 and 2).
  c.require(cl.gpus_per_node % cl.host_link.gpus_per_link == 0, "/cluster/host_link/gpus_per_link",
            "{} GPUs per link do not divide the node's {} GPUs", cl.host_link.gpus_per_link, cl.gpus_per_node);
  check_gpu(cl.gpu, c);
  c.efficiency(cl.tuning.bus_efficiency, "/cluster/collective_tuning/bus_efficiency", "NCCL's modelled bus bandwidth");
}

// A given node count must be exactly what the job needs: no missing GPUs and no idle node.
void size_cluster(ClusterSpec& cl, int gpus, const Checker& c) {
  const int needed = (gpus + cl.gpus_per_node - 1) / cl.gpus_per_node;
  if (cl.nodes == 0) cl.nodes = needed;
  c.require(cl.nodes == needed, "/cluster/nodes",
            "{} nodes of {} GPUs do not match the {} GPUs of tp·pp·dp·cp (that needs {} node{})", cl.nodes,
            cl.gpus_per_node, gpus, needed, needed == 1 ? "" : "s");
}

// parallel.schedule as the scenario writes it.
const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::gpipe:
      return "gpipe";
    case Schedule::one_f_one_b:
      return "1f1b";
    case Schedule::interleaved:
      return "interleaved";
    case Schedule::zb_h1:
      return "zb-h1";
    case Schedule::zb_h2:
      return "zb-h2";
    case Schedule::dualpipe:
      return "dualpipe";
  }
  return "?";
}

void check_degrees(const ParallelSpec& p, const Checker& c) {
  // One stage runs its micro-batches' forwards and backwards in turn, as 1F1B (the default)
  // does: another schedule has no pipeline to order, and would only change what is simulated
  // (GPipe's activations of every micro-batch at once, zero bubble's split backward).
  c.require(p.pp > 1 || p.schedule == Schedule::one_f_one_b, "/parallel/schedule",
            "\"{}\" needs parallel.pp > 1 (with one stage there is no pipeline to schedule; leave it \"1f1b\")",
            schedule_name(p.schedule));
  // Megatron turns sequence parallelism off by itself without tensor parallelism: asked for at
  // tp 1 it would do nothing.
  c.require(!p.sequence_parallel || p.tp > 1, "/parallel/sequence_parallel",
            "needs parallel.tp > 1 (there is no TP group to split the sequence over)");
  // Each DualPipe stage pairs with its mirror image p − 1 − stage (github.com/deepseek-ai/DualPipe).
  if (p.schedule == Schedule::dualpipe) {
    c.require(p.pp >= 2 && p.pp % 2 == 0, "/parallel/pp", "the DualPipe schedule needs an even pp >= 2, got {}", p.pp);
  }
  if (p.schedule == Schedule::interleaved) {
    c.require(p.virtual_stages >= 2, "/parallel/virtual_stages",
              "the interleaved schedule needs virtual_stages >= 2, got {}", p.virtual_stages);
    c.require(p.pp >= 2, "/parallel/pp", "the interleaved schedule needs pp >= 2, got {}", p.pp);
  } else {
    c.require(p.virtual_stages == 1, "/parallel/virtual_stages",
              "virtual_stages {} needs \"schedule\": \"interleaved\"", p.virtual_stages);
  }
}

// Of the keys a rule is between, the first a --set gave, or `otherwise` where no --set gave any:
// the error names what the user changed.
const char* set_among(const Checker& c, std::initializer_list<const char*> keys, const char* otherwise) {
  for (const char* key : keys)
    if (!c.assignment_of(key).empty()) return key;
  return otherwise;
}

// Megatron's divisibility rules for splitting a model over TP, PP, CP and EP.
// Megatron-Core sets expert_tensor_parallel_size to tensor_model_parallel_size when it is not
// given (megatron/training/arguments.py, model_parallel_config.py __post_init__,
// parallel_state.initialize_model_parallel), so a mixture of experts under training.framework
// megatron or nemo that gives no parallel.etp splits its experts over tp ranks. Elsewhere 1:
// torchtitan's expert_tensor_parallel_degree defaults to 1, and the other frameworks have no
// expert tensor parallelism. A dense model keeps 1 (etp means nothing there).
void derive_expert_tp(Scenario& s) {
  ParallelSpec& p = s.parallel;
  if (p.etp_given || s.model.moe.experts == 0 || !traits_of(s.training.framework).megatron_core) return;
  p.etp = p.tp;
}

void check_split(const ModelSpec& m, const ParallelSpec& p, const Checker& c) {
  c.require(m.heads % p.tp == 0, set_among(c, {"/model/heads", "/parallel/tp"}, "/parallel/tp"),
            "model.heads ({}) is not divisible by tp ({})", m.heads, p.tp);
  // Neither Megatron-Core nor torchtitan replicates key/value heads over TP: Megatron-Core's
  // attention takes divide(num_query_groups, tp) query groups per rank, and divide asserts that
  // tp divides them (megatron/core/transformer/attention.py); torchtitan shards wk and wv
  // column-wise over TP and views each rank's share as whole heads of head_dim.
  // Named by the key a --set gave last, where one did (--set model.kv_heads=4 on a tp 8 file).
  if (m.kv_heads % p.tp != 0)
    c.fail(c.assignment_of("/model/kv_heads").size() > c.assignment_of("/parallel/tp").size() ? "/model/kv_heads"
                                                                                              : "/parallel/tp",
           fmt::format("model.kv_heads ({}) is not divisible by parallel.tp ({}): TP splits the key/value heads over "
                       "its ranks (Megatron-Core's num_query_groups per partition, torchtitan's wk and wv shards) and "
                       "never replicates them; use a tp that divides kv_heads",
                       m.kv_heads, p.tp));
  c.require(m.ffn_hidden % p.tp == 0, set_among(c, {"/model/ffn_hidden", "/parallel/tp"}, "/parallel/tp"),
            "model.ffn_hidden ({}) is not divisible by tp ({})", m.ffn_hidden, p.tp);
  if (p.sequence_parallel)
    c.require(
        m.seq_len % p.tp == 0,
        set_among(c, {"/model/seq_len", "/parallel/tp", "/parallel/sequence_parallel"}, "/parallel/sequence_parallel"),
        "model.seq_len ({}) is not divisible by tp ({})", m.seq_len, p.tp);
  if (p.cp > 1)
    c.require(m.seq_len % (2LL * p.cp) == 0, "/parallel/cp",
              "model.seq_len ({}) is not divisible by 2·cp ({}): each rank takes two balanced chunks", m.seq_len,
              2 * p.cp);
  if (p.cp > 1 && p.sequence_parallel)
    c.require(m.seq_len / p.cp % p.tp == 0, "/parallel/sequence_parallel",
              "the sequence share of a CP rank (seq_len / cp = {}) is not divisible by tp ({})", m.seq_len / p.cp,
              p.tp);
  const int chunks = p.pp * p.virtual_stages;
  if (p.stage_layers.empty()) {
    // Named by the key a --set changed (the first of them, the message naming both degrees),
    // else by the virtual stages where pp alone divides the layers.
    const char* culprit = p.virtual_stages > 1 && m.layers % p.pp == 0 ? "/parallel/virtual_stages" : "/parallel/pp";
    c.require(m.layers % chunks == 0,
              set_among(c, {"/parallel/virtual_stages", "/parallel/pp", "/model/layers"}, culprit),
              "model.layers ({}) is not divisible by pp·virtual_stages ({}·{} = {}); give parallel.stage_layers for an "
              "uneven split",
              m.layers, p.pp, p.virtual_stages, chunks);
  } else {
    c.require(static_cast<int>(p.stage_layers.size()) == chunks, "/parallel/stage_layers",
              "has {} entries but pp·virtual_stages is {}", p.stage_layers.size(), chunks);
    c.require(std::all_of(p.stage_layers.begin(), p.stage_layers.end(), [](int n) { return n >= 0; }),
              "/parallel/stage_layers", "layer counts must not be negative");
    const long long sum = std::accumulate(p.stage_layers.begin(), p.stage_layers.end(), 0LL);
    c.require(sum == m.layers, "/parallel/stage_layers", "sums to {} layers but model.layers is {}", sum, m.layers);
  }
  if (m.moe.experts == 0) {
    c.require(p.ep == 1, "/parallel/ep", "expert parallelism needs an MoE model (model.moe.experts > 0)");
    c.require(p.etp == 1, "/parallel/etp", "expert tensor parallelism needs an MoE model (model.moe.experts > 0)");
    return;
  }
  // An etp the scenario did not give is tp's (derive_expert_tp): the refusal says so.
  const std::string derived =
      p.etp_given ? ""
                  : " (parallel.etp not given: it follows parallel.tp under Megatron-Core, as "
                    "expert_tensor_parallel_size does when unset; give parallel.etp, such as 1, to choose another)";
  c.require(m.moe.expert_ffn_hidden % p.etp == 0, "/parallel/etp",
            "etp ({}) does not divide model.moe.expert_ffn_hidden ({}): each expert's fc1 and fc2 are split over "
            "etp ranks{}",
            p.etp, m.moe.expert_ffn_hidden, derived);
  if (p.etp > 1)
    c.require(p.tp * p.cp * p.dp % (p.ep * p.etp) == 0, "/parallel/etp",
              "ep·etp ({}·{}) must divide tp·cp·dp ({}): expert groups are folded out of the ranks of one pipeline "
              "stage{}",
              p.ep, p.etp, p.tp * p.cp * p.dp, derived);
  c.require(p.ep > 1 || m.moe.imbalance == 1.0, "/model/moe/imbalance",
            "is the load of the busiest EP rank over the mean and needs parallel.ep > 1, got {}", m.moe.imbalance);
  c.require(m.moe.experts % p.ep == 0, "/parallel/ep", "model.moe.experts ({}) is not divisible by ep ({})",
            m.moe.experts, p.ep);
  // The shared experts are one MLP split over TP (Megatron-Core's SharedExpertMLP, whose
  // ColumnParallelLinear divides moe_shared_expert_intermediate_size by tp).
  const long long shared_width = m.moe.shared_experts * m.moe.expert_ffn_hidden;
  c.require(
      shared_width % p.tp == 0,
      set_among(c, {"/model/moe/expert_ffn_hidden", "/model/moe/shared_experts", "/parallel/tp"}, "/parallel/tp"),
      "the shared experts' width (model.moe.shared_experts · expert_ffn_hidden = {}) is not divisible by tp ({}): "
      "Megatron-Core splits the shared experts over TP as one MLP",
      shared_width, p.tp);
  check_imbalance(m.moe, p.ep, c);
  c.require(p.tp * p.cp * p.dp % p.ep == 0, "/parallel/ep",
            "ep ({}) must divide tp·cp·dp ({}): expert groups are folded out of the ranks of one pipeline stage", p.ep,
            p.tp * p.cp * p.dp);
  if (p.tp > 1)
    c.require(p.sequence_parallel,
              set_among(c, {"/parallel/sequence_parallel", "/parallel/tp"}, "/parallel/sequence_parallel"),
              "mixture-of-experts layers with tp > 1 need sequence parallelism (Megatron requires it)");
}

// torchtitan's apply_tp (parallelize_llama) shards the sequence under every TP plan it applies:
// SequenceParallel norms, Shard(1) between the blocks, the head's input Shard(1); it has no TP
// without it. So under torchtitan with tp > 1 sequence_parallel follows (true) where the
// scenario does not give it, and a false is refused.
void resolve_torchtitan_sequence_parallel(Scenario& s, const Checker& c) {
  ParallelSpec& p = s.parallel;
  if (!torchtitan(s.training.framework) || p.tp == 1) return;
  if (!p.sequence_parallel_given) p.sequence_parallel = true;
  c.require(p.sequence_parallel,
            set_among(c, {"/parallel/sequence_parallel", "/training/framework", "/parallel/tp"},
                      "/parallel/sequence_parallel"),
            "torchtitan's tensor parallelism always shards the sequence (apply_tp's SequenceParallel norms and "
            "Shard(1) block outputs), so parallel.sequence_parallel false has no run under training.framework {} "
            "with tp {}: leave it out or true",
            traits_of(s.training.framework).name, p.tp);
}

// torchtitan's float8 is torchao's Float8Linear, whose recipes (tensorwise, rowwise) scale each
// tensor by its own amax: torchao deleted delayed scaling in 0.10 (pytorch/ao pull request 1753,
// "delete delayed scaling from torchao.float8"). So under torchtitan with precision fp8
// fp8_scaling follows (current) where the scenario does not give it, and delayed is refused.
void resolve_torchtitan_fp8_scaling(Scenario& s, const Checker& c) {
  TrainingSpec& t = s.training;
  if (!torchtitan(t.framework) || t.precision != Precision::fp8) return;
  if (!t.fp8_scaling_given) t.fp8_scaling = Fp8Scaling::current;
  c.require(
      t.fp8_scaling == Fp8Scaling::current,
      set_among(c, {"/training/fp8_scaling", "/training/framework", "/training/precision"}, "/training/fp8_scaling"),
      "torchtitan's float8 (torchao's Float8Linear) scales each tensor by its own amax: torchao deleted "
      "delayed scaling in 0.10, so training.fp8_scaling delayed has no run under training.framework {}: "
      "leave it out or current",
      traits_of(t.framework).name);
}

// torchtitan's apply_fsdp under its default reshard_after_forward_policy reshards each block
// after its forward only without a pipeline (reshard_after_forward = not pp_enabled: "For PP, by
// default do not reshard after forward to avoid per-microbatch all-gathers"). So under
// torchtitan's FSDP (kind fsdp or hsdp) with pp > 1 reshard_after_forward follows (false) where
// the scenario does not give it; a value given wins (its "always" and "never" policies).
void resolve_torchtitan_reshard(Scenario& s) {
  DataParallelSpec& d = s.data_parallel;
  const bool sharded = d.kind == DpKind::fsdp || d.kind == DpKind::hsdp;
  if (!torchtitan(s.training.framework) || !sharded || s.parallel.pp == 1 || d.reshard_after_forward_given) return;
  d.reshard_after_forward = false;
}

// torchtitan's maybe_enable_amp: under FSDP (fully_shard, which CP also applies) its
// MixedPrecisionPolicy casts; otherwise DDP or a single device runs under torch.autocast, but TP
// or PP without FSDP runs no mixed precision at all ("Mixed precision training with TP or PP is
// only supported when FSDP/HSDP/CP is enabled", then "Mixed precision training is disabled"): the
// model trains in fp32 (tf32 where the script allows TF32 matmuls). A lower training.precision
// there is refused, at the key set last, after the rules that name a key of the framework's own.
void check_torchtitan_amp(const Scenario& s, const Checker& c) {
  const ParallelSpec& p = s.parallel;
  if (!torchtitan(s.training.framework) || s.data_parallel.kind != DpKind::ddp || p.cp > 1) return;
  if ((p.tp == 1 && p.pp == 1) || element_bytes(s.training.precision) == 4) return;
  c.fail(set_among(
             c, {"/training/precision", "/parallel/tp", "/parallel/pp", "/data_parallel/kind", "/training/framework"},
             "/training/precision"),
         fmt::format("training.precision {} has no run under training.framework {} with data_parallel.kind ddp and "
                     "tp {}, pp {}: torchtitan's maybe_enable_amp disables mixed precision when TP or PP runs without "
                     "FSDP (\"Mixed precision training with TP or PP is only supported when FSDP/HSDP/CP is "
                     "enabled\"), so the model trains in fp32; use training.precision fp32 or tf32, or "
                     "data_parallel.kind fsdp or hsdp",
                     to_string(s.training.precision), traits_of(s.training.framework).name, p.tp, p.pp));
}

// FSDP2 (fully_shard) keeps each sharded gradient in its sharded parameter's dtype: foreach_reduce
// casts the ReduceScatter's output back to it (`_to_dtype_if_needed(reduce_output, orig_dtype)`)
// before it assigns or accumulates `.grad`, and MixedPrecisionPolicy has no setting to keep it
// lower. PyTorch's FSDP shards are fp32 (the master copy), so their gradients are too; bf16 main
// gradients are FSDP1's MixedPrecision(keep_low_precision_grads=True) or Megatron-FSDP's
// (megatron_fsdp_main_grads_dtype).
void check_fsdp2_main_grad(const Scenario& s, const Checker& c) {
  const DataParallelSpec& d = s.data_parallel;
  const bool sharded = d.kind == DpKind::fsdp || d.kind == DpKind::hsdp;
  if (!sharded || d.fsdp_impl != FsdpImpl::pytorch || d.fsdp_version != 2) return;
  if (s.training.main_grad == Precision::fp32) return;
  c.fail(
      set_among(c, {"/training/main_grad", "/data_parallel/kind", "/data_parallel/fsdp_version", "/training/framework"},
                "/training/main_grad"),
      fmt::format("training.main_grad {} under FSDP2 (data_parallel.fsdp_version 2): fully_shard casts each reduced "
                  "gradient back to its sharded parameter's dtype, fp32 (foreach_reduce), and keeps no lower one; use "
                  "fp32, or fsdp_version 1 (MixedPrecision's keep_low_precision_grads)",
                  to_string(s.training.main_grad)));
}

// The micro-batches per replica a pipeline schedule needs: Megatron's interleaved schedule a
// multiple of pp (its rounds run pp micro-batches through every chunk), PyTorch's
// ScheduleInterleaved1F1B a multiple of its max(1, m // pp) rounds, DualPipe an even number,
// at least 2·pp, as its reference implementation asserts (half the micro-batches enter at each
// end, and each direction needs pp of them to reach its steady state). Checked here rather than
// when the step is built, so that every caller (simulate, the sweeps' search, the advice) refuses
// such a layout before anything else is asked of it, its memory included.
void check_schedule_micro_batches(const Scenario& s, const Checker& c) {
  const ParallelSpec& p = s.parallel;
  const long long m = s.training.micro_batches(p.dp);
  const bool pytorch = pytorch_pipelining(s);
  if (fills_schedule(p.schedule, p.pp, m, pytorch)) return;
  if (p.schedule == Schedule::interleaved && pytorch)
    c.fail("/training/global_batch",
           fmt::format("PyTorch's interleaved schedule (ScheduleInterleaved1F1B) needs the micro-batches per replica "
                       "({}) to be a multiple of its rounds, max(1, micro-batches // pp) = {}",
                       m, std::max(1LL, m / p.pp)));
  if (p.schedule == Schedule::interleaved)
    c.fail("/training/global_batch",
           fmt::format("the interleaved schedule needs the micro-batches per replica ({}) to be a multiple of pp ({})",
                       m, p.pp));
  c.fail("/training/global_batch",
         fmt::format("the DualPipe schedule needs an even number of micro-batches per replica, at least 2·pp ({}), "
                     "got {}",
                     2 * p.pp, m));
}

void check_training(const Scenario& s, const Checker& c) {
  const TrainingSpec& t = s.training;
  c.require(t.global_batch % (t.micro_batch * s.parallel.dp) == 0, "/training/global_batch",
            "{} is not divisible by micro_batch·dp ({}·{})", t.global_batch, t.micro_batch, s.parallel.dp);
  check_schedule_micro_batches(s, c);
  c.require(t.optimizer == "adam" || t.optimizer == "adamw" || t.optimizer == "sgd", "/training/optimizer",
            "unknown optimizer '{}' (expected one of adam, adamw, sgd)", t.optimizer);
  c.require(t.optimizer_state == Precision::fp32 || t.optimizer_state == Precision::bf16, "/training/optimizer_state",
            "must be fp32 or bf16, got {}", to_string(t.optimizer_state));
  c.require(t.main_grad == Precision::fp32 || t.main_grad == Precision::bf16, "/training/main_grad",
            "must be fp32 or bf16, got {}", to_string(t.main_grad));
  // Without mixed precision the gradients are the fp32 parameters' own: there is no separate
  // main-gradient buffer whose precision could differ.
  if (element_bytes(t.precision) == 4)
    c.require(t.main_grad == Precision::fp32, "/training/main_grad",
              "bf16 main gradients need mixed precision (training.precision is {})", to_string(t.precision));
  // Block-scaled GEMMs (MXFP8's E8M0 and NVFP4's E4M3 block scales applied inside the MMA)
  // are tensor-core instructions of Blackwell (sm_100) and later; Transformer Engine refuses
  // both recipes on Hopper and Ampere.
  c.require(!block_scaled(t.precision) || s.cluster.gpu.arch == GpuArch::blackwell, "/training/precision",
            "{} needs a Blackwell GPU (block-scaled tensor cores); {} is {}", to_string(t.precision),
            s.cluster.gpu.name, s.cluster.gpu.arch == GpuArch::hopper ? "Hopper" : "Ampere");
  const char* peak_key = t.precision == Precision::mxfp8   ? "fp8"
                         : t.precision == Precision::nvfp4 ? "fp4"
                                                           : to_string(t.precision);
  c.require(s.cluster.gpu.flops.for_precision(t.precision).positive(), "/training/precision",
            "{} needs cluster.gpu.flops.{} > 0 ({} has none)", to_string(t.precision), peak_key, s.cluster.gpu.name);
  // The scaling of per-tensor FP8 means nothing to the other precisions.
  c.require(t.fp8_scaling == Fp8Scaling::delayed || t.precision == Precision::fp8, "/training/fp8_scaling",
            "current scaling is a recipe of training.precision fp8, not of {}", to_string(t.precision));
}

bool graphs(const TrainingSpec& t, CudaGraphScope scope) {
  return std::find(t.cuda_graph_scope.begin(), t.cuda_graph_scope.end(), scope) != t.cuda_graph_scope.end();
}

bool recomputes(const TrainingSpec& t, RecomputeModule m) {
  return std::find(t.recompute_modules.begin(), t.recompute_modules.end(), m) != t.recompute_modules.end();
}

// Selective recompute of a module Megatron-Core's per-layer graphs capture, in a model with
// dropout: TransformerConfig.__post_init__ refuses a graphed recompute module that draws random
// numbers ("Graphed recompute module doesn't accept random number"; the whole layer, an empty
// scope, captures every module). GeLU models keep GPT's dropout 0.1 on the attention
// probabilities and on each block's output (attention_dropout, hidden_dropout).
void check_graphed_recompute(const Scenario& s, const Checker& c) {
  const TrainingSpec& t = s.training;
  if (t.recompute != Recompute::selective || !s.model.trains_with_dropout()) return;
  const bool whole = t.cuda_graph_scope.empty();
  const auto inside = [whole](const char* scope) {
    return whole ? std::string("whole layers, training.cuda_graph_scope empty")
                 : fmt::format("training.cuda_graph_scope with \"{}\"", scope);
  };
  const bool core_attn = t.recompute_modules.empty() || recomputes(t, RecomputeModule::core_attn);
  c.require(!core_attn || !(whole || graphs(t, CudaGraphScope::attn)), "/training/recompute",
            "\"selective\" recompute of the attention core (\"core_attn\"{}) inside CUDA graphs ({}): Megatron-Core "
            "refuses it with attention dropout (\"attention dropout is not supported with graphed attention "
            "recomputation\"), and a GeLU model trains with GPT's dropout 0.1; capture no \"attn\" "
            "(training.cuda_graph_scope [\"mlp\"]), recompute other training.recompute_modules, or recompute nothing",
            t.recompute_modules.empty() ? ", the default module" : "", inside("attn"));
  c.require(!recomputes(t, RecomputeModule::mlp) || !(whole || graphs(t, CudaGraphScope::mlp)), "/training/recompute",
            "\"selective\" recompute of \"mlp\" inside CUDA graphs ({}): Megatron-Core refuses it with hidden dropout "
            "(\"hidden dropout is not supported with graphed MLP/MoE recomputation\"), and a GeLU model trains with "
            "GPT's dropout 0.1; capture no \"mlp\" (training.cuda_graph_scope [\"attn\"]) or recompute no \"mlp\"",
            inside("mlp"));
}

// CUDA graphs of the transformer layers exist where the framework captures them (Megatron's
// --enable-cuda-graph, NeMo's, PyTorch's make_graphed_callables) and the layers issue nothing
// from the CPU between their kernels: FSDP's hooks gather each layer's parameters from the CPU.
void check_cuda_graphs(const Scenario& s, const Checker& c) {
  if (!s.training.cuda_graphs) return;
  const Framework f = s.training.framework;
  c.require(captures_cuda_graphs(f), "/training/cuda_graphs", "{} does not capture training steps in CUDA graphs",
            f == Framework::deepspeed ? "deepspeed" : "torchtitan");
  c.require(s.data_parallel.kind != DpKind::fsdp && s.data_parallel.kind != DpKind::hsdp, "/training/cuda_graphs",
            "CUDA graphs of FSDP-sharded layers are not simulated (FSDP's hooks gather each layer's parameters from "
            "the CPU)");
  // A whole layer in one graph needs fixed shapes: a mixture of experts' token counts vary
  // (Megatron-Core's CUDA graph guide: whole-layer capture does not work for MoE dynamic shapes,
  // its "moe" scope is for drop-and-pad only; the dispatch reads the counts on the CPU).
  const bool megatron = runs_megatron_options(f);
  c.require(!s.training.cuda_graph_scope.empty() || s.model.moe.experts == 0,
            megatron ? "/training/cuda_graph_scope" : "/training/cuda_graphs", "{}",
            megatron ? "empty (the whole layer in one graph) with a mixture of experts: Megatron-Core cannot capture a "
                       "MoE layer whose token counts vary; name the parts to capture, for instance [\"attn\", "
                       "\"moe_router\", \"moe_preprocess\"]"
                     : "whole layers in CUDA graphs with a mixture of experts: a MoE layer's token counts vary, and a "
                       "graph replays fixed shapes");
  if (!megatron) return;
  // Megatron-Core's per-layer graphs (TransformerConfig.__post_init__: "full recompute is only
  // supported with full iteration CUDA graph"; before its 2025-12 refactor, "CUDA graphs not
  // supported with activation recomputation").
  c.require(s.training.recompute != Recompute::full, "/training/recompute",
            "\"full\" with training.cuda_graphs: Megatron-Core refuses full recompute with per-layer CUDA graphs "
            "(only a full-iteration graph, which stepsim does not simulate, takes it); use selective recompute or no "
            "CUDA graphs");
  check_graphed_recompute(s, c);
}

// training.cuda_graph_scope as Megatron-Core accepts it (--cuda-graph-scope with
// --cuda-graph-impl transformer_engine: moe_preprocess only beside moe_router), and refused
// where a scope has nothing of this model to capture, since such a key would change nothing.
void check_cuda_graph_scope(const Scenario& s, const Checker& c) {
  const TrainingSpec& t = s.training;
  if (t.cuda_graph_scope.empty()) return;
  const char* where = "/training/cuda_graph_scope";
  c.require(t.cuda_graphs, where, "the parts of each layer CUDA graphs capture: set training.cuda_graphs to true");
  c.require(runs_megatron_options(t.framework), "/training/framework",
            "training.cuda_graph_scope is Megatron-Core's (megatron or nemo), not {}'s", traits_of(t.framework).name);
  c.require(!graphs(t, CudaGraphScope::moe), where,
            "\"moe\" (the whole MoE block in a graph, which needs fixed token counts) is not simulated yet (attn, mlp, "
            "moe_router and moe_preprocess are)");
  const bool moe = s.model.moe.experts > 0;
  c.require(!graphs(t, CudaGraphScope::moe_router) || moe, where,
            "\"moe_router\" needs a mixture-of-experts model (model.moe.experts > 0)");
  c.require(!graphs(t, CudaGraphScope::moe_preprocess) || graphs(t, CudaGraphScope::moe_router), where,
            "\"moe_preprocess\" is captured with \"moe_router\" only, as Megatron-Core requires");
  // The all-to-all dispatcher's preprocessing with a capacity factor depends on the routing's
  // token counts (TransformerConfig: "moe_preprocess cuda graph is not supported when there are
  // ... capacity factor").
  c.require(!graphs(t, CudaGraphScope::moe_preprocess) || s.model.moe.dispatcher != MoeDispatcher::alltoall ||
                s.model.moe.capacity_factor <= 0,
            where,
            "\"moe_preprocess\" with the alltoall dispatcher and a capacity factor ({}): Megatron-Core does not "
            "capture that preprocessing in a graph",
            s.model.moe.capacity_factor);
  c.require(!graphs(t, CudaGraphScope::mlp) || !moe || s.model.mixed_layers(), where,
            "\"mlp\" captures dense MLP blocks and every layer of this model is a mixture of experts");
}

// training.recompute_modules as Megatron-Core accepts it (TransformerConfig.__post_init__), and
// refused where Megatron-Core would accept a module that has nothing to act on in this model
// (TransformerLayer keeps an IdentityOp norm and a MoE layer's MLP out of it), since such a key
// would change nothing.
void check_recompute_modules(const Scenario& s, const Checker& c) {
  const TrainingSpec& t = s.training;
  if (t.recompute_modules.empty()) return;
  const char* where = "/training/recompute_modules";
  c.require(t.recompute == Recompute::selective, where,
            "the modules to recompute are Megatron-Core's selective recompute: set training.recompute to "
            "\"selective\"");
  const Framework f = t.framework;
  c.require(runs_megatron_options(f), "/training/framework",
            "training.recompute_modules is Megatron-Core's (megatron or nemo), not {}'s", traits_of(f).name);
  c.require(!recomputes(t, RecomputeModule::moe) && !recomputes(t, RecomputeModule::shared_experts), where,
            "recompute of \"moe\" and \"shared_experts\" is not simulated yet (core_attn, moe_act, layernorm, "
            "mla_up_proj and mlp are)");
  const bool moe = s.model.moe.experts > 0;
  c.require(!recomputes(t, RecomputeModule::mla_up_proj) || s.model.latent_attention(), where,
            "\"mla_up_proj\" needs latent attention (model.mla): Megatron-Core refuses it otherwise");
  c.require(!recomputes(t, RecomputeModule::moe_act) || moe, where,
            "\"moe_act\" needs a mixture-of-experts model (model.moe.experts > 0): Megatron-Core refuses it without "
            "the experts' grouped GEMM");
  c.require(!recomputes(t, RecomputeModule::mlp) || !moe || s.model.mixed_layers(), where,
            "\"mlp\" recomputes dense MLPs and every layer of this model is a mixture of experts (Megatron-Core "
            "leaves a MoE layer out of it)");
  c.require(!recomputes(t, RecomputeModule::layernorm) || moe || s.model.latent_attention(), where,
            "\"layernorm\" recomputes norms that are not fused into the next Linear (the input norm before latent "
            "attention's down projections, the norm before a MoE layer); in this model both are fused, so "
            "Megatron-Core recomputes none");
  const bool delayed_fp8 = t.precision == Precision::fp8 && t.fp8_scaling == Fp8Scaling::delayed;
  c.require(!delayed_fp8 || (!recomputes(t, RecomputeModule::moe_act) && !recomputes(t, RecomputeModule::layernorm)),
            where,
            "Megatron-Core refuses \"moe_act\" and \"layernorm\" recompute with FP8 delayed scaling (set "
            "training.fp8_scaling to current)");
}

// Activation offload as Megatron-Core accepts it (TransformerConfig.__post_init__): fewer
// layers than the model has (Transformer Engine keeps the last one resident), no pipeline
// parallelism, no recompute and no CUDA graphs; and a host link to copy over.
void check_activation_offload(const Scenario& s, const Checker& c) {
  const int n = s.training.activation_offload_layers;
  if (n == 0) return;
  const char* where = "/training/activation_offload_layers";
  c.require(s.parallel.pp == 1, where,
            "activation offload with pipeline parallelism (pp {}) is refused by Megatron-Core (\"no support for "
            "Pipeline parallelism with CPU offloading\")",
            s.parallel.pp);
  c.require(n < s.model.layers, where,
            "{} layers is more than the stage can offload: it has {} transformer layers and Megatron-Core keeps the "
            "last one's activations on the GPU (at most {})",
            n, s.model.layers, s.model.layers - 1);
  c.require(s.training.recompute == Recompute::none, where,
            "activation offload with recompute is refused by Megatron-Core (\"CPU offloading does not work when "
            "activation recomputation is enabled\"): set training.recompute to none");
  c.require(!s.training.cuda_graphs, where,
            "activation offload with CUDA graphs is refused by Megatron-Core (\"CUDA graphs not supported with CPU "
            "offloading\")");
  c.require(s.cluster.host_link.bandwidth.positive(), where,
            "cluster {} describes no link to host memory to offload over (set cluster.host_link.bandwidth)",
            s.cluster.name);
  const Framework f = s.training.framework;
  c.require(runs_megatron_options(f), "/training/framework",
            "training.activation_offload_layers is Megatron-Core's offload through Transformer Engine (megatron or "
            "nemo), not {}'s",
            traits_of(f).name);
}

// TP communication overlap exists as Transformer Engine's userbuffers (Megatron's
// --tp-comm-overlap: megatron, nemo, and the unspecified framework, whose options are
// Megatron-Core's) and as torchtitan's async TP, which needs torch.compile (parallelize_llama
// raises "Async TP requires --training.compile"); eager PyTorch and DeepSpeed have neither.
bool overlaps_tp(Framework f) {
  return f != Framework::torchtitan && f != Framework::pytorch && f != Framework::deepspeed;
}

// Transformer Engine's userbuffers overlap exists only with sequence parallelism (Megatron
// refuses --tp-comm-overlap without it) and only with a TP group to talk to; its copies go over
// NVLink, so every TP group lies inside one NVLink domain: at most a domain's GPUs, and none
// across a domain's boundary (TP groups of 16 on 72-GPU racks: ranks 64 to 79 span two).
// A PCIe node has no NVLink: its GPUs are one domain only as the collectives' intra-node tier
// (ClusterSpec::domain_gpus), and the overlap has no NVLink to copy over there.
void check_tp_overlap(const Scenario& s, const Checker& c) {
  if (!s.tensor_parallel.comm_overlap) return;
  const Framework f = s.training.framework;
  if (!overlaps_tp(f)) {
    const bool framework_last =
        c.assignment_of("/training/framework").size() > c.assignment_of("/tensor_parallel/comm_overlap").size();
    c.fail(framework_last ? "/training/framework" : "/tensor_parallel/comm_overlap",
           f == Framework::torchtitan
               ? std::string("tensor_parallel.comm_overlap under torchtitan is its async TP, which needs "
                             "torch.compile (torchtitan raises \"Async TP requires --training.compile\"): use "
                             "training.framework torchtitan-compile or turn the overlap off")
               : fmt::format("tensor_parallel.comm_overlap is Transformer Engine's userbuffers (megatron, nemo) or "
                             "torchtitan-compile's async TP, not {}'s, which has no TP communication overlap: turn "
                             "the overlap off",
                             traits_of(f).name));
  }
  c.require(s.parallel.tp > 1, "/tensor_parallel/comm_overlap", "needs parallel.tp > 1 (there is no TP communication)");
  c.require(s.cluster.intra_node.fabric != IntraFabric::pcie, "/tensor_parallel/comm_overlap",
            "needs NVLink between the GPUs of each TP group (Transformer Engine's overlap copies over NVLink), and the "
            "cluster's intra-node fabric (cluster.intra_node.fabric) is \"pcie\", with none: turn the overlap off");
  const int domain = s.cluster.domain_gpus();
  c.require(s.parallel.tp <= domain, "/tensor_parallel/comm_overlap",
            "needs the TP group inside one NVLink domain (tp {} > {} GPUs per domain): the overlap copies over "
            "NVLink",
            s.parallel.tp, domain);
  const TpStraddle straddle = tp_straddle(s.parallel.tp, s.parallel.gpus(), domain);
  if (straddle.first >= 0) {
    const long long first = straddle.first * s.parallel.tp, last = first + s.parallel.tp - 1;
    const long long d0 = first / domain, d1 = last / domain;
    c.fail("/tensor_parallel/comm_overlap",
           fmt::format("needs every TP group inside one NVLink domain (the overlap copies over NVLink), but {} of {} "
                       "TP groups of {} ranks span two domains of {} GPUs: {}TP group {} (ranks {} to {}) spans "
                       "NVLink domains {} (GPUs {} to {}) and {} (GPUs {} to {}); choose a tp that divides {}, or "
                       "turn the overlap off",
                       straddle.crossing, straddle.groups, s.parallel.tp, domain,
                       straddle.crossing > 1 ? "the first, " : "", straddle.first, first, last, d0, d0 * domain,
                       d0 * domain + domain - 1, d1, d1 * domain, d1 * domain + domain - 1, domain));
  }
  c.require(s.parallel.sequence_parallel, "/tensor_parallel/comm_overlap",
            "needs \"sequence_parallel\": true (Transformer Engine overlaps the AllGather and ReduceScatter of "
            "sequence parallelism)");
}

// Megatron-Core's EP all-to-all overlap where Megatron-Core runs it (TransformerConfig's
// __post_init__ and combined_1f1b.py): an EP group to talk to, the all-to-all or flex
// dispatcher, a pipeline only with virtual stages (the interleaved schedule; without a
// pipeline, forward_backward_no_pipelining's combined 1F1B), no full recompute, a 16-bit model,
// at most one multi-token-prediction layer, and Megatron's own schedules.
void check_a2a_overlap(const Scenario& s, const Checker& c) {
  if (!s.model.moe.a2a_overlap) return;
  const char* key = "/model/moe/a2a_overlap";
  const ParallelSpec& p = s.parallel;
  c.require(s.model.moe.experts > 0 && p.ep > 1, key,
            "needs expert parallelism (model.moe.experts > 0 and parallel.ep > 1, got ep {}): there is no EP "
            "all-to-all to overlap",
            p.ep);
  // Without a pipeline the schedule is 1F1B already (check_degrees), as the combined 1F1B needs.
  if (p.pp > 1)
    c.require(p.schedule == Schedule::interleaved, "/parallel/schedule",
              "model.moe.a2a_overlap with pp {} needs \"schedule\": \"interleaved\" (Megatron-Core requires virtual "
              "pipeline stages)",
              p.pp);
  c.require(s.training.recompute != Recompute::full, "/training/recompute",
            "\"full\" recompute with model.moe.a2a_overlap: Megatron-Core refuses full recomputation with the EP "
            "all-to-all overlap");
  c.require(element_bytes(s.training.precision) != 4, "/training/precision",
            "{} with model.moe.a2a_overlap: Megatron-Core runs the overlap only with a bf16 or fp16 model",
            to_string(s.training.precision));
  c.require(s.model.mtp_layers <= 1, "/model/mtp_layers",
            "{} with model.moe.a2a_overlap: Megatron-Core overlaps at most one multi-token-prediction layer",
            s.model.mtp_layers);
  // The overlap runs each layer through its fine-grained schedule plan
  // (models/gpt/fine_grained_callables.py), outside TransformerBlock.forward and the CPU
  // offload context that block opens around its layers.
  c.require(s.training.activation_offload_layers == 0, "/training/activation_offload_layers",
            "{} with model.moe.a2a_overlap is not simulated: Megatron-Core's EP overlap runs the layers outside the "
            "transformer block whose CPU offload context offloads them",
            s.training.activation_offload_layers);
  // The merged passes interleave two micro-batches' layers, whose FSDP units would be gathered
  // and freed across each other: not modelled.
  c.require(s.data_parallel.kind != DpKind::fsdp, "/data_parallel/kind",
            "fsdp with model.moe.a2a_overlap is not simulated yet (use zero1)");
  const Framework f = s.training.framework;
  c.require(runs_megatron_options(f), "/training/framework",
            "model.moe.a2a_overlap is Megatron-Core's (megatron or nemo), not {}'s", traits_of(f).name);
}

// The flex dispatcher is Megatron-Core's (--moe-token-dispatcher-type flex, DeepEP or HybridEP
// behind it). Against the all-to-all dispatcher it sends fewer bytes out of an NVLink domain
// (parallelism/expert_parallel.cpp, flex_share) and, under Megatron-Core itself, does without
// the all-to-all dispatcher's sort by local expert and its all-to-all of the probabilities
// (workload/shape.cpp, expert_parallel.cpp). Where none of that applies it would change
// nothing: without expert parallelism, and under the unspecified framework (whose all-to-all
// dispatcher is modelled without those two) with the EP group inside one NVLink domain.
void check_dispatcher(const Scenario& s, const Checker& c) {
  if (s.model.moe.experts == 0 || s.model.moe.dispatcher == MoeDispatcher::alltoall) return;
  const char* where = "/model/moe/dispatcher";
  c.require(s.parallel.ep > 1, where,
            "\"flex\" needs parallel.ep > 1 (without expert parallelism there is no EP all-to-all to dispatch)");
  const Framework f = s.training.framework;
  c.require(runs_megatron_options(f), "/training/framework",
            "model.moe.dispatcher \"flex\" is Megatron-Core's token dispatcher (megatron or nemo), not {}'s",
            traits_of(f).name);
  if (traits_of(f).megatron_core) return;
  const long long span = static_cast<long long>(s.parallel.ep) * std::max(s.parallel.etp, 1);
  c.require(ep_domains(s) > 1, where,
            "\"flex\" changes nothing here: it sends fewer bytes only where the EP group spans NVLink domains "
            "(ep·etp = {} GPUs, in one domain of {}), and the all-to-all dispatcher's sort by local expert and "
            "all-to-all of the probabilities, which flex does without, are Megatron-Core's, simulated under "
            "training.framework megatron or nemo",
            span, s.cluster.domain_gpus());
}

// Context parallelism runs inside fused attention kernels (Transformer Engine's, or PyTorch's
// context_parallel around scaled_dot_product_attention), and its communication variant means
// something only when there is a CP group. DeepSpeed has neither: its long-sequence parallelism
// is Ulysses (sequence_parallel_size, ALST), all-to-alls that move the sequence shards onto the
// attention heads, which is not simulated.
void check_context_parallel(const Scenario& s, const Checker& c) {
  if (s.parallel.cp > 1) {
    c.require(s.training.framework != Framework::deepspeed, "/parallel/cp",
              "context parallelism (cp {}) under training.framework deepspeed is not simulated: DeepSpeed has no "
              "ring or all-gather context parallelism, its long-sequence parallelism is Ulysses (all-to-alls that "
              "move the sequence shards onto the attention heads), which is not simulated",
              s.parallel.cp);
    c.require(fused_attention(s.training.attention), "/training/attention",
              "context parallelism (cp {}) needs \"attention\": \"flash\" or \"flash2\" (the ring runs inside the "
              "fused kernel)",
              s.parallel.cp);
    return;
  }
  c.require(s.context_parallel.comm == CpComm::p2p, "/context_parallel/comm",
            "\"all_gather\" needs parallel.cp > 1 (there are no other ranks' keys and values to gather)");
}

// Megatron-Core's DDP and distributed optimizer accumulate the micro-batches' gradients into one
// buffer per model chunk, the main gradients (param.main_grad), and reduce that buffer as it is:
// its precision is the reduction's (DistributedDataParallelConfig.grad_reduce_in_fp32 sets both).
// So under training.framework megatron or nemo with data_parallel.kind ddp or zero1, one of
// training.main_grad and data_parallel.grad_reduce_dtype given sets the other; both given must
// agree; neither given is fp32, as Megatron-LM sets it for every bf16 run
// (accumulate_allreduce_grads_in_fp32 in megatron/training/arguments.py) and Megatron-Bridge's
// and NeMo 2's mixed-precision recipes do by default. Megatron-FSDP keeps them apart
// (megatron_fsdp_main_grads_dtype and megatron_fsdp_grad_comm_dtype), as do other frameworks.
//
// PyTorch's DistributedDataParallel (data_parallel.kind ddp under pytorch, torchtitan and
// torchtitan-compile) reduces the parameters' own gradients, which the micro-batches accumulate
// into and which have the parameters' dtype: its reducer makes its buckets per gradient dtype,
// each a tensor of that dtype, and all-reduces each bucket as it is (reducer.cpp). The two keys
// are one precision there too, the gradients'; neither given, fp32 whatever training.precision:
// PyTorch's mixed precision beside DDP is autocast (torchtitan's maybe_enable_amp returns
// torch.autocast for DDP and single-device runs, "Mixed precision training is handled by AMP";
// PyTorch's AMP recipe likewise wraps the forward of an fp32 model in torch.autocast), which
// keeps the parameters, and so their gradients, in fp32 and casts each weight to bf16 for its
// GEMM. bf16 given is a model cast to bf16 (model.to(torch.bfloat16)), whose gradients are bf16
// (fp16 training's two-byte gradients are counted as bf16, main_grad knowing no fp16).
//
// Elsewhere the reduction's precision is its own key, and not given it is the gradients' as the
// parameters hold them: fp32 where training.precision keeps fp32 parameters (fp32, tf32), which
// have no bf16 gradients to reduce. DeepSpeed's engine communicates in fp32 unless its fp16 or
// bf16 mode is on (communication_data_type, deepspeed/runtime/engine.py); Megatron-Core's DDP
// and distributed optimizer reduce in param.dtype unless grad_reduce_in_fp32 (the unspecified
// framework's keys); PyTorch's FSDP without a MixedPrecision reduce_dtype reduces the
// parameters' own. Under mixed precision the schema's bf16 stays.
void tie_gradient_buffer(Scenario& s, const Checker& c) {
  if (!main_grad_is_reduced_buffer(s)) {
    if (!s.data_parallel.grad_reduce_dtype_given && element_bytes(s.training.precision) == 4)
      s.data_parallel.grad_reduce_dtype = Precision::fp32;
    return;
  }
  TrainingSpec& t = s.training;
  DataParallelSpec& d = s.data_parallel;
  const std::string_view name = traits_of(t.framework).name;
  const bool megatron = traits_of(t.framework).megatron_core;
  const std::string owner =
      fmt::format("{} (training.framework {})", megatron ? "Megatron-Core" : "PyTorch's DDP", name);
  if (t.main_grad_given && d.grad_reduce_dtype_given) {
    c.require(d.grad_reduce_dtype == t.main_grad, "/data_parallel/grad_reduce_dtype",
              "{} with training.main_grad {}: under {} {}; give them the same precision",
              to_string(d.grad_reduce_dtype), to_string(t.main_grad), owner,
              megatron ? "the main gradients are the buffer that is reduced (grad_reduce_in_fp32 sets both)"
                       : "the gradients are the parameters' own, which its buckets reduce in their own dtype");
  } else if (t.main_grad_given) {
    d.grad_reduce_dtype = t.main_grad;
  } else if (d.grad_reduce_dtype_given) {
    c.require(d.grad_reduce_dtype == Precision::fp32 || d.grad_reduce_dtype == Precision::bf16,
              "/data_parallel/grad_reduce_dtype",
              "{} under {} would make the {} gradients {} too, and they are fp32 or bf16 (training.main_grad)",
              to_string(d.grad_reduce_dtype), owner, megatron ? "main" : "accumulated", to_string(d.grad_reduce_dtype));
    c.require(megatron || d.grad_reduce_dtype == Precision::fp32 || element_bytes(t.precision) < 4,
              "/data_parallel/grad_reduce_dtype",
              "{} under {}: the gradients are the parameters' own, and training.precision {} keeps fp32 parameters",
              to_string(d.grad_reduce_dtype), owner, to_string(t.precision));
    t.main_grad = d.grad_reduce_dtype;
  } else {
    t.main_grad = Precision::fp32;
    d.grad_reduce_dtype = Precision::fp32;
  }
}

// PyTorch DDP's gradient_as_bucket_view, as each framework runs DDP: off (PyTorch's default)
// where data_parallel.kind ddp is PyTorch's DistributedDataParallel (pytorch, torchtitan's
// replicate), so that its reducer copies every gradient into its bucket and back; on
// otherwise, where the buckets are views of one gradient buffer (Megatron-Core's DDP, and the
// unspecified framework's keys as Megatron-Core runs them), and under every other
// data_parallel.kind, which has no DDP buckets. Off is refused where no PyTorch reducer runs:
// under another kind, under Megatron-Core, which never copies, and under DeepSpeed, whose
// engine reduces its own way.
void resolve_bucket_view(Scenario& s, const Checker& c) {
  DataParallelSpec& d = s.data_parallel;
  const FrameworkTraits& traits = traits_of(s.training.framework);
  if (!d.gradient_as_bucket_view_given) {
    d.gradient_as_bucket_view = d.kind != DpKind::ddp || !traits.pytorch_ddp;
    return;
  }
  if (d.gradient_as_bucket_view) return;
  c.require(d.kind == DpKind::ddp, "/data_parallel/gradient_as_bucket_view",
            "false needs data_parallel.kind ddp: it is PyTorch DDP's option, and the other kinds have no DDP buckets "
            "to copy gradients into");
  c.require(!traits.megatron_core, "/data_parallel/gradient_as_bucket_view",
            "false under training.framework {}: Megatron-Core's DDP reduces its gradient buffer in place (its "
            "buckets are views of it) and never copies gradients into buckets",
            traits.name);
  c.require(s.training.framework != Framework::deepspeed, "/data_parallel/gradient_as_bucket_view",
            "false is not simulated under training.framework deepspeed: DeepSpeed's engine reduces the gradients its "
            "own way, not through PyTorch DDP's reducer");
}

// The data-parallel keys that belong to some kinds only. Set away from its default under
// another kind such a key would do nothing, so it is refused there (its default is inert).
// FSDP's units (fsdp, hsdp) have no gradient buckets; Megatron-Core's buckets (the distributed
// optimizer's, zero1 and zero2, and its DDP's under training.framework megatron or nemo) are
// sized in parameters (bucket_parameters, by default max(4e7, 1e6·dp) as Megatron-Core's DDP
// config makes them), PyTorch DDP's in MiB; only the distributed optimizer gathers parameters
// after the step; shard groups are HSDP's.
enum class KindFamily { sharded, hsdp, bucket_size, buckets, param_gather, megatron_buckets };

bool runs(KindFamily family, DpKind kind, Framework framework) {
  const bool sharded = kind == DpKind::fsdp || kind == DpKind::hsdp;
  switch (family) {
    case KindFamily::sharded:
      return sharded;
    case KindFamily::hsdp:
      return kind == DpKind::hsdp;
    case KindFamily::bucket_size:
      return kind == DpKind::ddp && !megatron_buckets(kind, framework);
    case KindFamily::buckets:
      return !sharded;
    case KindFamily::param_gather:
      return kind == DpKind::zero1 || kind == DpKind::zero2;
    case KindFamily::megatron_buckets:
      return megatron_buckets(kind, framework);
  }
  return true;
}

// PyTorch's DistributedDataParallel caps its first bucket at _DEFAULT_FIRST_BUCKET_BYTES (1 MiB)
// only when bucket_cap_mb is left unset (bucket_bytes_cap_default); a bucket_cap_mb given caps
// the first bucket as well (torch/nn/parallel/distributed.py, _ddp_init_helper's
// bucket_size_limits). first_bucket_mb, given, sets the first bucket either way. Resolved
// where PyTorch's DDP runs (data_parallel.kind ddp under pytorch, torchtitan and
// torchtitan-compile), after the keys are checked, so that the resolved scenario reads back
// alike.
void resolve_first_bucket(Scenario& s) {
  DataParallelSpec& d = s.data_parallel;
  if (!d.bucket_cap_mb_given || d.first_bucket_mb_given) return;
  if (d.kind != DpKind::ddp || !traits_of(s.training.framework).pytorch_ddp) return;
  d.first_bucket_mb = d.bucket_cap_mb;
}

struct KindKey {
  const char* key;  // under data_parallel
  KindFamily family;
  bool (*changed)(const DataParallelSpec&);  // away from its default
  std::string (*default_value)();            // as --set writes it
};

template <auto Field>
bool differs(const DataParallelSpec& d) {
  return d.*Field != DataParallelSpec{}.*Field;
}

template <auto Field>
std::string default_of() {
  return fmt::format("{}", DataParallelSpec{}.*Field);
}

std::string pre_prefetch() { return "pre"; }
std::string pytorch_impl() { return "pytorch"; }

constexpr KindKey kKindKeys[] = {
    {"fsdp_version", KindFamily::sharded, differs<&DataParallelSpec::fsdp_version>,
     default_of<&DataParallelSpec::fsdp_version>},
    {"fsdp_impl", KindFamily::sharded, differs<&DataParallelSpec::fsdp_impl>, pytorch_impl},
    {"reshard_after_forward", KindFamily::sharded, differs<&DataParallelSpec::reshard_after_forward>,
     default_of<&DataParallelSpec::reshard_after_forward>},
    {"forward_prefetch", KindFamily::sharded, differs<&DataParallelSpec::forward_prefetch>,
     default_of<&DataParallelSpec::forward_prefetch>},
    {"backward_prefetch", KindFamily::sharded, differs<&DataParallelSpec::backward_prefetch>, pre_prefetch},
    {"max_inflight_all_gathers", KindFamily::sharded, differs<&DataParallelSpec::max_inflight_all_gathers>,
     default_of<&DataParallelSpec::max_inflight_all_gathers>},
    {"shard_group", KindFamily::hsdp, differs<&DataParallelSpec::shard_group>,
     default_of<&DataParallelSpec::shard_group>},
    {"bucket_cap_mb", KindFamily::bucket_size, differs<&DataParallelSpec::bucket_cap_mb>,
     default_of<&DataParallelSpec::bucket_cap_mb>},
    {"first_bucket_mb", KindFamily::bucket_size, differs<&DataParallelSpec::first_bucket_mb>,
     default_of<&DataParallelSpec::first_bucket_mb>},
    {"bucket_parameters", KindFamily::megatron_buckets, differs<&DataParallelSpec::bucket_parameters>,
     default_of<&DataParallelSpec::bucket_parameters>},
    {"overlap_grad_reduce", KindFamily::buckets, differs<&DataParallelSpec::overlap_grad_reduce>,
     default_of<&DataParallelSpec::overlap_grad_reduce>},
    {"overlap_param_gather", KindFamily::param_gather, differs<&DataParallelSpec::overlap_param_gather>,
     default_of<&DataParallelSpec::overlap_param_gather>},
};

// Why a gradient-bucket key does nothing under DeepSpeed's ZeRO-3 (kind fsdp under deepspeed),
// which reduce-scatters its gradients in buckets of reduce_bucket_size (5e8 elements by default),
// overlapped with the backward by overlap_comm (on at stage 3): stepsim reduces a layer's
// gradients at a time there and models neither.
std::string zero3_bucket_message(KindFamily family) {
  const char* what = family == KindFamily::megatron_buckets
                         ? "sizes the gradient buckets of Megatron-Core and of DeepSpeed's ZeRO-1 and ZeRO-2 (kind "
                           "zero1 or zero2)"
                     : family == KindFamily::bucket_size ? "sizes PyTorch DDP's gradient buckets (kind ddp)"
                                                         : "overlaps gradient buckets (kind ddp, zero1, zero2)";
  return fmt::format(
      "{}: under training.framework deepspeed, kind fsdp is DeepSpeed's ZeRO-3, which reduce-scatters its gradients "
      "in buckets of reduce_bucket_size (5e8 elements by default) during the backward (overlap_comm); stepsim "
      "reduces a layer's gradients at a time there and models neither setting (leave it at its default)",
      what);
}

// Why a key of `family` does nothing under data-parallel kind `dp_kind`.
std::string idle_key_message(KindFamily family, DpKind dp_kind, Framework framework) {
  const char* kind = to_string(dp_kind);
  const std::string_view framework_name = traits_of(framework).name;
  const bool bucket_key =
      family == KindFamily::bucket_size || family == KindFamily::buckets || family == KindFamily::megatron_buckets;
  if (bucket_key && framework == Framework::deepspeed && dp_kind == DpKind::fsdp) return zero3_bucket_message(family);
  switch (family) {
    case KindFamily::sharded:
      return fmt::format(
          "is FSDP's (data_parallel.kind fsdp or hsdp): under kind {} there are no FSDP units for it to act on (leave "
          "it at its default)",
          kind);
    case KindFamily::hsdp:
      return fmt::format("is HSDP's (data_parallel.kind hsdp): kind {} has no shard groups (leave it at 0)", kind);
    case KindFamily::bucket_size:
      if (dp_kind == DpKind::ddp)
        return fmt::format(
            "sizes PyTorch DDP's gradient buckets: under training.framework {} the DDP is Megatron-Core's, which sizes "
            "its buckets in parameters, max(4e7, 1e6·dp) unless data_parallel.bucket_parameters says otherwise "
            "(leave this key at its default)",
            framework_name);
      if (dp_kind == DpKind::zero1 || dp_kind == DpKind::zero2)
        return fmt::format(
            "sizes DDP's gradient buckets (data_parallel.kind ddp): the distributed optimizer of kind {} sizes its "
            "buckets in parameters, max(4e7, 1e6·dp) as Megatron-Core does unless data_parallel.bucket_parameters "
            "says otherwise (leave this key at its default)",
            kind);
      return fmt::format(
          "sizes DDP's gradient buckets (data_parallel.kind ddp): FSDP's kind {} reduces each unit's gradients "
          "instead (leave it at its default)",
          kind);
    case KindFamily::buckets:
      return fmt::format(
          "overlaps gradient buckets (data_parallel.kind ddp, zero1, zero2): FSDP's kind {} reduces each unit's "
          "gradients instead (leave it at its default)",
          kind);
    case KindFamily::param_gather:
      return fmt::format(
          "true needs data_parallel.kind zero1 or zero2: only the distributed optimizer gathers parameters after the "
          "step, and kind {} does not",
          kind);
    case KindFamily::megatron_buckets:
      if (dp_kind == DpKind::ddp)
        return fmt::format(
            "sizes Megatron-Core's gradient buckets (data_parallel.kind zero1 or zero2, or ddp under "
            "training.framework megatron or nemo): kind ddp under training.framework {} is PyTorch's DDP, which "
            "sizes its buckets with bucket_cap_mb and first_bucket_mb (leave it at 0)",
            framework_name);
      return fmt::format(
          "sizes Megatron-Core's gradient buckets (data_parallel.kind zero1 or zero2, or ddp under "
          "training.framework megatron or nemo): FSDP's kind {} reduces each unit's gradients instead (leave it at "
          "0)",
          kind);
  }
  return {};
}

void check_kind_keys(const DataParallelSpec& d, Framework framework, const Checker& c) {
  for (const KindKey& k : kKindKeys) {
    if (!k.changed(d) || runs(k.family, d.kind, framework)) continue;
    const std::string where = std::string("/data_parallel/") + k.key;
    c.require(false, where.c_str(), "{}", idle_key_message(k.family, d.kind, framework));
  }
}

// FSDP2 (fully_shard) prefetches one unit ahead in both passes by itself and has no rate
// limiter: FSDP1's prefetch keys and limit would do nothing there.
void check_fsdp2_keys(const DataParallelSpec& d, Framework framework, const Checker& c) {
  if (d.fsdp_version != 2) return;
  const DataParallelSpec defaults;
  const std::string version = d.fsdp_version_given
                                  ? std::string("fsdp_version 2")
                                  : fmt::format("training.framework {}'s only FSDP", traits_of(framework).name);
  auto fsdp1_key = [&](bool changed, const char* where) {
    c.require(!changed, where,
              "is FSDP1's: FSDP2 ({}) gathers the next unit ahead in the forward and the backward by itself and "
              "limits no AllGathers (leave it at its default)",
              version);
  };
  fsdp1_key(d.forward_prefetch != defaults.forward_prefetch, "/data_parallel/forward_prefetch");
  fsdp1_key(d.backward_prefetch != defaults.backward_prefetch, "/data_parallel/backward_prefetch");
  fsdp1_key(d.max_inflight_all_gathers != defaults.max_inflight_all_gathers, "/data_parallel/max_inflight_all_gathers");
}

// Megatron-FSDP (fsdp_impl megatron) is Megatron-Core's: its FullyShardedDataParallel adapter
// wraps each TransformerLayer as a unit under the optim_grads_params strategy that
// Megatron-Bridge's use_megatron_fsdp sets, and gathers into its buffers in place, as FSDP1's
// flat parameter does (the program's fsdp_version 1). What the memory model counts of it
// (parallelism/memory_model.cpp) leaves no room for PyTorch's other FSDP settings.
void check_megatron_fsdp(const Scenario& s, const Checker& c) {
  const DataParallelSpec& d = s.data_parallel;
  const Framework framework = s.training.framework;
  if (d.fsdp_impl != FsdpImpl::megatron || (d.kind != DpKind::fsdp && d.kind != DpKind::hsdp)) return;
  c.require(traits_of(framework).megatron_core, "/data_parallel/fsdp_impl",
            "megatron is Megatron-Core's FSDP (use_megatron_fsdp): training.framework must be megatron or nemo, "
            "got {}",
            traits_of(framework).name);
  c.require(d.fsdp_version == 1, "/data_parallel/fsdp_version",
            "{} is PyTorch's fully_shard, whose copies in and out of its buffers Megatron-FSDP does not make: with "
            "fsdp_impl megatron leave it at 1 (gathered in place)",
            d.fsdp_version);
  c.require(d.reshard_after_forward, "/data_parallel/reshard_after_forward",
            "false is not Megatron-FSDP's optim_grads_params, which frees each TransformerLayer's gathered weights "
            "after its forward (its optim_grads strategy, which keeps them whole, is not simulated)");
  // Its hooks gather the next TransformerLayer with the current one in both passes
  // (megatron_fsdp.py: prefetch in forward-pass order before the forward, in backward-pass
  // order before the backward); no setting changes either.
  const DataParallelSpec defaults;
  for (const auto& [changed, where] :
       {std::pair{d.forward_prefetch != defaults.forward_prefetch, "/data_parallel/forward_prefetch"},
        std::pair{d.backward_prefetch != defaults.backward_prefetch, "/data_parallel/backward_prefetch"}}) {
    c.require(!changed, where,
              "is PyTorch FSDP1's: Megatron-FSDP (fsdp_impl megatron) gathers the next TransformerLayer ahead in "
              "the forward and the backward by itself, with no setting to change it (leave it at its default)");
  }
  c.require(d.max_inflight_all_gathers == defaults.max_inflight_all_gathers, "/data_parallel/max_inflight_all_gathers",
            "{}: Megatron-FSDP gathers into a double buffer of two TransformerLayers (fsdp_double_buffer), so two "
            "at most are gathered at once; leave it at 2",
            d.max_inflight_all_gathers);
  // MXFP8 keeps a column-wise buffer beside the row-wise one (transpose_weight_buffer) and
  // Megatron-Bridge turns reuse_grad_buf_for_mxfp8_param_ag off under Megatron-FSDP, so its
  // weights would be gathered at 1 byte each way, not the BF16 the program sends; NVFP4's
  // recipes leave fp8_param_gather off. Neither is modelled from its source yet.
  c.require(s.training.precision != Precision::mxfp8 && s.training.precision != Precision::nvfp4, "/training/precision",
            "{} with data_parallel.fsdp_impl megatron is not simulated yet (Megatron-FSDP's buffers are modelled for "
            "BF16 and per-tensor FP8 weights)",
            to_string(s.training.precision));
}

void check_data_parallel(const DataParallelSpec& d, const ParallelSpec& p, Framework framework, const Checker& c) {
  check_kind_keys(d, framework, c);
  check_fsdp2_keys(d, framework, c);
  // Megatron asserts it of its arguments (--overlap-param-gather needs --overlap-grad-reduce),
  // whatever the data-parallel size.
  if (runs(KindFamily::param_gather, d.kind, framework) && d.overlap_param_gather)
    c.require(d.overlap_grad_reduce, "/data_parallel/overlap_param_gather",
              "needs overlap_grad_reduce, as in Megatron");
  c.require(d.grad_reduce_dtype == Precision::bf16 || d.grad_reduce_dtype == Precision::fp16 ||
                d.grad_reduce_dtype == Precision::fp32,
            "/data_parallel/grad_reduce_dtype", "must be bf16, fp16 or fp32, got {}", to_string(d.grad_reduce_dtype));
  c.require(d.fsdp_version == 1 || d.fsdp_version == 2, "/data_parallel/fsdp_version", "must be 1 or 2, got {}",
            d.fsdp_version);
  if (d.kind == DpKind::hsdp && d.shard_group > 0)
    c.require(p.dp % d.shard_group == 0, "/data_parallel/shard_group", "{} does not divide dp ({})", d.shard_group,
              p.dp);
}

// "ddp, zero1 or zero2": those of `kinds` that training.framework `f` has (has_dp_kind), for
// the hint of a refusal.
std::string kinds_of(Framework f, std::initializer_list<DpKind> kinds) {
  std::vector<std::string> names;
  for (const DpKind k : kinds)
    if (has_dp_kind(f, k)) names.emplace_back(to_string(k));
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

// Keys that are read but whose feature is not simulated yet: refused rather than ignored.
void check_simulated(const Scenario& s, const Checker& c) {
  // Multi-token prediction runs on the last stage beside the head, whose CP handling of a
  // transformer layer is not built there; its column-parallel projection splits h by TP.
  if (s.model.mtp_layers > 0) {
    c.require(s.model.hidden % s.parallel.tp == 0, "/parallel/tp",
              "tp {} does not divide hidden {} (multi-token prediction's projection is split by TP)", s.parallel.tp,
              s.model.hidden);
    c.require(s.parallel.cp == 1, "/parallel/cp",
              "multi-token prediction (model.mtp_layers) with cp > 1 is not simulated yet");
  }
  if (s.model.sliding_window > 0) {
    c.require(s.parallel.cp == 1, "/parallel/cp", "sliding-window attention with cp > 1 is not simulated yet");
    c.require(s.training.attention != AttentionKind::unfused, "/training/attention",
              "sliding-window attention with unfused attention is not simulated yet");
  }
  // MLA's K/V blocks under CP are not the K/V widths of standard heads, and TP communication
  // overlap would pipeline its up projections with gathers of the hidden state, where
  // Megatron-Core gathers the latents.
  if (s.model.latent_attention()) {
    c.require(s.parallel.cp == 1, "/parallel/cp", "latent attention (model.mla) with cp > 1 is not simulated yet");
    c.require(!s.tensor_parallel.comm_overlap, "/tensor_parallel/comm_overlap",
              "latent attention (model.mla) with TP communication overlap is not simulated yet");
    c.require(s.training.attention != AttentionKind::unfused, "/training/attention",
              "latent attention (model.mla) with unfused attention is not simulated yet");
    c.require(s.training.recompute != Recompute::selective_op, "/training/recompute",
              "latent attention (model.mla) with selective_op recompute is not simulated yet");
  }
  const Framework f = s.training.framework;
  if (s.model.moe.experts > 0) {
    // HSDP shards the routed experts over the expert-dp ranks inside a shard group
    // (data_parallel_hsdp.cpp), as torchtitan borrows EP from dp_shard·cp (and TP): an expert
    // block of ep·etp consecutive ranks must lie inside one shard group of tp·cp·shard ranks.
    if (s.data_parallel.kind == DpKind::hsdp) {
      // Megatron-Core's hybrid sharding of expert states (its partial expert-dp groups) is its own.
      c.require(!traits_of(f).megatron_core, "/data_parallel/kind",
                "HSDP of a mixture of experts under training.framework {} is not simulated yet (torchtitan's and "
                "PyTorch's are; use {})",
                traits_of(f).name, kinds_of(f, {DpKind::ddp, DpKind::zero1, DpKind::zero2, DpKind::fsdp}));
      const long long block = static_cast<long long>(s.parallel.ep) * s.parallel.etp;
      const int shard = hsdp_shard_ranks(s);
      const long long span = static_cast<long long>(s.parallel.tp) * s.parallel.cp * shard;
      c.require(span % block == 0,
                set_among(c, {"/data_parallel/shard_group", "/data_parallel/kind", "/parallel/ep", "/parallel/etp"},
                          "/data_parallel/kind"),
                "HSDP of a mixture of experts needs each expert group inside a shard group: ep·etp ({}) does not "
                "divide tp·cp·shard_group ({}·{}·{} = {}){}",
                block, s.parallel.tp, s.parallel.cp, shard, span,
                s.data_parallel.shard_group > 0 ? ""
                                                : " (the default shard group: the DP ranks of one NVLink domain; set "
                                                  "data_parallel.shard_group)");
    }
    // DeepSpeed's engine asserts "MoE not supported with Stage 3" (runtime/engine.py).
    c.require(f != Framework::deepspeed || s.data_parallel.kind != DpKind::fsdp, "/data_parallel/kind",
              "DeepSpeed's ZeRO-3 does not train mixture-of-experts models (its engine refuses them at stage 3; use "
              "{})",
              kinds_of(f, {DpKind::ddp, DpKind::zero1, DpKind::zero2}));
  }
  if (s.parallel.schedule == Schedule::zb_h1 || s.parallel.schedule == Schedule::zb_h2)
    c.require(s.data_parallel.kind != DpKind::fsdp && s.data_parallel.kind != DpKind::hsdp, "/data_parallel/kind",
              "FSDP and HSDP under the zero-bubble schedules are not simulated yet (use {})",
              kinds_of(f, {DpKind::ddp, DpKind::zero1, DpKind::zero2}));
  // DualPipe's two copies of each stage sum whole gradients, which these strategies shard.
  if (s.parallel.schedule == Schedule::dualpipe)
    c.require(s.data_parallel.kind == DpKind::ddp || s.data_parallel.kind == DpKind::zero1, "/data_parallel/kind",
              "ZeRO-2, FSDP and HSDP under the DualPipe schedule are not simulated yet (use {})",
              kinds_of(f, {DpKind::ddp, DpKind::zero1}));
}

}  // namespace

bool kind_runs_key(DpKind kind, Framework framework, std::string_view key) {
  for (const KindKey& k : kKindKeys)
    if (key == k.key) return runs(k.family, kind, framework);
  return true;
}

std::optional<DpKind> dp_kind_named(std::string_view name) {
  for (const DpKind k : {DpKind::ddp, DpKind::zero1, DpKind::zero2, DpKind::fsdp, DpKind::hsdp})
    if (name == to_string(k)) return k;
  return std::nullopt;
}

bool splits_over_tp(const ModelSpec& m, int tp) {
  // check_split's rules, and check_simulated's for multi-token prediction's projection.
  return tp >= 1 && m.heads % tp == 0 && m.kv_heads % tp == 0 && m.ffn_hidden % tp == 0 &&
         m.moe.shared_experts * m.moe.expert_ffn_hidden % tp == 0 && (m.mtp_layers == 0 || m.hidden % tp == 0);
}

bool runs_context_parallel(const Scenario& s) {
  // check_context_parallel's kernels and check_simulated's features.
  return fused_attention(s.training.attention) && !s.model.latent_attention() && s.model.mtp_layers == 0 &&
         s.model.sliding_window == 0 && s.training.framework != Framework::deepspeed;
}

TpStraddle tp_straddle(int tp, long long ranks, int domain_gpus) {
  TpStraddle out;
  if (tp <= 0 || domain_gpus <= 0) return out;
  out.groups = ranks / tp;
  // Which groups cross repeats every lcm(tp, domain) ranks: domain / gcd groups.
  const long long period = domain_gpus / std::gcd(tp, domain_gpus);
  const auto crosses = [&](long long g) { return g * tp / domain_gpus != (g * tp + tp - 1) / domain_gpus; };
  long long per_period = 0, in_rest = 0;
  const long long rest = out.groups % period;
  for (long long g = 0; g < period && g < out.groups; ++g)
    if (crosses(g)) {
      ++per_period;
      if (g < rest) ++in_rest;
      if (out.first < 0) out.first = g;
    }
  out.crossing = out.groups / period * per_period + in_rest;
  return out;
}

bool fills_schedule(Schedule schedule, int pp, long long micro_batches, bool pytorch) {
  if (schedule == Schedule::interleaved && pytorch) return micro_batches % std::max(1LL, micro_batches / pp) == 0;
  if (schedule == Schedule::interleaved) return micro_batches % pp == 0;
  if (schedule == Schedule::dualpipe) return micro_batches % 2 == 0 && micro_batches >= 2LL * pp;
  return true;
}

bool runs_tp_overlap(const Scenario& s) {
  return !s.model.latent_attention() && s.cluster.intra_node.fabric != IntraFabric::pcie &&
         overlaps_tp(s.training.framework);
}

bool runs_expert_degree(const Scenario& s, int ep) {
  const MoeSpec& moe = s.model.moe;
  if (moe.experts == 0) return ep == 1;
  if (ep < 1 || moe.experts % ep != 0) return false;
  // check_split and check_imbalance: the busiest rank's share within what a rank can receive.
  if (ep == 1 && moe.imbalance != 1.0) return false;
  if (moe.imbalance * moe.top_k > ep * std::min(moe.top_k, moe.experts / ep)) return false;
  // check_a2a_overlap and check_dispatcher: an EP all-to-all to overlap or dispatch.
  const bool flex = moe.dispatcher != MoeDispatcher::alltoall;
  if ((moe.a2a_overlap || flex) && ep == 1) return false;
  if (flex && !traits_of(s.training.framework).megatron_core) {
    Scenario t = s;
    t.parallel.ep = ep;
    return ep_domains(t) > 1;
  }
  return true;
}

bool runs_pipeline(const Scenario& s, int pp, Schedule schedule) {
  if (pp <= 1) return true;
  // resolve_pipeline_engine, check_a2a_overlap and check_activation_offload.
  if (deepspeed_pipeline_engine(s.training.framework, pp) &&
      (schedule != Schedule::one_f_one_b || s.model.moe.experts > 0))
    return false;
  if (s.model.moe.a2a_overlap && schedule != Schedule::interleaved) return false;
  return s.training.activation_offload_layers == 0;
}

std::string precision_refusal(const Scenario& s, Precision p) {
  // check_a2a_overlap and check_training.
  if (s.model.moe.a2a_overlap && element_bytes(p) == 4)
    return "model.moe.a2a_overlap runs with a bf16 or fp16 model only (Megatron-Core)";
  // A scaling the scenario gives is refused beside another precision; one the framework chose
  // for fp8 (torchtitan's current) follows the precision.
  if (s.training.fp8_scaling_given && s.training.fp8_scaling != Fp8Scaling::delayed && p != Precision::fp8)
    return "training.fp8_scaling current is a recipe of fp8";
  if (s.training.main_grad != Precision::fp32 && element_bytes(p) == 4)
    return "bf16 main gradients (training.main_grad) need mixed precision";
  return "";
}

std::vector<std::string> kind_switch_sets(const Scenario& s, DpKind kind,
                                          const std::function<bool(const std::string&)>& keep) {
  std::vector<std::string> out;
  for (const KindKey& k : kKindKeys) {
    const std::string key = std::string("data_parallel.") + k.key;
    // A first bucket that follows bucket_cap_mb (resolve_first_bucket) goes back with it, and a
    // reshard_after_forward torchtitan derived (resolve_torchtitan_reshard) with the kind.
    if (key == "data_parallel.first_bucket_mb" && !s.data_parallel.first_bucket_mb_given) continue;
    // So does an FSDP version the framework chose (resolve_fsdp_version).
    if (key == "data_parallel.fsdp_version" && !s.data_parallel.fsdp_version_given) continue;
    if (key == "data_parallel.reshard_after_forward" && !s.data_parallel.reshard_after_forward_given) continue;
    if (k.changed(s.data_parallel) && !runs(k.family, kind, s.training.framework) && !keep(key))
      out.push_back(key + "=" + k.default_value());
  }
  // PyTorch DDP's own key (io::resolve_bucket_view): false is refused under the other kinds.
  if (!s.data_parallel.gradient_as_bucket_view && kind != DpKind::ddp && !keep("data_parallel.gradient_as_bucket_view"))
    out.emplace_back("data_parallel.gradient_as_bucket_view=true");
  return out;
}

bool main_grad_is_reduced_buffer(const Scenario& s) {
  const DpKind kind = s.data_parallel.kind;
  const FrameworkTraits& traits = traits_of(s.training.framework);
  if (traits.pytorch_ddp) return kind == DpKind::ddp;
  return traits.megatron_core && (kind == DpKind::ddp || kind == DpKind::zero1);
}

// DeepSpeed's ZeRO stages 1 and 2 overlap the gradient reduction with the backward only when
// the configuration asks (zero_optimization.overlap_comm defaults to stage == 3:
// deepspeed/runtime/zero/config.py, overlap_comm_valid), so under training.framework deepspeed
// zero1 and zero2 leave overlap_grad_reduce off unless the scenario gives it. At ZeRO stage 0
// (ddp) its engine reduces nothing during the backward: _backward_epilogue calls
// allreduce_gradients once the backward is done, which at the accumulation boundary alone
// all-reduces every gradient in buffers of MEMORY_OPT_ALLREDUCE_SIZE (5e8) elements
// (deepspeed/runtime/engine.py, buffered_allreduce_fallback), so ddp leaves it off too. Its
// pipeline engine turns it off anyway (resolve_pipeline_engine).
void resolve_deepspeed_overlap(Scenario& s) {
  DataParallelSpec& d = s.data_parallel;
  if (s.training.framework != Framework::deepspeed || d.overlap_grad_reduce_given) return;
  if (d.kind == DpKind::ddp || d.kind == DpKind::zero1 || d.kind == DpKind::zero2) d.overlap_grad_reduce = false;
}

// DeepSpeed's pipeline engine (PipelineEngine, pp > 1) runs its 1F1B TrainSchedule only, and
// ZeRO stage 0 or 1 only (it asserts
// ZeRO-2 and ZeRO-3 away) and schedules the gradient reduction itself: every stage reduces its
// gradients after the whole schedule (the TrainSchedule's ReduceGrads step), never during the
// backward. So there data_parallel.kind is ddp or zero1, and overlap_grad_reduce is off whatever
// the scenario says (most scenarios spell out Megatron's or DDP's true): the engine has no such
// choice, and the report's notes say the reduction follows the schedule.
void resolve_pipeline_engine(Scenario& s, const Checker& c) {
  if (!deepspeed_pipeline_engine(s)) return;
  c.require(s.parallel.schedule == Schedule::one_f_one_b, "/parallel/schedule",
            "under training.framework deepspeed with parallel.pp {}: DeepSpeed's pipeline engine runs its own 1F1B "
            "schedule (TrainSchedule) and no other; use 1f1b",
            s.parallel.pp);
  DataParallelSpec& d = s.data_parallel;
  c.require(d.kind == DpKind::ddp || d.kind == DpKind::zero1, "/data_parallel/kind",
            "{} under training.framework deepspeed with parallel.pp {}: DeepSpeed's pipeline engine runs ZeRO stage 0 "
            "or 1 only (ZeRO-2 and ZeRO-3 are incompatible with it); use ddp or zero1",
            to_string(d.kind), s.parallel.pp);
  d.overlap_grad_reduce = false;
  // Its buffers are its own: a bucket size set away from its default would do nothing.
  const DataParallelSpec defaults;
  for (const auto& [key, given] :
       {std::pair{"/data_parallel/bucket_cap_mb", d.bucket_cap_mb != defaults.bucket_cap_mb},
        std::pair{"/data_parallel/first_bucket_mb", d.first_bucket_mb != defaults.first_bucket_mb},
        std::pair{"/data_parallel/bucket_parameters", d.bucket_parameters != defaults.bucket_parameters}})
    c.require(!given, key,
              "set under training.framework deepspeed with parallel.pp {}: DeepSpeed's pipeline engine all-reduces "
              "each stage's gradients after the schedule in buffers of its own (5e8 elements), so no bucket size "
              "applies; leave it unset",
              s.parallel.pp);
  c.require(s.model.moe.experts == 0, "/model/moe",
            "a mixture-of-experts model under training.framework deepspeed with parallel.pp > 1 is not simulated yet");
}

// torchtitan shards with FSDP2 alone (its apply_fsdp calls fully_shard; it has no
// FullyShardedDataParallel): under torchtitan and torchtitan-compile kind fsdp or hsdp runs
// fsdp_version 2 unless the scenario gives it, and 1 given is refused. Elsewhere it stays 1
// unless given.
void resolve_fsdp_version(Scenario& s, const Checker& c) {
  DataParallelSpec& d = s.data_parallel;
  const Framework f = s.training.framework;
  if (f != Framework::torchtitan && f != Framework::torchtitan_compile) return;
  if (d.kind != DpKind::fsdp && d.kind != DpKind::hsdp) return;
  if (!d.fsdp_version_given) d.fsdp_version = 2;
  c.require(d.fsdp_version != 1, "/data_parallel/fsdp_version",
            "1 (FullyShardedDataParallel) under training.framework {}: torchtitan shards with fully_shard (FSDP2) "
            "alone; use 2 or leave it out",
            traits_of(f).name);
}

// torchtitan folds expert parallelism out of ranks that hold different tokens, as its
// ParallelDims._validate asserts: expert TP equal to tp or 1; with etp = tp, EP borrows all of
// cp and part of the FSDP shard dimension (ep % cp == 0, dp_shard·cp % ep == 0); with etp = 1,
// all of cp and tp too (ep % (cp·tp) == 0, dp_shard·cp·tp % ep == 0). Its DDP replicates over
// dp_replicate, so dp_shard is 1 there; its HSDP shards over the shard group's DP ranks.
void check_torchtitan_ep(const Scenario& s, const Checker& c) {
  const Framework f = s.training.framework;
  const ParallelSpec& p = s.parallel;
  if ((f != Framework::torchtitan && f != Framework::torchtitan_compile) || p.ep <= 1) return;
  const DpKind kind = s.data_parallel.kind;
  if (kind != DpKind::ddp && kind != DpKind::fsdp && kind != DpKind::hsdp) return;
  const std::string_view name = traits_of(f).name;
  c.require(p.etp == p.tp || p.etp == 1, "/parallel/etp",
            "{} under training.framework {}: torchtitan's expert tensor parallelism is tp ({}) or 1", p.etp, name,
            p.tp);
  const bool fsdp = kind != DpKind::ddp;
  const int dp_shard = kind == DpKind::hsdp ? hsdp_shard_ranks(s) : kind == DpKind::fsdp ? p.dp : 1;
  const long long borrowed = p.etp == 1 ? static_cast<long long>(p.cp) * p.tp : p.cp;  // the ranks EP takes whole
  const long long pool = borrowed * dp_shard;
  if (p.ep % borrowed == 0 && pool % p.ep == 0) return;
  const std::string whole = p.etp == 1 && p.tp > 1 ? fmt::format("cp·tp ({})", borrowed) : fmt::format("cp ({})", p.cp);
  if (!fsdp)
    c.fail("/parallel/ep",
           fmt::format("{} under training.framework {} with data_parallel.kind ddp: torchtitan takes EP's ranks "
                       "from {} and the FSDP shard ranks, of which its DDP (dp_replicate) has none (ParallelDims); "
                       "use data_parallel.kind fsdp",
                       p.ep, name, whole));
  c.fail("/parallel/ep",
         fmt::format("{} under training.framework {}: torchtitan takes EP's ranks from all of {} and part of the FSDP "
                     "shard ranks, {} ({}): ep must be a multiple of {} that divides {} (ParallelDims)",
                     p.ep, name, whole, kind == DpKind::hsdp ? "the HSDP shard group's DP ranks" : "dp", dp_shard,
                     borrowed, pool));
}

// A data-parallel kind the framework does not have (has_dp_kind) is refused, at the key the
// scenario set last.
void check_framework_kind(const Scenario& s, const Checker& c) {
  const Framework f = s.training.framework;
  const DpKind kind = s.data_parallel.kind;
  if (has_dp_kind(f, kind)) return;
  const bool framework_last =
      c.assignment_of("/training/framework").size() > c.assignment_of("/data_parallel/kind").size();
  c.fail(framework_last ? "/training/framework" : "/data_parallel/kind",
         fmt::format("data_parallel.kind {} is not a kind of training.framework {}: {}", to_string(kind),
                     traits_of(f).name, dp_kind_absence(f)));
}

// Under training.framework deepspeed, kind fsdp is DeepSpeed's ZeRO-3 (stage3.py), simulated
// with FSDP1's layer units and their defaults: it has no FSDP version, no BACKWARD_PRE or
// BACKWARD_POST, forward prefetch flag or rate limiter (it prefetches modules within
// stage3_prefetch_bucket_size and stage3_max_live_parameters), and keeps a module's parameters
// gathered by its own thresholds (stage3_max_reuse_distance, stage3_param_persistence_threshold),
// none of which is simulated. PyTorch FSDP's keys would change the simulated step there, so they
// are refused.
void check_deepspeed_zero3(const DataParallelSpec& d, const Checker& c) {
  const DataParallelSpec defaults;
  for (const auto& [key, set] :
       {std::pair{"/data_parallel/fsdp_version", d.fsdp_version != defaults.fsdp_version},
        std::pair{"/data_parallel/backward_prefetch", d.backward_prefetch != defaults.backward_prefetch},
        std::pair{"/data_parallel/forward_prefetch", d.forward_prefetch != defaults.forward_prefetch},
        std::pair{"/data_parallel/max_inflight_all_gathers",
                  d.max_inflight_all_gathers != defaults.max_inflight_all_gathers},
        std::pair{"/data_parallel/reshard_after_forward", d.reshard_after_forward != defaults.reshard_after_forward}})
    c.require(!set, key,
              "is PyTorch FSDP's: under training.framework deepspeed, kind fsdp is DeepSpeed's ZeRO-3, which has no "
              "such setting (it prefetches within stage3_prefetch_bucket_size and keeps parameters gathered by "
              "stage3_max_reuse_distance, which are not simulated); leave it at its default");
}

// DeepSpeed's ZeRO stages 1 and 2 (stage_1_and_2.py) all-gather the updated parameters after
// the optimizer step (all_gather_dp_groups), before the next step begins: no gather runs
// beside the next forward, which is Megatron-Core's distributed optimizer's
// --overlap-param-gather, so asking for it under DeepSpeed is refused rather than ignored.
void check_deepspeed(const Scenario& s, const Checker& c) {
  if (s.training.framework != Framework::deepspeed) return;
  check_deepspeed_zero3(s.data_parallel, c);
  c.require(!s.data_parallel.overlap_param_gather, "/data_parallel/overlap_param_gather",
            "true under training.framework deepspeed: DeepSpeed's ZeRO all-gathers the updated parameters after its "
            "optimizer step, before the next forward (overlapping the gather with the forward is Megatron-Core's "
            "--overlap-param-gather); use false");
}

// Calibration file names: a NUL would end the name where the file is opened (a C string), and
// another file, or none, would be read in its place.
void check_calibration_names(const Scenario& s, const Checker& c) {
  for (std::size_t i = 0; i < s.calibration.size(); ++i)
    if (s.calibration[i].find('\0') != std::string::npos)
      c.fail(fmt::format("/calibration/{}", i),
             fmt::format("expected a calibration file name without NUL characters, got \"{}\"", s.calibration[i]));
}

void complete_and_validate(Scenario& s) {
  const Checker c(s.source, &s.set_pointers);
  const ZeroKeys given = given_zero_keys(s);
  require_model(s.model, c);
  c.require(!s.cluster.gpu.name.empty() || s.cluster.gpu.sms != 0, "/cluster",
            "the scenario has no cluster (a preset name such as \"dgx-h100-ndr\" or an object)");
  check_key_ranges(s);
  check_calibration_names(s, c);
  complete_model(s.model);
  check_model(s.model, s.training.attention, c);
  check_gpt_oss_layer(s, c);
  if (s.cluster.name.empty()) s.cluster.name = "custom";
  if (s.cluster.gpu.name.empty()) s.cluster.gpu.name = "custom";
  check_cluster(s.cluster, c);
  resolve_torchtitan_sequence_parallel(s, c);
  resolve_torchtitan_reshard(s);
  resolve_torchtitan_fp8_scaling(s, c);
  check_degrees(s.parallel, c);
  derive_expert_tp(s);
  check_split(s.model, s.parallel, c);
  check_framework_kind(s, c);
  tie_gradient_buffer(s, c);
  resolve_bucket_view(s, c);
  resolve_fsdp_version(s, c);
  resolve_deepspeed_overlap(s);
  check_deepspeed(s, c);
  resolve_pipeline_engine(s, c);
  check_training(s, c);
  check_cuda_graphs(s, c);
  check_activation_offload(s, c);
  check_recompute_modules(s, c);
  check_cuda_graph_scope(s, c);
  check_data_parallel(s.data_parallel, s.parallel, s.training.framework, c);
  check_megatron_fsdp(s, c);
  resolve_first_bucket(s);
  check_context_parallel(s, c);
  check_tp_overlap(s, c);
  check_a2a_overlap(s, c);
  check_dispatcher(s, c);
  check_simulated(s, c);
  // After the refusals of Megatron-Core's features under torchtitan, which say more.
  check_torchtitan_ep(s, c);
  check_torchtitan_amp(s, c);
  check_fsdp2_main_grad(s, c);
  size_cluster(s.cluster, s.parallel.gpus(), c);
  check_products(s);
  check_variation(s);
  s.derived = derived_keys(s, given);
}

void complete_and_validate(ClusterSpec& cluster, int gpus, const std::string& source) {
  const Checker c(source);
  c.require(gpus > 0, "", "the number of GPUs must be positive, got {}", gpus);
  try {
    check_cluster_ranges(cluster, source);
    check_cluster(cluster, c);
    cluster.nodes = 0;
    size_cluster(cluster, gpus, c);
  } catch (const InputError& e) {
    // The checks name a scenario's keys; a cluster file's keys are at its top level, where
    // reading it names them too.
    constexpr std::string_view kSection = "/cluster";
    if (e.file() != source || !e.where().starts_with(kSection)) throw;
    throw InputError(source, e.where().substr(kSection.size()), e.message());
  }
}

}  // namespace stepsim::io
