// `simulate --compare-cluster`: the same job on other clusters, side by side, with cost and
// energy per million tokens from each cluster's price and board power.
#include <fmt/format.h>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/cluster_comparison.hpp"
#include "cli/run_stepsim.hpp"

using stepsim::testing::Scratch;

TEST_CASE("The same job on two clusters shows step time, tokens/s, MFU, energy and cost side by side") {
  Scratch scratch("compare-cluster");
  const auto run = scratch.run(
      "simulate --set model=llama3-70b --set parallel.pp=4 --set training.global_batch=64 --set "
      "training.micro_batch=1 --set training.recompute=selective --set cluster.gpu_hour_price=2 "
      "--compare-cluster dgx-h200-ndr@3.5");
  INFO(run.err);
  REQUIRE(run.status == 0);
  const auto at = run.out.find("same job on other clusters");
  REQUIRE(at != std::string::npos);
  const std::string table = run.out.substr(at);
  for (const char* row : {"dgx-h100-ndr", "dgx-h200-ndr", "step time", "tokens per second", "MFU",
                          "energy per M tokens", "cost per M tokens", "3.5"})
    CHECK(table.find(row) != std::string::npos);
  CHECK(table.find(" kWh") != std::string::npos);
}

// The layout chosen for one cluster is not another's best (with H100's layout B200 shows half
// its step as exposed communication): the comparison says the layout is the same everywhere.
TEST_CASE("A cluster comparison says the layout is held fixed and points to plan for each cluster's own") {
  Scratch scratch("compare-cluster-layout");
  const auto run = scratch.run("simulate --compare-cluster dgx-b200");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("same job on other clusters, with the same layout (TP 8, PP 1, CP 1, DP 8) held fixed") !=
        std::string::npos);
  CHECK(run.out.find("'stepsim plan' finds each cluster's own fastest layout") != std::string::npos);
}

namespace {

// A row's cells, split where two or more spaces stand between them.
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t at = line.find_first_not_of(' ');
  while (at != std::string::npos) {
    auto end = line.find("  ", at);
    cells.push_back(line.substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? end : line.find_first_not_of(' ', end);
  }
  return cells;
}

}  // namespace

// Llama 3 70B under ZeRO-1 at micro-batch 1 needs 126.3 GiB a GPU on H100 and H200 alike: a
// cell of 21 characters, wider than the 20 a column had, ran into its neighbour.
TEST_CASE("A cluster comparison keeps its columns apart when a cell is wider than the usual column") {
  stepsim::Report too_large;
  too_large.memory_bytes.modelled = true;
  too_large.memory_bytes.fits = false;
  too_large.memory_bytes.device = 126.3 * 1073741824.0;
  const std::vector<stepsim::cli::ClusterColumn> columns{{"dgx-h200-ndr", too_large},
                                                         {"a-cluster-name-longer-than-twenty", too_large}};
  std::ostringstream out;
  stepsim::cli::write_cluster_comparison(columns, "TP 8, PP 1, CP 1, DP 8", out);
  std::istringstream lines(out.str());
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line.starts_with("same job")) continue;
    INFO(line);
    const auto cells = cells_of(line);
    // The heading has no label; every other row has its label and one cell per cluster.
    CHECK(cells.size() == (rows == 0 ? 2U : 3U));
    if (line.find("memory per GPU") != std::string::npos) {
      REQUIRE(cells.size() == 3);
      CHECK(cells[1] == "126.3 GiB (too large)");
      CHECK(cells[2] == "126.3 GiB (too large)");
    }
    ++rows;
  }
  CHECK(rows == 9);
}

namespace {

// A column's report with what its cost block holds: board power, tokens/s of 64 GPUs, price.
stepsim::Report priced(double watts, double tokens_per_s, double price) {
  stepsim::Report r;
  r.cost.gpu_power_w = watts;
  r.cost.energy_per_mtoken_kwh = watts * 64 / tokens_per_s * 1e6 / 3.6e6;
  r.cost.gpu_hour_price = price;
  r.cost.cost_per_mtoken = price * 64 / 3600 / tokens_per_s * 1e6;
  return r;
}

}  // namespace

// GPT 1.3B under DDP on 64 GPUs: 878,137 tokens/s on A100 (400 W), 1,870,958 on H100 (700 W),
// 3,181,920 on B200 (1000 W) give 400·64/878137 J a token, 0.00810 kWh per million tokens, and
// 0.00665 and 0.00559; at 0.25, 0.45 and 0.75 a GPU-hour 0.005061, 0.004276 and 0.004190 per
// million. To two decimals the three energies were all "0.01 kWh", to three the costs 0.005,
// 0.004 and 0.004: the table gives them as the report's own table does (3 and 4 significant digits).
TEST_CASE("A cluster comparison keeps the digits that tell small energies and costs apart") {
  const std::vector<stepsim::cli::ClusterColumn> columns{{"dgx-a100-80g-hdr", priced(400, 878137, 0.25)},
                                                         {"dgx-h100-ndr", priced(700, 1870958, 0.45)},
                                                         {"dgx-b200", priced(1000, 3181920, 0.75)}};
  std::ostringstream out;
  stepsim::cli::write_cluster_comparison(columns, "TP 1, PP 1, CP 1, DP 64", out);
  const auto cells = [&](const std::string& label) {
    const auto at = out.str().find("  " + label + "  ");
    REQUIRE(at != std::string::npos);
    const auto found = cells_of(out.str().substr(at, out.str().find('\n', at) - at));
    return std::vector<std::string>(found.begin() + 1, found.end());
  };
  CHECK(cells("energy per M tokens") == std::vector<std::string>{"0.0081 kWh", "0.00665 kWh", "0.00559 kWh"});
  CHECK(cells("cost per M tokens") == std::vector<std::string>{"0.005061", "0.004276", "0.00419"});
}

// The comparison was written to the table alone: `--json` (and so a script or the Python module
// reading it) had the report of the scenario's own cluster and no trace of the other columns.
// Each column is the job run on that cluster with its price, as `simulate --set cluster=NAME
// --set cluster.gpu_hour_price=PRICE` runs it on its own.
TEST_CASE("simulate --json holds the cluster comparison, each column the job as run on that cluster alone") {
  Scratch scratch("compare-cluster-json");
  const auto run = scratch.run(
      "simulate ddp-1.3b-64xa100 --set cluster.gpu_hour_price=0.5 --compare-cluster dgx-b200@1.5 --json report.json");
  const auto alone =
      scratch.run("simulate ddp-1.3b-64xa100 --set cluster=dgx-b200 --set cluster.gpu_hour_price=1.5 --json b200.json");
  INFO(run.err << alone.err);
  REQUIRE(run.status == 0);
  REQUIRE(alone.status == 0);
  const auto json = [&](const char* name) {
    return boost::json::parse(stepsim::testing::slurp(scratch.file(name))).as_object();
  };
  const auto report = json("report.json");
  const auto b200 = json("b200.json");
  const auto& columns = report.at("compare_clusters").as_array();
  REQUIRE(columns.size() == 2);
  const auto& own = columns.at(0).as_object();
  const auto& other = columns.at(1).as_object();
  CHECK(own.at("cluster").as_string() == "dgx-a100-80g-hdr");
  CHECK(other.at("cluster").as_string() == "dgx-b200");
  for (const auto& [column, whole] : {std::pair{&own, &report}, std::pair{&other, &b200}}) {
    CHECK(column->at("step_time_s") == whole->at("step_time_s"));
    CHECK(column->at("throughput") == whole->at("throughput"));
    CHECK(column->at("cost") == whole->at("cost"));
    CHECK(column->at("memory_bytes") == whole->at("memory_bytes"));
    CHECK(column->at("exposed_fraction_of_step") == whole->at("overlap").at("exposed_fraction_of_step"));
  }
  // 1000 W and 1.5 a GPU-hour on 64 GPUs for the B200 column's step.
  const double step = other.at("step_time_s").to_number<double>();
  CHECK(other.at("cost").at("energy_per_step_j").to_number<double>() == Approx(1000.0 * 64 * step));
  CHECK(other.at("cost").at("cost_per_step").to_number<double>() == Approx(1.5 * 64 * step / 3600));
  const auto plain = scratch.run("simulate ddp-1.3b-64xa100 --json plain.json");
  REQUIRE(plain.status == 0);
  CHECK(!json("plain.json").contains("compare_clusters"));
}

TEST_CASE("A cluster comparison naming no cluster is refused naming the flag") {
  Scratch scratch("compare-cluster-bad");
  const auto run = scratch.run("simulate --compare-cluster @3");
  CHECK(run.status == 2);
  CHECK(run.err == "stepsim: error: --compare-cluster: @3: expected NAME or NAME@PRICE, e.g. dgx-b200@5.5\n");
}

// --compare-cluster takes a cluster as plan's --cluster does: a price of 0 (or none after '@')
// is refused alike, naming the flag (it was taken as no price), and a comma-separated list is
// several clusters (it was an unknown preset 'a,b'), the columns those clusters give one by one.
TEST_CASE("simulate --compare-cluster parses a cluster as plan's --cluster does", "[slow]") {
  Scratch scratch("compare-cluster-spec");
  for (const char* spec : {"dgx-b200@0", "dgx-b200@", "dgx-b200@-1", "dgx-b200@1e300"}) {
    const auto compare = scratch.run(std::string("simulate --compare-cluster ") + spec);
    const auto plan = scratch.run(std::string("plan --tokens 1T --gpus 8 --cluster ") + spec);
    CHECK(compare.status == 2);
    CHECK(plan.status == 2);
    const std::string prefix = std::string("stepsim: error: --cluster: ") + spec + ": ";
    REQUIRE(plan.err.starts_with(prefix));
    CHECK(compare.err ==
          std::string("stepsim: error: --compare-cluster: ") + spec + ": " + plan.err.substr(prefix.size()));
  }
  const auto list = scratch.run("simulate --compare-cluster dgx-h200-ndr@3,dgx-b200");
  const auto each = scratch.run("simulate --compare-cluster dgx-h200-ndr@3 --compare-cluster dgx-b200");
  INFO(list.err);
  REQUIRE(list.status == 0);
  REQUIRE(each.status == 0);
  const auto table = [](const std::string& out) { return out.substr(std::min(out.size(), out.find("same job on"))); };
  CHECK(table(list.out) == table(each.out));
  CHECK(table(list.out).find("dgx-b200") != std::string::npos);
  CHECK(table(list.out).find("dgx-h200-ndr") != std::string::npos);
}

TEST_CASE("An unknown cluster to compare is blamed on --compare-cluster, not on a --set") {
  Scratch scratch("compare-cluster-unknown");
  const auto run = scratch.run("simulate --compare-cluster nosuch");
  CHECK(run.status == 2);
  CHECK(run.err.find("stepsim: error: <command line>: --compare-cluster: nosuch: unknown cluster preset 'nosuch'") ==
        0);
}

TEST_CASE("Calibration files and a cluster comparison are refused together") {
  Scratch scratch("compare-cluster-calibrated");
  std::ofstream(scratch.file("h100.calib.json"))
      << R"({ "stepsim_calibration": 1, "provenance": { "gpu": "NVIDIA H100 80GB HBM3" },
              "compute": { "launch_overhead_us": 40 } })";
  const auto run = scratch.run("simulate --calibration " + scratch.file("h100.calib.json").string() +
                               " --compare-cluster dgx-h200-ndr");
  CHECK(run.status == 2);
  CHECK(run.err.find("--compare-cluster: cannot be combined with calibration files") != std::string::npos);
}

TEST_CASE("A trace format without a trace file is refused") {
  Scratch scratch("trace-format-alone");
  const auto run = scratch.run("simulate --trace-format kineto");
  CHECK(run.status == 2);
  CHECK(run.err ==
        "stepsim: error: <command line>: --trace-format: needs --trace FILE: it chooses the format of "
        "that file\n");
}

namespace {

// The cells of a row of the comparison table ("step time": "15.075 s" per column).
std::vector<std::string> comparison_row(const std::string& out, const std::string& label) {
  const auto table = out.find("same job on other clusters");
  if (table == std::string::npos) return {};
  const auto at = out.find("  " + label + "  ", table);
  if (at == std::string::npos) return {};
  // Cells are right-aligned, two spaces or more apart; a cell has single spaces ("0.419 s").
  const std::string line = out.substr(at + label.size() + 2, out.find('\n', at) - at - label.size() - 2);
  std::vector<std::string> cells;
  for (std::size_t i = line.find_first_not_of(' '); i != std::string::npos;) {
    const std::size_t end = line.find("  ", i);
    cells.push_back(line.substr(i, end == std::string::npos ? std::string::npos : end - i));
    i = end == std::string::npos ? end : line.find_first_not_of(' ', end);
  }
  return cells;
}

// The step time the report's table gives, as the comparison writes it ("step time   418.813 ms"
// -> "0.419 s").
std::string own_step(const std::string& out) {
  const auto at = out.find("step time");
  if (at == std::string::npos) return "";
  std::istringstream line(out.substr(at + 9, out.find('\n', at) - at - 9));
  double number = 0;
  std::string unit;
  line >> number >> unit;
  return fmt::format("{:.3f} s", unit == "ms" ? number / 1000 : number);
}

// A GB200 NVL72 job with 8-GPU NVLink domains and a slower NVLink (90 GB/s): on its own cluster
// preset as a column it is the job itself, the domain and the link carried (they were dropped:
// 0.087 s beside the job's 0.419 s), and on GB300 it is the job with the preset swapped and the
// same keys kept.
const char* kSlowLink = R"({
  "model": "llama3-8b",
  "cluster": {"preset": "gb200-nvl72", "nvlink_domain": 8, "intra_node": {"bandwidth": "90 GB/s"}},
  "parallel": {"tp": 8, "pp": 1, "dp": 2, "sequence_parallel": true},
  "training": {"framework": "megatron", "global_batch": 2, "micro_batch": 1, "precision": "bf16"},
  "data_parallel": {"kind": "zero1"}
})";

}  // namespace

TEST_CASE("A job compared against its own cluster gives exactly its own step time, its cluster keys carried") {
  Scratch scratch("compare-cluster-own");
  scratch.write("slow.json", kSlowLink);
  const auto run = scratch.run("simulate slow.json --compare-cluster gb200-nvl72,gb300-nvl72");
  INFO(run.err);
  REQUIRE(run.status == 0);
  const std::vector<std::string> steps = comparison_row(run.out, "step time");
  REQUIRE(steps.size() == 3);
  CHECK(steps[0] == own_step(run.out));
  CHECK(steps[1] == steps[0]);
  const auto swapped = scratch.run(
      "simulate slow.json --set cluster=gb300-nvl72 --set cluster.nvlink_domain=8 "
      "--set 'cluster.intra_node.bandwidth=90 GB/s'");
  INFO(swapped.err);
  REQUIRE(swapped.status == 0);
  CHECK(steps[2] == own_step(swapped.out));
}

// The validation run mb260401-gb200-dsv3-mxfp8 places 64 GPUs of each 72-GPU rack
// (nvlink_domain 64): its own preset as a column once ran 72-GPU domains (28.358 s beside the
// job's 15.075 s), and GB300 19.012 s where the same placement on GB300 gave 14.988 s (14.249 s
// while gb300 carried the H100's FP8 GEMM fraction, 0.525, which MXFP8 runs at). Since
// Transformer Engine's loss backward is costed as it runs: 14.995 s, and 14.908 s on GB300; since
// NCCL's NVLS graphs and channel doubling are search.cc's, 14.996 s and 14.909 s; since the copy
// of the main weights into the model weights reads them too, 14.997 s and 14.910 s; since
// Blackwell's FP8 fractions are fitted to casts that write no transpose (MXFP8 runs at them),
// 15.105 s and 15.017 s.
TEST_CASE("The DeepSeek-V3 GB200 run keeps its 64-GPU domains on its own and on the GB300 preset", "[slow]") {
  Scratch scratch("compare-cluster-dsv3");
  const std::string dsv3 =
      std::string(STEPSIM_SOURCE_DIR) + "/configs/validation/blackwell/mb260401-gb200-dsv3-mxfp8.json";
  const auto run = scratch.run("simulate " + dsv3 + " --compare-cluster gb200-nvl72,gb300-nvl72");
  INFO(run.err);
  REQUIRE(run.status == 0);
  const std::vector<std::string> steps = comparison_row(run.out, "step time");
  REQUIRE(steps.size() == 3);
  CHECK(steps[0] == "15.105 s");
  CHECK(steps[1] == "15.105 s");
  CHECK(steps[2] == "15.017 s");
  const auto swapped = scratch.run("simulate " + dsv3 + " --set cluster=gb300-nvl72 --set cluster.nvlink_domain=64");
  REQUIRE(swapped.status == 0);
  CHECK(own_step(swapped.out) == steps[2]);
}

// A key the scenario's cluster section writes that another preset cannot take (NVLink SHARP on
// an A100, whose NVSwitch has none) is refused naming the key and the file it came from, as plan
// refuses it.
TEST_CASE("A cluster key that the compared cluster cannot take is refused as plan refuses it") {
  Scratch scratch("compare-cluster-refused");
  scratch.write("nvls.json",
                R"({"model": "llama3-8b", "cluster": {"preset": "dgx-h100-ndr", "intra_node": {"nvls": true}},
    "parallel": {"tp": 4, "pp": 1, "dp": 6},
    "training": {"framework": "megatron", "global_batch": 24, "micro_batch": 1, "precision": "bf16"}})");
  const auto run = scratch.run("simulate nvls.json --compare-cluster dgx-a100-80g-hdr");
  CHECK(run.status == 2);
  CHECK(run.err ==
        "stepsim: error: <command line>: --compare-cluster: dgx-a100-80g-hdr: nvls.json: cluster.intra_node.nvls: "
        "NVLink SHARP needs a Hopper or later GPU (a100-sxm4-80gb is ampere)\n");
  CHECK(run.out.empty());
  const auto plan = scratch.run("plan nvls.json --tokens 1B --gpus 24 --cluster dgx-a100-80g-hdr");
  CHECK(plan.status == 2);
  CHECK(plan.err.find("nvls.json: cluster.intra_node.nvls: NVLink SHARP needs a Hopper or later GPU") !=
        std::string::npos);
}

// How many GPUs of an NVL72 rack's NVLink domain the job takes (cluster.nvlink_domain 16: four
// trays) is the rack's: on a DGX B200, whose NVLink domain is its node of 8, it would join two
// DGX nodes by an NVLink they do not have. Compared, swept or planned there, the job runs as
// --set cluster=dgx-b200 runs it alone, its TP 16 across the two nodes' NICs (0.140 s, where
// an NVLink domain of 16 would give 0.097 s); on a GB300 NVL72 rack the 16 carry.
TEST_CASE("A rack's NVLink domain does not carry to a cluster whose NVLink domain is its node") {
  Scratch scratch("compare-cluster-domain");
  scratch.write("d16.json", R"({"model": "gpt-1.3b", "cluster": {"preset": "gb200-nvl72", "nvlink_domain": 16},
    "parallel": {"tp": 16, "pp": 1, "dp": 1},
    "training": {"framework": "megatron", "global_batch": 8, "micro_batch": 1, "precision": "bf16"}})");
  const auto run = scratch.run("simulate d16.json --compare-cluster dgx-b200,gb300-nvl72");
  INFO(run.err);
  REQUIRE(run.status == 0);
  const std::vector<std::string> steps = comparison_row(run.out, "step time");
  REQUIRE(steps.size() == 3);
  const auto alone = [&](const std::string& sets) {
    const auto r = scratch.run("simulate d16.json " + sets);
    REQUIRE(r.status == 0);
    return own_step(r.out);
  };
  CHECK(steps[1] == alone("--set cluster=dgx-b200"));
  CHECK(steps[1] != alone("--set cluster=dgx-b200 --set cluster.nvlink_domain=16"));
  CHECK(steps[2] == alone("--set cluster=gb300-nvl72 --set cluster.nvlink_domain=16"));
  const auto sweep = scratch.run("sweep d16.json --vary cluster=dgx-b200 -o rows.jsonl");
  REQUIRE(sweep.status == 0);
  const auto row = boost::json::parse(stepsim::testing::slurp(scratch.file("rows.jsonl"))).as_object();
  CHECK(fmt::format("{:.3f} s", row.at("step_time_s").to_number<double>()) == steps[1]);
  // plan at TP 16 on DGX B200: the step of two nodes joined by their NICs, slower than with the
  // rack's NVLink domain asked for outright.
  const auto planned = [&](const std::string& sets) {
    const auto r = scratch.run("plan d16.json --tokens 1B --gpus 16 --cluster dgx-b200 --set parallel.tp=16 " + sets +
                               " -o plan.json");
    REQUIRE(r.status == 0);
    const auto rows = boost::json::parse(stepsim::testing::slurp(scratch.file("plan.json"))).as_array();
    REQUIRE(rows.size() == 1);
    return rows.at(0).at("step_time_s").to_number<double>();
  };
  CHECK(planned("") > 1.2 * planned("--set cluster.nvlink_domain=16"));
}

// The --set cluster keys are the scenario's own cluster's too: carried to each compared preset
// as plan carries them, but the price, which is the scenario's own cluster's.
TEST_CASE("A cluster comparison carries the --set cluster keys to each preset, as plan does") {
  Scratch scratch("compare-cluster-own-keys");
  const auto run = scratch.run(
      "simulate --set cluster.gpu_hour_price=2 --set cluster.intra_node.nvls=false --compare-cluster dgx-h200-ndr");
  INFO(run.err);
  REQUIRE(run.status == 0);
  CHECK(comparison_row(run.out, "GPU-hour price") == std::vector<std::string>{"2", "-"});
  const auto h200 = scratch.run(
      "simulate --set cluster=dgx-h200-ndr --set cluster.gpu_hour_price=2 --set cluster.intra_node.nvls=false");
  REQUIRE(h200.status == 0);
  CHECK(comparison_row(run.out, "step time").back() == own_step(h200.out));
}

// The scenario's price is its own cluster's: a cluster compared without @PRICE has no cost (a
// DGX B300 at the A100's 1.8 was the cheapest column by three times), where @PRICE gives one;
// the scenario's own preset as a column keeps the scenario's price, the same cluster. The cost
// of a million tokens by hand: price × GPUs × step time / 3600 / tokens per step × 1e6, the
// default job's 64 GPUs and 128 sequences of 8192 tokens.
TEST_CASE("A cluster compared without @PRICE has no price, not the scenario's") {
  Scratch scratch("compare-cluster-price");
  const auto run = scratch.run(
      "simulate --set cluster.gpu_hour_price=1.8 --compare-cluster dgx-h200-ndr@2.9 --compare-cluster dgx-b300 "
      "--compare-cluster dgx-h100-ndr");
  INFO(run.err);
  REQUIRE(run.status == 0);
  CHECK(comparison_row(run.out, "GPU-hour price") == std::vector<std::string>{"1.8", "2.9", "-", "1.8"});
  const std::vector<std::string> costs = comparison_row(run.out, "cost per M tokens");
  const std::vector<std::string> steps = comparison_row(run.out, "step time");
  REQUIRE(costs.size() == 4);
  REQUIRE(steps.size() == 4);
  CHECK(costs[2] == "-");
  CHECK(costs[3] == costs[0]);
  const double h200_step = std::stod(steps[1]);
  CHECK(std::stod(costs[1]) == Approx(2.9 * 64 * h200_step / 3600 / (128.0 * 8192) * 1e6).margin(0.0011));
  CHECK(run.out.find("  -: no price given for that cluster (--compare-cluster NAME@PRICE); the scenario's price is "
                     "its own cluster's\n") != std::string::npos);
  // A scenario file's price is its cluster's alike.
  scratch.write("a100.json",
                R"({"preset": "default", "cluster": {"preset": "dgx-a100-80g-hdr", "gpu_hour_price": 1.8}})");
  const auto file = scratch.run("simulate a100.json --compare-cluster dgx-b300");
  INFO(file.err);
  REQUIRE(file.status == 0);
  CHECK(comparison_row(file.out, "GPU-hour price") == std::vector<std::string>{"1.8", "-"});
  CHECK(comparison_row(file.out, "cost per M tokens").back() == "-");
}

// A key that the other cluster makes wrong is named, with where its value came from: 5 of a
// DGX H100 node's 8 NICs may fail, not of a GB200 tray's 4 (the message once gave the reason
// alone, and the user could not tell which key it was about).
TEST_CASE("A key the compared cluster refuses is named with where it came from") {
  Scratch scratch("compare-cluster-key");
  const auto run = scratch.run(
      "simulate --set simulation.ranks=all --set 'simulation.variation.failed_nics=[{\"node\": 1, \"count\": 5}]' "
      "--compare-cluster gb200-nvl72");
  CHECK(run.status == 2);
  CHECK(run.err.find("stepsim: error: <command line>: --compare-cluster: gb200-nvl72: --set: "
                     "simulation.variation.failed_nics[0].count: must be from 1 to 3") == 0);
}

// Node 3 of a DGX H100 job is GPUs 24-31; on GB200 trays of 4 GPUs node 3 is GPUs 12-15. A
// slow node or a node's links carried there would be other GPUs: refused, naming the key. On
// a cluster of 8 GPUs a node the same entry means the same GPUs and runs.
TEST_CASE("Variation given by node is refused on a cluster with other GPUs per node, naming the key") {
  Scratch scratch("compare-cluster-nodes");
  const std::string slow_node =
      "simulate --set simulation.ranks=all "
      "--set 'simulation.variation.node_speed=[{\"node\": 3, \"factor\": 0.8}]' ";
  const auto gb200 = scratch.run(slow_node + "--compare-cluster gb200-nvl72");
  CHECK(gb200.status == 2);
  CHECK(gb200.err.find("stepsim: error: <command line>: --compare-cluster: gb200-nvl72: --set: "
                       "simulation.variation.node_speed[0].node: names a node of dgx-h100-ndr (8 GPUs") == 0);
  CHECK(gb200.out.empty());
  const auto links = scratch.run(
      "simulate --set simulation.ranks=all --set "
      "'simulation.variation.links=[{\"rank\": 5, \"link\": \"nic\", \"factor\": 0.5}, {\"node\": 2, \"link\": "
      "\"nvlink\", \"factor\": 0.5}]' --compare-cluster gb200-nvl72");
  CHECK(links.status == 2);
  CHECK(links.err.find("gb200-nvl72: --set: simulation.variation.links[1].node: names a node") != std::string::npos);
  const auto h200 = scratch.run(slow_node + "--compare-cluster dgx-h200-ndr");
  INFO(h200.err);
  CHECK(h200.status == 0);
  // By rank, the GPUs are the same on every cluster.
  const auto by_rank = scratch.run(
      "simulate --set simulation.ranks=all "
      "--set 'simulation.variation.gpu_speed=[{\"rank\": 24, \"factor\": 0.8}]' --compare-cluster gb200-nvl72");
  INFO(by_rank.err);
  CHECK(by_rank.status == 0);
}
