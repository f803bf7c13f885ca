// The engine's future-event list: a binary heap ordered by (time, insertion sequence), so
// events at equal times run in the order they were scheduled and every run is identical.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

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
};

class EventQueue {
 public:
  void reserve(std::size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }

  void push(Event e) {
    e.seq = next_seq_++;
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), kLater);
  }

  Event pop() {
    std::pop_heap(heap_.begin(), heap_.end(), kLater);
    Event e = heap_.back();
    heap_.pop_back();
    return e;
  }

 private:
  // A function object rather than a function pointer, so the heap operations inline it.
  struct Later {
    bool operator()(const Event& x, const Event& y) const {
      if (x.at != y.at) return x.at > y.at;
      return x.seq > y.seq;
    }
  };
  static constexpr Later kLater{};

  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace stepsim::engine
