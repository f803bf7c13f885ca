// A simulated step written with --trace and read back by the trace analysis gives the same
// exposed communication and hidden fraction as the simulation's own report: one set of
// definitions for prediction and measurement.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "analysis/analysis_output.hpp"
#include "cli/simulate_support.hpp"
#include "report/report_io.hpp"

namespace stepsim {
namespace {

namespace fs = std::filesystem;

Report analyze_simulated_trace(const SimulationResult& sim, const std::string& name) {
  const fs::path path = fs::temp_directory_path() / ("stepsim-" + std::to_string(::getpid()) + "-" + name);
  {
    std::ofstream out(path);
    report::write_trace(sim.timeline, out);
  }
  const auto analysis = analysis::analyze_trace(path.string(), std::nullopt, std::nullopt);
  fs::remove(path);
  return analysis.mean;
}

}  // namespace

TEST_CASE("simulate --trace read back by analyze gives the simulation's exposed communication") {
  struct Case {
    const char* scenario;
    std::vector<std::string> sets;
  };
  const std::vector<Case> cases = {
      {"", {}},
      {"", {"parallel.sequence_parallel=true"}},
      {"korthikanti-22b", {}},
      {"korthikanti-22b", {"training.recompute=full"}},
      {"ddp-1.3b-64xa100", {}},
      {"ddp-1.3b-64xa100", {"data_parallel.overlap_grad_reduce=false"}},
  };
  int n = 0;
  for (const Case& c : cases) {
    const auto sim = test::run(c.scenario, c.sets);
    const Report measured = analyze_simulated_trace(sim, "round-trip-" + std::to_string(n++) + ".json");
    const Report& predicted = sim.report;
    INFO("scenario '" << c.scenario << "' " << (c.sets.empty() ? "" : c.sets.front()));
    CHECK(measured.step_time_s == Approx(predicted.step_time_s).epsilon(1e-6));
    CHECK(measured.breakdown_s.exposed_total() ==
          Approx(predicted.breakdown_s.exposed_total()).epsilon(1e-6).margin(1e-9));
    for (CommKind k : {CommKind::tp, CommKind::dp}) {
      const auto i = static_cast<std::size_t>(k);
      CHECK(measured.breakdown_s.exposed_comm[i] ==
            Approx(predicted.breakdown_s.exposed_comm[i]).epsilon(1e-6).margin(1e-9));
      CHECK(measured.comm_s[i] == Approx(predicted.comm_s[i]).epsilon(1e-6).margin(1e-9));
    }
    CHECK(measured.overlap.hidden_fraction == Approx(predicted.overlap.hidden_fraction).margin(1e-6));
  }
}

}  // namespace stepsim
