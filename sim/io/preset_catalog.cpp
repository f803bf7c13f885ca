// `stepsim presets`: the embedded presets with one-line summaries computed from their typed
// content (so a summary cannot disagree with the preset), and their JSON text.
#include <fmt/format.h>

#include "io/json_document.hpp"
#include "io/presets.hpp"
#include "io/scenario_loader.hpp"
#include "io/scenario_schema.hpp"
#include "io/units_text.hpp"
#include "stepsim/error.hpp"

namespace stepsim::io {
namespace json = boost::json;
namespace {

constexpr std::string_view kFolders[] = {"gpus", "clusters", "models", "examples"};

std::string_view kind_of(std::string_view folder) { return folder.substr(0, folder.size() - 1); }

const char* arch_name(GpuArch a) {
  switch (a) {
    case GpuArch::ampere:
      return "Ampere";
    case GpuArch::hopper:
      return "Hopper";
    case GpuArch::blackwell:
      return "Blackwell";
  }
  return "?";
}

const char* fitted_text(const Provenance& p) {
  switch (p.fitted) {
    case Fitted::yes:
      return "fitted";
    case Fitted::partly:
      return "partly fitted";
    case Fitted::no:
      return "datasheet only";
  }
  return "?";
}

std::string gpu_summary(const GpuSpec& g) {
  std::string fp8 = g.flops.fp8.positive() ? fmt::format(", {} fp8", format_flop_rate(g.flops.fp8)) : "";
  if (g.flops.fp4.positive()) fp8 += fmt::format(", {} fp4", format_flop_rate(g.flops.fp4));
  return fmt::format("{}, {} bf16{}, {} HBM at {}, {} SMs, {} W; {}", arch_name(g.arch), format_flop_rate(g.flops.bf16),
                     fp8, format_bytes(g.memory), format_bandwidth(g.memory_bandwidth, false), g.sms, g.board_power_w,
                     fitted_text(g.provenance));
}

// The link to host memory that activation offload copies over, which a preset may not describe.
std::string host_link_text(const HostLink& h) {
  if (!h.bandwidth.positive()) return "no host link";
  if (h.gpus_per_link == 1) return fmt::format("host link {} per GPU", format_bandwidth(h.bandwidth, false));
  return fmt::format("host link {} shared by {} GPUs", format_bandwidth(h.bandwidth, false), h.gpus_per_link);
}

std::string cluster_summary(const ClusterSpec& c) {
  const std::string domain =
      c.domain_gpus() == c.gpus_per_node ? "" : fmt::format(", {} per NVLink domain", c.domain_gpus());
  return fmt::format("{} x {} per node{}, NVLink {}{}, {} x {} NICs, {}; {}", c.gpus_per_node, c.gpu.name, domain,
                     format_bandwidth(c.intra_node.bandwidth, false), c.intra_node.nvls ? " + NVLS" : "",
                     c.inter_node.nics_per_node, format_bandwidth(c.inter_node.nic_bandwidth, true),
                     host_link_text(c.host_link), fitted_text(c.provenance));
}

std::string model_summary(const ModelSpec& m, const ParameterCount& parameters) {
  const auto p = static_cast<double>(parameters(m));
  const std::string size = p >= 1e12 ? fmt::format("{:.2f}T", p / 1e12) : fmt::format("{:.1f}B", p / 1e9);
  const std::string moe = m.moe.experts > 0 ? fmt::format(", {} experts top-{}", m.moe.experts, m.moe.top_k) : "";
  const int kv = m.kv_heads > 0 ? m.kv_heads : m.heads;
  return fmt::format("~{} params: {} layers, hidden {}, {} heads ({} kv), seq {}, {}{}", size, m.layers, m.hidden,
                     m.heads, kv, m.seq_len, m.mlp == MlpKind::swiglu ? "SwiGLU" : "GeLU", moe);
}

// The first sentence of the file's leading comment, however many lines it spans: what the
// example shows, never cut in the middle.
std::string example_summary(std::string_view text) {
  std::string sentence;
  while (text.starts_with("//")) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(2, end == std::string_view::npos ? std::string_view::npos : end - 2);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    for (std::size_t i = 0; i < line.size(); ++i) {
      const bool stop = line[i] == '.' && (i + 1 == line.size() || line[i + 1] == ' ') &&
                        !(i > 0 && line[i - 1] == 'l' && i > 2 && line.substr(i - 2, 2) == "al");
      if (stop) return sentence + (sentence.empty() ? "" : " ") + std::string(line.substr(0, i + 1));
    }
    sentence += (sentence.empty() ? "" : " ") + std::string(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return sentence;
}

std::string summary(const EmbeddedFile& file, const ParameterCount& parameters) {
  const std::string_view folder = preset_folder(file);
  const json::value name(json::string(preset_name(file)));
  const Reader r("presets", true);
  if (folder == "gpus") {
    GpuSpec g;
    read_gpu(g, name, r);
    return gpu_summary(g);
  }
  if (folder == "clusters") {
    ClusterSpec c;
    read_cluster(c, name, r);
    return cluster_summary(c);
  }
  if (folder == "models") {
    ModelSpec m;
    read_model(m, name, r);
    return model_summary(m, parameters);
  }
  return example_summary(file.text);
}

}  // namespace

std::vector<PresetInfo> list_presets(const ParameterCount& parameters) {
  std::vector<PresetInfo> out;
  for (const auto folder : kFolders)
    for (const auto& file : embedded_files())
      if (preset_folder(file) == folder)
        out.push_back({std::string(kind_of(folder)), std::string(preset_name(file)), summary(file, parameters)});
  return out;
}

std::string preset_text(const std::string& kind, const std::string& name) {
  std::vector<std::string_view> kinds;
  for (const auto folder : kFolders) {
    kinds.push_back(kind_of(folder));
    if (kind_of(folder) == kind) return std::string(find_preset(folder, name, Reader("presets", true).at(kind)).text);
  }
  throw InputError("presets", "", unknown_name_message("preset kind", kind, kinds));
}

}  // namespace stepsim::io
