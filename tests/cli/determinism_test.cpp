// Runs are byte-identical, and the simulated trace follows the format rules Perfetto's
// JSON importer relies on (Chrome's Trace Event Format).
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <functional>
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
  std::ostringstream a, b;
  report::write_json(first.report, a);
  report::write_json(again.report, b);
  CHECK(b.str() == a.str());
}

// The report's config leaves the keys that follow others to follow them again: with a further
// --set it gives the report the scenario itself gives. Frozen, the 1.3B DDP example's 8 nodes
// refused dp 32, its PyTorch-only gradient_as_bucket_view false refused Megatron, and a PyTorch
// DDP job without bucket sizes kept its 1 MiB first bucket where bucket_cap_mb=100 caps it too
// (21 buckets instead of 20).
TEST_CASE("the report's config under a further set gives the report its scenario gives") {
  const std::string pytorch_ddp = R"({ "model": "gpt-1.3b", "cluster": "dgx-a100-80g-hdr",
    "parallel": { "tp": 1, "dp": 64 }, "training": { "framework": "pytorch", "global_batch": 128, "micro_batch": 2 },
    "data_parallel": { "kind": "ddp" } })";
  struct Case {
    std::string config;  // the report's
    std::function<Scenario(const std::vector<std::string>&)> own;
    std::string set;
  };
  const auto example = [](const std::vector<std::string>& sets) { return io::load_scenario("ddp-1.3b-64xa100", sets); };
  const auto file = [&](const std::vector<std::string>& sets) {
    return io::load_scenario_text(pytorch_ddp, "s.json", sets);
  };
  const std::string example_config = simulate(example({})).report.config_json;
  const std::string file_config = simulate(file({})).report.config_json;
  for (const Case& c :
       {Case{example_config, example, "parallel.dp=32"}, Case{example_config, example, "training.framework=megatron"},
        Case{file_config, file, "data_parallel.bucket_cap_mb=100"}}) {
    INFO(c.set);
    const auto own = simulate(c.own({c.set}));
    const auto again = simulate(io::load_scenario_text(c.config, "config.json", {c.set}));
    std::ostringstream a, b;
    report::write_json(own.report, a);
    report::write_json(again.report, b);
    CHECK(b.str() == a.str());
  }
}

}  // namespace stepsim
