// Hand-made timelines for the report tests: intervals given in microseconds.
#pragma once

#include <string>

#include "stepsim/timeline.hpp"

namespace stepsim::test {

inline Interval compute_us(double start, double end, Phase phase = Phase::forward, std::uint16_t stream = 0) {
  Interval iv{Time::from_us(start), Time::from_us(end)};
  iv.activity = Activity::compute;
  iv.phase = phase;
  iv.stream = stream;
  return iv;
}

inline Interval comm_us(double start, double end, CommKind kind, std::uint16_t stream = 1) {
  Interval iv{Time::from_us(start), Time::from_us(end)};
  iv.activity = Activity::comm;
  iv.kind = kind;
  iv.op = CollOp::allreduce;
  iv.stream = stream;
  iv.bytes = Bytes::mib(25);
  return iv;
}

inline Interval memory_us(double start, double end, std::uint16_t stream = 0) {
  Interval iv{Time::from_us(start), Time::from_us(end)};
  iv.activity = Activity::memory;
  iv.stream = stream;
  return iv;
}

inline Interval bubble_us(double start, double end) {
  Interval iv{Time::from_us(start), Time::from_us(end)};
  iv.activity = Activity::bubble;
  return iv;
}

inline RankTimeline rank_of(std::initializer_list<Interval> intervals, int rank = 0) {
  RankTimeline r;
  r.rank = rank;
  r.label = "rank " + std::to_string(rank);
  r.streams = {"compute", "dp", "tp"};
  r.intervals = intervals;
  return r;
}

}  // namespace stepsim::test
