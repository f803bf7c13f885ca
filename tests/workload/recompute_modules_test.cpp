// Megatron-Core's selective recompute of listed modules (training.recompute_modules) on a small
// model: the FLOPs and bytes each module re-runs and the activation bytes it keeps off, by hand.
#include <catch2/catch.hpp>

#include <vector>

#include "scenarios.hpp"
#include "workload/work.hpp"

namespace st = stepsim::testing;
using stepsim::Recompute;
using stepsim::RecomputeModule;
using stepsim::workload::OpCost;

namespace {

// b 2, s 128, h 256, 4 heads, SwiGLU ffn 512, BF16, TP 1: 256 tokens, 2 bytes an element.
stepsim::ModelSpec small() {
  stepsim::ModelSpec m = st::llama3_8b();
  m.layers = 2;
  m.hidden = 256;
  m.heads = 4;
  m.kv_heads = 4;
  m.ffn_hidden = 512;
  m.vocab = 1024;
  m.seq_len = 128;
  return m;
}

// 4 experts, top 2, expert ffn 128: 512 routed copies on one GPU.
stepsim::ModelSpec small_moe() {
  stepsim::ModelSpec m = small();
  m.moe = {4, 2, 128};
  return m;
}

// Latents: q 64, kv 32; heads' nope 32 + rope 16 = 48 wide, values 32.
stepsim::ModelSpec small_mla() {
  stepsim::ModelSpec m = small();
  m.mla = {64, 32, 32, 16, 32};
  return m;
}

stepsim::workload::ModelWork work(const stepsim::ModelSpec& m, Recompute r, std::vector<RecomputeModule> modules = {}) {
  stepsim::Scenario s = st::scenario(m, 1, 2, 2);
  s.training.recompute = r;
  s.training.recompute_modules = std::move(modules);
  return stepsim::workload::build_work(s);
}

double flops(const std::vector<OpCost>& ops) {
  double f = 0;
  for (const OpCost& op : ops) f += op.flops;
  return f;
}

long long bytes(const std::vector<OpCost>& ops) {
  long long b = 0;
  for (const OpCost& op : ops) b += op.bytes.count();
  return b;
}

long long kept(const stepsim::workload::ModelWork& w) { return w.layer.activations.count(); }

}  // namespace

TEST_CASE("selective recompute without recompute_modules is Megatron-Core's default, core_attn") {
  const auto plain = work(small(), Recompute::selective);
  const auto listed = work(small(), Recompute::selective, {RecomputeModule::core_attn});
  REQUIRE(plain.layer.recompute.size() == 1);
  CHECK(plain.layer.recompute.front().name == "flash attention");
  CHECK(listed.layer.recompute.size() == 1);
  CHECK(flops(listed.layer.recompute) == flops(plain.layer.recompute));
  CHECK(kept(listed) == kept(plain));
}

TEST_CASE("recompute_modules mlp re-runs a dense layer's norm, fc1, SwiGLU and fc2 and keeps none of their outputs") {
  const auto w = work(small(), Recompute::selective, {RecomputeModule::mlp});
  // norm 8·256·256, fc1 2·256·1024·256, SwiGLU 8·256·512, fc2 2·256·256·512.
  CHECK(flops(w.layer.recompute) == 524288.0 + 134217728.0 + 1048576.0 + 67108864.0);
  // norm 2·2·65536; fc1 2·(256·256 + 256·1024 + 256·1024); SwiGLU 3·2·131072;
  // fc2 2·(256·512 + 512·256 + 256·256).
  CHECK(bytes(w.layer.recompute) == 262144 + 1179648 + 786432 + 655360);
  // fc1's input 256·256, its output 256·1024 and fc2's input 256·512, 2 bytes each.
  CHECK(kept(work(small(), Recompute::selective)) - kept(w) == 2 * (65536 + 262144 + 131072));
}

TEST_CASE("recompute_modules moe_act re-runs the experts' activation and keeps no fc2 input") {
  const auto w = work(small_moe(), Recompute::selective, {RecomputeModule::moe_act});
  REQUIRE(w.layer.recompute.size() == 1);
  // 512 copies · 128 wide: 8 FLOPs and SwiGLU's 3·2 bytes an element.
  CHECK(flops(w.layer.recompute) == 8.0 * 65536);
  CHECK(bytes(w.layer.recompute) == 6 * 65536);
  CHECK(kept(work(small_moe(), Recompute::selective)) - kept(w) == 2 * 65536);
}

TEST_CASE("recompute_modules layernorm re-runs the norm before a MoE layer, and before latent attention") {
  const auto moe = work(small_moe(), Recompute::selective, {RecomputeModule::layernorm});
  REQUIRE(moe.layer.recompute.size() == 1);
  CHECK(moe.layer.recompute.front().name == "post-attention rmsnorm");
  CHECK(flops(moe.layer.recompute) == 8.0 * 65536);
  CHECK(bytes(moe.layer.recompute) == 4 * 65536);
  CHECK(kept(work(small_moe(), Recompute::selective)) - kept(moe) == 2 * 65536);
  // A dense layer under latent attention: its input norm stands alone, the MLP's is fused.
  const auto mla = work(small_mla(), Recompute::selective, {RecomputeModule::layernorm});
  REQUIRE(mla.layer.recompute.size() == 1);
  CHECK(mla.layer.recompute.front().name == "input rmsnorm");
  CHECK(kept(work(small_mla(), Recompute::selective)) - kept(mla) == 2 * 65536);
}

TEST_CASE("recompute_modules mla_up_proj re-runs the latents' norms, the up projections and the rotary embedding") {
  const auto w = work(small_mla(), Recompute::selective, {RecomputeModule::mla_up_proj});
  REQUIRE(w.layer.recompute.size() == 5);
  // q latent norm 8·256·64, q up 2·256·192·64, kv latent norm 8·256·32, kv up 2·256·256·32,
  // rotary 6·256·(4·16 + 16).
  CHECK(flops(w.layer.recompute) == 131072.0 + 6291456.0 + 65536.0 + 4194304.0 + 122880.0);
  // norms 2·2 bytes an element; q up 2·(256·64 + 64·192 + 256·192); kv up 2·(256·32 + 32·256 +
  // 256·256); rotary 2·2·256·80.
  CHECK(bytes(w.layer.recompute) == 65536 + 155648 + 32768 + 163840 + 81920);
  // The normed latents 256·(64 + 32) and Q, K, V 256·4·(48 + 48 + 32), 2 bytes each.
  CHECK(kept(work(small_mla(), Recompute::selective)) - kept(w) == 2 * (24576 + 131072));
}

TEST_CASE("recompute_modules without core_attn keeps the attention core's work out of the recompute") {
  const auto w = work(small(), Recompute::selective, {RecomputeModule::mlp});
  for (const OpCost& op : w.layer.recompute) CHECK(op.role != stepsim::workload::Role::attention_core);
}
