// Advice: the cause of the exposed communication named from the simulated step, and the
// alternatives simulated and ranked by step time.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include <boost/json.hpp>

#include "cli/simulate_support.hpp"
#include "report/report_io.hpp"
#include "simulation/advice.hpp"
#include "stepsim/error.hpp"

using stepsim::advise;

namespace {

stepsim::SimulationResult advised(const std::string& name, const std::vector<std::string>& sets, bool asked) {
  const stepsim::Scenario scenario = stepsim::io::load_scenario(name, sets);
  stepsim::SimulationResult r = stepsim::simulate(scenario);
  advise({{name, {}}, sets, asked, {}}, scenario, r);
  return r;
}

int simulated(const stepsim::Report& r) {
  int n = 0;
  for (const auto& a : r.advice) n += a.status == "ok" ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("On the default scenario the advice names TP and ranks at least three simulated alternatives") {
  const auto r = advised("", {}, false).report;
  REQUIRE(r.overlap.exposed_fraction_of_step > 0.15);
  CHECK(r.advice_cause.find("of it tp: tensor-parallel collectives are exposed") != std::string::npos);
  CHECK(r.advice_cause.find("data dependency") != std::string::npos);
  CHECK(simulated(r) >= 3);
  for (std::size_t i = 1; i < r.advice.size(); ++i)
    if (r.advice[i].status == "ok") CHECK(r.advice[i - 1].step_time_s <= r.advice[i].step_time_s);
  CHECK(r.advice.front().step_time_s < r.step_time_s);
  // TP overlap (with the sequence parallelism it needs) is simulated and hides the most of
  // the single changes; TP 2 does not fit alone, and with FSDP to fit it is faster still.
  CHECK(r.advice.front().change == "parallel.tp=2 parallel.dp=32 data_parallel.kind=fsdp");
  CHECK(r.advice.front().status == "ok");
  CHECK(r.advice.front().exposed_fraction_of_step < r.overlap.exposed_fraction_of_step);
  CHECK(r.advice[1].change == "parallel.sequence_parallel=true tensor_parallel.comm_overlap=true");
  CHECK(r.advice[1].exposed_fraction_of_step < r.overlap.exposed_fraction_of_step);
  CHECK(r.notes.back().rfind("advice: ", 0) == 0);
}

// Overlap hides all of the reduction; only bf16 gradients shorten the step more, since a model
// cast to bf16 also runs without autocast's casts.
TEST_CASE("Without gradient overlap the advice names overlap, which hides the whole reduction") {
  const auto r = advised("ddp-1.3b-64xa100", {"data_parallel.overlap_grad_reduce=false"}, false).report;
  CHECK(r.advice_cause.find("overlap_grad_reduce=false") != std::string::npos);
  REQUIRE(simulated(r) >= 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const bool bf16 = r.advice[i].change.find("training.main_grad=bf16") != std::string::npos;
    INFO(r.advice[i].change);
    CHECK((bf16 || r.advice[i].change.rfind("data_parallel.overlap_grad_reduce=true", 0) == 0));
    CHECK(r.advice[i].step_time_s < r.step_time_s);
    if (!bf16) CHECK(r.advice[i].exposed_fraction_of_step < 0.001);
  }
}

TEST_CASE("Under the exposure target there is no advice unless asked") {
  const auto quiet = advised("ddp-1.3b-64xa100", {}, false).report;
  CHECK(quiet.advice_cause.empty());
  CHECK(quiet.advice.empty());
  const auto asked = advised("ddp-1.3b-64xa100", {}, true).report;
  CHECK(asked.advice_cause.find("under the usual 5 % target") != std::string::npos);
  CHECK(simulated(asked) >= 3);
}

// Asked for, the advice names its best change even under the exposure target: on this
// scenario a larger DDP bucket shortens the step by 1.8 %, more than the 0.5 % docs/report.md
// calls worth naming.
TEST_CASE("Asked for under the exposure target the advice names the best change that shortens the step") {
  const auto asked = advised("ddp-1.3b-64xa100", {}, true).report;
  REQUIRE(asked.overlap.exposed_fraction_of_step < 0.05);
  REQUIRE(simulated(asked) >= 1);
  const auto& best = asked.advice.front();
  REQUIRE(best.status == "ok");
  REQUIRE(best.step_time_s <= 0.995 * asked.step_time_s);
  const auto note = std::find_if(asked.notes.begin(), asked.notes.end(),
                                 [](const std::string& n) { return n.rfind("advice: ", 0) == 0; });
  REQUIRE(note != asked.notes.end());
  CHECK(note->find("under the usual 5 % target") != std::string::npos);
  CHECK(note->find("best simulated change: " + best.change + " (") != std::string::npos);
  CHECK(note->find(fmt::format("step {:+.1f} %", 100.0 * (best.step_time_s / asked.step_time_s - 1.0))) !=
        std::string::npos);
}

TEST_CASE("With overlap off the report says the bucket size does not apply") {
  const auto said = [](const stepsim::Report& r, const std::string& text) {
    bool found = false;
    for (const auto& n : r.notes) found = found || n.find(text) != std::string::npos;
    return found;
  };
  const auto ddp = stepsim::test::run("ddp-1.3b-64xa100", {"data_parallel.overlap_grad_reduce=false"}).report;
  CHECK(said(ddp, "in one AllReduce after the backward"));
  CHECK(said(ddp, "bucket_cap_mb (25 MiB) and first_bucket_mb (1 MiB) do not apply"));
  // Megatron-Core's distributed optimizer without --overlap-grad-reduce: one ReduceScatter.
  const auto zero1 = stepsim::test::run("zero1-llama3-8b-64xh100", {"data_parallel.overlap_grad_reduce=false",
                                                                    "data_parallel.overlap_param_gather=false"})
                         .report;
  CHECK(said(zero1,
             "reduce-scattered in one collective after the backward (as Megatron-Core without "
             "--overlap-grad-reduce), so the bucket size (data_parallel.bucket_parameters, by default max(4e7, "
             "1e6·dp) parameters) does not apply"));
  // DeepSpeed's ZeRO all-reduces its buckets, one after another after the backward without
  // overlap_comm: the bucket size applies.
  const auto deepspeed = stepsim::test::run("zero1-llama3-8b-64xh100", {"data_parallel.overlap_grad_reduce=false",
                                                                        "data_parallel.overlap_param_gather=false",
                                                                        "training.framework=deepspeed"})
                             .report;
  CHECK(said(deepspeed,
             "the gradient buckets (data_parallel.bucket_parameters, by default reduce_bucket_size's 5e8 parameters) "
             "are all-reduced one after another after the backward (as DeepSpeed's ZeRO-1 without overlap_comm: "
             "reduce_gradients)"));
}

// Llama 3 8B at TP 2 on 64 H100 needs about 123 GiB at the peak: asked for advice, stepsim
// proposes what brings it under the 80 GB (sharding, recompute, more stages, a larger TP group),
// each simulated, and ranks first the fastest that fits.
TEST_CASE("On a job that does not fit the advice ranks the simulated changes that make it fit") {
  const std::vector<std::string> sets = {"model=llama3-8b", "parallel.tp=2", "parallel.dp=32"};
  const auto r = advised("", sets, true).report;
  REQUIRE_FALSE(r.memory_bytes.fits);
  CHECK(r.advice_cause.rfind("does not fit: ", 0) == 0);
  REQUIRE(simulated(r) >= 2);
  for (std::size_t i = 0; i < r.advice.size(); ++i) {
    INFO(r.advice[i].change);
    CHECK(r.advice[i].why.rfind("fit: ", 0) == 0);
    if (r.advice[i].status != "ok") continue;
    if (i > 0) CHECK(r.advice[i - 1].status == "ok");
    if (i > 0) CHECK(r.advice[i - 1].step_time_s <= r.advice[i].step_time_s);
    // Simulated again on its own, the change fits.
    auto with = sets;
    std::stringstream changes(r.advice[i].change);
    for (std::string s; changes >> s;) with.push_back(s);
    CHECK(stepsim::test::run("", with).report.memory_bytes.fits);
  }
  CHECK(r.notes.back().rfind("advice: does not fit: ", 0) == 0);
}

// The DDP example (PyTorch's DDP, 1.3B parameters, fp32 gradients as its parameters under
// autocast) holds its buckets beside its gradients, 4.9 GiB; with 44 GiB of headroom on its 80
// GiB that decides whether it fits (39.1 GiB in use with them, 34.0 without).
TEST_CASE("Under PyTorch's DDP the advice to fit offers the buckets as views of the gradients") {
  const std::vector<std::string> sets = {"training.memory_headroom=\"44 GiB\""};
  const auto r = advised("ddp-1.3b-64xa100", sets, true).report;
  REQUIRE_FALSE(r.memory_bytes.fits);
  bool offered = false;
  for (const auto& a : r.advice) {
    if (a.change != "data_parallel.gradient_as_bucket_view=true") continue;
    offered = true;
    CHECK(a.status == "ok");
  }
  CHECK(offered);
  auto with = sets;
  with.push_back("data_parallel.gradient_as_bucket_view=true");
  const auto views = stepsim::test::run("ddp-1.3b-64xa100", with).report;
  CHECK(views.memory_bytes.fits);
  CHECK(r.memory_bytes.buffers - views.memory_bytes.buffers == Approx(4.0 * 1.3e9).epsilon(0.05));  // fp32
}

TEST_CASE("The advice to recompute whole layers drops the modules that only selective recompute lists") {
  const std::vector<std::string> sets = {"model=llama3-8b",
                                         "parallel.tp=2",
                                         "parallel.dp=32",
                                         "training.framework=megatron",
                                         "training.recompute=selective",
                                         "training.recompute_modules=[\"core_attn\",\"mlp\"]"};
  const auto r = advised("", sets, true).report;
  REQUIRE_FALSE(r.memory_bytes.fits);
  bool full = false;
  for (const auto& a : r.advice) {
    if (a.change.find("training.recompute=full") == std::string::npos) continue;
    full = true;
    INFO(a.change << ": " << a.status);
    CHECK(a.status.rfind("not simulated", 0) == std::string::npos);
  }
  CHECK(full);
}

TEST_CASE("Under Megatron-Core the advice to reduce in bf16 takes the main gradients with it, and is simulated") {
  // The main gradients are the buffer Megatron-Core reduces: grad_reduce_dtype alone, against
  // main gradients the scenario gives in fp32, would be refused.
  const std::vector<std::string> sets = {"parallel.tp=8", "parallel.dp=8", "training.framework=megatron",
                                         "data_parallel.kind=zero1", "training.main_grad=fp32"};
  const auto r = advised("", sets, true).report;
  bool found = false;
  for (const auto& a : r.advice) {
    if (a.change.find("data_parallel.grad_reduce_dtype=bf16") == std::string::npos) continue;
    found = true;
    CHECK(a.change == "data_parallel.grad_reduce_dtype=bf16 training.main_grad=bf16");
    INFO(a.status);
    CHECK(a.status == "ok");
  }
  CHECK(found);
  // Megatron-FSDP keeps its main gradients' precision apart: the advice changes the reduction alone.
  const auto fsdp = advised("",
                            {"parallel.tp=8", "parallel.dp=8", "training.framework=megatron", "data_parallel.kind=fsdp",
                             "data_parallel.grad_reduce_dtype=fp32"},
                            true)
                        .report;
  bool alone = false;
  for (const auto& a : fsdp.advice)
    if (a.change.find("data_parallel.grad_reduce_dtype=bf16") != std::string::npos) {
      alone = true;
      CHECK(a.change == "data_parallel.grad_reduce_dtype=bf16");
    }
  CHECK(alone);
}

// A distributed-optimizer job that gathers its parameters during the next forward, advised to
// fit (77 GiB with ZeRO-1, 57 GiB with FSDP, against 80 GB less 10 GiB of headroom): FSDP has
// no such gather, so its proposal takes the key back to its default, and it is simulated
// rather than refused.
TEST_CASE("The advice to switch the data-parallel kind takes the old kind's keys back to their defaults") {
  const std::vector<std::string> sets = {"model=llama3-8b",
                                         "parallel.tp=2",
                                         "parallel.dp=32",
                                         "data_parallel.kind=zero1",
                                         "data_parallel.overlap_param_gather=true",
                                         "training.memory_headroom=\"10 GiB\""};
  const auto r = advised("", sets, true).report;
  REQUIRE_FALSE(r.memory_bytes.fits);
  bool fsdp = false;
  for (const auto& a : r.advice) {
    if (a.change.rfind("data_parallel.kind=fsdp", 0) != 0) continue;
    fsdp = true;
    CHECK(a.change == "data_parallel.kind=fsdp data_parallel.overlap_param_gather=false");
    INFO(a.status);
    CHECK(a.status == "ok");
  }
  CHECK(fsdp);
}

// The 70B FSDP2 run of the validation set (torchtitan, TP 8, FSDP 32): FSDP2 prefetches one
// unit ahead each way by itself, so the advice offers no FSDP1 prefetch key or AllGather limit
// (each would change nothing), while FSDP1's example gets them.
TEST_CASE("Under FSDP2 the advice offers none of FSDP1's prefetch keys") {
  const auto r =
      advised(std::string(STEPSIM_SOURCE_DIR) + "/configs/validation/tt-70b-256gpu-fsdp32-tp8-fp8.json", {}, true)
          .report;
  REQUIRE_FALSE(r.advice.empty());
  for (const auto& a : r.advice) {
    INFO(a.change);
    CHECK(a.change.find("prefetch") == std::string::npos);
    CHECK(a.change.find("max_inflight_all_gathers") == std::string::npos);
  }
  const auto v1 = advised("fsdp-llama3-70b", {}, true).report;
  bool offered = false;
  for (const auto& a : v1.advice) offered = offered || a.change == "data_parallel.forward_prefetch=true";
  CHECK(offered);
  // Megatron-FSDP gathers one layer ahead each way by itself too, and refuses those keys.
  const auto mf =
      advised("fsdp-llama3-70b", {"training.framework=nemo", "data_parallel.fsdp_impl=megatron"}, true).report;
  REQUIRE_FALSE(mf.advice.empty());
  for (const auto& a : mf.advice) {
    INFO(a.change);
    CHECK(a.change.find("prefetch") == std::string::npos);
    CHECK(a.change.find("max_inflight_all_gathers") == std::string::npos);
  }
}

// Under HSDP the data-parallel traffic is one replica AllReduce of each unit's gradient shard
// after its ReduceScatter (PyTorch's foreach_reduce, HSDP's all_reduce_group), not DDP buckets,
// whose bucket_cap_mb HSDP refuses; under FSDP2 fully_shard gathers one unit ahead by itself, and
// FSDP1's prefetch keys, which FSDP2 refuses, are not what to blame.
TEST_CASE("The advice blames HSDP's replica AllReduces and FSDP2's own prefetch, not keys they refuse") {
  // No TP: torchtitan shards the sequence under it, and its exposed collectives would lead.
  const std::vector<std::string> hsdp = {"model=llama3-8b",
                                         "parallel.tp=1",
                                         "parallel.cp=2",
                                         "parallel.dp=32",
                                         "training.framework=torchtitan",
                                         "training.global_batch=32",
                                         "training.micro_batch=1",
                                         "training.recompute=full",
                                         "data_parallel.kind=hsdp",
                                         "data_parallel.shard_group=4",
                                         "data_parallel.grad_reduce_dtype=fp32"};
  const auto h = advised("", hsdp, true).report;
  INFO(h.advice_cause);
  CHECK(h.advice_cause.find(" dp: data-parallel gradient reduction is exposed: under HSDP each FSDP unit's gradient "
                            "shard is all-reduced across the 8 replicas of the shard group after its ReduceScatter") !=
        std::string::npos);
  CHECK(h.advice_cause.find("bucket") == std::string::npos);
  const auto v2 = advised("fsdp-llama3-70b",
                          {"data_parallel.fsdp_version=2", "cluster.collective_tuning.bus_efficiency=0.08"}, true)
                      .report;
  INFO(v2.advice_cause);
  CHECK(v2.advice_cause.find("fsdp: FSDP2's parameter AllGathers and gradient ReduceScatters are exposed: fully_shard "
                             "gathers one unit ahead in each pass by itself") != std::string::npos);
  CHECK(v2.advice_cause.find("prefetch depth") == std::string::npos);
  CHECK(v2.advice_cause.find("backward_prefetch") == std::string::npos);
}

// Eager PyTorch has no distributed optimizer: to fit, its DDP job is offered FSDP, not ZeRO-1.
TEST_CASE("The advice to fit offers only the data-parallel kinds the framework has") {
  const std::vector<std::string> sets = {"model=llama3-8b", "parallel.tp=2", "parallel.dp=32",
                                         "training.framework=pytorch"};
  const auto r = advised("", sets, true).report;
  REQUIRE_FALSE(r.memory_bytes.fits);
  bool fsdp = false;
  for (const auto& a : r.advice) {
    INFO(a.change);
    CHECK(a.change.find("zero1") == std::string::npos);
    CHECK(a.change.find("zero2") == std::string::npos);
    fsdp = fsdp || a.change.rfind("data_parallel.kind=fsdp", 0) == 0;
  }
  CHECK(fsdp);
}

// Megatron-Core's buckets are sized in parameters: on the ZeRO-1 example (dp 32: buckets of
// max(4e7, 3.2e7) = 4e7 parameters) the advice tries a quarter and four times that, and no
// size in MiB, which ZeRO refuses; under PyTorch's DDP it is the other way round.
TEST_CASE("The advice tries Megatron-Core's bucket size in parameters, PyTorch DDP's in MiB") {
  const auto zero = advised("zero1-llama3-8b-64xh100", {}, true).report;
  std::vector<std::string> changes;
  for (const auto& a : zero.advice) changes.push_back(a.change);
  const auto has = [&](const std::string& change) {
    return std::find(changes.begin(), changes.end(), change) != changes.end();
  };
  CHECK(has("data_parallel.bucket_parameters=10000000"));
  CHECK(has("data_parallel.bucket_parameters=160000000"));
  for (const auto& a : zero.advice) {
    INFO(a.change);
    CHECK(a.change.find("bucket_cap_mb") == std::string::npos);
    if (a.change.rfind("data_parallel.bucket_parameters", 0) == 0) CHECK(a.status == "ok");
  }
  const auto ddp = advised("ddp-1.3b-64xa100", {}, true).report;
  for (const auto& a : ddp.advice) {
    INFO(a.change);
    CHECK(a.change.find("bucket_parameters") == std::string::npos);
  }
  // A quarter of 2 parameters would be 0, which means the default: only four times is tried.
  const auto tiny = advised("zero1-llama3-8b-64xh100", {"data_parallel.bucket_parameters=2"}, true).report;
  std::vector<std::string> tried;
  for (const auto& a : tiny.advice)
    if (a.change.rfind("data_parallel.bucket_parameters", 0) == 0) tried.push_back(a.change);
  CHECK(tried == std::vector<std::string>{"data_parallel.bucket_parameters=8"});
}

// The default scenario spells out overlap_grad_reduce true; moved onto DeepSpeed's pipeline
// engine it runs (a search over pipelines must not lose every layout to that key), the
// reduction follows the schedule, and the notes say so.
TEST_CASE("A scenario asking for overlap runs under DeepSpeed's pipeline engine, with a note that it does not apply") {
  const auto r = stepsim::test::run("", {"training.framework=deepspeed", "parallel.pp=2", "parallel.dp=4"}).report;
  const auto said = [&](const std::string& text) {
    return std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n == text; });
  };
  CHECK(
      said("DeepSpeed's pipeline engine (training.framework deepspeed, parallel.pp > 1) reduces every stage's "
           "gradients after the whole schedule, in buffers of 5e8 elements: overlap_grad_reduce is off whatever "
           "the scenario says, and no bucket size applies"));
  CHECK(r.config_json.find("\"overlap_grad_reduce\": false") != std::string::npos);
}

namespace {

std::vector<std::string> changes_of(const stepsim::Report& r) {
  std::vector<std::string> out;
  for (const auto& a : r.advice) out.push_back(a.change);
  return out;
}

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

// Mixtral's example made to cross nodes: 16 experts at EP 16 on DGX H100 (8 GPUs a node), 16
// layers so that it fits. Each token's 2 experts lie on 2 of 16 ranks; the flex dispatcher
// sends a token once to each other node that holds one of them: with probability
// 1 − C(8,2)/C(16,2) = 92/120, against the 2 · 8/16 = 1 copy of the all-to-all, so it moves
// 23 % fewer bytes between the nodes.
TEST_CASE("With the EP all-to-alls exposed the advice tries the EP overlap, the flex dispatcher and a smaller group") {
  const std::vector<std::string> sets = {"parallel.ep=16", "model.moe.experts=16", "training.recompute=selective",
                                         "model.layers=16"};
  const auto r = advised("mixtral-8x7b-ep8-64xh100", sets, true).report;
  CHECK(r.advice_cause.find("of it ep: the expert-parallel all-to-alls are exposed") != std::string::npos);
  CHECK(r.advice_cause.find("the EP group of 16 spans 2 NVLink domains") != std::string::npos);
  const auto changes = changes_of(r);
  CHECK(has(changes, "model.moe.a2a_overlap=true"));
  CHECK(has(changes, "model.moe.dispatcher=flex"));
  CHECK(has(changes, "parallel.ep=8"));
  for (const auto& a : r.advice) {
    INFO(a.change);
    CHECK(a.status == "ok");
    if (a.change == "model.moe.dispatcher=flex") CHECK(a.exposed_fraction_of_step < r.overlap.exposed_fraction_of_step);
  }
  // Where Megatron-Core would refuse the overlap (full recompute, or not its framework: torchtitan,
  // with its FSDP, having no distributed optimizer), and inside one node, fewer candidates:
  // none refused when simulated.
  for (const auto& extra : std::vector<std::vector<std::string>>{
           {"training.recompute=full"},
           {"training.framework=torchtitan", "data_parallel.kind=fsdp", "data_parallel.overlap_param_gather=false"}}) {
    auto more = sets;
    more.insert(more.end(), extra.begin(), extra.end());
    const auto refused = advised("mixtral-8x7b-ep8-64xh100", more, true).report;
    CHECK_FALSE(has(changes_of(refused), "model.moe.a2a_overlap=true"));
    for (const auto& a : refused.advice) CHECK(a.status.rfind("not simulated", 0) != 0);
    // The flex dispatcher is Megatron-Core's too.
    if (extra.front() == "training.framework=torchtitan")
      CHECK_FALSE(has(changes_of(refused), "model.moe.dispatcher=flex"));
  }
  const auto one_node = advised("mixtral-8x7b-ep8-64xh100", {"training.recompute=selective", "model.layers=16"}, true);
  const auto inside = changes_of(one_node.report);
  CHECK(has(inside, "model.moe.a2a_overlap=true"));
  CHECK_FALSE(has(inside, "model.moe.dispatcher=flex"));
  CHECK_FALSE(has(inside, "parallel.ep=4"));
}

// Mixtral 8x7B on 64 H100 at TP 2 and EP 8 under Megatron-Core, which splits each expert over
// the TP group's 2 ranks where etp is not given: the EP group strides 2 and spans 2 nodes, and
// the ETP group gathers and scatters around the experts. Each expert whole on its GPU (etp 1)
// puts the EP group in one node and drops the gathers: the advice tries it, and it shortens the
// step (the oracle: the same job simulated at etp 1, 3.85 s against 4.43 s).
TEST_CASE("With expert tensor parallelism exposed the advice tries each expert whole on its GPU") {
  const std::vector<std::string> sets = {"training.framework=megatron", "parallel.tp=2", "parallel.dp=32",
                                         "parallel.sequence_parallel=true", "model.layers=8"};
  const auto r = advised("mixtral-8x7b-ep8-64xh100", sets, true).report;
  CHECK(stepsim::io::load_scenario("mixtral-8x7b-ep8-64xh100", sets).parallel.etp == 2);
  CHECK(r.advice_cause.find("with etp 2 the ETP group gathers the tokens") != std::string::npos);
  auto whole = sets;
  whole.emplace_back("parallel.etp=1");
  const double at_etp_1 =
      stepsim::simulate(stepsim::io::load_scenario("mixtral-8x7b-ep8-64xh100", whole)).report.step_time_s;
  REQUIRE(at_etp_1 < r.step_time_s);
  const auto it = std::find_if(r.advice.begin(), r.advice.end(),
                               [](const stepsim::Advice& a) { return a.change == "parallel.etp=1"; });
  REQUIRE(it != r.advice.end());
  CHECK(it->status == "ok");
  CHECK(it->step_time_s == Approx(at_etp_1).epsilon(1e-9));
}

// Qwen3 30B-A3B on 64 GB200 at DP 64 and EP 64: the default global batch of 128 sequences in
// micro-batches of 2 is one micro-batch per replica, and Megatron-Core's combined 1F1B pairs the
// forward of micro-batch i + 1 with the backward of i: there is no pair, the overlap simulates
// the very step without it (the oracle), so the advice does not propose it, and a scenario that
// asks for it gets a note saying it has no effect and why. In micro-batches of 1 (two a
// replica) it pairs them, changes the step, and is proposed. Over 2 interleaved stages of 2
// chunks with 2 micro-batches a replica, the last stage warms up min((v − 1)·p + 1, m·v) = 3 of
// its 4 forwards and pairs the fourth (get_pp_rank_microbatches): proposed.
TEST_CASE("The advice proposes the EP overlap only where the step has passes to pair, and notes it idle") {
  const std::vector<std::string> job = {"model=qwen3-30b-a3b",     "cluster=gb200-nvl72", "cluster.nodes=16",
                                        "parallel.tp=1",           "parallel.ep=64",      "training.precision=nvfp4",
                                        "data_parallel.kind=zero1"};
  const auto with = [&](std::vector<std::string> more) {
    auto sets = job;
    sets.insert(sets.end(), more.begin(), more.end());
    return sets;
  };
  const auto note_of = [](const stepsim::Report& r) {
    for (const auto& note : r.notes)
      if (note.starts_with("model.moe.a2a_overlap has no effect here")) return note;
    return std::string();
  };
  const auto single = with({"parallel.dp=64", "training.micro_batch=2"});
  const auto r = advised("", single, true).report;
  CHECK_FALSE(has(changes_of(r), "model.moe.a2a_overlap=true"));
  CHECK(note_of(r).empty());
  const auto idle =
      stepsim::test::run("", with({"parallel.dp=64", "training.micro_batch=2", "model.moe.a2a_overlap=true"}));
  CHECK(idle.report.step_time_s == r.step_time_s);
  CHECK(note_of(idle.report) ==
        "model.moe.a2a_overlap has no effect here: Megatron-Core's EP overlap runs one micro-batch's forward beside "
        "another's backward, and with 1 micro-batch per replica (global_batch 128 / (micro_batch 2 x dp 64)) and no "
        "pipeline, no forward has another micro-batch's backward to pair with; it needs 2 or more micro-batches per "
        "replica");

  const auto pairs = with({"parallel.dp=64", "training.micro_batch=1"});
  const auto proposed = advised("", pairs, true).report;
  CHECK(has(changes_of(proposed), "model.moe.a2a_overlap=true"));
  const auto acting =
      stepsim::test::run("", with({"parallel.dp=64", "training.micro_batch=1", "model.moe.a2a_overlap=true"}));
  CHECK(acting.report.step_time_s != proposed.step_time_s);
  CHECK(note_of(acting.report).empty());

  const auto staged = with({"parallel.pp=2", "parallel.dp=32", "parallel.schedule=interleaved",
                            "parallel.virtual_stages=2", "training.micro_batch=2", "parallel.ep=32"});
  const auto staged_r = advised("", staged, true).report;
  CHECK(has(changes_of(staged_r), "model.moe.a2a_overlap=true"));
  auto staged_on = staged;
  staged_on.emplace_back("model.moe.a2a_overlap=true");
  CHECK(note_of(stepsim::test::run("", staged_on).report).empty());
}

// Qwen3 30B-A3B on 16 H100 (Megatron-Bridge's run) under full recompute at micro-batch 2: the
// EP overlap is refused with full recompute, a smaller EP group is slower, Megatron's bucket
// size moves nothing. The note names no change then.
TEST_CASE("When no simulated change shortens the step the advice names none") {
  const auto r =
      advised(std::string(STEPSIM_SOURCE_DIR) + "/configs/validation/blackwell/mb260401-h100-qwen3-30b-fp8.json",
              {"training.recompute=full", "training.micro_batch=2"}, false)
          .report;
  int ok = 0;
  for (const auto& a : r.advice) {
    if (a.status != "ok") continue;
    ++ok;
    INFO(a.change);
    CHECK(a.step_time_s > 0.995 * r.step_time_s);
  }
  REQUIRE(ok >= 2);
  CHECK(r.notes.back().find("best simulated change") == std::string::npos);
  CHECK(r.notes.back().find(fmt::format("none of the {} changes simulated shortens the step by 0.5 % or more", ok)) !=
        std::string::npos);
  // On the default scenario the best change is named, and it shortens the step.
  const auto tp = advised("", {}, false).report;
  CHECK(tp.notes.back().find("best simulated change: parallel.tp=2 parallel.dp=32 data_parallel.kind=fsdp") !=
        std::string::npos);
}

// Megatron requires sequence parallelism with MoE layers and tp > 1: the advice never turns
// it off there, and a larger TP group to fit turns it on.
TEST_CASE("For a mixture of experts the advice keeps the sequence parallelism Megatron requires") {
  const auto fit = advised("mixtral-8x7b-ep8-64xh100", {"parallel.ep=8", "training.recompute=selective"}, true).report;
  REQUIRE_FALSE(fit.memory_bytes.fits);
  const auto changes = changes_of(fit);
  CHECK(has(changes, "parallel.tp=2 parallel.dp=32 parallel.sequence_parallel=true"));
  for (const auto& a : fit.advice) {
    INFO(a.change);
    CHECK(a.status.find("need sequence parallelism") == std::string::npos);
  }
  // FSDP shards the experts over their expert-dp group: simulated, and offered as a fit.
  CHECK(has(changes, "data_parallel.kind=fsdp data_parallel.overlap_param_gather=false"));
  const auto tp =
      advised("mixtral-8x7b-ep8-64xh100",
              {"parallel.tp=2", "parallel.dp=32", "parallel.sequence_parallel=true", "model.layers=16"}, true)
          .report;
  CHECK_FALSE(has(changes_of(tp), "parallel.sequence_parallel=false"));
}

// Sequence parallelism and TP overlap are refused at tp 1: a smaller TP group of one switches
// them off with it, and is simulated.
TEST_CASE("The advice to leave no TP group switches sequence parallelism and TP overlap off") {
  const auto r = advised("",
                         {"model=gpt-1.3b", "parallel.tp=2", "parallel.dp=32", "parallel.sequence_parallel=true",
                          "tensor_parallel.comm_overlap=true"},
                         true)
                     .report;
  for (const auto& a : r.advice) {
    INFO(a.change << ": " << a.status);
    if (a.change.starts_with("parallel.tp=1 ")) CHECK(a.status == "ok");
  }
  const auto changes = changes_of(r);
  CHECK(
      has(changes, "parallel.tp=1 parallel.dp=64 parallel.sequence_parallel=false tensor_parallel.comm_overlap=false"));
  CHECK(
      has(changes, "parallel.tp=1 parallel.pp=2 parallel.sequence_parallel=false tensor_parallel.comm_overlap=false"));
}

// With the TP overlap on, the advice proposes no change that leaves the scenario as it is,
// and its advice to leave sequence parallelism off takes the overlap that needs it with it.
TEST_CASE("With TP overlap on the advice neither proposes it again nor drops the sequence parallelism it needs",
          "[slow]") {
  const auto r = advised("gpt3-175b-selene", {"tensor_parallel.comm_overlap=true"}, true).report;
  const auto changes = changes_of(r);
  for (const auto& a : r.advice) {
    INFO(a.change << ": " << a.status);
    CHECK(a.change.find("tensor_parallel.comm_overlap=true") == std::string::npos);
    CHECK(a.status.find("needs \"sequence_parallel\": true") == std::string::npos);
  }
  CHECK(has(changes, "parallel.sequence_parallel=false tensor_parallel.comm_overlap=false"));
  // Without the overlap, sequence parallelism alone goes off.
  CHECK(has(changes_of(advised("gpt3-175b-selene", {}, true).report), "parallel.sequence_parallel=false"));
}

// One stage has no pipeline to schedule: the advice to go from two stages to one takes the
// schedule back to 1F1B, and is simulated.
TEST_CASE("The advice to leave one stage takes the schedule back to 1F1B") {
  const auto gpipe =
      advised("", {"model=gpt-1.3b", "parallel.pp=2", "parallel.dp=4", "parallel.schedule=gpipe"}, true).report;
  const auto interleaved = advised("",
                                   {"model=gpt-1.3b", "parallel.pp=2", "parallel.dp=4", "parallel.schedule=interleaved",
                                    "parallel.virtual_stages=2"},
                                   true)
                               .report;
  for (const auto* r : {&gpipe, &interleaved})
    for (const auto& a : r->advice) {
      INFO(a.change << ": " << a.status);
      if (a.change.starts_with("parallel.pp=1 ")) CHECK(a.status == "ok");
    }
  CHECK(has(changes_of(gpipe), "parallel.pp=1 parallel.dp=8 parallel.schedule=1f1b"));
  CHECK(has(changes_of(interleaved), "parallel.pp=1 parallel.dp=8 parallel.schedule=1f1b parallel.virtual_stages=1"));
}

// Layers per stage of the user's own (parallel.stage_layers) fit that pipeline only: the
// advice changes neither the stages nor the chunks then, and does without them.
TEST_CASE("The advice keeps a pipeline whose layers per stage the scenario gives") {
  const std::vector<std::string> even = {"parallel.pp=2", "parallel.dp=4"};
  const auto touches_pipeline = [](const stepsim::Report& r) {
    return std::any_of(r.advice.begin(), r.advice.end(), [](const stepsim::Advice& a) {
      return a.change.find("parallel.pp=") != std::string::npos ||
             a.change.find("parallel.virtual_stages=") != std::string::npos;
    });
  };
  CHECK(touches_pipeline(advised("", even, true).report));
  auto own = even;
  own.push_back("parallel.stage_layers=[15,17]");
  const auto r = advised("", own, true).report;
  CHECK_FALSE(touches_pipeline(r));
  // Each change it keeps is simulated with the user's layers: none is refused for them (a layout
  // may still not fit in memory).
  for (const auto& a : r.advice) {
    INFO(a.change << ": " << a.status);
    CHECK((a.status == "ok" || a.status.rfind("does not fit in memory", 0) == 0));
  }
}

namespace {

// GPT-3 Small in eager PyTorch: the CPU issues 25,514 operators at 17 us (433.7 ms) while its
// kernels add up to 159.6 ms (the host model's worked example in docs/model.md).
stepsim::Report eager_advice(const std::vector<std::string>& sets) {
  const stepsim::io::ScenarioInput input{"eager.json", stepsim::test::kEagerGpt3Small};
  const stepsim::Scenario scenario = stepsim::io::load_scenario(input, sets);
  stepsim::SimulationResult r = stepsim::simulate(scenario);
  advise({input, sets, false, {}}, scenario, r);
  return r.report;
}

}  // namespace

// GPT-3 Small under Megatron-Core on two pipeline stages of 6 layers: stage 1 also runs the LM
// head and the loss, and its CPU, issuing more operators than its kernels take, holds the GPU
// back (about 47 ms of its 170 ms step); stage 0 waits for stage 1's gradients, which its
// breakdown counts as bubble. The report's host figure is stage 1's, the cause says so, and the
// advice tries CUDA graphs, which take the CPU out of the layers (about 120 ms, against 166 ms
// for the best change otherwise, one stage).
TEST_CASE("A pipeline stage waiting for its host is the report's host figure, and the advice tries CUDA graphs") {
  const auto r = eager_advice({"parallel.pp=2", "parallel.dp=4", "training.framework=megatron"});
  CHECK(r.host.rank.find("(stage 1)") != std::string::npos);
  CHECK(r.host.gpu_wait_s > 0.2 * r.step_time_s);
  CHECK(r.host.gpu_wait_fraction_of_step == Approx(r.host.gpu_wait_s / r.step_time_s));
  // The breakdown stays stage 0's, summing to the step, with its own wait for its host.
  const auto& b = r.breakdown_s;
  CHECK(b.compute + b.exposed_total() + b.bubble + b.optimizer + b.other == Approx(r.step_time_s).epsilon(1e-9));
  CHECK(r.host.breakdown_gpu_wait_s < 0.05 * r.step_time_s);
  CHECK(r.host.breakdown_gpu_wait_s <= b.other + 1e-12);
  CHECK(r.advice_cause.find("(stage 1) waits for its host") != std::string::npos);
  const auto graphs = std::find_if(r.advice.begin(), r.advice.end(),
                                   [](const stepsim::Advice& a) { return a.change == "training.cuda_graphs=true"; });
  REQUIRE(graphs != r.advice.end());
  CHECK(graphs->step_time_s < 0.8 * r.step_time_s);
  // It and the larger micro-batch (half the operators per token) rank above one stage.
  const auto layout = std::find_if(r.advice.begin(), r.advice.end(),
                                   [](const stepsim::Advice& a) { return a.change.rfind("parallel.pp=1", 0) == 0; });
  CHECK(graphs < layout);
}

TEST_CASE("When the GPU waits for the host the advice names it and tries CUDA graphs and a larger micro-batch") {
  const auto r = eager_advice({});
  REQUIRE(r.overlap.exposed_fraction_of_step < 0.05);  // advised for the host alone
  CHECK(r.advice_cause.find("; the GPU waits for the host ") != std::string::npos);
  const auto graphs = std::find_if(r.advice.begin(), r.advice.end(),
                                   [](const stepsim::Advice& a) { return a.change == "training.cuda_graphs=true"; });
  REQUIRE(graphs != r.advice.end());
  CHECK(graphs->step_time_s == Approx(0.1600).epsilon(0.01));  // its kernels and the last AllReduce's tail
  CHECK(has(changes_of(r), "training.micro_batch=2"));
  CHECK(r.notes.back().find("best simulated change: ") != std::string::npos);
  // Where CUDA graphs would be refused (torchtitan does not capture steps; Megatron-Core takes no
  // full recompute beside them), not offered; nor full recompute beside graphs already on.
  CHECK_FALSE(has(changes_of(eager_advice({"training.framework=torchtitan"})), "training.cuda_graphs=true"));
  const auto full = eager_advice({"training.framework=megatron", "training.recompute=full"});
  REQUIRE(full.host.gpu_wait_s > 0.05 * full.step_time_s);
  for (const auto& a : full.advice) CHECK(a.change.find("training.cuda_graphs=true") == std::string::npos);
  // With CUDA graphs the host keeps up: no advice unless asked.
  const auto replayed = eager_advice({"training.cuda_graphs=true"});
  CHECK(replayed.advice.empty());
  CHECK(replayed.advice_cause.empty());
}

namespace {

// A change's --set assignments (the advice joins them with a space; no value holds one).
std::vector<std::string> words(const std::string& change) {
  std::vector<std::string> out;
  std::stringstream in(change);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

// Megatron-Core offloads activations through Transformer Engine without a pipeline, recompute
// or CUDA graphs (its TransformerConfig refuses them together): Llama 3 8B's 32 layers, half of
// them offered, and none where recompute, another framework or a pipeline rules it out.
TEST_CASE("The advice to fit offers activation offload where Megatron-Core runs it") {
  const std::vector<std::string> sets = {"model=llama3-8b", "parallel.tp=2", "parallel.dp=32"};
  const auto offload = [](const stepsim::Report& r) {
    for (const auto& a : r.advice)
      if (a.change.find("training.activation_offload_layers=") != std::string::npos) return a.change;
    return std::string();
  };
  const auto r = advised("", sets, true).report;
  REQUIRE_FALSE(r.memory_bytes.fits);
  CHECK(offload(r) == "training.activation_offload_layers=16");
  for (const auto& extra :
       std::vector<std::vector<std::string>>{{"training.recompute=selective"},
                                             {"training.framework=pytorch"},
                                             {"parallel.pp=2", "parallel.dp=16", "training.micro_batch=4"}}) {
    auto more = sets;
    more.insert(more.end(), extra.begin(), extra.end());
    const auto other = advised("", more, true).report;
    INFO(extra.front());
    REQUIRE_FALSE(other.memory_bytes.fits);
    CHECK(offload(other).empty());
  }
  // Half offloaded already: all but the last layer, as Megatron-Core allows at most.
  auto half = sets;
  half.push_back("training.activation_offload_layers=16");
  const auto again = advised("", half, true).report;
  if (!again.memory_bytes.fits) CHECK(offload(again) == "training.activation_offload_layers=31");
}

// Llama 3 70B at TP 4 on 64 H100 (the default cluster) needs 469 GiB: no change of the seven
// that make a job fit is enough alone (FSDP alone 177 GiB, full recompute alone 338 GiB), so
// the advice tries them in pairs, and FSDP with full recompute fits.
TEST_CASE("When no change fits alone the advice tries them in pairs and ranks those that fit") {
  const std::vector<std::string> sets = {"model=llama3-70b", "parallel.tp=4", "parallel.dp=16"};
  const auto r = advised("", sets, true).report;
  REQUIRE_FALSE(r.memory_bytes.fits);
  REQUIRE(simulated(r) >= 1);
  const auto& best = r.advice.front();
  CHECK(best.status == "ok");
  const auto halves = words(best.change);
  CHECK(has(halves, "data_parallel.kind=fsdp"));
  CHECK(has(halves, "training.recompute=full"));
  CHECK(best.why.find("; and ") != std::string::npos);
  // Each change the pair is made of is in the table and does not fit alone; together they do.
  for (const auto& a : r.advice) {
    if (a.status == "ok") continue;
    CHECK(a.status.rfind("does not fit in memory", 0) == 0);
  }
  CHECK(has(changes_of(r), "data_parallel.kind=fsdp"));
  CHECK(has(changes_of(r), "training.recompute=full"));
  auto with = sets;
  with.insert(with.end(), halves.begin(), halves.end());
  CHECK(stepsim::test::run("", with).report.memory_bytes.fits);
  CHECK(r.notes.back().find("fastest pair of changes that fits: " + best.change) != std::string::npos);
}

// Llama 3 405B without TP on 64 H100 fits with no pair either. Eight changes to fit (ZeRO-1,
// FSDP, selective and full recompute, two stages, micro-batch 1, TP 2, 63 of its 126 layers'
// activations offloaded) make C(8, 2) = 28 pairs, less the three that set one key twice (two
// data-parallel kinds, two recompute settings, two layouts' parallel.dp): 25 tried.
TEST_CASE("When no pair of changes fits either the advice says how many it tried") {
  const auto r = advised("", {"model=llama3-405b", "parallel.tp=1", "parallel.dp=64"}, true).report;
  REQUIRE_FALSE(r.memory_bytes.fits);
  CHECK(r.advice.size() == 8);
  CHECK(simulated(r) == 0);
  CHECK(r.notes.back().find("none of them fits alone, nor any of the 25 pairs of them: search the layout with "
                            "'stepsim sweep --best', or use more GPUs") != std::string::npos);
}

// The default scenario (Llama 3 8B at TP 8 on 64 H100): TP 2 does not fit alone (123.0 GiB);
// the advice tries it again with each change that makes a job fit and keeps the fastest pair
// that fits, which simulates as that pair set by hand.
TEST_CASE("A change that helps but does not fit is tried again with what makes it fit") {
  const auto r = advised("", {}, true).report;
  const std::vector<std::string> tp2{"parallel.tp=2", "parallel.dp=32"};
  bool alone = false, paired = false;
  for (const auto& a : r.advice) {
    INFO(a.change);
    const auto with = words(a.change);
    if (with == tp2) {
      alone = true;
      CHECK(a.status.rfind("does not fit in memory", 0) == 0);
    } else if (with.size() > 2 && has(with, tp2[0]) && has(with, tp2[1])) {
      paired = true;
      CHECK(a.status == "ok");
      CHECK(a.why.find("; to fit, ") != std::string::npos);
      const auto run = stepsim::test::run("", with);
      CHECK(run.report.memory_bytes.fits);
      CHECK(run.report.step_time_s == Approx(a.step_time_s).epsilon(1e-9));
    }
  }
  CHECK(alone);
  CHECK(paired);
}

// Qwen3 30B-A3B at micro-batch 1 on 8 B200 (Megatron-Bridge's run) waits for its host more than
// half the step with CUDA graphs of the router and the dispatcher's preprocessing only: the
// advice tries the attention block in the graphs too, and it shortens the step. A dense model
// with part of its layers graphed is offered the whole layers (the empty scope).
TEST_CASE("With CUDA graphs of part of each layer the advice tries a wider scope", "[slow]") {
  const auto r =
      advised(std::string(STEPSIM_SOURCE_DIR) + "/configs/validation/blackwell/mb2602-b200-qwen3-30b-mxfp8-mbs1.json",
              {}, true)
          .report;
  REQUIRE(r.host.gpu_wait_s > 0.05 * r.step_time_s);
  bool wider = false;
  for (const auto& a : r.advice) {
    if (a.change != R"(training.cuda_graph_scope=["moe_router","moe_preprocess","attn"])") continue;
    wider = true;
    CHECK(a.status == "ok");
    CHECK(a.step_time_s < r.step_time_s);
  }
  CHECK(wider);
  // GPT-3 Small under Megatron-Core on sequences of 128: its fused kernels are short enough that
  // the CPU issuing the MLP blocks sets the pace.
  const std::vector<std::string> dense = {"training.framework=megatron", "training.cuda_graphs=true",
                                          R"(training.cuda_graph_scope=["attn"])", "model.seq_len=128"};
  const auto d = eager_advice(dense);
  REQUIRE(d.host.gpu_wait_s > 0.05 * d.step_time_s);
  const auto changes = changes_of(d);
  CHECK(has(changes, "training.cuda_graph_scope=[]"));
  // GPT-OSS 120B on 64 H100 without CUDA graphs (Megatron-Bridge's run) waits for its host
  // 11.7 % of the step: the graphs offered are those Megatron-Bridge's MoE recipes set, the
  // attention block, router and preprocessing, not the whole layer with its experts.
  const auto moe =
      advised(std::string(STEPSIM_SOURCE_DIR) + "/configs/validation/blackwell/mb260401-h100-gptoss120b-bf16.json", {},
              true)
          .report;
  REQUIRE(moe.host.gpu_wait_s > 0.05 * moe.step_time_s);
  const auto moe_changes = changes_of(moe);
  CHECK(has(moe_changes,
            R"(training.cuda_graphs=true training.cuda_graph_scope=["attn","moe_router","moe_preprocess"])"));
  CHECK_FALSE(has(moe_changes, "training.cuda_graphs=true"));
  for (const auto& a : d.advice)
    if (a.change == "training.cuda_graph_scope=[]") CHECK(a.step_time_s < d.step_time_s);
}

TEST_CASE("A bug met while simulating one change of the advice is that change's row, and the report stands") {
  const stepsim::Scenario scenario = stepsim::io::load_scenario("", {});
  stepsim::SimulationResult r = stepsim::simulate(scenario);
  const double step = r.report.step_time_s;
  // The simulation of the change to TP overlap fails a check, as a bug would; every other
  // change is simulated as simulate() simulates it.
  stepsim::AdviceRequest request{{"", {}}, {}, true, {}};
  request.simulate_change = [](const stepsim::Scenario& s) {
    STEPSIM_CHECK(!s.tensor_parallel.comm_overlap, "a planted bug");
    return stepsim::simulate(s, stepsim::SimulateOptions::report_only());
  };
  advise(request, scenario, r);
  // The oracle: the same advice with no bug planted. Every row but that change's is the same.
  const stepsim::Report sound = advised("", {}, true).report;
  CHECK(r.report.step_time_s == step);
  CHECK(r.report.advice_cause == sound.advice_cause);
  REQUIRE(r.report.advice.size() == sound.advice.size());
  int failed = 0;
  for (const stepsim::Advice& a : sound.advice) {
    INFO(a.change);
    const auto row = std::find_if(r.report.advice.begin(), r.report.advice.end(),
                                  [&](const stepsim::Advice& b) { return b.change == a.change; });
    REQUIRE(row != r.report.advice.end());
    if (a.change.find("tensor_parallel.comm_overlap=true") == std::string::npos) {
      CHECK(row->status == a.status);
      CHECK(row->step_time_s == a.step_time_s);
      continue;
    }
    ++failed;
    CHECK(row->status.starts_with("internal error at "));
    CHECK(row->status.ends_with("check '!s.tensor_parallel.comm_overlap' failed: a planted bug"));
  }
  REQUIRE(failed == 1);
  // What the command says on stderr before it exits with status 1, the report written.
  const std::vector<std::string> bugs = stepsim::advice_bugs(r.report);
  REQUIRE(bugs.size() == 1);
  CHECK(
      bugs.front().ends_with("a planted bug (simulating the advice's change parallel.sequence_parallel=true "
                             "tensor_parallel.comm_overlap=true; the report stands without it)"));
  CHECK(stepsim::advice_bugs(sound).empty());
}

namespace {

std::string validation_config(const std::string& name) {
  return std::string(STEPSIM_SOURCE_DIR) + "/configs/validation/" + name;
}

}  // namespace

// The program's own validation is the oracle: each change the advice shows, given as --set
// assignments to the scenario, loads. On these scenarios the advice proposed what the program
// refuses: TP 4 over 16 replicas with 4 micro-batches each at pp 8 under the interleaved schedule
// (shown as not fitting in memory), 40 chunks per stage of 80 layers over 4 stages, TP 1 over 128
// replicas with a global batch of 64.
TEST_CASE("Every change the advice shows is one the program accepts", "[slow]") {
  for (const char* name : {"tt-405b-512gpu-3d-interleaved.json", "nemo2407-llama2-70b-64gpu.json",
                           "blackwell/mb2509-gb200-llama31-405b-fsdp-tp2.json"}) {
    const std::string path = validation_config(name);
    const auto r = advised(path, {}, true).report;
    REQUIRE(simulated(r) > 0);
    for (const auto& a : r.advice) {
      INFO(name << ": " << a.change << ": " << a.status);
      CHECK_NOTHROW(stepsim::io::load_scenario(path, words(a.change)));
    }
  }
}

// More chunks per stage are twice as many where they split the layers evenly, otherwise the
// fewest more that do: GPT-OSS 120B's 36 layers over 4 stages are 9 a stage, which 2 chunks do
// not split and 3 do; Llama 2 70B's 80 layers over 4 stages in 20 chunks are one layer a chunk
// already, and no more chunks are offered.
TEST_CASE("The advice interleaves only as many chunks per stage as split the layers evenly", "[slow]") {
  const auto moe = advised(validation_config("blackwell/mb260401-h100-gptoss120b-bf16.json"), {}, true).report;
  std::vector<std::string> changes;
  for (const auto& a : moe.advice) changes.push_back(a.change);
  CHECK(std::find(changes.begin(), changes.end(), "parallel.schedule=interleaved parallel.virtual_stages=3") !=
        changes.end());
  const auto nemo = advised(validation_config("nemo2407-llama2-70b-64gpu.json"), {}, true).report;
  for (const auto& a : nemo.advice) {
    INFO(a.change);
    CHECK(a.change.find("parallel.virtual_stages=") == std::string::npos);
  }
}

// Unknown figures are null, never 0: a change not simulated (a large scenario's, without
// --advise; one that does not fit in memory) has no step time in JSON, and a simulated one its own.
TEST_CASE("The advice's JSON gives null for the step of a change that was not simulated", "[slow]") {
  for (const auto& [name, asked] : {std::pair{std::string("bloom-176b"), false},
                                    std::pair{validation_config("tt-405b-512gpu-3d-interleaved.json"), true}}) {
    const auto r = advised(name, {}, asked).report;
    std::ostringstream out;
    stepsim::report::write_json(r, out);
    const boost::json::value json = boost::json::parse(out.str());
    const boost::json::array& alternatives = json.at("advice").at("alternatives").as_array();
    REQUIRE(alternatives.size() == r.advice.size());
    int unsimulated = 0;
    for (std::size_t i = 0; i < alternatives.size(); ++i) {
      const boost::json::object& o = alternatives[i].as_object();
      INFO(name << ": " << r.advice[i].change << ": " << r.advice[i].status);
      if (r.advice[i].status == "ok") {
        // Boost.JSON's parser may read the last digit off: the figure, to a unit in the last place.
        CHECK(o.at("step_time_s").as_double() == Approx(r.advice[i].step_time_s).epsilon(1e-15));
        CHECK(o.at("exposed_fraction_of_step").as_double() ==
              Approx(r.advice[i].exposed_fraction_of_step).epsilon(1e-15));
      } else {
        ++unsimulated;
        CHECK(o.at("step_time_s").is_null());
        CHECK(o.at("exposed_fraction_of_step").is_null());
      }
    }
    CHECK(unsimulated > 0);
  }
}

// On a PCIe fabric the TP overlap is refused (it copies over NVLink), so the advice does not
// propose it, where on the default scenario's NVSwitch it does.
TEST_CASE("The advice does not propose TP communication overlap on a PCIe fabric") {
  const std::vector<std::string> pcie{"cluster.intra_node.fabric=pcie", "cluster.intra_node.nvls=false",
                                      "cluster.intra_node.bandwidth=32GB/s", "cluster.intra_node.latency=1us"};
  const auto proposes_overlap = [](const stepsim::Report& r) {
    return std::any_of(r.advice.begin(), r.advice.end(), [](const stepsim::Advice& a) {
      return a.change.find("tensor_parallel.comm_overlap=true") != std::string::npos;
    });
  };
  CHECK(proposes_overlap(advised("", {}, true).report));
  const auto r = advised("", pcie, true).report;
  REQUIRE_FALSE(r.advice.empty());
  CHECK_FALSE(proposes_overlap(r));
}

// Llama 3 70B at tp 8 and cp 8: the CP group of rank 0, [0, 8, ..., 56], spans all 8 nodes, and
// each ring step's attention is an eighth of a layer's. The advice names that, and simulates the
// other exchange and half the CP group; each as the same scenario with its change simulated
// directly (the oracle).
TEST_CASE("With the CP exchange exposed the advice names why and tries the gather and a smaller CP group") {
  const std::vector<std::string> sets{"parallel.cp=8", "parallel.dp=1"};
  const auto r = advised("llama3-70b-cp2-64xh100", sets, true).report;
  CHECK(r.advice_cause.find("of it cp: the context-parallel K/V exchange is exposed: each ring step's K/V block") !=
        std::string::npos);
  CHECK(r.advice_cause.find("the CP group spans 8 NVLink domains (tp·cp = 64 GPUs, 8 a domain)") != std::string::npos);
  for (const std::string change : {"context_parallel.comm=all_gather", "parallel.cp=4 parallel.dp=2"}) {
    INFO(change);
    const auto row = std::find_if(r.advice.begin(), r.advice.end(),
                                  [&change](const stepsim::Advice& a) { return a.change == change; });
    REQUIRE(row != r.advice.end());
    REQUIRE(row->status == "ok");
    std::vector<std::string> with = sets;
    std::istringstream words(change);
    for (std::string w; words >> w;) with.push_back(w);
    const auto direct = stepsim::simulate(stepsim::io::load_scenario("llama3-70b-cp2-64xh100", with));
    CHECK(row->step_time_s == Approx(direct.report.step_time_s).epsilon(1e-12));
  }
}

// Korthikanti et al.'s GPT 22B does not fit one DGX A100 without recompute; under Megatron-Core
// with whole-layer CUDA graphs its selective recompute (the attention core, with GPT's attention
// dropout) is refused, as is full recompute: no row of the advice may set either, and every
// row's change must load as the scenario with it would (the same validation, whatever the
// advice's own reasons for choosing it).
TEST_CASE("The advice proposes no change that validation refuses") {
  const std::vector<std::string> sets = {"training.framework=megatron", "training.cuda_graphs=true"};
  const auto r = advised("korthikanti-22b", sets, true).report;
  REQUIRE_FALSE(r.memory_bytes.fits);
  REQUIRE_FALSE(r.advice.empty());
  for (const auto& a : r.advice) {
    INFO(a.change);
    CHECK(a.change.find("training.recompute=") == std::string::npos);
    std::vector<std::string> with = sets;
    for (const std::string& w : words(a.change)) with.push_back(w);
    CHECK_NOTHROW(stepsim::io::load_scenario("korthikanti-22b", with));
  }
  // GPT-3 Small waiting for its host under Megatron-Core with selective recompute: CUDA graphs of
  // whole layers would graph the recomputed attention core, so they are not offered.
  const auto host = eager_advice({"training.framework=megatron", "training.recompute=selective"});
  REQUIRE(host.host.gpu_wait_s > 0.05 * host.step_time_s);
  CHECK_FALSE(has(changes_of(host), "training.cuda_graphs=true"));
  CHECK_THROWS_AS(stepsim::io::load_scenario(
                      stepsim::io::ScenarioInput{"eager.json", stepsim::test::kEagerGpt3Small},
                      {"training.framework=megatron", "training.recompute=selective", "training.cuda_graphs=true"}),
                  stepsim::InputError);
}

// GPT 1.3B at DP 64 on DGX H100 with 12 of its 24 layers' activations offloaded over each GPU's
// PCIe link, beside the gradient AllReduce's traffic: a quarter of the step the compute waits
// for the copies (the report's "waiting for offload copies", all of `other` but the 5 us the
// GPU waits for its host). The advice names it and tries 6 layers and none; each row's step is
// the step of the scenario with that change, simulated directly.
TEST_CASE("When the GPU waits for offload copies the advice names it and tries fewer layers") {
  const std::vector<std::string> sets = {"cluster=dgx-h100-ndr", "training.framework=unspecified",
                                         "training.activation_offload_layers=12"};
  const auto r = advised("ddp-1.3b-64xa100", sets, false).report;
  CHECK(r.offload_wait_s > 0.2 * r.step_time_s);
  CHECK(r.offload_wait_s == Approx(r.breakdown_s.other - r.host.breakdown_gpu_wait_s).epsilon(1e-9));
  CHECK(r.advice_cause.find("; the GPU waits for activation offload's copies 24.") != std::string::npos);
  for (const std::string change : {"training.activation_offload_layers=6", "training.activation_offload_layers=0"}) {
    INFO(change);
    const auto row = std::find_if(r.advice.begin(), r.advice.end(),
                                  [&change](const stepsim::Advice& a) { return a.change == change; });
    REQUIRE(row != r.advice.end());
    REQUIRE(row->status == "ok");
    std::vector<std::string> with = sets;
    with.push_back(change);
    const auto direct = stepsim::simulate(stepsim::io::load_scenario("ddp-1.3b-64xa100", with));
    CHECK(row->step_time_s == Approx(direct.report.step_time_s).epsilon(1e-12));
    CHECK(row->step_time_s < 0.8 * r.step_time_s);
  }
  // Without offload nothing waits for copies, and nothing of it is advised.
  const auto none = advised("ddp-1.3b-64xa100", {"cluster=dgx-h100-ndr"}, true).report;
  CHECK(none.offload_wait_s == 0);
  for (const auto& a : none.advice) CHECK(a.change.find("activation_offload_layers") == std::string::npos);
}
