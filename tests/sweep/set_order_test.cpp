// A sweep's point is its --set and --vary assignments given to the scenario loader: a varied
// section and a varied key inside it give the rows `stepsim simulate` gives with the same
// assignments, whichever of the two axes comes first.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"
#include "sweep/point.hpp"

namespace {

using stepsim::sweep::SweepSpec;

// Each point's row against `simulate` on the point's own assignments given section first (the
// order in which a later assignment cannot undo an earlier one), where the axes give the key
// inside the section first.
void check_points(SweepSpec spec) {
  stepsim::sweep::prepare(spec);
  REQUIRE(spec.points == 4);
  std::vector<std::uint64_t> ids;
  for (std::size_t i = 0; i < spec.points; ++i) {
    const stepsim::sweep::PointResult row = stepsim::sweep::run_point(spec, i);
    const std::vector<std::string> sets = {spec.axes[1].key + "=" + row.values[1],
                                           spec.axes[0].key + "=" + row.values[0]};
    INFO(sets[0] << " " << sets[1]);
    const stepsim::Scenario alone = stepsim::io::load_scenario("", sets);
    CHECK(row.id == stepsim::sweep::fnv1a64(alone.resolved_json));
    ids.push_back(row.id);
    REQUIRE(row.report);
    CHECK(row.report->step_time_s == stepsim::simulate(alone).report.step_time_s);
  }
  std::sort(ids.begin(), ids.end());
  CHECK(std::unique(ids.begin(), ids.end()) == ids.end());
}

}  // namespace

TEST_CASE("a varied key inside a varied section gives the rows simulate gives") {
  SweepSpec models;
  models.axes = {{"model.layers", {"2", "4"}}, {"model", {"llama3-8b", "gpt-1.3b"}}};
  check_points(models);
  SweepSpec layouts;
  layouts.axes = {{"parallel.tp", {"2", "4"}}, {"parallel", {R"({"tp":8})", R"({"pp":2})"}}};
  check_points(layouts);
}

// With --gpus the sweep works out each point's dp from its TP, PP and CP degrees: from the ones
// the loader applies, so "parallel.tp=2" given before "parallel={...}" is the point's TP. On 64
// GPUs: TP 2 gives dp 32, TP 4 dp 16 (it took TP 8 from the object and gave dp 8 to both).
TEST_CASE("the dp a sweep derives from --gpus follows the TP the point runs") {
  SweepSpec spec;
  spec.gpus = 64;
  spec.axes = {{"parallel.tp", {"2", "4"}}, {"parallel", {R"({"tp":8})"}}};
  stepsim::sweep::prepare(spec);
  REQUIRE(spec.points == 2);
  for (std::size_t i = 0; i < spec.points; ++i) {
    const stepsim::sweep::PointResult row = stepsim::sweep::run_point(spec, i);
    REQUIRE(row.report);
    const stepsim::Scenario s =
        stepsim::io::load_scenario("", {spec.axes[1].key + "=" + row.values[1], spec.axes[0].key + "=" + row.values[0],
                                        "parallel.dp=" + std::to_string(64 / std::stoi(row.values[0]))});
    CHECK(row.report->step_time_s == stepsim::simulate(s).report.step_time_s);
  }
}

// A varied cluster preset carries the keys the scenario's own cluster section writes, as plan's
// --cluster does: the scenario's own preset as a point is the scenario itself (its 8-GPU
// NVLink domains and slower NVLink were dropped), and another preset is the scenario with the
// preset swapped and the same keys kept.
TEST_CASE("a sweep varying the cluster carries the scenario's own cluster keys to each preset") {
  const std::string text = R"({
    "model": "llama3-8b",
    "cluster": {"preset": "gb200-nvl72", "nvlink_domain": 8, "intra_node": {"bandwidth": "90 GB/s"}},
    "parallel": {"tp": 8, "pp": 1, "dp": 2, "sequence_parallel": true},
    "training": {"framework": "megatron", "global_batch": 2, "micro_batch": 1, "precision": "bf16"},
    "data_parallel": {"kind": "zero1"} })";
  SweepSpec spec;
  spec.scenario = stepsim::io::ScenarioInput{"slow.json", text};
  spec.axes.emplace_back("cluster", std::vector<std::string>{"gb200-nvl72", "gb300-nvl72"});
  stepsim::sweep::prepare(spec);
  REQUIRE(spec.points == 2);
  const stepsim::sweep::PointResult own = stepsim::sweep::run_point(spec, 0);
  INFO(own.reason);
  REQUIRE(own.report);
  CHECK(own.report->step_time_s ==
        stepsim::simulate(stepsim::io::load_scenario_text(text, "slow.json")).report.step_time_s);
  const stepsim::sweep::PointResult other = stepsim::sweep::run_point(spec, 1);
  INFO(other.reason);
  REQUIRE(other.report);
  const stepsim::Scenario swapped = stepsim::io::load_scenario_text(
      text, "slow.json", {"cluster=gb300-nvl72", "cluster.nvlink_domain=8", R"(cluster.intra_node.bandwidth=90 GB/s)"});
  CHECK(other.report->step_time_s == stepsim::simulate(swapped).report.step_time_s);
}

// A varied training.framework gives only the kernel keys the scenario does not give: the point
// that varies it to the file's own framework is the file itself (Transformer Engine's cross
// entropy kept), and the other point keeps it too.
TEST_CASE("a sweep varying training.framework keeps the file's own kernel keys") {
  const std::string text = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr",
    "parallel": { "tp": 1, "pp": 1, "dp": 8 },
    "training": { "framework": "megatron", "global_batch": 16, "micro_batch": 1, "precision": "bf16",
                  "recompute": "none", "cross_entropy": "te" },
    "data_parallel": { "kind": "zero1" } })";
  SweepSpec spec;
  spec.scenario = stepsim::io::ScenarioInput{"off.json", text};
  spec.axes.emplace_back("training.framework", std::vector<std::string>{"megatron", "nemo"});
  stepsim::sweep::prepare(spec);
  REQUIRE(spec.points == 2);
  const stepsim::Scenario file = stepsim::io::load_scenario_text(text, "off.json");
  const stepsim::sweep::PointResult own = stepsim::sweep::run_point(spec, 0);
  INFO(own.reason);
  REQUIRE(own.report);
  CHECK(own.id == stepsim::sweep::fnv1a64(file.resolved_json));
  CHECK(own.report->step_time_s == stepsim::simulate(file).report.step_time_s);
  // NeMo's own cross entropy would be the fused one; the file's te stays.
  std::string nemo_text = text;
  nemo_text.replace(nemo_text.find("\"megatron\""), 10, "\"nemo\"");
  const stepsim::Scenario nemo_file = stepsim::io::load_scenario_text(nemo_text, "nemo.json");
  REQUIRE(nemo_file.training.cross_entropy == stepsim::CrossEntropy::te);
  const stepsim::sweep::PointResult nemo = stepsim::sweep::run_point(spec, 1);
  INFO(nemo.reason);
  REQUIRE(nemo.report);
  CHECK(nemo.id == stepsim::sweep::fnv1a64(nemo_file.resolved_json));
  CHECK(nemo.report->step_time_s == stepsim::simulate(nemo_file).report.step_time_s);
}

// A resolved scenario marks the keys that follow others (cluster.nodes among them), so that a
// sweep of it is the sweep of the scenario it came from: the same points, rows and sweep_id.
// Frozen at 8 nodes, dp 32 would not fit the cluster and the point would be invalid.
TEST_CASE("a sweep of a resolved example is the sweep of the example") {
  SweepSpec named;
  named.scenario = stepsim::io::ScenarioInput{"ddp-1.3b-64xa100", std::nullopt};
  named.axes.emplace_back("parallel.dp", std::vector<std::string>{"32", "64"});
  SweepSpec resolved = named;
  resolved.scenario =
      stepsim::io::ScenarioInput{"r.json", stepsim::io::load_scenario("ddp-1.3b-64xa100").resolved_json};
  stepsim::sweep::prepare(named);
  stepsim::sweep::prepare(resolved);
  CHECK(resolved.sweep_id == named.sweep_id);
  for (std::size_t i = 0; i < 2; ++i) {
    const stepsim::sweep::PointResult a = stepsim::sweep::run_point(named, i);
    const stepsim::sweep::PointResult b = stepsim::sweep::run_point(resolved, i);
    INFO(b.reason);
    REQUIRE(a.report);
    REQUIRE(b.report);
    CHECK(b.id == a.id);
    CHECK(b.report->step_time_s == a.report->step_time_s);
  }
  // A file that gives the cluster's size is another sweep.
  SweepSpec fixed = resolved;
  fixed.scenario.text = stepsim::io::load_scenario("ddp-1.3b-64xa100", {"cluster.nodes=8"}).resolved_json;
  stepsim::sweep::prepare(fixed);
  CHECK(fixed.sweep_id != named.sweep_id);
  CHECK(stepsim::sweep::run_point(fixed, 0).status == stepsim::sweep::Status::invalid);
}
