// Resolving and simulating one point of a sweep, with its failures recorded, not thrown.
#include "sweep/point.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <new>
#include <optional>
#include <sstream>
#include <string_view>

#include "io/json_document.hpp"
#include "io/on_cluster.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/memory_model.hpp"
#include "stepsim/error.hpp"
#include "stepsim/input_files.hpp"
#include "sweep/rows.hpp"

namespace stepsim::sweep {
namespace json = boost::json;
namespace {

// A --set value as the scenario loader reads it (JSON when it parses: " 4", "4.0" and "4e0"
// are all 4) when it is a whole number above 0.
std::optional<long long> whole_number(std::string_view text) {
  json::error_code ec;
  const json::value v = json::parse(text, ec);
  if (ec) return std::nullopt;
  if (v.is_int64() && v.as_int64() > 0) return v.as_int64();
  if (!v.is_double()) return std::nullopt;
  const double d = v.as_double();
  if (!(d >= 1 && d <= 9.0e15) || std::floor(d) != d) return std::nullopt;
  return static_cast<long long>(d);
}

// The value of the last assignment to `key` in `sets` as a positive integer, if any.
// The value `set` gives parallel.NAME: "parallel.NAME=V", or a "parallel={...}" object that
// names it (the loader merges such an object into the section). Null when it gives none.
std::optional<std::string> degree_text(const std::string& set, std::string_view name) {
  const std::string dotted = fmt::format("parallel.{}=", name);
  if (set.starts_with(dotted)) return set.substr(dotted.size());
  if (!set.starts_with("parallel=")) return std::nullopt;
  json::error_code ec;
  const json::value v = json::parse(std::string_view(set).substr(9), ec);
  const json::object* o = ec ? nullptr : v.if_object();
  const json::value* degree = o == nullptr ? nullptr : o->if_contains(name);
  if (degree == nullptr) return std::nullopt;
  return json::serialize(*degree);
}

// The degree NAME (tp, pp, cp) the assignment the loader applies last gives (in the order of
// io::ordered_sets: a "parallel={...}" object before "parallel.tp=..." whatever the order
// given), as a positive integer; nullopt when none assigns it or its value is not one (the
// loader then says why).
std::optional<long long> assigned_degree(const std::vector<std::string>& sets, std::string_view name) {
  std::optional<long long> degree;
  for (const auto& set : io::ordered_sets(sets))
    if (const auto text = degree_text(set, name)) degree = whole_number(*text);
  return degree;
}

// The parallel section the point's scenario and assignments give before validation (a varied
// example preset brings its own), or nullopt where they do not read (the loader says why).
std::optional<ParallelSpec> given_degrees(const SweepSpec& spec, const std::vector<std::string>& sets) {
  try {
    return io::read_scenario_keys(spec.scenario, sets).parallel;
  } catch (const InputError&) {
    return std::nullopt;
  }
}

// A point's degree NAME: what its scenario gives (`given`, 0 where it reads none), else its last
// assignment's, else the base scenario's; the loader refuses a degree that is not one.
long long degree_of(const std::vector<std::string>& sets, std::string_view name, int given, int base) {
  if (given >= 1) return given;
  return assigned_degree(sets, name).value_or(base);
}

bool assigns_degree(const std::vector<std::string>& sets, std::string_view name) {
  return std::any_of(sets.begin(), sets.end(), [&](const std::string& set) { return degree_text(set, name); });
}

// The unresolvable point's id: a hash of its assignments, so that resume and merge still
// recognise it.
std::uint64_t assignments_id(const std::vector<std::string>& sets) {
  std::string text = "unresolved";
  for (const auto& set : sets) text += "\n" + set;
  return fnv1a64(text);
}

// A file's bytes, or a note that it could not be read (the point reading it will say why).
// A file read is an input of the run: no output may replace it (note_input_file).
std::string contents_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "unreadable " + path;
  note_input_file(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether the dotted key `where` ("a.b[0].c") is `key` or lies below it.
bool under(const std::string& where, const std::string& key) {
  return where.starts_with(key) && (where.size() == key.size() || where[key.size()] == '.' || where[key.size()] == '[');
}

// The calibration files a point may read beyond the base scenario's: those each value of a
// varied `calibration` key names (a value that does not load is an invalid point, which reads
// none).
std::vector<std::string> varied_calibration(const SweepSpec& spec, const Scenario& base) {
  std::vector<std::string> files;
  for (const auto& axis : spec.axes) {
    if (!under(axis.key, "calibration")) continue;
    for (const auto& value : axis.values) {
      auto sets = spec.sets;
      sets.push_back(axis.key + "=" + value);
      std::vector<std::string> named;
      try {
        named = io::load_scenario(spec.scenario, sets).calibration;
      } catch (const InputError&) {
        continue;
      }
      for (auto& path : named)
        if (std::ranges::find(base.calibration, path) == base.calibration.end() &&
            std::ranges::find(files, path) == files.end())
          files.push_back(std::move(path));
    }
  }
  return files;
}

// What makes two runs the same sweep: stepsim's version, the resolved base scenario, the
// contents of every calibration file a point may read (the base scenario's, then those the
// varied values name), the --set list, the axes and the flags that change rows. Shards of one
// sweep share it; anything else that writes rows does not.
std::uint64_t sweep_fingerprint(const SweepSpec& spec, const Scenario& base) {
  // A base scenario that does not validate has no resolved text: the text it was read from.
  const std::string scenario = !base.resolved_json.empty() ? base.resolved_json
                               : spec.scenario.text        ? "unresolved\n" + *spec.scenario.text
                                                           : "unresolved scenario " + spec.scenario.path;
  std::string text = fmt::format("stepsim {}\n{}\n", stepsim_version(), scenario);
  for (const auto& path : base.calibration) text += fmt::format("calibration {}\n{}\n", path, contents_of(path));
  for (const auto& path : varied_calibration(spec, base))
    text += fmt::format("calibration {}\n{}\n", path, contents_of(path));
  for (const auto& set : spec.sets) text += "set " + set + "\n";
  for (const auto& axis : spec.axes) {
    text += "vary " + axis.key;
    for (const auto& value : axis.values) text += "\x1f" + value;
    text += "\n";
  }
  text += fmt::format("gpus {}\nkeep_oom {}\n", spec.gpus, spec.keep_oom);
  return fnv1a64(text);
}

// The scenario with --set alone: validated where it validates. A sweep that varies keys or derives
// dp from --gpus does not run it as it stands, and its points' values may make valid what it
// refuses (a micro-batch --set that the varied global batches divide, the dp --gpus derives): its
// keys are then read unvalidated, with the refusal in `refused`. A key it does not have is
// refused all the same.
Scenario base_scenario(const SweepSpec& spec, std::optional<InputError>& refused) {
  try {
    return io::load_scenario(spec.scenario, spec.sets);
  } catch (const InputError& e) {
    if (spec.axes.empty() && spec.gpus == 0) throw;
    refused = e;
  }
  try {
    return io::read_scenario_keys(spec.scenario, spec.sets);
  } catch (const InputError&) {
    throw *refused;
  }
}

// A point's scenario. A value that does not parse as its key's type, or does not validate,
// came from the --vary that varies the key (the points apply their values as --set
// assignments), or from --gpus where it is the parallel.dp derived from it, and the row's
// reason says so.
Scenario load_point(const SweepSpec& spec, const std::vector<std::string>& sets) {
  try {
    Scenario s = io::load_scenario(spec.scenario, sets);
    io::require_calibration_files(s);  // here, where a varied list is named --vary
    return s;
  } catch (const InputError& error) {
    // A key the scenario's cluster section carried to a varied cluster is the scenario's.
    const InputError e = io::carried_key_error(error, spec.scenario, spec.cluster_sets, spec.sets);
    if (e.file() != "--set") throw e;
    // Named --vary from a spec file too: a file's rows are those of the same --vary flags.
    const bool varied = std::ranges::any_of(spec.axes, [&](const Axis& a) { return under(e.where(), a.key); });
    if (varied) throw InputError("--vary", e.where(), e.message());
    if (spec.gpus != 0 && e.where() == "parallel.dp") throw InputError("--gpus", e.where(), e.message());
    throw;
  }
}

}  // namespace

const char* to_string(Status s) {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::invalid:
      return "invalid";
    case Status::oom:
      return "oom";
    case Status::error:
      return "error";
  }
  return "error";
}

std::uint64_t fnv1a64(const std::string& text) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (const unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

namespace {

// Whether some point of the sweep loads: one that does not is a row with its reason.
bool any_point_loads(const SweepSpec& spec) {
  for (std::size_t i = 0; i < spec.points; ++i)
    if (resolve_point(spec, i).status != Status::invalid) return true;
  return false;
}

}  // namespace

void prepare(SweepSpec& spec) {
  if (spec.gpus != 0) {
    if (assigns_degree(spec.sets, "dp"))
      throw InputError("--set", "parallel.dp", "cannot be combined with --gpus, which derives parallel.dp per point");
    for (const auto& axis : spec.axes)
      for (const auto& value : axis.values)
        if (assigns_degree({axis.key + "=" + value}, "dp"))
          throw axis_error(axis, axis.key,
                           axis.key == "parallel.dp"
                               ? "cannot be combined with --gpus, which derives parallel.dp per point"
                               : fmt::format("{} sets dp, which cannot be combined with --gpus (it derives "
                                             "parallel.dp per point)",
                                             value));
  }
  for (std::size_t i = 0; i < spec.axes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (spec.axes[i].key == spec.axes[j].key)
        throw axis_error(spec.axes[i], spec.axes[i].key,
                         spec.axes[j].file.empty() ? std::string("the key is varied twice")
                                                   : fmt::format("the key is varied twice ({} line {} varies it too)",
                                                                 spec.axes[j].file, spec.axes[j].line));
  // A varied cluster preset carries the scenario's own cluster keys, as plan's --cluster does.
  if (std::ranges::any_of(spec.axes, [](const Axis& a) { return a.key == "cluster"; }))
    spec.cluster_sets = io::carried_cluster_sets(spec.scenario, spec.sets, "--vary cluster",
                                                 "sweep its cluster alone (without --vary cluster)");
  // A row names its varied keys beside its own columns: one name may not be both.
  SweepSpec fixed = spec;
  fixed.axes.clear();
  const std::vector<std::string> own = columns(fixed);
  for (const auto& axis : spec.axes)
    if (std::find(own.begin(), own.end(), axis.key) != own.end())
      throw axis_error(axis, axis.key, "is a column of the sweep's rows, not a scenario key");
  std::optional<InputError> refused;
  const Scenario base = base_scenario(spec, refused);
  spec.base_tp = base.parallel.tp;
  spec.base_pp = base.parallel.pp;
  spec.base_cp = base.parallel.cp;
  spec.points = point_count(spec.axes);
  if (refused && !any_point_loads(spec)) throw *refused;
  spec.sweep_id = sweep_fingerprint(spec, base);
  for (const auto& axis : spec.axes) {
    auto sets = spec.sets;
    sets.push_back(axis.key + "=" + axis.values.front());
    try {
      (void)io::load_scenario(spec.scenario, sets);
    } catch (const InputError& e) {
      // Only a key the scenario does not have is the command's fault; a value that does not
      // validate is an invalid point, recorded with its reason.
      if (e.file() == "--set" && e.message().starts_with("unknown ")) throw axis_error(axis, e.where(), e.message());
    }
  }
}

namespace {

// The cluster preset (or file) a point's "cluster=VALUE" names: VALUE as --set takes text, a
// bare name or a JSON string; none for a cluster given as an object.
std::optional<std::string> cluster_name(const std::string& value) {
  boost::json::value v;
  if (!io::try_parse_json(value, v)) return value;
  if (v.is_string()) return std::string(v.as_string());
  return std::nullopt;
}

}  // namespace

std::vector<std::string> point_sets(const SweepSpec& spec, const std::vector<std::string>& values, std::string& dp,
                                    std::string& problem) {
  // The carried cluster keys first, so that --set wins; a varied preset ("cluster=NAME") applies
  // before them whatever the order (io::ordered_sets).
  std::vector<std::string> sets = spec.cluster_sets;
  for (std::size_t i = 0; i < spec.axes.size(); ++i)
    if (spec.axes[i].key == "cluster")
      if (const std::optional<std::string> name = cluster_name(values[i]))
        sets = io::carried_to(*name, spec.cluster_sets);
  sets.insert(sets.end(), spec.sets.begin(), spec.sets.end());
  for (std::size_t i = 0; i < spec.axes.size(); ++i) sets.push_back(spec.axes[i].key + "=" + values[i]);
  if (spec.gpus == 0) return sets;
  const std::optional<ParallelSpec> given = given_degrees(spec, sets);
  const auto tp = degree_of(sets, "tp", given ? given->tp : 0, spec.base_tp);
  const auto pp = degree_of(sets, "pp", given ? given->pp : 0, spec.base_pp);
  const auto cp = degree_of(sets, "cp", given ? given->cp : 0, spec.base_cp);
  const long long model = tp * pp * cp;  // each at most the scenario limits, no overflow in practice
  if (model <= 0 || spec.gpus % model != 0) {
    problem = fmt::format("tp·pp·cp = {}·{}·{} = {} does not divide --gpus {}", tp, pp, cp, model, spec.gpus);
    return sets;
  }
  dp = std::to_string(spec.gpus / model);
  sets.push_back("parallel.dp=" + dp);
  return sets;
}

PointResult resolve_point(const SweepSpec& spec, std::size_t index) {
  PointResult r;
  r.index = index;
  r.values = point_values(spec.axes, index);
  std::string problem;
  const auto sets = point_sets(spec, r.values, r.dp, problem);
  if (!problem.empty()) {
    r.status = Status::invalid;
    r.reason = problem;
    r.id = assignments_id(sets);
    return r;
  }
  try {
    r.id = fnv1a64(load_point(spec, sets).resolved_json);
  } catch (const InputError& e) {
    r.status = Status::invalid;
    r.reason = e.what();
    r.id = assignments_id(sets);
  }
  return r;
}

void record_failures(PointResult& r, const std::function<void()>& body) {
  try {
    body();
  } catch (const InputError& e) {
    r.status = Status::invalid;
    r.reason = e.what();
    // simulate() says a std::bad_alloc so, naming the scenario that was too large.
    r.out_of_memory = e.message().starts_with("out of memory");
  } catch (const std::bad_alloc&) {
    r.status = Status::error;
    r.reason = "out of memory: this process could not allocate what the point needs";
    r.out_of_memory = true;
  } catch (const std::exception& e) {
    r.status = Status::error;
    r.reason = e.what();
  } catch (...) {
    r.status = Status::error;
    r.reason = "unknown internal error";
  }
}

PointResult run_point(const SweepSpec& spec, std::size_t index) {
  PointResult r;
  r.index = index;
  record_failures(r, [&] {
    r.values = point_values(spec.axes, index);
    std::string problem;
    const auto sets = point_sets(spec, r.values, r.dp, problem);
    r.id = assignments_id(sets);
    if (!problem.empty()) {
      r.status = Status::invalid;
      r.reason = problem;
      return;
    }
    const Scenario scenario = load_point(spec, sets);
    r.id = fnv1a64(scenario.resolved_json);
    const ParallelSpec& p = scenario.parallel;
    if (spec.gpus != 0 && static_cast<long long>(p.tp) * p.pp * p.cp * p.dp != spec.gpus) {
      r.status = Status::invalid;
      r.reason = fmt::format("tp·pp·cp·dp = {}·{}·{}·{} is not --gpus {}", p.tp, p.pp, p.cp, p.dp, spec.gpus);
      return;
    }
    Report report = simulate(scenario, SimulateOptions::report_only()).report;
    const auto& memory = report.memory_bytes;
    if (memory.modelled && !memory.fits && !spec.keep_oom) {
      r.status = Status::oom;
      r.reason = parallelism::does_not_fit(memory);
    }
    r.report = std::move(report);
  });
  return r;
}

}  // namespace stepsim::sweep
