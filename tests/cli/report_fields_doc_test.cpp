// docs/report.md names every field of the JSON that simulate, analyze (one rank and several),
// compare and sweep write: the fields are walked in what the program writes for real inputs
// (the traces of tests/data/traces and a tiny Kineto job of two ranks) and each name is looked
// up in the doc, in backquotes (an array's as `name` or `name[]`).
#include <fmt/format.h>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "cli/run_stepsim.hpp"

using stepsim::testing::Run;
using stepsim::testing::Scratch;
using stepsim::testing::slurp;

namespace {

namespace json = boost::json;

// Objects whose keys are data (collective ops, process-group names, the resolved scenario's
// keys, which docs/scenario-reference.md lists), not field names.
bool keys_are_data(const std::string& key) {
  return key == "config" || key == "exposed_by_collective_s" || key == "exposed_by_group_s";
}

void collect(const json::value& v, std::set<std::string>& names) {
  if (v.is_array())
    for (const json::value& item : v.as_array()) collect(item, names);
  if (!v.is_object()) return;
  for (const auto& field : v.as_object()) {
    const std::string key(field.key());
    names.insert(key);
    if (!keys_are_data(key)) collect(field.value(), names);
  }
}

// A one-step Kineto trace of one rank of two: a GEMM and an AllReduce that starts `late_us`
// after the other rank's.
std::string kineto_rank(int rank, int late_us) {
  return fmt::format(
      R"trace({{"distributedInfo": {{"backend": "nccl", "rank": {0}, "world_size": 2}}, "traceEvents": [
    {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 9, "tid": 9, "ts": 1000, "dur": 200}},
    {{"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 1010, "dur": 40, "args": {{"stream": 7}}}},
    {{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
      "pid": 0, "tid": 20, "ts": {1}, "dur": 30, "args": {{"stream": 20, "In msg nelems": 1000, "Out msg nelems": 1000,
      "Group size": 2, "dtype": "BFloat16", "Process Group Name": "0"}}}}]}})trace",
      rank, 1060 + late_us);
}

std::set<std::string> fields_of(const Run& run) {
  INFO(run.err);
  REQUIRE(run.status == 0);
  std::set<std::string> names;
  collect(json::parse(run.out), names);
  return names;
}

}  // namespace

TEST_CASE("docs/report.md documents every JSON field of simulate, analyze, compare and sweep rows") {
  const Scratch dir("report-fields");
  const std::string data = std::string(STEPSIM_SOURCE_DIR) + "/tests/data/";
  const std::string trace = data + "traces/resnet50-ddp-a100-rank0of2.json.gz";
  REQUIRE(dir.run("calibrate import-nccl-tests " + data + "nccl-tests/a100-80g-8gpu-allreduce-a.txt -o a100.calib.json")
              .status == 0);
  std::ofstream(dir.file("rank0.json")) << kineto_rank(0, 0);
  std::ofstream(dir.file("rank1.json")) << kineto_rank(1, 20);

  std::map<std::string, std::set<std::string>> outputs;
  outputs["simulate"] = fields_of(dir.run(
      "simulate ddp-1.3b-64xa100 --advise --calibration a100.calib.json --set cluster.gpu_hour_price=2.2 --json -"));
  outputs["analyze"] = fields_of(dir.run("analyze " + trace + " --json -"));
  outputs["analyze of two ranks"] = fields_of(dir.run("analyze rank0.json rank1.json --json -"));
  outputs["compare"] = fields_of(dir.run("compare " + trace + " ddp-1.3b-64xa100 --json -"));
  REQUIRE(dir.run("sweep ddp-1.3b-64xa100 --vary parallel.tp=1,2 -o rows.jsonl").status == 0);
  std::istringstream lines(slurp(dir.file("rows.jsonl")));
  std::string first;
  std::getline(lines, first);
  json::value row = json::parse(first);
  row.as_object().erase("parallel.tp");  // the varied key: "the varied keys"
  collect(row, outputs["sweep rows"]);
  // The inputs reach what the doc describes: the calibration object, the stragglers' fields.
  CHECK(outputs["simulate"].count("calibration") == 1);
  CHECK(outputs["analyze of two ranks"].count("others_wait_s_per_step") == 1);
  CHECK(outputs["analyze"].count("kernel_type_breakdown") == 1);

  const std::string doc = slurp(std::string(STEPSIM_SOURCE_DIR) + "/docs/report.md");
  for (const auto& [command, names] : outputs)
    for (const std::string& name : names) {
      INFO(command << ": " << name);
      CHECK((doc.find("`" + name + "`") != std::string::npos || doc.find("`" + name + "[]`") != std::string::npos));
    }
}

// Two definitions of docs/report.md checked against the program's own numbers: the cost per step
// is GPUs × price per GPU-hour × step time in seconds / 3600, and rendezvous_wait_max_s is a time
// per kind, the longest of one rank, so never below the mean over the ranks.
TEST_CASE("docs/report.md's cost per step and rendezvous_wait_max_s are what the report gives") {
  const Scratch dir("report-definitions");
  const Run run = dir.run(
      "simulate ddp-1.3b-64xa100 --set parallel.dp=8 --set training.global_batch=64 --set simulation.ranks=all "
      "--set cluster.gpu_hour_price=2.2 --set 'simulation.variation.gpu_speed=[{\"rank\": 5, \"factor\": 0.8}]' "
      "--json -");
  INFO(run.err);
  REQUIRE(run.status == 0);
  const json::value report = json::parse(run.out);
  const double gpus = report.at("gpus").to_number<double>();
  const double step = report.at("step_time_s").to_number<double>();
  CHECK(report.at("cost").at("cost_per_step").to_number<double>() == Approx(gpus * 2.2 * step / 3600));
  const json::object& mean = report.at("ranks").at("rendezvous_wait_s").as_object();
  const json::object& most = report.at("ranks").at("rendezvous_wait_max_s").as_object();
  REQUIRE(most.at("dp").to_number<double>() > 0);
  for (const auto& kind : mean) CHECK(most.at(kind.key()).to_number<double>() >= kind.value().to_number<double>());
  const std::string doc = slurp(std::string(STEPSIM_SOURCE_DIR) + "/docs/report.md");
  CHECK(doc.find("cost per step = GPUs × `cluster.gpu_hour_price` (per GPU-hour) × step time (s) / 3600") !=
        std::string::npos);
  CHECK(doc.find("`rendezvous_wait_max_s` per kind: the longest such wait of\n  one rank") != std::string::npos);
  CHECK(doc.find("the rank that waited most") == std::string::npos);
}
