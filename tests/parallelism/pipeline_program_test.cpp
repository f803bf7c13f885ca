// Pipeline programs: with free communication and uniform compute the bubble fraction is
// Megatron's (p − 1)/m, or (p − 1)/(m·v) interleaved; SendRecv links and the tied embedding.
#include <algorithm>
#include <optional>

#include <catch2/catch.hpp>

#include "engine/engine.hpp"
#include "parallelism/pipeline_comm.hpp"
#include "parallelism/program_builder.hpp"
#include "support.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::Bytes;
using stepsim::CollOp;
using stepsim::CommKind;
using stepsim::Schedule;
using stepsim::Time;

namespace {

// Every transformer-layer op 1 µs, the embedding and head free, communication and kernel
// launches free: the stages are uniform and only the schedule leaves them idle.
class FreeCosts final : public sp::Costs {
 public:
  Time compute(const stepsim::workload::OpCost& op) const override {
    using stepsim::workload::Role;
    const bool outer = op.role == Role::embedding || op.role == Role::final_norm || op.role == Role::lm_head ||
                       op.role == Role::loss || op.role == Role::optimizer;
    return outer ? Time::zero() : Time::from_us(1.0);
  }
  sp::CollectiveCost collective(const stepsim::collectives::Request&) const override {
    return {Time::zero(), stepsim::Bandwidth::gbytes_per_s(1e12), {0.0, 0.0}};
  }
  Time kernel_launch() const override { return Time::zero(); }
  double comm_slowdown() const override { return 0.0; }
};

stepsim::Scenario pipeline(Schedule schedule, int p, int m, int v) {
  auto s = spt::small_scenario(1, 1, m);
  s.parallel.pp = p;
  s.parallel.schedule = schedule;
  s.parallel.virtual_stages = v;
  s.model.layers = 2 * p * v;
  s.cluster.nodes = (p + 7) / 8;
  return s;
}

// Megatron's bubble fraction: the step's pipeline time minus a stage's ideal compute time,
// over that ideal time (the largest over the stages).
double bubble_fraction(const stepsim::Scenario& s) {
  const FreeCosts costs;
  const auto program = sp::build_program(s, spt::small_work(s), costs);
  const stepsim::Timeline t = stepsim::engine::run(program);
  Time end = Time::zero();
  std::vector<double> busy;
  for (const auto& rank : t.ranks) {
    Time compute = Time::zero();
    for (const auto& iv : rank.intervals) {
      if (iv.activity != stepsim::Activity::compute || iv.phase == stepsim::Phase::optimizer) continue;
      compute += iv.end - iv.start;
      end = std::max(end, iv.end);
    }
    busy.push_back(compute.seconds());
  }
  double worst = 0;
  for (double b : busy) worst = std::max(worst, (end.seconds() - b) / b);
  return worst;
}

struct Case {
  Schedule schedule;
  int p, m, v;
};

}  // namespace

TEST_CASE("with free communication GPipe and 1F1B leave a (p - 1)/m bubble") {
  for (const Case c : {Case{Schedule::gpipe, 4, 8, 1}, Case{Schedule::gpipe, 8, 16, 1},
                       Case{Schedule::one_f_one_b, 2, 8, 1}, Case{Schedule::one_f_one_b, 4, 8, 1},
                       Case{Schedule::one_f_one_b, 8, 32, 1}, Case{Schedule::one_f_one_b, 4, 2, 1}}) {
    const double expected = (c.p - 1.0) / c.m;
    const double measured = bubble_fraction(pipeline(c.schedule, c.p, c.m, c.v));
    INFO("p " << c.p << ", m " << c.m << ": bubble " << measured << ", expected " << expected);
    CHECK(measured == Approx(expected).epsilon(0.02));
  }
}

TEST_CASE("with free communication interleaved 1F1B leaves a (p - 1)/(m v) bubble") {
  for (const Case c : {Case{Schedule::interleaved, 2, 4, 2}, Case{Schedule::interleaved, 4, 8, 2},
                       Case{Schedule::interleaved, 4, 8, 3}, Case{Schedule::interleaved, 8, 16, 2},
                       Case{Schedule::interleaved, 4, 16, 4}}) {
    const double expected = (c.p - 1.0) / (c.m * c.v);
    const double measured = bubble_fraction(pipeline(c.schedule, c.p, c.m, c.v));
    INFO("p " << c.p << ", m " << c.m << ", v " << c.v << ": bubble " << measured << ", expected " << expected);
    CHECK(measured == Approx(expected).epsilon(0.02));
  }
}

// PyTorch's ScheduleInterleaved1F1B runs 3, 6 and 10 micro-batches over 4 stages (rounds of 3, 6
// and 5): every stage runs each pass of each micro-batch once, its compute m/4 times that of 4
// micro-batches, and the step ends (no pass waits on one that never runs).
TEST_CASE("the interleaved schedule runs micro-batch counts that are not a multiple of p in PyTorch's rounds") {
  const auto busy = [](const stepsim::Scenario& s) {
    const FreeCosts costs;
    const stepsim::Timeline t = stepsim::engine::run(sp::build_program(s, spt::small_work(s), costs));
    std::vector<Time> out;
    for (const auto& rank : t.ranks) {
      Time compute = Time::zero();
      for (const auto& iv : rank.intervals)
        if (iv.activity == stepsim::Activity::compute && iv.phase != stepsim::Phase::optimizer)
          compute += iv.end - iv.start;
      out.push_back(compute);
    }
    return out;
  };
  const std::vector<Time> four = busy(pipeline(Schedule::interleaved, 4, 4, 2));
  for (const int m : {3, 6, 10}) {
    INFO(m << " micro-batches");
    const std::vector<Time> run = busy(pipeline(Schedule::interleaved, 4, m, 2));
    REQUIRE(run.size() == four.size());
    for (std::size_t r = 0; r < run.size(); ++r) CHECK(run[r] * 4 == four[r] * m);
  }
}

TEST_CASE("activations and gradients cross each stage boundary once per micro-batch") {
  const auto s = pipeline(Schedule::one_f_one_b, 4, 8, 1);
  const spt::FixedCosts costs;
  const auto program = sp::build_program(s, spt::small_work(s), costs);
  REQUIRE(program.ranks.size() == 4);
  const auto stage1 = spt::collectives_of(program, CommKind::pp, 1);
  CHECK(stage1.size() == 4 * 8);  // receive and send, forward and backward
  for (auto i : stage1) {
    const auto& call = program.ranks[1].calls[static_cast<std::size_t>(program.ranks[1].ops()[i].call)];
    CHECK(call.op == CollOp::sendrecv);
    CHECK(call.size == Bytes(2048 * 1024 * 2));
  }
  CHECK(spt::collectives_of(program, CommKind::pp, 0).size() == 2 * 8);
  // Three boundaries, two directions each.
  CHECK(std::count_if(program.groups.begin(), program.groups.end(),
                      [](const auto& g) { return g.kind == CommKind::pp; }) == 6);
}

TEST_CASE("tied embeddings are all-reduced between the first and last stage only when split") {
  auto s = pipeline(Schedule::one_f_one_b, 4, 4, 1);
  const spt::FixedCosts costs;
  auto embedding_reduces = [&](std::size_t r) {
    const auto program = sp::build_program(s, spt::small_work(s), costs);
    long n = 0;
    for (auto i : spt::collectives_of(program, CommKind::pp, r)) {
      const auto& call = program.ranks[r].calls[static_cast<std::size_t>(program.ranks[r].ops()[i].call)];
      n += call.op == CollOp::allreduce ? 1 : 0;
    }
    return n;
  };
  CHECK(embedding_reduces(0) == 0);
  s.model.tied_embeddings = true;
  CHECK(embedding_reduces(0) == 1);
  CHECK(embedding_reduces(3) == 1);
  CHECK(embedding_reduces(1) == 0);
  // One stage keeps both ends: nothing to reduce.
  s.parallel.pp = 1;
  s.cluster.nodes = 1;
  const auto program = sp::build_program(s, spt::small_work(s), costs);
  CHECK(spt::collectives_of(program, CommKind::pp).empty());
}

TEST_CASE("the optimizer waits for the tied embedding's AllReduce") {
  auto s = pipeline(Schedule::one_f_one_b, 2, 2, 1);
  s.model.tied_embeddings = true;
  const spt::FixedCosts costs;
  const auto program = sp::build_program(s, spt::small_work(s), costs);
  const long optimizer = spt::find_op(program, "optimizer step");
  REQUIRE(optimizer >= 0);
  const auto reduces = spt::collectives_of(program, CommKind::pp);
  const auto waits = program.ranks[0].waits_of(static_cast<stepsim::engine::OpIndex>(optimizer));
  CHECK(std::find(waits.begin(), waits.end(), reduces.back()) != waits.end());
}

namespace {

// Every compute op 1 µs, SendRecv free and every AllReduce 50 µs whatever its size: a step's
// arithmetic is the schedule's plus each reduction left exposed.
class ReduceCosts final : public sp::Costs {
 public:
  Time compute(const stepsim::workload::OpCost&) const override { return Time::from_us(1.0); }
  sp::CollectiveCost collective(const stepsim::collectives::Request& r) const override {
    const Time latency = r.op == CollOp::allreduce ? Time::from_us(50.0) : Time::zero();
    return {latency, stepsim::Bandwidth::gbytes_per_s(1e12), {0.0, 0.0}};
  }
  Time kernel_launch() const override { return Time::zero(); }
  double comm_slowdown() const override { return 0.0; }
};

struct GradSum {
  Time step = Time::zero();           // the last op's end on any rank
  bool waits = true;                  // every member's reduction starts after its last backward
  Time start = Time::zero();          // the latest reduction's start
  Time last_backward = Time::zero();  // the latest backward end on a member
  bool found = false;
};

GradSum grad_sum(const stepsim::Scenario& s) {
  const ReduceCosts costs;
  const stepsim::Timeline t = stepsim::engine::run(sp::build_program(s, spt::small_work(s), costs));
  GradSum out;
  for (const auto& rank : t.ranks) {
    Time backward = Time::zero();
    std::optional<Time> start;
    for (const auto& iv : rank.intervals) {
      out.step = std::max(out.step, iv.end);
      if (iv.activity == stepsim::Activity::compute && iv.phase != stepsim::Phase::optimizer)
        backward = std::max(backward, iv.end);
      if (iv.activity == stepsim::Activity::comm && iv.kind == CommKind::pp && iv.op == CollOp::allreduce)
        start = iv.start;
    }
    if (!start) continue;
    out.found = true;
    out.waits = out.waits && *start >= backward;
    out.start = std::max(out.start, *start);
    out.last_backward = std::max(out.last_backward, backward);
  }
  return out;
}

}  // namespace

// Megatron's finalize_model_grads all-reduces the tied embedding's gradient after the DP
// gradient sync, which itself follows the last backward: with no DP reduction (dp 1) it still
// waits for the backward, so the step grows by the reduction's 50 µs at dp 1 as at dp 2.
TEST_CASE("the tied embedding's AllReduce starts after the last backward of both stages") {
  for (const int dp : {1, 2}) {
    auto s = pipeline(Schedule::one_f_one_b, 4, 4, 1);
    s.parallel.dp = dp;
    s.training.global_batch = 4LL * dp;
    s.cluster.nodes = (4 * dp + 7) / 8;
    const GradSum untied = grad_sum(s);
    s.model.tied_embeddings = true;
    const GradSum tied = grad_sum(s);
    INFO("dp " << dp);
    REQUIRE(tied.found);
    CHECK(tied.waits);
    if (dp == 1) CHECK(tied.start == tied.last_backward);
    CHECK(tied.step - untied.step == Time::from_us(50.0));
  }
}

// DualPipe sums the gradients of each stage's two copies (stage i and p − 1 − i) once both
// have run their last backward pass: the step ends 50 µs (the AllReduce) and 1 µs (the
// optimizer) after the later of them.
TEST_CASE("DualPipe's mirror AllReduce starts after both copies' last backward") {
  for (const int dp : {1, 2}) {
    auto s = pipeline(Schedule::dualpipe, 4, 8, 1);
    s.parallel.dp = dp;
    s.training.global_batch = 8LL * dp;
    s.cluster.nodes = (4 * dp + 7) / 8;
    const GradSum sum = grad_sum(s);
    INFO("dp " << dp);
    REQUIRE(sum.found);
    CHECK(sum.waits);
    if (dp == 1) {
      CHECK(sum.start == sum.last_backward);
      CHECK(sum.step == sum.last_backward + Time::from_us(51.0));
    }
  }
}

// fp8 training keeps activations in bf16, so the SendRecv carries 2-byte elements: b·s·h·2
// / tp = 1·2048·1024·2 / 2 = 2 MiB. The report notes once used the 1-byte fp8 element.
TEST_CASE("the pipeline message is b·s·h / tp activations in bf16 under fp8, in the program and the notes") {
  auto s = pipeline(Schedule::one_f_one_b, 2, 4, 1);
  s.parallel.tp = 2;
  s.cluster.nodes = 1;
  s.training.precision = stepsim::Precision::fp8;
  const Bytes message = sp::pipeline_message(s);
  CHECK(message == Bytes(1LL * 2048 * 1024 * 2 / 2));
  const sp::PipelineComm comm(s, spt::small_work(s), 0);
  CHECK(comm.message() == message);
  CHECK(sp::placement_notes(s).find("SendRecv of 2.0 MiB") != std::string::npos);
}

// Megatron-Core's get_tensor_shapes splits the sequence over TP only under sequence
// parallelism: without it each of the tp = 2 ranks sends the whole b·s·h = 1·2048·1024 bf16
// elements, 4 MiB, where sequence parallelism sends 2 MiB. Megatron-LM's scatter/gather of
// 2021-22 (and the unspecified framework that stands for it) sends 1/tp either way.
TEST_CASE("without sequence parallelism Megatron-Core sends the whole b·s·h from every TP rank") {
  auto s = pipeline(Schedule::one_f_one_b, 2, 4, 1);
  s.parallel.tp = 2;
  s.cluster.nodes = 1;
  s.training.framework = stepsim::Framework::megatron;
  const auto sent = [](const stepsim::Scenario& scenario) {
    const spt::FixedCosts costs;
    const auto program = sp::build_program(scenario, spt::small_work(scenario), costs);
    std::vector<Bytes> sizes;
    for (auto i : spt::collectives_of(program, CommKind::pp, 0))
      sizes.push_back(program.ranks[0].calls[static_cast<std::size_t>(program.ranks[0].ops()[i].call)].size);
    return sizes;
  };
  const std::vector<Bytes> whole = sent(s);
  REQUIRE_FALSE(whole.empty());
  for (Bytes b : whole) CHECK(b == Bytes(2048LL * 1024 * 2));
  CHECK(sp::placement_notes(s).find("SendRecv of 4.0 MiB per micro-batch and boundary (b·s·h from every TP rank") !=
        std::string::npos);
  s.parallel.sequence_parallel = true;
  for (Bytes b : sent(s)) CHECK(b == Bytes(2048LL * 1024 * 2 / 2));
  CHECK(sp::placement_notes(s).find("SendRecv of 2.0 MiB per micro-batch and boundary (b·s·h / tp)") !=
        std::string::npos);
  s.parallel.sequence_parallel = false;
  s.training.framework = stepsim::Framework::unspecified;
  for (Bytes b : sent(s)) CHECK(b == Bytes(2048LL * 1024 * 2 / 2));
}

// Megatron-Core's get_tensor_shapes divides the sequence by the context-parallel size once
// (and by tp under sequence parallelism): with cp = 2 and tp = 2 each rank sends
// 1·(2048 / 2)·1024 / 2 bf16 elements, 1 MiB. The message was once divided by cp a second time.
TEST_CASE("under context parallelism the pipeline message is this rank's share of the sequence, once") {
  auto s = pipeline(Schedule::one_f_one_b, 2, 4, 1);
  s.parallel.tp = 2;
  s.parallel.cp = 2;
  s.parallel.sequence_parallel = true;
  s.cluster.nodes = 1;
  s.training.framework = stepsim::Framework::megatron;
  CHECK(sp::pipeline_message(s) == Bytes(1LL * (2048 / 2) * 1024 * 2 / 2));
  CHECK(sp::placement_notes(s).find("SendRecv of 1.0 MiB per micro-batch") != std::string::npos);
}

// Llama 3 70B's first message at tp 8, cp 2, s 8192: each rank sends the residual stream of its
// s/cp = 4,096 tokens, split over TP: 1 · 4096 · 8192 / 8 · 2 B = 8 MiB, which the formula beside
// it gives only with cp in it.
TEST_CASE("the pipeline note's formula divides by cp under context parallelism") {
  stepsim::Scenario s = spt::small_scenario(2, 1, 4);
  s.parallel.pp = 2;
  s.parallel.cp = 2;
  s.parallel.sequence_parallel = true;
  s.cluster.nodes = 1;
  // 1 · (2048 / 2) · 1024 / 2 · 2 B = 1 MiB.
  CHECK(sp::placement_notes(s).find("SendRecv of 1.0 MiB per micro-batch and boundary (b·s·h / (cp·tp))") !=
        std::string::npos);
  s.parallel.tp = 1;
  s.parallel.dp = 2;
  CHECK(sp::placement_notes(s).find("SendRecv of 2.0 MiB per micro-batch and boundary (b·s·h / cp)") !=
        std::string::npos);
}
