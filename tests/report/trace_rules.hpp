// The Chrome Trace Event rules Perfetto relies on (Trace Event Format), as a checker that
// lists every violation in a parsed trace; empty means the trace is well-formed.
#pragma once

#include <algorithm>
#include <boost/json.hpp>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace stepsim::test {

struct Slice {
  double ts, end;
};

inline bool is_number(const boost::json::value* v) { return v != nullptr && v->is_number(); }

inline void check_metadata(const boost::json::object& e, std::vector<std::string>& errors) {
  const auto* name = e.if_contains("name");
  if (name == nullptr || !name->is_string()) return errors.push_back("M event without a name");
  const auto* args = e.if_contains("args");
  if (args == nullptr || !args->is_object()) return errors.push_back("M event without args");
  const std::string n(name->get_string());
  if ((n == "thread_name" || n == "process_name") && !args->get_object().contains("name"))
    errors.push_back(n + " without args.name");
}

inline void check_counter(const boost::json::object& e, std::vector<std::string>& errors) {
  const auto* args = e.if_contains("args");
  if (args == nullptr || !args->is_object() || args->get_object().empty())
    return errors.push_back("C event without args");
  for (const auto& kv : args->get_object())
    if (!kv.value().is_number()) errors.push_back("C event with a non-numeric arg");
  if (!is_number(e.if_contains("ts"))) errors.push_back("C event without ts");
}

inline void check_complete(const boost::json::object& e, std::vector<std::string>& errors,
                           std::map<std::pair<std::int64_t, std::int64_t>, std::vector<Slice>>& slices) {
  if (!is_number(e.if_contains("ts")) || !is_number(e.if_contains("dur")))
    return errors.push_back("X event without numeric ts and dur");
  const double ts = e.at("ts").to_number<double>(), dur = e.at("dur").to_number<double>();
  if (ts < 0 || dur < 0) errors.push_back("X event with negative ts or dur");
  const auto* name = e.if_contains("name");
  if (name == nullptr || !name->is_string()) return errors.push_back("X event without a name");
  const auto* cat = e.if_contains("cat");
  if (cat != nullptr && cat->is_string() && cat->get_string() == "comm" && !name->get_string().starts_with("nccl"))
    errors.push_back("comm event not named nccl*: " + std::string(name->get_string()));
  slices[{e.at("pid").to_number<std::int64_t>(), e.at("tid").to_number<std::int64_t>()}].push_back({ts, ts + dur});
}

// Slices on one (pid, tid) must nest: each one lies within, or after, every earlier one.
inline void check_nesting(std::vector<Slice>& s, std::vector<std::string>& errors) {
  constexpr double eps = 1e-6;  // well below the nanosecond the trace resolves
  std::sort(s.begin(), s.end(),
            [](const Slice& a, const Slice& b) { return a.ts != b.ts ? a.ts < b.ts : a.end > b.end; });
  std::vector<double> open;
  for (const Slice& x : s) {
    while (!open.empty() && open.back() <= x.ts + eps) open.pop_back();
    if (!open.empty() && x.end > open.back() + eps) return errors.push_back("slices overlap without nesting");
    open.push_back(x.end);
  }
}

inline std::vector<std::string> trace_rule_violations(const boost::json::value& trace) {
  std::vector<std::string> errors;
  const auto* obj = trace.if_object();
  const auto* events = obj != nullptr ? obj->if_contains("traceEvents") : nullptr;
  if (events == nullptr || !events->is_array()) return {"no top-level traceEvents array"};
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<Slice>> slices;
  for (const auto& v : events->get_array()) {
    const auto* e = v.if_object();
    if (e == nullptr || !e->contains("ph") || !is_number(e->if_contains("pid")) || !is_number(e->if_contains("tid"))) {
      errors.push_back("event without ph, pid or tid");
      continue;
    }
    const std::string ph(e->at("ph").as_string());
    if (ph == "M")
      check_metadata(*e, errors);
    else if (ph == "C")
      check_counter(*e, errors);
    else if (ph == "X")
      check_complete(*e, errors, slices);
    else
      errors.push_back("unexpected ph " + ph);
  }
  for (auto& [key, s] : slices) check_nesting(s, errors);
  return errors;
}

}  // namespace stepsim::test
