// NCCL_ALGO and NCCL_PROTO as NCCL honours them: they narrow the collectives' (algorithm,
// protocol) choice and never reach point-to-point transfers (AllToAll, SendRecv), which NCCL
// appends as send and receive tasks whose protocol follows their size (src/enqueue.cc,
// p2pTaskAppend). Forcing the collectives of a pipelined or expert-parallel job leaves its
// transfers and their measurement as they are.
#include <map>
#include <string>
#include <utility>
#include <vector>

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

}  // namespace stepsim
