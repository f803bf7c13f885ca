// Sharded data parallelism end to end: FSDP's backward prefetch settings on a
// communication-bound step, ZeRO-1's overlap_param_gather, ZeRO-2 against ZeRO-1, and the
// FSDP and HSDP examples.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/simulate_support.hpp"

namespace stepsim {
namespace {

double exposed(const Report& r, CommKind k) { return r.breakdown_s.exposed_comm[static_cast<int>(k)]; }
double busy(const Report& r, CommKind k) { return r.comm_s[static_cast<int>(k)]; }

struct CollectiveTime {
  double busy = 0;     // s: the collectives run
  double exposed = 0;  // s: of which no compute runs
};

// Busy and exposed time of rank 0's `op` collectives of `kind`. Compute intervals sit on one
// stream and so do not overlap each other.
CollectiveTime collective_time(const SimulationResult& r, CommKind kind, CollOp op) {
  const auto& intervals = r.timeline.ranks.front().intervals;
  std::vector<const Interval*> compute;
  for (const Interval& i : intervals) {
    if (i.activity == Activity::compute) compute.push_back(&i);
  }
  CollectiveTime t;
  for (const Interval& i : intervals) {
    if (i.activity != Activity::comm || i.kind != kind || i.op != op) continue;
    double hidden = 0;
    for (const Interval* c : compute) {
      const Time from = max(i.start, c->start);
      const Time to = min(i.end, c->end);
      if (from < to) hidden += (to - from).seconds();
    }
    t.busy += (i.end - i.start).seconds();
    t.exposed += (i.end - i.start).seconds() - hidden;
  }
  return t;
}

// Llama 3 70B on 64 GPUs with 2048-token sequences and fused kernels (the example runs eager
// PyTorch's, whose longer compute hides more): FSDP communication about as long as the
// compute it should hide behind.
SimulationResult communication_bound(const std::string& prefetch) {
  return test::run("fsdp-llama3-70b", {"model.seq_len=2048", "training.framework=unspecified",
                                       test::set("data_parallel.backward_prefetch", prefetch)});
}

SimulationResult zero1(bool overlap_param_gather) {
  return test::run("zero1-llama3-8b-64xh100",
                   {test::set("data_parallel.overlap_param_gather", overlap_param_gather ? "true" : "false")});
}

// docs/model.md as one line, its paragraphs' line breaks and runs of spaces made single spaces.
std::string model_doc() {
  std::ifstream in(std::filesystem::path(STEPSIM_SOURCE_DIR) / "docs/model.md");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::string joined;
  for (char c : text)
    if (c != ' ' || joined.empty() || joined.back() != ' ') joined += c;
  return joined;
}

// A step in milliseconds as the documents write it: 897.2, 1,089.9.
std::string ms_text(double seconds) {
  const double ms = std::round(seconds * 1e4) / 10;
  if (ms < 1000) return fmt::format("{:.1f}", ms);
  return fmt::format("{},{:05.1f}", static_cast<int>(ms / 1000), ms - 1000 * static_cast<int>(ms / 1000));
}

}  // namespace

// docs/model.md states the FSDP1 example's step under backward_prefetch pre and post, and what
// ZeRO-2 costs the ZeRO-1 example with and without overlap: the figures are the program's own.
TEST_CASE("the model document states the sharding examples' steps that the program gives") {
  const std::string doc = model_doc();
  const auto step = [](const std::string& name, const std::vector<std::string>& sets) {
    return test::run(name, sets).report.step_time_s;
  };
  const double pre = step("fsdp-llama2-7b-8xh100", {"data_parallel.backward_prefetch=pre"});
  const double post = step("fsdp-llama2-7b-8xh100", {"data_parallel.backward_prefetch=post"});
  CHECK(doc.find(fmt::format("`fsdp-llama2-7b-8xh100`: {:.4f} s with `pre`, {:.4f} s with `post`", pre, post)) !=
        std::string::npos);
  const std::string z = "zero1-llama3-8b-64xh100";
  const std::string no_gather = "data_parallel.overlap_param_gather=false";
  const std::string serial = "data_parallel.overlap_grad_reduce=false";
  const std::string zero2 = "data_parallel.kind=zero2";
  const std::string stated = fmt::format(
      "`zero2` issues the 65 ReduceScatters twice and takes the step from {} to {} ms; without overlap, from {} to {} "
      "ms",
      ms_text(step(z, {no_gather})), ms_text(step(z, {no_gather, zero2})), ms_text(step(z, {no_gather, serial})),
      ms_text(step(z, {no_gather, serial, zero2})));
  INFO(stated);
  CHECK(doc.find(stated) != std::string::npos);
}

TEST_CASE("FSDP backward_prefetch none exposes more AllGather time than pre") {
  const SimulationResult pre = communication_bound("pre");
  const SimulationResult post = communication_bound("post");
  const SimulationResult none = communication_bound("none");
  const double busy_fsdp = busy(pre.report, CommKind::fsdp);
  CHECK(busy_fsdp > 0.7 * pre.report.step_time_s);  // communication-bound indeed
  const CollectiveTime ag_pre = collective_time(pre, CommKind::fsdp, CollOp::allgather);
  const CollectiveTime ag_none = collective_time(none, CommKind::fsdp, CollOp::allgather);
  CHECK(ag_none.busy == Approx(ag_pre.busy).epsilon(1e-6));
  CHECK(ag_none.exposed > ag_pre.exposed + 0.2 * ag_pre.busy);
  CHECK(exposed(none.report, CommKind::fsdp) > exposed(pre.report, CommKind::fsdp));
  CHECK(exposed(post.report, CommKind::fsdp) >= exposed(pre.report, CommKind::fsdp));
  CHECK(exposed(post.report, CommKind::fsdp) < exposed(none.report, CommKind::fsdp));
  CHECK(none.report.step_time_s > pre.report.step_time_s);
}

TEST_CASE("FSDP hides the AllGathers of a compute-bound step whatever the forward prefetch") {
  for (bool forward_prefetch : {false, true}) {
    const Report r =
        test::run("fsdp-llama3-70b", {test::set("data_parallel.forward_prefetch", forward_prefetch ? "true" : "false")})
            .report;
    CHECK(exposed(r, CommKind::fsdp) < 0.1 * busy(r, CommKind::fsdp));
    CHECK(busy(r, CommKind::dp) == 0);
  }
}

TEST_CASE("ZeRO-1 overlap_param_gather hides most of the parameter AllGather behind the forward") {
  const SimulationResult on = zero1(true);
  const SimulationResult off = zero1(false);
  const CollectiveTime ag_on = collective_time(on, CommKind::dp, CollOp::allgather);
  const CollectiveTime ag_off = collective_time(off, CommKind::dp, CollOp::allgather);
  REQUIRE(ag_off.busy > 0);
  CHECK(ag_off.exposed == Approx(ag_off.busy).epsilon(1e-6));  // after the optimizer step
  CHECK(ag_on.exposed < 0.3 * ag_on.busy);
  CHECK(exposed(on.report, CommKind::dp) < exposed(off.report, CommKind::dp));
  CHECK(on.report.step_time_s < off.report.step_time_s);
}

// The example runs two micro-batches: ZeRO-2 reduce-scatters the same buckets in each, twice
// the ReduceScatter time of ZeRO-1, with the same AllGathers and the same sharded update.
TEST_CASE("ZeRO-2 reduce-scatters in each micro-batch, ZeRO-1 once, and both shard the optimizer step") {
  const SimulationResult one = zero1(true);
  const SimulationResult two = test::run("zero1-llama3-8b-64xh100", {"data_parallel.kind=zero2"});
  const Report ddp =
      test::run("zero1-llama3-8b-64xh100", {"data_parallel.kind=ddp", "data_parallel.overlap_param_gather=false"})
          .report;
  const CollectiveTime rs1 = collective_time(one, CommKind::dp, CollOp::reducescatter);
  const CollectiveTime rs2 = collective_time(two, CommKind::dp, CollOp::reducescatter);
  REQUIRE(rs1.busy > 0);
  CHECK(rs2.busy == Approx(2 * rs1.busy).epsilon(0.05));
  CHECK(collective_time(two, CommKind::dp, CollOp::allgather).busy ==
        Approx(collective_time(one, CommKind::dp, CollOp::allgather).busy).epsilon(0.05));
  CHECK(two.report.step_time_s >= one.report.step_time_s);
  CHECK(two.report.breakdown_s.optimizer == Approx(one.report.breakdown_s.optimizer));
  CHECK(one.report.breakdown_s.optimizer < ddp.breakdown_s.optimizer / 8);
}

TEST_CASE("FSDP of a 7B model on 8 GPUs runs with its communication on NVLink") {
  const Report r = test::run("fsdp-llama2-7b-8xh100").report;
  CHECK(r.gpus == 8);
  CHECK(busy(r, CommKind::fsdp) > 0);
  CHECK(busy(r, CommKind::dp) == 0);
  CHECK(exposed(r, CommKind::fsdp) < 0.05 * r.step_time_s);
  CHECK(r.throughput.mfu > 0.3);
  CHECK(r.throughput.mfu < 0.8);
  const Report v2 = test::run("fsdp-llama2-7b-8xh100", {"data_parallel.fsdp_version=2"}).report;
  CHECK(v2.step_time_s == Approx(r.step_time_s).epsilon(0.1));
}

TEST_CASE("HSDP gathers inside the node and all-reduces across nodes") {
  const SimulationResult hsdp = test::run("hsdp-llama3-8b-64xh100");
  // FSDP has no shard groups: the example's shard_group goes back to its default with the kind.
  const SimulationResult fsdp =
      test::run("hsdp-llama3-8b-64xh100", {"data_parallel.kind=fsdp", "data_parallel.shard_group=0"});
  CHECK(busy(hsdp.report, CommKind::dp) > 0);
  CHECK(busy(fsdp.report, CommKind::dp) == 0);
  // The same AllGathers over NVLink alone take less time than over the 64-GPU ring.
  CHECK(collective_time(hsdp, CommKind::fsdp, CollOp::allgather).busy <
        collective_time(fsdp, CommKind::fsdp, CollOp::allgather).busy);
}

}  // namespace stepsim

// The distributed optimizer shards the experts' states over the expert-dp group, tp·cp·dp /
// (ep·etp) ranks (Megatron-Core's expert decoder), the rest over dp. Mixtral 8x7B cut to 2
// layers at TP 2, DP 4, EP 1: 8 experts of 3 · 4096 · 14336 parameters in each layer, 2818 M,
// whole at ETP 1 over an expert-dp group of 8, and 1409 M at ETP 2 over 4.
TEST_CASE("the distributed optimizer's note shards the experts over their expert-dp group") {
  const std::vector<std::string> sets{
      "model.layers=2",         "parallel.tp=2", "parallel.dp=4", "parallel.ep=1", "parallel.sequence_parallel=true",
      "training.global_batch=8"};
  const auto note = [&](const char* etp) {
    std::vector<std::string> with = sets;
    with.emplace_back(etp);
    return stepsim::test::run("mixtral-8x7b-ep8-64xh100", with).report.notes.front();
  };
  const std::string whole = note("parallel.etp=1");
  CHECK_THAT(whole,
             Catch::Contains("Adam on 1/4 of ") && Catch::Contains(" M parameters and 1/8 of the experts' 2818 M"));
  CHECK_THAT(whole, Catch::Contains("expert gradients reduced over the expert-dp group of rank 0: 8 ranks"));
  const std::string split = note("parallel.etp=2");
  CHECK_THAT(split, Catch::Contains(" M parameters and 1/4 of the experts' 1409 M"));
  CHECK_THAT(split, !Catch::Contains("expert gradients reduced over"));
}

// Mixtral 8x7B under torchtitan's FSDP2 at EP 8 over 64 H100 (TP 1): each GPU holds one expert
// of each of the 32 layers, sharded over the expert-dp group of 64 / 8 = 8 ranks, and the rest
// over the 64 FSDP ranks. By hand (h 4096, 32 query and 8 KV heads of 128, expert FFN 14336,
// vocabulary 32000, untied):
//   an expert: 3 · 4096 · 14336 = 176,160,768; a layer's rest: qkv 4096 · 6144, projection
//   4096², router 8 · 4096, two RMSNorms = 41,984,000; embedding and head 131,072,000 each,
//   final norm 4096. Rest 32 · 41,984,000 + 262,148,096 = 1,605,636,096; experts
//   32 · 176,160,768 = 5,637,144,576.
//   Sharded fp32 parameters: 1,605,636,096 / 64 + 5,637,144,576 / 8 = 729,731,136 elements,
//   2,918,924,544 bytes; gathered BF16: the root (262,148,096) and two layer units
//   (2 · 218,144,768) = 1,396,875,264 bytes; 4,315,799,808 in all.
//   Adam's two fp32 moments of the shards: 729,731,136 · 8 = 5,837,849,088.
//   Gradients: the fp32 shards 2,918,924,544, two layers' unsharded gradients awaiting their
//   fp32 ReduceScatter 2 · 218,144,768 · 4 = 1,745,158,144 and the head's BF16 gradient
//   131,076,096 · 2 = 262,152,192: 4,926,234,880.
TEST_CASE("FSDP of a mixture of experts shards the experts' states over the expert-dp group") {
  const auto r = stepsim::test::run(
      "default", {"model=mixtral-8x7b", "parallel.tp=1", "parallel.dp=64", "parallel.ep=8",
                  "training.framework=torchtitan", "data_parallel.kind=fsdp", "data_parallel.grad_reduce_dtype=fp32"});
  CHECK(r.report.memory_bytes.params == 4'315'799'808.0);
  CHECK(r.report.memory_bytes.optimizer == 5'837'849'088.0);
  CHECK(r.report.memory_bytes.grads == 4'926'234'880.0);
  CHECK_THAT(r.report.notes.front(),
             Catch::Contains("(of which the routed experts' 336.0 MiB over the 8 ranks of the expert-dp group") &&
                 Catch::Contains("Adam on 1/64 of the parameters outside the routed experts and 1/8 of theirs"));
  // The experts' FSDP traffic: a 336 MiB AllGather before each layer's forward and backward and
  // a 672 MiB ReduceScatter after its backward, per micro-batch, over the expert-dp group.
  int expert_gathers = 0;
  int layer_gathers = 0;
  int expert_reductions = 0;
  for (const auto& iv : r.timeline.ranks.front().intervals) {
    const std::string& name = r.timeline.names[iv.name];
    if (name.find("AllGather fsdp experts L0 forward, 336.0 MiB") != std::string::npos) ++expert_gathers;
    if (name.find("AllGather fsdp L0 forward, 80.1 MiB") != std::string::npos) ++layer_gathers;
    if (name.find("ReduceScatter fsdp experts L0, 672.0 MiB") != std::string::npos) ++expert_reductions;
  }
  CHECK(expert_gathers > 0);
  CHECK(expert_gathers == layer_gathers);
  CHECK(expert_reductions == layer_gathers);
}

// The notes name a mixture of experts' buckets and gathers as the step runs them. Mixtral's
// example (EP 8 over 64 H100, the distributed optimizer): Megatron-Core's buckets of at least
// max(4e7, 1e6 · 64) = 64 M parameters, in reverse registration order, take a layer's expert
// fc2 (14336 · 4096 = 58.7 M, below 64 M) and then its fc1 (117.4 M): one expert bucket a layer,
// 32, over the expert-dp group of 8. Under torchtitan's FSDP with the first layer dense, the
// dense layer (4096 · 6144 + 4096² + 3 · 4096 · 14336 + 2 · 4096 = 218,112,000 parameters) is a
// router (8 · 4096) smaller than an MoE layer (41,984,000 + 176,160,768 = 218,144,768): up to
// 436,289,536 bytes, 416.1 MiB, gathered per layer, of which the expert's 336.0 MiB.
TEST_CASE("the notes count a mixture of experts' own buckets and its largest layer's gathers") {
  const std::string zero = stepsim::test::run("mixtral-8x7b-ep8-64xh100").report.notes.front();
  CHECK_THAT(zero, Catch::Contains("18 gradient buckets of at least 64 M parameters (and 32 of the experts' over "
                                   "their expert-dp group of 8) reduce-scattered"));
  const std::string fsdp = stepsim::test::run("default", {"model=mixtral-8x7b", "model.moe.first_dense_layers=1",
                                                          "parallel.tp=1", "parallel.dp=64", "parallel.ep=8",
                                                          "training.framework=torchtitan", "data_parallel.kind=fsdp"})
                               .report.notes.front();
  CHECK_THAT(fsdp, Catch::Contains("up to 416.1 MiB gathered per layer over 64 DP ranks (of which the routed experts' "
                                   "336.0 MiB over the 8 ranks"));
}
