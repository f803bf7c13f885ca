// The --best search and training.memory_headroom: a layout whose memory in use fits the GPU
// only when no headroom is asked for is counted as not fitting, and is not ranked.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "sweep/best.hpp"

using stepsim::sweep::BestResult;
using stepsim::sweep::search_best;
using stepsim::sweep::SweepSpec;

namespace {

constexpr double MiB = 1048576.0;

SweepSpec gpt_1_3b_on_8(const std::string& headroom) {
  SweepSpec spec;
  spec.sets = {"model=gpt-1.3b", "data_parallel.kind=ddp", "training.recompute=none", "training.micro_batch=2",
               "training.memory_headroom=\"" + headroom + "\""};
  spec.gpus = 8;
  return spec;
}

}  // namespace

TEST_CASE("the best-configuration search drops a layout that fits only without the memory headroom", "[slow]") {
  const BestResult without = search_best(gpt_1_3b_on_8("0 GiB"), 2, false);
  REQUIRE_FALSE(without.ranked.empty());
  const auto largest = std::max_element(without.ranked.begin(), without.ranked.end(), [](const auto& a, const auto& b) {
    return a.second.memory_bytes.device < b.second.memory_bytes.device;
  });
  const stepsim::MemoryReport& m = largest->second.memory_bytes;
  // One MiB more than the largest layout leaves free: it, and only what leaves as little, drop.
  const double headroom = (std::floor((m.capacity - m.device) / MiB) + 1) * MiB;
  const auto dropped = std::count_if(without.ranked.begin(), without.ranked.end(), [&](const auto& r) {
    return r.second.memory_bytes.device + headroom > r.second.memory_bytes.capacity;
  });
  REQUIRE(dropped >= 1);
  const BestResult with = search_best(gpt_1_3b_on_8(fmt::format("{:.0f} MiB", headroom / MiB)), 2, false);
  CHECK(with.oom >= without.oom + 1);
  for (const auto& [candidate, report] : with.ranked) {
    CHECK(candidate.sets != largest->first.sets);
    CHECK(report.memory_bytes.fits);
    CHECK(report.memory_bytes.device + headroom <= report.memory_bytes.capacity);
  }
}
