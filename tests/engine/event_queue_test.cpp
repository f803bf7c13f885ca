// Ordering of the engine's future-event list.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
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

// A small deterministic generator: a linear congruential one's high bits.
struct Lcg {
  std::uint64_t x;
  std::uint64_t operator()() {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x >> 33;
  }
};

// A queue checked against a plain list of (time, tag), tags in scheduling order: the list's
// least entry is the next event out.
class Checked {
 public:
  explicit Checked(EventQueue& q) : q_(q) {}
  bool empty() const { return q_.empty(); }

  void push(std::int64_t ps) {
    q_.push(at(ps, tag_));
    reference_.emplace_back(ps, tag_++);
  }

  // Pops the next event, checks it, and returns its time.
  std::int64_t pop() {
    const auto first = std::ranges::min_element(reference_);
    CHECK(q_.top().a == first->second);
    const Event e = q_.pop();
    REQUIRE(e.at.ps() == first->first);
    REQUIRE(e.a == first->second);
    reference_.erase(first);
    return e.at.ps();
  }

  void drain() {
    CHECK(q_.size() == reference_.size());
    while (!q_.empty()) pop();
    CHECK(reference_.empty());
  }

 private:
  EventQueue& q_;
  std::vector<std::pair<std::int64_t, std::uint32_t>> reference_;
  std::uint32_t tag_ = 0;
};

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
  // Many equal times, and a queue that grows and shrinks through several heap levels.
  EventQueue q;
  Checked checked(q);
  Lcg next{12345};
  std::int64_t now = 0;
  for (int round = 0; round < 2000; ++round) {
    for (auto pushes = next() % 4; pushes > 0; --pushes) checked.push(now + static_cast<std::int64_t>(next() % 50));
    if (next() % 3 == 0 || checked.empty()) continue;
    now = checked.pop();
  }
  checked.drain();
}

TEST_CASE("events near and far ahead come out in order through many refills of the heap") {
  // Times spread over twelve orders of magnitude ahead of the last event popped, or (grid)
  // whole microseconds a few ahead, many of them equal, pushed while the queue is popped: the
  // heap is refilled from the waiting events thousands of times, its window grows and shrinks,
  // and events fall exactly on its horizon. Each refill aims at moving a few events, so that
  // most wait outside the heap.
  for (const bool grid : {false, true}) {
    EventQueue q(2);
    Checked checked(q);
    Lcg next{7};
    std::int64_t now = 0;
    for (int round = 0; round < 30000; ++round) {
      for (auto pushes = next() % 3; pushes > 0; --pushes) {
        auto ahead = static_cast<std::int64_t>(next() % 1000);
        for (auto scale = next() % 5; scale > 0; --scale) ahead *= 1000;
        if (grid) ahead = static_cast<std::int64_t>(next() % 8) * 1'000'000;
        if (next() % 4 == 0) ahead = 0;  // at the time of the event being handled
        checked.push(now + ahead);
      }
      if (!checked.empty()) now = checked.pop();
    }
    checked.drain();
  }
}

TEST_CASE("events at the end of time come out after every other, in the order they were scheduled") {
  EventQueue q(1);
  const std::int64_t end = std::numeric_limits<std::int64_t>::max();
  q.push(at(end, 0));
  q.push(at(5, 1));
  q.push(at(end, 2));
  CHECK(q.pop().a == 1);
  q.push(at(end - 1, 3));
  q.push(at(end, 4));
  CHECK(q.pop().a == 3);
  CHECK(q.pop().a == 0);
  CHECK(q.pop().a == 2);
  CHECK(q.pop().a == 4);
  CHECK(q.empty());
}
