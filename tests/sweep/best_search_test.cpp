// What the best-configuration search tries and how it ranks: TP up to the NVLink domain,
// context parallelism, TP overlap and precision searched, identical results shown once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>

#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"
#include "sweep/best.hpp"
#include "sweep/search_helpers.hpp"

using stepsim::sweep::BestResult;
using stepsim::sweep::Candidate;
using stepsim::sweep::enumerate_layouts;
using stepsim::sweep::SearchSpace;
using stepsim::sweep::SweepSpec;
using stepsim::sweep::value_of;

using stepsim::testing::spec_of;
using stepsim::testing::values;

namespace {


}  // namespace

// A GB200 NVL72 rack is one NVLink domain of 72 GPUs in trays of 4: Megatron's TP of 8 runs
// on NVLink there, as it does inside an 8-GPU DGX.
TEST_CASE("the search's TP reaches across the trays of an NVL72 rack, not past its NVLink domain") {
  BestResult result;
  // TP splits the key/value heads too: 64 of them, one per query head, so that TP may reach 64.
  const auto rack =
      enumerate_layouts(spec_of({"model=llama3-70b", "model.kv_heads=64", "cluster=gb200-nvl72"}, 128), {}, result);
  const auto tps = values(rack, "parallel.tp");
  CHECK(tps.contains("8"));
  CHECK(tps.contains("64"));  // the 64 heads split over 64 GPUs of one rack
  // With Llama 3 70B's 8 key/value heads TP stops at 8.
  BestResult gqa_result;
  const auto gqa = enumerate_layouts(spec_of({"model=llama3-70b", "cluster=gb200-nvl72"}, 128), {}, gqa_result);
  CHECK(values(gqa, "parallel.tp") == std::set<std::string>{"1", "2", "4", "8"});
  BestResult dgx_result;
  const auto dgx = enumerate_layouts(spec_of({"model=llama3-70b", "cluster=dgx-h100-ndr"}, 128), {}, dgx_result);
  CHECK(values(dgx, "parallel.tp") == std::set<std::string>{"1", "2", "4", "8"});
}

TEST_CASE("the search tries context parallelism, TP communication overlap and each precision allowed") {
  BestResult result;
  SearchSpace space;
  space.precisions = {"bf16", "fp8"};
  const auto layouts = enumerate_layouts(spec_of({"model=llama3-70b"}, 64), space, result);
  CHECK(values(layouts, "parallel.cp") == std::set<std::string>{"1", "2", "4", "8"});
  CHECK(values(layouts, "training.precision") == std::set<std::string>{"bf16", "fp8"});
  CHECK(values(layouts, "tensor_parallel.comm_overlap").contains("true"));
  // Overlap copies over NVLink and needs sequence parallelism: never with TP 1, where it is set
  // off (the scenario's own may be on).
  for (const auto& c : layouts)
    if (value_of(c, "parallel.tp", "") == "1") CHECK(value_of(c, "tensor_parallel.comm_overlap", "-") == "false");
}

// The scenario's own layout keys do not follow the search to layouts they do not fit: an
// interleaved schedule of 2 stages, TP overlap on, an uneven split of layers over its stages.
// Each candidate sets the schedule and virtual stages, the overlap and an even split, so that
// the search refuses no more candidates than it does from a scenario without them.
TEST_CASE("the scenario's schedule, TP overlap and stage split do not follow the search to other layouts") {
  const auto scenario = [](const std::string& own) {
    SweepSpec spec = spec_of({}, 8);
    spec.scenario = {"own.json", R"({"model": "gpt-1.3b", "cluster": "dgx-h100-ndr", )" + own +
                                     R"(, "training": {"global_batch": 128}})"};
    return spec;
  };
  // How many of a search's layouts load, and that none is refused for a key of the scenario's layout.
  const auto loadable = [](const SweepSpec& spec, const std::vector<Candidate>& layouts) {
    std::size_t n = 0;
    for (const auto& c : layouts) {
      try {
        (void)stepsim::io::load_scenario(spec.scenario, c.sets);
        ++n;
      } catch (const stepsim::InputError& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(what.find("virtual_stages") == std::string::npos);
        CHECK(what.find("comm_overlap") == std::string::npos);
        CHECK(what.find("stage_layers") == std::string::npos);
      }
    }
    return n;
  };
  const SweepSpec plain = scenario(R"("parallel": {"dp": 8})");
  BestResult plain_result;
  const auto plain_layouts = enumerate_layouts(plain, {}, plain_result);
  const std::size_t plain_loadable = loadable(plain, plain_layouts);
  REQUIRE(plain_loadable > 0);
  for (const std::string own : {R"("parallel": {"pp": 2, "dp": 4, "schedule": "interleaved", "virtual_stages": 2})",
                                R"("parallel": {"tp": 2, "dp": 4, "sequence_parallel": true},
                                   "tensor_parallel": {"comm_overlap": true})",
                                R"("parallel": {"pp": 2, "dp": 4, "stage_layers": [10, 14]})"}) {
    const SweepSpec spec = scenario(own);
    INFO(own);
    BestResult result;
    const auto layouts = enumerate_layouts(spec, {}, result);
    CHECK(layouts.size() == plain_layouts.size());
    CHECK(loadable(spec, layouts) == plain_loadable);
  }
}

// A scenario whose own layout does not fit its job (a global batch of 100 that its micro-batch
// and DP of 8 do not divide) still searches the layouts that do: on 4 GPUs, DP 4 and DP 2 with
// micro-batches of 1 or 2 (100 = 4·25 = 2·50 = 4·1·25 ...).
TEST_CASE("the search runs from a scenario whose own layout does not divide its global batch") {
  using stepsim::sweep::base_sets;
  const SweepSpec spec = spec_of({"model=gpt-1.3b", "training.global_batch=100"}, 4);
  CHECK_NOTHROW(base_sets(spec));
  BestResult result;
  const auto layouts = enumerate_layouts(spec, {}, result);
  CHECK(values(layouts, "parallel.dp") == std::set<std::string>{"1", "2", "4"});
  CHECK(values(layouts, "training.micro_batch") == std::set<std::string>{"1", "2", "4"});
}

// A virtual-stage count the user fixes is kept: every layout with stages is interleaved at it,
// none sets it again, and the table lists it among the keys fixed.
TEST_CASE("a virtual-stage count given with --set stays fixed in the search") {
  BestResult result;
  const auto layouts = enumerate_layouts(spec_of({"model=gpt-1.3b", "parallel.virtual_stages=2"}, 8), {}, result);
  REQUIRE_FALSE(layouts.empty());
  for (const auto& c : layouts) {
    CHECK(value_of(c, "parallel.virtual_stages", "-") == "-");
    if (value_of(c, "parallel.pp", "1") != "1") CHECK(value_of(c, "parallel.schedule", "-") == "interleaved");
  }
  CHECK(std::ranges::find(result.fixed, "parallel.virtual_stages") != result.fixed.end());
}

// A schedule the user fixes other than 1F1B needs a pipeline: the search tries no single
// stage, where it would be refused.
TEST_CASE("a schedule given with --set keeps the search to layouts with stages") {
  for (const char* schedule : {"gpipe", "zb-h1"}) {
    INFO(schedule);
    BestResult result;
    const auto layouts =
        enumerate_layouts(spec_of({"model=gpt-1.3b", std::string("parallel.schedule=") + schedule}, 8), {}, result);
    REQUIRE_FALSE(layouts.empty());
    CHECK(values(layouts, "parallel.pp").count("1") == 0);
    CHECK(values(layouts, "parallel.schedule") == std::set<std::string>{"-"});
  }
  // The search's own schedule at one stage is 1F1B.
  BestResult result;
  const auto layouts = enumerate_layouts(spec_of({"model=gpt-1.3b"}, 8), {}, result);
  for (const auto& c : layouts)
    if (value_of(c, "parallel.pp", "-") == "1") CHECK(value_of(c, "parallel.schedule", "-") == "1f1b");
}

// Identical results are one row: two configurations that differ only in a knob that changes
// nothing (a bucket size ZeRO-1 does not use the same way, say) are listed in one row.
TEST_CASE("the ranking shows each result once and lists the configurations that give it") {
  const BestResult best = stepsim::sweep::search_best(
      spec_of({"model=gpt-1.3b", "data_parallel.kind=zero1", "training.recompute=none", "training.micro_batch=2"}, 8),
      2, false);
  REQUIRE(best.ranked.size() > 1);
  for (std::size_t i = 1; i < best.ranked.size(); ++i) {
    const auto& a = best.ranked[i - 1].second;
    const auto& b = best.ranked[i].second;
    CHECK_FALSE((a.step_time_s == b.step_time_s && a.breakdown_s == b.breakdown_s &&
                 a.memory_bytes.device == b.memory_bytes.device));
  }
  std::set<std::vector<std::string>> shown;
  for (const auto& [c, r] : best.ranked) {
    auto sets = c.sets;
    std::sort(sets.begin(), sets.end());
    CHECK(shown.insert(sets).second);
  }
}

// gradient_as_bucket_view false is PyTorch DDP's option alone, and DeepSpeed's ZeRO-3 refuses
// mixture-of-experts models: a scenario fixing either leaves the search the kinds it admits, in
// both stages, instead of layouts that are all refused. Elsewhere FSDP of a mixture of experts
// is searched.
TEST_CASE("the search keeps to the data-parallel kinds the scenario admits") {
  BestResult result;
  const SweepSpec ddp =
      spec_of({"model=gpt-1.3b", "training.framework=pytorch", "data_parallel.gradient_as_bucket_view=false"}, 8);
  const auto layouts = enumerate_layouts(ddp, {}, result);
  REQUIRE_FALSE(layouts.empty());
  CHECK(values(layouts, "data_parallel.kind") == std::set<std::string>{"ddp"});
  CHECK(values(stepsim::sweep::refinements(ddp, layouts.front()), "data_parallel.kind") ==
        std::set<std::string>{"ddp"});
  BestResult moe_result;
  SweepSpec moe = spec_of({"training.framework=deepspeed", "data_parallel.overlap_param_gather=false"}, 64);
  moe.scenario.path = "mixtral-8x7b-ep8-64xh100";
  CHECK(values(enumerate_layouts(moe, {}, moe_result), "data_parallel.kind") ==
        std::set<std::string>{"zero1", "zero2"});
  CHECK(values(stepsim::sweep::refinements(moe, enumerate_layouts(moe, {}, moe_result).front()),
               "data_parallel.kind") == std::set<std::string>{"ddp", "zero1", "zero2"});
  BestResult megatron_moe_result;
  SweepSpec megatron_moe = spec_of({}, 64);
  megatron_moe.scenario.path = "mixtral-8x7b-ep8-64xh100";
  CHECK(values(enumerate_layouts(megatron_moe, {}, megatron_moe_result), "data_parallel.kind") ==
        std::set<std::string>{"zero1", "zero2", "fsdp"});
  // Without such a key, every first-stage kind.
  BestResult dense_result;
  CHECK(values(enumerate_layouts(spec_of({"model=gpt-1.3b"}, 8), {}, dense_result), "data_parallel.kind") ==
        std::set<std::string>{"zero1", "zero2", "fsdp"});
}

// torchtitan and eager PyTorch have DDP, FSDP and HSDP and no distributed optimizer: their
// search tries neither zero1 nor zero2 (which the scenario would refuse), in either stage.
TEST_CASE("the search tries only the data-parallel kinds the framework has") {
  for (const char* framework : {"pytorch", "torchtitan"}) {
    INFO(framework);
    BestResult result;
    const SweepSpec spec = spec_of({"model=gpt-1.3b", std::string("training.framework=") + framework}, 8);
    const auto layouts = enumerate_layouts(spec, {}, result);
    REQUIRE_FALSE(layouts.empty());
    CHECK(values(layouts, "data_parallel.kind") == std::set<std::string>{"fsdp"});
    CHECK(values(stepsim::sweep::refinements(spec, layouts.front()), "data_parallel.kind") ==
          std::set<std::string>{"ddp", "fsdp"});
  }
}

TEST_CASE("a search that ranks nothing gives the first refusal's reason") {
  BestResult best;
  best.candidates = 3;
  best.invalid = 3;
  best.first_refusal = "<default>: /parallel/tp: 3 does not divide 32 heads";
  std::ostringstream out;
  stepsim::sweep::write_best(spec_of({}, 8), best, 3, out);
  CHECK(out.str().find("no configuration fits\nthe first configuration refused by validation: <default>: "
                       "/parallel/tp: 3 does not divide 32 heads\n") != std::string::npos);
}

// The HSDP example (eager PyTorch: DDP, FSDP and HSDP) sets shard_group, which FSDP and DDP
// refuse: their candidates take it back to its default rather than leaving the search HSDP
// alone. The scenario's own kind joins the second stage.
TEST_CASE("the search's candidates of another kind take the scenario's kind keys back to their defaults") {
  BestResult result;
  SweepSpec hsdp = spec_of({}, 64);
  hsdp.scenario.path = "hsdp-llama3-8b-64xh100";
  const auto layouts = enumerate_layouts(hsdp, {}, result);
  CHECK(values(layouts, "data_parallel.kind") == std::set<std::string>{"fsdp"});
  for (const auto& c : layouts) CHECK(value_of(c, "data_parallel.shard_group", "-") == "0");
  const auto refined = stepsim::sweep::refinements(hsdp, layouts.front());
  CHECK(values(refined, "data_parallel.kind") == std::set<std::string>{"ddp", "fsdp", "hsdp"});
  for (const auto& c : refined) {
    const std::string kind = value_of(c, "data_parallel.kind", "");
    CHECK(value_of(c, "data_parallel.shard_group", "-") == (kind == "hsdp" ? "-" : "0"));
    // Neither FSDP kind has gradient buckets to size.
    if (kind == "hsdp" || kind == "fsdp") CHECK(value_of(c, "data_parallel.bucket_cap_mb", "-") == "-");
  }
  // Given with --set, the key holds: only HSDP admits it.
  BestResult fixed_result;
  SweepSpec fixed = spec_of({"data_parallel.shard_group=8"}, 64);
  fixed.scenario.path = "hsdp-llama3-8b-64xh100";
  CHECK(values(enumerate_layouts(fixed, {}, fixed_result), "data_parallel.kind") == std::set<std::string>{"hsdp"});
}

// Under DeepSpeed's pipeline engine the gradients are reduced after the schedule, so a
// pipelined candidate gets no DDP bucket size to try, while one without a pipeline does.
TEST_CASE("the search tries no bucket size on a pipeline of DeepSpeed's engine") {
  const SweepSpec spec = spec_of({"model=gpt-1.3b", "training.framework=deepspeed"}, 8);
  Candidate piped;
  piped.sets = {"parallel.tp=1", "parallel.pp=2", "parallel.dp=4", "parallel.schedule=1f1b"};
  Candidate flat;
  flat.sets = {"parallel.tp=1", "parallel.pp=1", "parallel.dp=8"};
  CHECK(values(stepsim::sweep::refinements(spec, piped), "data_parallel.bucket_cap_mb") == std::set<std::string>{"-"});
  CHECK(values(stepsim::sweep::refinements(spec, flat), "data_parallel.bucket_cap_mb").count("100") == 1);
  // Nor a size in parameters: the engine reduces in its own 5e8-element buffers.
  CHECK(values(stepsim::sweep::refinements(spec, piped), "data_parallel.bucket_parameters") ==
        std::set<std::string>{"-"});
}

// Megatron-Core's buckets (ZeRO) are sized in parameters: at DP 64 its default is
// max(4e7, 1e6·64) = 6.4e7, and the search tries it, a quarter (1.6e7) and four times
// (2.56e8); DeepSpeed's ZeRO starts from its reduce_bucket_size, 5e8 (1.25e8, 2e9). PyTorch's
// DDP keeps its MiB, FSDP has no buckets.
TEST_CASE("the search tries Megatron-Core's and DeepSpeed's bucket sizes in parameters") {
  Candidate layout;
  layout.sets = {"parallel.tp=1", "parallel.pp=1", "parallel.dp=64"};
  for (const auto& [framework, sizes] : std::vector<std::pair<std::string, std::set<std::string>>>{
           {"megatron", {"-", "16000000", "256000000"}}, {"deepspeed", {"-", "125000000", "2000000000"}}}) {
    INFO(framework);
    const SweepSpec spec = spec_of({"model=gpt-1.3b", "training.framework=" + framework}, 64);
    std::set<std::string> zero;
    for (const auto& c : stepsim::sweep::refinements(spec, layout)) {
      const std::string kind = value_of(c, "data_parallel.kind", "");
      if (kind == "zero1") zero.insert(value_of(c, "data_parallel.bucket_parameters", "-"));
      if (kind == "fsdp") CHECK(value_of(c, "data_parallel.bucket_parameters", "-") == "-");
      if (kind == "zero1" || kind == "fsdp") CHECK(value_of(c, "data_parallel.bucket_cap_mb", "-") == "-");
    }
    CHECK(zero == sizes);
  }
  // Given with --set, the size holds: no candidate sets another.
  const SweepSpec fixed =
      spec_of({"model=gpt-1.3b", "data_parallel.kind=zero1", "data_parallel.bucket_parameters=5000000"}, 64);
  CHECK(values(stepsim::sweep::refinements(fixed, layout), "data_parallel.bucket_parameters") ==
        std::set<std::string>{"-"});
}

// The search replaces the scenario's layout, so a layout refused only as the scenario has it
// does not stop it: the default (TP 8 without sequence parallelism) with a mixture of experts,
// which needs sequence parallelism at tp > 1, or with 12 heads, which TP 8 does not divide.
// A key the user fixes stays fixed, and its refusal stands.
TEST_CASE("the search starts from the scenario's layout made valid, unless the user fixed what refuses it") {
  using stepsim::sweep::base_sets;
  const SweepSpec moe = spec_of({"model=mixtral-8x7b"}, 64);
  CHECK(base_sets(moe) == std::vector<std::string>{"model=mixtral-8x7b", "parallel.sequence_parallel=true"});
  BestResult result;
  const auto layouts = enumerate_layouts(moe, {}, result);
  REQUIRE_FALSE(layouts.empty());
  for (const auto& c : layouts)
    if (value_of(c, "parallel.tp", "1") != "1") CHECK(value_of(c, "parallel.sequence_parallel", "-") == "true");
  const SweepSpec heads = spec_of({"model=gpt-1.3b", "model.heads=12", "model.kv_heads=12", "model.head_dim=128"}, 8);
  // TP 1, where sequence parallelism is refused: off with it (the user did not fix it).
  const auto heads_base = base_sets(heads);
  REQUIRE(heads_base.size() >= 2);
  CHECK(heads_base[heads_base.size() - 2] == "parallel.tp=1");
  CHECK(heads_base.back() == "parallel.sequence_parallel=false");
  BestResult heads_result;
  CHECK(values(enumerate_layouts(heads, {}, heads_result), "parallel.tp") == std::set<std::string>{"1", "2", "4"});
  // Sequence parallelism fixed off: the search starts at TP 1; TP 8 fixed too: refused.
  CHECK(base_sets(spec_of({"model=mixtral-8x7b", "parallel.sequence_parallel=false"}, 64)).back() == "parallel.tp=1");
  CHECK_THROWS_WITH(
      base_sets(spec_of({"model=mixtral-8x7b", "parallel.sequence_parallel=false", "parallel.tp=8"}, 64)),
      "--set: parallel.sequence_parallel: mixture-of-experts layers with tp > 1 need sequence parallelism "
      "(Megatron requires it)");
}

// A mixture of experts: EP 1, the largest EP group inside one NVLink domain (8 GPUs of a DGX)
// and the largest of all, each a power of two dividing the experts and the stage's tp·cp·dp.
// Mixtral's 8 experts on 64 GPUs at TP 1, PP 1: EP 1 and 8 (8 is both); 32 experts: 1, 8, 32;
// at TP 2 and ETP 1 the EP group lies within the TP·DP ranks as well, so the same; at TP 2 and
// ETP 2 an expert group of ep·2 ranks stays inside 8 GPUs up to EP 4: 1, 4, 32. A dense model
// gets no EP, and an EP the user fixes is kept.
TEST_CASE("the search tries expert parallelism: none, the largest inside an NVLink domain, the largest") {
  const auto eps = [](const std::vector<Candidate>& layouts, const std::string& tp, const std::string& etp = "1") {
    std::set<std::string> out;
    for (const auto& c : layouts)
      if (value_of(c, "parallel.tp", "") == tp && value_of(c, "parallel.pp", "") == "1" &&
          value_of(c, "parallel.cp", "1") == "1" && value_of(c, "parallel.etp", "-") == etp)
        out.insert(value_of(c, "parallel.ep", "-"));
    return out;
  };
  BestResult r1, r2, r3, r4;
  CHECK(eps(enumerate_layouts(spec_of({"model=mixtral-8x7b"}, 64), {}, r1), "1") == std::set<std::string>{"1", "8"});
  const auto wide = enumerate_layouts(spec_of({"model=mixtral-8x7b", "model.moe.experts=32"}, 64), {}, r2);
  CHECK(eps(wide, "1") == std::set<std::string>{"1", "8", "32"});
  CHECK(eps(wide, "2") == std::set<std::string>{"1", "8", "32"});
  CHECK(eps(wide, "2", "2") == std::set<std::string>{"1", "4", "32"});
  CHECK(values(enumerate_layouts(spec_of({"model=gpt-1.3b"}, 8), {}, r3), "parallel.ep") == std::set<std::string>{"-"});
  const SweepSpec fixed = spec_of({"model=mixtral-8x7b", "parallel.ep=4"}, 64);
  CHECK(values(enumerate_layouts(fixed, {}, r4), "parallel.ep") == std::set<std::string>{"-"});
  CHECK(std::find(r4.fixed.begin(), r4.fixed.end(), "parallel.ep") != r4.fixed.end());
}

// Ranked by step time alone, configurations with the same step may differ in memory (FSDP's
// against ZeRO-1's): the identical ones share a row even when such another sits between them.
TEST_CASE("configurations with identical results share one row wherever they rank") {
  const BestResult result =
      stepsim::sweep::search_best(spec_of({"model=gpt-1.3b", "training.global_batch=8"}, 1), 2, false);
  REQUIRE(result.ranked.size() > 2);
  std::size_t shared = 0;
  for (std::size_t i = 0; i < result.ranked.size(); ++i) {
    const stepsim::Report& a = result.ranked[i].second;
    shared += result.ranked[i].first.alike.size();
    for (std::size_t j = i + 1; j < result.ranked.size(); ++j) {
      const stepsim::Report& b = result.ranked[j].second;
      INFO("rows " << i + 1 << " and " << j + 1);
      CHECK_FALSE((a.step_time_s == b.step_time_s && a.breakdown_s == b.breakdown_s &&
                   a.memory_bytes.device == b.memory_bytes.device));
    }
  }
  CHECK(shared > 0);
}

// A PCIe node has no NVLink for Transformer Engine's overlap to copy over: the search does not
// try it there, and every layout it enumerates loads (validation refuses the overlap on PCIe).
TEST_CASE("the search does not try TP communication overlap on a PCIe fabric") {
  const std::vector<std::string> pcie{"model=llama3-70b",
                                      "parallel.tp=8",
                                      "cluster.intra_node.fabric=pcie",
                                      "cluster.intra_node.nvls=false",
                                      "cluster.intra_node.bandwidth=32GB/s",
                                      "cluster.intra_node.latency=1us"};
  BestResult result;
  const SweepSpec spec = spec_of(pcie, 64);
  const auto layouts = enumerate_layouts(spec, {}, result);
  REQUIRE_FALSE(layouts.empty());
  CHECK(values(layouts, "tensor_parallel.comm_overlap") == std::set<std::string>{"false"});
  for (const auto& c : stepsim::sweep::refinements(spec, layouts.front()))
    CHECK(value_of(c, "tensor_parallel.comm_overlap", "-") != "true");
}

// ZeRO-2 shards the gradients as well as the optimizer states, so it fits where ZeRO-1 does not:
// on zero1-llama3-8b-64xh100, TP 1 with DP 64 needs 92 GiB under ZeRO-1 without recompute, and
// simulate --advise finds it at 0.783 s under ZeRO-2, faster than any ZeRO-1 or FSDP layout. The
// search tries ZeRO-2 in both stages wherever the scenario admits it (every framework but
// DeepSpeed's pipeline engine, which runs ZeRO stage 0 or 1 only), says so in its rows, and its
// lower bound stays below every ZeRO-2 step it simulates.
TEST_CASE("the search tries ZeRO-2 where the scenario runs it and finds the layout only it fits") {
  SweepSpec spec = spec_of({}, 64);
  spec.scenario.path = "zero1-llama3-8b-64xh100";
  const BestResult best = stepsim::sweep::search_best(spec, 2, false);
  REQUIRE_FALSE(best.ranked.empty());
  const auto& [fastest, report] = best.ranked.front();
  CHECK(value_of(fastest, "data_parallel.kind", "") == "zero2");
  // No slower than the configuration the advice simulates.
  const double advised =
      stepsim::simulate(
          stepsim::io::load_scenario(spec.scenario, {"parallel.tp=1", "parallel.dp=64", "data_parallel.kind=zero2"}),
          stepsim::SimulateOptions::report_only())
          .report.step_time_s;
  CHECK(report.step_time_s <= advised);
  int zero2 = 0;
  for (const auto& [c, r] : best.ranked) {
    if (value_of(c, "data_parallel.kind", "") != "zero2") continue;
    ++zero2;
    INFO(stepsim::sweep::value_of(c, "parallel.tp", "") << " " << value_of(c, "parallel.cp", ""));
    CHECK(stepsim::sweep::step_lower_bound(spec, c) <= r.step_time_s);
  }
  CHECK(zero2 > 1);
  // DeepSpeed's pipeline engine refuses ZeRO-2: no layout with stages, nor their refinement, tries it.
  BestResult ds_result;
  const SweepSpec ds = spec_of({"model=gpt-1.3b", "training.framework=deepspeed"}, 8);
  const auto layouts = enumerate_layouts(ds, {}, ds_result);
  for (const auto& c : layouts) {
    const bool staged = value_of(c, "parallel.pp", "1") != "1";
    if (staged) CHECK(value_of(c, "data_parallel.kind", "") == "zero1");
    for (const auto& r : stepsim::sweep::refinements(ds, c))
      if (staged) CHECK(value_of(r, "data_parallel.kind", "") != "zero2");
  }
  CHECK(values(layouts, "data_parallel.kind").contains("zero2"));
}
