// What the report explains beyond the step time: every pipeline stage, the compute that
// overlapping communication slows, HFU beside MFU, cost and energy, and preset provenance.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "cli/simulate_support.hpp"
#include "doc_text.hpp"
#include "report/report_io.hpp"

using stepsim::test::run;
using stepsim::test::set;

namespace {

double exposed_total(const stepsim::Report& r) { return r.breakdown_s.exposed_total(); }

bool has_note(const stepsim::Report& r, const std::string& part) {
  for (const auto& n : r.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("Overlap's saving in exposed communication is the step time saved plus the slowdown shown") {
  const auto on = run("ddp-1.3b-64xa100").report;
  const auto off = run("ddp-1.3b-64xa100", {set("data_parallel.overlap_grad_reduce", "false")}).report;
  const double exposed_saved = exposed_total(off) - exposed_total(on);
  const double step_saved = off.step_time_s - on.step_time_s;
  CHECK(exposed_saved > 0.02);
  CHECK(on.compute_slowdown_s > 0.01);
  CHECK(exposed_saved == Approx(step_saved + on.compute_slowdown_s - off.compute_slowdown_s).epsilon(1e-6));
  // docs/report.md works the identity out on this example with the program's own figures.
  const std::string stated = fmt::format("(on `ddp-1.3b-64xa100`: {:.1f} ms = {:.1f} ms + {:.1f} ms, each rounded)",
                                         1e3 * exposed_saved, 1e3 * step_saved, 1e3 * on.compute_slowdown_s);
  INFO(stated);
  CHECK(stepsim::test::doc_one_line("docs/report.md").find(stated) != std::string::npos);
}

TEST_CASE("Every pipeline stage of GPT-3 175B on Selene has its breakdown and memory") {
  const auto r = run("gpt3-175b-selene").report;
  REQUIRE(r.stages.size() == 8);
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    const auto& st = r.stages[i];
    CHECK(st.stage == static_cast<int>(i));
    CHECK(st.breakdown_s.compute > 1.0);
    CHECK(st.memory_bytes.modelled);
    CHECK(st.memory_bytes.peak > 40.0 * 1073741824.0);
    const auto& b = st.breakdown_s;
    CHECK(b.compute + b.exposed_total() + b.bubble + b.optimizer + b.other == Approx(r.step_time_s).epsilon(1e-9));
  }
  CHECK(has_note(r, "has the largest bubble"));
  CHECK(has_note(r, "LM head and the loss"));
  std::ostringstream table;
  stepsim::report::write_table(r, table);
  CHECK(table.str().find("  stage 7 ") != std::string::npos);
}

// Under 1F1B the last stage's optimizer step ends 134 ms before the step does (stage 0 still
// runs its last backward): that wait on another stage is the pipeline's drain, a bubble in the
// stage's breakdown and a bubble marker in its timeline, not `other`.
TEST_CASE("The last stage's wait for the step to end is bubble, in its breakdown and its timeline") {
  const auto r = run("default", {set("parallel.pp", "4"), set("parallel.dp", "2")});
  const auto window = stepsim::report::report_window(r.timeline);
  REQUIRE(r.report.stages.size() == 4);
  REQUIRE(r.timeline.ranks.size() == 4);
  const auto& last = r.timeline.ranks.back();
  const stepsim::Time done = stepsim::report::last_activity(last, window);
  const double drain = static_cast<double>((window.end - done).ps()) / 1e12;
  REQUIRE(drain > 0.1);
  bool marker = false;
  for (const auto& iv : last.intervals)
    marker = marker || (iv.activity == stepsim::Activity::bubble && iv.start == done && iv.end == window.end);
  CHECK(marker);
  const auto& b = r.report.stages.back().breakdown_s;
  CHECK(b.other < 1e-3);
  CHECK(b.bubble > drain);
  CHECK(b.compute + b.exposed_total() + b.bubble + b.optimizer + b.other == Approx(r.report.step_time_s).epsilon(1e-9));
}

// "memory per GPU" is the memory in use of the largest stage (238.68 GiB under GPipe at pp 4:
// every micro-batch's activations live at once); the stage table's memory column is the same
// quantity per stage, so its largest cell is that figure, not the 224.6 GiB of live tensors.
TEST_CASE("The stage table's memory is the memory in use that memory per GPU gives for the largest stage") {
  const auto r =
      run("default", {set("parallel.pp", "4"), set("parallel.dp", "2"), set("parallel.schedule", "gpipe")}).report;
  REQUIRE(r.stages.size() == 4);
  REQUIRE(r.memory_bytes.peak < r.memory_bytes.device - 1073741824.0);
  std::ostringstream table;
  stepsim::report::write_table(r, table);
  const std::string text = table.str();
  const auto top = text.find("memory per GPU");
  REQUIRE(top != std::string::npos);
  std::istringstream line(text.substr(top + 14));
  double per_gpu = 0;
  line >> per_gpu;
  CHECK(per_gpu == Approx(r.memory_bytes.device / 1073741824.0).margin(0.005));
  double largest = 0;
  std::istringstream rows(text.substr(text.find("pipeline stages")));
  for (std::string row; std::getline(rows, row);) {
    if (!row.starts_with("  stage ")) continue;
    const auto gib = row.rfind(" GiB");
    REQUIRE(gib != std::string::npos);
    largest = std::max(largest, std::stod(row.substr(row.rfind(' ', gib - 1) + 1)));
  }
  CHECK(largest == Approx(per_gpu).margin(0.05));
}

TEST_CASE("HFU counts the recomputed FLOPs and MFU does not") {
  const auto none = run("default").report;
  CHECK(none.throughput.hfu == Approx(none.throughput.mfu));
  const auto full = run("default", {set("training.recompute", "full")}).report;
  CHECK(full.throughput.hfu > 1.25 * full.throughput.mfu);
  CHECK(full.flop_convention.find("causal attention") != std::string::npos);
}

// Korthikanti et al.'s GPT 22B (h 6144, 48 layers, s 2048, V 51,200; GeLU, a 4h MLP, tied
// embeddings) counted per token as model FLOPs count it: 6·(12h²·l + h·V) for the GEMMs and
// 6·s·h·l for causal attention (3 · 2 · s/2 query-key pairs · 2h). A recomputed attention core
// adds its causal forward, 2·s·h·l; a recomputed layer its whole forward, 24h²·l + 2·s·h·l. HFU
// over MFU is their ratio, whatever attention kernel runs (the unfused one executes the full s²
// in the forward, the backward and the recompute alike: none of it is in either count).
TEST_CASE("HFU counts the recompute as model FLOPs are counted, whatever the attention kernel") {
  const double h = 6144, l = 48, s = 2048, v = 51200;
  const double model = 6 * (12 * h * h * l + h * v) + 6 * s * h * l;
  const double core = 2 * s * h * l;
  const double layer = 24 * h * h * l + 2 * s * h * l;
  for (const char* attention : {"unfused", "flash"}) {
    INFO(attention);
    const auto ratio = [&](const char* recompute) {
      const auto r =
          run("korthikanti-22b", {set("training.attention", attention), set("training.recompute", recompute)}).report;
      return r.throughput.hfu / r.throughput.mfu;
    };
    CHECK(ratio("none") == Approx(1.0).epsilon(1e-12));
    CHECK(ratio("selective") == Approx((model + core) / model).epsilon(1e-9));  // 1.008884
    CHECK(ratio("full") == Approx((model + layer) / model).epsilon(1e-9));      // 1.328710
  }
}

// The same with one multi-token prediction depth, whose layer recomputes as the others do and
// whose projection (2h to h, 4h² a token forward) is recomputed with it under full recompute
// (Megatron-Core's MultiTokenPredictionLayer): model FLOPs add the depth's layer, its projection
// and the head again, 6·(12h² + 2h² + h·V) + 6·s·h; selective adds the depth's attention core,
// 2·s·h, full its layer's and projection's forward, 24h² + 2·s·h + 4h².
TEST_CASE("HFU counts a multi-token prediction depth's recompute as a layer's") {
  const double h = 6144, l = 48, s = 2048, v = 51200;
  const double model = 6 * (12 * h * h * (l + 1) + 2 * h * h + 2 * h * v) + 6 * s * h * (l + 1);
  const auto ratio = [&](const char* recompute) {
    const auto r = run("korthikanti-22b", {set("model.mtp_layers", "1"), set("training.recompute", recompute)}).report;
    return r.throughput.hfu / r.throughput.mfu;
  };
  CHECK(ratio("selective") == Approx((model + 2 * s * h * (l + 1)) / model).epsilon(1e-9));  // 1.008739
  CHECK(ratio("full") ==
        Approx((model + (24 * h * h + 2 * s * h) * (l + 1) + 4 * h * h) / model).epsilon(1e-9));  // 1.324416
}

TEST_CASE("Energy comes from the preset's board power and cost only from a given price") {
  const auto r = run("default").report;
  CHECK(r.cost.gpu_power_w == 700);
  CHECK(r.cost.energy_per_step_j == Approx(700.0 * 64 * r.step_time_s));
  CHECK(r.cost.cost_per_step == 0);
  const auto priced = run("default", {set("cluster.gpu_hour_price", "3.6")}).report;
  CHECK(priced.cost.cost_per_step == Approx(3.6 * 64 * priced.step_time_s / 3600));
  CHECK(priced.cost.cost_per_mtoken == Approx(priced.cost.cost_per_step / (128.0 * 8192) * 1e6));
}

TEST_CASE("A scenario on an unfitted hardware preset says so and the fitted A100 and H100 do not") {
  // B200's FP8 GEMM fraction is fitted, the rest of it is not (its preset file).
  const auto b200 = run("default", {set("cluster.gpu", "b200")}).report;
  CHECK(has_note(b200, "GPU b200 is fitted to measurements only in part (one constant fitted"));
  CHECK(has_note(run("default", {set("cluster.gpu", "b300")}).report, "GPU b300 is not fitted to measurements"));
  const auto unfitted = run("default", {set("cluster.gpu.provenance.fitted", "false")}).report;
  CHECK(has_note(unfitted, "GPU h100-sxm5-80gb is not fitted to measurements"));
  const auto partly = run("default", {set("cluster.gpu.provenance.fitted", "partly")}).report;
  CHECK(has_note(partly, "GPU h100-sxm5-80gb is fitted to measurements only in part"));
  CHECK_FALSE(has_note(run("default").report, "GPU h100-sxm5-80gb is not fitted"));
  const auto a100 = run("ddp-1.3b-64xa100").report;
  CHECK_FALSE(has_note(a100, "is not fitted"));
  REQUIRE(a100.provenance.size() == 2);
  CHECK(a100.provenance[0].find("Korthikanti") != std::string::npos);
}

// H100's PCIe Gen5 x16 link: 64 GB/s, of which NCCL's topology counts 48. A 400 Gb/s NIC
// (50 GB/s) is within it; an 800 Gb/s one is not, and the step is the 400 Gb/s step.
TEST_CASE("a NIC beyond its GPU's PCIe link is said to run at the link's rate") {
  const auto ndr = run("default").report;
  CHECK_FALSE(has_note(ndr, "is beyond the PCIe"));
  const auto xdr = run("default", {set("cluster.inter_node.nic_bandwidth", "\"800 Gb/s\"")}).report;
  CHECK(has_note(xdr,
                 "800 Gb/s (100 GB/s) is beyond the PCIe Gen5 x16 link between each h100-sxm5-80gb GPU and its "
                 "NIC (64 GB/s; NCCL's topology counts 48 GB/s of it)"));
  CHECK(xdr.step_time_s == ndr.step_time_s);
  // Inside one NVLink domain no collective crosses a NIC: no note.
  const auto one_node = run("default", {set("cluster.inter_node.nic_bandwidth", "\"800 Gb/s\""),
                                        set("parallel.dp", "1"), set("training.global_batch", "8")})
                            .report;
  CHECK_FALSE(has_note(one_node, "is beyond the PCIe"));
}

TEST_CASE("a zero-bubble schedule's bubble note compares with 1F1B instead of quoting 1F1B's formula as its own") {
  const auto r =
      run("gpt3-175b-selene", {set("parallel.schedule", "zb-h1"), set("parallel.virtual_stages", "1")}).report;
  CHECK(has_note(r, "under zb-h1 it depends on how long the input- and weight-gradient passes take"));
  CHECK(has_note(r, "1F1B would leave on an even pipeline, (pp-1)/m = 7/64 of a stage's compute"));
  CHECK_FALSE(has_note(r, "(pp-1)/(v·m)"));
}

namespace {

// 16 GPT layers of hidden 4096 over 4 stages, a 256-token vocabulary (embedding and head next to
// nothing), links fast enough to leave only the schedule's waits.
constexpr const char* kUnevenPipeline = R"({
  "model": { "name": "toy", "layers": 16, "hidden": 4096, "heads": 32, "kv_heads": 32, "ffn_hidden": 16384,
             "vocab": 256, "seq_len": 4096, "mlp": "gelu", "tied_embeddings": false },
  "cluster": { "preset": "dgx-h100-ndr", "intra_node": { "bandwidth": "100 TB/s", "latency": "0 us" },
               "inter_node": { "nic_bandwidth": "100 Tb/s", "latency": "0 us" } },
  "parallel": { "tp": 1, "pp": 4, "dp": 1, "schedule": "1f1b" },
  "training": { "global_batch": 8, "micro_batch": 1, "precision": "bf16", "recompute": "none" },
  "data_parallel": { "kind": "ddp" } })";

std::string bubble_note_of(const std::vector<std::string>& sets) {
  const auto r = stepsim::simulate(stepsim::io::load_scenario_text(kUnevenPipeline, "pp.json", sets)).report;
  for (const auto& n : r.notes)
    if (n.rfind("pipeline: stage", 0) == 0) return n;
  return "";
}

}  // namespace

// The stage that computes more is blamed on what the simulation put on it: six layers against
// three, one layer against five, not the embedding or the head that its place would suggest.
TEST_CASE("The bubble note blames the layers a stage holds, not its place in the pipeline") {
  const std::string six = bubble_note_of({"parallel.stage_layers=[6,4,3,3]"});
  INFO(six);
  CHECK(six.find("stage 0 computes") != std::string::npos);
  CHECK(six.find("because it holds 6 layers against 3 (") != std::string::npos);
  CHECK(six.find("embedding") == std::string::npos);
  const std::string one = bubble_note_of({"parallel.stage_layers=[1,5,5,5]"});
  INFO(one);
  CHECK(one.find("because it holds 5 layers against 1 (") != std::string::npos);
  CHECK(one.find("LM head") == std::string::npos);
  // Every layer on the first stage: the reference is the stages' mean, not an empty stage's 0 ms.
  const std::string all = bubble_note_of({"parallel.stage_layers=[16,0,0,0]"});
  INFO(all);
  CHECK(all.find("the 0.0 ms of an even pipeline") == std::string::npos);
  CHECK(all.find("because it holds 16 layers against none (") != std::string::npos);
}
