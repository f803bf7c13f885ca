// Loading a scenario: the file (or an embedded example), then the --set overrides, then
// defaults and validation, then the canonical resolved text.
#include "io/scenario_loader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "io/derived_keys.hpp"
#include "io/json_document.hpp"
#include "io/presets.hpp"
#include "io/scenario_schema.hpp"
#include "io/validate.hpp"
#include "stepsim/error.hpp"
#include "stepsim/input_files.hpp"

namespace stepsim::io {
namespace json = boost::json;
namespace {

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return text;
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// "a.b.c=value": the value is JSON when it parses (numbers, true, lists), else a string.
// Returns the JSON pointer it assigned ("/a/b/c").
std::string apply_set(Scenario& s, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError("--set", assignment,
                     "expected KEY=VALUE, e.g. parallel.tp=4 or cluster.inter_node.nic_bandwidth=\"200 Gb/s\"");
  if (!valid_utf8(assignment))
    throw InputError("--set", "", "the assignment is not valid UTF-8 text (scenario keys and names are UTF-8)");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  if (key == "derived" || key.starts_with("derived."))
    throw InputError("--set", key,
                     "is no key to set: a resolved scenario lists under derived the keys that follow other keys; give "
                     "a key's own value with --set KEY=VALUE");
  json::value value;
  if (!try_parse_json(text, value)) value = json::string(text);
  std::vector<std::string> parts;
  std::stringstream stream(key);
  for (std::string part; std::getline(stream, part, '.');) {
    if (part.empty()) throw InputError("--set", key, "empty key name (expected e.g. model.layers)");
    parts.push_back(part);
  }
  if (key.back() == '.') throw InputError("--set", key, "empty key name (expected e.g. model.layers)");
  std::string pointer;
  for (const auto& part : parts) pointer += "/" + part;
  const bool number = value.is_number();
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) value = json::object{{*it, std::move(value)}};
  const Reader reader("--set", true);
  read_scenario(s, value, number ? reader.typed(trimmed(text)) : reader);
  return pointer;
}

// The key an assignment "a.b=value" sets (the whole text when it has no '=': apply_set refuses it).
std::string_view assigned_key(std::string_view assignment) { return assignment.substr(0, assignment.find('=')); }

}  // namespace

std::vector<std::string> ordered_sets(const std::vector<std::string>& sets) {
  // Each round takes the first assignment left that no other one left covers; the relation has
  // no cycle (a key covers only longer keys).
  std::vector<std::string> out;
  std::vector<bool> done(sets.size(), false);
  out.reserve(sets.size());
  while (out.size() < sets.size()) {
    for (std::size_t i = 0; i < sets.size(); ++i) {
      if (done[i]) continue;
      bool covered = false;
      for (std::size_t j = 0; j < sets.size() && !covered; ++j)
        covered = !done[j] && j != i && assignment_covers(assigned_key(sets[j]), assigned_key(sets[i]));
      if (covered) continue;
      done[i] = true;
      out.push_back(sets[i]);
      break;
    }
  }
  return out;
}

namespace {

// Scenario and cluster files are small; a larger one is a mistake (or /dev/zero).
constexpr std::size_t kMaxFileBytes = 64 << 20;

// The whole of `in` (named `name` in errors), at most kMaxFileBytes.
std::string read_all(std::istream& in, const std::string& name) {
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes)
      throw InputError(name, "", "is larger than 64 MiB; a scenario file is far smaller");
  }
  if (in.bad()) throw InputError(name, "", "cannot read the file");
  return text;
}

// The text of `path`; `found` is false when there is no such file. Directories, unreadable
// and oversized files are InputErrors naming the file.
std::string read_file(const std::string& path, bool& found) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  found = !ec && std::filesystem::exists(status);
  if (!found) return {};
  if (std::filesystem::is_directory(status)) throw InputError(path, "", "is a directory, not a scenario file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", fmt::format("cannot open for reading: {}", std::strerror(errno)));
  note_input_file(path);
  return read_all(in, path);
}

}  // namespace

namespace {

// The file and the assignments, read: the keys they give, before defaults and validation.
Scenario read_text(const std::string& text, const std::string& source, const std::vector<std::string>& sets) {
  Scenario s;
  json::value document = parse_json(text, source);
  if (!document.is_object()) throw InputError(source, "", "a scenario must be a JSON object");
  take_derived(document, source);
  read_scenario(s, document, Reader(source, false));
  for (const auto& assignment : ordered_sets(sets)) s.set_pointers.push_back(apply_set(s, assignment));
  s.source = source;
  return s;
}

}  // namespace

Scenario load_scenario_text(const std::string& text, const std::string& source, const std::vector<std::string>& sets) {
  Scenario s = read_text(text, source, sets);
  try {
    complete_and_validate(s);
  } catch (const InputError& e) {
    // Validation names the file; a value a --set assignment gave is the assignment's.
    if (e.file() != source) throw;
    throw scenario_error(s, e.where(), e.message());
  }
  json::value resolved = write_scenario(s);
  if (!s.derived.empty()) {
    json::array& list = resolved.as_object()["derived"].emplace_array();
    for (const auto& key : s.derived) list.emplace_back(key);
  }
  s.resolved_json = pretty_json(resolved);
  return s;
}

ScenarioInput read_scenario_input(const std::string& path) {
  if (path == "-") return {"<stdin>", read_all(std::cin, "<stdin>")};
  if (path.empty()) return {path, std::nullopt};
  bool found = false;
  std::string text = read_file(path, found);
  if (found) return {path, std::move(text)};
  return {path, std::nullopt};  // an example's name, or an error load_scenario words
}

namespace {

using TextLoader = Scenario (*)(const std::string& text, const std::string& source,
                                const std::vector<std::string>& sets);

// The scenario `path` names (the embedded default for "", standard input for "-", a file, or an
// example preset), given to `load` with its name.
Scenario from_path(const std::string& path, const std::vector<std::string>& sets, TextLoader load) {
  if (path.empty())
    return load(std::string(find_preset("examples", "default", Reader("", false)).text), "<default>", sets);
  if (path == "-") {
    const ScenarioInput input = read_scenario_input(path);
    return load(*input.text, input.path, sets);
  }
  bool found = false;
  const std::string text = read_file(path, found);
  if (found) return load(text, path, sets);
  if (const EmbeddedFile* example = lookup_preset("examples", path))
    return load(std::string(example->text), "configs/" + std::string(example->path), sets);
  // A preset of a section, not a whole scenario: say where it goes.
  struct Section {
    const char* folder;
    const char* kind;
    const char* key;
  };
  for (const Section& p : {Section{"models", "model", "model"}, Section{"clusters", "cluster", "cluster"},
                           Section{"gpus", "GPU", "cluster.gpu"}})
    if (lookup_preset(p.folder, path) != nullptr)
      throw InputError(path, "",
                       fmt::format("no such file; '{}' is a {} preset, not a scenario: give it as '--set {}={}' (on "
                                   "the default scenario, or on a scenario file)",
                                   path, p.kind, p.key, path));
  const std::vector<std::string_view> examples = preset_names("examples");
  const std::string_view close = closest_match(path, examples);
  throw InputError(path, "",
                   close.empty() ? fmt::format("cannot open the file, and it is not an example preset ({})",
                                               fmt::join(examples, ", "))
                                 : fmt::format("cannot open the file, and it is not an example preset (did you mean "
                                               "'{}'?)",
                                               close));
}

}  // namespace

Scenario load_scenario(const std::string& path, const std::vector<std::string>& sets) {
  return from_path(path, sets, load_scenario_text);
}

Scenario load_scenario(const ScenarioInput& input, const std::vector<std::string>& sets) {
  return input.text ? load_scenario_text(*input.text, input.path, sets) : load_scenario(input.path, sets);
}

Scenario read_scenario_keys(const ScenarioInput& input, const std::vector<std::string>& sets) {
  return input.text ? read_text(*input.text, input.path, sets) : from_path(input.path, sets, read_text);
}

std::vector<std::string> sets_with_calibration(const ScenarioInput& input, std::vector<std::string> sets,
                                               const std::vector<std::string>& files) {
  if (files.empty()) return sets;
  // Refused here, where the flag names them, rather than as entries of the scenario's list.
  for (const auto& f : files) {
    if (f.empty()) throw InputError("--calibration", "", "expected a calibration file name, got \"\"");
    if (f == "-")
      throw InputError("--calibration", f,
                       "a scenario's calibration file cannot be standard input: it is read for every simulation of "
                       "the scenario; give its file name");
  }
  for (const auto& f : files)
    if (const auto missing = missing_calibration(f)) throw InputError("--calibration", f, *missing);
  // The scenario's own files are named in it: refused there, not as entries of the list below.
  // Read, not validated: a sweep's scenario may be valid only with its points' values, and
  // simulate validates what it loads with these sets.
  const Scenario loaded = read_scenario_keys(input, sets);
  require_calibration_files(loaded);
  json::array list;
  for (const auto& f : loaded.calibration) list.emplace_back(f);
  for (const auto& f : files) list.emplace_back(f);
  sets.push_back("calibration=" + json::serialize(list));
  return sets;
}

std::optional<std::string> missing_calibration(const std::string& path) {
  std::error_code ec;
  if (path.empty() || path == "-" || std::filesystem::exists(path, ec)) return std::nullopt;
  return fmt::format(
      "cannot open the calibration file '{}': no such file in the current directory, {} (a relative path is the "
      "current directory's, not the scenario file's)",
      path, std::filesystem::current_path(ec).string());
}

void require_calibration_files(const Scenario& s) {
  for (std::size_t i = 0; i < s.calibration.size(); ++i)
    if (const auto missing = missing_calibration(s.calibration[i]))
      throw scenario_error(s, fmt::format("/calibration/{}", i), *missing);
}

ClusterSpec load_cluster(const std::string& name, int gpus, const std::vector<std::string>& sets) {
  Scenario s;
  bool found = false;
  const std::string text = name.ends_with(".json") ? read_file(name, found) : std::string();
  if (found) {
    read_cluster(s.cluster, parse_json(text, name), Reader(name, false));
  } else {
    read_cluster(s.cluster, json::value(json::string(name)), Reader("<command line>", true).at("cluster"));
  }
  // Only the cluster's own keys: the cluster itself is the flag's, and nothing else is simulated.
  std::vector<std::string> pointers;
  for (const auto& assignment : ordered_sets(sets)) {
    const std::string_view key = assigned_key(assignment);
    if (key == "cluster")
      throw InputError("--set", std::string(key),
                       "the cluster is the --cluster flag's; --set takes its keys, cluster.KEY=VALUE");
    if (!key.starts_with("cluster."))
      throw InputError("--set", std::string(key),
                       "only the cluster's keys (cluster.KEY=VALUE, e.g. cluster.nvlink_domain=36) apply to one "
                       "collective");
    // Keys a collective's cost never reads: accepted, they would do nothing. (nodes follows --gpus;
    // the SMs, HBM bandwidth and launch cost are simulate's, for compute beside a collective and
    // the host; the host link carries activation offload, not NCCL.)
    static constexpr std::string_view kIdle[] = {"cluster.name",
                                                 "cluster.nodes",
                                                 "cluster.gpu_hour_price",
                                                 "cluster.provenance",
                                                 "cluster.gpu.flops",
                                                 "cluster.gpu.memory",
                                                 "cluster.gpu.efficiency",
                                                 "cluster.gpu.board_power_w",
                                                 "cluster.gpu.provenance",
                                                 "cluster.gpu.name",
                                                 "cluster.gpu.sms",
                                                 "cluster.gpu.memory_bandwidth",
                                                 "cluster.gpu.kernel_launch",
                                                 "cluster.host_link"};
    for (const std::string_view idle : kIdle)
      if (key == idle || (key.starts_with(idle) && key.substr(idle.size()).starts_with(".")))
        throw InputError("--set", std::string(key),
                         "changes nothing in one collective, whose cost reads the links, the NVLink domain, the "
                         "GPU's architecture and NCCL's tuning (simulate takes it)");
    pointers.push_back(apply_set(s, assignment));
  }
  const std::string source = found ? name : "<command line>";
  try {
    complete_and_validate(s.cluster, gpus, source);
  } catch (const InputError& e) {
    // A value an assignment gave is the assignment's.
    const std::string pointer = "/cluster" + e.where();
    if (e.file() != source || std::find(pointers.begin(), pointers.end(), pointer) == pointers.end()) throw;
    std::string key = pointer.substr(1);
    std::replace(key.begin(), key.end(), '/', '.');
    throw InputError("--set", key, e.message());
  }
  return s.cluster;
}

}  // namespace stepsim::io
