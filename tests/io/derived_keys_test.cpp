// The resolved scenario (presets NAME --resolved, the report's config) lists the keys that
// follow other keys where the scenario does not give them, and loading it derives them again:
// under any further --set it is the scenario it came from.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <functional>
#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "load_error.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;

namespace {

// What loading gives: the resolved scenario, or the refusal (its place and message, which do
// not name the file).
std::string outcome(const std::function<Scenario()>& load) {
  try {
    return load().resolved_json;
  } catch (const InputError& e) {
    return "refused: " + e.where() + ": " + e.message();
  }
}

std::string outcome_of(const std::string& name, const std::vector<std::string>& sets) {
  return outcome([&] { return io::load_scenario(name, sets); });
}

std::string outcome_of_text(const std::string& text, const std::vector<std::string>& sets) {
  return outcome([&] { return io::load_scenario_text(text, "resolved.json", sets); });
}

// A PyTorch DDP job that gives no bucket size: gpt-1.3b on 64 A100 at tp 1.
const char* const kPytorchDdp = R"({
  "model": "gpt-1.3b", "cluster": "dgx-a100-80g-hdr",
  "parallel": { "tp": 1, "dp": 64 },
  "training": { "framework": "pytorch", "global_batch": 512, "micro_batch": 8 },
  "data_parallel": { "kind": "ddp" } })";

}  // namespace

TEST_CASE("a resolved example gives what its name gives under any further set") {
  for (const auto& info : io::list_presets([](const ModelSpec&) { return 0LL; })) {
    if (info.kind != "example") continue;
    const Scenario own = io::load_scenario(info.name);
    const std::string resolved = own.resolved_json;
    const int dp = own.parallel.dp;
    const std::vector<std::string> sets = {
        fmt::format("parallel.dp={}", dp > 1 ? dp / 2 : 2),
        fmt::format("parallel.dp={}", dp * 2),
        "training.framework=megatron",
        "training.framework=pytorch",
        "training.framework=torchtitan",
        "training.framework=deepspeed",
        "training.precision=fp32",
        "data_parallel.bucket_cap_mb=100",
        "data_parallel.kind=ddp",
        "data_parallel.kind=zero1",
        fmt::format("model.hidden={}", own.model.hidden * 2),
        fmt::format("model.heads={}", own.model.heads * 2),
        "cluster.gpus_per_node=4",
    };
    for (const auto& set : sets) {
      INFO(info.name << " --set " << set);
      CHECK(outcome_of_text(resolved, {set}) == outcome_of(info.name, {set}));
    }
  }
}

TEST_CASE("a resolved scenario takes the cluster size, framework defaults and first bucket its keys derive") {
  const std::string resolved = io::load_scenario("ddp-1.3b-64xa100").resolved_json;
  // cluster.nodes 0: as many nodes as the job needs, 4 of 8 GPUs for dp 32 (the name runs it).
  const Scenario half = io::load_scenario_text(resolved, "r.json", {"parallel.dp=32"});
  CHECK(half.cluster.nodes == 4);
  // Megatron-Core's DDP buckets are views of its gradient buffer.
  const Scenario megatron = io::load_scenario_text(resolved, "r.json", {"training.framework=megatron"});
  CHECK(megatron.data_parallel.gradient_as_bucket_view);
  // PyTorch's DDP caps its first bucket at 1 MiB only when bucket_cap_mb is unset
  // (torch/nn/parallel/distributed.py): a bucket_cap_mb given caps the first bucket as well.
  const std::string pytorch = io::load_scenario_text(kPytorchDdp, "s.json").resolved_json;
  const Scenario capped = io::load_scenario_text(pytorch, "r.json", {"data_parallel.bucket_cap_mb=100"});
  CHECK(capped.data_parallel.first_bucket_mb == 100);
  CHECK(io::load_scenario_text(pytorch, "r.json").data_parallel.first_bucket_mb == 1);
}

TEST_CASE("the resolved scenario lists the keys it derived and shows their values in force") {
  const auto resolved = boost::json::parse(io::load_scenario_text(kPytorchDdp, "s.json").resolved_json);
  const auto& derived = resolved.at("derived").as_array();
  const auto listed = [&](const char* key) { return std::find(derived.begin(), derived.end(), key) != derived.end(); };
  CHECK(listed("cluster.nodes"));
  CHECK(listed("data_parallel.bucket_cap_mb"));
  CHECK(listed("data_parallel.first_bucket_mb"));
  CHECK(listed("training.fusion"));
  CHECK(resolved.at("cluster").at("nodes").as_int64() == 8);
  CHECK(resolved.at("data_parallel").at("first_bucket_mb").to_number<double>() == 1);
  // Given keys are not listed: the model preset gives its key/value heads, the file its kind.
  CHECK_FALSE(listed("model.kv_heads"));
  const auto given = boost::json::parse(
      io::load_scenario_text(kPytorchDdp, "s.json", {"data_parallel.first_bucket_mb=2", "cluster.nodes=8"})
          .resolved_json);
  const auto& fewer = given.at("derived").as_array();
  CHECK(std::find(fewer.begin(), fewer.end(), "cluster.nodes") == fewer.end());
  CHECK(std::find(fewer.begin(), fewer.end(), "data_parallel.first_bucket_mb") == fewer.end());
}

TEST_CASE("a listed key whose value was edited is refused, and gives its value once taken out of the list") {
  auto doc = boost::json::parse(io::load_scenario_text(kPytorchDdp, "s.json").resolved_json);
  doc.at("data_parallel").as_object()["first_bucket_mb"] = 5;
  CHECK(test::load_error(boost::json::serialize(doc), {}) ==
        "s.json: /data_parallel/first_bucket_mb: is 5, but derived lists data_parallel.first_bucket_mb as following "
        "the other keys, which give 1: take it out of derived to keep 5");
  auto& list = doc.at("derived").as_array();
  list.erase(std::find(list.begin(), list.end(), "data_parallel.first_bucket_mb"));
  CHECK(io::load_scenario_text(boost::json::serialize(doc), "s.json").data_parallel.first_bucket_mb == 5);
}

TEST_CASE("derived lists derivable keys only and is no key to set") {
  CHECK(test::load_error(R"({"model": "llama3-8b", "derived": ["parallel.tp"]})", {})
            .starts_with("s.json: /derived/0: 'parallel.tp' is not one of them: derived lists the keys that follow "
                         "other keys where not given (model.kv_heads, "));
  CHECK(test::load_error(R"({"model": "llama3-8b", "derived": "cluster.nodes"})", {})
            .starts_with("s.json: /derived: expected a list of key names, got "));
  CHECK(test::load_error(io::load_scenario("").resolved_json, {"derived=[]"}) ==
        "--set: derived: is no key to set: a resolved scenario lists under derived the keys that follow other keys; "
        "give a key's own value with --set KEY=VALUE");
}

namespace {

// Mixtral 8x7B on 16 H100 at TP 2 and EP 4 under `framework`, giving no parallel.etp: DDP, but
// under torchtitan FSDP, whose shard ranks its EP is taken from (ParallelDims).
std::string moe_job(const std::string& framework) {
  return fmt::format(R"({{
  "model": "mixtral-8x7b", "cluster": "dgx-h100-ndr",
  "parallel": {{ "tp": 2, "dp": 8, "ep": 4, "sequence_parallel": true }},
  "training": {{ "framework": "{}", "global_batch": 64, "micro_batch": 1 }},
  "data_parallel": {{ "kind": "{}" }} }})",
                     framework, framework == "torchtitan" ? "fsdp" : "ddp");
}

bool lists(const std::string& resolved, const char* key) {
  const boost::json::value document = boost::json::parse(resolved);
  const auto& derived = document.at("derived").as_array();
  return std::find(derived.begin(), derived.end(), key) != derived.end();
}

}  // namespace

// Megatron-Core: "if args.expert_tensor_parallel_size is None: args.expert_tensor_parallel_size =
// args.tensor_model_parallel_size" (megatron/training/arguments.py; model_parallel_config.py's
// __post_init__ and parallel_state.initialize_model_parallel alike). torchtitan's
// expert_tensor_parallel_degree defaults to 1.
TEST_CASE("a mixture of experts under Megatron-Core splits its experts over tp ranks where no layer gives etp") {
  for (const char* framework : {"megatron", "nemo"}) {
    INFO(framework);
    const Scenario s = io::load_scenario_text(moe_job(framework), "s.json");
    CHECK(s.parallel.etp == 2);
    CHECK(lists(s.resolved_json, "parallel.etp"));
    // The resolved file derives it again: from the tp a further --set gives, as the file it came from does.
    CHECK(io::load_scenario_text(s.resolved_json, "r.json").parallel.etp == 2);
    CHECK(io::load_scenario_text(s.resolved_json, "r.json",
                                 {"parallel.tp=1", "parallel.sequence_parallel=false", "parallel.dp=16"})
              .parallel.etp == 1);
    CHECK(outcome_of_text(s.resolved_json, {"training.framework=torchtitan"}) ==
          outcome_of_text(moe_job(framework), {"training.framework=torchtitan"}));
  }
  for (const char* framework : {"torchtitan", "unspecified"}) {
    INFO(framework);
    const Scenario s = io::load_scenario_text(moe_job(framework), "s.json");
    CHECK(s.parallel.etp == 1);
    CHECK(lists(s.resolved_json, "parallel.etp"));
    CHECK(io::load_scenario_text(s.resolved_json, "r.json", {"training.framework=megatron"}).parallel.etp == 2);
  }
  // Given, it stays, and is not listed.
  const Scenario given = io::load_scenario_text(moe_job("megatron"), "s.json", {"parallel.etp=1"});
  CHECK(given.parallel.etp == 1);
  CHECK_FALSE(lists(given.resolved_json, "parallel.etp"));
  // A dense model has no experts to split.
  CHECK(io::load_scenario_text(moe_job("megatron"), "s.json", {"model=llama3-8b", "parallel.ep=1"}).parallel.etp == 1);
}

TEST_CASE("an etp that follows tp and leaves no room for the expert groups is refused saying it follows tp") {
  CHECK(test::load_error(moe_job("megatron"), {"parallel.dp=4", "parallel.ep=8"}) ==
        "s.json: /parallel/etp: ep·etp (8·2) must divide tp·cp·dp (8): expert groups are folded out of the ranks of "
        "one pipeline stage (parallel.etp not given: it follows parallel.tp under Megatron-Core, as "
        "expert_tensor_parallel_size does when unset; give parallel.etp, such as 1, to choose another)");
  CHECK(test::load_error(moe_job("megatron"), {"parallel.dp=4", "parallel.ep=8", "parallel.etp=1"}) == "no error");
}
