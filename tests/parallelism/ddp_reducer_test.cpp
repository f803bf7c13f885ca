// PyTorch DDP's reducer on the compute stream (torch/csrc/distributed/c10d/reducer.cpp): the
// kernels that put each gradient into its bucket and, without gradient_as_bucket_view, copy
// it back after the bucket's AllReduce; the bucket buffer that costs; the host's operator per
// parameter; and which frameworks run it. Oracles are counted by hand from the model.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "io/scenario_loader.hpp"
#include "parallelism/program_builder.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::CommKind;
using stepsim::engine::OpIndex;
using stepsim::engine::Program;

namespace {

// GPT with learned positions, 2 layers of hidden 1024 and ffn 4096, vocabulary 32,000,
// untied: word embedding 32,000·1,024 = 32,768,000; positions 2,048·1,024 = 2,097,152; per
// layer LayerNorm 2·1,024, QKV 1,024·3,072 + 3,072, projection 1,024² + 1,024, LayerNorm
// 2·1,024, fc1 1,024·4,096 + 4,096, fc2 4,096·1,024 + 1,024 = 12,596,224, twice; final
// LayerNorm 2,048; LM head 32,768,000. 29 tensors: 2 embeddings, 12 a layer, 2 norm, 1 head.
constexpr long long kDdpParams = 32'768'000 + 2'097'152 + 2 * 12'596'224 + 2'048 + 32'768'000;
constexpr long long kDdpTensors = 2 + 2 * 12 + 2 + 1;

constexpr const char* kDdpSmall = R"({ "model": { "name": "small", "layers": 2, "hidden": 1024, "heads": 16,
  "kv_heads": 16, "ffn_hidden": 4096, "vocab": 32000, "seq_len": 2048, "mlp": "gelu", "tied_embeddings": false },
  "cluster": "dgx-h100-ndr", "parallel": { "tp": 1, "pp": 1, "dp": 2 },
  "training": { "global_batch": 4, "micro_batch": 1, "precision": "bf16" },
  "data_parallel": { "kind": "ddp" } })";

stepsim::Scenario ddp_small(const std::vector<std::string>& sets) {
  return stepsim::io::load_scenario_text(kDdpSmall, "small.json", sets);
}

Program ddp_program(const stepsim::Scenario& s) {
  const spt::FixedCosts costs;
  return sp::build_program(s, stepsim::workload::build_work(s), costs);
}

struct ReducerOps {
  std::vector<OpIndex> into;  // "DDP ... into bucket k" or "DDP ... scaled in bucket k"
  std::vector<OpIndex> back;  // "DDP bucket k back to gradients"
  double into_bytes = 0, back_bytes = 0;
  long long into_operators = 0;
};

bool ddp_starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

ReducerOps ddp_reducer_ops(const Program& p) {
  ReducerOps out;
  const auto& ops = p.ranks[0].ops();
  for (OpIndex i = 0; i < static_cast<OpIndex>(ops.size()); ++i) {
    const std::string& name = p.names[ops[i].name];
    if (!ddp_starts_with(name, "DDP ")) continue;
    const double bytes = p.work.at(ops[i].name).bytes.as_double();
    if (name.find("back to gradients") != std::string::npos) {
      out.back.push_back(i);
      out.back_bytes += bytes;
    } else {
      out.into.push_back(i);
      out.into_bytes += bytes;
    }
  }
  return out;
}

bool ddp_waits_on(const Program& p, OpIndex op, OpIndex on) {
  for (OpIndex w : p.ranks[0].waits_of(op))
    if (w == on) return true;
  return false;
}

}  // namespace

TEST_CASE("under PyTorch's DDP every gradient is copied into its bucket and back, in the gradients' dtype") {
  const stepsim::Scenario s = ddp_small({"training.framework=pytorch"});
  REQUIRE_FALSE(s.data_parallel.gradient_as_bucket_view);  // PyTorch's default
  const Program p = ddp_program(s);
  const ReducerOps r = ddp_reducer_ops(p);
  // Under autocast the parameters and their gradients stay fp32: 4 bytes read, 4 written an
  // element.
  CHECK(r.into_bytes == Approx(8.0 * kDdpParams));
  CHECK(r.back_bytes == Approx(8.0 * kDdpParams));
  const auto buckets = spt::collectives_of(p, CommKind::dp);
  REQUIRE(buckets.size() == r.back.size());
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    INFO("bucket " << k);
    CHECK(ddp_waits_on(p, r.back[k], buckets[k]));  // copied back once its AllReduce has ended
    CHECK(r.back[k] > r.into.back());               // after the backward (finalize_backward)
  }
  // Every bucket's AllReduce waits for a copy into it, not for the GEMM that made the gradient.
  for (OpIndex bucket : buckets) {
    bool after_copy = false;
    for (OpIndex w : p.ranks[0].waits_of(bucket))
      after_copy = after_copy || ddp_starts_with(p.names[p.ranks[0].ops()[w].name], "DDP ");
    CHECK(after_copy);
  }
}

TEST_CASE("the reducer's host issues one PyTorch operator per parameter") {
  const Program p = ddp_program(ddp_small({"training.framework=pytorch"}));
  const ReducerOps r = ddp_reducer_ops(p);
  long long into = 0, back = 0;
  const auto& ops = p.ranks[0].ops();
  // FixedCosts: 5 us a launch; PyTorch's dispatch 12 us beside it: 17 us an operator.
  for (OpIndex i : r.into) into += std::llround(p.host_cost(ops[i]).us());
  for (OpIndex i : r.back) back += std::llround(p.host_cost(ops[i]).us());
  CHECK(into == 17 * kDdpTensors);
  CHECK(back == 17 * kDdpTensors);
}

TEST_CASE("gradient_as_bucket_view scales the gradients in place and copies nothing back") {
  const Program p =
      ddp_program(ddp_small({"training.framework=pytorch", "data_parallel.gradient_as_bucket_view=true"}));
  const ReducerOps r = ddp_reducer_ops(p);
  CHECK(r.into_bytes == Approx(8.0 * kDdpParams));  // div_ reads and writes each fp32 element
  CHECK(r.back.empty());
  for (OpIndex i : r.into) CHECK(p.names[p.ranks[0].ops()[i].name].find("scaled in bucket") != std::string::npos);
}

TEST_CASE("Megatron-Core's DDP and the unspecified framework's run no reducer kernels") {
  CHECK(ddp_reducer_ops(ddp_program(ddp_small({}))).into.empty());
  CHECK(ddp_reducer_ops(ddp_program(ddp_small({"training.framework=megatron"}))).into.empty());
  // The unspecified framework turned to PyTorch's copies on request.
  CHECK(ddp_reducer_ops(ddp_program(ddp_small({"data_parallel.gradient_as_bucket_view=false"}))).back.size() > 0);
}

TEST_CASE("without gradient_as_bucket_view the buckets are a second gradient buffer") {
  const auto copies = stepsim::simulate(ddp_small({"training.framework=pytorch"})).report.memory_bytes;
  const auto views =
      stepsim::simulate(ddp_small({"training.framework=pytorch", "data_parallel.gradient_as_bucket_view=true"}))
          .report.memory_bytes;
  CHECK(copies.buffers - views.buffers == Approx(4.0 * kDdpParams));
  CHECK(copies.grads == Approx(4.0 * kDdpParams));
  // One GPU: no DDP, no buckets.
  const auto alone =
      stepsim::simulate(ddp_small({"training.framework=pytorch", "parallel.dp=1", "training.global_batch=2"}))
          .report.memory_bytes;
  CHECK(alone.buffers == views.buffers);
}

TEST_CASE("gradient_as_bucket_view false is refused where no PyTorch reducer runs") {
  for (const char* framework : {"megatron", "nemo", "deepspeed"}) {
    INFO(framework);
    CHECK_THROWS_AS(
        ddp_small({std::string("training.framework=") + framework, "data_parallel.gradient_as_bucket_view=false"}),
        stepsim::InputError);
  }
  CHECK_NOTHROW(ddp_small({"training.framework=megatron", "data_parallel.gradient_as_bucket_view=true"}));
  // Under another data-parallel kind there are no DDP buckets: false would do nothing.
  CHECK_THROWS_AS(ddp_small({"training.framework=pytorch", "data_parallel.kind=fsdp",
                             "data_parallel.gradient_as_bucket_view=false"}),
                  stepsim::InputError);
  const stepsim::Scenario fsdp = ddp_small({"training.framework=pytorch", "data_parallel.kind=fsdp"});
  CHECK(fsdp.data_parallel.gradient_as_bucket_view);  // resolved to the inert value
  CHECK_NOTHROW(stepsim::io::load_scenario_text(fsdp.resolved_json, "resolved.json", {}));
  // The resolved scenario reads back as it was resolved.
  const stepsim::Scenario s = ddp_small({"training.framework=torchtitan"});
  CHECK_FALSE(s.data_parallel.gradient_as_bucket_view);
  CHECK_FALSE(
      stepsim::io::load_scenario_text(s.resolved_json, "resolved.json", {}).data_parallel.gradient_as_bucket_view);
}

namespace {

struct DdpBytes {
  double grads = 0, buffers = 0;     // memory_bytes
  double into = 0, back = 0;         // the reducer's kernels
  double reduced = 0;                // the buckets' AllReduces
  std::vector<double> bucket_sizes;  // each AllReduce's bytes, in launch order
};

DdpBytes ddp_bytes(const std::vector<std::string>& sets) {
  const stepsim::Scenario s = ddp_small(sets);
  const Program p = ddp_program(s);
  const ReducerOps r = ddp_reducer_ops(p);
  DdpBytes out;
  out.into = r.into_bytes;
  out.back = r.back_bytes;
  for (OpIndex c : spt::collectives_of(p, CommKind::dp)) {
    const auto& call = p.ranks[0].calls[static_cast<std::size_t>(p.ranks[0].ops()[c].call)];
    out.bucket_sizes.push_back(call.size.as_double());
    out.reduced += call.size.as_double();
  }
  const auto memory = stepsim::simulate(s).report.memory_bytes;
  out.grads = memory.grads;
  out.buffers = memory.buffers;
  return out;
}

}  // namespace

// PyTorch's reducer makes each bucket a tensor of its gradients' dtype, which is the
// parameters' (reducer.cpp, initialize_buckets), and all-reduces it as it is: the gradients
// held, the bucket copy beside them, the reducer's kernels, the cap and the AllReduce all take
// one element size. Counted by hand: kDdpParams elements at 2 bytes in bf16 (a model cast to
// bf16), 4 in fp32 (autocast's, the default). Under autocast the buffers also hold the bf16
// casts of the Linear weights, 2 · 12,582,912, and of the LM head with the final norm,
// 32,768,000 + 2,048, at 2 bytes each.
TEST_CASE("PyTorch's DDP holds, copies, buckets and all-reduces its gradients in one dtype") {
  constexpr double kCasts = 2.0 * (2 * 12'582'912 + 32'768'000 + 2'048);
  for (const auto& [sets, bytes] :
       {std::pair{std::vector<std::string>{"training.framework=pytorch", "training.main_grad=bf16"}, 2.0},
        std::pair{std::vector<std::string>{"training.framework=pytorch"}, 4.0},
        std::pair{std::vector<std::string>{"training.framework=pytorch", "data_parallel.grad_reduce_dtype=fp32"}, 4.0},
        std::pair{std::vector<std::string>{"training.framework=torchtitan", "training.main_grad=fp32"}, 4.0}}) {
    INFO(sets.back() << ": " << bytes << " bytes an element");
    const DdpBytes d = ddp_bytes(sets);
    CHECK(d.grads == Approx(bytes * kDdpParams));
    // The buckets beside the gradients, and autocast's weight casts.
    CHECK(d.buffers == Approx(bytes * kDdpParams + (bytes == 4.0 ? kCasts : 0.0)));
    CHECK(d.into == Approx(2 * bytes * kDdpParams));
    CHECK(d.back == Approx(2 * bytes * kDdpParams));
    CHECK(d.reduced == Approx(bytes * kDdpParams));  // every bucket once, as it is
    // The default caps in those bytes: the first bucket the LM head alone (32,768,000
    // elements, over 1 MiB), the next ones closing at 25 MiB or just past it.
    REQUIRE(d.bucket_sizes.size() >= 2);
    CHECK(d.bucket_sizes[0] == Approx(bytes * 32'768'000));
    for (std::size_t k = 1; k + 1 < d.bucket_sizes.size(); ++k) CHECK(d.bucket_sizes[k] >= 25.0 * 1024 * 1024);
  }
}

TEST_CASE("under PyTorch's DDP the gradients' two precision keys are one") {
  // Neither given: fp32, autocast keeping the parameters fp32 under mixed precision too.
  const stepsim::Scenario bf16 = ddp_small({"training.framework=pytorch"});
  CHECK(bf16.training.main_grad == stepsim::Precision::fp32);
  CHECK(bf16.data_parallel.grad_reduce_dtype == stepsim::Precision::fp32);
  const stepsim::Scenario fp32 = ddp_small({"training.framework=pytorch", "training.precision=fp32"});
  CHECK(fp32.training.main_grad == stepsim::Precision::fp32);
  CHECK(fp32.data_parallel.grad_reduce_dtype == stepsim::Precision::fp32);
  // One given sets the other; the resolved scenario reads back alike.
  const stepsim::Scenario set = ddp_small({"training.framework=pytorch", "training.main_grad=bf16"});
  CHECK(set.data_parallel.grad_reduce_dtype == stepsim::Precision::bf16);
  CHECK(stepsim::io::load_scenario_text(set.resolved_json, "resolved.json", {}).training.main_grad ==
        stepsim::Precision::bf16);
  try {
    ddp_small({"training.framework=pytorch", "training.main_grad=fp32", "data_parallel.grad_reduce_dtype=bf16"});
    FAIL("two precisions accepted");
  } catch (const stepsim::InputError& e) {
    CHECK(std::string(e.what()) ==
          "--set: data_parallel.grad_reduce_dtype: bf16 with training.main_grad fp32: under PyTorch's DDP "
          "(training.framework pytorch) the gradients are the parameters' own, which its buckets reduce in their own "
          "dtype; give them the same precision");
  }
  CHECK_THROWS_AS(
      ddp_small({"training.framework=pytorch", "training.precision=fp32", "data_parallel.grad_reduce_dtype=bf16"}),
      stepsim::InputError);
}

// PyTorch's DistributedDataParallel caps its first bucket at 1 MiB only when bucket_cap_mb is
// left unset (distributed.py: bucket_bytes_cap_default, _DEFAULT_FIRST_BUCKET_BYTES); a cap
// given caps the first bucket too. The small GPT's gradients, 4 bytes each (fp32 under
// autocast), fit one bucket of 100,000 MiB whole.
TEST_CASE("a bucket_cap_mb given caps PyTorch DDP's first bucket too") {
  const DdpBytes unset = ddp_bytes({"training.framework=pytorch"});
  CHECK(unset.bucket_sizes.front() == Approx(4.0 * 32'768'000));  // the LM head, past 1 MiB
  const DdpBytes given = ddp_bytes({"training.framework=pytorch", "data_parallel.bucket_cap_mb=100000"});
  REQUIRE(given.bucket_sizes.size() == 1);
  CHECK(given.bucket_sizes.front() == Approx(4.0 * kDdpParams));
  // first_bucket_mb given keeps the first bucket its own size.
  const DdpBytes both = ddp_bytes(
      {"training.framework=pytorch", "data_parallel.bucket_cap_mb=100000", "data_parallel.first_bucket_mb=1"});
  REQUIRE(both.bucket_sizes.size() == 2);
  CHECK(both.bucket_sizes.front() == Approx(4.0 * 32'768'000));
  // The resolved scenario states the first bucket's size and reads back to it.
  const stepsim::Scenario s = ddp_small({"training.framework=pytorch", "data_parallel.bucket_cap_mb=100000"});
  CHECK(s.data_parallel.first_bucket_mb == 100000);
  CHECK(stepsim::io::load_scenario_text(s.resolved_json, "resolved.json", {}).data_parallel.first_bucket_mb == 100000);
  // Outside PyTorch's DDP the first bucket is left as it was: the distributed optimizer's has none.
  CHECK(ddp_small({"training.framework=megatron", "data_parallel.kind=zero1", "data_parallel.bucket_cap_mb=25"})
            .data_parallel.first_bucket_mb == 1);
}

// DeepSpeed's engine at ZeRO stage 0 reduces nothing during the backward: _backward_epilogue
// calls allreduce_gradients once the backward is done, which at the accumulation boundary
// all-reduces every gradient in buffers of 5e8 elements (engine.py, buffered_allreduce_fallback).
// A scenario that leaves overlap_grad_reduce out runs as one that says false; the small GPT's
// 92,827,648 parameters fit one buffer: one AllReduce of them all in BF16, after the backward.
TEST_CASE("DeepSpeed's ZeRO stage 0 reduces after the backward unless the scenario asks for overlap") {
  const stepsim::Scenario unsaid = ddp_small({"training.framework=deepspeed"});
  const stepsim::Scenario said = ddp_small({"training.framework=deepspeed", "data_parallel.overlap_grad_reduce=false"});
  CHECK_FALSE(unsaid.data_parallel.overlap_grad_reduce);
  const auto step = [](const stepsim::Scenario& s) { return stepsim::simulate(s).report.step_time_s; };
  CHECK(step(unsaid) == step(said));
  const DdpBytes bytes = ddp_bytes({"training.framework=deepspeed"});
  CHECK(bytes.bucket_sizes == std::vector<double>{2.0 * kDdpParams});
  const Program p = ddp_program(unsaid);
  const auto reduced = spt::collectives_of(p, CommKind::dp);
  REQUIRE(reduced.size() == 1);
  CHECK(static_cast<long>(reduced.front()) > spt::find_op(p, "L0 fc1 wgrad", spt::find_op(p, "L0 fc1 wgrad") + 1));
  // Given, the scenario's overlap holds.
  CHECK(ddp_small({"training.framework=deepspeed", "data_parallel.overlap_grad_reduce=true"})
            .data_parallel.overlap_grad_reduce);
}
