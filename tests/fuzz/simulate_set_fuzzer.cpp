// Fuzz target: `--set key=value` overrides (one per line) on the default scenario, then the
// whole simulation and its JSON report. A scenario that validates must simulate to a report
// that keeps the invariants of tests/invariants and is valid JSON.
#include <boost/json.hpp>
#include <sstream>

#include "fuzz/fuzz_outcome.hpp"
#include "fuzz/set_lines.hpp"
#include "invariants/report_invariants.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"
#include "stepsim/report.hpp"

namespace {

void check_report(const stepsim::Report& r) {
  const std::vector<std::string> violations = stepsim::test::report_violations(r);
  if (!violations.empty()) stepsim::fuzz::finding("the report breaks an invariant: " + violations.front());
  std::ostringstream json;
  stepsim::report::write_json(r, json);
  boost::system::error_code ec;
  boost::json::parse(json.str(), ec);
  if (ec) stepsim::fuzz::finding("the JSON report does not parse: " + ec.message());
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> sets = stepsim::fuzz::set_lines(data, size);
  return stepsim::fuzz::run_one([&] { check_report(stepsim::simulate(stepsim::io::load_scenario("", sets)).report); });
}
