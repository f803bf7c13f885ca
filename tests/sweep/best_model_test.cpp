// The best-configuration search enumerates only what the scenario's model runs: validation
// refuses context parallelism and TP overlap with latent attention, context parallelism with
// multi-token prediction, sliding windows or unfused attention, EP 1 beside Megatron-Core's EP
// overlap or an imbalance, and more. The oracle is validation itself: every layout enumerated,
// and every configuration the search tries, loads.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
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

// The refusals of `layouts` (and of the second stage's candidates for the first of them), each
// loaded after the user's --set as the search loads it, without recompute (which the search
// chooses when it simulates); "" when every one loads.
std::string refusals(const SweepSpec& spec, const std::vector<Candidate>& layouts) {
  std::vector<Candidate> all = layouts;
  if (!layouts.empty())
    for (auto& c : stepsim::sweep::refinements(spec, layouts.front())) all.push_back(std::move(c));
  std::string out;
  for (const Candidate& c : all) {
    auto sets = spec.sets;
    sets.insert(sets.end(), c.sets.begin(), c.sets.end());
    try {
      (void)stepsim::io::load_scenario(spec.scenario, sets);
    } catch (const stepsim::InputError& e) {
      out += fmt::format("{}\n  {}\n", fmt::join(c.sets, " "), e.what());
    }
  }
  return out;
}

SearchSpace with_precisions(std::vector<std::string> precisions) {
  SearchSpace space;
  space.precisions = std::move(precisions);
  return space;
}

}  // namespace

// DeepSeek-V3 (latent attention, 61 layers: PP 1 or 61) on 256 GB200 in MXFP8: every layout
// the search enumerated had CP > 1 or TP overlap, and validation refused all of them. Now it
// tries neither, and its fastest is the fastest of the search with both fixed by --set at what
// the model runs (cp 1, TP overlap off): the same question asked the other way.
TEST_CASE("the search tries neither context parallelism nor TP overlap for latent attention, and fits DeepSeek-V3",
          "[slow]") {
  const std::vector<std::string> job = {"model=deepseek-v3", "cluster=gb200-nvl72"};
  const SweepSpec spec = spec_of(job, 256);
  BestResult enumerated;
  const auto layouts = enumerate_layouts(spec, with_precisions({"mxfp8"}), enumerated);
  REQUIRE_FALSE(layouts.empty());
  CHECK(values(layouts, "parallel.cp") == std::set<std::string>{"1"});
  CHECK(values(layouts, "tensor_parallel.comm_overlap") == std::set<std::string>{"false"});
  CHECK(values(layouts, "parallel.tp").contains("8"));  // TP with sequence parallelism, still searched
  CHECK(refusals(spec, layouts).empty());

  const BestResult best = stepsim::sweep::search_best(spec, 2, false, with_precisions({"mxfp8"}));
  CHECK(best.invalid == 0);
  REQUIRE_FALSE(best.ranked.empty());
  auto fixed_sets = job;
  fixed_sets.insert(fixed_sets.end(), {"parallel.cp=1", "tensor_parallel.comm_overlap=false"});
  const BestResult fixed = stepsim::sweep::search_best(spec_of(fixed_sets, 256), 2, false, with_precisions({"mxfp8"}));
  REQUIRE_FALSE(fixed.ranked.empty());
  CHECK(best.ranked.front().second.step_time_s == fixed.ranked.front().second.step_time_s);
  // A CP the user fixes stays fixed, and validation gives its reason.
  BestResult user;
  auto user_sets = job;
  user_sets.insert(user_sets.end(), {"parallel.sequence_parallel=true", "parallel.cp=2"});
  CHECK_THROWS_WITH(enumerate_layouts(spec_of(user_sets, 256), {}, user),
                    Catch::Contains("latent attention (model.mla) with cp > 1 is not simulated yet"));
}

// Each model feature that validation refuses some searched key beside, on a scenario with that
// feature: the search never enumerates the refused value, and every layout it enumerates loads.
TEST_CASE("every layout the search enumerates for a model feature that limits the layout passes validation") {
  struct Case {
    std::vector<std::string> sets;
    int gpus;
    const char* key;                 // the key the feature limits
    std::set<std::string> refused;   // values of it never enumerated
    std::set<std::string> searched;  // values of it still enumerated
  };
  const std::vector<Case> cases = {
      // Llama 4 Maverick's 40 heads, 8 key/value heads and FFN of 16384 at a sequence of 8190
      // (2·3²·5·7·13) tokens, which sequence parallelism splits over TP 5, 10 and 20: TP must
      // also divide the key/value heads or be divided by them, and divide the FFN.
      {{"model=llama4-maverick", "model.seq_len=8190", "cluster=gb200-nvl72", "training.framework=megatron",
        "training.global_batch=1920"},
       240,
       "parallel.tp",
       {"5", "10", "20", "40"},
       {"1", "2"}},
      // Latent attention: no CP, no TP overlap (above); with multi-token prediction, no CP either.
      {{"model=deepseek-v3", "model.mtp_layers=1", "cluster=gb200-nvl72"}, 256, "parallel.cp", {"2", "4"}, {"1"}},
      // gpt-oss's sliding windows: no CP.
      {{"model=gpt-oss-120b", "training.framework=megatron"}, 64, "parallel.cp", {"2", "4", "8"}, {"1"}},
      // Unfused attention runs no CP ring.
      {{"model=llama3-8b", "training.attention=unfused"}, 64, "parallel.cp", {"2", "4", "8"}, {"1"}},
      // Megatron-Core's EP overlap: an all-to-all to overlap (EP > 1), and at PP > 1 the
      // interleaved schedule only.
      {{"model=mixtral-8x7b", "training.framework=megatron", "model.moe.a2a_overlap=true"},
       64,
       "parallel.ep",
       {"1"},
       {"8"}},
      {{"model=mixtral-8x7b", "training.framework=megatron", "model.moe.a2a_overlap=true"},
       64,
       "parallel.schedule",
       {"1f1b"},
       {"interleaved"}},
      // An imbalance of 1.5 needs EP ranks to spread it over.
      {{"model=mixtral-8x7b", "model.moe.imbalance=1.5"}, 64, "parallel.ep", {"1"}, {"8"}},
      // The flex dispatcher needs an EP all-to-all.
      {{"model=mixtral-8x7b", "training.framework=megatron", "model.moe.dispatcher=flex"},
       64,
       "parallel.ep",
       {"1"},
       {"8"}},
      // DeepSpeed's pipeline engine runs no mixture of experts, and its own 1F1B only.
      {{"model=mixtral-8x7b", "training.framework=deepspeed"}, 64, "parallel.pp", {"2", "4", "8"}, {"1"}},
      {{"model=gpt-1.3b", "training.framework=deepspeed"}, 16, "parallel.schedule", {"interleaved"}, {"1f1b"}},
      // Activation offload runs without a pipeline.
      {{"model=llama3-8b", "training.framework=megatron", "training.activation_offload_layers=4"},
       64,
       "parallel.pp",
       {"2", "4"},
       {"1"}},
  };
  for (const Case& c : cases) {
    INFO(fmt::format("{} on {} GPUs: {}", fmt::join(c.sets, " "), c.gpus, c.key));
    const SweepSpec spec = spec_of(c.sets, c.gpus);
    BestResult result;
    auto layouts = enumerate_layouts(spec, {}, result);
    REQUIRE_FALSE(layouts.empty());
    const std::string refused = refusals(spec, layouts);
    INFO(refused);
    CHECK(refused.empty());
    // A schedule orders a pipeline: one stage's is 1F1B whatever the model.
    std::erase_if(layouts, [&](const Candidate& l) {
      return std::string(c.key) == "parallel.schedule" && value_of(l, "parallel.pp", "1") == "1";
    });
    const auto seen = values(layouts, c.key);
    for (const auto& v : c.refused) CHECK_FALSE(seen.contains(v));
    for (const auto& v : c.searched) CHECK(seen.contains(v));
  }
}

// Megatron-Core's EP overlap refuses EP 1, 1F1B with a pipeline, full recompute and an FP32
// model: the search tries none of them, so it refuses nothing, and says why FP32 is left out.
TEST_CASE("the search simulates Megatron-Core's EP overlap only where it runs", "[slow]") {
  const SweepSpec spec =
      spec_of({"model=mixtral-8x7b", "training.framework=megatron", "model.moe.a2a_overlap=true"}, 16);
  const BestResult best = stepsim::sweep::search_best(spec, 2, false, with_precisions({"bf16", "fp32"}));
  INFO(best.first_refusal);
  CHECK(best.invalid == 0);
  REQUIRE_FALSE(best.ranked.empty());
  CHECK(std::find(best.notes.begin(), best.notes.end(),
                  "fp32 is not searched: model.moe.a2a_overlap runs with a bf16 or fp16 model only (Megatron-Core)") !=
        best.notes.end());
  for (const auto& [c, report] : best.ranked) {
    INFO(fmt::format("{}", fmt::join(c.sets, " ")));
    CHECK(value_of(c, "parallel.ep", "1") != "1");
    CHECK(value_of(c, "training.recompute", "-") != "full");
    CHECK(value_of(c, "training.precision", "-") == "bf16");
  }
}

// Llama 3 70B on one DGX H100 with Megatron-Core's per-layer CUDA graphs: no layout fits
// without full recompute, which Megatron-Core refuses beside them. Each layout is counted as
// not fitting (as with selective recompute fixed by --set, the most the graphs allow), not as
// refused for a full recompute the search chose.
TEST_CASE("the search chooses no full recompute beside per-layer CUDA graphs", "[slow]") {
  const std::vector<std::string> job = {"model=llama3-70b", "training.framework=megatron", "training.cuda_graphs=true"};
  const BestResult best = stepsim::sweep::search_best(spec_of(job, 8), 2, false);
  CHECK(best.invalid == 0);
  CHECK(best.ranked.empty());
  auto selective = job;
  selective.emplace_back("training.recompute=selective");
  const BestResult fixed = stepsim::sweep::search_best(spec_of(selective, 8), 2, false);
  CHECK(fixed.invalid == 0);
  CHECK(best.oom == fixed.oom);
  CHECK(best.oom == best.candidates);
}

// GPT 22B (GeLU, trained with dropout) on one DGX H100 with Megatron-Core's whole-layer CUDA
// graphs: the layouts that do not fit without recompute may take neither selective recompute
// (the graphed attention core beside attention dropout) nor full recompute, which
// Megatron-Core refuses beside them. The search asks validation which modes run, so none of its
// layouts is refused for a mode it chose.
TEST_CASE("the search chooses no recompute that validation refuses beside CUDA graphs", "[slow]") {
  const std::vector<std::string> job = {"model=gpt-22b", "training.framework=megatron", "training.cuda_graphs=true"};
  const BestResult best = stepsim::sweep::search_best(spec_of(job, 8), 2, false);
  CHECK(best.invalid == 0);
  CHECK(best.oom > 0);
  for (const auto& [c, report] : best.ranked) {
    INFO(fmt::format("{}", fmt::join(c.sets, " ")));
    CHECK(value_of(c, "training.recompute", "none") == "none");
  }
}

// Every model preset on 240 GPUs of 8-GPU nodes and of NVL72 racks (a count of many divisors:
// TP 3, 5, 6, 10, 12, 15, 20, 24, 30, 40 among them, and a global batch that every DP degree
// and micro-batch divide): whatever the model's heads, FFN, key/value heads and features,
// each layout enumerated loads.
TEST_CASE("every layout the search enumerates for each model preset passes validation", "[slow]") {
  for (const char* model :
       {"bloom-176b", "deepseek-v3",     "gpt-1.3b",      "gpt-1.7b",     "gpt-145b",        "gpt-18b",
        "gpt-1t",     "gpt-22b",         "gpt-3.6b",      "gpt-310b",     "gpt-39b",         "gpt-530b",
        "gpt-7.5b",   "gpt-76b",         "gpt-oss-120b",  "gpt3-175b",    "llama3-405b",     "llama3-70b",
        "llama3-8b",  "llama4-maverick", "mixtral-8x22b", "mixtral-8x7b", "qwen3-235b-a22b", "qwen3-30b-a3b"})
    for (const char* cluster : {"dgx-h100-ndr", "gb200-nvl72"}) {
      INFO(fmt::format("{} on {}", model, cluster));
      // gpt-oss's clamp and biases are simulated as Megatron-Core runs them.
      const SweepSpec spec = spec_of({std::string("model=") + model, std::string("cluster=") + cluster,
                                      "training.framework=megatron", "training.global_batch=1920"},
                                     240);
      BestResult result;
      const auto layouts = enumerate_layouts(spec, {}, result);
      const std::string refused = refusals(spec, layouts);
      INFO(refused);
      CHECK(refused.empty());
    }
}

// Qwen3-30B-A3B cut to 8 layers on two DGX H100 from a scenario at TP 2 and ETP 2: the search
// sets parallel.etp in every layout, 1 or the layout's TP (Megatron-Core's default and the
// recipes' 1), never the scenario's 2 at TP 1, and so finds TP 1, EP 8, ETP 1 at least as fast as
// that layout simulated on its own. Carrying the scenario's ETP 2 to every layout, it had found
// 0.388 s at TP 1 with ETP 2 against that layout's 0.325 s.
TEST_CASE("the search chooses the expert tensor parallelism of every layout of a mixture of experts", "[slow]") {
  namespace fs = std::filesystem;
  const fs::path file = fs::temp_directory_path() / fmt::format("stepsim-etp-search-{}.json", ::getpid());
  {
    std::ofstream out(file);
    out << R"({ "model": {"preset": "qwen3-30b-a3b", "layers": 8},
  "cluster": {"preset": "dgx-h100-ndr", "nodes": 2},
  "parallel": {"tp": 2, "dp": 8, "ep": 4, "etp": 2, "sequence_parallel": true},
  "training": {"global_batch": 64, "micro_batch": 1, "framework": "megatron"},
  "data_parallel": {"kind": "zero1"} })";
  }
  SweepSpec spec;
  spec.scenario = stepsim::io::read_scenario_input(file.string());
  spec.gpus = 16;
  BestResult enumerated;
  const std::vector<Candidate> layouts = enumerate_layouts(spec, {}, enumerated);
  REQUIRE_FALSE(layouts.empty());
  for (const Candidate& c : layouts) {
    INFO(fmt::format("{}", fmt::join(c.sets, " ")));
    const std::string etp = value_of(c, "parallel.etp", "-");
    CHECK((etp == "1" || etp == value_of(c, "parallel.tp", "?")));
  }
  // TP 1, 2 and 4: Qwen3-30B-A3B's 4 key/value heads leave TP 8 out.
  CHECK(values(layouts, "parallel.etp") == std::set<std::string>{"1", "2", "4"});
  const BestResult best = stepsim::sweep::search_best(spec, 2, false);
  REQUIRE_FALSE(best.ranked.empty());
  const double layout = stepsim::simulate(stepsim::io::load_scenario(
                                              spec.scenario, {"parallel.tp=1", "parallel.dp=16", "parallel.ep=8",
                                                              "parallel.etp=1", "parallel.sequence_parallel=false",
                                                              "training.micro_batch=4", "data_parallel.kind=zero2"}))
                            .report.step_time_s;
  CHECK(best.ranked.front().second.step_time_s <= layout);
  fs::remove(file);
}
