// Ordering of the engine's future-event list.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/event_queue.hpp"

namespace {

using stepsim::Time;
using stepsim::engine::Event;
using stepsim::engine::EventQueue;

Event at(std::int64_t ps, std::uint32_t tag) {
  Event e;
  e.at = Time::from_ps(ps);
  e.a = tag;
  return e;
}

}  // namespace

TEST_CASE("events come out in time order") {
  EventQueue q;
  q.push(at(30, 0));
  q.push(at(10, 1));
  q.push(at(20, 2));
  CHECK(q.pop().a == 1);
  CHECK(q.pop().a == 2);
  CHECK(q.pop().a == 0);
  CHECK(q.empty());
}

TEST_CASE("events at the same time come out in the order they were scheduled") {
  EventQueue q;
  for (std::uint32_t tag = 0; tag < 100; ++tag) q.push(at(tag % 2 == 0 ? 5 : 7, tag));
  for (std::uint32_t tag = 0; tag < 100; tag += 2) CHECK(q.pop().a == tag);
  for (std::uint32_t tag = 1; tag < 100; tag += 2) CHECK(q.pop().a == tag);
}

TEST_CASE("pushes and pops interleaved give the order of time, then of scheduling") {
  // A reference list sorted by (time, tag), tags in scheduling order, against the heap with
  // many equal times and a queue that grows and shrinks through several heap levels.
  EventQueue q;
  std::vector<std::pair<std::int64_t, std::uint32_t>> reference;
  std::uint64_t x = 12345;
  const auto next = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x >> 33;
  };
  std::uint32_t tag = 0;
  std::int64_t now = 0;
  for (int round = 0; round < 2000; ++round) {
    const auto pushes = next() % 4;
    for (std::uint64_t i = 0; i < pushes; ++i) {
      const auto t = now + static_cast<std::int64_t>(next() % 50);
      q.push(at(t, tag));
      reference.emplace_back(t, tag++);
    }
    if (next() % 3 == 0 || q.empty()) continue;
    const auto first = std::ranges::min_element(reference);
    const Event e = q.pop();
    REQUIRE(e.at.ps() == first->first);
    REQUIRE(e.a == first->second);
    now = e.at.ps();
    reference.erase(first);
  }
  while (!q.empty()) {
    const auto first = std::ranges::min_element(reference);
    REQUIRE(q.pop().a == first->second);
    reference.erase(first);
  }
  CHECK(reference.empty());
}
