// The program of an EP rank: four all-to-alls per MoE layer and micro-batch on the ep
// stream, expert gradients in buckets of their own on the expert-dp communicator.
#include <algorithm>

#include <catch2/catch.hpp>

#include "parallelism/mesh.hpp"
#include "parallelism/program_builder.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::CollOp;
using stepsim::CommKind;
using stepsim::engine::OpIndex;

namespace {

stepsim::Scenario moe_scenario() {
  stepsim::Scenario s = spt::small_scenario(1, 16, 1);
  s.model.moe = {8, 2, 4096};
  s.parallel.ep = 4;
  return s;
}

}  // namespace

TEST_CASE("an MoE layer sends its routed tokens by four all-to-alls per micro-batch") {
  const stepsim::Scenario s = moe_scenario();
  const auto work = stepsim::workload::build_work(s);
  const spt::FixedCosts costs;
  const auto p = sp::build_program(s, work, costs);
  std::vector<std::string> names;
  for (OpIndex i : spt::collectives_of(p, CommKind::ep)) {
    const auto& op = p.ranks[0].ops()[i];
    CHECK(p.ranks[0].calls[static_cast<std::size_t>(op.call)].op == CollOp::alltoall);
    CHECK(p.ranks[0].calls[static_cast<std::size_t>(op.call)].size == work.layer.dispatch_message);
    const std::string& name = p.names[op.name];
    if (name.find("L0 ") != std::string::npos) names.push_back(name);
  }
  REQUIRE(names.size() == 4);
  CHECK(names[0].find("L0 dispatch") != std::string::npos);
  CHECK(names[1].find("L0 combine,") != std::string::npos);
  CHECK(names[2].find("L0 combine backward") != std::string::npos);
  CHECK(names[3].find("L0 dispatch backward") != std::string::npos);
  // 2048 tokens · top 2 · hidden 1024 · 2 bytes.
  CHECK(work.layer.dispatch_message.count() == 2048LL * 2 * 1024 * 2);
}

TEST_CASE("EP groups are consecutive ranks and expert gradients go over the ranks holding the same experts") {
  const stepsim::Scenario s = moe_scenario();
  CHECK(sp::expert_group(s.parallel, 6) == sp::RankGroup{4, 1, 4});
  CHECK(sp::expert_data_group(s.parallel, 6) == sp::RankGroup{2, 4, 4});
  const spt::FixedCosts costs;
  const auto p = sp::build_program(s, stepsim::workload::build_work(s), costs);
  std::vector<std::string> groups;
  for (const auto& g : p.groups) groups.push_back(g.name + " " + g.ranks);
  CHECK(std::find(groups.begin(), groups.end(), "ep [0, 1, 2, 3]") != groups.end());
  CHECK(std::find(groups.begin(), groups.end(), "dp experts [0, 4, 8, 12]") != groups.end());
  // Expert buckets are all-reduced there, the dense ones over all 16 DP ranks.
  bool expert_bucket = false;
  for (OpIndex i : spt::collectives_of(p, CommKind::dp)) {
    const std::string& name = p.names[p.ranks[0].ops()[i].name];
    expert_bucket = expert_bucket || name.find("dp experts bucket") != std::string::npos;
  }
  CHECK(expert_bucket);
}
