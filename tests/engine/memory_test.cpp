// The engine's buffers for thousands of ranks: huge-page-aligned arrays, buffers mapped in
// one call over several threads, and the inline list of a link's flows.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <numeric>
#include <vector>

#include "engine/flow_set.hpp"
#include "engine/huge_pages.hpp"
#include "engine/parallel.hpp"

namespace se = stepsim::engine;

TEST_CASE("a huge-page vector starts on a 2 MiB boundary from a megabyte on, and keeps its contents as it grows") {
  se::HugePageVector<std::uint64_t> small(1000, 7);
  CHECK(small[999] == 7);
  se::HugePageVector<std::uint64_t> v;
  for (std::uint64_t i = 0; i < 600'000; ++i) v.push_back(i);  // 4.8 MB after several reallocations
  CHECK(reinterpret_cast<std::uintptr_t>(v.data()) % (std::uintptr_t{2} << 20) == 0);
  std::uint64_t sum = 0;
  for (std::uint64_t x : v) sum += x;
  CHECK(sum == 600'000ULL * 599'999ULL / 2);
  v.clear();
  v.shrink_to_fit();
  CHECK(v.capacity() == 0);
}

TEST_CASE("mapping a buffer on several threads keeps what it holds") {
  // 300 MB: split over up to four threads where the machine has the cores.
  std::vector<std::uint32_t> buffer;
  buffer.reserve(75'000'000);
  buffer.resize(1000);
  std::iota(buffer.begin(), buffer.end(), 1U);
  se::populate_pages(buffer.data(), buffer.capacity() * sizeof(std::uint32_t));
  CHECK(buffer[0] == 1);
  CHECK(buffer[999] == 1000);
  buffer.resize(75'000'000);
  CHECK(buffer.back() == 0);
}

TEST_CASE("a link's flows stay in start order through removals, inline and beyond") {
  se::FlowSet set;
  CHECK(set.empty());
  for (std::uint32_t f : {5U, 3U, 9U}) set.push_back(f);
  set.erase(3);
  CHECK(std::vector<std::uint32_t>(set.items().begin(), set.items().end()) == std::vector<std::uint32_t>{5, 9});
  for (std::uint32_t f = 10; f < 20; ++f) set.push_back(f);  // past the three kept inline
  set.erase(12);
  set.erase(5);
  std::vector<std::uint32_t> expected{9, 10, 11};
  for (std::uint32_t f = 13; f < 20; ++f) expected.push_back(f);
  CHECK(std::vector<std::uint32_t>(set.items().begin(), set.items().end()) == expected);
  CHECK(set.back() == 19);
  se::FlowSet moved(std::move(set));
  CHECK(moved.items().size() == expected.size());
  CHECK(set.empty());  // NOLINT(bugprone-use-after-move): a moved-from set is empty
  std::vector<se::FlowSet> sets(3);
  sets[1].push_back(4);
  sets.resize(1000);  // moves them
  CHECK(sets[1].back() == 4);
}

TEST_CASE("setup work split into parts runs every part once, on as many threads as asked") {
  for (std::size_t parts : {0U, 1U, 3U, 16U}) {
    std::vector<std::atomic<int>> runs(parts);
    se::run_parts(parts, [&runs](std::size_t p) { ++runs[p]; });
    for (std::size_t p = 0; p < parts; ++p) CHECK(runs[p] == 1);
  }
  CHECK(se::setup_threads() >= 1);
  CHECK(se::setup_threads() <= 4);
}
