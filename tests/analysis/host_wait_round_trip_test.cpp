// A simulated step written as a Kineto trace and read back by `analyze`: HolisticTraceAnalysis'
// idle time breakdown of the trace gives back the time simulate says the GPU waited for the
// host.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "analysis/analysis_output.hpp"
#include "analysis/hta_metrics.hpp"
#include "cli/simulate_support.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"

using namespace stepsim;

namespace {

namespace fs = std::filesystem;

struct RoundTrip {
  SimulationResult sim;
  analysis::Analysis read;
};

// Simulates `sets` on the eager GPT-3 Small, writes the report's rank as a Kineto trace with the
// host's side (as `simulate --trace-format kineto` does) and analyzes it.
RoundTrip round_trip(const std::vector<std::string>& sets) {
  const Scenario s = io::load_scenario_text(test::kEagerGpt3Small, "eager.json", sets);
  SimulateOptions options;
  options.host_issues = true;
  RoundTrip r{simulate(s, options), {}};
  const fs::path path = fs::temp_directory_path() / ("stepsim-host-wait-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(path);
    report::write_kineto_trace(r.sim.timeline, -1, "H100", out, report::collective_dtypes(s));
  }
  r.read = analysis::analyze_trace(path.string(), std::nullopt, std::nullopt);
  fs::remove(path);
  return r;
}

// The stream with the most kernels: the compute stream.
const analysis::HtaStreamIdle& busiest(const analysis::HtaIdleBreakdown& b) {
  REQUIRE_FALSE(b.streams.empty());
  return *std::max_element(b.streams.begin(), b.streams.end(),
                           [](const auto& x, const auto& y) { return x.kernels < y.kernels; });
}

}  // namespace

// GPT-3 Small in eager PyTorch: the CPU issues each of its ~25,500 operators at 17 us while most
// kernels are shorter, so the GPU waits for the host most of the step (simulate: 276.1 ms). The
// trace's compute stream gives it back as HTA's host wait on the exact timestamps (275.2 ms),
// within what the two count differently:
// - simulate counts the GPU as busy while any kernel runs; HTA counts each stream's gaps, so
//   the compute stream's wait while DDP's AllReduces run on the communication stream is host
//   wait to HTA and not to simulate: at most the rank's communication time;
// - a gap whose kernel's launch began before the previous kernel ended (the launch call
//   straddling that end) is kernel wait to HTA, though the GPU waited for the host;
// - the wait before the step's first kernel (one operator's 17 us) is no gap to HTA.
// HTA's rounding of the timestamps to whole microseconds (the trace's are nanoseconds) moves
// each gap by up to 2 us, 16,622 gaps here: the rounded figure (279.2 ms) is not compared.
TEST_CASE("A launch-bound step's Kineto trace gives back simulate's GPU wait for the host as HTA's host wait") {
  const RoundTrip r = round_trip({});
  const analysis::HtaMetrics& h = r.read.trace.hta.at(r.read.metrics.rank_index);
  REQUIRE(h.available);
  CHECK(h.steps == 1);
  REQUIRE(h.idle_breakdown_exact.has_value());
  const analysis::HtaStreamIdle& exact = busiest(*h.idle_breakdown_exact);
  CHECK(exact.launched == exact.kernels);  // every kernel tied to its cudaLaunchKernel
  const double simulated = r.sim.report.host.gpu_wait_s;
  const double measured = exact.host_wait.seconds();
  REQUIRE(simulated > 0.3 * r.sim.report.step_time_s);  // launch-bound
  double comm = 0;
  const int written = report::critical_rank(r.sim.timeline, report::report_window(r.sim.timeline));
  REQUIRE(written >= 0);
  for (const Interval& iv : r.sim.timeline.ranks.at(static_cast<std::size_t>(written)).intervals)
    if (iv.activity == Activity::comm) comm += (iv.end - iv.start + iv.waited).seconds();
  const double first_issue = 17e-6;
  CHECK(measured <= simulated + comm + first_issue);
  CHECK(measured >= simulated - exact.kernel_wait.seconds() - first_issue);
  // Together within 2 %.
  CHECK(measured == Approx(simulated).epsilon(0.02));
  // The other classes are what is left of the stream's idle time: no wait on another stream.
  CHECK(exact.other == Time::zero());
}

// Under CUDA graphs the same step keeps the GPU ahead of the host: every replayed kernel is tied
// to its graph's one cudaGraphLaunch, and the host wait HTA finds is as small as simulate's.
TEST_CASE("Under CUDA graphs the Kineto trace's graph launches tie every kernel, and host wait stays small") {
  const RoundTrip r = round_trip({"training.cuda_graphs=true"});
  const analysis::HtaMetrics& h = r.read.trace.hta.at(r.read.metrics.rank_index);
  REQUIRE(h.idle_breakdown_exact.has_value());
  const analysis::HtaStreamIdle& exact = busiest(*h.idle_breakdown_exact);
  CHECK(exact.launched == exact.kernels);
  const double simulated = r.sim.report.host.gpu_wait_s;
  const double step = r.sim.report.step_time_s;
  CHECK(simulated < 0.01 * step);  // the host's 17 us before the first kernel
  CHECK(exact.host_wait.seconds() <= simulated);
  CHECK(exact.idle().seconds() < 0.01 * step);
}
