// A terse way to write small engine programs in tests.
#pragma once

#include <string>
#include <vector>

#include "engine/program.hpp"
#include "stepsim/timeline.hpp"

namespace stepsim::engine::testing {

inline Time us(double v) { return Time::from_us(v); }

class ProgramBuilder {
 public:
  explicit ProgramBuilder(int ranks, Time launch = Time::zero()) {
    program_.kernel_launch = launch;
    for (int r = 0; r < ranks; ++r) {
      RankProgram& rank = program_.ranks.emplace_back();
      rank.rank = r;
      rank.label = "r" + std::to_string(r);
      rank.streams = {"compute"};
    }
  }

  Program& program() { return program_; }

  StreamIndex stream(int rank, const std::string& name) {
    auto& streams = program_.ranks[static_cast<std::size_t>(rank)].streams;
    streams.push_back(name);
    return static_cast<StreamIndex>(streams.size() - 1);
  }

  std::int32_t group(const std::string& name, std::vector<int> members, CommKind kind = CommKind::dp) {
    Group& g = program_.groups.emplace_back();
    g.name = name;
    g.kind = kind;
    g.size = static_cast<int>(members.size());
    g.members = std::move(members);
    return static_cast<std::int32_t>(program_.groups.size() - 1);
  }

  network::ResourceId link(Bandwidth capacity) {
    program_.resources.push_back({"link", capacity});
    return static_cast<network::ResourceId>(program_.resources.size() - 1);
  }

  OpIndex compute(int rank, StreamIndex stream, const std::string& name, Time duration,
                  std::vector<OpIndex> waits = {}) {
    Op& op = add(rank, stream, name, std::move(waits));
    op.duration = duration;
    op.phase = Phase::forward;
    return last(rank);
  }

  OpIndex collective(int rank, StreamIndex stream, const std::string& name, std::int32_t group, CollectiveCall call,
                     std::vector<OpIndex> waits = {}) {
    Op& op = add(rank, stream, name, std::move(waits));
    op.kind = OpKind::collective;
    call.group = group;
    call.kind = program_.groups[static_cast<std::size_t>(group)].kind;
    auto& calls = program_.ranks[static_cast<std::size_t>(rank)].calls;
    calls.push_back(std::move(call));
    op.call = static_cast<std::int32_t>(calls.size() - 1);
    return last(rank);
  }

  Op& op(int rank, OpIndex o) { return program_.ranks[static_cast<std::size_t>(rank)].ops()[o]; }

 private:
  Op& add(int rank, StreamIndex stream, const std::string& name, const std::vector<OpIndex>& waits) {
    RankProgram& program = program_.ranks[static_cast<std::size_t>(rank)];
    Op op;
    op.stream = stream;
    op.name = program_.intern(name);
    program.add_op(op, waits);
    return program.ops().back();
  }

  OpIndex last(int rank) const {
    return static_cast<OpIndex>(program_.ranks[static_cast<std::size_t>(rank)].ops().size() - 1);
  }

  Program program_;
};

// A collective of `size` bytes at up to `algbw` after `latency`, loading `uses`.
inline CollectiveCall call(Bytes size, Time latency, Bandwidth algbw = Bandwidth::gbytes_per_s(100),
                           std::vector<network::ResourceUse> uses = {}) {
  CollectiveCall c;
  c.size = size;
  c.latency = latency;
  c.algbw = algbw;
  c.uses = std::move(uses);
  return c;
}

// The interval named `name` on rank `rank` (the first, in recorded order).
inline const Interval& interval(const Timeline& t, int rank, const std::string& name) {
  const std::uint32_t id = t.names.find(name).value();
  for (const Interval& i : t.ranks[static_cast<std::size_t>(rank)].intervals) {
    if (i.name == id) return i;
  }
  throw std::out_of_range("no interval named " + name);
}

}  // namespace stepsim::engine::testing
