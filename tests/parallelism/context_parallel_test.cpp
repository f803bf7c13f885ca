// The program of a context-parallel rank: attention in ring steps with the K/V blocks on the
// cp stream, or one AllGather; gradients reduced over DP × CP.
#include <algorithm>

#include <catch2/catch.hpp>

#include "parallelism/program_builder.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::CollOp;
using stepsim::CommKind;
using stepsim::engine::OpIndex;
using stepsim::engine::Program;

namespace {

struct Built {
  stepsim::workload::ModelWork work;
  Program program;
};

Built build(const stepsim::Scenario& s) {
  const spt::FixedCosts costs;
  Built b{stepsim::workload::build_work(s), {}};
  b.program = sp::build_program(s, b.work, costs);
  return b;
}

// The cp collectives of rank 0 whose name contains `what`, as (op, size in bytes).
std::vector<std::pair<CollOp, long long>> cp_calls(const Program& p, const std::string& what) {
  std::vector<std::pair<CollOp, long long>> out;
  for (OpIndex i : spt::collectives_of(p, CommKind::cp)) {
    const auto& op = p.ranks[0].ops()[i];
    if (p.names[op.name].find(what) == std::string::npos) continue;
    const auto& call = p.ranks[0].calls[static_cast<std::size_t>(op.call)];
    out.emplace_back(call.op, call.size.count());
  }
  return out;
}

stepsim::Scenario cp_scenario(int cp) {
  stepsim::Scenario s = spt::small_scenario(1, 2, 1);
  s.parallel.cp = cp;
  return s;
}

}  // namespace

TEST_CASE("the CP ring passes cp − 1 K/V blocks in forward and K/V and dK/dV in backward") {
  const Built b = build(cp_scenario(4));
  const long long block = b.work.layer.kv_block.count();
  CHECK(block == 512LL * 2 * 1024 * 2);  // K and V of 2048/4 tokens, 16 heads of 64, bf16
  const auto kv = cp_calls(b.program, "L0 attention K/V ring step");
  const auto dkv = cp_calls(b.program, "L0 attention dK/dV ring step");
  CHECK(kv.size() == 3 + 3);
  CHECK(dkv.size() == 4);
  for (const auto& [op, size] : kv) {
    CHECK(op == CollOp::sendrecv);
    CHECK(size == block);
  }
  // The attention runs in 4 steps; each after the first waits for the block the ring brought.
  const long first = spt::find_op(b.program, "L0 flash attention fwd (step 1/4)");
  const long second = spt::find_op(b.program, "L0 flash attention fwd (step 2/4)");
  const long last = spt::find_op(b.program, "L0 flash attention fwd");
  REQUIRE(first >= 0);
  REQUIRE(second > first);
  REQUIRE(last > second);
  const auto waits = b.program.ranks[0].waits_of(static_cast<OpIndex>(second));
  REQUIRE(waits.size() == 1);
  CHECK(b.program.ranks[0].ops()[waits[0]].kind == stepsim::engine::OpKind::collective);
}

TEST_CASE("the all_gather variant gathers K/V before attention and reduce-scatters dK/dV after its backward") {
  stepsim::Scenario s = cp_scenario(2);
  s.context_parallel.comm = stepsim::CpComm::all_gather;
  const Built b = build(s);
  const long long whole = b.work.layer.kv_block.count() * 2;
  const auto gathers = cp_calls(b.program, "L0 attention K/V,");
  const auto scatters = cp_calls(b.program, "L0 attention dK/dV,");
  REQUIRE(gathers.size() == 2);
  CHECK(gathers[0] == std::pair{CollOp::allgather, whole});
  REQUIRE(scatters.size() == 1);
  CHECK(scatters[0] == std::pair{CollOp::reducescatter, whole});
}

TEST_CASE("gradients of CP ranks are reduced over the dp·cp group and CP sits between TP and DP") {
  stepsim::Scenario s = spt::small_scenario(2, 2, 1);
  s.parallel.cp = 2;
  const Built b = build(s);
  std::vector<std::string> groups;
  for (const auto& g : b.program.groups) groups.push_back(g.name + " " + g.ranks);
  CHECK(std::find(groups.begin(), groups.end(), "tp [0, 1]") != groups.end());
  CHECK(std::find(groups.begin(), groups.end(), "cp [0, 2]") != groups.end());
  CHECK(std::find(groups.begin(), groups.end(), "dp [0, 2, 4, 6]") != groups.end());
}
