// NCCL_ALGO and NCCL_PROTO as NCCL honours them: they narrow the collectives' (algorithm,
// protocol) choice and never reach point-to-point transfers (AllToAll, SendRecv), which NCCL
// appends as send and receive tasks whose protocol follows their size (src/enqueue.cc,
// p2pTaskAppend). Forcing the collectives of a pipelined or expert-parallel job leaves its
// transfers, their measurement and their calibration as they are.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "cli/run_stepsim.hpp"
#include "cli/simulate_support.hpp"

namespace stepsim {
namespace {

using testing::refusal;
using testing::Scratch;

// Each pipeline transfer's duration on rank 0, in order.
std::vector<double> pipeline_transfers(const SimulationResult& r) {
  std::vector<double> out;
  for (const Interval& i : r.timeline.ranks.front().intervals)
    if (i.activity == Activity::comm && i.kind == CommKind::pp) out.push_back((i.end - i.start).seconds());
  return out;
}

std::vector<double> tp_collectives(const SimulationResult& r) {
  std::vector<double> out;
  for (const Interval& i : r.timeline.ranks.front().intervals)
    if (i.activity == Activity::comm && i.kind == CommKind::tp) out.push_back((i.end - i.start).seconds());
  return out;
}

}  // namespace

// Llama 3 8B, TP 4 x PP 2 x DP 2 on two DGX H100: each stage on a node of its own, so every
// pipeline transfer crosses between the nodes on a NIC that nothing else uses. With tree, LL128
// or LL forced the job runs (it was refused: "tree has no SendRecv") and every pipeline transfer
// takes what it takes under NCCL's own choice, while the TP AllReduces take the forced pair's time.
TEST_CASE("forcing the collectives' algorithm or protocol leaves a pipeline's transfers unchanged") {
  const std::vector<std::string> layout{"parallel.tp=4", "parallel.pp=2", "parallel.dp=2", "training.micro_batch=1",
                                        "training.global_batch=8"};
  const SimulationResult own = test::run("", layout);
  const std::vector<double> transfers = pipeline_transfers(own);
  // Rank 0, on the first stage: 4 micro-batches, the activations sent and the gradients received.
  REQUIRE(transfers.size() == 8);
  for (const std::string& forced :
       {std::string("collectives.algorithm=tree"), std::string("collectives.protocol=ll128"),
        std::string("collectives.protocol=ll")}) {
    INFO(forced);
    std::vector<std::string> sets = layout;
    sets.push_back(forced);
    const SimulationResult r = test::run("", sets);
    const std::vector<double> forced_transfers = pipeline_transfers(r);
    REQUIRE(forced_transfers.size() == transfers.size());
    for (std::size_t i = 0; i < transfers.size(); ++i) CHECK(forced_transfers[i] == Approx(transfers[i]).epsilon(1e-9));
    CHECK(tp_collectives(r) != tp_collectives(own));
  }
}

TEST_CASE("stepsim collective refuses to force what NCCL does not let NCCL_ALGO or NCCL_PROTO force") {
  Scratch s("forced-p2p");
  CHECK(refusal(s.run("collective sendrecv --gpus 2 --size 64MiB --algorithm ring"),
                "<command line>: --algorithm: NCCL runs SendRecv as point-to-point sends and receives, which NCCL_ALGO "
                "and NCCL_PROTO do not touch, so 'ring' cannot be forced (choices: auto, direct)") == "");
  CHECK(refusal(s.run("collective alltoall --gpus 8 --size 64MiB --protocol ll"),
                "<command line>: --protocol: NCCL runs AllToAll as point-to-point sends and receives, which NCCL_ALGO "
                "and NCCL_PROTO do not touch, so 'll' cannot be forced (choices: auto)") == "");
  const auto direct = s.run("collective alltoall --gpus 8 --size 64MiB --algorithm direct");
  CHECK(direct.status == 0);
  CHECK(direct.out == s.run("collective alltoall --gpus 8 --size 64MiB").out);
}

// Mixtral 8x7B, experts over a pipeline, with ring/simple forced: `calibrate plan` sets NCCL_ALGO
// and NCCL_PROTO on the AllReduce runs only; the AllToAll and SendRecv runs are measured as NCCL
// runs them in training.
TEST_CASE("calibrate plan forces NCCL_ALGO and NCCL_PROTO on collective runs only") {
  Scratch s("forced-plan");
  s.write(
      "p.json",
      R"({"model": "mixtral-8x7b", "cluster": "dgx-h100-ndr", "parallel": {"tp": 2, "pp": 2, "ep": 2, "dp": 2, "sequence_parallel": true},
    "training": {"global_batch": 8, "micro_batch": 1},
    "collectives": {"algorithm": "ring", "protocol": "simple"}})");
  const auto run = s.run("calibrate plan p.json");
  REQUIRE(run.status == 0);
  std::map<std::string, int> forced, own;
  std::size_t at = 0;
  while ((at = run.out.find("mpirun ", at)) != std::string::npos) {
    const std::string line = run.out.substr(at, run.out.find('\n', at) - at);
    at += line.size();
    for (const char* program : {"all_reduce_perf", "alltoall_perf", "sendrecv_perf"})
      if (line.find(program) != std::string::npos)
        ++(line.find("NCCL_ALGO=Ring -x NCCL_PROTO=Simple") != std::string::npos ? forced : own)[program];
  }
  INFO(run.out);
  CHECK(forced["all_reduce_perf"] > 0);
  CHECK(own["alltoall_perf"] > 0);
  CHECK(own["sendrecv_perf"] > 0);
  CHECK(own["all_reduce_perf"] == 0);
  CHECK(forced["alltoall_perf"] == 0);
  CHECK(forced["sendrecv_perf"] == 0);
}

namespace {

// A sendrecv_perf run of 2 H100s of one node, 64 KiB to 128 MiB at 10 us + S / 300 GB/s, with
// NCCL's lines saying what the environment forced.
std::string sendrecv_log(const std::string& nccl_lines) {
  std::string log =
      "# Collective test starting: sendrecv_perf\n" + nccl_lines +
      "NCCL version 2.21.5+cuda12.4\n# nThread 1 nGpus 1 minBytes 64KiB maxBytes 128MiB\n# Using devices\n";
  for (int r = 0; r < 2; ++r)
    log += fmt::format("#  Rank {} Group  0 Pid {} on node0 device {} [0x{:02x}] NVIDIA H100 80GB HBM3\n", r, 1000 + r,
                       r, r);
  for (long long size = 1 << 16; size <= (1 << 27); size *= 2) {
    const double us = 10 + static_cast<double>(size) / 300e3;
    log += fmt::format("{} {} bfloat16 sum -1 {:.3f} 0 0 0 {:.3f} 0 0 0\n", size, size / 2, us, us);
  }
  return log;
}

}  // namespace

// A SendRecv log from a run with NCCL_ALGO=Ring set is a measurement of NCCL's own transfers: it
// imports as an unlabelled table, serves scenarios forced or not, and a file that labels a
// point-to-point table with an algorithm is refused at that table.
TEST_CASE("a point-to-point log imports as NCCL's own choice, whatever NCCL_ALGO said") {
  Scratch s("forced-p2p-import");
  s.write("ring.txt", sendrecv_log("node0:1000:1000 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n"));
  REQUIRE(s.run("calibrate import-nccl-tests ring.txt -o p2p.json").status == 0);
  const auto doc = boost::json::parse(testing::slurp(s.file("p2p.json")));
  const auto& table = doc.at("collectives").at(0).as_object();
  CHECK(table.at("op").as_string() == "sendrecv");
  CHECK_FALSE(table.contains("algorithm"));
  CHECK_FALSE(table.contains("protocol"));
  const std::string scenario =
      "--set model=llama3-8b --set cluster=dgx-h100-ndr --set parallel.tp=4 "
      "--set parallel.pp=2 --set parallel.dp=1 --set training.global_batch=8 "
      "--set calibration=[\\\"p2p.json\\\"]";
  CHECK(s.run("simulate " + scenario).status == 0);
  CHECK(s.run("simulate " + scenario + " --set collectives.algorithm=ring").status == 0);

  std::string labelled = testing::slurp(s.file("p2p.json"));
  labelled.replace(labelled.find("\"op\""), 4, "\"algorithm\": \"ring\", \"op\"");
  s.write("labelled.json", labelled);
  CHECK(refusal(s.run("calibrate check labelled.json"),
                "labelled.json: /collectives/0/algorithm: sendrecv runs as point-to-point sends and receives, which "
                "NCCL_ALGO and NCCL_PROTO do not touch; leave \"algorithm\" out") == "");
}

}  // namespace stepsim
