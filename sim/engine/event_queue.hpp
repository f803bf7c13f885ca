// The engine's future-event list: a 4-ary heap ordered by (time, insertion sequence), so
// events at equal times run in the order they were scheduled and every run is identical.
// Four children per node halve the heap's depth against a binary heap, and a node's children
// share a cache line or two: popping, the engine's most frequent step, touches fewer lines.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/huge_pages.hpp"
#include "stepsim/units.hpp"

namespace stepsim::engine {

enum class EventKind : std::uint8_t {
  wake,         // a launched op reaches its launch time: try to start it
  compute_end,  // a compute op's (possibly rescheduled) completion
  latency_end,  // a collective's latency phase is over
  flow_end,     // a collective's data flow has moved its last byte
  skew_end,     // the expected slowest member of a representative collective has arrived
};

struct Event {
  Time at;
  std::uint64_t seq = 0;
  std::uint32_t a = 0;        // rank, collective or flow, by kind
  std::uint32_t b = 0;        // op, by kind
  std::uint32_t version = 0;  // stale when it differs from the target's current version
  EventKind kind = EventKind::wake;
  std::uint16_t stream = 0;  // compute_end: the op's stream, whose version tells a stale event
};
static_assert(sizeof(Event) == 32, "two events a cache line");

class EventQueue {
 public:
  void reserve(std::size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }  // the next pop(); not on an empty queue

  void push(Event e) {
    e.seq = next_seq_++;
    std::size_t i = heap_.size();
    // A new slot, not a copy of `e`: the event is written once, where the sift below ends.
    heap_.emplace_back();
    while (i > 0) {
      const std::size_t parent = (i - 1) / kArity;
      if (!before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  Event pop() {
    const Event top = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    const std::size_t n = heap_.size();
    if (n == 0) return top;
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = i * kArity + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t end = first + kArity < n ? first + kArity : n;
      for (std::size_t c = first + 1; c < end; ++c) {
        if (before(heap_[c], heap_[best])) best = c;
      }
      if (!before(heap_[best], last)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = last;
    return top;
  }

 private:
  static constexpr std::size_t kArity = 4;

  static bool before(const Event& x, const Event& y) {
    if (x.at != y.at) return x.at < y.at;
    return x.seq < y.seq;
  }

  HugePageVector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace stepsim::engine
