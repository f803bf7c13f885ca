// GB200 NVL72 racks end to end: `stepsim collective` against published nccl-tests runs on one
// rack and on twenty, and DeepSeek-V3's expert all-to-alls inside a rack and across two.
#include <catch2/catch.hpp>

#include <string>

#include <boost/json.hpp>

#include "cli/run_stepsim.hpp"
#include "cli/simulate_support.hpp"
#include "simulation/advice.hpp"

namespace stepsim {
namespace {

struct Row {
  std::string algorithm;
  double busbw = 0;
};

// One size of `stepsim collective allreduce` on GB200 NVL72 trays of 4 GPUs.
Row allreduce(int gpus, const std::string& size) {
  const testing::Scratch dir("nvlink-domain");
  const testing::Run run = dir.run("collective allreduce --cluster gb200-nvl72 --ranks-per-node 4 --gpus " +
                                   std::to_string(gpus) + " --size " + size + " --json -");
  REQUIRE(run.status == 0);
  const boost::json::value rows = boost::json::parse(run.out);
  const auto& row = rows.as_array().at(0).as_object();
  return {std::string(row.at("algorithm").as_string()), row.at("busbw_gbps").to_number<double>()};
}

bool notes_say(const Report& r, const std::string& part) {
  for (const auto& n : r.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

// DeepSeek-V3 at EP = DP = `gpus` on GB200 NVL72, one micro-batch per rank.
Report deepseek(int gpus) {
  const std::string n = std::to_string(gpus);
  return test::run("", {test::set("cluster", "gb200-nvl72"), test::set("model", "deepseek-v3"),
                        test::set("parallel", R"({"tp": 1, "pp": 1, "dp": )" + n + R"(, "ep": )" + n + "}"),
                        test::set("training.global_batch", n), test::set("training.micro_batch", "1")})
      .report;
}

}  // namespace

// coreweave/nccl-tests pull request 43: all_reduce_perf on one full NVL72 rack (72 GPUs, 18
// trays), out-of-place busbw 586 GB/s at 512 MiB and 835 at 8 GiB. The rack is one NVLink
// domain: NCCL runs NVLS on it, and no byte leaves through a NIC.
// NCCL's own NVLS model (Blackwell's NVLS efficiency 0.74) puts it 23 % above at 8 GiB and
// 60 % above at 512 MiB, where the published sweep still ramps (docs/validation.md).
TEST_CASE("an AllReduce over one NVL72 rack runs NVLS within a quarter of the published busbw at 4 and 8 GiB") {
  const Row large = allreduce(72, "8GiB");
  CHECK(large.algorithm == "nvls");
  CHECK(large.busbw == Approx(834.57).epsilon(0.25));
  CHECK(allreduce(72, "4GiB").busbw == Approx(839.16).epsilon(0.25));
  CHECK(allreduce(72, "512MiB").algorithm == "nvls");
}

// Two racks are two NVLink domains: NCCL's multi-node graphs, NVLS-tree across them, never
// faster than NVLS inside one rack.
TEST_CASE("an AllReduce over two NVL72 racks runs NVLS-tree through the NICs, no faster than one rack") {
  const Row two = allreduce(144, "8GiB");
  CHECK(two.algorithm == "nvls-tree");
  CHECK(two.busbw <= allreduce(72, "8GiB").busbw);
  CHECK(allreduce(1440, "4GiB").busbw <= allreduce(72, "4GiB").busbw);
}

TEST_CASE("stepsim collective says how many NVLink domains a communicator spans") {
  const testing::Scratch dir("nvlink-domain-table");
  const testing::Run run =
      dir.run("collective allreduce --cluster gb200-nvl72 --ranks-per-node 4 --gpus 144 --size 1GiB");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("(36 node(s) in 2 NVLink domain(s) of 72 GPUs, 72 ranks per domain)") != std::string::npos);
}

// 76 GPUs on NVL72 racks, 4 a tray, fill one rack and a tray of the next: two domains of 72 and
// 4 ranks, costed as an even group of the emptiest domain's 4 (76 = 19 x 4: nineteen domains
// of 4). 100 GPUs hold 72 and 28; 28 does not divide 100: two domains of 28. The header once
// printed the costing as the placement ("19 NVLink domain(s)", "28 ranks per domain").
TEST_CASE("stepsim collective prints where an uneven communicator lies and, apart, how it is costed") {
  const testing::Scratch dir("nvlink-domain-uneven");
  const testing::Run rack_and_tray =
      dir.run("collective allreduce --cluster gb200-nvl72 --gpus 76 --ranks-per-node 4 --size 1GiB");
  REQUIRE(rack_and_tray.status == 0);
  CHECK(rack_and_tray.out.find("(19 node(s) in 2 NVLink domain(s) of 72 GPUs holding 72 + 4 ranks; costed as an even "
                               "group of its emptiest domain's size: 76 ranks as 19 domain(s) of 4)") !=
        std::string::npos);
  const testing::Run hundred =
      dir.run("collective allreduce --cluster gb200-nvl72 --gpus 100 --ranks-per-node 4 --size 1GiB");
  REQUIRE(hundred.status == 0);
  CHECK(hundred.out.find("(25 node(s) in 2 NVLink domain(s) of 72 GPUs holding 72 + 28 ranks; costed as an even "
                         "group of its emptiest domain's size: 56 ranks as 2 domain(s) of 28)") != std::string::npos);
  const testing::Run racks =
      dir.run("collective allreduce --cluster gb200-nvl72 --gpus 220 --ranks-per-node 4 --size 1GiB");
  REQUIRE(racks.status == 0);
  CHECK(racks.out.find("in 4 NVLink domain(s) of 72 GPUs holding 3 x 72 + 4 ranks") != std::string::npos);
}

TEST_CASE(
    "DeepSeek-V3 at EP 64 in one NVL72 rack keeps its all-to-alls on NVLink and EP 128 over two racks uses NICs") {
  const Report rack = deepseek(64);
  CHECK(
      notes_say(rack, "ep group of rank 0: 64 ranks on 16 node(s), 4 per node in one NVLink domain (all over NVLink)"));
  const Report racks = deepseek(128);
  CHECK(notes_say(racks,
                  "ep group of rank 0: 128 ranks on 32 node(s), 4 per node in 2 NVLink domains, 56 to 72 per "
                  "domain (NVLink inside a domain, NICs between domains)"));
  CHECK(notes_say(rack, "gb200 is fitted to measurements only in part"));
  CHECK(notes_say(rack, "gb200-nvl72 is not fitted to measurements"));
}

// FSDP's HYBRID_SHARD shards where its AllGathers run on NVLink: on an NVL72 rack that is the
// whole rack of 72 GPUs, not one tray of 4.
TEST_CASE("HSDP's default shard group is one NVLink domain: a whole NVL72 rack") {
  const Report r =
      test::run("", {test::set("cluster", "gb200-nvl72"), test::set("model", "llama3-8b"),
                     test::set("parallel", R"({"tp": 1, "pp": 1, "dp": 144})"), test::set("data_parallel.kind", "hsdp"),
                     test::set("training.global_batch", "144"), test::set("training.micro_batch", "1")})
          .report;
  CHECK(notes_say(r, "HSDP: shard groups of 72 DP ranks, gradient shards all-reduced across 2 groups"));
}

// FSDP inside one rack already gathers over NVLink: the advice proposes HSDP (shard inside an
// NVLink domain, all-reduce across domains) only when FSDP spans more than one rack.
TEST_CASE("the advice proposes HSDP for FSDP only across NVLink domains, not across the trays of one rack") {
  const auto proposes_hsdp = [](int dp) {
    const std::string n = std::to_string(dp);
    const std::vector<std::string> sets = {test::set("cluster", "gb200-nvl72"),
                                           test::set("model", "llama3-8b"),
                                           test::set("parallel", R"({"tp": 1, "pp": 1, "dp": )" + n + "}"),
                                           test::set("data_parallel.kind", "fsdp"),
                                           test::set("training.global_batch", n),
                                           test::set("training.micro_batch", "1")};
    const Scenario scenario = io::load_scenario("", sets);
    SimulationResult r = simulate(scenario, SimulateOptions::report_only());
    advise({{"", {}}, sets, true, {}}, scenario, r);
    for (const auto& a : r.report.advice)
      if (a.change == "data_parallel.kind=hsdp") return true;
    return false;
  };
  CHECK_FALSE(proposes_hsdp(64));
  CHECK(proposes_hsdp(144));
}

}  // namespace stepsim

// collective --set changes the cluster's keys as a cluster file does: NVL36 racks (36 GPUs a
// domain) from the NVL72 preset, by --set and by a file that sets the same key, print the same
// rows; keys outside the cluster, and the cluster itself, are refused naming --set.
TEST_CASE("stepsim collective --set changes the cluster's keys as a cluster file does") {
  const stepsim::testing::Scratch dir("collective-set");
  const std::string flags = " --gpus 144 --ranks-per-node 4 --sweep 64MiB:1GiB --factor 4";
  const stepsim::testing::Run by_set =
      dir.run("collective allreduce --cluster gb200-nvl72 --set cluster.nvlink_domain=36" + flags);
  const auto file = dir.write("nvl36.json", R"({"preset": "gb200-nvl72", "nvlink_domain": 36})");
  const stepsim::testing::Run by_file = dir.run("collective allreduce --cluster " + file.string() + flags);
  REQUIRE(by_set.status == 0);
  REQUIRE(by_file.status == 0);
  CHECK(by_set.out == by_file.out);
  CHECK(by_set.out.find("(36 node(s) in 4 NVLink domain(s) of 36 GPUs, 36 ranks per domain)") != std::string::npos);
  CHECK(by_set.out != dir.run("collective allreduce --cluster gb200-nvl72" + flags).out);
  CHECK(stepsim::testing::refusal(dir.run("collective allreduce --set model.layers=2"),
                         "--set: model.layers: only the cluster's keys (cluster.KEY=VALUE") == "");
  // Keys the collective's cost never reads would do nothing: refused too.
  for (const char* idle : {"cluster.gpu_hour_price=2", "cluster.nodes=4", "cluster.gpu.flops.bf16=\"1 TFLOPS\"",
                           "cluster.gpu.efficiency.gemm_max=0.5"}) {
    INFO(idle);
    CHECK(stepsim::testing::refusal(dir.run(std::string("collective allreduce --set '") + idle + "'"),
                                    "changes nothing in one collective") == "");
  }
  CHECK(stepsim::testing::refusal(dir.run("collective allreduce --set cluster=dgx-b200"),
                         "--set: cluster: the cluster is the --cluster flag's") == "");
  CHECK(stepsim::testing::refusal(dir.run("collective allreduce --cluster gb200-nvl72 --set cluster.nvlink_domain=7"),
                         "--set: cluster.nvlink_domain: must be a whole number of nodes of 4 GPUs, got 7") == "");
}

// The GPU's SM count, HBM bandwidth and launch cost feed simulate (compute beside a collective,
// the host), the host link carries activation offload: NCCL's model of one collective reads
// none of them (sim/collectives), so the rows are the same with or without them, and --set
// refuses them as it refuses the GPU's memory or FLOP rates.
TEST_CASE("stepsim collective --set refuses the GPU's SMs, HBM bandwidth, launch cost and host link") {
  const stepsim::testing::Scratch dir("collective-set-idle");
  for (const char* idle :
       {"cluster.gpu.sms=10", "cluster.gpu.memory_bandwidth=\"1 TB/s\"", "cluster.gpu.kernel_launch=\"50 us\"",
        "cluster.host_link.bandwidth=\"1 GB/s\"", "cluster.host_link.gpus_per_link=2"}) {
    INFO(idle);
    CHECK(stepsim::testing::refusal(dir.run(std::string("collective allreduce --gpus 16 --set '") + idle + "'"),
                                    "changes nothing in one collective") == "");
  }
}
