// Reading scenarios: JSON with comments and trailing commas, units, embedded presets,
// --set overrides and validation, into a typed Scenario. All failures are InputError.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "stepsim/scenario.hpp"

namespace stepsim::io {

// `path` empty: the embedded default scenario; "-": standard input; a path that is no file
// but names an example preset loads that example. `sets`: "a.b=value" overrides, applied
// after the file and before validation (the value is JSON when it parses, else a string;
// "model=NAME" replaces a section by a preset), in the order of ordered_sets, so that the
// result does not depend on the order they are given in.
//
// Conventions of the loaded Scenario: `model` and `cluster` are required, `training` needs
// global_batch, every other section has defaults. cluster.nodes defaults to
// ceil(tp·pp·dp·cp / gpus_per_node) and, when given, must equal it (the last node may be
// partly used). Sequence parallelism needs tp > 1 (Megatron switches it off at tp 1, where it
// would do nothing: refused). TP beyond one node is accepted (it is slow, not invalid).
Scenario load_scenario(const std::string& path, const std::vector<std::string>& sets = {});

// `sets` in the order load_scenario applies them: an assignment before every other whose key it
// covers (a section before its keys: cluster, cluster.gpu, cluster.gpu.memory), otherwise in the
// order given (the same key twice: the last wins). training.framework sets only the kernel keys
// (training.attention, fusion, cross_entropy, grad_clip) that neither the file nor any assignment
// gives, so their order does not matter either.
std::vector<std::string> ordered_sets(const std::vector<std::string>& sets);

// The same from text already in memory; `source` names it in errors.
Scenario load_scenario_text(const std::string& text, const std::string& source,
                            const std::vector<std::string>& sets = {});

// A scenario to load: a file or an example preset's name (empty: the embedded default), or
// JSON text held in memory (a Python dict), which `path` then only names in errors.
struct ScenarioInput {
  std::string path;
  std::optional<std::string> text;
};
Scenario load_scenario(const ScenarioInput& input, const std::vector<std::string>& sets = {});

// The scenario as the file (or example) and `sets` give it, read as load_scenario reads them
// but neither completed nor validated: a key none of them gives keeps its type's default, and no
// key follows another. For what a scenario says before validation refuses it as it stands (a
// sweep's degrees, from which --gpus derives the dp that makes it valid). Throws what reading
// throws (no such file, a key that does not exist, a value of the wrong type).
Scenario read_scenario_keys(const ScenarioInput& input, const std::vector<std::string>& sets = {});

// A scenario argument read once: "-" is standard input (named <stdin> in errors), a file is
// held as its text, an example's name (or "", the default) is left to load_scenario. A
// command that loads its scenario more than once (advice, other clusters, every point of a
// sweep) loads it from this, so that a pipe, a FIFO or standard input is read once and every
// load sees the same text even if the file changes meanwhile.
ScenarioInput read_scenario_input(const std::string& path);

// `sets` plus, when `files` is not empty, one `calibration=[...]` that extends the scenario's
// own list by them (so that the resolved scenario in the report names them too, and every
// variant simulated from these sets is calibrated alike): simulate's and sweep's --calibration.
std::vector<std::string> sets_with_calibration(const ScenarioInput& input, std::vector<std::string> sets,
                                               const std::vector<std::string>& files);

// Why calibration file `path` cannot be read, when it is not there: a relative path is the
// current directory's (named in the words), not the scenario file's folder, the usual slip.
// Nothing for a file that is there ("-" and "" are refused where they are named).
std::optional<std::string> missing_calibration(const std::string& path);

// The first calibration file of `s` that is not there, refused at the key that names it
// (the scenario's file and /calibration/N, or --set calibration[N]).
void require_calibration_files(const Scenario& s);

// A cluster preset by name (or a cluster file) with `gpus` GPUs (nodes = ceil(gpus /
// gpus_per_node)), with `sets`, "cluster.KEY=VALUE" assignments as --set gives them (any other
// key is refused, naming --set).
ClusterSpec load_cluster(const std::string& name, int gpus, const std::vector<std::string>& sets = {});

struct PresetInfo {
  std::string kind;  // "gpu", "cluster", "model", "example"
  std::string name;
  std::string summary;
};
// A model's parameters as the simulator counts them: workload::model_parameters, which lies in a
// layer above this one; the model presets' summaries give it.
using ParameterCount = std::function<long long(const ModelSpec&)>;
std::vector<PresetInfo> list_presets(const ParameterCount& parameters);

// The JSON text of one embedded preset (kind as in PresetInfo), or InputError.
std::string preset_text(const std::string& kind, const std::string& name);

// Unit parsing, for command-line values too. `where` names the place in errors.
Bytes parse_bytes(const std::string& text, const std::string& file, const std::string& where);
Time parse_time(const std::string& text, const std::string& file, const std::string& where);
Bandwidth parse_bandwidth(const std::string& text, const std::string& file, const std::string& where);
FlopRate parse_flop_rate(const std::string& text, const std::string& file, const std::string& where);

}  // namespace stepsim::io
