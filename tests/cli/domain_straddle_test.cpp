// Groups of one kind placed differently over NVLink domains (a TP group of 16 across the
// boundary of two 72-GPU racks, a DP group with one member alone on a partial rack, a
// pipeline link between racks): representative mode costs each stage's simulated rank as the
// slowest group of its kind in the stage, and gives the step time of all-ranks mode, which
// simulates every group as it is placed, within the 0.5 % the homogeneous jobs of
// fabric_test.cpp keep.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "cli/run_stepsim.hpp"
#include "cli/simulate_support.hpp"

namespace stepsim {
// Named, not anonymous: the tests of this folder compile as one unit.
namespace domain_straddle {

struct Modes {
  Report representative;
  Report all;
};

Modes both(std::vector<std::string> sets) {
  Modes out{test::run("", sets).report, {}};
  sets.push_back(test::set("simulation.ranks", "all"));
  out.all = test::run("", sets).report;
  return out;
}

bool notes_say(const Report& r, const std::string& part) {
  for (const auto& n : r.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

void check_agree(const std::vector<std::string>& sets) {
  const Modes m = both(sets);
  INFO(m.representative.notes.front());
  // The layout does place groups of one kind differently, or there would be nothing to check.
  CHECK(notes_say(m.representative, "are placed differently"));
  CHECK(m.representative.step_time_s == Approx(m.all.step_time_s).epsilon(0.005));
}

// Model layers cut to 4 and one micro-batch of 1 per rank, so that all-ranks mode is quick.
std::vector<std::string> small(int gpus, int gpus_per_node, std::vector<std::string> sets) {
  for (const std::string& s : {test::set("model.layers", "4"), test::set("training.micro_batch", "1"),
                               test::set("training.global_batch", std::to_string(2 * gpus)),
                               test::set("cluster.nodes", std::to_string(gpus / gpus_per_node))})
    sets.push_back(s);
  return sets;
}

const std::string kNvl72 = test::set("cluster", "gb200-nvl72");
// TP splits key/value heads and never replicates them: TP 16 and 32 need that many. The
// default model's 32 heads each with its own key and value head, Llama 3 70B's 64 in 16 groups.
const std::string kKvHeads32 = test::set("model.kv_heads", "32");
const std::string kKvHeads16 = test::set("model.kv_heads", "16");

// TP 16 x DP 9 on two GB200 NVL72 racks: ranks 64 to 79 form the one TP group across the
// racks, whose TP collectives go over the NICs. Representative mode simulated rank 0's TP
// group, inside rack 0, and gave 1.137 s where all-ranks mode gives 1.683 s.
TEST_CASE("representative mode waits for the TP group that straddles two NVL72 racks, as all-ranks mode does") {
  const Modes m = both({kNvl72, kKvHeads32, test::set("cluster.nodes", "36"), test::set("parallel.tp", "16"),
                        test::set("parallel.dp", "9"), test::set("training.global_batch", "144"),
                        test::set("training.micro_batch", "1"), test::set("parallel.sequence_parallel", "true")});
  CHECK(m.representative.step_time_s == Approx(m.all.step_time_s).epsilon(0.005));
  CHECK(m.all.step_time_s > 1.5);
  CHECK(notes_say(m.representative,
                  "tp groups are placed differently: 1 of 9 span 2 NVLink domains, 8 per domain, "
                  "the first [64, 65, 66, 67, 68, 69, 70, ..., 79]"));
}

// Llama 3 70B, TP 16 x FSDP 32 on 512 GB200 GPUs (seven racks and 8 GPUs of an eighth): four
// TP groups straddle racks, and the DP groups of ranks 8 to 15 each have a member alone on the
// eighth rack. Representative mode gave 887.881 ms against all-ranks mode's 1.248 s. This ran
// with TP overlap, which a TP group across racks cannot run (its copies go over NVLink) and
// which is now refused there; without it the notes are the same.
std::vector<std::string> straddling_fsdp() {
  return {kNvl72,
          test::set("model", "llama3-70b"),
          kKvHeads16,
          test::set("cluster.nodes", "128"),
          test::set("parallel.tp", "16"),
          test::set("parallel.dp", "32"),
          test::set("training.micro_batch", "4"),
          test::set("data_parallel.kind", "fsdp"),
          test::set("parallel.sequence_parallel", "true")};
}

TEST_CASE("representative mode waits for straddling TP groups and for DP groups on a partial rack", "[slow]") {
  const Modes m = both(straddling_fsdp());
  CHECK(notes_say(m.representative, "tp groups are placed differently: 4 of 32 span 2 NVLink domains"));
  CHECK(notes_say(m.representative,
                  "dp groups are placed differently: 8 of 16 span 8 NVLink domains, 1 to 5 per "
                  "domain, the first [8, 24, 40, 56, 72, 88, 104, ..., 504]"));
}

// Without TP overlap the straddling TP groups' collectives cross racks through the NICs, and
// representative mode gave 1.950 s against all-ranks mode's 1.992 s (2.1 % short): its rank,
// costed as the TP group of ranks 64 to 79 and as the DP group of ranks 8, 24, ..., 504 (one
// member alone on the eighth rack), shared its NIC between the TP collectives and that DP
// group's, and missed that ranks 64 to 71 of the same TP group have DP groups of 4 and 5 per
// rack, whose AllGathers take their NICs nearly whole for their first 0.86 ms: the TP
// AllGather beside the prefetched FSDP AllGather took 3.552 ms, 3.777 ms in all-ranks mode.
// It now loads those members' NICs too, beside a stand-in for their DP group.
TEST_CASE("representative mode gives all-ranks mode's step with straddling TP groups without TP overlap", "[slow]") {
  const Modes m = both(straddling_fsdp());
  CHECK(m.representative.step_time_s == Approx(m.all.step_time_s).epsilon(0.005));
}

// The same on a smaller job: TP 8 x FSDP 28 on 56 GB200 trays in NVLink domains of 20 (eleven
// and 4 GPUs of a twelfth). The TP group of ranks 16 to 23 straddles domains 0 and 1; the DP
// groups of ranks 20 to 23 have a member alone on the twelfth domain, those of ranks 16 to 19
// hold 2 or 3 members per domain, and their AllGathers share those ranks' NICs with the TP
// group's. Representative mode, which loaded only its own NIC, costed as the former, gave
// 238.643 ms against all-ranks mode's 241.270 ms (1.1 % short).
TEST_CASE("representative mode loads the NICs of a straddling TP group's members whose DP groups differ") {
  const Modes m = both({kNvl72, test::set("cluster.nvlink_domain", "20"), test::set("cluster.nodes", "56"),
                        test::set("model", "llama3-70b"), test::set("model.layers", "4"), test::set("parallel.tp", "8"),
                        test::set("parallel.dp", "28"), test::set("training.micro_batch", "4"),
                        test::set("training.global_batch", "112"), test::set("data_parallel.kind", "fsdp"),
                        test::set("parallel.sequence_parallel", "true")});
  CHECK(m.representative.step_time_s == Approx(m.all.step_time_s).epsilon(0.005));
  CHECK(notes_say(m.representative, "tp groups are placed differently"));
}

// Every group kind where it straddles: on 8-GPU DGX H100 nodes (TP 6 of a 24-head model, CP 3),
// 72-GPU NVL72 racks (TP 32, CP 16, EP 16, expert TP, pipeline stages of 64 ranks), and the
// same trays as NVL36x2 (36-GPU domains).
TEST_CASE("representative and all-ranks mode agree where groups of one kind straddle NVLink domains", "[slow]") {
  const std::string nvl36 = test::set("cluster.nvlink_domain", "36");
  const std::string qwen = test::set("model", "qwen3-30b-a3b");
  SECTION("TP 6 on DGX H100") {
    check_agree(
        small(48, 8, {test::set("model", "gpt-1.7b"), test::set("parallel.tp", "6"), test::set("parallel.dp", "8")}));
  }
  SECTION("CP 3 on DGX H100") {
    check_agree(small(48, 8,
                      {test::set("parallel.tp", "2"), test::set("parallel.cp", "3"), test::set("parallel.dp", "8"),
                       test::set("model.seq_len", "12288")}));
  }
  SECTION("TP 32 on NVL72") {
    check_agree(small(128, 4, {kNvl72, kKvHeads32, test::set("parallel.tp", "32"), test::set("parallel.dp", "4")}));
  }
  SECTION("CP 16 on NVL72") {
    check_agree(small(128, 4,
                      {kNvl72, test::set("parallel.tp", "4"), test::set("parallel.cp", "16"),
                       test::set("parallel.dp", "2"), test::set("model.seq_len", "32768")}));
  }
  SECTION("CP 4 on NVL36x2") {
    check_agree(small(128, 4,
                      {kNvl72, nvl36, test::set("parallel.tp", "8"), test::set("parallel.cp", "4"),
                       test::set("parallel.dp", "4"), test::set("model.seq_len", "16384")}));
  }
  SECTION("EP 16 on NVL72") {
    check_agree(small(144, 4,
                      {kNvl72, qwen, test::set("parallel.tp", "1"), test::set("parallel.dp", "144"),
                       test::set("parallel.ep", "16")}));
  }
  SECTION("EP 8 with expert TP 2 on NVL36x2") {
    check_agree(small(144, 4,
                      {kNvl72, nvl36, qwen, test::set("parallel.tp", "2"), test::set("parallel.dp", "72"),
                       test::set("parallel.ep", "8"), test::set("parallel.etp", "2"),
                       test::set("parallel.sequence_parallel", "true")}));
  }
  SECTION("HSDP under TP 16 on NVL36x2") {
    check_agree(small(144, 4,
                      {kNvl72, nvl36, kKvHeads32, test::set("parallel.tp", "16"), test::set("parallel.dp", "9"),
                       test::set("data_parallel.kind", "hsdp")}));
  }
  SECTION("pipeline stages of 64 ranks on NVL72") {
    check_agree(small(128, 4,
                      {kNvl72, kKvHeads32, test::set("parallel.tp", "16"), test::set("parallel.dp", "4"),
                       test::set("parallel.pp", "2")}));
  }
  SECTION("DualPipe's mirror links on NVL36x2") {
    check_agree(small(128, 4,
                      {kNvl72, nvl36, kKvHeads32, test::set("parallel.tp", "16"), test::set("parallel.dp", "2"),
                       test::set("parallel.pp", "4"), test::set("parallel.schedule", "dualpipe")}));
  }
}

// Where every group of a kind is placed alike the representative rank's own groups are costed
// and the notes say nothing more: TP 8 tiles a 72-GPU rack, and each DP group holds 9 members
// on each of the two racks.
TEST_CASE("groups placed alike leave representative mode as it was") {
  const Modes m = both(small(144, 4, {kNvl72, test::set("parallel.tp", "8"), test::set("parallel.dp", "18")}));
  CHECK(!notes_say(m.representative, "placed differently"));
  CHECK(m.representative.step_time_s == Approx(m.all.step_time_s).epsilon(0.005));
}

// TP 8 in a GB200 NVL72 rack stays on NVLink whatever leaves its two trays sit under: with
// three trays per leaf, 6 of the 18 TP groups have trays under two leaves, and the note said
// they cross the oversubscribed spine differently, beside "all over NVLink".
TEST_CASE("groups inside one NVLink domain are not said to cross the spine") {
  const Report r = test::run("", small(144, 4,
                                       {kNvl72, test::set("parallel.tp", "8"), test::set("parallel.dp", "18"),
                                        test::set("cluster.inter_node.nodes_per_leaf", "3"),
                                        test::set("cluster.inter_node.oversubscription", "4")}))
                       .report;
  CHECK(notes_say(r, "tp group of rank 0: 8 ranks on 2 node(s), 4 per node in one NVLink domain (all over NVLink)"));
  CHECK(!notes_say(r, "tp groups cross the oversubscribed spine"));
}

// The same for leaf switches under an oversubscribed spine: with three DGX H100 nodes per
// leaf, the TP 16 group of nodes 2 and 3 (and the EP 16 group of ranks 16 to 31) crosses the
// spine while the others stay under one leaf. Representative mode loaded rank 0's leaf as if
// no group crossed: 11.6 % and 18.5 % below all-ranks mode (53.5 vs 60.5 ms, 84.7 vs 103.9 ms).
// It loads every leaf the stage's groups cross, each with the load of the stage's members
// behind it, so the busiest leaf paces the collectives.
TEST_CASE("representative mode loads its leaf uplinks as the busiest leaf's where groups cross the spine unevenly") {
  const std::vector<std::string> spine = {test::set("cluster.inter_node.nodes_per_leaf", "3"),
                                          test::set("cluster.inter_node.oversubscription", "4")};
  SECTION("TP 16 on a rail-optimized fabric") {
    std::vector<std::string> sets =
        small(64, 8, {kKvHeads32, test::set("parallel.tp", "16"), test::set("parallel.dp", "4")});
    sets.insert(sets.end(), spine.begin(), spine.end());
    const Modes m = both(sets);
    CHECK(m.representative.step_time_s == Approx(m.all.step_time_s).epsilon(0.005));
    CHECK(notes_say(m.representative,
                    "tp groups cross the oversubscribed spine differently: 1 of 4 span 2 leaf switches, 8 per "
                    "leaf, the first [16, 17, 18, 19, 20, 21, 22, ..., 31]"));
  }
  SECTION("EP 16 all-to-all on a fat tree") {
    std::vector<std::string> sets =
        small(48, 8,
              {test::set("model", "qwen3-30b-a3b"), test::set("parallel.tp", "1"), test::set("parallel.dp", "48"),
               test::set("parallel.ep", "16"), test::set("cluster.inter_node.topology", "fat-tree")});
    sets.insert(sets.end(), spine.begin(), spine.end());
    const Modes m = both(sets);
    CHECK(m.representative.step_time_s == Approx(m.all.step_time_s).epsilon(0.005));
    CHECK(notes_say(m.representative, "ep groups cross the oversubscribed spine differently: 1 of 3"));
  }
}

// A leaf switch may hold nodes of two pipeline stages: DeepSeek-V3 with PP 8 on 64 DGX H100
// nodes has eight nodes per stage, and with six nodes per leaf, leaf 1 (nodes 6 to 11) holds
// two nodes of stage 0 and four of stage 1, whose EP all-to-alls share its uplinks. Each
// stage's simulated rank loaded its own leaf with its own stage's busiest load, and missed the
// other stage's traffic there: 22.322 s against 24.474 s in all-ranks mode at 4:1 (-9.6 %),
// 37.130 against 42.191 s at 8:1 (-13.6 %), 27.644 against 28.005 s with five nodes per leaf.
// With six nodes per leaf the shared leaves (two nodes of one stage, each sending 6/7 of its
// all-to-all traffic out of the leaf, and four of the next, 4/7) pace both stages, whose
// all-to-alls meet there: the modes place those meetings slightly apart, 26.83 against
// 27.08 s at 4:1, 47.48 against 47.89 s at 8:1, within 1 %.
TEST_CASE("representative mode shares a leaf's uplinks among the pipeline stages behind it", "[slow]") {
  for (const auto& [per_leaf, oversubscription] : {std::pair{"6", "4"}, std::pair{"6", "8"}, std::pair{"5", "4"}}) {
    INFO(per_leaf << " nodes per leaf at " << oversubscription << ":1");
    const std::vector<std::string> sets = {test::set("cluster.inter_node.nodes_per_leaf", per_leaf),
                                           test::set("cluster.inter_node.oversubscription", oversubscription)};
    const Report representative = test::run("deepseek-v3-ep64-512xh100", sets).report;
    std::vector<std::string> all = sets;
    all.push_back(test::set("simulation.ranks", "all"));
    CHECK(representative.step_time_s ==
          Approx(test::run("deepseek-v3-ep64-512xh100", all).report.step_time_s).epsilon(0.01));
  }
}

}  // namespace domain_straddle
}  // namespace stepsim

// The command line refuses the straddling overlap with exit status 2 and the key, where it once
// ran (exit 0) beside a placement note saying 1 of 9 TP groups spans 2 domains.
TEST_CASE("simulate refuses TP overlap on a TP group across two NVL72 racks with exit status 2") {
  const stepsim::testing::Scratch dir("straddle-overlap");
  dir.write("straddle_overlap.json", R"({
    "model": {"preset": "llama3-70b", "kv_heads": 16},
    "cluster": {"preset": "gb200-nvl72"},
    "parallel": {"tp": 16, "dp": 9, "sequence_parallel": true},
    "training": {"framework": "megatron", "global_batch": 18, "micro_batch": 1, "precision": "fp8"},
    "data_parallel": {"kind": "zero1"},
    "tensor_parallel": {"comm_overlap": true} })");
  const stepsim::testing::Run run = dir.run("simulate straddle_overlap.json");
  CHECK(run.status == 2);
  CHECK(run.err.find("stepsim: error: straddle_overlap.json: /tensor_parallel/comm_overlap: needs every TP group "
                     "inside one NVLink domain") == 0);
  CHECK(run.err.find("TP group 4 (ranks 64 to 79) spans NVLink domains 0 (GPUs 0 to 71) and 1 (GPUs 72 to 143)") !=
        std::string::npos);
  CHECK(run.out.empty());
}
