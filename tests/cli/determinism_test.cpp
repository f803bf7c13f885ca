// Runs are byte-identical, and the simulated trace follows the format rules Perfetto's
// JSON importer relies on (Chrome's Trace Event Format).
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <sstream>

#include "cli/simulate_support.hpp"
#include "report/report_io.hpp"
#include "report/trace_rules.hpp"

namespace stepsim {
namespace {

struct Outputs {
  std::string json;
  std::string trace;
};

Outputs outputs(const std::string& scenario, const std::vector<std::string>& sets = {}) {
  const auto result = test::run(scenario, sets);
  std::ostringstream json, trace;
  report::write_json(result.report, json);
  report::write_trace(result.timeline, trace);
  return {json.str(), trace.str()};
}

}  // namespace

TEST_CASE("two runs of a scenario give byte-identical JSON and trace") {
  for (const char* scenario : {"", "korthikanti-22b", "ddp-1.3b-64xa100"}) {
    const Outputs a = outputs(scenario);
    const Outputs b = outputs(scenario);
    INFO("scenario '" << scenario << "'");
    CHECK(a.json == b.json);
    CHECK(a.trace == b.trace);
  }
}

TEST_CASE("the simulated trace follows the Chrome trace format rules") {
  for (const char* scenario : {"", "korthikanti-22b"}) {
    for (const char* sp : {"false", "true"}) {
      const Outputs o = outputs(scenario, {test::set("parallel.sequence_parallel", sp)});
      const auto violations = test::trace_rule_violations(boost::json::parse(o.trace));
      INFO("scenario '" << scenario << "', sequence_parallel " << sp);
      for (const auto& v : violations) UNSCOPED_INFO(v);
      CHECK(violations.empty());
    }
  }
}

TEST_CASE("the JSON report embeds the resolved scenario, which loads again to the same report") {
  const auto first = test::run("ddp-1.3b-64xa100");
  const auto again = simulate(io::load_scenario_text(first.report.config_json, "resolved.json"));
  CHECK(again.report.step_time_s == first.report.step_time_s);
}

}  // namespace stepsim
