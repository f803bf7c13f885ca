// Programs built with the real workload, GPU and NCCL models, run by the engine.
#include <algorithm>
#include <memory>

#include <catch2/catch.hpp>

#include "engine/engine.hpp"
#include "hardware/gpu_model.hpp"
#include "parallelism/mesh.hpp"
#include "parallelism/program_builder.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
using stepsim::Bandwidth;
using stepsim::CommKind;
using stepsim::Time;

namespace {

// DGX H100 with NDR InfiniBand, as configs/clusters/dgx-h100-ndr.json describes it.
stepsim::ClusterSpec dgx_h100(int nodes) {
  stepsim::ClusterSpec c;
  c.name = "dgx-h100-ndr";
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.gpu.name = "h100-sxm5-80gb";
  c.gpu.flops.bf16 = stepsim::FlopRate::tflops(989);
  c.gpu.memory = stepsim::Bytes::gib(80);
  c.gpu.memory_bandwidth = Bandwidth::gbytes_per_s(3350);
  c.gpu.sms = 132;
  c.intra_node.bandwidth = Bandwidth::gbytes_per_s(450);
  c.intra_node.nvls = true;
  c.inter_node.nic_bandwidth = Bandwidth::gbits_per_s(400);
  return c;
}

stepsim::Scenario gpt(int tp, int dp, int micro_batches) {
  stepsim::Scenario s;
  s.source = "test.json";
  s.model = {"gpt-small", 4, 2048, 16, 16, 8192, 50304, 2048, stepsim::MlpKind::gelu, false, {}};
  s.cluster = dgx_h100((tp * dp + 7) / 8);
  s.parallel.tp = tp;
  s.parallel.dp = dp;
  s.training.global_batch = static_cast<long long>(dp) * micro_batches;
  return s;
}

stepsim::Timeline run(const stepsim::Scenario& s) {
  const stepsim::hardware::GpuModel gpu(s.cluster.gpu, s.training.precision);
  const stepsim::engine::Program program = sp::build_program(s, stepsim::workload::build_work(s), gpu);
  stepsim::engine::Engine engine(program);
  return engine.run();
}

Time last_end(const stepsim::RankTimeline& rank) {
  Time end;
  for (const auto& i : rank.intervals) end = stepsim::max(end, i.end);
  return end;
}

Time busy(const stepsim::RankTimeline& rank, CommKind kind) {
  Time t;
  for (const auto& i : rank.intervals) {
    if (i.activity == stepsim::Activity::comm && i.kind == kind) t += i.end - i.start;
  }
  return t;
}

}  // namespace

TEST_CASE("all-ranks mode gives the representative rank's step on TP 2 x DP 2") {
  auto s = gpt(2, 2, 2);
  const stepsim::Timeline one = run(s);
  s.simulation.ranks = stepsim::RankMode::all;
  const stepsim::Timeline all = run(s);
  REQUIRE(one.ranks.size() == 1);
  REQUIRE(all.ranks.size() == 4);
  for (const auto& rank : all.ranks) {
    CHECK(last_end(rank) == last_end(one.ranks[0]));
    CHECK(rank.intervals.size() == one.ranks[0].intervals.size());
  }
}

TEST_CASE("a TP 8 x DP 8 step on DGX H100 runs TP and DP collectives") {
  const stepsim::Timeline t = run(gpt(8, 8, 2));
  REQUIRE(t.ranks.size() == 1);
  CHECK(t.ranks[0].multiplicity == 64);
  CHECK(busy(t.ranks[0], CommKind::tp) > Time::zero());
  CHECK(busy(t.ranks[0], CommKind::dp) > Time::zero());
  CHECK(last_end(t.ranks[0]) > busy(t.ranks[0], CommKind::tp));
}

namespace {

stepsim::Scenario gpt_all_ranks_pipeline() {
  auto s = gpt(2, 2, 4);
  s.parallel.pp = 2;
  s.simulation.ranks = stepsim::RankMode::all;
  return s;
}

stepsim::engine::Program gpu_program(const stepsim::Scenario& s) {
  const stepsim::hardware::GpuModel gpu(s.cluster.gpu, s.training.precision);
  return sp::build_program(s, stepsim::workload::build_work(s), gpu);
}

int stage_of(const stepsim::Scenario& s, const stepsim::engine::RankProgram& rank) {
  return sp::coord_of(s.parallel, rank.rank).pp;
}

}  // namespace

TEST_CASE("all-ranks mode gives the ranks of a pipeline stage one op list and each its own calls") {
  const auto s = gpt_all_ranks_pipeline();
  const stepsim::engine::Program program = gpu_program(s);
  REQUIRE(program.ranks.size() == 8);
  for (const auto& a : program.ranks) {
    for (const auto& b : program.ranks) {
      CHECK((a.list == b.list) == (stage_of(s, a) == stage_of(s, b)));
    }
  }
  // Ranks 0 and 2 of stage 0 sit in different TP groups: the same ops, other communicators.
  REQUIRE(program.ranks[0].calls.size() == program.ranks[2].calls.size());
  bool other_group = false;
  for (std::size_t c = 0; c < program.ranks[0].calls.size(); ++c) {
    other_group = other_group || program.ranks[0].calls[c].group != program.ranks[2].calls[c].group;
  }
  CHECK(other_group);
}

TEST_CASE("shared op lists run exactly as a copy of the list per rank") {
  const auto s = gpt_all_ranks_pipeline();
  const stepsim::engine::Program shared = gpu_program(s);
  stepsim::engine::Program copied = gpu_program(s);
  for (auto& rank : copied.ranks) rank.list = std::make_shared<stepsim::engine::OpList>(*rank.list);
  const stepsim::Timeline a = stepsim::engine::run(shared);
  const stepsim::Timeline b = stepsim::engine::run(copied);
  REQUIRE(a.ranks.size() == b.ranks.size());
  for (std::size_t r = 0; r < a.ranks.size(); ++r) {
    const auto& x = a.ranks[r].intervals;
    const auto& y = b.ranks[r].intervals;
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      CHECK(x[i].start == y[i].start);
      CHECK(x[i].end == y[i].end);
      CHECK(x[i].name == y[i].name);
      CHECK(x[i].group == y[i].group);
      CHECK(x[i].waited == y[i].waited);
    }
  }
}
