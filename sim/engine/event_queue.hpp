// The engine's future-event list: ordered by (time, insertion sequence), so events at equal
// times run in the order they were scheduled and every run is identical.
//
// At thousands of ranks tens of thousands of events wait, most of them far ahead of the next
// one. Only those before a horizon are kept in a 4-ary heap; the others wait unsorted in a
// list, and when the heap runs dry the horizon moves on and the events before it join the
// heap. The heap stays a few thousand events small and in cache, so that popping, the
// engine's most frequent step, does not wait on cache misses level after level on its way
// down; the list is only appended to and, once per refill, read front to back. Four children
// per node halve the heap's depth against a binary heap, and a node's children share a cache
// line or two.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
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
  // `refill`: how many events a refill of the heap aims to move, plus a quarter of those
  // waiting (tests set fewer).
  explicit EventQueue(std::size_t refill = 1024) : refill_(refill) {}

  void reserve(std::size_t n) {
    heap_.reserve(n);
    far_.reserve(n);
  }
  bool empty() const { return heap_.empty() && far_.empty(); }
  std::size_t size() const { return heap_.size() + far_.size(); }
  // The next pop(); not on an empty queue.
  const Event& top() {
    if (heap_.empty()) refill();
    return heap_.front();
  }

  void push(Event e) {
    e.seq = next_seq_++;
    if (e.at < horizon_) {
      heap_push(e);
    } else {
      far_.push_back(e);
      far_earliest_ = std::min(far_earliest_, e.at.ps());
    }
  }

  Event pop() {
    if (heap_.empty()) refill();
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

  void heap_push(const Event& e) {
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

  // The heap is empty: the horizon moves to a window past the earliest waiting event, and the
  // events before it join the heap. The window doubles or halves towards the refill's aim.
  // Everything left waiting is at or after the horizon, everything in the heap before it.
  void refill() {
    constexpr std::int64_t kEnd = std::numeric_limits<std::int64_t>::max();
    const std::int64_t horizon = far_earliest_ > kEnd - window_ps_ ? kEnd : far_earliest_ + window_ps_;
    const std::size_t waiting = far_.size();
    std::size_t kept = 0;
    far_earliest_ = kEnd;
    for (const Event& e : far_) {
      // At the very end of time every event joins: nothing is later than the horizon then.
      if (e.at.ps() < horizon || horizon == kEnd) {
        heap_push(e);
      } else {
        far_[kept++] = e;
        far_earliest_ = std::min(far_earliest_, e.at.ps());
      }
    }
    far_.resize(kept);
    horizon_ = Time::from_ps(horizon);
    // A waiting event is read about four times at most before it joins the heap.
    const std::size_t aim = refill_ + waiting / 4;
    const std::size_t moved = waiting - kept;
    if (moved < aim / 2 && window_ps_ < std::numeric_limits<std::int64_t>::max() / 2) window_ps_ *= 2;
    if (moved > aim * 2 && window_ps_ > 1) window_ps_ /= 2;
  }

  std::size_t refill_;
  HugePageVector<Event> heap_;  // the events before horizon_
  HugePageVector<Event> far_;   // the events at or after it, in no order
  Time horizon_;                // zero at first: every event waits for the first refill
  std::int64_t far_earliest_ = std::numeric_limits<std::int64_t>::max();  // of far_, in picoseconds
  std::int64_t window_ps_ = 1'000'000;                                    // 1 us: adapts from the first refill on
  std::uint64_t next_seq_ = 0;
};

}  // namespace stepsim::engine
