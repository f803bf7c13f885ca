// A scenario put on another cluster preset, its own cluster keys carried to it.
#include "io/on_cluster.hpp"

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>
#include <iterator>
#include <optional>

#include "io/json_document.hpp"
#include "io/presets.hpp"

namespace stepsim::io {
namespace {

// The cluster section of `scenario`'s text; null where it has none (or cannot be read: loading
// it refuses it, with the place).
boost::json::value cluster_section(const ScenarioInput& scenario) {
  try {
    std::optional<std::string> text = scenario.text;
    if (!text && !scenario.path.empty()) text = read_scenario_input(scenario.path).text;
    if (const EmbeddedFile* example =
            text || scenario.path.empty() ? nullptr : lookup_preset("examples", scenario.path))
      text = std::string(example->text);
    if (!text) return nullptr;  // the default scenario, or a name that loading it refuses
    const boost::json::value document = parse_json(*text, scenario_name(scenario));
    const boost::json::value* cluster = document.is_object() ? document.as_object().if_contains("cluster") : nullptr;
    return cluster != nullptr ? *cluster : nullptr;
  } catch (const InputError&) {
    return nullptr;
  }
}

// Whether `where` (an InputError's place, "cluster.inter_node.nics_per_node") lies under the
// key of the assignment `set` ("cluster.inter_node={...}").
bool under_key(const std::string& where, const std::string& set) {
  const std::string key = set.substr(0, set.find('='));
  return where == key || where.starts_with(key + ".") || where.starts_with(key + "[");
}

bool replaces_section(const std::string& set) { return set.starts_with("cluster="); }

}  // namespace

std::string scenario_name(const ScenarioInput& scenario) {
  return scenario.path.empty() ? std::string("<default>") : scenario.path;
}

std::vector<std::string> carried_cluster_sets(const ScenarioInput& scenario, const std::vector<std::string>& sets,
                                              const std::string& flag, const std::string& alone) {
  std::vector<std::string> out;
  if (std::ranges::any_of(sets, replaces_section)) return out;  // the file's section is not the scenario's
  const boost::json::value cluster = cluster_section(scenario);
  if (!cluster.is_object()) return out;
  for (const auto& [key, value] : cluster.as_object()) {
    if (key == "preset" || key == "nodes") continue;
    if (key == "gpu")
      throw InputError(scenario_name(scenario), "cluster.gpu",
                       fmt::format("the scenario's cluster has a GPU of its own ({}), which would replace the GPU of "
                                   "every {}: {}, or swap every cluster's GPU with --set cluster.gpu=...",
                                   boost::json::serialize(value), flag, alone));
    out.push_back(fmt::format("cluster.{}={}", std::string_view(key), boost::json::serialize(value)));
  }
  return out;
}

std::vector<std::string> carried_to(const std::string& name, const std::vector<std::string>& carried) {
  constexpr std::string_view kDomain = "cluster.nvlink_domain=";
  if (std::ranges::none_of(carried, [&](const std::string& set) { return set.starts_with(kDomain); })) return carried;
  try {
    const ClusterSpec cluster = load_cluster(name, 1);
    if (cluster.nvlink_domain > cluster.gpus_per_node) return carried;
  } catch (const InputError&) {
    return carried;
  }
  std::vector<std::string> out;
  std::ranges::copy_if(carried, std::back_inserter(out),
                       [&](const std::string& set) { return !set.starts_with(kDomain); });
  return out;
}

std::vector<std::string> sets_on_cluster(const std::string& name, const std::vector<std::string>& carried,
                                         const std::vector<std::string>& sets) {
  std::vector<std::string> out{"cluster=" + name};
  const std::vector<std::string> kept = carried_to(name, carried);
  out.insert(out.end(), kept.begin(), kept.end());
  for (const std::string& set : sets) {
    if (set.starts_with("cluster.nodes=")) continue;
    if (!replaces_section(set)) {
      out.push_back(set);
      continue;
    }
    // The scenario's own cluster given whole: a preset's name goes, an object's keys stay.
    boost::json::value section;
    if (!try_parse_json(std::string_view(set).substr(set.find('=') + 1), section) || !section.is_object()) continue;
    for (const auto& [key, value] : section.as_object())
      if (key != "preset" && key != "nodes")
        out.push_back(fmt::format("cluster.{}={}", std::string_view(key), boost::json::serialize(value)));
  }
  out.push_back("cluster.nodes=0");
  return out;
}

InputError carried_key_error(const InputError& e, const ScenarioInput& scenario,
                             const std::vector<std::string>& carried, const std::vector<std::string>& sets) {
  const auto under = [&](const std::vector<std::string>& list) {
    return std::ranges::any_of(list, [&](const std::string& set) { return under_key(e.where(), set); });
  };
  if (e.file() != "--set" || e.where() == "cluster" || !under(carried) || under(sets)) return e;
  return InputError(scenario_name(scenario), e.where(), e.message());
}

}  // namespace stepsim::io
