// Ordering of the engine's future-event list.
#include <catch2/catch.hpp>

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
