// TP communication overlap on a hand-timed layer: each GEMM piece beside a userbuffers
// transfer runs at the rate Transformer Engine leaves it, the transfer's SMs counted once.
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/engine.hpp"
#include "parallelism/program_builder.hpp"
#include "support.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::Time;

namespace {

// Compute at 0.1 GFLOP per µs: the support's ops are 1 GFLOP, 10 µs whole. NCCL kernels slow
// compute by half, enough to show wherever that slowdown applied; no launch cost.
class RateCosts final : public sp::Costs {
 public:
  Time compute(const stepsim::workload::OpCost& op) const override { return Time::from_us(op.flops / 1e8); }
  sp::CollectiveCost collective(const stepsim::collectives::Request&) const override {
    return {Time::from_us(10.0), stepsim::Bandwidth::gbytes_per_s(100.0), {1.0, 0.0}};
  }
  Time kernel_launch() const override { return Time::zero(); }
  double comm_slowdown() const override { return 0.5; }
};

// TP 2 with sequence parallelism and userbuffers overlap on a GPU of 132 SMs.
stepsim::Timeline overlapped_run() {
  stepsim::Scenario s = spt::small_scenario(2, 1, 1);
  s.parallel.sequence_parallel = true;
  s.tensor_parallel.comm_overlap = true;
  s.cluster.gpu.sms = 132;
  const RateCosts costs;
  return stepsim::engine::run(sp::build_program(s, spt::small_work(s), costs));
}

// Rank 0's interval of the op named `name`, in µs.
double duration_us(const stepsim::Timeline& t, const std::string& name) {
  for (const stepsim::Interval& iv : t.ranks[0].intervals) {
    if (iv.activity == stepsim::Activity::compute && t.names[iv.name] == name)
      return (iv.end - iv.start).seconds() * 1e6;
  }
  FAIL("no interval " << name);
  return 0;
}

// Some interval of rank 0 named `a` overlaps one named `b`.
bool overlaps(const stepsim::Timeline& t, const std::string& a, const std::string& b) {
  for (const stepsim::Interval& x : t.ranks[0].intervals) {
    if (t.names[x.name] != a) continue;
    for (const stepsim::Interval& y : t.ranks[0].intervals) {
      if (t.names[y.name] == b && x.start < y.end && y.start < x.end) return true;
    }
  }
  return false;
}

}  // namespace

// Transformer Engine's pipelined ReduceScatter (proj and fc2 forward) runs on 16 SMs and
// gives the GEMM the other 116 for all four pieces: a quarter of 1 GFLOP at 116/132 of the
// rate, 2.5 µs · 132/116 = 2.8448 µs. The ReduceScatter of piece 1 runs beside piece 2; NCCL's
// slowdown on top would make piece 2 longer.
TEST_CASE("a GEMM piece beside its pipelined ReduceScatter runs on the SMs the ReduceScatter leaves, once") {
  const stepsim::Timeline t = overlapped_run();
  REQUIRE(overlaps(t, "ReduceScatter tp L0 attn proj fwd split, 1.0 MiB", "L0 attn proj fwd (step 2/4)"));
  const double piece = 2.5 * 132.0 / 116.0;
  for (const char* name : {"L0 attn proj fwd (step 1/4)", "L0 attn proj fwd (step 2/4)", "L0 attn proj fwd (step 3/4)",
                           "L0 attn proj fwd"}) {
    CHECK(duration_us(t, name) == Approx(piece).margin(1e-6));
  }
}

// The ring's steps (QKV and fc1 forward) are copy-engine transfers: the GEMM keeps every SM,
// half of 1 GFLOP takes 5 µs while the first step passes the chunk on.
TEST_CASE("a GEMM piece beside its ring step keeps the whole GPU") {
  const stepsim::Timeline t = overlapped_run();
  REQUIRE(overlaps(t, "SendRecv tp L0 qkv fwd AllGather ring step, 2.0 MiB", "L0 qkv fwd (step 1/2)"));
  CHECK(duration_us(t, "L0 qkv fwd (step 1/2)") == Approx(5.0).margin(1e-6));
  CHECK(duration_us(t, "L0 qkv fwd") == Approx(5.0).margin(1e-6));
}

namespace {

// What the CPU pays to issue each of rank 0's ops named `name`, in µs.
std::vector<long long> tp_host_us(const stepsim::engine::Program& p, const std::string& name) {
  std::vector<long long> out;
  for (const stepsim::engine::Op& op : p.ranks[0].ops()) {
    if (p.names[op.name] == name) out.push_back(std::llround(p.host_cost(op).us()));
  }
  return out;
}

}  // namespace

// Megatron calls Transformer Engine's GEMM once per overlapped site, and TE's C++ launches the
// rest of the chunk loop (split_overlap_ag, split_overlap_rs). FixedCosts: 5 µs a launch, and
// Megatron's dispatch 12 µs beside it. At TP 2 the QKV forward's ring: its first piece 17 µs,
// its second and the ring step 5 µs each; the projection's split: its first of four pieces
// 17 µs, the other three and all four ReduceScatters 5 µs each. One micro-batch, so each name
// is one op.
TEST_CASE("Transformer Engine's chunk loop costs the host a launch per further piece and per transfer") {
  stepsim::Scenario s = spt::small_scenario(2, 1, 1);
  s.parallel.sequence_parallel = true;
  s.tensor_parallel.comm_overlap = true;
  s.training.framework = stepsim::Framework::megatron;
  const spt::FixedCosts costs;
  const stepsim::engine::Program p = sp::build_program(s, spt::small_work(s), costs);
  using Costs = std::vector<long long>;
  CHECK(tp_host_us(p, "L0 qkv fwd (step 1/2)") == Costs{17});
  CHECK(tp_host_us(p, "L0 qkv fwd") == Costs{5});
  CHECK(tp_host_us(p, "SendRecv tp L0 qkv fwd AllGather ring step, 2.0 MiB") == Costs{5});
  CHECK(tp_host_us(p, "L0 attn proj fwd (step 1/4)") == Costs{17});
  for (const char* piece : {"L0 attn proj fwd (step 2/4)", "L0 attn proj fwd (step 3/4)", "L0 attn proj fwd"})
    CHECK(tp_host_us(p, piece) == Costs{5});
  CHECK(tp_host_us(p, "ReduceScatter tp L0 attn proj fwd split, 1.0 MiB") == Costs{5, 5, 5, 5});
  // Without the overlap the GEMM is one PyTorch-level call.
  s.tensor_parallel.comm_overlap = false;
  const stepsim::engine::Program plain = sp::build_program(s, spt::small_work(s), costs);
  CHECK(tp_host_us(plain, "L0 qkv fwd") == Costs{17});
}
