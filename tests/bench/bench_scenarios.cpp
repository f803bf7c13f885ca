// Whole-scenario benchmarks: the wall time of `simulate()` on the embedded default and on a
// 16,384-GPU Llama-3-405B job, each from a loaded scenario to a finished report; the 405B
// job both as pure DP and as 3D parallelism with an interleaved pipeline (and, as the default,
// in representative mode under kernel jitter); GPT-3 175B in 3D
// on 512 GPUs and in pure DP on 4,096, in representative and in all-ranks mode (the latter
// with kernel jitter and a slow GPU).
// tools/bench_scale.sh times the largest all-ranks jobs and their peak memory.
#include <benchmark/benchmark.h>

#include <string>

#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"

namespace {

// A scenario of tests/bench/scenarios/, which tools/bench_scale.sh runs too.
stepsim::Scenario bench_scenario(const std::string& name) {
  return stepsim::io::load_scenario(std::string(STEPSIM_BENCH_SCENARIOS) + "/" + name + ".json");
}

// Every rank simulated, with variation switched on as the speed targets state them: 5 %
// per-kernel jitter (normal) and one GPU at 0.9x speed.
stepsim::Scenario all_ranks(stepsim::Scenario s) {
  s.simulation.ranks = stepsim::RankMode::all;
  s.simulation.variation.jitter = {stepsim::JitterKind::normal, 0.05, 7};
  s.simulation.variation.gpu_speed.push_back({1, 0.9});
  return s;
}

// Representative mode under 5 % per-kernel jitter (normal): each collective waits the expected
// time for its slowest real member.
stepsim::Scenario jittered(stepsim::Scenario s) {
  s.simulation.variation.jitter = {stepsim::JitterKind::normal, 0.05, 1};
  return s;
}

// As `stepsim simulate` without a trace runs it: the report is read, no rank's intervals.
void run_scenario(benchmark::State& state, const stepsim::Scenario& scenario) {
  std::size_t intervals = 0;
  for (auto _ : state) {
    auto result = stepsim::simulate(scenario, stepsim::SimulateOptions::report_only());
    intervals = 0;
    for (const auto& rank : result.timeline.ranks) intervals += rank.intervals.size() + rank.dropped;
    benchmark::DoNotOptimize(result.report.step_time_s);
  }
  state.counters["intervals"] = static_cast<double>(intervals);
  state.counters["gpus"] = scenario.parallel.gpus();
}

void BM_DefaultScenario(benchmark::State& state) { run_scenario(state, stepsim::io::load_scenario("")); }
BENCHMARK(BM_DefaultScenario)->Unit(benchmark::kMillisecond);

void BM_DefaultScenarioWithLoading(benchmark::State& state) {
  for (auto _ : state) {
    auto result = stepsim::simulate(stepsim::io::load_scenario(""));
    benchmark::DoNotOptimize(result.report.step_time_s);
  }
}
BENCHMARK(BM_DefaultScenarioWithLoading)->Unit(benchmark::kMillisecond);

void BM_Llama405bTp8Dp2048(benchmark::State& state) { run_scenario(state, bench_scenario("llama3-405b-dp2048")); }
BENCHMARK(BM_Llama405bTp8Dp2048)->Unit(benchmark::kMillisecond);

void BM_Llama405bTp8Pp16Dp128Interleaved(benchmark::State& state) {
  run_scenario(state, bench_scenario("llama3-405b-4d-16k"));
}
BENCHMARK(BM_Llama405bTp8Pp16Dp128Interleaved)->Unit(benchmark::kMillisecond);

void BM_DefaultScenarioJitter(benchmark::State& state) {
  run_scenario(state, jittered(stepsim::io::load_scenario("")));
}
BENCHMARK(BM_DefaultScenarioJitter)->Unit(benchmark::kMillisecond);

void BM_Llama405bTp8Pp16Dp128InterleavedJitter(benchmark::State& state) {
  run_scenario(state, jittered(bench_scenario("llama3-405b-4d-16k")));
}
BENCHMARK(BM_Llama405bTp8Pp16Dp128InterleavedJitter)->Unit(benchmark::kMillisecond);

void BM_Gpt3Tp8Pp8Dp8(benchmark::State& state) { run_scenario(state, bench_scenario("gpt3-3d-512")); }
BENCHMARK(BM_Gpt3Tp8Pp8Dp8)->Unit(benchmark::kMillisecond);

void BM_Gpt3Tp8Pp8Dp8AllRanks(benchmark::State& state) {
  run_scenario(state, all_ranks(bench_scenario("gpt3-3d-512")));
}
BENCHMARK(BM_Gpt3Tp8Pp8Dp8AllRanks)->Unit(benchmark::kMillisecond);

// Seconds per run: one iteration per repetition (--benchmark_repetitions for more).
void BM_Gpt3Dp4096AllRanks(benchmark::State& state) { run_scenario(state, all_ranks(bench_scenario("gpt3-dp4096"))); }
BENCHMARK(BM_Gpt3Dp4096AllRanks)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
