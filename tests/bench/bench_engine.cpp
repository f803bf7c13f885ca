// Engine and network microbenchmarks: events per second on synthetic programs, and the
// cost of one max-min solve.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "engine/engine.hpp"
#include "network/max_min.hpp"
#include "synthetic_program.hpp"

namespace {

using stepsim::bench::SyntheticShape;

void BM_EngineEvents(benchmark::State& state) {
  const SyntheticShape shape{static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                             static_cast<int>(state.range(2))};
  const stepsim::engine::Program program = stepsim::bench::synthetic_program(shape);
  std::size_t ops = 0;
  for (const auto& rank : program.ranks) ops += rank.ops().size();
  std::uint64_t events = 0;
  std::uint64_t solves = 0;
  std::uint64_t stale = 0;
  for (auto _ : state) {
    stepsim::engine::Engine engine(program);
    benchmark::DoNotOptimize(engine.run());
    events += engine.stats().events;
    solves += engine.stats().rate_solves;
    stale += engine.stats().stale;
  }
  const auto runs = static_cast<double>(state.iterations());
  state.counters["events"] = static_cast<double>(events) / runs;
  state.counters["solves"] = static_cast<double>(solves) / runs;
  state.counters["stale"] = static_cast<double>(stale) / runs;
  state.SetItemsProcessed(static_cast<std::int64_t>(events));
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineEvents)
    ->ArgNames({"stages", "layers", "mb"})
    ->Args({4, 8, 8})
    ->Args({4, 32, 16})
    ->Args({16, 8, 32})
    ->Args({8, 64, 32})
    ->Unit(benchmark::kMillisecond);

// The event loop alone: BM_EngineEvents without building the engine, whose first touch of
// fresh memory (page faults, dearer still in a virtual machine) weighs as much as the loop.
void BM_EngineLoop(benchmark::State& state) {
  const SyntheticShape shape{static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                             static_cast<int>(state.range(2))};
  const stepsim::engine::Program program = stepsim::bench::synthetic_program(shape);
  std::uint64_t events = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto engine = std::make_unique<stepsim::engine::Engine>(program);
    state.ResumeTiming();
    stepsim::Timeline timeline = engine->run();
    benchmark::DoNotOptimize(timeline);
    events += engine->stats().events;
    state.PauseTiming();
    timeline = {};
    engine.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(events));
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineLoop)
    ->ArgNames({"stages", "layers", "mb"})
    ->Args({4, 32, 16})
    ->Args({16, 8, 32})
    ->Args({8, 64, 32})
    ->Unit(benchmark::kMillisecond);

// The part of BM_EngineEvents spent before the first event: validation and indexing.
void BM_EngineSetup(benchmark::State& state) {
  const SyntheticShape shape{static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                             static_cast<int>(state.range(2))};
  const stepsim::engine::Program program = stepsim::bench::synthetic_program(shape);
  for (auto _ : state) {
    stepsim::engine::Engine engine(program);
    benchmark::DoNotOptimize(&engine);
  }
}
BENCHMARK(BM_EngineSetup)->ArgNames({"stages", "layers", "mb"})->Args({8, 64, 32})->Unit(benchmark::kMillisecond);

void BM_MaxMinSolve(benchmark::State& state) {
  const auto flows = static_cast<std::size_t>(state.range(0));
  std::vector<stepsim::network::Resource> resources;
  for (std::size_t r = 0; r < flows; ++r) resources.push_back({"link", stepsim::Bandwidth::gbytes_per_s(50.0 + r)});
  std::vector<std::vector<stepsim::network::ResourceUse>> uses(flows);
  std::vector<stepsim::network::FlowDemand> demands;
  for (std::size_t f = 0; f < flows; ++f) {
    uses[f] = {{static_cast<stepsim::network::ResourceId>(f), 1.0},
               {static_cast<stepsim::network::ResourceId>((f * 7 + 3) % flows), 0.5}};
    demands.push_back({stepsim::Bandwidth::gbytes_per_s(100), uses[f]});
  }
  stepsim::network::MaxMinSolver solver(resources);
  for (auto _ : state) benchmark::DoNotOptimize(solver.solve(demands).data());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_MaxMinSolve)->Arg(4)->Arg(16)->Arg(64);

}  // namespace
