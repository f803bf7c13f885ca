// Ranks that differ (simulation.variation) on whole data-parallel jobs: a slow GPU, slow
// links, jitter, and representative mode's expected wait for the slowest member, each
// against a figure computed by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <boost/json.hpp>
#include <boost/math/distributions/normal.hpp>
#include <sstream>

#include "doc_text.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/variation.hpp"
#include "report/report_io.hpp"
#include "stepsim/report.hpp"

using stepsim::Activity;
using stepsim::CommKind;
using stepsim::SimulationResult;

namespace {

// A 2-layer GPT (hidden 2048, 64 M parameters per layer) with 32 Ki tokens per GPU, so that
// its compute takes several times as long as its gradient AllReduce and DDP hides every
// bucket but the last. No launch cost and no slowdown beside communication: a GPU's step
// is then exactly its kernels.
std::string job(int dp, int micro_batch = 16) {
  return R"({ "model": { "name": "gpt-2l", "layers": 2, "hidden": 2048, "heads": 16, "vocab": 32000,
      "seq_len": 2048 }, "cluster": "dgx-h100-ndr", "parallel": { "dp": )" +
         std::to_string(dp) + R"( }, "training": { "global_batch": )" + std::to_string(dp * micro_batch) +
         R"(, "micro_batch": )" + std::to_string(micro_batch) + R"( } })";
}

const std::vector<std::string> kExact{R"(cluster.gpu.kernel_launch="0 us")", "cluster.gpu.efficiency.comm_slowdown=0"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

SimulationResult run(const std::string& text, const std::vector<std::string>& sets) {
  return stepsim::simulate(stepsim::io::load_scenario_text(text, "job.json", sets));
}

const stepsim::RankTimeline& rank_of(const SimulationResult& r, int rank) {
  for (const auto& t : r.timeline.ranks)
    if (t.rank == rank) return t;
  throw std::out_of_range("no such rank");
}

double compute_s(const stepsim::RankTimeline& rank) {
  double s = 0;
  for (const auto& iv : rank.intervals)
    if (iv.activity == Activity::compute) s += (iv.end - iv.start).seconds();
  return s;
}

double longest_comm_s(const SimulationResult& r, int rank, CommKind kind) {
  double s = 0;
  for (const auto& iv : rank_of(r, rank).intervals)
    if (iv.activity == Activity::comm && iv.kind == kind) s = std::max(s, (iv.end - iv.start).seconds());
  return s;
}

double wait(const stepsim::Report& r, CommKind kind) {
  return r.ranks.rendezvous_wait_s[static_cast<std::size_t>(kind)];
}

}  // namespace

TEST_CASE("one GPU at 0.8x speed in a 1,024-GPU DDP job slows the step by a quarter of its compute") {
  const std::vector<std::string> all = with(kExact, {"simulation.ranks=all"});
  // 64 Ki tokens per GPU: with 32 Ki the last 32 MiB bucket's AllReduce across 128 nodes
  // (0.60 ms) outlasts the backward left after it (0.57 ms) and delays the embedding's.
  const SimulationResult even = run(job(1024, 32), all);
  const SimulationResult slow =
      run(job(1024, 32), with(all, {R"(simulation.variation.gpu_speed=[{"rank": 517, "factor": 0.8}])"}));
  // Every bucket's AllReduce waits for GPU 517, whose kernels take 1/0.8 as long, and runs
  // hidden behind its backward; the last bucket's AllReduce, as long as before, then starts
  // when its backward ends, and its optimizer step ends the job. So the step grows by
  // (1/0.8 − 1) of the GPU's compute, forward, backward and optimizer.
  const double compute = compute_s(rank_of(even, 517));
  const double expected = compute * (1 / 0.8 - 1);
  CHECK(even.report.ranks.straggler.rank == -1);
  CHECK(slow.report.step_time_s - even.report.step_time_s == Approx(expected).epsilon(0.002));
  CHECK(slow.report.ranks.straggler.rank == 517);
  CHECK(slow.report.ranks.straggler.cause == "compute at 0.8× speed");
  CHECK(slow.report.ranks.compute_s.max_rank == 517);
  CHECK(slow.report.ranks.compute_s.max == Approx(compute / 0.8).epsilon(1e-6));
  CHECK(slow.report.ranks.compute_s.median == Approx(compute).epsilon(1e-6));
  // The other 1,023 GPUs wait for it at the last bucket for a quarter of its forward and backward.
  CHECK(wait(slow.report, CommKind::dp) > 0.2 * expected);
  CHECK(wait(even.report, CommKind::dp) == 0);
}

// NCCL's collectives are bulk-synchronous: a group runs at the pace of its slowest link, as if
// every member's link were that slow. On 2 nodes NCCL reduces inside each node over NVLink
// and exchanges over the NICs, so halving the NICs slows the AllReduce, but less than twice.
const char* const kHalfNics = R"(cluster.inter_node.nic_bandwidth="200 Gb/s")";

TEST_CASE("a NIC at half its bandwidth slows the AllReduce of every member as half-speed NICs would") {
  const std::vector<std::string> all =
      with(kExact, {"simulation.ranks=all", "data_parallel.overlap_grad_reduce=false"});
  const SimulationResult even = run(job(16), all);
  const SimulationResult slow =
      run(job(16), with(all, {R"(simulation.variation.links=[{"rank": 3, "link": "nic", "factor": 0.5}])"}));
  const SimulationResult half = run(job(16), with(all, {kHalfNics}));
  // One AllReduce of every gradient (330 MB in bf16) across 2 nodes.
  const double before = longest_comm_s(even, 0, CommKind::dp);
  const double after = longest_comm_s(half, 0, CommKind::dp);
  CHECK(after > 1.1 * before);
  CHECK(after < 2 * before);
  CHECK(longest_comm_s(slow, 0, CommKind::dp) == Approx(after).epsilon(1e-9));
  CHECK(longest_comm_s(slow, 15, CommKind::dp) == Approx(after).epsilon(1e-9));
}

// A failed NIC is not a slower one: NCCL finds the NICs left at their line rate, and the
// node's GPUs share them, as on a node built with fewer NICs; other jobs' traffic shares the
// NICs too, unseen by NCCL. On this 2-node job 4 of 8 NICs down is the node with 4 NICs for its
// 8 GPUs, and half of every NIC taken by other jobs loads the links as it does (it was costed as 200 Gb/s NICs, which
// NCCL's cost model prices lower still at mid sizes: 13 % slower on the default job cut to 4
// layers).
const char* const kFourNics = "cluster.inter_node.nics_per_node=4";

TEST_CASE("failed NICs and other jobs' traffic take their share of the network in both modes") {
  const std::vector<std::string> one_ar = with(kExact, {"data_parallel.overlap_grad_reduce=false"});
  const double half = longest_comm_s(run(job(16), with(one_ar, {kFourNics})), 0, CommKind::dp);
  CHECK(half > 1.1 * longest_comm_s(run(job(16), one_ar), 0, CommKind::dp));
  // NCCL never sees the other jobs: it keeps an NVLS-Tree head per NIC, 8, where the 4-NIC node
  // has 4 (search.cc), so the busy NICs cost less than the missing ones.
  const SimulationResult busy = run(job(16), with(one_ar, {"simulation.variation.background_traffic=0.5"}));
  CHECK(longest_comm_s(busy, 0, CommKind::dp) < half);
  const SimulationResult busy_all =
      run(job(16), with(one_ar, {"simulation.variation.background_traffic=0.5", "simulation.ranks=all"}));
  CHECK(busy_all.report.step_time_s == Approx(busy.report.step_time_s).epsilon(1e-9));
  // 4 of node 1's 8 NICs down: its GPUs share the other 4, half the bandwidth each.
  const SimulationResult failed = run(
      job(16), with(one_ar, {"simulation.ranks=all", R"(simulation.variation.failed_nics=[{"node": 1, "count": 4}])"}));
  CHECK(longest_comm_s(failed, 0, CommKind::dp) == Approx(half).epsilon(1e-9));
}

// NCCL searches its graphs at communicator init on the NICs each node has, and its ranks keep
// the fewest channels and the lowest bandwidths any of them found: a NIC down at init is, to
// NCCL, a node without it. So 4 of every node's 8 NICs down is, exactly, the node built with 4
// NICs, to NCCL's cost model as to the links. Other jobs' traffic, which NCCL never sees,
// shares the links alone: it need not cost what the 4-NIC node does (the next test).
TEST_CASE("4 of every node's 8 NICs down cost what a node built with 4 NICs does, on DGX H100 and A100") {
  const std::string failed = [] {
    std::string list;
    for (int node = 0; node < 8; ++node)
      list += fmt::format(R"({}{{"node": {}, "count": 4}})", node == 0 ? "" : ", ", node);
    return "simulation.variation.failed_nics=[" + list + "]";
  }();
  for (const char* cluster : {"cluster=dgx-h100-ndr", "cluster=dgx-a100-80g-hdr"}) {
    INFO(cluster);
    const std::vector<std::string> sets = {cluster, "data_parallel.overlap_grad_reduce=false"};
    const auto step = [&](const std::vector<std::string>& more) {
      return stepsim::simulate(stepsim::io::load_scenario("ddp-1.3b-64xa100", with(sets, more)));
    };
    const SimulationResult four = step({kFourNics});
    const SimulationResult down = step({"simulation.ranks=all", failed});
    CHECK(down.report.step_time_s == Approx(four.report.step_time_s).epsilon(1e-12));
    CHECK(longest_comm_s(down, 0, CommKind::dp) == Approx(longest_comm_s(four, 0, CommKind::dp)).epsilon(1e-12));
    CHECK(step({}).report.step_time_s < four.report.step_time_s);
  }
}

// The figures docs/user-guide.md quotes ("Stragglers"): DDP 1.3B on 8 DGX H100 nodes, its
// gradients (fp32, autocast keeping the parameters fp32) reduced after the backward, with half
// of every NIC busy with other jobs' traffic against the node built with 4 NICs: a step of 187.6
// against 190.7 ms, comm_s.dp 52.7 against 55.8 ms (122.9 against 124.7 and 26.8 against 28.6 ms
// while the example reduced bf16 gradients); on DGX A100 379.3 against 388.9 ms and 105.0
// against 114.6 ms. Half of every NIC busy is not the 4-NIC node: cheaper on both. (As printed:
// to the 0.1 ms shown.)
TEST_CASE("the user guide's figures for half of every NIC busy against 4 NICs are what the program prints") {
  struct Figures {
    const char* cluster;
    double busy_step_ms, busy_dp_ms, four_step_ms, four_dp_ms;
  };
  for (const Figures& f : {Figures{"cluster=dgx-h100-ndr", 187.6, 52.7, 190.7, 55.8},
                           Figures{"cluster=dgx-a100-80g-hdr", 379.3, 105.0, 388.9, 114.6}}) {
    INFO(f.cluster);
    const auto step = [&](const char* more) {
      return stepsim::simulate(stepsim::io::load_scenario("ddp-1.3b-64xa100",
                                                          {f.cluster, "data_parallel.overlap_grad_reduce=false", more}))
          .report;
    };
    const stepsim::Report busy = step("simulation.variation.background_traffic=0.5");
    const stepsim::Report four = step(kFourNics);
    const auto dp = static_cast<std::size_t>(CommKind::dp);
    CHECK(std::round(busy.step_time_s * 1e4) / 10 == f.busy_step_ms);
    CHECK(std::round(busy.comm_s[dp] * 1e4) / 10 == f.busy_dp_ms);
    CHECK(std::round(four.step_time_s * 1e4) / 10 == f.four_step_ms);
    CHECK(std::round(four.comm_s[dp] * 1e4) / 10 == f.four_dp_ms);
  }
}

TEST_CASE("a group is costed on the working NICs of its node with the fewest") {
  const stepsim::Scenario s = stepsim::io::load_scenario_text(
      job(32), "job.json",
      {"simulation.ranks=all", R"(simulation.variation.failed_nics=[{"node": 1, "count": 2}, {"node": 2, "count": 5},
                                                                   {"node": 2, "count": 1}])"});
  // Ranks 0, 8, 16, 24 sit on nodes 0 to 3: node 2 has 2 of its 8 NICs left.
  CHECK(stepsim::parallelism::link_shares(s, std::vector<int>{0, 8, 16, 24}).nics == 2);
  CHECK(stepsim::parallelism::link_shares(s, std::vector<int>{0, 8}).nics == 6);
  CHECK(stepsim::parallelism::link_shares(s, std::vector<int>{0, 1, 2}).nics == 0);  // node 0 has all 8
  CHECK(stepsim::parallelism::link_shares(s, std::vector<int>{24, 25}).whole());
}

TEST_CASE("two entries failing NICs of one node fail their sum, as one entry of that count does") {
  const std::vector<std::string> one_ar =
      with(kExact, {"data_parallel.overlap_grad_reduce=false", "simulation.ranks=all"});
  const double half = longest_comm_s(run(job(16), with(one_ar, {kFourNics})), 0, CommKind::dp);
  // 2 + 2 of node 1's 8 NICs down: its GPUs share the other 4, half the bandwidth.
  const SimulationResult split =
      run(job(16), with(one_ar, {R"(simulation.variation.failed_nics=[{"node": 1, "count": 2},
                                                               {"node": 1, "count": 2}])"}));
  const SimulationResult whole =
      run(job(16), with(one_ar, {R"(simulation.variation.failed_nics=[{"node": 1, "count": 4}])"}));
  CHECK(longest_comm_s(split, 0, CommKind::dp) == Approx(half).epsilon(1e-9));
  CHECK(split.report.step_time_s == whole.report.step_time_s);
}

// A degradation that every GPU of the job shares is a slower cluster: NCCL sees the slower
// links when it builds its rings, and the step must be the one of the cluster preset with
// that bandwidth. 32 GPUs on 4 nodes: the gradient AllReduce is a ring bound by the NICs.
TEST_CASE("a link factor on every node equals the cluster with that bandwidth") {
  const std::vector<std::string> all = with(kExact, {"simulation.ranks=all"});
  const auto every_node = [](const char* link, double factor) {
    std::string list;
    for (int node = 0; node < 4; ++node)
      list += fmt::format(R"({}{{"node": {}, "link": "{}", "factor": {}}})", node == 0 ? "" : ", ", node, link, factor);
    return "simulation.variation.links=[" + list + "]";
  };
  for (const double f : {0.5, 0.2}) {
    INFO("factor " << f);
    const double nvlink = run(job(32), with(all, {every_node("nvlink", f)})).report.step_time_s;
    const double intra =
        run(job(32), with(all, {fmt::format(R"(cluster.intra_node.bandwidth="{} GB/s")", 450 * f)})).report.step_time_s;
    CHECK(nvlink == Approx(intra).epsilon(1e-9));
    const double nic = run(job(32), with(all, {every_node("nic", f)})).report.step_time_s;
    const double inter =
        run(job(32), with(all, {fmt::format(R"(cluster.inter_node.nic_bandwidth="{} Gb/s")", 400 * f)}))
            .report.step_time_s;
    CHECK(nic == Approx(inter).epsilon(1e-9));
  }
  // Other jobs' traffic takes the same share of every NIC, in both modes: half of each loads
  // the links as two GPUs on each NIC do, but NCCL, which does not see it, keeps a head per NIC
  // for its NVLS-Tree, 8 per node where the 4-NIC node has 4.
  for (const char* mode : {"simulation.ranks=representative", "simulation.ranks=all"}) {
    INFO(mode);
    const double busy =
        run(job(32), with(kExact, {mode, "simulation.variation.background_traffic=0.5"})).report.step_time_s;
    const double shared = run(job(32), with(kExact, {mode, kFourNics})).report.step_time_s;
    CHECK(busy < shared);
  }
}

// A factor above 1 is a faster link, as a partly upgraded cluster has: on every node it is
// the cluster with that bandwidth (it made no difference while a group's slowest link was
// sought from 1 down). The gradient AllReduce alone, exposed: over NVLink on one node of 8,
// over the NICs on 4 nodes of 200 Gb/s NICs (at 400 Gb/s the AllReduce no longer waits on
// them).
TEST_CASE("a link factor above 1 on every node equals the cluster with that much more bandwidth") {
  const std::vector<std::string> all =
      with(kExact, {"simulation.ranks=all", "data_parallel.overlap_grad_reduce=false"});
  const auto every_node = [](int nodes, const char* link, int factor) {
    std::string list;
    for (int node = 0; node < nodes; ++node)
      list += fmt::format(R"({}{{"node": {}, "link": "{}", "factor": {}}})", node == 0 ? "" : ", ", node, link, factor);
    return "simulation.variation.links=[" + list + "]";
  };
  const double one_node = run(job(8), all).report.step_time_s;
  const double nvlink = run(job(8), with(all, {every_node(1, "nvlink", 2)})).report.step_time_s;
  const double intra = run(job(8), with(all, {R"(cluster.intra_node.bandwidth="900 GB/s")"})).report.step_time_s;
  CHECK(intra < one_node);
  CHECK(nvlink == Approx(intra).epsilon(1e-9));
  const std::vector<std::string> slow_nics = with(all, {kHalfNics});
  const double four_nodes = run(job(32), slow_nics).report.step_time_s;
  const double nic = run(job(32), with(slow_nics, {every_node(4, "nic", 2)})).report.step_time_s;
  const double inter = run(job(32), all).report.step_time_s;
  CHECK(inter < four_nodes);
  CHECK(nic == Approx(inter).epsilon(1e-9));
}

// TP 8 inside each node, DP 8 across the nodes: rank 9 (node 1, GPU 1) takes part in node 1's
// TP group and in the DP group of GPUs 1 of every node. Its slow NVLink slows node 1's TP
// collectives for every member, the other nodes' DP peers wait for node 1, and the report must
// say whose hardware it is. Its slow NIC carries the DP AllReduce of the GPUs 1 alone, which
// it slows for all of them alike at the step's end: nobody waits, and nobody is named.
TEST_CASE("the straggler of a job with one slow link is the rank whose link is slow") {
  const std::string llama = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": { "tp": 8, "dp": 8 },
    "training": { "global_batch": 64, "micro_batch": 1 }, "simulation": { "ranks": "all" } })";
  const auto slow = [&](const char* link) {
    return run(llama, {fmt::format(R"(simulation.variation.links=[{{"rank": 9, "link": "{}", "factor": 0.5}}])", link)})
        .report.ranks;
  };
  const stepsim::RanksReport nvlink = slow("nvlink");
  CHECK(nvlink.straggler.rank == 9);
  CHECK(nvlink.straggler.cause.starts_with("NVLink at 0.5× bandwidth"));
  CHECK(nvlink.straggler.cause.find("no variation") == std::string::npos);
  const stepsim::RanksReport nic = slow("nic");
  // (Members arrive picoseconds apart where durations were rounded: no wait.)
  CHECK(std::all_of(nic.rendezvous_wait_max_s.begin(), nic.rendezvous_wait_max_s.end(),
                    [](double w) { return w < 1e-9; }));
  CHECK(nic.straggler.rank == -1);
}

// GPT 1.3B on 4 stages x DP 16: rank 16 (stage 1) at 0.8x compute reaches its collectives
// late itself, and through the pipeline holds back stage 0's rank 0, which arrives last at the
// collectives it shares; its cause is its late work, not collectives that run slower for all
// (a slow link's).
TEST_CASE("a slow GPU's straggler cause says its late work holds the others back") {
  const std::string gpt = R"({ "preset": "ddp-1.3b-64xa100", "parallel": { "pp": 4, "dp": 16 },
    "training": { "global_batch": 128, "micro_batch": 1 }, "simulation": { "ranks": "all" } })";
  const auto cause = [&](const std::string& variation) {
    const SimulationResult r = run(gpt, {variation});
    CHECK(r.report.ranks.straggler.rank == 16);
    return r.report.ranks.straggler.cause;
  };
  const std::string gpu = cause(R"(simulation.variation.gpu_speed=[{"rank": 16, "factor": 0.8}])");
  CHECK(gpu.starts_with("compute at 0.8× speed (its late work holds back the ranks that wait on it"));
  const std::string nic = cause(R"(simulation.variation.links=[{"rank": 16, "link": "nic", "factor": 0.5}])");
  CHECK(nic.starts_with("network link at 0.5× bandwidth (its collectives run slower for every member"));
}

TEST_CASE("a slow node's GPUs are the stragglers") {
  const SimulationResult r =
      run(job(32),
          with(kExact, {"simulation.ranks=all", R"(simulation.variation.node_speed=[{"node": 2, "factor": 0.9}])"}));
  CHECK(r.report.ranks.straggler.rank >= 16);
  CHECK(r.report.ranks.straggler.rank < 24);
  CHECK(r.report.ranks.straggler.cause == "compute at 0.9× speed");
}

// A factor every GPU shares (every node's NICs at half, or other jobs taking half of every
// NIC) singles out no GPU: the ranks that arrive last under jitter do so by their draws, and
// the cause names what makes a rank slower than the fastest GPU of the job, nothing else.
TEST_CASE("a link factor every GPU shares is no straggler's cause") {
  const std::vector<std::string> jitter =
      with(kExact, {"simulation.ranks=all", "simulation.variation.jitter.distribution=normal",
                    "simulation.variation.jitter.sigma=0.05"});
  const std::string every_nic =
      R"(simulation.variation.links=[{"node": 0, "link": "nic", "factor": 0.5}, {"node": 1, "link": "nic", "factor": 0.5}])";
  for (const std::string& shared : {every_nic, std::string("simulation.variation.background_traffic=0.5")}) {
    INFO(shared);
    const SimulationResult r = run(job(16), with(jitter, {shared}));
    CHECK(r.report.ranks.straggler.rank >= 0);
    CHECK(r.report.ranks.straggler.cause == "kernel jitter");
    // Without jitter the GPUs are alike: nobody waits, and nobody is named.
    const SimulationResult even = run(job(16), with(kExact, {"simulation.ranks=all", shared}));
    CHECK(even.report.ranks.straggler.rank == -1);
    CHECK(even.report.ranks.straggler.cause.empty());
  }
}

// One GPU's NIC at half among NICs that other jobs leave half of (or that run at half on every
// node): against the others it carries half as much, which is what the cause says (0.25 is its
// share of the line rate, which no GPU of the job has). GPT 1.3B on 4 stages x DP 16, rank 16
// (stage 1) as in the test above.
TEST_CASE("a slow NIC among NICs every GPU shares a factor of is named by its share of the fastest") {
  const std::string gpt = R"({ "preset": "ddp-1.3b-64xa100", "parallel": { "pp": 4, "dp": 16 },
    "training": { "global_batch": 128, "micro_batch": 1 }, "simulation": { "ranks": "all" } })";
  std::string every_node;
  for (int node = 0; node < 8; ++node)
    every_node += fmt::format(R"({{"node": {}, "link": "nic", "factor": 0.5}}, )", node);
  const std::string rank16 = R"({"rank": 16, "link": "nic", "factor": 0.5})";
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"simulation.variation.background_traffic=0.5",
                                 "simulation.variation.links=[" + rank16 + "]"},
        std::vector<std::string>{"simulation.variation.links=[" + every_node + rank16 + "]"}}) {
    INFO(sets.front());
    const SimulationResult r = run(gpt, sets);
    CHECK(r.report.ranks.straggler.rank == 16);
    CHECK(r.report.ranks.straggler.cause.starts_with("network link at 0.5× bandwidth (its collectives run slower"));
  }
}

// Variation names a straggler only where somebody waited for it. A job of one GPU has no
// collective; a NIC at half on 16 GPUs that reduce their gradients once, after the backward,
// slows that AllReduce for every member alike, and nobody waits for anybody.
TEST_CASE("slow hardware that makes nobody wait names no straggler") {
  const std::vector<std::string> all = with(kExact, {"simulation.ranks=all"});
  const SimulationResult alone =
      run(job(1), with(all, {R"(simulation.variation.gpu_speed=[{"rank": 0, "factor": 0.8}])"}));
  const SimulationResult slow_nic =
      run(job(16), with(all, {"data_parallel.overlap_grad_reduce=false",
                              R"(simulation.variation.links=[{"rank": 3, "link": "nic", "factor": 0.5}])"}));
  for (const SimulationResult* r : {&alone, &slow_nic}) {
    for (std::size_t k = 0; k < stepsim::kCommKinds; ++k) CHECK(r->report.ranks.rendezvous_wait_max_s[k] == 0);
    CHECK(r->report.ranks.straggler.rank == -1);
    CHECK(r->report.ranks.straggler.cause.empty());
    std::ostringstream json;
    stepsim::report::write_json(r->report, json);
    const boost::json::value straggler = boost::json::parse(json.str()).at("ranks").at("straggler");
    CHECK(straggler.at("rank").is_null());
    CHECK(straggler.at("cause").as_string().empty());
    CHECK(straggler.at("caused_wait_s").to_number<double>() == 0);
    std::ostringstream table;
    stepsim::report::write_table(r->report, table);
    CHECK(table.str().find("straggler") == std::string::npos);
  }
  CHECK(slow_nic.report.step_time_s >
        run(job(16), with(all, {"data_parallel.overlap_grad_reduce=false"})).report.step_time_s);
}

// Activation offload on an x86 host copies over each GPU's PCIe link as a flow of a group of
// the rank alone; representative mode's jitter needs each group's real members, and once
// stopped with an internal error on those groups. One member waits for nobody: the copies add
// no rendezvous wait, and the jitter's TP wait is there as without offload.
TEST_CASE("representative mode's jitter runs beside activation offload over PCIe") {
  const std::vector<std::string> jitter = {"simulation.variation.jitter.distribution=normal",
                                           "simulation.variation.jitter.sigma=0.1"};
  const std::vector<std::string> offload = {"parallel.sequence_parallel=true", "training.activation_offload_layers=24"};
  const SimulationResult even = stepsim::simulate(stepsim::io::load_scenario("default", offload));
  const SimulationResult r = stepsim::simulate(stepsim::io::load_scenario("default", with(offload, jitter)));
  CHECK(r.report.step_time_s > even.report.step_time_s);
  CHECK(wait(r.report, CommKind::tp) > 0);
  CHECK(wait(r.report, CommKind::other) == 0);
}

// Representative mode under jitter: the step ends the expected wait for the slowest real rank
// after the simulated rank's last op, and that rank stands for them all, so its step time in
// the "ranks" figures is the step's (it was its own last op's: 2.411 s beside a 2.413 s step
// on the default scenario under 5 % normal jitter). With a pipeline, the last stage's too.
TEST_CASE("representative mode's ranks under jitter take as long as the step") {
  const std::vector<std::string> jitter = {"simulation.variation.jitter.distribution=normal",
                                           "simulation.variation.jitter.sigma=0.05"};
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{}, std::vector<std::string>{"parallel.pp=2", "parallel.dp=4"}}) {
    const SimulationResult r = stepsim::simulate(stepsim::io::load_scenario("default", with(layout, jitter)));
    INFO(layout.size());
    REQUIRE(wait(r.report, CommKind::tp) > 0);
    CHECK(r.report.ranks.step_time_s.max == Approx(r.report.step_time_s).epsilon(1e-12));
  }
}

TEST_CASE("kernel jitter is the same for a seed and differs between seeds") {
  const std::vector<std::string> jitter =
      with(kExact, {"simulation.ranks=all", "simulation.variation.jitter.distribution=normal",
                    "simulation.variation.jitter.sigma=0.05"});
  const double a = run(job(16), with(jitter, {"simulation.variation.jitter.seed=3"})).report.step_time_s;
  const double b = run(job(16), with(jitter, {"simulation.variation.jitter.seed=3"})).report.step_time_s;
  const double c = run(job(16), with(jitter, {"simulation.variation.jitter.seed=4"})).report.step_time_s;
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("Blom's expected maximum of n normal draws is within 1 % of the exact figures") {
  // Exact expected maxima of 2, 10, 100 and 1,000 standard normal draws (Harter 1961).
  CHECK(stepsim::parallelism::expected_max_normal(1) == 0);
  CHECK(stepsim::parallelism::expected_max_normal(2) == Approx(0.5642).epsilon(0.05));
  CHECK(stepsim::parallelism::expected_max_normal(10) == Approx(1.5388).epsilon(0.01));
  CHECK(stepsim::parallelism::expected_max_normal(100) == Approx(2.5076).epsilon(0.01));
  CHECK(stepsim::parallelism::expected_max_normal(1000) == Approx(3.2414).epsilon(0.01));
}

TEST_CASE("the expected maximum of a jitter sum is each distribution's own: bounded, long-tailed or normal") {
  using stepsim::JitterKind;
  using stepsim::parallelism::expected_max_normal;
  using stepsim::parallelism::ExpectedMaxima;
  // n draws uniform on [−√3, √3] (standard deviation 1): E[max] = √3·(n − 1)/(n + 1), never
  // above √3 however many members wait.
  ExpectedMaxima uniform(JitterKind::uniform, 0.05);
  CHECK(uniform.of(2, 1) == Approx(0.5773503).epsilon(0.002));
  CHECK(uniform.of(8, 1) == Approx(1.3471506).epsilon(0.002));
  CHECK(uniform.of(1000, 1) == Approx(1.7285902).epsilon(0.002));
  // Two lognormal draws of mean 1 and deviation sigma: E[max] = 1 + (2Φ(s/√2) − 1), s² =
  // ln(1 + sigma²) (half the Gini mean difference): 0.56372 sigma above the mean at sigma
  // 0.05, 0.52328 at sigma 0.5 (whose long tail spreads the grid's bins wider).
  CHECK(ExpectedMaxima(JitterKind::lognormal, 0.05).of(2, 1) == Approx(0.5637201).epsilon(0.002));
  ExpectedMaxima lognormal(JitterKind::lognormal, 0.5);
  CHECK(lognormal.of(2, 1) == Approx(0.5232765).epsilon(0.01));
  // A lognormal's right tail reaches further than a normal's, a uniform's not as far.
  CHECK(lognormal.of(1000, 1) > expected_max_normal(1000));
  CHECK(uniform.of(1000, 4) < expected_max_normal(1000));
  // Many kernels add up to a normal sum (central limit), whatever each one's distribution.
  CHECK(uniform.of(1000, 64) == Approx(expected_max_normal(1000)).epsilon(0.03));
  CHECK(ExpectedMaxima(JitterKind::lognormal, 0.05).of(1000, 64) == Approx(expected_max_normal(1000)).epsilon(0.03));
  CHECK(ExpectedMaxima(JitterKind::normal, 0.05).of(100, 3) == expected_max_normal(100));
  // Four equal kernels are four; one long kernel beside three short ones is close to one.
  CHECK(ExpectedMaxima::equal_kernels(4, 4) == 4);
  CHECK(ExpectedMaxima::equal_kernels(100 + 3 * 0.01, 10000 + 3 * 0.0001) == 1);
}

// The expected-maximum term against every rank drawn: the mean time a DP rank's buckets
// waited for their last member, averaged over twelve seeds (one draw of a maximum of 4,096
// varies by about 8 % of its mean; four seeds were still 8 % apart). An all-ranks run of
// this job takes under a second.
TEST_CASE("representative mode's expected wait under 5 % jitter is within 10 % of all-ranks mode's") {
  const int n = 4096;
  const std::vector<std::string> jitter =
      with(kExact, {"simulation.variation.jitter.distribution=normal", "simulation.variation.jitter.sigma=0.05"});
  const double expected = wait(run(job(n), jitter).report, CommKind::dp);
  double drawn = 0;
  constexpr int kSeeds = 12;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    const auto drawn_run =
        run(job(n), with(jitter, {"simulation.ranks=all", "simulation.variation.jitter.seed=" + std::to_string(seed)}));
    drawn += wait(drawn_run.report, CommKind::dp) / kSeeds;
  }
  INFO("representative " << expected << " s, all ranks " << drawn << " s");
  CHECK(expected > 0);
  CHECK(expected == Approx(drawn).epsilon(0.10));
}

// The last of 4,096 members: a uniform draw is bounded (√3·sigma at most), a normal one's
// expected maximum grows as √(2 ln n), and a lognormal one's right tail is longer still. So
// of the same sigma, uniform jitter keeps the members closest and lognormal spreads them
// most; all-ranks mode, which draws every kernel, is the reference (normal jitter's
// expectation is 5.6 % below it on this job, docs/report.md).
TEST_CASE("representative mode waits for the expected slowest member of each jitter distribution") {
  const int n = 4096;
  const auto jitter = [](const char* distribution) {
    return with(kExact, {fmt::format("simulation.variation.jitter.distribution={}", distribution),
                         "simulation.variation.jitter.sigma=0.05"});
  };
  const double uniform = wait(run(job(n), jitter("uniform")).report, CommKind::dp);
  const double normal = wait(run(job(n), jitter("normal")).report, CommKind::dp);
  const double lognormal = wait(run(job(n), jitter("lognormal")).report, CommKind::dp);
  INFO("uniform " << uniform << " s, normal " << normal << " s, lognormal " << lognormal << " s");
  CHECK(uniform < normal);
  CHECK(normal < lognormal);
  for (const char* distribution : {"uniform", "lognormal"}) {
    double drawn = 0;
    constexpr int kSeeds = 12;
    for (int seed = 1; seed <= kSeeds; ++seed) {
      const auto drawn_run =
          run(job(n), with(jitter(distribution),
                           {"simulation.ranks=all", "simulation.variation.jitter.seed=" + std::to_string(seed)}));
      drawn += wait(drawn_run.report, CommKind::dp) / kSeeds;
    }
    const double expected = distribution == std::string("uniform") ? uniform : lognormal;
    INFO(distribution << ": representative " << expected << " s, all ranks " << drawn << " s");
    CHECK(expected == Approx(drawn).epsilon(0.05));
  }
}

namespace {

// What kernel jitter costs a job, in representative mode or as the mean of all-ranks mode over
// `seeds` seeds: the step's growth over the step without jitter, and the mean rendezvous wait
// of each kind.
struct JitterCost {
  double step = 0;
  std::array<double, stepsim::kCommKinds> waits{};
};

JitterCost jitter_cost(const std::string& text, const std::vector<std::string>& sets, int seeds = 0) {
  const double even =
      run(text, with(sets, {"simulation.variation.jitter.distribution=none", "simulation.variation.jitter.sigma=0"}))
          .report.step_time_s;
  JitterCost cost;
  const auto add = [&](const stepsim::Report& r, double share) {
    cost.step += (r.step_time_s - even) * share;
    for (std::size_t k = 0; k < stepsim::kCommKinds; ++k) cost.waits[k] += r.ranks.rendezvous_wait_s[k] * share;
  };
  if (seeds == 0) add(run(text, sets).report, 1.0);
  for (int seed = 1; seed <= seeds; ++seed)
    add(run(text, with(sets, {"simulation.ranks=all", "simulation.variation.jitter.seed=" + std::to_string(seed)}))
            .report,
        1.0 / seeds);
  return cost;
}

double waits_of(const JitterCost& c, CommKind kind) { return c.waits[static_cast<std::size_t>(kind)]; }

// A 4-layer GPT (hidden 4096) with 10 % normal jitter: the tensor-parallel AllReduces of the
// backward run beside the weight-gradient GEMMs, so that the layer norm waiting on each holds
// back only the members whose own work was done by then.
const char* const kTensorParallel = R"({ "model": { "name": "gpt-4l", "layers": 4, "hidden": 4096, "heads": 32,
    "vocab": 32000, "seq_len": 2048 }, "cluster": "dgx-h100-ndr", "parallel": { "tp": 2, "dp": DP },
  "training": { "global_batch": BATCH, "micro_batch": 2 },
  "simulation": { "variation": { "jitter": { "distribution": "normal", "sigma": 0.1 } } } })";

std::string tensor_parallel(int dp, int batch) {
  std::string text = kTensorParallel;
  text.replace(text.find("DP"), 2, std::to_string(dp));
  text.replace(text.find("BATCH"), 5, std::to_string(batch));
  return text;
}

}  // namespace

// All-ranks mode is the reference: every kernel of every rank drawn. Before a collective's
// members were taken to meet wherever a compute op waited on one, the backward's waits of a
// TP job came out at 0.62 of that mean and the step's cost at 0.59.
TEST_CASE("representative mode's jitter on a TP job waits and costs what all-ranks mode does on average") {
  const std::string tp = tensor_parallel(1, 8);
  const std::vector<std::string> sets = with(kExact, {"cluster.nodes=1", "cluster.gpus_per_node=2"});
  const JitterCost expected = jitter_cost(tp, sets);
  const JitterCost drawn = jitter_cost(tp, sets, 200);
  INFO("representative: cost " << expected.step << " s, TP wait " << waits_of(expected, CommKind::tp)
                               << " s; all ranks: " << drawn.step << " s, " << waits_of(drawn, CommKind::tp) << " s");
  CHECK(waits_of(expected, CommKind::tp) == Approx(waits_of(drawn, CommKind::tp)).epsilon(0.15));
  CHECK(expected.step == Approx(drawn.step).epsilon(0.15));
}

// TP 2 × DP 8: the DP peers sit in different TP groups, so each TP synchronisation leaves them
// as far apart as their groups' last members, and their drift grows over the whole step. It
// came out at 0.29 of all-ranks mode's DP wait, with the step's cost at 0.31.
TEST_CASE("representative mode's jitter on a TP x DP job keeps the DP peers' drift across TP synchronisations") {
  const std::string job = tensor_parallel(8, 64);
  const JitterCost expected = jitter_cost(job, {});
  const JitterCost drawn = jitter_cost(job, {}, 100);
  INFO("representative: cost " << expected.step << " s, TP wait " << waits_of(expected, CommKind::tp) << " s, DP wait "
                               << waits_of(expected, CommKind::dp) << " s; all ranks: " << drawn.step << " s, "
                               << waits_of(drawn, CommKind::tp) << " s, " << waits_of(drawn, CommKind::dp) << " s");
  CHECK(waits_of(expected, CommKind::dp) == Approx(waits_of(drawn, CommKind::dp)).epsilon(0.15));
  CHECK(waits_of(expected, CommKind::tp) == Approx(waits_of(drawn, CommKind::tp)).epsilon(0.15));
  CHECK(expected.step == Approx(drawn.step).epsilon(0.15));
}

// FSDP on 8 GPUs, 10 % jitter: each layer's AllGather is prefetched and ends long before the
// layer needs it, so no collective holds the ranks together until the optimizer and they
// drift apart over the whole step. It came out at 0.22 of all-ranks mode's wait and 0.14 of
// its cost.
TEST_CASE("representative mode's jitter on an FSDP job lets the ranks drift where no collective holds them back") {
  const std::string fsdp = R"({ "preset": "fsdp-llama2-7b-8xh100", "simulation": { "variation": {
    "jitter": { "distribution": "normal", "sigma": 0.1 } } } })";
  const JitterCost expected = jitter_cost(fsdp, {});
  const JitterCost drawn = jitter_cost(fsdp, {}, 30);
  INFO("representative: cost " << expected.step << " s, FSDP wait " << waits_of(expected, CommKind::fsdp)
                               << " s; all ranks: " << drawn.step << " s, " << waits_of(drawn, CommKind::fsdp) << " s");
  CHECK(waits_of(expected, CommKind::fsdp) == Approx(waits_of(drawn, CommKind::fsdp)).epsilon(0.15));
  CHECK(expected.step == Approx(drawn.step).epsilon(0.15));
}

namespace {

std::vector<std::string> normal_jitter(double sigma) {
  return {"simulation.variation.jitter.distribution=normal",
          fmt::format("simulation.variation.jitter.sigma={}", sigma)};
}

double ms(double s) { return 1e3 * s; }

}  // namespace

// docs/report.md ("Ranks that differ") sets representative mode beside the mean of all-ranks
// mode on the embedded examples: each figure it states is the program's, over the seeds it
// names, so that a change that moves one fails here (its DDP example's once stood at the 5 %
// jitter's 6.9 ms against 7.5 while the sentence said 10 %, where the program gives 15.9 ms
// against 16.1).
TEST_CASE("docs/report.md states the jitter costs the program gives on the examples", "[slow]") {
  const auto example = [](const char* name) { return fmt::format(R"({{"preset": "{}"}})", name); };
  const std::string doc = stepsim::test::doc_one_line("docs/report.md");
  const auto stated = [&doc](const std::string& figure) {
    INFO(figure);
    CHECK(doc.find(figure) != std::string::npos);
  };
  const JitterCost d5 = jitter_cost(example("default"), normal_jitter(0.05));
  const JitterCost d5_all = jitter_cost(example("default"), normal_jitter(0.05), 10);
  const JitterCost d10 = jitter_cost(example("default"), normal_jitter(0.1));
  const JitterCost d10_all = jitter_cost(example("default"), normal_jitter(0.1), 10);
  stated(
      fmt::format("at 5 % jitter costs the step {:.1f} ms against {:.1f} (TP wait {:.1f} ms against {:.1f}, DP wait "
                  "{:.1f} against {:.1f}); at 10 %, {:.0f} ms against {:.0f} (DP wait {:.0f} against {:.0f});",
                  ms(d5.step), ms(d5_all.step), ms(waits_of(d5, CommKind::tp)), ms(waits_of(d5_all, CommKind::tp)),
                  ms(waits_of(d5, CommKind::dp)), ms(waits_of(d5_all, CommKind::dp)), ms(d10.step), ms(d10_all.step),
                  ms(waits_of(d10, CommKind::dp)), ms(waits_of(d10_all, CommKind::dp))));
  const JitterCost k = jitter_cost(example("korthikanti-22b"), normal_jitter(0.1));
  const JitterCost k_all = jitter_cost(example("korthikanti-22b"), normal_jitter(0.1), 10);
  stated(fmt::format("`korthikanti-22b` (TP 8) {:.1f} ms against {:.1f};", ms(k.step), ms(k_all.step)));
  const JitterCost g = jitter_cost(example("gpt3-175b-selene"), normal_jitter(0.1));
  const JitterCost g_all = jitter_cost(example("gpt3-175b-selene"), normal_jitter(0.1), 6);
  stated(fmt::format("`gpt3-175b-selene` (TP 8 × PP 8) {:.2f} s against {:.2f};", g.step, g_all.step));
  const JitterCost f = jitter_cost(example("fsdp-llama3-70b"), normal_jitter(0.1));
  const JitterCost f_all = jitter_cost(example("fsdp-llama3-70b"), normal_jitter(0.1), 10);
  stated(fmt::format("`fsdp-llama3-70b` (FSDP 64) {:.0f} ms against {:.0f} (FSDP wait {:.2f} s against {:.2f});",
                     ms(f.step), ms(f_all.step), waits_of(f, CommKind::fsdp), waits_of(f_all, CommKind::fsdp)));
  const JitterCost p = jitter_cost(example("ddp-1.3b-64xa100"), normal_jitter(0.1));
  const JitterCost p_all = jitter_cost(example("ddp-1.3b-64xa100"), normal_jitter(0.1), 20);
  stated(fmt::format("`ddp-1.3b-64xa100` {:.1f} ms against {:.1f}", ms(p.step), ms(p_all.step)));
}

// E[max(M, L)] − E[M] = ∫ Φ(x)ⁿ dx up to L, kept on a grid and interpolated between its
// points: for one draw the integral is L·Φ(L) + φ(L) in closed form; far above the mean it is
// L − E[M], E[M] = 1/√π for two draws; elsewhere a direct trapezoid sum of 200,000 steps.
TEST_CASE("the rise of the expected maximum above a level is the integral of the maxima's distribution") {
  const boost::math::normal_distribution<double> normal;
  stepsim::parallelism::RaisedByLevel raised;
  CHECK(raised.of(-9, 8) == 0);
  for (const double level : {-3.0, -0.3, 0.0, 0.3, 1.01, 2.5, 7.9}) {
    INFO("level " << level);
    CHECK(raised.of(level, 1) ==
          Approx(level * boost::math::cdf(normal, level) + boost::math::pdf(normal, level)).margin(1e-7));
  }
  CHECK(raised.of(12, 2) == Approx(12 - 1 / std::sqrt(3.14159265358979)).margin(1e-7));
  const auto direct = [&normal](double level, int n) {
    constexpr int kSteps = 200000;
    const double h = (level + 8) / kSteps;
    double sum = 0;
    for (int i = 0; i <= kSteps; ++i)
      sum += (i == 0 || i == kSteps ? 0.5 : 1.0) * std::pow(boost::math::cdf(normal, -8 + i * h), n);
    return sum * h;
  };
  for (const int n : {2, 8, 128, 16384})
    for (const double level : {-1.7, 0.45, 2.013, 3.3, 4.1}) {
      INFO("n " << n << ", level " << level);
      CHECK(raised.of(level, n) == Approx(direct(level, n)).margin(1e-7));
    }
}

TEST_CASE("the variance of the largest of n normal draws is the published figure") {
  stepsim::parallelism::ExpectedMaxima normal(stepsim::JitterKind::normal, 0.05);
  // 1 − 1/π for two draws; for eight the square of Harter's (1961) standard deviation, 0.6107.
  CHECK(normal.variance_of(2, 1) == Approx(1 - 1 / 3.14159265358979).epsilon(1e-4));
  CHECK(normal.variance_of(8, 1) == Approx(0.6107 * 0.6107).epsilon(1e-3));
  CHECK(normal.variance_of(1, 1) == 1);
  // Two uniform draws: the larger is Beta(2, 1) on [−√3, √3], of variance 12/18 = 2/3.
  CHECK(stepsim::parallelism::ExpectedMaxima(stepsim::JitterKind::uniform, 0.05).variance_of(2, 1) ==
        Approx(2.0 / 3).epsilon(0.005));
}
TEST_CASE("a run that keeps only the ranks it measures reports exactly what a run keeping every rank reports") {
  // Two pipeline stages of 8 data-parallel replicas, jitter and one slow GPU: the ranks differ,
  // the critical path is one rank among 16, and each stage is measured on its first rank.
  const std::string text = job(8, 4);
  const std::vector<std::string> sets =
      with(kExact, {"simulation.ranks=all", "parallel.pp=2", "training.global_batch=128",
                    "simulation.variation.jitter.distribution=normal", "simulation.variation.jitter.sigma=0.05",
                    R"(simulation.variation.gpu_speed=[{"rank": 13, "factor": 0.9}])"});
  const stepsim::Scenario scenario = stepsim::io::load_scenario_text(text, "job.json", sets);
  const SimulationResult full = stepsim::simulate(scenario);
  const SimulationResult lean = stepsim::simulate(scenario, stepsim::SimulateOptions::report_only());
  const stepsim::Report& a = full.report;
  const stepsim::Report& b = lean.report;
  CHECK(a.step_time_s == b.step_time_s);
  CHECK(a.breakdown_s == b.breakdown_s);
  CHECK(a.comm_s == b.comm_s);
  CHECK(a.notes == b.notes);
  REQUIRE(a.stages.size() == 2);
  REQUIRE(b.stages.size() == 2);
  for (std::size_t s = 0; s < 2; ++s) {
    CHECK(a.stages[s].rank == b.stages[s].rank);
    CHECK(a.stages[s].step_time_s == b.stages[s].step_time_s);
    CHECK(a.stages[s].breakdown_s == b.stages[s].breakdown_s);
  }
  CHECK(a.ranks.simulated == 16);
  CHECK(b.ranks.simulated == 16);
  CHECK(a.ranks.step_time_s == b.ranks.step_time_s);
  CHECK(a.ranks.compute_s == b.ranks.compute_s);
  CHECK(a.ranks.rendezvous_wait_s == b.ranks.rendezvous_wait_s);
  CHECK(a.ranks.rendezvous_wait_max_s == b.ranks.rendezvous_wait_max_s);
  CHECK(a.ranks.straggler.rank == b.ranks.straggler.rank);
  CHECK(a.ranks.straggler.caused_wait_s == b.ranks.straggler.caused_wait_s);
  CHECK(a.ranks.straggler.cause == b.ranks.straggler.cause);

  // Kept: the first rank, each stage's first, and the critical path's (the breakdown's note
  // names it); every other rank's intervals are counted and dropped.
  std::size_t kept = 0;
  REQUIRE(full.timeline.ranks.size() == lean.timeline.ranks.size());
  for (std::size_t r = 0; r < full.timeline.ranks.size(); ++r) {
    const stepsim::RankTimeline& x = full.timeline.ranks[r];
    const stepsim::RankTimeline& y = lean.timeline.ranks[r];
    CHECK(y.intervals.size() + y.dropped == x.intervals.size());
    if (y.intervals.empty()) continue;
    ++kept;
    const bool measured = r == 0 || y.label == b.stages[1].rank || y.label == b.stages[0].rank ||
                          std::ranges::count(b.notes, "breakdown measured on " + y.label) == 1;
    CHECK(measured);
  }
  CHECK(kept >= 2);
  CHECK(kept <= 3);
}

TEST_CASE("a run that keeps chosen ranks keeps their intervals whole") {
  const std::vector<std::string> sets =
      with(kExact, {"simulation.ranks=all", "simulation.variation.jitter.distribution=normal",
                    "simulation.variation.jitter.sigma=0.05"});
  const stepsim::Scenario scenario = stepsim::io::load_scenario_text(job(16), "job.json", sets);
  const SimulationResult full = stepsim::simulate(scenario);
  const SimulationResult some = stepsim::simulate(scenario, {[](int rank) { return rank == 9 || rank == 12; }});
  CHECK(some.report.step_time_s == full.report.step_time_s);
  for (int rank : {9, 12}) CHECK(rank_of(some, rank).intervals == rank_of(full, rank).intervals);
  CHECK(rank_of(some, 5).intervals.empty());
  CHECK(rank_of(some, 5).dropped == rank_of(full, 5).intervals.size());
}
