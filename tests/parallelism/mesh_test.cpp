// Rank placement, communicator shapes and the simulated ranks.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "parallelism/mesh.hpp"

namespace sp = stepsim::parallelism;
using stepsim::ParallelSpec;
using stepsim::RankMode;

namespace {

ParallelSpec mesh(int tp, int dp, int pp = 1) {
  ParallelSpec p;
  p.tp = tp;
  p.dp = dp;
  p.pp = pp;
  return p;
}

}  // namespace

TEST_CASE("tensor-parallel ranks are consecutive and data-parallel ranks stride by tp") {
  const ParallelSpec p = mesh(8, 8);
  CHECK(sp::group_ranks(p, 0, sp::Dim::tp) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(sp::group_ranks(p, 9, sp::Dim::dp) == std::vector<int>{1, 9, 17, 25, 33, 41, 49, 57});
  CHECK(sp::coord_of(p, 42).tp == 2);
  CHECK(sp::coord_of(p, 42).dp == 5);
  CHECK(sp::global_rank(p, sp::coord_of(p, 42)) == 42);
}

TEST_CASE("TP 8 x DP 8 on 8-GPU nodes: tp inside one node, dp one rank per node") {
  const ParallelSpec p = mesh(8, 8);
  const auto tp = sp::shape_of(sp::group_ranks(p, 0, sp::Dim::tp), 8);
  CHECK(tp.ranks == 8);
  CHECK(tp.nodes == 1);
  CHECK(tp.ranks_per_node == 8);
  const auto dp = sp::shape_of(sp::group_ranks(p, 0, sp::Dim::dp), 8);
  CHECK(dp.ranks == 8);
  CHECK(dp.nodes == 8);
  CHECK(dp.ranks_per_node == 1);
}

TEST_CASE("TP 2 x DP 8 on 8-GPU nodes: dp spans two nodes with four ranks each") {
  const auto dp = sp::shape_of(sp::group_ranks(mesh(2, 8), 0, sp::Dim::dp), 8);
  CHECK(dp.ranks == 8);
  CHECK(dp.nodes == 2);
  CHECK(dp.ranks_per_node == 4);
}

// GB200 NVL72: 72 GPUs to an NVLink domain. Shapes count domains, not trays of 4.
TEST_CASE("groups on NVL72 racks are shaped over 72-GPU NVLink domains, an uneven spread at its emptiest domain") {
  using stepsim::collectives::GroupShape;
  CHECK(sp::shape_of(sp::RankGroup{0, 1, 64}, 72) == GroupShape{64, 1, 64});
  CHECK(sp::shape_of(sp::RankGroup{0, 1, 144}, 72) == GroupShape{144, 2, 72});
  // 72 GPUs on the first rack and 56 on the second: 56 does not divide 128, so the group's
  // own two domains, each costed with the 56 of the emptiest.
  CHECK(sp::shape_of(sp::RankGroup{0, 1, 128}, 72) == GroupShape{112, 2, 56});
  // Stride 8 over two racks: 9 members on each.
  CHECK(sp::shape_of(sp::RankGroup{0, 8, 18}, 72) == GroupShape{18, 2, 9});
  CHECK(sp::shape_of(std::vector<int>{0, 4, 70, 71}, 72) == GroupShape{4, 1, 4});
}

// A data-parallel group of a prime size on 8-GPU nodes: 127 = 15 nodes of 8 and one of 7.
// Its ring channels leave through at most 7 NICs of every node, so it is costed as its 16
// nodes holding 7 each, not as 127 nodes of one GPU (the largest divisor of a prime is 1).
TEST_CASE("a group whose emptiest node's size does not divide it keeps its own nodes at that size") {
  using stepsim::collectives::GroupShape;
  CHECK(sp::shape_of(sp::RankGroup{0, 1, 127}, 8) == GroupShape{112, 16, 7});
  CHECK(sp::shape_of(sp::RankGroup{0, 1, 23}, 8) == GroupShape{21, 3, 7});
  CHECK(sp::shape_of(sp::RankGroup{0, 1, 22}, 8) == GroupShape{18, 3, 6});
  // 126 = 15 nodes of 8 and one of 6: 6 divides 126, the group's rank count over 21 nodes.
  CHECK(sp::shape_of(sp::RankGroup{0, 1, 126}, 8) == GroupShape{126, 21, 6});
  std::vector<int> ranks(127);
  for (int r = 0; r < 127; ++r) ranks[static_cast<std::size_t>(r)] = r;
  CHECK(sp::shape_of(ranks, 8) == GroupShape{112, 16, 7});
}

TEST_CASE("representative mode simulates one rank for all GPUs when pp is 1") {
  const auto ranks = sp::simulated_ranks(mesh(8, 16), RankMode::representative);
  REQUIRE(ranks.size() == 1);
  CHECK(ranks[0].rank == 0);
  CHECK(ranks[0].multiplicity == 128);
}

TEST_CASE("representative mode simulates one rank per pipeline stage") {
  const auto ranks = sp::simulated_ranks(mesh(2, 2, 4), RankMode::representative);
  REQUIRE(ranks.size() == 4);
  CHECK(ranks[3].rank == 12);
  CHECK(ranks[3].stage == 3);
  CHECK(ranks[3].multiplicity == 4);
  CHECK(ranks[3].label == "rank 12 (stage 3)");
}

TEST_CASE("all-ranks mode simulates every rank once") {
  const auto ranks = sp::simulated_ranks(mesh(2, 2), RankMode::all);
  REQUIRE(ranks.size() == 4);
  CHECK(ranks[3].rank == 3);
  CHECK(ranks[3].multiplicity == 1);
}

TEST_CASE("long rank lists are abbreviated") {
  CHECK(sp::ranks_string({0, 8, 16}) == "[0, 8, 16]");
  std::vector<int> many;
  for (int i = 0; i < 16; ++i) many.push_back(i * 8);
  CHECK(sp::ranks_string(many) == "[0, 8, 16, 24, 32, 40, 48, ..., 120]");
}

TEST_CASE("the placement notes name each communicator's shape") {
  stepsim::Scenario s;
  s.parallel = mesh(8, 4);
  s.cluster.gpus_per_node = 8;
  CHECK(sp::placement_description(s) ==
        "ranks placed TP innermost, then CP, DP, PP outermost (Megatron order tp-cp-ep-dp-pp); "
        "tp group of rank 0: 8 ranks on 1 node(s), 8 per node [0, 1, 2, 3, 4, 5, 6, 7]; "
        "dp group of rank 0: 4 ranks on 4 node(s), 1 per node [0, 8, 16, 24]; "
        "1 simulated rank(s) standing for 32 GPUs");
}

// A partial last node: TP 4 x DP 3 on 8-GPU nodes puts DP ranks 0 and 4 on node 0 and 8 on
// node 1. Every ring channel leaves through node 1's one GPU, so the group is costed as
// three ranks on three nodes.
TEST_CASE("an uneven group is costed with the fewest ranks any of its nodes holds") {
  const auto dp = sp::shape_of(sp::group_of(mesh(4, 3), 0, sp::Dim::dp), 8);
  CHECK(dp.ranks == 3);
  CHECK(dp.nodes == 3);
  CHECK(dp.ranks_per_node == 1);
  // The vector form agrees.
  const auto listed = sp::shape_of(sp::group_ranks(mesh(4, 3), 0, sp::Dim::dp), 8);
  CHECK(listed.nodes == 3);
  CHECK(listed.ranks_per_node == 1);
  // TP 8 on 7-GPU nodes: 7 + 1 for rank 0's group, 6 + 2 for rank 8's (4 nodes of 2).
  const auto tp0 = sp::shape_of(sp::group_of(mesh(8, 8), 0, sp::Dim::tp), 7);
  CHECK(tp0.nodes == 8);
  CHECK(tp0.ranks_per_node == 1);
  const auto tp1 = sp::shape_of(sp::group_of(mesh(8, 8), 8, sp::Dim::tp), 7);
  CHECK(tp1.nodes == 4);
  CHECK(tp1.ranks_per_node == 2);
}

TEST_CASE("groups are arithmetic, so a DP group of 2^31 - 1 ranks is described without listing it") {
  const ParallelSpec p = mesh(1, 2147483647);
  const sp::RankGroup dp = sp::group_of(p, 5, sp::Dim::dp);
  CHECK(dp.first == 0);
  CHECK(dp.stride == 1);
  CHECK(dp.size == 2147483647);
  // 2^31 - 1 ranks fill 2^28 - 1 nodes and leave 7 on the last: 2^28 nodes costed with 7
  // each (7 does not divide the prime), with no overflow.
  const auto shape = sp::shape_of(dp, 8);
  CHECK(shape.nodes == 268435456);
  CHECK(shape.ranks_per_node == 7);
  CHECK(shape.ranks == 1879048192);
  CHECK(sp::group_string(dp) == "[0, 1, 2, 3, 4, 5, 6, ..., 2147483646]");
  CHECK(sp::group_of(mesh(8, 8), 9, sp::Dim::dp).ranks() == sp::group_ranks(mesh(8, 8), 9, sp::Dim::dp));
}

// TP 16 x DP 9 on GB200 NVL72 racks (72 GPUs to a domain): the TP groups start at 0, 16, ...,
// 128, and only ranks 64 to 79 straddle the racks' boundary at 72 (8 on each side), so that
// group is costed as two domains of 8 while the others stay inside one rack.
TEST_CASE("the slowest TP group of a stage on NVL72 racks is the one that straddles two racks") {
  using stepsim::collectives::GroupShape;
  const sp::RankGroup tp = sp::group_of(mesh(16, 9), 0, sp::Dim::tp);
  const sp::Translates t = sp::stage_translates(tp, 144);
  CHECK(t.across == 1);
  CHECK(t.step == 16);
  CHECK(t.repeats == 9);
  const long long by = sp::slowest_translation(tp, t, 72);
  CHECK(by == 64);
  CHECK(sp::shape_of(sp::translated(tp, by), 72) == GroupShape{16, 2, 8});
  CHECK(sp::shape_of(tp, 72) == GroupShape{16, 1, 16});
  // TP 8 tiles a rack exactly, and TP 16 tiles 8-GPU nodes: every group is placed alike and
  // the group itself is kept.
  CHECK(sp::slowest_translation(sp::group_of(mesh(8, 18), 0, sp::Dim::tp),
                                sp::stage_translates(sp::group_of(mesh(8, 18), 0, sp::Dim::tp), 144), 72) == 0);
  CHECK(sp::slowest_translation(tp, t, 8) == 0);
  // On 36-GPU domains (NVL36x2) the groups at 32, 64 and 96 straddle, with 4 | 12, 8 | 8 and
  // 12 | 4 members: those with 4 on one side are the slowest, and the first of them is taken.
  CHECK(sp::slowest_translation(tp, t, 36) == 32);
}

// TP 16 x DP 32 on 128 trays of 4: seven full racks and 8 GPUs on an eighth. The DP groups
// starting at 0 to 7 hold 5, 4, 5, 4, 5, 4, 5 members on the seven racks (costed as 8 domains
// of 4); those starting at 8 to 15 end at 504 to 511, alone on the eighth rack, and are costed
// as 32 domains of 1: every ring channel leaves that rack through its one member's NIC.
TEST_CASE("the slowest DP group of a stage is the one with a member alone on a partial last rack") {
  using stepsim::collectives::GroupShape;
  const sp::RankGroup dp = sp::group_of(mesh(16, 32), 0, sp::Dim::dp);
  const sp::Translates t = sp::stage_translates(dp, 512);
  CHECK(t.across == 16);
  CHECK(t.repeats == 1);
  CHECK(sp::shape_of(dp, 72) == GroupShape{32, 8, 4});
  const long long by = sp::slowest_translation(dp, t, 72);
  CHECK(by == 8);
  CHECK(sp::shape_of(sp::translated(dp, by), 72) == GroupShape{32, 32, 1});
}

// A pipeline of two stages of 64 ranks on 72-GPU racks: ranks r and r + 64 share rack 0 for
// r below 8 and sit on racks 0 and 1 above, so the link of the stages' first ranks (0 and 64)
// is costed as that of ranks 8 and 72.
TEST_CASE("the slowest pipeline link between two stages is one that crosses racks") {
  const sp::RankGroup link{0, 64, 2};
  CHECK(sp::slowest_translation(link, sp::Translates{64, 64, 1}, 72) == 8);
  CHECK(sp::slowest_translation(link, sp::Translates{64, 64, 1}, 8) == 0);
}

TEST_CASE("the placement notes say how many groups of a kind straddle NVLink domains and which") {
  stepsim::Scenario s;
  s.parallel = mesh(16, 9);
  s.cluster.gpus_per_node = 4;
  s.cluster.nvlink_domain = 72;
  const std::string note = sp::placement_description(s);
  CHECK_THAT(note, Catch::Contains("; tp groups are placed differently: 1 of 9 span 2 NVLink domains, 8 per domain, "
                                   "the first [64, 65, 66, 67, 68, 69, 70, ..., 79], which the step waits for: each "
                                   "simulated rank is costed as its stage's slowest;"));
  // The DP groups hold 5 and 4 members on the two racks, or 4 and 5: costed alike, not noted.
  CHECK_THAT(note, !Catch::Contains("dp groups are placed differently"));
  // All-ranks mode simulates each group as it is placed: the note says where they are only.
  s.simulation.ranks = RankMode::all;
  CHECK_THAT(sp::placement_description(s), Catch::Contains("1 of 9 span 2 NVLink domains, 8 per domain, the first "
                                                           "[64, 65, 66, 67, 68, 69, 70, ..., 79]; dp group"));
  // 8-GPU nodes hold whole TP groups of 16 two to a group: nothing to note.
  s.cluster.nvlink_domain = 0;
  s.cluster.gpus_per_node = 8;
  CHECK_THAT(sp::placement_description(s), !Catch::Contains("placed differently"));
}

// DeepSeek-V3's layout on 72-GPU racks: 8 stages of 64 ranks, one EP group of 64 each. Stage k
// starts at rank 64k, 64k mod 72 = 0, 64, 56, 48, 40, 32, 24, 16 for k = 0 to 7: every stage but
// the first crosses into the next rack, holding 8 and 56 (stage 1), 16 and 48, ..., 56 and 8
// (stage 7) on its two racks. The slowest are those with 8 on one rack (stages 1 and 7); the
// note had said "2 of 8 span 2 NVLink domains" where 7 do.
TEST_CASE("the placement note counts every group that spans as many domains as the slowest") {
  stepsim::Scenario s;
  s.parallel.pp = 8;
  s.parallel.dp = 64;
  s.parallel.ep = 64;
  s.cluster.gpus_per_node = 4;
  s.cluster.nvlink_domain = 72;
  CHECK_THAT(
      sp::placement_description(s),
      Catch::Contains("; ep groups are placed differently: 7 of 8 span 2 NVLink domains, the slowest 2 of them 8 "
                      "to 56 per domain, the first [64, 65, 66, 67, 68, 69, 70, ..., 127]"));
}

// Megatron-Core's expert data-parallel group holds world / (pp · ep · etp) ranks
// (parallel_state's expert decoder, order tp-ep-dp-pp with tp = etp): at TP 2, EP 1 and ETP 1
// on 8 GPUs it is all 8, while the dense gradients go over DP's 4; at ETP 2 it is DP's 4 ranks
// [0, 2, 4, 6] again, and the notes need not repeat it.
TEST_CASE("the placement notes name the expert-dp group wherever it is not the dp group, EP 1 included") {
  stepsim::Scenario s;
  s.parallel = mesh(2, 4);
  s.parallel.sequence_parallel = true;
  s.model.moe.experts = 8;
  s.cluster.gpus_per_node = 8;
  CHECK_THAT(sp::placement_description(s),
             Catch::Contains("; expert gradients reduced over the expert-dp group of rank 0: 8 ranks on 1 node(s), 8 "
                             "per node [0, 1, 2, 3, 4, 5, 6, 7]; "));
  s.parallel.etp = 2;
  CHECK_THAT(sp::placement_description(s), !Catch::Contains("expert-dp"));
  CHECK_THAT(sp::placement_description(s),
             Catch::Contains("; etp group of rank 0: 2 ranks on 1 node(s), 2 per node [0, 1]"));
  // EP 4 at ETP 2: one block of 8 ranks, no expert-dp group; under the flex dispatcher the
  // all-to-alls run over that block (Megatron-Core's tp_ep group), the ETP group runs nothing.
  s.parallel.ep = 4;
  CHECK_THAT(sp::placement_description(s), Catch::Contains("every GPU holds its own experts (no expert-dp group)"));
  s.model.moe.dispatcher = stepsim::MoeDispatcher::flex;
  const std::string flex = sp::placement_description(s);
  CHECK_THAT(flex, Catch::Contains("; flex dispatch (ep·etp) group of rank 0: 8 ranks on 1 node(s), 8 per node [0, 1, "
                                   "2, 3, 4, 5, 6, 7]"));
  CHECK_THAT(flex, !Catch::Contains("etp group"));
}
