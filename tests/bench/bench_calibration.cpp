// Calibrated collective lookup: the cost of one collective's calibrated time against the
// number of measured points and tables (a 10^6-point file must cost no more per op than a
// 30-point one).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "calibration/apply.hpp"
#include "calibration/tables.hpp"
#include "io/scenario_loader.hpp"

namespace {

namespace cal = stepsim::calibration;
using stepsim::Bytes;
using stepsim::CollOp;

// `tables` AllReduce tables of `points` sizes each, from 8 B up by a constant factor to 8 GiB,
// on one node of 2, 3, … ranks.
cal::Calibration synthetic(int points, int tables) {
  cal::Calibration c;
  c.source = "synthetic";
  c.provenance.gpu = "NVIDIA A100-SXM4-80GB";
  const double step = std::pow(1024.0 * 1024 * 1024, 1.0 / std::max(1, points - 1));
  for (int t = 0; t < tables; ++t) {
    cal::CollectiveTable table;
    table.op = CollOp::allreduce;
    table.ranks = table.ranks_per_node = 2 + t;
    double bytes = 8;
    for (int i = 0; i < points; ++i, bytes *= step) table.points.push_back({bytes, 40 + bytes / 100e3});
    c.collectives.push_back(std::move(table));
  }
  return c;
}

void BM_CalibratedCollective(benchmark::State& state) {
  const int points = static_cast<int>(state.range(0)), tables = static_cast<int>(state.range(1));
  const cal::MeasuredTables measured({synthetic(points, tables)});
  const stepsim::ClusterSpec cluster = stepsim::io::load_cluster("dgx-a100-80g-hdr", 8);
  const int ranks = 2 + tables / 2;
  const stepsim::collectives::Request request{CollOp::allreduce, Bytes(3 << 20), {ranks, 1, ranks}};
  for (auto _ : state) benchmark::DoNotOptimize(cal::calibrate_collective(measured, cluster, {}, request));
  state.counters["points"] = static_cast<double>(points) * tables;
}
BENCHMARK(BM_CalibratedCollective)->Args({30, 1})->Args({1000, 1})->Args({1000000, 1})->Args({1000, 1000});

// The measured time alone, without the model it scales.
void BM_MeasuredLookup(benchmark::State& state) {
  const int points = static_cast<int>(state.range(0)), tables = static_cast<int>(state.range(1));
  const cal::MeasuredTables measured({synthetic(points, tables)});
  const int ranks = 2 + tables / 2;
  for (auto _ : state) {
    const cal::CollectiveTable* t = measured.exact(CollOp::allreduce, ranks, 1, ranks);
    benchmark::DoNotOptimize(cal::measured_us(*t, 3 << 20));
  }
  state.counters["points"] = static_cast<double>(points) * tables;
}
BENCHMARK(BM_MeasuredLookup)->Args({30, 1})->Args({1000, 1})->Args({1000000, 1})->Args({1000, 1000});

}  // namespace
