// Megatron-Core accumulates the micro-batches' gradients into the buffer it reduces
// (param.main_grad; DistributedDataParallelConfig.grad_reduce_in_fp32 sets its precision), so
// under training.framework megatron or nemo training.main_grad and
// data_parallel.grad_reduce_dtype are one precision. Oracles: Megatron-Core's configuration as
// written above, and Megatron-LM's arguments.py, which turns accumulate_allreduce_grads_in_fp32
// on for every bf16 run.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;

namespace {

// Llama 3 8B on 64 H100, TP 8 and the distributed optimizer over 8, under `framework`, with
// `data_parallel` and `training` keys added to the sections.
std::string framework_scenario(const std::string& framework, const std::string& data_parallel = "",
                               const std::string& training = "") {
  return R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": { "tp": 8, "dp": 8 },
              "training": { "framework": ")" +
         framework + R"(", "global_batch": 64, "micro_batch": 1)" + training + R"( },
              "data_parallel": { "kind": "zero1")" +
         data_parallel + R"( } })";
}

Scenario load(const std::string& text, const std::vector<std::string>& sets = {}) {
  return io::load_scenario_text(text, "scenario.json", sets);
}

std::string load_error(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    load(text, sets);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("under Megatron-Core a scenario that gives neither precision keeps and reduces its gradients in fp32") {
  for (const char* framework : {"megatron", "nemo"}) {
    INFO(framework);
    const Scenario s = load(framework_scenario(framework));
    CHECK(s.training.main_grad == Precision::fp32);
    CHECK(s.data_parallel.grad_reduce_dtype == Precision::fp32);
  }
}

TEST_CASE("outside Megatron-Core the main gradients and the reduction keep their own precisions") {
  // DeepSpeed's ZeRO-1 and PyTorch's FSDP: nothing ties the two keys.
  const Scenario s = load(framework_scenario("deepspeed"));
  CHECK(s.training.main_grad == Precision::fp32);
  CHECK(s.data_parallel.grad_reduce_dtype == Precision::bf16);
  // FSDP1 keeps bf16 gradient shards with MixedPrecision(keep_low_precision_grads=True).
  const Scenario mixed =
      load(framework_scenario("pytorch", R"(, "grad_reduce_dtype": "fp32")", R"(, "main_grad": "bf16")"),
           {"data_parallel.kind=fsdp"});
  CHECK(mixed.training.main_grad == Precision::bf16);
  CHECK(mixed.data_parallel.grad_reduce_dtype == Precision::fp32);
}

// FSDP2's foreach_reduce casts each reduced gradient back to its sharded parameter's dtype
// (`_to_dtype_if_needed(reduce_output, orig_dtype)`) before it assigns `.grad`, and
// MixedPrecisionPolicy has no setting to keep it lower: the fp32 shard's gradient is fp32.
TEST_CASE("FSDP2 refuses bf16 main gradients, which fully_shard never keeps") {
  const std::string fsdp2 = framework_scenario("torchtitan", "", R"(, "main_grad": "bf16")");
  CHECK(load_error(fsdp2, {"data_parallel.kind=fsdp"}) ==
        "--set: data_parallel.kind: training.main_grad bf16 under FSDP2 (data_parallel.fsdp_version 2): fully_shard "
        "casts each reduced gradient back to its sharded parameter's dtype, fp32 (foreach_reduce), and keeps no lower "
        "one; use fp32, or fsdp_version 1 (MixedPrecision's keep_low_precision_grads)");
  CHECK(load_error(framework_scenario("torchtitan"), {"data_parallel.kind=fsdp", "training.main_grad=bf16"})
            .rfind("--set: training.main_grad: training.main_grad bf16 under FSDP2", 0) == 0);
  CHECK(load_error(framework_scenario("pytorch", "", R"(, "main_grad": "bf16")"),
                   {"data_parallel.kind=fsdp", "data_parallel.fsdp_version=2"})
            .rfind("--set: data_parallel.kind: training.main_grad bf16 under FSDP2", 0) == 0);
}

TEST_CASE("under Megatron-FSDP the main gradients and the reduction keep their own precisions") {
  // Megatron-FSDP has a main-gradient precision and a communication precision of its own
  // (megatron_fsdp_main_grads_dtype, megatron_fsdp_grad_comm_dtype).
  const Scenario s =
      load(framework_scenario("nemo"), {"data_parallel.kind=fsdp", "data_parallel.grad_reduce_dtype=bf16"});
  CHECK(s.training.main_grad == Precision::fp32);
  CHECK(s.data_parallel.grad_reduce_dtype == Precision::bf16);
}

TEST_CASE("under Megatron-Core the one precision given sets the other, from the file or from --set") {
  const Scenario reduced = load(framework_scenario("nemo", R"(, "grad_reduce_dtype": "bf16")"));
  CHECK(reduced.training.main_grad == Precision::bf16);
  CHECK(reduced.data_parallel.grad_reduce_dtype == Precision::bf16);
  const Scenario kept = load(framework_scenario("megatron", "", R"(, "main_grad": "bf16")"));
  CHECK(kept.data_parallel.grad_reduce_dtype == Precision::bf16);
  const Scenario set = load(framework_scenario("megatron"), {"training.main_grad=bf16"});
  CHECK(set.data_parallel.grad_reduce_dtype == Precision::bf16);
  const Scenario set_reduce = load(framework_scenario("megatron"), {"data_parallel.grad_reduce_dtype=bf16"});
  CHECK(set_reduce.training.main_grad == Precision::bf16);
  // The resolved scenario gives both, alike, and loads back to the same precisions.
  const Scenario again = load(reduced.resolved_json);
  CHECK(again.training.main_grad == Precision::bf16);
  CHECK(again.data_parallel.grad_reduce_dtype == Precision::bf16);
}

TEST_CASE("under Megatron-Core two different precisions given are refused with both keys and why") {
  CHECK(load_error(framework_scenario("megatron", R"(, "grad_reduce_dtype": "bf16")"), {"training.main_grad=fp32"}) ==
        "scenario.json: /data_parallel/grad_reduce_dtype: bf16 with training.main_grad fp32: under Megatron-Core "
        "(training.framework megatron) the main gradients are the buffer that is reduced (grad_reduce_in_fp32 sets "
        "both); give them the same precision");
  CHECK(load_error(framework_scenario("nemo", R"(, "grad_reduce_dtype": "fp16")")) ==
        "scenario.json: /data_parallel/grad_reduce_dtype: fp16 under Megatron-Core (training.framework nemo) would "
        "make the main gradients fp16 too, and they are fp32 or bf16 (training.main_grad)");
}

TEST_CASE("an fp32 model reduces fp32 gradients under every framework unless the scenario says otherwise") {
  // DeepSpeed communicates in fp32 unless its fp16 or bf16 mode is on (communication_data_type,
  // deepspeed/runtime/engine.py); Megatron-Core reduces in param.dtype; PyTorch's DDP and FSDP
  // without a reduce_dtype reduce the parameters' own gradients.
  for (const char* framework : {"unspecified", "deepspeed", "pytorch", "torchtitan", "megatron"}) {
    for (const char* kind : {"ddp", "zero1", "zero2", "fsdp"}) {
      // PyTorch and torchtitan have no distributed optimizer.
      const bool pytorch = std::string(framework) == "pytorch" || std::string(framework) == "torchtitan";
      if (pytorch && std::string(kind).starts_with("zero")) continue;
      for (const char* precision : {"fp32", "tf32"}) {
        INFO(framework << " " << kind << " " << precision);
        const Scenario s = load(framework_scenario(framework), {std::string("data_parallel.kind=") + kind,
                                                                std::string("training.precision=") + precision});
        CHECK(s.data_parallel.grad_reduce_dtype == Precision::fp32);
      }
    }
  }
  // DeepSpeed's communication_data_type may still ask for bf16.
  const Scenario asked =
      load(framework_scenario("deepspeed"), {"training.precision=fp32", "data_parallel.grad_reduce_dtype=bf16"});
  CHECK(asked.data_parallel.grad_reduce_dtype == Precision::bf16);
}

TEST_CASE("PyTorch's DDP under mixed precision keeps and reduces fp32 gradients, as autocast leaves them") {
  // torchtitan's maybe_enable_amp returns torch.autocast for DDP ("Mixed precision training is
  // handled by AMP"), as PyTorch's AMP recipe does: the parameters stay fp32, so .grad is fp32
  // and the reducer's buckets, made per gradient dtype, all-reduce fp32.
  for (const char* framework : {"pytorch", "torchtitan", "torchtitan-compile"}) {
    INFO(framework);
    // DDP alone: torchtitan runs autocast without TP or PP (with them, no mixed precision).
    const std::vector<std::string> ddp = {"data_parallel.kind=ddp", "parallel.tp=1", "parallel.dp=64"};
    const Scenario s = load(framework_scenario(framework), ddp);
    CHECK(s.training.main_grad == Precision::fp32);
    CHECK(s.data_parallel.grad_reduce_dtype == Precision::fp32);
    // A model cast to bf16 reduces its bf16 gradients.
    std::vector<std::string> cast_sets = ddp;
    cast_sets.push_back("training.main_grad=bf16");
    const Scenario cast = load(framework_scenario(framework), cast_sets);
    CHECK(cast.data_parallel.grad_reduce_dtype == Precision::bf16);
  }
}
