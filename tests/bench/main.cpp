// Entry point of stepsim_bench; benchmarks register themselves in the bench_*.cpp files. The
// allocator keeps freed memory between iterations, as the stepsim program does between the
// simulations of a sweep.
#include <benchmark/benchmark.h>

#include "engine/huge_pages.hpp"

int main(int argc, char** argv) {
  stepsim::engine::keep_freed_memory();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
