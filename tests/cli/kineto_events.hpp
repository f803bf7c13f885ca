// The events of a Kineto-format trace as the tests read them: the host thread's operators and
// runtime calls and the GPU's kernels, in microseconds.
#pragma once

#include <boost/json/parse.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace stepsim::testing {

struct KinetoEvent {
  std::string cat, name;
  double ts = 0, dur = 0;
  std::int64_t id = -1;        // correlation (runtime, kernel) or External id (cpu_op)
  std::int64_t hbm_bytes = 0;  // a kernel's, as stepsim charged it
};

inline std::vector<KinetoEvent> kineto_events(const std::string& text) {
  std::vector<KinetoEvent> out;
  const auto trace = boost::json::parse(text);
  for (const auto& e : trace.at("traceEvents").as_array()) {
    const auto& o = e.as_object();
    if (o.at("ph").as_string() != "X") continue;
    KinetoEvent k{std::string(o.at("cat").as_string()), std::string(o.at("name").as_string()),
                  o.at("ts").to_number<double>(), o.at("dur").to_number<double>()};
    const auto& args = o.at("args").as_object();
    if (const auto* c = args.if_contains("correlation")) {
      k.id = c->as_int64();
    } else if (const auto* x = args.if_contains("External id")) {
      k.id = x->as_int64();
    }
    if (const auto* b = args.if_contains("hbm_bytes")) k.hbm_bytes = b->to_number<std::int64_t>();
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace stepsim::testing
