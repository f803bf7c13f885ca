// Entry point of stepsim_bench; benchmarks register themselves in the bench_*.cpp files.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
