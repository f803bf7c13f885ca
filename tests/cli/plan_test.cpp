// `stepsim plan` end to end: NeMo's published Llama 3 70B layout as the yardstick on H100, the
// budget's time, energy and cost against hand arithmetic, every cluster preset, bad input.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <string>
#include <utility>
#include <vector>

#include "cli/run_stepsim.hpp"
#include "cli/simulate_support.hpp"

namespace stepsim {
namespace {

using testing::Run;
using testing::Scratch;
namespace fs = std::filesystem;

const std::string kNemo = std::string(STEPSIM_SOURCE_DIR) + "/configs/validation/nemo2407-llama3-70b-64gpu.json";

boost::json::array plan_rows(const Scratch& dir, const std::string& args) {
  const Run run = dir.run("plan " + args + " -o plan.json");
  INFO(run.err);
  REQUIRE(run.status == 0);
  return boost::json::parse(testing::slurp(dir.file("plan.json"))).as_array();
}

double number(const boost::json::object& row, const char* key) { return row.at(key).to_number<double>(); }

// GPT 1.3B on 8 GPUs with a budget of 1e9 tokens and four layouts a cluster, on `clusters`
// (and any --set): a plan of a second or two.
boost::json::array small_plan(const Scratch& dir, const std::string& clusters) {
  return plan_rows(dir, "--model gpt-1.3b --tokens 1e9 --gpus 8 --max-layouts 4 " + clusters);
}

// A CSV's header and first row, cut at each comma: no cell of plan's rows is quoted (the
// fields are names and numbers).
std::pair<std::vector<std::string>, std::vector<std::string>> header_and_first_row(const std::string& csv) {
  const auto newline = csv.find('\n');
  std::vector<std::string> header, cells;
  for (auto [line, out] : {std::pair{csv.substr(0, newline), &header},
                           std::pair{csv.substr(newline + 1, csv.find('\n', newline + 1) - newline - 1), &cells}}) {
    std::size_t from = 0;
    for (auto comma = line.find(','); comma != std::string::npos; comma = line.find(',', from)) {
      out->push_back(line.substr(from, comma - from));
      from = comma + 1;
    }
    out->push_back(line.substr(from));
  }
  return {header, cells};
}

}  // namespace

// NeMo 24.07's Llama 3 70B recipe (TP 4, PP 4 interleaved over 5 virtual stages, CP 2, FP8,
// TP overlap, distributed optimizer; configs/validation/nemo2407-llama3-70b-64gpu.json) scaled
// to 256 H100 by data parallelism is one of the layouts plan searches: its pick is no slower.
TEST_CASE("on 256 H100 plan's layout for Llama 3 70B is at least as fast as NeMo's published recipe", "[slow]") {
  const Scratch dir("plan-nemo");
  const auto rows = plan_rows(dir, kNemo + " --tokens 1T --gpus 256 --precision bf16,fp8 --cluster dgx-h100-ndr@2.5");
  REQUIRE(rows.size() == 1);
  const auto& row = rows.at(0).as_object();
  REQUIRE(row.at("status").as_string() == "ok");
  const double nemo = test::run(kNemo, {"parallel.dp=8"}).report.step_time_s;
  CHECK(number(row, "step_time_s") <= nemo);
}

// A step of GPT 1.3B on the default job trains 128 sequences of 2048 tokens, 262,144 tokens: 10B
// tokens take ceil(10e9 / 262144) = 38,147 whole steps (38,146.97 of them was the budget once).
TEST_CASE("plan's time to train, energy and cost are the budget at the step's throughput, price and board power") {
  const Scratch dir("plan-budget");
  const auto rows =
      plan_rows(dir, "--model gpt-1.3b --tokens 10B --gpus 8 --cluster dgx-h100-ndr@2.5,dgx-a100-80g-hdr@1.8");
  REQUIRE(rows.size() == 2);
  for (const auto& v : rows) {
    const auto& row = v.as_object();
    REQUIRE(row.at("status").as_string() == "ok");
    const double gpus = number(row, "gpus");
    const double days = 38147 * number(row, "step_time_s") / 86400;
    CHECK(number(row, "train_days") == Approx(days).epsilon(1e-12));
    CHECK(number(row, "cost") == Approx(gpus * number(row, "gpu_hour_price") * days * 24).epsilon(1e-12));
    // Board power: 700 W for the H100 SXM5, 400 W for the A100 SXM4 (datasheets).
    const double watts = row.at("gpu").as_string() == "h100-sxm5-80gb" ? 700 : 400;
    const double mwh = gpus * watts * days * 24 / 1e6;
    CHECK(number(row, "energy_mwh") == Approx(mwh).epsilon(1e-12));
    // The energy is proportional to the step time, so it carries the step time's band as the
    // days and the cost do.
    const double band = number(row, "band_mape");
    CHECK(number(row, "energy_mwh_low") == Approx(mwh * (1 - band)).epsilon(1e-12));
    CHECK(number(row, "energy_mwh_high") == Approx(mwh * (1 + band)).epsilon(1e-12));
    CHECK(number(row, "step_time_high_s") / number(row, "step_time_s") == Approx(1 + number(row, "band_mape")));
    CHECK(number(row, "memory_in_use_gib") <= number(row, "memory_capacity_gib"));
  }
  // The H100 row is faster; it is on the front unless the A100 row is no slower and cheaper.
  const auto& h100 = rows.at(0).as_object();
  const auto& a100 = rows.at(1).as_object();
  CHECK(number(h100, "train_days") < number(a100, "train_days"));
  CHECK(h100.at("pareto").as_bool());
  CHECK(a100.at("pareto").as_bool() == (number(a100, "cost") < number(h100, "cost")));
}

TEST_CASE("plan prints a table per cluster and the Pareto table, with progress on stderr") {
  const Scratch dir("plan-tables");
  const Run run = dir.run("plan --model gpt-1.3b --tokens 10B --gpus 8 --cluster dgx-h100-ndr@2.5 --cluster dgx-b200");
  REQUIRE(run.status == 0);
  for (const char* label :
       {"dgx-h100-ndr: 8 x h100-sxm5-80gb at 2.5 per GPU-hour", "dgx-b200: 8 x b200, no price given", "  layout ",
        "  step time ", "  tokens/s per GPU ", "  MFU ", "  exposed comm ", "  memory headroom ", "  time to train ",
        "  energy ", "  cost ", "- (no price: --cluster NAME@PRICE)",
        "mean absolute step-time error of 16 published runs on "
        "h100-sxm5-80gb (docs/validation.md)",
        "cost against time to train"})
    CHECK(run.out.find(label) != std::string::npos);
  CHECK(run.err.find("stepsim: plan: dgx-h100-ndr, 8 GPUs: ") == 0);
  CHECK(run.err.find("stepsim: plan: dgx-b200, 8 GPUs: ") != std::string::npos);
  // The energy carries the band as the days and the cost do: "E MWh (LOW MWh to HIGH MWh)".
  const auto energy = run.out.find("  energy ");
  REQUIRE(energy != std::string::npos);
  const std::string line = run.out.substr(energy, run.out.find('\n', energy) - energy);
  CHECK(line.find(" MWh to ") != std::string::npos);
  CHECK(line.ends_with(" MWh) (GPU boards at their rated power)"));
}

// 1e9 tokens of GPT 1.3B (262,144 tokens a step) take ceil(1e9 / 262144) = 3,815 steps: on 8
// H100 at about 0.54 s a step that is 0.0238 days and 8 × 700 W × 3,815 steps = 0.00319 MWh, which
// one decimal printed as "0.0 days" and "0.0 MWh"; a million tokens at 0.05 a GPU-hour cost
// 0.05 × 8 / 3600 × step / 262144 × 1e6 = 0.000228, printed "0.000". Small figures keep three digits.
TEST_CASE("plan's tables give a small budget's days, energy and cost per million tokens in significant digits") {
  const Scratch dir("plan-small-figures");
  const auto field = [&](const std::string& file, const char* key) {
    return number(boost::json::parse(testing::slurp(dir.file(file))).as_array().at(0).as_object(), key);
  };
  const std::string plan = "plan --model gpt-1.3b --gpus 8 --max-layouts 4 ";
  const Run budget = dir.run(plan + "--cluster dgx-h100-ndr@2 --tokens 1e9 -o budget.json");
  INFO(budget.err);
  REQUIRE(budget.status == 0);
  const double m = field("budget.json", "band_mape");
  const double days = 3815 * field("budget.json", "step_time_s") / 86400;
  const double mwh = 8 * 700 * days * 86400 / 3.6e9;
  CHECK(budget.out.find(fmt::format("time to train          {:.3g} days ({:.3g} days to {:.3g} days) for 1e+09", days,
                                    days * (1 - m), days * (1 + m))) != std::string::npos);
  CHECK(budget.out.find(fmt::format("energy                 {:.3g} MWh ({:.3g} MWh to {:.3g} MWh)", mwh, mwh * (1 - m),
                                    mwh * (1 + m))) != std::string::npos);
  CHECK(budget.out.find(fmt::format("{:.3g} ({:.3g} to {:.3g})", days, days * (1 - m), days * (1 + m))) !=
        std::string::npos);
  const Run deadline = dir.run(plan + "--cluster dgx-h100-ndr@0.05 --deadline 0.5 -o deadline.json");
  INFO(deadline.err);
  REQUIRE(deadline.status == 0);
  const double per_mtoken = 0.05 * 8 / 3600 * field("deadline.json", "step_time_s") / 262144 * 1e6;
  CHECK(deadline.out.find(fmt::format(" {:.3g}\n", per_mtoken)) != std::string::npos);
  CHECK(deadline.out.find(" 0.000\n") == std::string::npos);
}

// The default scenario is TP 8 without sequence parallelism, which a mixture of experts
// refuses; plan searches the layout, so Mixtral plans from it, with its EP degree. A ZeRO-1
// layout states its bucket size in parameters as Megatron-Core sizes it (the search tries its
// default max(4e7, 1e6·dp), a quarter and four times it), where PyTorch's DDP states MiB.
TEST_CASE("plan searches a mixture of experts from the default scenario and states each kind's bucket size", "[slow]") {
  const Scratch dir("plan-moe");
  const Run run = dir.run(
      "plan --model mixtral-8x7b --tokens 1T --gpus 64 --cluster dgx-h100-ndr@3 --max-layouts 8 --set "
      "data_parallel.kind=zero1");
  INFO(run.err);
  REQUIRE(run.status == 0);
  const auto layout = run.out.find("  layout ");
  REQUIRE(layout != std::string::npos);
  const std::string line = run.out.substr(layout, run.out.find('\n', layout) - layout);
  INFO(line);
  CHECK(line.find(", EP ") != std::string::npos);  // the searched EP degree
  const auto dp_at = line.find(", DP ");
  REQUIRE(dp_at != std::string::npos);
  const long long dp = std::stoll(line.substr(dp_at + 5));
  // The search tries the default, a quarter and four times it.
  const double size = static_cast<double>(std::max(40LL, dp));
  int stated = 0;
  for (double m : {size / 4, size, size * 4})
    stated += line.find(fmt::format("; zero1, bucket {:g} M parameters;", m)) != std::string::npos ? 1 : 0;
  CHECK(stated == 1);
  const Run ddp = dir.run(
      "plan --model gpt-1.3b --tokens 10B --gpus 8 --cluster dgx-h100-ndr --set training.framework=pytorch "
      "--set data_parallel.kind=ddp --set data_parallel.bucket_cap_mb=50");
  REQUIRE(ddp.status == 0);
  CHECK(ddp.out.find("; ddp, bucket 50 MiB;") != std::string::npos);
  CHECK(ddp.out.find(", EP ") == std::string::npos);  // a dense model has none
  const Run fsdp =
      dir.run("plan --model gpt-1.3b --tokens 10B --gpus 8 --cluster dgx-h100-ndr --set data_parallel.kind=fsdp");
  REQUIRE(fsdp.status == 0);
  CHECK(fsdp.out.find("; fsdp; TP overlap") != std::string::npos);
  // The rows' bucket_parameters: ZeRO-1's at DP 8 or less, whose default is 4e7, is that, a
  // quarter or four times it; PyTorch DDP's and FSDP's rows have none.
  const auto zero1 = plan_rows(dir,
                               "--model gpt-1.3b --tokens 10B --gpus 8 --cluster dgx-h100-ndr --set "
                               "data_parallel.kind=zero1");
  REQUIRE(zero1.size() == 1);
  const auto& row = zero1.front().as_object();
  REQUIRE(row.at("bucket_parameters").is_int64());
  const std::int64_t n = row.at("bucket_parameters").as_int64();
  CHECK((n == 10'000'000 || n == 40'000'000 || n == 160'000'000));
  for (const char* kind : {"ddp --set training.framework=pytorch", "fsdp"}) {
    INFO(kind);
    const auto other = plan_rows(dir, std::string("--model gpt-1.3b --tokens 10B --gpus 8 --cluster dgx-h100-ndr --set "
                                                  "data_parallel.kind=") +
                                          kind);
    REQUIRE(other.size() == 1);
    CHECK(other.front().as_object().at("bucket_parameters").is_null());
  }
}

// data_parallel.bucket_cap_mb is PyTorch DDP's bucket size: a row of another kind has none to
// state (docs/plan.md), whatever the scenario's key holds (25 MiB by default).
TEST_CASE("plan's rows give bucket_cap_mb on PyTorch DDP's rows only, in CSV and JSON alike", "[slow]") {
  const Scratch dir("plan-bucket-cap");
  const std::string base = "--model gpt-1.3b --tokens 10B --gpus 8 --max-layouts 4 --cluster dgx-h100-ndr ";
  const auto ddp = plan_rows(dir, base +
                                      "--set training.framework=pytorch --set data_parallel.kind=ddp --set "
                                      "data_parallel.bucket_cap_mb=50");
  REQUIRE(ddp.size() == 1);
  // A number, as the scenario's key holds it (the rows once gave layout keys as text, "50").
  CHECK(ddp.front().as_object().at("bucket_cap_mb").is_number());
  CHECK(ddp.front().as_object().at("bucket_cap_mb").to_number<double>() == 50);
  for (const char* kind : {"fsdp", "zero1", "hsdp", "ddp --set training.framework=megatron"}) {
    INFO(kind);
    const auto rows = plan_rows(dir, base + "--set data_parallel.kind=" + kind);
    REQUIRE(rows.size() == 1);
    REQUIRE(rows.front().at("status").as_string() == "ok");
    CHECK(rows.front().as_object().at("bucket_cap_mb").is_null());
  }
  // The CSV's cell is empty where the JSON has null.
  const Run csv = dir.run("plan " + base + "--set data_parallel.kind=fsdp -o -");
  REQUIRE(csv.status == 0);
  const auto newline = csv.out.find('\n');
  const std::string header = csv.out.substr(0, newline);
  const std::string row = csv.out.substr(newline + 1, csv.out.find('\n', newline + 1) - newline - 1);
  const auto column = std::count(header.begin(), header.begin() + static_cast<long>(header.find("bucket_cap_mb")), ',');
  std::size_t at = 0;
  for (long i = 0; i < column; ++i) at = row.find(',', at) + 1;
  CHECK(row.substr(at, row.find(',', at) - at).empty());
}

// The layout keys of a JSON row are the scenario's values, numbers and true or false as a sweep's
// rows give them (parallel.tp 1, not "1"), and the CSV's cells are their text, as before.
TEST_CASE("plan's JSON rows give layout counts as numbers and flags as true or false, the CSV's cells as text",
          "[slow]") {
  const Scratch dir("plan-layout-types");
  const std::string args =
      "--model gpt-1.3b --tokens 10B --gpus 12,8 --max-layouts 4 --cluster dgx-h100-ndr --set "
      "training.framework=pytorch --set data_parallel.kind=ddp --set data_parallel.bucket_cap_mb=12.5";
  const boost::json::array rows = plan_rows(dir, args);
  REQUIRE(rows.size() == 2);
  const Run csv = dir.run("plan " + args + " -o -");
  REQUIRE(csv.status == 0);
  std::vector<std::vector<std::string>> lines;
  std::size_t from = 0;
  for (auto end = csv.out.find('\n'); end != std::string::npos; from = end + 1, end = csv.out.find('\n', from)) {
    // No cell of these rows is quoted but the reason, which comes last: split at the commas before it.
    const std::string line = csv.out.substr(from, end - from);
    std::vector<std::string>& cells = lines.emplace_back();
    std::size_t at = 0;
    for (auto comma = line.find(','); comma != std::string::npos && cells.size() < 40; comma = line.find(',', at)) {
      cells.push_back(line.substr(at, comma - at));
      at = comma + 1;
    }
  }
  REQUIRE(lines.size() == 3);
  const auto cell = [&](std::size_t row, const std::string& key) {
    const auto column = std::find(lines[0].begin(), lines[0].end(), key);
    REQUIRE(column != lines[0].end());
    return lines[row + 1][static_cast<std::size_t>(column - lines[0].begin())];
  };
  const char* counts[] = {"tp", "pp", "cp", "dp", "micro_batch", "virtual_stages", "ep", "etp"};
  const char* names[] = {"schedule", "dp_kind", "precision", "recompute"};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const boost::json::object& row = rows[i].as_object();
    INFO(row.at("gpus"));
    REQUIRE(row.at("status").as_string() == "ok");
    for (const char* key : counts) {
      INFO(key);
      CHECK(row.at(key).is_int64());
      CHECK(boost::json::serialize(row.at(key)) == cell(i, key));
    }
    for (const char* key : names) {
      INFO(key);
      CHECK(row.at(key).is_string());
      CHECK(row.at(key).as_string() == cell(i, key));
    }
    CHECK(row.at("tp_comm_overlap").is_bool());
    CHECK(boost::json::serialize(row.at("tp_comm_overlap")) == cell(i, "tp_comm_overlap"));
    CHECK(row.at("dp_kind").as_string() == "ddp");
    CHECK(row.at("bucket_cap_mb").is_double());
    CHECK(row.at("bucket_cap_mb").to_number<double>() == 12.5);
    CHECK(cell(i, "bucket_cap_mb") == "12.5");
  }
  // The layout multiplies out to the GPUs: the counts are the layout's, not text that looks like it.
  for (const auto& r : rows) {
    const boost::json::object& row = r.as_object();
    CHECK(row.at("tp").as_int64() * row.at("pp").as_int64() * row.at("cp").as_int64() * row.at("dp").as_int64() ==
          row.at("gpus").as_int64());
  }
}

TEST_CASE("plan finds a layout on every cluster preset", "[slow]") {
  const Scratch dir("plan-presets");
  const auto rows = plan_rows(dir,
                              "--model gpt-1.3b --tokens 10B --gpus 8 --cluster dgx-a100-80g-hdr,dgx-h100-ndr,"
                              "dgx-h200-ndr,dgx-b200,dgx-b300,gb200-nvl72,gb300-nvl72");
  REQUIRE(rows.size() == 7);
  for (const auto& row : rows) {
    INFO(row.at("cluster").as_string());
    CHECK(row.at("status").as_string() == "ok");
    // B300 and GB300 have no published run: their band is every run's, and says so.
    const bool validated = row.at("gpu").as_string() != "b300" && row.at("gpu").as_string() != "gb300";
    CHECK(row.at("band_own_gpu").as_bool() == validated);
  }
}

TEST_CASE("plan refuses what it cannot plan, naming the flag") {
  const Scratch dir("plan-errors");
  const auto err = [&](const std::string& args) {
    const Run run = dir.run("plan --model gpt-1.3b " + args);
    CHECK(run.status == 2);
    return run.err;
  };
  CHECK(err("--gpus 8 --cluster dgx-b200") ==
        "stepsim: error: <command line>: --tokens: expected a token budget (--tokens N) or a deadline (--deadline "
        "DAYS)\n");
  CHECK(err("--tokens lots --gpus 8 --cluster dgx-b200") ==
        "stepsim: error: --tokens: lots: expected a whole number of tokens, at least 1, such as 1T, 300B or 1.5e12 (at "
        "most 1e18)\n");
  CHECK(err("--tokens 1T --gpus 8 --cluster dgx-b200@cheap") ==
        "stepsim: error: --cluster: dgx-b200@cheap: expected a price per GPU-hour above 0 after '@', e.g. "
        "dgx-b200@5.5\n");
  CHECK(
      err("--tokens 1T --gpus 8 --cluster nosuch")
          .starts_with(
              "stepsim: error: --cluster: nosuch: unknown cluster preset 'nosuch' (expected one of dgx-a100-80g-hdr"));
  CHECK(err("--tokens 1T --gpus 8 --cluster dgx-b200 --precision fp4") ==
        "stepsim: error: --precision: fp4: expected bf16, fp16, fp8, tf32, fp32, mxfp8 or nvfp4\n");
  CHECK(err("--tokens 1T --gpus 8 --cluster dgx-b200 --max-layouts -1") ==
        "stepsim: error: --max-layouts: -1: expected a number of layouts from 0 (every one) to 1000000\n");
  CHECK(err("--tokens 1T --gpus 0 --cluster dgx-b200") ==
        "stepsim: error: --gpus: 0: expected GPU counts from 1 to 1048576, e.g. 256, 128,256 or 64:1024:x2\n");
  CHECK(err("--tokens 1T --gpus 8 --cluster dgx-b200 -o plan.txt") ==
        "stepsim: error: -o: plan.txt: expected a file name ending in .csv or .json, or '-', a device or a FIFO for "
        "CSV written through\n");
  CHECK(err("--deadline soon --gpus 8 --cluster dgx-b200") ==
        "stepsim: error: --deadline: soon: expected a number of days above 0 (at most 36500)\n");
  // Every cluster is checked before any search runs; a decimal comma splits a price in two.
  const Run late = dir.run("plan --model gpt-1.3b --tokens 1T --gpus 8 --cluster dgx-h100-ndr@2,5");
  CHECK(late.status == 2);
  CHECK(late.err.find("stepsim: error: --cluster: 5: unknown cluster preset '5'") == 0);
  CHECK(late.err.find("commas separate clusters, and a price's decimal point is '.'") != std::string::npos);
  CHECK(late.err.find("stepsim: plan:") == std::string::npos);  // no search ran
  // The job's own errors are its own, not a cluster's.
  CHECK(err("--tokens 1T --gpus 8 --cluster dgx-b200 --set model=nosuch")
            .starts_with("stepsim: error: --set: model: unknown model preset 'nosuch'"));
  CHECK(err("--tokens 1T --gpus 8 --cluster dgx-b200 --set cluster=dgx-h100-ndr") ==
        "stepsim: error: --set: cluster: plan takes its clusters from --cluster (NAME or NAME@PRICE, repeatable)\n");
  CHECK(err("--tokens 1T --gpus 8 --cluster dgx-b200 --jobs -1")
            .starts_with("stepsim: error: --jobs: -1: expected a whole number of simulations at once"));
  CHECK(err("--tokens 1T --gpus 8 --cluster dgx-b200 --set cluster.nodes=4") ==
        "stepsim: error: --set: cluster.nodes: plan derives each cluster's node count from the GPU count (--gpus)\n");
  CHECK(dir.entries().empty());
}

// plan's numbers are decimal, as every other numeric flag and the scenario's keys take them
// (--set cluster.gpu_hour_price=0x10 is "expected a number"): read with std::stod and
// std::stoll, "0x10" was 16 days or 16 per GPU-hour, "0x1p40" 2^40 tokens and " 8" or "+8" 8 GPUs.
TEST_CASE("plan's deadline, token budget, price and GPU counts are decimal numbers") {
  const Scratch dir("plan-decimal");
  const auto err = [&](const std::string& args) {
    const Run run = dir.run("plan --model gpt-1.3b --cluster dgx-h100-ndr --max-layouts 1 " + args);
    CHECK(run.status == 2);
    CHECK(run.out.empty());
    return run.err;
  };
  const std::string days = ": expected a number of days above 0 (at most 36500)\n";
  CHECK(err("--deadline 0x10 --gpus 8") == "stepsim: error: --deadline: 0x10" + days);
  CHECK(err("--deadline ' 5' --gpus 8") == "stepsim: error: --deadline:  5" + days);
  CHECK(err("--deadline +5 --gpus 8") == "stepsim: error: --deadline: +5" + days);
  const std::string whole =
      ": expected a whole number of tokens, at least 1, such as 1T, 300B or 1.5e12 (at most 1e18)\n";
  CHECK(err("--tokens 0x1p40 --gpus 8") == "stepsim: error: --tokens: 0x1p40" + whole);
  CHECK(err("--tokens +1T --gpus 8") == "stepsim: error: --tokens: +1T" + whole);
  const std::string counts = ": expected GPU counts from 1 to 1048576, e.g. 256, 128,256 or 64:1024:x2\n";
  CHECK(err("--tokens 1T --gpus +8") == "stepsim: error: --gpus: +8" + counts);
  CHECK(err("--tokens 1T --gpus 0x8") == "stepsim: error: --gpus: 0x8" + counts);
  const std::string price = ": expected a price per GPU-hour above 0 after '@', e.g. dgx-b200@5.5\n";
  const Run hex = dir.run("plan --model gpt-1.3b --tokens 1T --gpus 8 --cluster dgx-h100-ndr@0x10");
  CHECK(hex.status == 2);
  CHECK(hex.err == "stepsim: error: --cluster: dgx-h100-ndr@0x10" + price);
  const Run blank = dir.run("simulate --compare-cluster 'dgx-b200@ 5.5'");
  CHECK(blank.status == 2);
  CHECK(blank.err == "stepsim: error: --compare-cluster: dgx-b200@ 5.5" + price);
  // What they still take: decimals with an exponent, and a price with a decimal point.
  const Run fine = dir.run(
      "plan --model gpt-1.3b --tokens 1.5e12 --deadline 14.5 --gpus 8 --max-layouts 1 "
      "--cluster dgx-h100-ndr@2.5 -o rows.json");
  INFO(fine.err);
  CHECK(fine.status == 0);
}

// --set cluster.KEY changes every cluster: an H200 in place of the preset's H100 is planned
// as the H200 (its 141 GB), as 'sweep --best' plans it.
TEST_CASE("plan applies --set cluster keys to each cluster preset") {
  const Scratch dir("plan-cluster-set");
  const boost::json::array rows = small_plan(dir, "--cluster dgx-h100-ndr --set cluster.gpu=h200");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].at("gpu").as_string() == "h200");
  CHECK(number(rows[0].as_object(), "memory_capacity_gib") > 100);
}

// A scenario's cluster section is part of the job: its keys carry to every --cluster preset as
// --set cluster.KEY carries them (the same rows as those --set give), a price given with @PRICE
// replaces its price, and without --cluster its own cluster is the one planned. A GPU of its own
// would replace every cluster's: refused, naming the key.
TEST_CASE("plan carries the scenario's cluster keys to every cluster and plans its own without --cluster", "[slow]") {
  const Scratch dir("plan-scenario-cluster");
  dir.write("job.json", R"({"preset": "default", "model": "gpt-1.3b",
    "cluster": {"preset": "dgx-h100-ndr", "gpu_hour_price": 2.5, "inter_node": {"oversubscription": 4}}})");
  const std::string job = " --tokens 1e9 --gpus 16 --max-layouts 4";
  const boost::json::array file = plan_rows(dir, "job.json --cluster dgx-h100-ndr" + job);
  const boost::json::array set = plan_rows(dir,
                                           "--model gpt-1.3b --cluster dgx-h100-ndr --set cluster.gpu_hour_price=2.5 "
                                           "--set cluster.inter_node.oversubscription=4" +
                                               job);
  const boost::json::array own = plan_rows(dir, "job.json" + job);
  const boost::json::array plain = plan_rows(dir, "--model gpt-1.3b --cluster dgx-h100-ndr" + job);
  for (const auto* rows : {&file, &set, &own, &plain}) {
    REQUIRE(rows->size() == 1);
    REQUIRE(rows->at(0).at("status").as_string() == "ok");
  }
  for (const auto* rows : {&file, &own}) {
    const auto& row = rows->at(0).as_object();
    CHECK(row.at("cluster").as_string() == "dgx-h100-ndr");
    CHECK(number(row, "gpu_hour_price") == 2.5);
    CHECK(number(row, "step_time_s") == number(set[0].as_object(), "step_time_s"));
    CHECK(number(row, "cost") == number(set[0].as_object(), "cost"));
  }
  // The oversubscribed network is slower than the preset's own.
  CHECK(number(file[0].as_object(), "step_time_s") > number(plain[0].as_object(), "step_time_s"));
  const boost::json::array priced = plan_rows(dir, "job.json --cluster dgx-h100-ndr@3" + job);
  REQUIRE(priced.size() == 1);
  CHECK(number(priced[0].as_object(), "gpu_hour_price") == 3);
  CHECK(number(priced[0].as_object(), "step_time_s") == number(file[0].as_object(), "step_time_s"));
  dir.write("gpu.json", R"({"preset": "default", "cluster": {"preset": "dgx-h100-ndr", "gpu": "h200"}})");
  const Run gpu = dir.run("plan gpu.json --cluster dgx-b200" + job);
  CHECK(gpu.status == 2);
  CHECK(gpu.err ==
        "stepsim: error: gpu.json: cluster.gpu: the scenario's cluster has a GPU of its own (\"h200\"), which would "
        "replace the GPU of every --cluster: plan its cluster alone (without --cluster), or swap every cluster's GPU "
        "with --set cluster.gpu=...\n");
  CHECK(gpu.err.find("stepsim: plan:") == std::string::npos);  // refused before any search
  const boost::json::array h200 = plan_rows(dir, "gpu.json" + job);
  REQUIRE(h200.size() == 1);
  CHECK(h200[0].at("gpu").as_string() == "h200");
}

// --set cluster.gpu_hour_price prices every cluster given without @PRICE, as that @PRICE
// would: the same row, price and cost (by hand: GPUs × price × days × 24), the table says so.
// A cluster given both would leave one price unused, and is refused.
TEST_CASE("plan prices the clusters without @PRICE at --set cluster.gpu_hour_price, and refuses both") {
  const Scratch dir("plan-set-price");
  const boost::json::array set = small_plan(dir, "--cluster dgx-h100-ndr --set cluster.gpu_hour_price=3");
  const boost::json::array at = small_plan(dir, "--cluster dgx-h100-ndr@3");
  REQUIRE(set.size() == 1);
  REQUIRE(at.size() == 1);
  const auto& row = set[0].as_object();
  REQUIRE(row.at("status").as_string() == "ok");
  CHECK(number(row, "gpu_hour_price") == 3);
  CHECK(number(row, "cost") == Approx(8 * 3 * number(row, "train_days") * 24).epsilon(1e-9));
  CHECK(number(row, "cost") == number(at[0].as_object(), "cost"));
  CHECK(row.at("pareto").as_bool());
  const Run table = dir.run(
      "plan --model gpt-1.3b --tokens 1e9 --gpus 8 --max-layouts 4 --cluster dgx-h100-ndr --set "
      "cluster.gpu_hour_price=3");
  REQUIRE(table.status == 0);
  CHECK(table.out.find("dgx-h100-ndr: 8 x h100-sxm5-80gb at 3 per GPU-hour") != std::string::npos);
  CHECK(table.out.find("no price") == std::string::npos);
  const Run both = dir.run(
      "plan --model gpt-1.3b --tokens 1e9 --gpus 8 --cluster dgx-a100-80g-hdr --cluster dgx-b200@5 --set "
      "cluster.gpu_hour_price=3");
  CHECK(both.status == 2);
  CHECK(both.err ==
        "stepsim: error: --cluster: dgx-b200@5: gives a price per GPU-hour and --set cluster.gpu_hour_price=3 gives "
        "another: give each cluster's price once, with @PRICE or with --set cluster.gpu_hour_price for every cluster "
        "without @PRICE\n");
  CHECK(both.err.find("stepsim: plan:") == std::string::npos);  // refused before any search
}

// A price past cluster.gpu_hour_price's range is refused as the --cluster it came from.
TEST_CASE("plan refuses a price per GPU-hour out of range as the --cluster that gives it") {
  const Scratch dir("plan-price-range");
  const Run run = dir.run("plan --model gpt-1.3b --tokens 1T --gpus 8 --cluster dgx-h100-ndr@1e300");
  CHECK(run.status == 2);
  CHECK(run.err ==
        "stepsim: error: --cluster: dgx-h100-ndr@1e300: expected a price per GPU-hour of at most 1000000 after '@' "
        "(cluster.gpu_hour_price's range), got 1e+300\n");
  // The range's end itself is a price.
  const boost::json::array rows = small_plan(dir, "--cluster dgx-h100-ndr@1000000");
  REQUIRE(rows.size() == 1);
  CHECK(number(rows[0].as_object(), "gpu_hour_price") == 1e6);
}

// --precision searches the precisions it lists, which a precision fixed by --set would leave
// unsearched: plan refuses the two together, as sweep --best does.
TEST_CASE("plan refuses --precision beside --set training.precision") {
  const Scratch dir("plan-precision-set");
  const Run run =
      dir.run("plan --gpus 64 --tokens 1T --cluster dgx-b200@5 --set training.precision=fp8 --precision bf16");
  CHECK(run.status == 2);
  CHECK(run.err ==
        "stepsim: error: --precision: bf16: cannot be combined with --set training.precision=fp8, which fixes the "
        "precision that --precision searches: give one of them\n");
  CHECK(dir.entries().empty());
}

// A figure plan does not know is an empty CSV cell (null in JSON), never 0: the price and cost
// of a cluster given without a price, the budget's days, energy and cost without --tokens, the
// energy without the GPU's board power, the deadline's tokens without --deadline. What it
// knows is a number: the same row's step time, and the figures the flags given make known.
TEST_CASE("plan leaves the figures it does not know empty, never 0", "[slow]") {
  const Scratch dir("plan-unknown");
  const auto row_of = [&](const std::string& args) {
    const boost::json::array rows = plan_rows(dir, "--model gpt-1.3b --gpus 8 --max-layouts 4 " + args);
    REQUIRE(rows.size() == 1);
    REQUIRE(rows[0].at("status").as_string() == "ok");
    return rows[0].as_object();
  };
  const auto is_null = [](const boost::json::object& row, std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      INFO(key);
      CHECK(row.at(key).is_null());
    }
  };
  const auto is_number = [](const boost::json::object& row, std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      INFO(key);
      CHECK(row.at(key).is_number());
    }
  };
  // A budget, no price: no cost; no deadline: no tokens by it.
  const auto budget = row_of("--tokens 1e9 --cluster dgx-h100-ndr");
  is_null(budget, {"gpu_hour_price", "cost", "cost_low", "cost_high", "cost_per_mtoken", "deadline_tokens"});
  is_number(budget, {"step_time_s", "train_days", "train_days_low", "train_days_high", "energy_mwh", "energy_mwh_low",
                     "energy_mwh_high"});
  // A deadline alone: no budget to take days, energy or cost for.
  const auto deadline = row_of("--deadline 10 --cluster dgx-h100-ndr@2");
  is_null(deadline, {"train_days", "train_days_low", "train_days_high", "energy_mwh", "energy_mwh_low",
                     "energy_mwh_high", "cost", "cost_low", "cost_high"});
  is_number(deadline, {"gpu_hour_price", "cost_per_mtoken", "deadline_tokens"});
  // A GPU without a board power: no energy.
  const auto unpowered = row_of("--tokens 1e9 --cluster dgx-h100-ndr@2 --set cluster.gpu.board_power_w=0");
  is_null(unpowered, {"energy_mwh", "energy_mwh_low", "energy_mwh_high", "deadline_tokens"});
  is_number(unpowered, {"train_days", "cost"});
  // The CSV: empty cells where the JSON has null.
  const Run csv = dir.run("plan --model gpt-1.3b --gpus 8 --max-layouts 4 --tokens 1e9 --cluster dgx-h100-ndr -o -");
  REQUIRE(csv.status == 0);
  const auto [header, cells] = header_and_first_row(csv.out);
  REQUIRE(header.size() == cells.size());
  for (std::size_t i = 0; i < header.size(); ++i) {
    INFO(header[i]);
    // bucket_parameters is empty where the layout's kind sizes no buckets in parameters, and
    // bucket_cap_mb where PyTorch's DDP does not size them.
    if (header[i] == "bucket_parameters" || header[i] == "bucket_cap_mb") continue;
    const bool unknown = header[i] == "gpu_hour_price" || header[i].starts_with("cost") ||
                         header[i] == "deadline_tokens" || header[i] == "reason";
    CHECK(cells[i].empty() == unknown);
  }
}

// The CSV was cut to six significant digits (deadline_tokens 5.78594e+11 where the JSON of the
// same plan had 5.785936710269238E11, a relative difference up to 5e-6): each figure of the CSV
// reads back as the JSON's number of the same plan run again, to a few units in the last place
// (not every figure of two runs agrees to the last bit), search_s (a wall-clock time) aside.
TEST_CASE("plan's CSV holds every digit of each figure, as its JSON does") {
  const Scratch dir("plan-digits");
  const std::string args =
      "--model gpt-1.3b --gpus 8 --max-layouts 4 --tokens 1e9 --deadline 10 --cluster dgx-h100-ndr@2.5";
  const boost::json::array rows = plan_rows(dir, args);
  REQUIRE(rows.size() == 1);
  const Run csv = dir.run("plan " + args + " -o -");
  REQUIRE(csv.status == 0);
  const auto [header, cells] = header_and_first_row(csv.out);
  REQUIRE(header.size() == cells.size());
  std::size_t figures = 0;
  for (std::size_t i = 0; i < header.size(); ++i) {
    const boost::json::value& v = rows[0].as_object().at(header[i]);
    if (!v.is_double() || header[i] == "search_s") continue;
    INFO(header[i] << ": CSV " << cells[i] << ", JSON " << boost::json::serialize(v));
    CHECK(std::abs(std::strtod(cells[i].c_str(), nullptr) - v.as_double()) <= 1e-14 * std::abs(v.as_double()));
    ++figures;
  }
  CHECK(figures >= 10);
  CHECK(rows[0].as_object().at("deadline_tokens").is_double());
}

// A cluster without a price has no cost to compare: the front is the priced clusters', and
// without any price the fastest alone.
TEST_CASE("plan's Pareto front leaves out clusters without a price unless none has one", "[slow]") {
  const Scratch dir("plan-pareto-price");
  const boost::json::array priced = small_plan(dir, "--cluster dgx-h100-ndr --cluster dgx-a100-80g-hdr@1.8");
  REQUIRE(priced.size() == 2);
  CHECK_FALSE(priced[0].at("pareto").as_bool());  // no price
  CHECK(priced[1].at("pareto").as_bool());        // the only priced one
  const boost::json::array none = small_plan(dir, "--cluster dgx-h100-ndr --cluster dgx-a100-80g-hdr");
  REQUIRE(none.size() == 2);
  // The H100 trains faster, so it alone is on the front.
  CHECK(number(none[0].as_object(), "step_time_s") < number(none[1].as_object(), "step_time_s"));
  CHECK(none[0].at("pareto").as_bool());
  CHECK_FALSE(none[1].at("pareto").as_bool());
}

TEST_CASE("plan --help shows its usage, options and an example") {
  const Scratch dir("plan-help");
  const Run run = dir.run("plan --help");
  CHECK(run.status == 0);
  CHECK(run.out.starts_with("usage: stepsim plan "));
  for (const char* part : {"--tokens", "--deadline", "--gpus", "--cluster", "--precision", "--max-layouts",
                           "Band:", "tools/plot.py pareto"})
    CHECK(run.out.find(part) != std::string::npos);
}

// The block-scaled precisions are searched where the GPU runs them (Blackwell) and left out,
// saying so, where it does not (H100: no block-scaled tensor cores).
TEST_CASE("plan searches MXFP8 and NVFP4 on Blackwell and says it leaves them out on Hopper", "[slow]") {
  const Scratch dir("plan-block-scaled");
  const Run run = dir.run(
      "plan --model gpt-1.3b --tokens 10B --gpus 8 --cluster dgx-b200@5 --cluster dgx-h100-ndr@2 --precision "
      "mxfp8,nvfp4,bf16");
  REQUIRE(run.status == 0);
  const auto b200 = run.out.find("dgx-b200: ");
  const auto h100 = run.out.find("dgx-h100-ndr: ");
  REQUIRE(b200 < h100);
  const std::string b200_table = run.out.substr(b200, h100 - b200);
  const std::string h100_table = run.out.substr(h100);
  CHECK(b200_table.find("not searched") == std::string::npos);
  CHECK(h100_table.find("  not searched           mxfp8, nvfp4: h100-sxm5-80gb does not run them\n") !=
        std::string::npos);
  CHECK(h100_table.find("; bf16; ") != std::string::npos);  // the layout H100 gets is BF16
}

// A cluster whose GPU runs none of the precisions --precision allows has no layout to search
// at any GPU count: the request's error, with exit 2 and each precision's reason, before any
// search (it said "none fits" with exit 0), even beside a cluster that runs them.
TEST_CASE("plan refuses a cluster that runs none of the precisions allowed") {
  const Scratch dir("plan-no-precision");
  const Run alone =
      dir.run("plan --model gpt-1.3b --tokens 10B --gpus 8 --cluster dgx-h100-ndr --precision nvfp4 -o x.csv");
  CHECK(alone.status == 2);
  CHECK(alone.err.find("--cluster: dgx-h100-ndr: --precision: nvfp4: the cluster runs none of them (nvfp4: "
                       "h100-sxm5-80gb has no block-scaled tensor cores (Blackwell))") != std::string::npos);
  CHECK(!fs::exists(dir.file("x.csv")));
  const Run beside = dir.run(
      "plan --model gpt-1.3b --tokens 10B --gpus 8 --cluster dgx-b200 --cluster dgx-h100-ndr --precision "
      "mxfp8,nvfp4");
  CHECK(beside.status == 2);
  CHECK(beside.err.find("dgx-h100-ndr: --precision: mxfp8,nvfp4: the cluster runs none of them") != std::string::npos);
  CHECK(beside.out.empty());
}

// sweep --best refuses a GPU that runs none of the precisions --precision allows as plan does:
// the same reason, exit 2 (it said "0 configurations ... no configuration fits", exit 0).
TEST_CASE("sweep --best refuses a cluster that runs none of the precisions allowed, as plan does") {
  const Scratch dir("best-no-precision");
  for (const auto& [cluster, precision] : {std::pair{"dgx-a100-80g-hdr", "fp8"}, std::pair{"dgx-h100-ndr", "nvfp4"}}) {
    const Run plan = dir.run(
        fmt::format("plan --model gpt-1.3b --tokens 10B --gpus 8 --cluster {} --precision {}", cluster, precision));
    const Run best = dir.run(fmt::format("sweep --set model=gpt-1.3b --set cluster={} --gpus 8 --best 1 --precision {}",
                                         cluster, precision));
    CHECK(plan.status == 2);
    CHECK(best.status == 2);
    const std::string prefix = fmt::format("stepsim: error: --cluster: {}: ", cluster);
    REQUIRE(plan.err.starts_with(prefix));
    CHECK(best.err == "stepsim: error: " + plan.err.substr(prefix.size()));
    CHECK(best.out.find("no configuration fits") == std::string::npos);
  }
}

// Errors name what the user gave: --set parallel.dp is the --set's alone (not a cluster's),
// an unknown --model is --model's, a micro-batch the global batch does not split into is the
// micro-batch's, not the default scenario's DP of 8 that the search never uses.
TEST_CASE("plan's errors name the flag that gave the value") {
  const Scratch dir("plan-blame");
  const Run dp = dir.run("plan --tokens 1T --gpus 64 --cluster dgx-h100-ndr --set parallel.dp=8");
  CHECK(dp.status == 2);
  CHECK(dp.err == "stepsim: error: --set: parallel.dp: cannot be combined with --gpus, which derives parallel.dp\n");
  const Run model = dir.run("plan --model nosuch --tokens 1T --gpus 64 --cluster dgx-h100-ndr");
  CHECK(model.status == 2);
  CHECK(model.err.starts_with("stepsim: error: --model: unknown model preset 'nosuch' (expected one of "));
  // 128 sequences (the default job's global batch) are no whole number of micro-batches of 3.
  const std::string micro_batch =
      "stepsim: error: --set: training.micro_batch: the global batch of 128 sequences (training.global_batch) does "
      "not split into micro-batches of 3: no data-parallel degree the search tries divides it (micro_batch times DP "
      "must divide the global batch)\n";
  const Run plan = dir.run("plan --set training.micro_batch=3 --tokens 1T --gpus 64 --cluster dgx-h100-ndr");
  CHECK(plan.status == 2);
  CHECK(plan.err == micro_batch);
  const Run best = dir.run("sweep --set training.micro_batch=3 --gpus 64 --best 1");
  CHECK(best.status == 2);
  CHECK(best.err == micro_batch);
  CHECK(dir.entries().empty());
}

// A token budget is a whole number of tokens, at least one step's: the default job's step takes
// 128 sequences of 8192 tokens, 1,048,576 tokens (it reported 0.0 days for 0.005 tokens and
// for 1k). One step's tokens exactly are a budget.
TEST_CASE("plan takes a whole token budget of at least one step") {
  const Scratch dir("plan-tokens");
  const auto err = [&](const std::string& tokens) {
    const Run run = dir.run("plan --tokens " + tokens + " --gpus 64 --cluster dgx-h100-ndr");
    CHECK(run.status == 2);
    CHECK(run.out.empty());
    return run.err;
  };
  const std::string whole =
      ": expected a whole number of tokens, at least 1, such as 1T, 300B or 1.5e12 (at most 1e18)\n";
  CHECK(err("5e-3") == "stepsim: error: --tokens: 5e-3" + whole);
  CHECK(err("0.5") == "stepsim: error: --tokens: 0.5" + whole);
  CHECK(err("1.0000005K") == "stepsim: error: --tokens: 1.0000005K" + whole);
  CHECK(err("1k") ==
        "stepsim: error: --tokens: 1000: is less than one step of the job (1048576 tokens: a global batch of 128 "
        "sequences of 8192): expected a budget of at least one step\n");
  CHECK(err("1048575") ==
        "stepsim: error: --tokens: 1048575: is less than one step of the job (1048576 tokens: a global batch of 128 "
        "sequences of 8192): expected a budget of at least one step\n");
  const boost::json::array rows = plan_rows(dir, "--tokens 1048576 --gpus 8 --max-layouts 4 --cluster dgx-h100-ndr");
  REQUIRE(rows.size() == 1);
  const auto& row = rows[0].as_object();
  REQUIRE(row.at("status").as_string() == "ok");
  // One step's tokens take one step.
  CHECK(number(row, "train_days") * 86400 == Approx(number(row, "step_time_s")).epsilon(1e-9));
}

// --gpus goes as far as a job does (1,048,576 GPUs, the README's limit and parallel.dp's), and
// no farther.
TEST_CASE("plan's GPU counts reach the largest job a scenario takes") {
  const Scratch dir("plan-gpu-limit");
  const Run over = dir.run("plan --tokens 1T --gpus 1048577 --cluster dgx-h100-ndr");
  CHECK(over.status == 2);
  CHECK(over.err ==
        "stepsim: error: --gpus: 1048577: expected GPU counts from 1 to 1048576, e.g. 256, 128,256 or 64:1024:x2\n");
  // The limit itself is a GPU count: the request is checked (and refused for its price here)
  // beyond the count.
  const Run limit = dir.run("plan --tokens 1T --gpus 1048576 --cluster dgx-h100-ndr@0");
  CHECK(limit.status == 2);
  CHECK(limit.err.find("--gpus") == std::string::npos);
}

// 12 GPUs for the default job (Llama 3 8B: 32 heads, 32 layers, 8-GPU nodes; a global batch of
// 128 sequences). By hand: TP divides 32 and stays in a node, PP divides 32 layers, so TP, PP
// and CP take powers of two and DP keeps the factor 3: DP 3, 6 or 12, none of which times a
// micro-batch of 1, 2, 4 or 8 divides 128. With TP fixed at 8, which 12 is no multiple of, no
// split at all.
TEST_CASE("a GPU count without a layout says why, in plan and in sweep --best") {
  const Scratch dir("plan-no-layout");
  const Run plan = dir.run("plan --tokens 1e9 --gpus 12 --cluster dgx-h100-ndr@2");
  CHECK(plan.status == 0);
  CHECK(plan.err.find("12 GPUs: 0 configurations, 0 fit; no layout") != std::string::npos);
  CHECK(plan.out.find("layout                 none: the global batch of 128 sequences splits into micro-batches of "
                      "1, 2, 4 or 8 sequences over none of the data-parallel degrees 12 GPUs leave (3, 6, 12)") !=
        std::string::npos);
  // The row file says it too: status "no layout" and the reason, beside a count that has one.
  const boost::json::array rows = plan_rows(dir, "--tokens 1e9 --gpus 12,8 --cluster dgx-h100-ndr@2 --max-layouts 4");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at("status").as_string() == "no layout");
  CHECK(rows[0].at("reason").as_string().starts_with("the global batch of 128 sequences splits into micro-batches"));
  CHECK(rows[0].at("step_time_s").is_null());
  CHECK(rows[1].at("status").as_string() == "ok");
  CHECK(rows[1].at("reason").is_null());
  const Run best = dir.run("sweep --best 3 --gpus 12 --set parallel.tp=8");
  CHECK(best.status == 0);
  CHECK(best.out.find("no layout: 12 GPUs split into no TP degree (dividing the 32 heads, inside an NVLink domain of 8 "
                      "GPUs), PP degree (dividing the 32 layers) and CP degree (with the degrees and micro-batch --set "
                      "fixes)") != std::string::npos);
}

// Llama 3.1 405B on one DGX A100: 810 GB of BF16 weights alone against 8 × 80 GB, so every
// layout the search enumerates is too large, and the row says so rather than "no layout".
TEST_CASE("a GPU count where every layout is too large is a row that says how many were tried", "[slow]") {
  const Scratch dir("plan-none-fits");
  const boost::json::array rows =
      plan_rows(dir, "--model llama3-405b --tokens 1e9 --gpus 8 --cluster dgx-a100-80g-hdr");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].at("status").as_string() == "none fits");
  const std::string reason(rows[0].at("reason").as_string());
  INFO(reason);
  CHECK(reason.find(" configurations: ") != std::string::npos);
  CHECK(reason.find(" do not fit in memory, 0 refused by validation") != std::string::npos);
  CHECK(rows[0].at("step_time_s").is_null());
}

// The scenario's calibration file refused on a cluster is refused for every layout alike: plan
// said "744 configurations: 726 refused by validation ... none fits" and exited 0, naming no
// file. It is the request's error, said before any search as sweep --best says it too.
TEST_CASE("a calibration file refused on a cluster stops plan and sweep --best with its refusal") {
  const Scratch dir("plan-calibration");
  REQUIRE(dir.run("calibrate import-nccl-tests " STEPSIM_TEST_DATA "/nccl-tests/a100-80g-8gpu-allreduce-a.txt -o "
                  "a100.calib.json")
              .status == 0);
  const std::string refusal =
      "a100.calib.json: /provenance/gpu: measured on 'NVIDIA A100-SXM4-80GB', but the "
      "scenario's GPU is 'h100-sxm5-80gb'";
  // The A100 cluster first, whose search would run and fit: no search runs at all.
  const Run plan = dir.run(
      "plan --model gpt-1.3b --tokens 1e9 --gpus 8 --max-layouts 4 --cluster dgx-a100-80g-hdr,dgx-h100-ndr --set "
      "calibration='\"a100.calib.json\"'");
  CHECK(testing::refusal(plan, "stepsim: error: --cluster: dgx-h100-ndr: " + refusal) == "");
  CHECK(plan.err.find("stepsim: plan:") == std::string::npos);
  const Run best =
      dir.run("sweep --best 3 --gpus 8 --set cluster=dgx-h100-ndr --set calibration='\"a100.calib.json\"'");
  CHECK(testing::refusal(best, "stepsim: error: " + refusal) == "");
  // On the measured GPU it plans.
  const boost::json::array rows =
      plan_rows(dir,
                "--model gpt-1.3b --tokens 1e9 --gpus 8 --max-layouts 4 --cluster dgx-a100-80g-hdr --set "
                "calibration='\"a100.calib.json\"'");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].at("status").as_string() == "ok");
}

// Where layouts are refused by validation and the rest do not fit, plan's table says the first
// refusal's reason as sweep --best does (its rows' reason says it already): sequence
// parallelism set for every layout, and the TP 1 ones have no TP group to split over.
TEST_CASE("plan's table gives the first refusal when no layout fits") {
  const Scratch dir("plan-first-refusal");
  const Run run = dir.run(
      "plan --model llama3-405b --tokens 1e9 --gpus 8 --cluster dgx-a100-80g-hdr --set "
      "parallel.sequence_parallel=true");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("refused by validation") != std::string::npos);
  CHECK(run.out.find("  layout                 none fits on this many GPUs\n"
                     "  first refused          --set: parallel.sequence_parallel: needs parallel.tp > 1 (there is no "
                     "TP group to split the sequence over)\n") != std::string::npos);
}

}  // namespace stepsim

namespace stepsim {

// FP8 current scaling is a recipe of FP8: with --precision fp8 the search runs FP8 only, and
// --set training.fp8_scaling=current asks what a scenario file of FP8 with current scaling asks.
// It was refused against the default scenario's bf16 before --precision applied. The oracle:
// the same request with the precision fixed by --set instead of searched.
TEST_CASE("plan and sweep --best take --set training.fp8_scaling=current when --precision searches fp8", "[slow]") {
  const Scratch dir("plan-fp8-scaling");
  const std::string job = "--model llama3-8b --tokens 1B --gpus 8 --cluster dgx-b200 --max-layouts 8 ";
  const auto searched = plan_rows(dir, job + "--precision fp8 --set training.fp8_scaling=current");
  const auto fixed = plan_rows(dir, job + "--set training.precision=fp8 --set training.fp8_scaling=current");
  REQUIRE(searched.size() == 1);
  REQUIRE(fixed.size() == 1);
  for (const char* key : {"status", "tp", "pp", "dp", "precision", "step_time_s"}) {
    INFO(key);
    CHECK(searched[0].as_object().at(key) == fixed[0].as_object().at(key));
  }
  // bf16 searched beside fp8 is left out, as with the recipe in a file.
  const auto both = plan_rows(dir, job + "--precision bf16,fp8 --set training.fp8_scaling=current");
  REQUIRE(both.size() == 1);
  CHECK(both[0].as_object().at("precision") == "fp8");
  // ... and plan's table says so, as sweep --best's notes do (it said nothing of bf16).
  const Run table = dir.run("plan " + job + "--precision bf16,fp8 --set training.fp8_scaling=current");
  CHECK(table.status == 0);
  CHECK(table.out.find("  not searched           bf16: training.fp8_scaling current is a recipe of fp8") !=
        std::string::npos);
  const Run best = dir.run(
      "sweep --set model=llama3-8b --set cluster=dgx-b200 --set training.fp8_scaling=current --best 2 --gpus 8 "
      "--precision bf16,fp8");
  INFO(best.err);
  CHECK(best.status == 0);
  CHECK(best.out.find("note: bf16 is not searched: training.fp8_scaling current is a recipe of fp8") !=
        std::string::npos);
  // Without fp8 searched, the recipe is refused, naming the key.
  const Run none = dir.run("plan " + job + "--precision bf16 --set training.fp8_scaling=current");
  CHECK(none.status == 2);
  CHECK(none.err.find("training.fp8_scaling") != std::string::npos);
}

}  // namespace stepsim

namespace stepsim {
namespace {

// The plan's text of each line of the table's `label` ("  by the deadline"), in row order.
std::vector<std::string> table_lines(const std::string& out, const std::string& label) {
  std::vector<std::string> lines;
  for (auto at = out.find(label); at != std::string::npos; at = out.find(label, at + 1))
    lines.push_back(out.substr(at, out.find('\n', at) - at));
  return lines;
}

}  // namespace

// A step trains the global batch at once: GPT 1.3B's default job, 128 sequences of 2048 tokens,
// 262,144 tokens a step. A deadline of 2.5 steps trains 2 (it said 2.5 steps' 655,360 tokens), a
// budget of 2.5 steps' tokens takes 3, and a deadline shorter than one step on every row is
// refused, as a budget below one step is (it reported 0.5 steps' tokens).
TEST_CASE("plan counts whole steps: a deadline trains the steps it finishes, a budget takes a step more for a part") {
  const Scratch dir("plan-whole-steps");
  const std::string job = "--model gpt-1.3b --gpus 8 --max-layouts 4 --cluster dgx-h100-ndr@2.5 ";
  const boost::json::array first = plan_rows(dir, job + "--deadline 10");
  REQUIRE(first.size() == 1);
  REQUIRE(first[0].at("status").as_string() == "ok");
  const double step = number(first[0].as_object(), "step_time_s");
  // 10 days: floor(864000 / step) steps.
  CHECK(number(first[0].as_object(), "deadline_tokens") == std::floor(864000 / step) * 262144);
  const std::string two_and_a_half = fmt::format("{:.17g}", 2.5 * step / 86400);
  const boost::json::array rows = plan_rows(dir, job + "--tokens 655360 --deadline " + two_and_a_half);
  REQUIRE(rows.size() == 1);
  const auto& row = rows[0].as_object();
  CHECK(number(row, "step_time_s") == step);
  CHECK(number(row, "deadline_tokens") == 2 * 262144);
  CHECK(number(row, "train_days") * 86400 == Approx(3 * step).epsilon(1e-12));
  CHECK(number(row, "cost") == Approx(3 * step * 8 * 2.5 / 3600).epsilon(1e-12));
  CHECK(number(row, "energy_mwh") == Approx(3 * step * 8 * 700 / 3.6e9).epsilon(1e-12));
  const Run table = dir.run("plan " + job + "--deadline " + two_and_a_half);
  REQUIRE(table.status == 0);
  CHECK(table_lines(table.out, "  by the deadline") ==
        std::vector<std::string>{fmt::format("  by the deadline        5.24e+05 tokens in {} days (2 whole steps)",
                                             fmt::format("{:g}", 2.5 * step / 86400))});
  const std::string half = fmt::format("{:.17g}", 0.5 * step / 86400);
  const Run refused = dir.run("plan " + job + "--deadline " + half);
  CHECK(refused.status == 2);
  CHECK(refused.out.empty());
  // After the search's progress line: the step time is what the search finds.
  CHECK(
      refused.err.ends_with(fmt::format("\nstepsim: error: --deadline: {}: is {:g} s, less than one step of the job "
                                        "on every cluster and GPU count (the fastest, dgx-h100-ndr on 8 GPUs, takes "
                                        "{:.6g} s a step for 262144 tokens): expected a deadline of at least one "
                                        "step\n",
                                        half, 0.5 * step, step)));
}

// A deadline one row finishes no step by and another does: the first trains 0 tokens (a
// number, not an unknown), the table says why, and the plan stands.
TEST_CASE("plan gives 0 tokens by a deadline shorter than a row's step when another row finishes one") {
  const Scratch dir("plan-deadline-zero");
  const std::string job = "--model gpt-1.3b --gpus 8,16 --max-layouts 4 --cluster dgx-h100-ndr@2.5 ";
  const boost::json::array first = plan_rows(dir, job + "--deadline 10");
  REQUIRE(first.size() == 2);
  const double slow = number(first[0].as_object(), "step_time_s");
  const double fast = number(first[1].as_object(), "step_time_s");
  REQUIRE(fast < 0.9 * slow);
  const std::string deadline = fmt::format("{:.17g}", 0.95 * slow / 86400);
  const boost::json::array rows = plan_rows(dir, job + "--deadline " + deadline);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at("deadline_tokens").is_number());
  CHECK(number(rows[0].as_object(), "deadline_tokens") == 0);
  CHECK(number(rows[1].as_object(), "deadline_tokens") == std::floor(0.95 * slow / fast) * 262144);
  const Run table = dir.run("plan " + job + "--deadline " + deadline);
  REQUIRE(table.status == 0);
  const auto lines = table_lines(table.out, "  by the deadline");
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == fmt::format("  by the deadline        0 tokens in {:g} days: one step (262144 tokens) takes {:.3f} "
                                "s, longer than the deadline's {:g} s",
                                0.95 * slow / 86400, slow, 0.95 * slow));
}

// With a deadline alone the Pareto table prints the tokens trained by the deadline and the cost of
// a million tokens (price × GPUs × step time / 3600 / 262,144 tokens × 1e6), under a header
// that says so (it said "cost against time to train" over tokens/s), and the rows hold both:
// deadline_tokens and cost_per_mtoken (which no column held).
TEST_CASE("plan's Pareto table with a deadline alone prints what its rows hold, under a header that says so") {
  const Scratch dir("plan-deadline-pareto");
  const std::string args =
      "plan --model gpt-1.3b --deadline 1 --gpus 8 --max-layouts 4 --cluster dgx-h100-ndr@2.5 "
      "--cluster dgx-a100-80g-hdr@1.8 -o rows.json";
  const Run run = dir.run(args);
  REQUIRE(run.status == 0);
  const boost::json::array rows = boost::json::parse(testing::slurp(dir.file("rows.json"))).as_array();
  REQUIRE(rows.size() == 2);
  CHECK(run.out.find("\ncost per M tokens against tokens trained by the deadline, most first") != std::string::npos);
  CHECK(run.out.find("cost against time to train") == std::string::npos);
  for (const auto& v : rows) {
    const auto& row = v.as_object();
    const double price = number(row, "gpu_hour_price");
    const double per_mtoken = price * 8 * number(row, "step_time_s") / 3600 / 262144 * 1e6;
    CHECK(number(row, "cost_per_mtoken") == Approx(per_mtoken).epsilon(1e-12));
    CHECK(number(row, "deadline_tokens") == std::floor(86400 / number(row, "step_time_s")) * 262144);
    const std::string line =
        fmt::format("  {}  {:<20} {:>6}  {:<9} {:>28}  {:>32}", row.at("pareto").as_bool() ? "*" : " ",
                    std::string(row.at("cluster").as_string()), 8, std::string(row.at("precision").as_string()),
                    fmt::format("{:.3g}", number(row, "deadline_tokens")), fmt::format("{:.3f}", per_mtoken));
    CHECK(run.out.find(line + "\n") != std::string::npos);
  }
}

// Without a scenario the job is the embedded default, and without --cluster its own cluster is
// planned (the default scenario's dgx-h100-ndr, configs/examples/default.json), as plan's help
// says: it was refused ("expected at least one cluster preset").
TEST_CASE("plan without a scenario or --cluster plans the embedded default's own cluster") {
  const Scratch dir("plan-default-own");
  const boost::json::array own = plan_rows(dir, "--model gpt-1.3b --tokens 1e9 --gpus 8 --max-layouts 4");
  const boost::json::array named = small_plan(dir, "--cluster dgx-h100-ndr");
  REQUIRE(own.size() == 1);
  REQUIRE(named.size() == 1);
  CHECK(own[0].at("cluster").as_string() == "dgx-h100-ndr");
  CHECK(own[0].at("status").as_string() == "ok");
  CHECK(own[0].at("step_time_s") == named[0].at("step_time_s"));
}

}  // namespace stepsim

// The search admits the kinds a scenario loads with (sweep --best, plan): FSDP of a mixture of
// experts simulates, and only its all-to-all overlap refuses FSDP, so the help says that.
TEST_CASE("sweep's help names what keeps the search from FSDP: the all-to-all overlap, not a mixture of experts") {
  const stepsim::testing::Scratch dir("sweep-moe-fsdp");
  const stepsim::testing::Run help = dir.run("sweep --help");
  CHECK(help.out.find("a mixture-of-experts model away from FSDP") == std::string::npos);
  CHECK(help.out.find("model.moe.a2a_overlap away from FSDP") != std::string::npos);
  const std::string moe_fsdp =
      "simulate mixtral-8x7b-ep8-64xh100 --set data_parallel.kind=fsdp --set data_parallel.overlap_param_gather=false";
  CHECK(dir.run(moe_fsdp).status == 0);
  CHECK(dir.run(moe_fsdp + " --set training.framework=megatron --set training.recompute=selective"
                           " --set model.moe.a2a_overlap=true")
            .status == 2);
}
