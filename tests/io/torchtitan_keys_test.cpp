// The keys torchtitan decides beyond its kernels, from its parallelize_llama: its TP plan always
// shards the sequence (apply_tp), and its FSDP keeps the gathered weights through a pipeline's
// forwards (apply_fsdp's default reshard_after_forward_policy, not pp_enabled).
#include <catch2/catch.hpp>

#include <algorithm>
#include <boost/json.hpp>
#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "load_error.hpp"

using namespace stepsim;

namespace {

// Llama 3 8B on 32 H100 under `framework`, with the given parallel keys and data-parallel kind.
std::string titan_job(const std::string& framework, const std::string& parallel, const std::string& kind) {
  return R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": )" + parallel +
         R"(, "training": { "framework": ")" + framework + R"(", "global_batch": 32, "micro_batch": 1 },
      "data_parallel": { "kind": ")" +
         kind + R"(" } })";
}

Scenario load_job(const std::string& text, const std::vector<std::string>& sets = {}) {
  return io::load_scenario_text(text, "s.json", sets);
}

bool lists_derived(const Scenario& s, const char* key) {
  const auto resolved = boost::json::parse(s.resolved_json);
  const auto& derived = resolved.at("derived").as_array();
  return std::find(derived.begin(), derived.end(), key) != derived.end();
}

const char* const kTp8 = R"({ "tp": 8, "pp": 1, "dp": 4 })";
const char* const kPp4 = R"({ "tp": 2, "pp": 4, "dp": 4 })";

}  // namespace

// apply_tp parallelizes every block with SequenceParallel norms and Shard(1) outputs, and has no
// plan without them: under torchtitan with tp > 1 sequence parallelism is on unless given, and
// false is refused, naming the key a --set gave.
TEST_CASE("torchtitan's tensor parallelism shards the sequence, and sequence_parallel false is refused") {
  for (const char* framework : {"torchtitan", "torchtitan-compile"}) {
    INFO(framework);
    const Scenario titan = load_job(titan_job(framework, kTp8, "fsdp"));
    CHECK(titan.parallel.sequence_parallel);
    CHECK(lists_derived(titan, "parallel.sequence_parallel"));
    const std::string why =
        ": torchtitan's tensor parallelism always shards the sequence (apply_tp's SequenceParallel norms and "
        "Shard(1) block outputs), so parallel.sequence_parallel false has no run under training.framework " +
        std::string(framework) + " with tp 8: leave it out or true";
    CHECK(test::load_error(titan_job(framework, kTp8, "fsdp"), {"parallel.sequence_parallel=false"}) ==
          "--set: parallel.sequence_parallel" + why);
    CHECK(test::load_error(titan_job("megatron", R"({ "tp": 8, "dp": 4, "sequence_parallel": false })", "zero1"),
                           {std::string("training.framework=") + framework, "data_parallel.kind=fsdp"}) ==
          "--set: training.framework" + why);
    CHECK(test::load_error(titan_job(framework, R"({ "tp": 8, "dp": 4, "sequence_parallel": false })", "fsdp"), {}) ==
          "s.json: /parallel/sequence_parallel" + why);
  }
  // Without TP there is nothing to shard; elsewhere the key keeps its default, false.
  CHECK_FALSE(load_job(titan_job("torchtitan", R"({ "tp": 1, "dp": 32 })", "fsdp")).parallel.sequence_parallel);
  CHECK_FALSE(load_job(titan_job("megatron", kTp8, "zero1")).parallel.sequence_parallel);
  CHECK(load_job(titan_job("megatron", kTp8, "zero1"), {"parallel.sequence_parallel=true"}).parallel.sequence_parallel);
  // The resolved file follows a change of framework.
  const std::string resolved = load_job(titan_job("torchtitan", kTp8, "fsdp")).resolved_json;
  CHECK_FALSE(
      load_job(resolved, {"training.framework=megatron", "data_parallel.kind=zero1"}).parallel.sequence_parallel);
}

// apply_fsdp: reshard_after_forward = not pp_enabled under the "default" policy ("For PP, by
// default do not reshard after forward to avoid per-microbatch all-gathers"); "always" and
// "never" are a value given, which wins.
TEST_CASE("torchtitan's FSDP does not reshard after forward under a pipeline unless given") {
  for (const char* kind : {"fsdp", "hsdp"}) {
    INFO(kind);
    const Scenario piped = load_job(titan_job("torchtitan", kPp4, kind));
    CHECK_FALSE(piped.data_parallel.reshard_after_forward);
    CHECK(lists_derived(piped, "data_parallel.reshard_after_forward"));
    CHECK(load_job(titan_job("torchtitan", kPp4, kind), {"data_parallel.reshard_after_forward=true"})
              .data_parallel.reshard_after_forward);
    CHECK(load_job(titan_job("torchtitan", R"({ "tp": 2, "dp": 16 })", kind)).data_parallel.reshard_after_forward);
    // The resolved file reshards again without the pipeline.
    CHECK(load_job(piped.resolved_json, {"parallel.pp=1", "parallel.dp=16"}).data_parallel.reshard_after_forward);
  }
  // PyTorch FSDP elsewhere keeps fully_shard's own default, true.
  CHECK(load_job(titan_job("pytorch", kPp4, "fsdp")).data_parallel.reshard_after_forward);
  // Under DDP the key does nothing and keeps its default: the resolved file switches kinds freely.
  // (torchtitan's DDP beside a pipeline trains in fp32, maybe_enable_amp.)
  const Scenario ddp = load_job(titan_job("torchtitan", kPp4, "ddp"), {"training.precision=fp32"});
  CHECK(ddp.data_parallel.reshard_after_forward);
  CHECK_FALSE(load_job(ddp.resolved_json, {"data_parallel.kind=fsdp"}).data_parallel.reshard_after_forward);
}

// torchtitan's maybe_enable_amp: FSDP (or CP, which applies it) casts through fully_shard, DDP
// alone runs torch.autocast, and TP or PP without FSDP disables mixed precision ("Mixed precision
// training with TP or PP is only supported when FSDP/HSDP/CP is enabled"): bf16 there has no run.
TEST_CASE("torchtitan trains TP or PP without FSDP in fp32 alone") {
  for (const char* framework : {"torchtitan", "torchtitan-compile"}) {
    INFO(framework);
    const std::string tp = titan_job(framework, kTp8, "ddp");
    CHECK(test::load_error(tp, {"training.precision=bf16"}) ==
          std::string("--set: training.precision: training.precision bf16 has no run under training.framework ") +
              framework +
              " with data_parallel.kind ddp and tp 8, pp 1: torchtitan's maybe_enable_amp disables mixed precision "
              "when TP or PP runs without FSDP (\"Mixed precision training with TP or PP is only supported when "
              "FSDP/HSDP/CP is enabled\"), so the model trains in fp32; use training.precision fp32 or tf32, or "
              "data_parallel.kind fsdp or hsdp");
    CHECK(test::load_error(tp, {"training.precision=fp32"}) == "no error");
    CHECK(test::load_error(titan_job(framework, kPp4, "ddp"), {"training.precision=fp32"}) == "no error");
    CHECK(test::load_error(titan_job(framework, kPp4, "ddp"), {"training.precision=bf16"})
              .starts_with("--set: training.precision: training.precision bf16 has no run"));
    // DDP alone runs autocast, FSDP its own mixed precision: both train in bf16.
    CHECK(test::load_error(titan_job(framework, R"({ "tp": 1, "dp": 32 })", "ddp"), {"training.precision=bf16"}) ==
          "no error");
    CHECK(test::load_error(titan_job(framework, kTp8, "fsdp"), {"training.precision=bf16"}) == "no error");
  }
  // The key set last is the one named: a --set tp on a bf16 DDP file.
  CHECK(
      test::load_error(titan_job("torchtitan", R"({ "tp": 1, "dp": 32 })", "ddp"), {"parallel.tp=2", "parallel.dp=16"})
          .starts_with("--set: parallel.tp: training.precision bf16 has no run"));
  // PyTorch's own autocast beside DDP and TP is the user's script's, which stepsim takes as given.
  CHECK(test::load_error(titan_job("pytorch", kTp8, "ddp"), {"training.precision=bf16"}) == "no error");
}

// torchtitan's float8 is torchao's Float8Linear, whose tensorwise and rowwise recipes scale each
// tensor by its own amax; torchao deleted delayed scaling in 0.10 (pytorch/ao pull request 1753).
// Under torchtitan with precision fp8 the scaling is current unless given, and delayed is
// refused, naming the key that set it; elsewhere the key keeps its default, delayed.
TEST_CASE("torchtitan's float8 scales each tensor by its own amax, and delayed scaling is refused") {
  for (const char* framework : {"torchtitan", "torchtitan-compile"}) {
    INFO(framework);
    const Scenario titan = load_job(titan_job(framework, kTp8, "fsdp"), {"training.precision=fp8"});
    CHECK(titan.training.fp8_scaling == Fp8Scaling::current);
    CHECK(lists_derived(titan, "training.fp8_scaling"));
    const std::string why =
        ": torchtitan's float8 (torchao's Float8Linear) scales each tensor by its own amax: torchao deleted delayed "
        "scaling in 0.10, so training.fp8_scaling delayed has no run under training.framework " +
        std::string(framework) + ": leave it out or current";
    CHECK(test::load_error(titan_job(framework, kTp8, "fsdp"),
                           {"training.precision=fp8", "training.fp8_scaling=delayed"}) ==
          "--set: training.fp8_scaling" + why);
    CHECK(load_job(titan_job(framework, kTp8, "fsdp")).training.fp8_scaling == Fp8Scaling::delayed);
  }
  CHECK(load_job(titan_job("megatron", kTp8, "zero1"), {"training.precision=fp8"}).training.fp8_scaling ==
        Fp8Scaling::delayed);
}
