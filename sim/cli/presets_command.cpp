// `stepsim presets`: the GPUs, clusters, models and example scenarios compiled into stepsim,
// one line each; with a name, that preset's JSON; with --keys, every scenario key.
#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <iostream>
#include <iterator>
#include <optional>

#include "cli/options.hpp"
#include "cli/scenario_reference.hpp"
#include "io/reader.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "workload/work.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kPresetsUsage =
    "usage: stepsim presets [NAME] [--kind KIND] [--json [FILE]] [--resolved] [--keys [--markdown]]\n\n"
    "Lists the GPUs, clusters, models and example scenarios compiled into stepsim, with a\n"
    "one-line summary each. A scenario names them as section values: \"model\": \"llama3-70b\",\n"
    "\"cluster\": \"dgx-h100-ndr\", \"cluster\": { \"preset\": \"dgx-h100-ndr\", \"gpu\": \"h200\" }.\n"
    "With NAME (or KIND/NAME when a name is both a model and an example), prints that preset's\n"
    "JSON file; example presets can also be simulated by name: 'stepsim simulate bloom-176b'.\n"
    "GPU and cluster summaries say whether the preset is fitted to measurements, partly fitted\n"
    "(some constants) or carries datasheet figures only; cluster summaries give the host link\n"
    "activation offload copies over, or say there is none. --keys --markdown writes\n"
    "docs/scenario-reference.md: every key with its unit, the default scenario's value, its\n"
    "meaning and the framework option.";

constexpr const char* kPresetsExamples =
    "  stepsim presets\n"
    "  stepsim presets --kind model\n"
    "  stepsim presets h100-sxm5-80gb\n"
    "  stepsim presets example/bloom-176b --resolved\n"
    "  stepsim presets --keys | grep data_parallel\n"
    "  stepsim presets --keys --markdown > docs/scenario-reference.md\n"
    "  stepsim presets --json - | jq '.[] | select(.kind == \"cluster\") | .name'\n";

struct Kind {
  const char* name;
  const char* heading;
};

constexpr Kind kKinds[] = {
    {"gpu", "GPUs (cluster.gpu)"},
    {"cluster", "Clusters (cluster)"},
    {"model", "Models (model)"},
    {"example", "Example scenarios (stepsim simulate NAME)"},
};

void print_table(const std::vector<io::PresetInfo>& presets, const std::string& kind) {
  std::size_t width = 0;
  for (const auto& p : presets) width = std::max(width, p.name.size());
  bool first = true;
  for (const auto& k : kKinds) {
    if (!kind.empty() && kind != k.name) continue;
    std::cout << (first ? "" : "\n") << k.heading << "\n";
    first = false;
    for (const auto& p : presets)
      if (p.kind == k.name) std::cout << fmt::format("  {:<{}}  {}\n", p.name, width, p.summary);
  }
}

// As every other command: --json FILE ('-' for stdout, also what a bare --json means).
void write_json(const std::vector<io::PresetInfo>& presets, const std::string& kind, const std::string& path) {
  boost::json::array list;
  for (const auto& p : presets)
    if (kind.empty() || p.kind == kind) list.push_back({{"kind", p.kind}, {"name", p.name}, {"summary", p.summary}});
  report::write_outputs({{"--json", path, [&](std::ostream& os) { os << boost::json::serialize(list) << "\n"; }}});
}

// Every key of a scenario with the default scenario's value, e.g. "parallel.tp = 8".
void print_keys(const boost::json::value& v, const std::string& prefix) {
  if (!v.is_object()) {
    std::cout << fmt::format("{} = {}\n", prefix, value_text(v));
    return;
  }
  for (const auto& [key, value] : v.get_object())
    print_keys(value, prefix.empty() ? std::string(key) : prefix + "." + std::string(key));
}

bool known_kind(const std::string& kind) {
  return std::any_of(std::begin(kKinds), std::end(kKinds), [&](const Kind& k) { return kind == k.name; });
}

std::string unknown_kind_message(const std::string& kind) {
  return fmt::format("unknown kind '{}' (expected gpu, cluster, model or example)", kind);
}

// "a gpu", "an example".
std::string with_article(const std::string& kind) { return (kind == "example" ? "an " : "a ") + kind; }

// "a gpu preset", "a model and an example preset": the kinds of the presets named alike.
std::string kinds_text(const std::vector<io::PresetInfo>& named) {
  std::string kinds;
  for (std::size_t i = 0; i < named.size(); ++i)
    kinds += (i == 0 ? "" : i + 1 == named.size() ? " and " : ", ") + with_article(named[i].kind);
  return kinds + " preset";
}

// The one preset that NAME or KIND/NAME designates.
io::PresetInfo find(const std::vector<io::PresetInfo>& presets, const std::string& spec) {
  const auto slash = spec.find('/');
  std::string kind = slash == std::string::npos ? "" : spec.substr(0, slash);
  if (kind.ends_with('s')) kind.pop_back();  // "gpus/h200" as well as "gpu/h200"
  if (slash != std::string::npos && !known_kind(kind))
    throw InputError("<command line>", "stepsim presets", unknown_kind_message(spec.substr(0, slash)));
  const std::string name = slash == std::string::npos ? spec : spec.substr(slash + 1);
  std::vector<io::PresetInfo> named;    // of every kind
  std::vector<std::string_view> names;  // of the kind asked for, each once
  for (const auto& p : presets) {
    if (p.name == name) named.push_back(p);
    if ((kind.empty() || p.kind == kind) && std::find(names.begin(), names.end(), p.name) == names.end())
      names.push_back(p.name);
  }
  std::vector<io::PresetInfo> matches;
  for (const auto& p : named)
    if (kind.empty() || p.kind == kind) matches.push_back(p);
  if (matches.size() == 1) return matches.front();
  if (matches.empty() && !named.empty())
    throw InputError("<command line>", "stepsim presets",
                     fmt::format("'{}' is {}, not {} preset", name, kinds_text(named), with_article(kind)));
  if (matches.empty())
    throw InputError("<command line>", "stepsim presets",
                     io::unknown_name_message(kind.empty() ? std::string("preset") : kind + " preset", name, names));
  throw InputError("<command line>", "stepsim presets",
                   fmt::format("'{}' is both a {} and an {} preset; write {}/{} or {}/{}", name, matches[0].kind,
                               matches[1].kind, matches[0].kind, name, matches[1].kind, name));
}

}  // namespace

int run_presets(const Args& args) {
  // Lists rather than strings: GCC 12 warns (-Wnull-dereference) inside Boost's inlined
  // typed_value<std::string>::notify when there are several of them.
  std::vector<std::string> names, kinds, json_paths;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("name", po::value(&names)->value_name("NAME"), "a preset to print")(
      "kind", po::value(&kinds)->value_name("KIND"), "list only gpu, cluster, model or example presets")(
      "json", po::value(&json_paths)->value_name("FILE")->implicit_value({"-"}, "-"),
      "write the list as JSON to FILE ('-' or nothing: stdout): [{\"kind\", \"name\", \"summary\"}, ...]")(
      "resolved",
      "with an example NAME: print the fully resolved scenario instead of the file (the keys that follow "
      "other keys where not given listed under derived, derived again when it is loaded)")(
      "keys", "list every scenario key with the default scenario's value")(
      "markdown", "with --keys: the scenario reference as Markdown (unit, meaning, framework option)");
  po::positional_options_description positional;
  positional.add("name", 1);
  const auto vm = parse_args("presets", args, desc, positional);
  if (help_requested(vm, kPresetsUsage, desc, kPresetsExamples)) return 0;
  if (!names.empty() && names.front().empty())
    throw InputError("<command line>", "NAME", "the preset name is empty (leave it out to list the presets)");
  refuse_empty(vm, {{"kind", "gpu, cluster, model or example"}});
  for (const auto& [list, flag] : {std::pair{&names, "NAME"}, {&kinds, "--kind"}, {&json_paths, "--json"}})
    if (list->size() > 1) throw InputError("<command line>", flag, "given more than once (give it once)");
  const std::string name = names.empty() ? "" : names.back();
  const std::string kind = kinds.empty() ? "" : kinds.back();
  // What each flag applies to: the list (--kind, --json), one preset (--resolved), the keys.
  if (!json_paths.empty() && (!name.empty() || vm.count("keys")))
    throw InputError("<command line>", "--json",
                     fmt::format("writes the list of presets; {} printed as it is (leave --json out)",
                                 vm.count("keys") ? "--keys is" : "a preset's file is"));
  if (vm.count("resolved") && name.empty())
    throw InputError("<command line>", "--resolved", "applies to an example NAME (stepsim presets NAME --resolved)");
  if (!kind.empty() && vm.count("keys"))
    throw InputError("<command line>", "--kind", "applies to the list of presets, not to --keys");
  if (!name.empty() && vm.count("keys"))
    throw InputError("<command line>", "--keys",
                     fmt::format("lists every key with the default scenario's value, not {}'s: leave NAME out "
                                 "(an example's values: stepsim presets NAME --resolved)",
                                 name));
  if (!kind.empty() && !known_kind(kind)) throw InputError("<command line>", "--kind", unknown_kind_message(kind));
  if (vm.count("markdown") && !vm.count("keys"))
    throw InputError("<command line>", "--markdown", "applies to --keys (stepsim presets --keys --markdown)");
  if (vm.count("keys")) {
    const boost::json::value scenario = boost::json::parse(io::load_scenario("").resolved_json);
    if (vm.count("markdown"))
      write_scenario_reference(scenario, std::cout);
    else
      print_keys(scenario, "");
    return 0;
  }
  const auto presets = io::list_presets(workload::model_parameters);
  if (name.empty()) {
    if (!json_paths.empty())
      write_json(presets, kind, json_paths.back());
    else
      print_table(presets, kind);
    return 0;
  }
  const io::PresetInfo preset = find(presets, kind.empty() ? name : kind + "/" + name);
  if (vm.count("resolved")) {
    if (preset.kind != "example")
      throw InputError("<command line>", "--resolved",
                       fmt::format("applies to example presets, and '{}' is a {}", name, preset.kind));
    std::cout << io::load_scenario(preset.name).resolved_json;
    return 0;
  }
  std::cout << io::preset_text(preset.kind, preset.name);
  return 0;
}

}  // namespace stepsim::cli
