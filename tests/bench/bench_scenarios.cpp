// Whole-scenario benchmarks: the wall time of `simulate()` on the embedded default and on a
// 16,384-GPU Llama-3-405B job, each from a loaded scenario to a finished report; the 405B
// job both as pure DP and as 3D parallelism with an interleaved pipeline; GPT-3 175B in 3D
// on 512 GPUs and in pure DP on 4,096, in representative and in all-ranks mode.
// tools/bench_scale.sh times the largest all-ranks jobs and their peak memory.
#include <benchmark/benchmark.h>

#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"

namespace {

// Llama 3 405B on 2,048 DGX H100 nodes: TP 8 inside each node, DDP over 2,048 replicas,
// 2,048 sequences of 8,192 tokens per step (Meta's 16M-token batch).
constexpr const char* kLlama405b16k = R"({
  "model": "llama3-405b",
  "cluster": "dgx-h100-ndr",
  "parallel": { "tp": 8, "pp": 1, "dp": 2048, "sequence_parallel": true },
  "training": { "global_batch": 2048, "micro_batch": 1, "precision": "bf16", "recompute": "full" },
  "data_parallel": { "kind": "ddp", "bucket_cap_mb": 25 }
})";

// The same job as Meta trained it: TP 8, PP 16, DP 128 on 16,384 GPUs, interleaved with two
// model chunks per stage (126 layers: 3, 4 × 30, 3 per virtual stage, the outer ones lighter
// for the embedding and the head), 16 micro-batches of one sequence per replica, the
// optimizer sharded over DP (ZeRO-1) as Meta's FSDP-style sharding of optimizer states.
constexpr const char* kLlama405b3d = R"({
  "model": "llama3-405b",
  "cluster": "dgx-h100-ndr",
  "parallel": {
    "tp": 8, "pp": 16, "dp": 128, "sequence_parallel": true,
    "schedule": "interleaved", "virtual_stages": 2,
    "stage_layers": [3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
                     4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 3]
  },
  "training": { "global_batch": 2048, "micro_batch": 1, "precision": "bf16", "recompute": "full" },
  "data_parallel": { "kind": "zero1" }
})";

// GPT-3 175B on 512 A100s: Korthikanti et al.'s TP 8 × PP 8 interleaved layout (Selene)
// replicated 8 times, 8 micro-batches per replica.
constexpr const char* kGpt3Tp8Pp8Dp8 = R"({
  "model": "gpt3-175b",
  "cluster": { "preset": "dgx-a100-80g-hdr", "inter_node": { "topology": "fat-tree" } },
  "parallel": { "tp": 8, "pp": 8, "dp": 8, "sequence_parallel": true,
                "schedule": "interleaved", "virtual_stages": 3 },
  "training": { "global_batch": 64, "micro_batch": 1, "precision": "bf16", "recompute": "selective",
                "attention": "unfused" },
  "data_parallel": { "kind": "ddp" }
})";

// GPT-3 175B as 4,096 data-parallel replicas, one sequence each.
constexpr const char* kGpt3Dp4096 = R"({
  "model": "gpt3-175b",
  "cluster": "dgx-a100-80g-hdr",
  "parallel": { "tp": 1, "pp": 1, "dp": 4096 },
  "training": { "global_batch": 4096, "micro_batch": 1, "precision": "bf16", "recompute": "full" },
  "data_parallel": { "kind": "ddp" }
})";

stepsim::Scenario all_ranks(stepsim::Scenario s) {
  s.simulation.ranks = stepsim::RankMode::all;
  return s;
}

void run_scenario(benchmark::State& state, const stepsim::Scenario& scenario) {
  std::size_t intervals = 0;
  for (auto _ : state) {
    auto result = stepsim::simulate(scenario);
    intervals = 0;
    for (const auto& rank : result.timeline.ranks) intervals += rank.intervals.size();
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

void BM_Llama405bTp8Dp2048(benchmark::State& state) {
  run_scenario(state, stepsim::io::load_scenario_text(kLlama405b16k, "llama3-405b-16k"));
}
BENCHMARK(BM_Llama405bTp8Dp2048)->Unit(benchmark::kMillisecond);

void BM_Llama405bTp8Pp16Dp128Interleaved(benchmark::State& state) {
  run_scenario(state, stepsim::io::load_scenario_text(kLlama405b3d, "llama3-405b-3d"));
}
BENCHMARK(BM_Llama405bTp8Pp16Dp128Interleaved)->Unit(benchmark::kMillisecond);

void BM_Gpt3Tp8Pp8Dp8(benchmark::State& state) {
  run_scenario(state, stepsim::io::load_scenario_text(kGpt3Tp8Pp8Dp8, "gpt3-175b-3d-512"));
}
BENCHMARK(BM_Gpt3Tp8Pp8Dp8)->Unit(benchmark::kMillisecond);

void BM_Gpt3Tp8Pp8Dp8AllRanks(benchmark::State& state) {
  run_scenario(state, all_ranks(stepsim::io::load_scenario_text(kGpt3Tp8Pp8Dp8, "gpt3-175b-3d-512")));
}
BENCHMARK(BM_Gpt3Tp8Pp8Dp8AllRanks)->Unit(benchmark::kMillisecond);

// Seconds per run: one iteration per repetition (--benchmark_repetitions for more).
void BM_Gpt3Dp4096AllRanks(benchmark::State& state) {
  run_scenario(state, all_ranks(stepsim::io::load_scenario_text(kGpt3Dp4096, "gpt3-175b-dp4096")));
}
BENCHMARK(BM_Gpt3Dp4096AllRanks)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
