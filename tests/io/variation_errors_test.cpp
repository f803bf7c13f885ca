// simulation.variation read from files and --set, and its bad values refused with the JSON
// pointer of the entry at fault, word for word.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <boost/json.hpp>

#include "io/scenario_loader.hpp"
#include "io/scenario_schema.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;

namespace {

// Llama 3 8B on 64 H100 (8 nodes), TP 8 × DP 8, every rank simulated.
const std::string kScenario = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": { "tp": 8, "dp": 8 },
  "training": { "global_batch": 64, "micro_batch": 1 }, "simulation": { "ranks": "all" } })";

std::string error_with(const std::vector<std::string>& sets, const std::string& text = kScenario) {
  try {
    io::load_scenario_text(text, "scenario.json", sets);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("variation keys are read from the scenario and from --set") {
  const Scenario s = io::load_scenario_text(
      kScenario, "scenario.json",
      {R"(simulation.variation.gpu_speed=[{"rank": 5, "factor": 0.8}])",
       R"(simulation.variation.node_speed=[{"node": 2, "factor": 0.9}])",
       R"(simulation.variation.links=[{"node": 1, "link": "nvlink", "factor": 0.5}, {"rank": 9, "factor": 0.25}])",
       R"(simulation.variation.failed_nics=[{"node": 3, "count": 2}])",
       "simulation.variation.jitter.distribution=lognormal", "simulation.variation.jitter.sigma=0.05",
       "simulation.variation.jitter.seed=42", "simulation.variation.background_traffic=0.2"});
  const VariationSpec& v = s.simulation.variation;
  REQUIRE(v.gpu_speed.size() == 1);
  CHECK(v.gpu_speed[0].rank == 5);
  CHECK(v.gpu_speed[0].factor == 0.8);
  CHECK(v.node_speed[0].node == 2);
  REQUIRE(v.links.size() == 2);
  CHECK(v.links[0].link == LinkKind::nvlink);
  CHECK(v.links[1].rank == 9);
  CHECK_FALSE(v.links[1].node.has_value());
  CHECK(v.links[1].link == LinkKind::nic);
  CHECK(v.failed_nics[0].count == 2);
  CHECK(v.jitter.distribution == JitterKind::lognormal);
  CHECK(v.jitter.seed == 42);
  CHECK(v.background_traffic == 0.2);
  // The resolved scenario writes the lists back.
  const Scenario again = io::load_scenario_text(s.resolved_json, "resolved.json");
  CHECK(again.simulation.variation.links.size() == 2);
  CHECK(again.simulation.variation.gpu_speed[0].factor == 0.8);
}

TEST_CASE("a variation factor below 0.01 or above 10 names its entry") {
  CHECK(error_with({R"(simulation.variation.gpu_speed=[{"rank": 5, "factor": 0.8}, {"rank": 6, "factor": 80}])"}) ==
        "--set: simulation.variation.gpu_speed[1].factor: must be a factor from 0.01 to 10, got 80");
  CHECK(error_with({R"(simulation.variation.node_speed=[{"node": 1, "factor": 0}])"}) ==
        "--set: simulation.variation.node_speed[0].factor: must be a factor from 0.01 to 10, got 0");
  CHECK(error_with({R"(simulation.variation.links=[{"rank": 1, "factor": -0.5}])"}) ==
        "--set: simulation.variation.links[0].factor: must be a factor from 0.01 to 10, got -0.5");
  CHECK(error_with({R"(simulation.variation.gpu_speed=[{"rank": 5, "factor": 1e-30}])"}) ==
        "--set: simulation.variation.gpu_speed[0].factor: must be a factor from 0.01 to 10, got 1e-30");
  CHECK(error_with({R"(simulation.variation.gpu_speed=[{"rank": 5, "factor": 0.01}])"}) == "no error");
}

// Entries for one GPU multiply (as do a GPU's and its node's, and a link's for the GPU and its
// node): six entries of 0.1 would slow a GPU to 1e-6 of its speed, which one factor may not.
TEST_CASE("the factors that apply to one GPU are bounded together, naming the entries") {
  std::string six;
  for (int i = 0; i < 6; ++i) six += std::string(i ? ", " : "") + R"({"rank": 3, "factor": 0.1})";
  CHECK(error_with({"simulation.variation.gpu_speed=[" + six + "]"}) ==
        "--set: simulation.variation.gpu_speed[5].factor: gpu_speed entries 0, 1, 2, 3, 4 and 5 apply to rank 3 and "
        "multiply to 1e-06: a product of factors must be from 0.01 to 10, as one factor must");
  // Rank 3 is on node 0 (8 GPUs a node): its own speed and its node's.
  CHECK(error_with({R"(simulation.variation.gpu_speed=[{"rank": 3, "factor": 0.1}, {"rank": 9, "factor": 0.1}])",
                    R"(simulation.variation.node_speed=[{"node": 0, "factor": 0.05}])"}) ==
        "--set: simulation.variation.gpu_speed[0].factor: gpu_speed entry 0 and node_speed entry 0 apply to rank 3 "
        "and multiply to 0.005: a product of factors must be from 0.01 to 10, as one factor must");
  CHECK(error_with({R"(simulation.variation.node_speed=[{"node": 1, "factor": 5}, {"node": 2, "factor": 5},
                     {"node": 1, "factor": 5}])"}) ==
        "--set: simulation.variation.node_speed[2].factor: node_speed entries 0 and 2 apply to node 1's GPUs and "
        "multiply to 25: a product of factors must be from 0.01 to 10, as one factor must");
  CHECK(error_with({R"(simulation.variation.links=[{"node": 0, "factor": 0.1}, {"rank": 3, "factor": 0.05},
                     {"rank": 3, "link": "nvlink", "factor": 0.05}])"}) ==
        "--set: simulation.variation.links[1].factor: links entries 0 and 1 apply to rank 3's nic link and multiply "
        "to 0.005: a product of factors must be from 0.01 to 10, as one factor must");
  // Within the range together: accepted, and simulated as the product.
  CHECK(error_with({R"(simulation.variation.gpu_speed=[{"rank": 3, "factor": 0.1}, {"rank": 3, "factor": 0.1}])",
                    R"(simulation.variation.links=[{"rank": 3, "factor": 0.1}, {"rank": 3, "link": "nvlink",
                     "factor": 0.1}, {"node": 1, "factor": 0.1}])"}) == "no error");
}

// An entry without its factor would change nothing, one without its GPU or node mean rank or
// node 0: refused where it is read.
TEST_CASE("a variation entry without its factor, GPU or node is refused") {
  CHECK(error_with({R"(simulation.variation.gpu_speed=[{"rank": 3}])"}) ==
        "--set: simulation.variation.gpu_speed[0]: needs \"factor\" (an entry is {\"rank\": R, \"factor\": F})");
  CHECK(error_with({R"(simulation.variation.gpu_speed=[{"factor": 0.5}])"}) ==
        "--set: simulation.variation.gpu_speed[0]: needs \"rank\" (an entry is {\"rank\": R, \"factor\": F})");
  CHECK(error_with({R"(simulation.variation.node_speed=[{"node": 1}])"}) ==
        "--set: simulation.variation.node_speed[0]: needs \"factor\" (an entry is {\"node\": N, \"factor\": F})");
  CHECK(error_with({R"(simulation.variation.links=[{"node": 1, "link": "nic"}])"}) ==
        "--set: simulation.variation.links[0]: needs \"factor\" (an entry is {\"rank\": R} or {\"node\": N} with "
        "\"factor\": F)");
  CHECK(error_with({R"(simulation.variation.failed_nics=[{"count": 2}])"}) ==
        "--set: simulation.variation.failed_nics[0]: needs \"node\" (an entry is {\"node\": N, \"count\": C})");
  const std::string in_file = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": { "tp": 8, "dp": 8 },
    "training": { "global_batch": 64, "micro_batch": 1 },
    "simulation": { "ranks": "all", "variation": { "gpu_speed": [{ "rank": 3 }] } } })";
  CHECK(error_with({}, in_file) ==
        "scenario.json: /simulation/variation/gpu_speed/0: needs \"factor\" (an entry is {\"rank\": R, \"factor\": "
        "F})");
}

TEST_CASE("a rank or node the job does not have is refused") {
  CHECK(error_with({R"(simulation.variation.gpu_speed=[{"rank": 64, "factor": 0.8}])"}) ==
        "--set: simulation.variation.gpu_speed[0].rank: must be a rank from 0 to 63 (the job has 64 GPUs), "
        "got 64");
  CHECK(error_with({R"(simulation.variation.node_speed=[{"node": 8, "factor": 0.8}])"}) ==
        "--set: simulation.variation.node_speed[0].node: must be a node from 0 to 7 (the job has 8 nodes), "
        "got 8");
  CHECK(error_with({R"(simulation.variation.links=[{"rank": 1, "node": 0, "factor": 0.5}])"}) ==
        "--set: simulation.variation.links[0]: needs either \"rank\" (one GPU's link) or \"node\" (every "
        "GPU's link of a node), not both");
  CHECK(error_with({R"(simulation.variation.failed_nics=[{"node": 0, "count": 8}])"}) ==
        "--set: simulation.variation.failed_nics[0].count: must be from 1 to 7 (the node has 8 NICs; with "
        "none left the job cannot run), got 8");
  // A value given with --set is named by its key as the user wrote it.
  CHECK(error_with({R"(simulation.variation.links=[{"rank": 1, "link": "pcie", "factor": 0.5}])"}) ==
        "--set: simulation.variation.links[0].link: unknown value 'pcie' (expected one of nic, nvlink)");
}

// A link entry names one GPU ("rank") or a node ("node"): each other case has its own
// message, a rank or node out of range is refused as one, and the resolved scenario writes
// back what was given and nothing of the key left out.
TEST_CASE("a link entry gives exactly one of rank and node, and is written back as given") {
  CHECK(error_with({R"(simulation.variation.links=[{"link": "nic", "factor": 0.5}])"}) ==
        "--set: simulation.variation.links[0]: needs \"rank\" (one GPU's link) or \"node\" (every GPU's link of a "
        "node)");
  for (const char* rank : {"-1", "-2"})
    CHECK(error_with({std::string(R"(simulation.variation.links=[{"rank": )") + rank + R"(, "factor": 0.5}])"}) ==
          "--set: simulation.variation.links[0].rank: must be a rank from 0 to 63 (the job has 64 GPUs), got " +
              std::string(rank));
  CHECK(error_with({R"(simulation.variation.links=[{"node": -1, "factor": 0.5}])"}) ==
        "--set: simulation.variation.links[0].node: must be a node from 0 to 7 (the job has 8 nodes), got -1");
  CHECK(error_with({R"(simulation.variation.links=[{"rank": -1, "node": 1, "factor": 0.5}])"}) ==
        "--set: simulation.variation.links[0]: needs either \"rank\" (one GPU's link) or \"node\" (every GPU's link "
        "of a node), not both");
  CHECK(error_with({R"(simulation.variation.links=[{"rank": 1, "node": null, "factor": 0.5}])"}) ==
        "--set: simulation.variation.links[0].node: expected an integer, got null");
  const Scenario s = io::load_scenario_text(
      kScenario, "scenario.json",
      {R"(simulation.variation.links=[{"node": 1, "link": "nic", "factor": 0.5}, {"rank": 9, "factor": 0.25}])"});
  const boost::json::value resolved = boost::json::parse(s.resolved_json);
  const auto& links = resolved.at("simulation").at("variation").at("links").as_array();
  REQUIRE(links.size() == 2);
  CHECK(links[0].as_object().contains("node"));
  CHECK_FALSE(links[0].as_object().contains("rank"));
  CHECK(links[1].at("rank").as_int64() == 9);
  CHECK_FALSE(links[1].as_object().contains("node"));
}

TEST_CASE("failed NICs of one node are counted over all its entries, and refused when none is left") {
  // 7 + 1 of node 2's 8 NICs: none left, as "count": 8 alone.
  CHECK(error_with({R"(simulation.variation.failed_nics=[{"node": 2, "count": 7}, {"node": 0, "count": 1},
                     {"node": 2, "count": 1}])"}) ==
        "--set: simulation.variation.failed_nics[2].count: entries 0 and 2 fail 8 NICs of node 2, which has 8 "
        "(with none left the job cannot run)");
  CHECK(error_with({R"(simulation.variation.failed_nics=[{"node": 5, "count": 3}, {"node": 5, "count": 3},
                     {"node": 5, "count": 3}])"}) ==
        "--set: simulation.variation.failed_nics[2].count: entries 0, 1 and 2 fail 9 NICs of node 5, which has "
        "8 (with none left the job cannot run)");
  CHECK(error_with({R"(simulation.variation.failed_nics=[{"node": 2, "count": 4}, {"node": 2, "count": 3}])"}) ==
        "no error");
}

TEST_CASE("representative mode refuses variation that singles out GPUs, but takes jitter") {
  const std::string representative = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr",
    "parallel": { "tp": 8, "dp": 8 }, "training": { "global_batch": 64, "micro_batch": 1 } })";
  CHECK(error_with({R"(simulation.variation.gpu_speed=[{"rank": 5, "factor": 0.8}])"}, representative) ==
        "--set: simulation.variation.gpu_speed: singles out GPUs or nodes, which representative mode (one "
        "simulated rank per pipeline stage) cannot show: use simulation.ranks \"all\"");
  CHECK(error_with({R"(simulation.variation.failed_nics=[{"node": 1}])"}, representative) ==
        "--set: simulation.variation.failed_nics: singles out GPUs or nodes, which representative mode (one "
        "simulated rank per pipeline stage) cannot show: use simulation.ranks \"all\"");
  CHECK(error_with({"simulation.variation.jitter.distribution=normal", "simulation.variation.jitter.sigma=0.05",
                    "simulation.variation.background_traffic=0.3"},
                   representative) == "no error");
  CHECK(error_with({"simulation.variation.jitter.distribution=normal", "simulation.variation.jitter.sigma=0.05",
                    "simulation.variation.jitter.seed=3"},
                   representative) ==
        "--set: simulation.variation.jitter.seed: draws kernels only with simulation.ranks \"all\": "
        "representative mode adds the expected wait for the slowest member of each collective, which needs no seed");
}

TEST_CASE("jitter needs a distribution and a sigma it can draw from") {
  CHECK(error_with({"simulation.variation.jitter.sigma=0.05"}) ==
        "--set: simulation.variation.jitter.sigma: needs a jitter distribution (normal, lognormal or "
        "uniform)");
  CHECK(error_with({"simulation.variation.jitter.distribution=normal"}) ==
        "scenario.json: /simulation/variation/jitter/sigma: must be above 0 for a normal jitter");
  CHECK(error_with({"simulation.variation.jitter.distribution=uniform", "simulation.variation.jitter.sigma=0.6"}) ==
        "--set: simulation.variation.jitter.sigma: must be a relative standard deviation from 0 to 0.577, "
        "got 0.6");
  // A normal of sigma 1 draws 16 % of kernels at no time or less; clipped, its mean is 1.08.
  CHECK(error_with({"simulation.variation.jitter.distribution=normal", "simulation.variation.jitter.sigma=0.31"}) ==
        "--set: simulation.variation.jitter.sigma: must be a relative standard deviation from 0 to 0.3 (a wider "
        "normal would draw kernels of no time or less: use the lognormal for a wider jitter), got 0.31");
  CHECK(error_with({"simulation.variation.jitter.distribution=lognormal", "simulation.variation.jitter.sigma=1"}) ==
        "no error");
  CHECK(error_with({"simulation.variation.jitter.distribution=gaussian"}) ==
        "--set: simulation.variation.jitter.distribution: unknown value 'gaussian' (expected one of none, normal, "
        "lognormal, uniform)");
  CHECK(error_with({"simulation.variation.background_traffic=1"}) ==
        "--set: simulation.variation.background_traffic: must be a fraction from 0 to below 1 of the network "
        "bandwidth, got 1");
}
