// Builds the synthetic GPipe-like program described in synthetic_program.hpp.
#include "synthetic_program.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

namespace stepsim::bench {
namespace {

using engine::CollectiveCall;
using engine::Op;
using engine::OpIndex;
using engine::OpKind;
using engine::Program;
using engine::RankProgram;

constexpr engine::StreamIndex kCompute = 0;
constexpr engine::StreamIndex kTp = 1;
constexpr engine::StreamIndex kDp = 2;
constexpr engine::StreamIndex kPp = 3;

class StageBuilder {
 public:
  StageBuilder(Program& program, int stage, const SyntheticShape& shape)
      : program_(program), stage_(stage), shape_(shape), rank_(program.ranks[static_cast<std::size_t>(stage)]) {}

  void build() {
    for (int mb = 0; mb < shape_.micro_batches; ++mb) pass(Phase::forward, mb);
    for (int mb = 0; mb < shape_.micro_batches; ++mb) pass(Phase::backward, mb);
    compute(Phase::optimizer, Time::from_us(300), last_);
  }

 private:
  // One micro-batch through this stage's layers: receive, layers with a TP all-reduce each
  // (and a DP gradient all-reduce in backward on the last micro-batch), send.
  void pass(Phase phase, int mb) {
    const bool forward = phase == Phase::forward;
    const int from = forward ? stage_ - 1 : stage_ + 1;
    const int to = forward ? stage_ + 1 : stage_ - 1;
    OpIndex ready = last_;
    bool have_ready = mb > 0 || !forward;
    if (from >= 0 && from < shape_.stages) {
      ready = collective(kPp, pp_group(std::min(stage_, from)), CollOp::sendrecv, Bytes::mib(16), {});
      have_ready = true;
    }
    for (int layer = 0; layer < shape_.layers; ++layer) {
      const OpIndex gemm = compute(phase, Time::from_us(forward ? 180 : 360), have_ready ? ready : kNone);
      ready = collective(kTp, stage_ * 3, CollOp::allreduce, Bytes::mib(32), {gemm});
      have_ready = true;
      if (!forward && mb == shape_.micro_batches - 1) {
        collective(kDp, stage_ * 3 + 1, CollOp::allreduce, Bytes::mib(64), {gemm});
      }
    }
    last_ = compute(phase, Time::from_us(20), ready);
    if (to >= 0 && to < shape_.stages)
      collective(kPp, pp_group(std::min(stage_, to)), CollOp::sendrecv, Bytes::mib(16), {last_});
  }

  std::int32_t pp_group(int lower_stage) const { return lower_stage * 3 + 2; }

  OpIndex compute(Phase phase, Time duration, OpIndex wait) {
    Op& op = add(kCompute, wait == kNone ? std::vector<OpIndex>{} : std::vector<OpIndex>{wait});
    op.phase = phase;
    op.duration = duration;
    return index();
  }

  // Ops of one group, operation and size share one call, as the program builder's do.
  OpIndex collective(engine::StreamIndex stream, std::int32_t group, CollOp coll, Bytes size,
                     std::vector<OpIndex> waits) {
    Op& op = add(stream, waits);
    op.kind = OpKind::collective;
    const auto [it, inserted] =
        calls_.try_emplace({group, coll, size.count()}, static_cast<std::int32_t>(rank_.calls.size()));
    op.call = it->second;
    if (!inserted) return index();
    CollectiveCall& call = rank_.calls.emplace_back();
    call.op = coll;
    call.group = group;
    call.kind = program_.groups[static_cast<std::size_t>(group)].kind;
    call.size = size;
    call.latency = Time::from_us(8);
    call.algbw = Bandwidth::gbytes_per_s(stream == kTp ? 150 : 40);
    const auto link = static_cast<network::ResourceId>(stage_ * 2 + (stream == kTp ? 0 : 1));
    call.uses.push_back({link, stream == kTp ? 1.5 : 1.0});
    return index();
  }

  Op& add(engine::StreamIndex stream, const std::vector<OpIndex>& waits) {
    Op op;
    op.stream = stream;
    static constexpr const char* kNames[] = {"gemm", "tp allreduce", "dp allreduce", "pp sendrecv"};
    op.name = program_.intern(kNames[stream]);
    rank_.add_op(op, waits);
    return rank_.ops().back();
  }

  OpIndex index() const { return static_cast<OpIndex>(rank_.ops().size() - 1); }

  static constexpr OpIndex kNone = UINT32_MAX;
  Program& program_;
  int stage_;
  SyntheticShape shape_;
  RankProgram& rank_;
  OpIndex last_ = kNone;
  std::map<std::tuple<std::int32_t, CollOp, std::int64_t>, std::int32_t> calls_;
};

void add_groups(Program& program, int stages) {
  for (int s = 0; s < stages; ++s) {
    program.groups.push_back({"tp", CommKind::tp, 8, {s}, ""});
    program.groups.push_back({"dp", CommKind::dp, 64, {s}, ""});
    // The last stage's pipeline group is never called; it keeps the group numbering regular.
    std::vector<int> pp_members = s + 1 < stages ? std::vector<int>{s, s + 1} : std::vector<int>{s};
    program.groups.push_back({"pp", CommKind::pp, 2, pp_members, ""});
    program.resources.push_back({"nvlink", Bandwidth::gbytes_per_s(450)});
    program.resources.push_back({"nic", Bandwidth::gbytes_per_s(50)});
  }
}

}  // namespace

Program synthetic_program(const SyntheticShape& shape) {
  Program program;
  program.kernel_launch = Time::from_us(4);
  program.comm_slowdown = 0.1;
  add_groups(program, shape.stages);
  for (int s = 0; s < shape.stages; ++s) {
    RankProgram& rank = program.ranks.emplace_back();
    rank.rank = s;
    rank.multiplicity = 64 * 8;
    rank.label = "stage " + std::to_string(s);
    rank.streams = {"compute", "tp", "dp", "pp"};
  }
  for (int s = 0; s < shape.stages; ++s) StageBuilder(program, s, shape).build();
  return program;
}

}  // namespace stepsim::bench
