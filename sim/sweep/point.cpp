// Resolving and simulating one point of a sweep, with its failures recorded, not thrown.
#include "sweep/point.hpp"

#include <fmt/format.h>

#include <functional>

#include <charconv>

#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"

namespace stepsim::sweep {
namespace {

// The value of the last assignment to `key` in `sets` as a positive integer, if any.
std::optional<long long> assigned_degree(const std::vector<std::string>& sets, const std::string& key) {
  std::optional<long long> degree;
  for (const auto& set : sets) {
    if (set.size() <= key.size() || set.compare(0, key.size(), key) != 0 || set[key.size()] != '=') continue;
    long long value = 0;
    const char* begin = set.data() + key.size() + 1;
    const char* end = set.data() + set.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    degree = (ec == std::errc() && ptr == end && value > 0) ? std::optional<long long>(value) : std::nullopt;
  }
  return degree;
}

bool assigns(const std::vector<std::string>& sets, const std::string& key) {
  for (const auto& set : sets)
    if (set.compare(0, key.size() + 1, key + "=") == 0) return true;
  return false;
}

// The unresolvable point's id: a hash of its assignments, so that resume and merge still
// recognise it.
std::uint64_t assignments_id(const std::vector<std::string>& sets) {
  std::string text = "unresolved";
  for (const auto& set : sets) text += "\n" + set;
  return fnv1a64(text);
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

void prepare(SweepSpec& spec) {
  if (spec.gpus != 0) {
    if (assigns(spec.sets, "parallel.dp"))
      throw InputError("--set", "parallel.dp", "cannot be combined with --gpus, which derives parallel.dp per point");
    for (const auto& axis : spec.axes)
      if (axis.key == "parallel.dp")
        throw InputError("--vary", axis.key, "cannot be combined with --gpus, which derives parallel.dp per point");
  }
  for (std::size_t i = 0; i < spec.axes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (spec.axes[i].key == spec.axes[j].key) throw InputError("--vary", spec.axes[i].key, "the key is varied twice");
  const Scenario base = io::load_scenario(spec.scenario_path, spec.sets);
  spec.base_tp = base.parallel.tp;
  spec.base_pp = base.parallel.pp;
  spec.base_cp = base.parallel.cp;
  for (const auto& axis : spec.axes) {
    auto sets = spec.sets;
    sets.push_back(axis.key + "=" + axis.values.front());
    try {
      (void)io::load_scenario(spec.scenario_path, sets);
    } catch (const InputError& e) {
      // Only a key the scenario does not have is the command's fault; a value that does not
      // validate is an invalid point, recorded with its reason.
      if (e.file() == "--set" && e.message().starts_with("unknown "))
        throw InputError("--vary", e.where(), e.message());
    }
  }
}

std::vector<std::string> point_sets(const SweepSpec& spec, const std::vector<std::string>& values, std::string& dp,
                                    std::string& problem) {
  std::vector<std::string> sets = spec.sets;
  for (std::size_t i = 0; i < spec.axes.size(); ++i) sets.push_back(spec.axes[i].key + "=" + values[i]);
  if (spec.gpus == 0) return sets;
  const auto tp = assigned_degree(sets, "parallel.tp").value_or(spec.base_tp);
  const auto pp = assigned_degree(sets, "parallel.pp").value_or(spec.base_pp);
  const auto cp = assigned_degree(sets, "parallel.cp").value_or(spec.base_cp);
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
    r.id = fnv1a64(io::load_scenario(spec.scenario_path, sets).resolved_json);
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
    const Scenario scenario = io::load_scenario(spec.scenario_path, sets);
    r.id = fnv1a64(scenario.resolved_json);
    Report report = simulate(scenario, SimulateOptions::report_only()).report;
    const auto& memory = report.memory_bytes;
    if (memory.modelled && !memory.fits && !spec.keep_oom) {
      r.status = Status::oom;
      r.reason = fmt::format("does not fit: peak {:.1f} GiB > capacity {:.1f} GiB", memory.peak / 1073741824.0,
                             memory.capacity / 1073741824.0);
    }
    r.report = std::move(report);
  });
  return r;
}

}  // namespace stepsim::sweep
