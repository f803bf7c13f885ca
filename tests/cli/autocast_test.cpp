// torch.autocast over an fp32 model (PyTorch's mixed precision beside DDP): the casts it runs,
// read off the Kineto-format trace, against the hand count of docs/model.md ("Autocast").
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cli/kineto_events.hpp"
#include "cli/run_stepsim.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"

namespace {

using stepsim::testing::KinetoEvent;

// A small GPT in eager PyTorch under DDP on one 8-GPU H100 node: two layers of hidden 2048,
// 32,000 tokens of vocabulary, sequences of 512, two micro-batches of one.
const std::string kTiny = R"({
  "model": {"name": "gpt-tiny", "layers": 2, "hidden": 2048, "heads": 16, "vocab": 32000, "seq_len": 512, "mlp": "gelu"},
  "cluster": "dgx-h100-ndr",
  "parallel": {"tp": 1, "pp": 1, "dp": 8},
  "training": {"framework": "pytorch", "global_batch": 16, "micro_batch": 1},
  "data_parallel": {"kind": "ddp"}
})";

bool is_cast(const std::string& name) {
  return name.find(" bf16 cast") != std::string::npos || name.find(" fp32 cast") != std::string::npos;
}

struct Casts {
  int kernels = 0, forward_kernels = 0;
  double cpu_us = 0;
  std::map<std::string, const KinetoEvent*> first;  // the first kernel of each name
  std::vector<KinetoEvent> events;
};

Casts traced_casts(const std::string& sets) {
  stepsim::testing::Scratch s("autocast");
  s.write("tiny.json", kTiny);
  const auto run = s.run("simulate tiny.json " + sets + " --trace-format kineto --trace step.json");
  INFO(run.err);
  REQUIRE(run.status == 0);
  Casts c;
  c.events = stepsim::testing::kineto_events(stepsim::testing::slurp(s.file("step.json")));
  for (const KinetoEvent& e : c.events) {
    if (!is_cast(e.name)) continue;
    if (e.cat == "cpu_op") c.cpu_us += e.dur;
    if (e.cat != "kernel") continue;
    ++c.kernels;
    c.forward_kernels += e.name.find(" bf16 cast") != std::string::npos ? 1 : 0;
    c.first.try_emplace(e.name, &e);
  }
  return c;
}

// HBM time of `bytes` at the H100 preset's 3.35 TB/s times its 0.85 efficiency, in us.
double hbm_us(double bytes) { return bytes / (3.35e12 * 0.85) * 1e6; }

}  // namespace

// By hand (PyTorch's autocast_mode.cpp, cached_cast: every floating-point argument of F.linear is
// cast to bf16, a weight or bias once per autocast region, a micro-batch's forward; its backward,
// _to_copy_backward, casts the gradient to fp32): per layer the QKV GEMM's weight (2048 x 6144)
// and bias (6144), the projection's weight (2048 x 2048; its bias is added with the residual),
// fc1's weight (2048 x 8192) and bias (8192) and fc2's weight (8192 x 2048), and the LM head's
// weight (32000 x 2048). The residual stream is fp32 (the embedding's fp32 table, LayerNorm on
// autocast's fp32 list), so eager the QKV, fc1 and LM head GEMMs also cast their input, the
// layernorm's 512 x 2048 output, and their backward casts its gradient back. A micro-batch's
// forward: 4 x 2 + 1 = 9 cast kernels of 8 x 2 + 2 = 18 operators (each tensor its own);
// backward 9 kernels (13 operators) after the wgrad GEMMs and 5 after the dgrads; 46 kernels
// and 72 operators over the two micro-batches, each reading 4 bytes and writing 2 per element.
TEST_CASE("Under autocast every micro-batch casts each Linear layer's weights to bf16 and their gradients back") {
  const Casts c = traced_casts("");
  CHECK(c.kernels == 46);
  CHECK(c.forward_kernels == 18);
  CHECK(c.cpu_us == Approx(72 * 17.0));  // eager PyTorch: 5 us launch, 12 us dispatch an operator
  const double input = 512.0 * 2048;
  const std::map<std::string, double> elements{
      {"L0 qkv bf16 cast fwd", 2048.0 * 6144 + 6144 + input},
      {"L0 attention projection bf16 cast fwd", 2048.0 * 2048},
      {"L0 fc1 bf16 cast fwd", 2048.0 * 8192 + 8192 + input},
      {"L0 fc2 bf16 cast fwd", 8192.0 * 2048},
      {"lm head bf16 cast fwd", 32000.0 * 2048 + input},
      {"L1 qkv wgrad fp32 cast", 2048.0 * 6144 + 6144},
      {"lm head wgrad fp32 cast", 32000.0 * 2048},
      {"lm head dgrad fp32 cast", input},
  };
  for (const auto& [name, count] : elements) {
    INFO(name);
    REQUIRE(c.first.count(name) == 1);
    const KinetoEvent& k = *c.first.at(name);
    CHECK(k.hbm_bytes == static_cast<std::int64_t>(count * 6));
    // Memory-bound above the 3 us floor of each of its kernels, or at that floor (an input's
    // gradient alone: 2.2 us of traffic).
    const int kernels = name.find("dgrad") != std::string::npos ? 1 : 0;
    CHECK(k.dur == Approx(std::max(hbm_us(count * 6), 3.0 * kernels)).margin(1e-3));
  }
}

// A recomputed forward re-enters autocast (torch.utils.checkpoint restores its state) and casts
// every layer's weights and fp32 inputs again: 4 kernels (8 operators) a layer and micro-batch more.
TEST_CASE("A recomputed forward under autocast casts the weights again") {
  const Casts c = traced_casts("--set training.recompute=full");
  CHECK(c.kernels == 46 + 2 * 2 * 4);
  CHECK(c.forward_kernels == 18 + 2 * 2 * 4);
  CHECK(c.cpu_us == Approx((72 + 2 * 2 * 8) * 17.0));
}

// Llama's Linear layers are apart (wq, wk, wv; w1, w3), each weight cast by an operator of its
// own, and each casting the fp32 normed input for itself.
TEST_CASE("Under autocast Llama's QKV and fc1 cast each of their weights apart") {
  const Casts c = traced_casts("--set model.mlp=swiglu --set model.ffn_hidden=5632");
  const auto cpu = [&](const std::string& name) {
    for (const KinetoEvent& e : c.events)
      if (e.cat == "cpu_op" && e.name == name) return e.dur;
    return 0.0;
  };
  CHECK(cpu("L0 qkv bf16 cast fwd") == Approx((3 + 3) * 17.0));
  CHECK(cpu("L0 fc1 bf16 cast fwd") == Approx((2 + 2) * 17.0));
  CHECK(cpu("L0 fc2 bf16 cast fwd") == Approx(17.0));
  CHECK(cpu("L0 qkv wgrad fp32 cast") == Approx(3 * 17.0));
  CHECK(cpu("L0 qkv dgrad fp32 cast") == Approx(3 * 17.0));
  REQUIRE(c.first.count("L0 fc1 bf16 cast fwd") == 1);
  CHECK(c.first.at("L0 fc1 bf16 cast fwd")->hbm_bytes == (2048LL * 2 * 5632 + 2 * 512 * 2048) * 6);  // no bias
}

// Autocast is PyTorch's DDP beside mixed precision, its parameters and gradients fp32: FSDP with
// a param_dtype, Megatron-Core, DeepSpeed (bf16 parameters and an fp32 master copy), a model cast
// to bf16 (bf16 gradients) and fp32 training cast nothing.
TEST_CASE("Only autocast casts the weights for each micro-batch") {
  for (const std::vector<std::string>& sets :
       std::vector<std::vector<std::string>>{{"data_parallel.kind=fsdp"},
                                             {"training.framework=megatron"},
                                             {"training.framework=deepspeed", "data_parallel.kind=zero1"},
                                             {"training.main_grad=bf16"},
                                             {"training.precision=fp32"},
                                             {}}) {
    const stepsim::SimulationResult r = stepsim::simulate(stepsim::io::load_scenario_text(kTiny, "tiny.json", sets));
    int casts = 0;
    for (const stepsim::Interval& i : r.timeline.ranks.front().intervals)
      casts += i.activity == stepsim::Activity::compute && is_cast(r.timeline.names[i.name]) ? 1 : 0;
    const std::string which = sets.empty() ? "autocast" : sets.front();
    INFO(which);
    CHECK(casts == (sets.empty() ? 46 : 0));
  }
}
