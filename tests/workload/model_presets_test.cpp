// The mixture-of-experts presets as trained today, loaded as scenarios: parameters in all and
// model FLOPs per token against hand counts and the figures their publishers give, attention
// heads whose width is not hidden/heads (Qwen3, gpt-oss) and stacks that mix dense and MoE
// layers (DeepSeek-V3, Llama 4 Maverick), and DeepSeek-V3's multi-head latent attention.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "io/scenario_loader.hpp"
#include "workload/work.hpp"

using stepsim::workload::ModelWork;
using stepsim::workload::OpCost;
using stepsim::workload::Role;

namespace {

// 8 H100 of one node: TP 1, EP 8, one sequence per GPU.
stepsim::Scenario scenario(const std::string& model, const std::string& more = "") {
  constexpr const char* kBase = R"({ "cluster": "dgx-h100-ndr", "parallel": { "tp": 1, "dp": 8, "ep": 8 },
    "training": { "global_batch": 8, "micro_batch": 1 } })";
  std::vector<std::string> sets{"model=" + model};
  if (!more.empty()) sets.push_back(more);
  return stepsim::io::load_scenario_text(kBase, "t.json", sets);
}

// Model FLOPs per token: 6 per active weight, plus causal attention 6·s·layers·heads·head_dim.
double per_token(const ModelWork& w, const stepsim::Scenario& s) {
  return w.model_flops_per_step / (static_cast<double>(s.training.global_batch) * s.model.seq_len);
}

const OpCost& op(const std::vector<OpCost>& ops, Role role) {
  for (const OpCost& o : ops)
    if (o.role == role) return o;
  FAIL("no op of that role");
  return ops.front();
}

}  // namespace

TEST_CASE("Qwen3 30B-A3B holds 30.5 B parameters with 3.3 B active per token") {
  const stepsim::Scenario s = scenario("qwen3-30b-a3b");
  const ModelWork w = stepsim::workload::build_work(s);
  // Attention: q 32·128 = 4096 and k, v 4·128 = 512 wide from h 2048, projection 4096 → 2048.
  const long long attention = 2048LL * (4096 + 2 * 512) + 4096LL * 2048;  // 18,874,368
  const long long router = 128LL * 2048;
  const long long expert = 3LL * 2048 * 768;  // gate, up and down: 4,718,592
  const long long embedding = 151936LL * 2048;
  CHECK(w.params_total == 48 * (attention + router + 128 * expert + 2 * 2048) + 2 * embedding + 2048);
  // The model card (Qwen/Qwen3-30B-A3B): 30.5 B in all, 3.3 B activated.
  CHECK(w.params_total == 30532110336);
  const double active = 48.0 * (attention + router + 8 * expert) + embedding;  // the LM head, not the lookup
  CHECK((active + embedding) / 1e9 == Approx(3.35).epsilon(0.002));
  CHECK(per_token(w, s) == Approx(6.0 * active + 6.0 * 4096 * 48 * (32 * 128)).epsilon(1e-12));
  // The head is 128 wide, not 2048/32 = 64: the QKV GEMM writes 5120 columns.
  CHECK(op(w.layer.forward, Role::qkv).n == 5120);
  CHECK(op(w.layer.forward, Role::attn_proj).k == 4096);
  CHECK(op(w.layer.forward, Role::attention_core).k == 128);
}

TEST_CASE("Qwen3 235B-A22B holds 235 B parameters with 22 B active per token") {
  const stepsim::Scenario s = scenario("qwen3-235b-a22b");
  const ModelWork w = stepsim::workload::build_work(s);
  const long long attention = 4096LL * (8192 + 2 * 512) + 8192LL * 4096;  // 71,303,168
  const long long router = 128LL * 4096;
  const long long expert = 3LL * 4096 * 1536;
  const long long embedding = 151936LL * 4096;
  // The model card (Qwen/Qwen3-235B-A22B): 235 B in all, 22 B activated.
  CHECK(w.params_total == 94 * (attention + router + 128 * expert + 2 * 4096) + 2 * embedding + 4096);
  CHECK(w.params_total == 235093610496);
  const double active = 94.0 * (attention + router + 8 * expert) + embedding;
  CHECK((active + embedding) / 1e9 == Approx(22.19).epsilon(0.001));
  CHECK(per_token(w, s) == Approx(6.0 * active + 6.0 * 4096 * 94 * (64 * 128)).epsilon(1e-12));
}

TEST_CASE("gpt-oss-120b holds the model card's 116.83 B parameters less its sinks, windowed on alternate layers") {
  const stepsim::Scenario s = scenario("gpt-oss-120b");
  const ModelWork w = stepsim::workload::build_work(s);
  const long long attention = 2880LL * (4096 + 2 * 512) + 4096LL * 2880;  // 26,542,080
  const long long router = 128LL * 2880;
  const long long expert = 3LL * 2880 * 2880;
  const long long embedding = 201088LL * 2880;
  // The biases of every Linear layer: q, k, v (5120) and the projection (2880), the router's
  // (128) and each expert's (2 · 2880 + 2880).
  const long long biases = 5120 + 2880 + 128 + 128LL * 3 * 2880;
  CHECK(w.params_total == 36 * (attention + biases + router + 128 * expert + 2 * 2880) + 2 * embedding + 2880);
  // OpenAI's model card, Table 1: 116.83 B in all, with the attention sinks (64 a layer).
  CHECK((w.params_total + 36 * 64) / 1e9 == Approx(116.83).epsilon(0.0001));
  // 5.13 B active per token (the card counts the unembedding, not the lookup).
  const double active = 36.0 * (attention + router + 4 * expert) + embedding;
  CHECK(active / 1e9 == Approx(5.13).epsilon(0.001));
  // Causal attention per token 3·s·heads·(64 + 64) in the 18 full layers; the 18 windowed
  // ones attend to s·w − w²/2 pairs per sequence of s, 3·(2·s·w − w²)/s·heads·(64 + 64).
  const double full = 3.0 * 4096 * 18 * 64 * 128;
  const double windowed = 3.0 * (2.0 * 4096 * 128 - 128.0 * 128) / 4096 * 18 * 64 * 128;
  CHECK(per_token(w, s) == Approx(6.0 * active + full + windowed).epsilon(1e-12));
  // Layer 1 attends to the whole prefix.
  CHECK(op(w.block(1).forward, Role::attention_core).flops == Approx(0.5 * 2.0 * 64 * 4096.0 * 4096 * 128));
}

TEST_CASE("the printed FLOP convention states the sliding window's count, and its formula gives the model FLOPs") {
  const stepsim::Scenario s = scenario("gpt-oss-120b");
  const ModelWork w = stepsim::workload::build_work(s);
  const std::string text = stepsim::workload::flop_convention(s.model);
  INFO(text);
  CHECK(text.find("18 of 36 layers with a sliding window of w = 128 tokens") != std::string::npos);
  CHECK(text.find("s x w - w^2/2 query-key pairs a sequence instead of s^2/2") != std::string::npos);
  CHECK(text.find("6 x tokens x (2w - w^2/s) x heads x head_dim") != std::string::npos);
  CHECK(text.find("top_k routed experts") != std::string::npos);
  // The text read as arithmetic, per token: 6 per active weight (as the model card counts
  // them, above), causal attention 6 · s · heads · head_dim on the 18 full layers and
  // 6 · (2w − w²/s) · heads · head_dim on the 18 windowed ones (64 heads of 64).
  const double attention = 2880LL * (4096 + 2 * 512) + 4096LL * 2880;
  const double active = 36.0 * (attention + 128LL * 2880 + 4 * 3LL * 2880 * 2880) + 201088LL * 2880;
  const double stated =
      6.0 * active + 6.0 * 4096 * 18 * 64 * 64 + 6.0 * (2.0 * 128 - 128.0 * 128 / 4096) * 18 * 64 * 64;
  CHECK(per_token(w, s) == Approx(stated).epsilon(1e-12));
  // A model without windows, latent attention or multi-token prediction reads as before.
  CHECK(stepsim::workload::flop_convention(scenario("qwen3-30b-a3b").model).find("window") == std::string::npos);
  // Latent attention's query/key and value widths differ; MTP depths count as layers.
  const std::string mla = stepsim::workload::flop_convention(scenario("deepseek-v3", "model.mtp_layers=1").model);
  INFO(mla);
  CHECK(mla.find("3 x tokens x seq_len x (layers + MTP depths) x heads x (qk_head_dim + v_head_dim)") !=
        std::string::npos);
  CHECK(mla.find("per multi-token prediction depth (1 here) its layer, its 2h x h projection and the LM head again") !=
        std::string::npos);
}

TEST_CASE("gpt-oss-120b's clamp, expert biases and YaRN rotary run as PyTorch operators in Megatron-Core") {
  // One sequence of 4096 tokens on one of 8 GPUs at EP 8: 4 · 4096 routed copies reach its 16
  // experts (balanced routing), whose fc1 writes 2 · 2880 per copy.
  const stepsim::Scenario s = scenario("gpt-oss-120b");
  const ModelWork w = stepsim::workload::build_work(s);
  const double copies = 4.0 * 4096;
  const auto bytes = [](const OpCost& o) { return static_cast<double>(o.bytes.count()); };
  const auto named = [](const std::vector<OpCost>& ops, const std::string& name) -> const OpCost& {
    for (const OpCost& o : ops)
      if (o.name == name) return o;
    FAIL("no op " << name);
    return ops.front();
  };
  // The clamp: both halves clamped (read, write) and concatenated (read, write), 2-byte
  // elements; its backward the masks' where (7 · 2 + 8 over the two halves) and the halves'
  // concatenation (4).
  const double fc1_out = copies * 2 * 2880;
  CHECK(bytes(named(w.layer.forward, "expert activation clamp")) == Approx(8.0 * fc1_out));
  CHECK(bytes(named(w.layer.backward, "expert activation clamp backward")) == Approx(15.0 * fc1_out));
  // The fc2 bias, expert by expert: b·p written, added to the GEMM's output, concatenated.
  const double out = copies * 2880;
  CHECK(bytes(named(w.layer.forward, "expert fc2 bias")) == Approx((2.0 + 6.0 + 4.0) * out));
  CHECK(bytes(named(w.layer.backward, "expert fc2 bias backward")) == Approx((6.0 + 6.0 + 4.0) * out));
  // YaRN: the queries' 64 · 64 and the keys' 8 · 64 elements per token through six kernels of
  // 24 bytes per element in all where the fused kernel reads and writes them once (4).
  const double qk = 4096.0 * (64 * 64 + 8 * 64);
  CHECK(bytes(named(w.layer.forward, "rotary embedding (unfused)")) == Approx(24.0 * qk));
  CHECK(bytes(named(w.layer.backward, "rotary embedding (unfused) backward")) == Approx(34.0 * qk));
  // moe_act recompute re-runs the clamp with the activation.
  const stepsim::Scenario r = scenario("gpt-oss-120b", R"(training={"global_batch": 8, "micro_batch": 1,
    "recompute": "selective", "recompute_modules": ["moe_act"]})");
  const ModelWork wr = stepsim::workload::build_work(r);
  CHECK(bytes(named(wr.layer.recompute, "expert activation clamp")) == Approx(8.0 * fc1_out));
}

TEST_CASE("a windowed attention kernel computes every 128 x 128 tile its window touches") {
  // The fused kernel skips only the tiles its mask leaves empty and computes the others
  // whole. gpt-oss-120b's layer 0, a window of 128 keys over 4096 tokens: the first
  // 128-query tile reaches 1 key tile, each of the other 31 reaches its own and the one
  // before, 63 tiles of 128·128 pairs per head: twice the window's 4096·128 − 128²/2.
  const stepsim::Scenario s = scenario("gpt-oss-120b");
  const ModelWork w = stepsim::workload::build_work(s);
  const double pairs = 63.0 * 128 * 128;
  CHECK(op(w.block(0).forward, Role::attention_core).flops == Approx(2.0 * 64 * pairs * (64 + 64)));
  CHECK(pairs / (4096.0 * 128 - 0.5 * 128 * 128) == Approx(2.0).epsilon(0.02));
}

// The tiles a window reaches are some of those causal attention reaches. gpt-oss-120b's layer 0
// with a window of 3968 keys over 4096 tokens reaches all 528 tiles on and below the diagonal,
// the causal kernel's, and had been costed at 528 · 128² = 8,650,752 pairs per head, 3 % above
// the causal layer beside it (s²/2 = 8,388,608).
TEST_CASE("a windowed attention kernel is never costed above the causal one beside it") {
  double previous = 0;
  for (const int window : {128, 256, 1024, 2048, 3584, 3840, 3967, 3968, 4000, 4095}) {
    INFO("window " << window);
    const stepsim::Scenario s = scenario("gpt-oss-120b", "model.sliding_window=" + std::to_string(window));
    const ModelWork w = stepsim::workload::build_work(s);
    REQUIRE(s.model.windowed_layer(0));
    REQUIRE_FALSE(s.model.windowed_layer(1));
    const double windowed = op(w.block(0).forward, Role::attention_core).flops;
    const double causal = op(w.block(1).forward, Role::attention_core).flops;
    CHECK(causal == Approx(2.0 * 64 * (4096.0 * 4096 / 2) * (64 + 64)));
    CHECK(windowed <= causal);
    if (window >= 4096 - 128) CHECK(windowed == causal);
    CHECK(windowed >= previous);  // a wider window costs no less
    previous = windowed;
  }
}

TEST_CASE("DeepSeek-V3's latent attention and first 3 dense layers: 671 B parameters, 37 B active") {
  const stepsim::Scenario s = scenario("deepseek-v3");
  const ModelWork w = stepsim::workload::build_work(s);
  REQUIRE(w.dense.size() == 61);
  CHECK(&w.block(2) == &w.dense_layer);
  CHECK(&w.block(3) == &w.layer);
  CHECK(op(w.dense_layer.forward, Role::fc1).n == 2 * 18432);
  CHECK(w.dense_layer.expert_param_count == 0);
  // Multi-head latent attention (config_671B.json): q 7168 → 1536 → 128·(128 + 64), kv 7168 →
  // 512 + 64, 512 → 128·(128 + 128), output 128·128 → 7168; the two latents' RMSNorm scales.
  const long long attention =
      7168LL * 1536 + 1536LL * 128 * 192 + 7168LL * 576 + 512LL * 128 * 256 + 128LL * 128 * 7168;
  CHECK(attention == 187105280);
  const long long latent_norms = 1536 + 512;
  const long long router = 256LL * 7168;
  const long long expert = 3LL * 7168 * 2048;
  const long long dense_mlp = 3LL * 7168 * 18432;
  const long long embedding = 129280LL * 7168;
  CHECK(w.dense_layer.param_count == attention + latent_norms + dense_mlp + 2 * 7168);
  // The Linear layers' weights (Transformer Engine's, quantized in a low precision): neither
  // norm nor router.
  CHECK(w.dense_layer.linear_param_count == attention + dense_mlp);
  // At EP 8: 32 routed experts a GPU and the shared one.
  CHECK(w.layer.expert_param_count == 32 * expert);
  CHECK(w.layer.linear_param_count == attention + 32 * expert + expert);
  CHECK(w.params_total == 58 * (attention + latent_norms + router + 257 * expert + 2 * 7168) +
                              3 * (attention + latent_norms + dense_mlp + 2 * 7168) + 2 * embedding + 7168);
  // DeepSeek-V3's report (arXiv 2412.19437): 671 B parameters, 37 B activated per token.
  CHECK(w.params_total / 1e9 == Approx(671.03).epsilon(0.00002));
  const double active = 61.0 * attention + 58.0 * (router + 9 * expert) + 3.0 * dense_mlp + embedding;
  CHECK(active == Approx(36624596992.0));
  CHECK((active + embedding) / 1e9 == Approx(37.55).epsilon(0.001));
  // Causal attention: QKᵀ over 192 and P·V over 128 per head, 3·s·layers·heads·(192 + 128)
  // per token; 250.4 GFLOP per token in all, Megatron-Bridge's summary gives 249.1 for its
  // DeepSeek-V3 run without multi-token prediction (rounded throughputs).
  const double flops = 6.0 * active + 3.0 * 4096 * 61 * 128 * (192 + 128);
  CHECK(per_token(w, s) == Approx(flops).epsilon(1e-12));
  CHECK(flops / 1e9 == Approx(250.45).epsilon(0.0001));
  CHECK(op(w.layer.forward, Role::attn_proj).k == 128 * 128);
  const OpCost& core = op(w.layer.forward, Role::attention_core);
  CHECK(core.k == 192);
  CHECK(core.flops == Approx(0.5 * 2.0 * 128 * 4096.0 * 4096.0 * (192 + 128)));
}

TEST_CASE("Llama 4 Maverick alternates dense and MoE layers: 400 B parameters, 17 B active") {
  const stepsim::Scenario s = scenario("llama4-maverick");
  const ModelWork w = stepsim::workload::build_work(s);
  CHECK(&w.block(0) == &w.dense_layer);
  CHECK(&w.block(1) == &w.layer);
  CHECK(&w.block(46) == &w.dense_layer);
  CHECK(&w.block(47) == &w.layer);
  const long long attention = 5120LL * (5120 + 2 * 1024) + 5120LL * 5120;
  const long long dense_mlp = 3LL * 5120 * 16384;
  const long long expert = 3LL * 5120 * 8192;
  const long long router = 128LL * 5120;
  const long long embedding = 202048LL * 5120;
  CHECK(w.params_total ==
        48 * attention + 24 * dense_mlp + 24 * (router + 129 * expert) + 48 * 2 * 5120 + 2 * embedding + 5120);
  // Meta's model card: 400 B in all, 17 B active (with both embeddings).
  CHECK(w.params_total / 1e9 == Approx(400.7).epsilon(0.0001));
  const double active = 48.0 * attention + 24.0 * dense_mlp + 24.0 * (router + 2 * expert) + embedding;
  CHECK((active + embedding) / 1e9 == Approx(17.18).epsilon(0.001));
  CHECK(per_token(w, s) == Approx(6.0 * active + 6.0 * 8192 * 48 * (40 * 128)).epsilon(1e-12));
}

TEST_CASE("DeepSeek-V3's multi-token prediction adds one MoE layer, the projection and the head") {
  const stepsim::Scenario s = scenario("deepseek-v3", "model.mtp_layers=1");
  const ModelWork w = stepsim::workload::build_work(s);
  // Per token: 250.45 GFLOP of the main model, then the MTP layer's MLA (187,105,280 weights)
  // and MoE (router and 9 experts: 398,196,736), the 2h → h projection and the output head,
  // and one more layer of attention.
  const double mtp = 187105280.0 + 398196736.0 + 2.0 * 7168 * 7168 + 129280.0 * 7168;
  const double flops = 250449887232.0 + 6.0 * mtp + 3.0 * 4096 * 128 * (192 + 128);
  CHECK(per_token(w, s) == Approx(flops).epsilon(1e-12));
  // Megatron-Bridge's summary: 260.4 to 260.6 GFLOP per token for its DeepSeek-V3 runs with MTP.
  CHECK(flops / 1e9 == Approx(260.64).epsilon(0.0001));
  // Parameters: the MTP layer (MLA, router, 257 experts, two norms), the projection and three
  // norms; with the copies of the embedding and the output head the checkpoint keeps for the
  // module, the report's 685 B.
  const long long layer = 187107328LL + 256LL * 7168 + 257LL * 3 * 7168 * 2048 + 2 * 7168;
  CHECK(w.params_total == 671026404352LL + layer + 2LL * 7168 * 7168 + 3 * 7168);
  CHECK((w.params_total + 2 * 129280LL * 7168) / 1e9 == Approx(684.49).epsilon(0.0001));
  // The last stage runs the MTP layer's experts after the main head.
  int experts = 0;
  for (const OpCost& op : w.post.forward) experts += op.name == "mtp0 expert fc1" ? 1 : 0;
  CHECK(experts == 1);
  CHECK(w.post.forward.back().name == "mtp0 cross entropy");
  CHECK(w.post.expert_param_count == w.layer.expert_param_count);
}

namespace {

// DeepSeek-V3 at TP 2 on the 8 H100 of one node (dp 4, ep 4), with or without sequence
// parallelism (which Megatron requires beside MoE layers: without it, only the dense layers
// are looked at).
stepsim::Scenario deepseek_tp2(bool sequence_parallel, const std::string& more = "") {
  constexpr const char* kBase = R"({ "cluster": "dgx-h100-ndr", "parallel": { "tp": 2, "dp": 4, "ep": 4,
    "sequence_parallel": true }, "training": { "global_batch": 8, "micro_batch": 1 } })";
  std::vector<std::string> sets{"model=deepseek-v3"};
  if (!more.empty()) sets.push_back(more);
  stepsim::Scenario s = stepsim::io::load_scenario_text(kBase, "t.json", sets);
  s.parallel.sequence_parallel = sequence_parallel;
  return s;
}

const OpCost& named(const std::vector<OpCost>& ops, const std::string& name) {
  for (const OpCost& o : ops)
    if (o.name == name) return o;
  FAIL("no op " << name);
  return ops.front();
}

// FLOPs of latent attention's five GEMMs in one forward.
double attention_gemm_flops(const std::vector<OpCost>& ops) {
  double sum = 0;
  for (const char* name :
       {"q down projection", "q up projection", "kv down projection", "kv up projection", "attention projection"})
    sum += named(ops, name).flops;
  return sum;
}

}  // namespace

// Megatron-Core's MLASelfAttention under TP: linear_q_down_proj (7168 → 1536) and
// linear_kv_down_proj (7168 → 512 + 64) are TELinear with parallel_mode "duplicated", whole on
// every rank over the rank's own tokens (s/t of them under sequence parallelism); the latents'
// RMSNorms run there too; linear_q_up_proj (1536 → 128·192) and linear_kv_up_proj
// (512 → 128·(128 + 128)) are column-parallel over the gathered sequence, linear_proj
// (128·128 → 7168) row-parallel.
TEST_CASE("DeepSeek-V3's latent attention at tp 2: down projections whole on every rank, up projections split") {
  const ModelWork one = stepsim::workload::build_work(scenario("deepseek-v3"));
  for (const bool sp : {true, false}) {
    INFO("sequence parallel " << sp);
    const ModelWork two = stepsim::workload::build_work(deepseek_tp2(sp));
    const std::vector<OpCost>& f = two.dense_layer.forward;
    const long long rows = sp ? 2048 : 4096;
    const OpCost& q_down = named(f, "q down projection");
    CHECK((q_down.m == rows && q_down.n == 1536 && q_down.k == 7168));
    CHECK(q_down.flops == 2.0 * rows * 1536 * 7168);
    const OpCost& kv_down = named(f, "kv down projection");
    CHECK((kv_down.m == rows && kv_down.n == 576 && kv_down.k == 7168));
    const OpCost& q_up = named(f, "q up projection");
    CHECK((q_up.m == 4096 && q_up.n == 64 * 192 && q_up.k == 1536));
    const OpCost& kv_up = named(f, "kv up projection");
    CHECK((kv_up.m == 4096 && kv_up.n == 64 * 256 && kv_up.k == 512));
    const OpCost& proj = named(f, "attention projection");
    CHECK((proj.m == 4096 && proj.n == 7168 && proj.k == 64 * 128));
    CHECK(named(f, "q latent rmsnorm").flops == 8.0 * rows * 1536);
    CHECK(named(f, "kv latent rmsnorm").flops == 8.0 * rows * 512);
    // Over both ranks the split GEMMs add up to tp 1's; without sequence parallelism each rank
    // also projects every token down, the down projections' work twice over.
    const double down = 2.0 * 4096 * 7168 * (1536 + 576);
    CHECK(2.0 * attention_gemm_flops(f) == Approx(attention_gemm_flops(one.dense_layer.forward) + (sp ? 0.0 : down)));
    // Parameters per rank: the down projections and the latents' norms whole, the rest halved.
    const long long attention =
        7168LL * 1536 + 1536 + 1536LL * 64 * 192 + 7168LL * 576 + 512 + 512LL * 64 * 256 + 64LL * 128 * 7168;
    CHECK(two.dense_layer.param_count == attention + 3LL * 7168 * 9216 + 2 * 7168);
  }
  // Activations of a dense layer under sequence parallelism (bf16, no recompute): the four
  // hidden-wide inputs (two norms, the down projections, fc1) and the latents (the query
  // latent before and after its norm, the kv latent with its rotary key, the normed kv latent)
  // on the rank's 2048 rows; Q, K (192 per head), V and the attention output (128) of the 64
  // local heads, the MLP's fc1 output and fc2 input on all 4096 tokens; the fp32 log-sum-exp.
  const double kept = 2048.0 * 7168 * 4 * 2 + 2048.0 * (2 * 1536 + 576 + 512) * 2 +
                      4096.0 * 64 * (2 * 192 + 2 * 128) * 2 + 4096.0 * (18432 + 9216) * 2 + 64.0 * 4096 * 4;
  CHECK(static_cast<double>(stepsim::workload::build_work(deepseek_tp2(true)).dense_layer.activations.count()) == kept);
}

// Megatron-Core's MultiTokenPredictionLayer under TP: enorm and hnorm on the rank's rows, the
// column-parallel eh_proj (2h → h/t) over the gathered sequence, its output gathered along the
// hidden dimension (and scattered back to s/t rows), the transformer layer as the model's, the
// final norm on the rank's rows and the vocabulary-parallel shared head.
TEST_CASE("DeepSeek-V3's multi-token prediction at tp 2 with sequence parallelism") {
  const ModelWork w = stepsim::workload::build_work(deepseek_tp2(true, "model.mtp_layers=1"));
  const ModelWork without = stepsim::workload::build_work(deepseek_tp2(true));
  const std::vector<OpCost>& f = w.post.forward;
  const OpCost& projection = named(f, "mtp0 projection");
  CHECK((projection.m == 4096 && projection.n == 3584 && projection.k == 2 * 7168));
  CHECK(projection.flops == 2.0 * 4096 * 3584 * 14336);
  CHECK(named(f, "mtp0 norms").flops == 8.0 * 2 * 2048 * 7168);
  CHECK(named(f, "mtp0 final rmsnorm").flops == 8.0 * 2048 * 7168);
  CHECK(named(f, "mtp0 lm head").n == 129280 / 2);
  CHECK(named(f, "mtp0 q down projection").m == 2048);
  CHECK(named(f, "mtp0 q up projection").m == 4096);
  // The layer, the projection's half and three norms (the stage holds the embedding: pp 1).
  CHECK(w.post.param_count - without.post.param_count == w.layer.param_count + 2LL * 7168 * 3584 + 3 * 7168);
}

// Qwen3 normalizes each head's query and key before the rotary embedding (Megatron-Core's
// qk_layernorm: SelfAttention.get_query_key_value_tensors runs q_layernorm and k_layernorm, a
// Transformer Engine RMSNorm over each 128-wide head): one fused kernel each, reading and
// writing every local query (32 heads) and key (4 heads) element of the micro-batch in BF16.
TEST_CASE("Qwen3 normalizes every head's query and key before the rotary embedding") {
  const stepsim::Scenario s = scenario("qwen3-30b-a3b");
  CHECK(s.model.qk_norm);
  const ModelWork w = stepsim::workload::build_work(s);
  std::vector<std::string> names;
  for (const auto& o : w.layer.forward) names.push_back(o.name);
  const auto at = [&](const char* name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
  REQUIRE(at("q rmsnorm") < static_cast<long>(names.size()));
  REQUIRE(at("k rmsnorm") < static_cast<long>(names.size()));
  CHECK(at("qkv") < at("q rmsnorm"));
  CHECK(at("k rmsnorm") < at("rotary embedding"));
  const long long tokens = s.training.micro_batch * 4096LL;
  CHECK(w.layer.forward[static_cast<std::size_t>(at("q rmsnorm"))].bytes.count() == tokens * 32 * 128 * 2 * 2);
  CHECK(w.layer.forward[static_cast<std::size_t>(at("k rmsnorm"))].bytes.count() == tokens * 4 * 128 * 2 * 2);
  int backward = 0;
  for (const auto& o : w.layer.backward) backward += o.name == "q rmsnorm backward" || o.name == "k rmsnorm backward";
  CHECK(backward == 2);
  // Without the key, no such norms.
  const ModelWork plain = stepsim::workload::build_work(scenario("qwen3-30b-a3b", "model.qk_norm=false"));
  for (const auto& o : plain.layer.forward) CHECK(o.name.find("q rmsnorm") == std::string::npos);
}

TEST_CASE("gpt-oss-120b keeps the clamped fc1 output for its activation's backward unless moe_act recomputes it") {
  // Without recompute the clamp's concatenation, 2 · 2880 wide, is kept beside fc1's output
  // for each of the 4 · 4096 routed copies: 2 bytes each.
  const auto kept = [](const std::string& more) {
    const stepsim::Scenario s = scenario("gpt-oss-120b", more);
    return static_cast<double>(stepsim::workload::build_work(s).layer.activations.count());
  };
  const double clamped = 4.0 * 4096 * 2 * 2880 * 2;
  CHECK(kept("") - kept("model.swiglu_limit=0") == Approx(clamped));
  const std::string moe_act = R"(training={"global_batch": 8, "micro_batch": 1, "recompute": "selective",
    "recompute_modules": ["moe_act"]})";
  const stepsim::Scenario r = scenario("gpt-oss-120b", moe_act);
  stepsim::Scenario r0 = r;
  r0.model.swiglu_limit = 0;
  CHECK(static_cast<double>(stepsim::workload::build_work(r).layer.activations.count()) ==
        Approx(static_cast<double>(stepsim::workload::build_work(r0).layer.activations.count())));
}

TEST_CASE("gpt-oss-120b's PyTorch operators are issued one by one, and its activation waits for the GPU") {
  // At EP 8 each GPU holds 16 experts: the fc2 bias's loop runs b·p and the sum per expert and
  // one concatenation (33 operators), autograd two products and two sums per expert and the
  // split's concatenation (65). The clamp: two clamps and a concatenation (3); backward the
  // gate's ≤ and where, the linear half's ≥, ≤, logical_and and where, the concatenation (7).
  // YaRN's rotary embedding on the queries and on the keys: cos and sin scaled and cast (6) and
  // six operators on the tensor (12 per tensor); backward ten per tensor.
  const stepsim::Scenario s = scenario("gpt-oss-120b");
  const ModelWork w = stepsim::workload::build_work(s);
  const auto named = [](const std::vector<OpCost>& ops, const std::string& name) -> const OpCost& {
    for (const OpCost& o : ops)
      if (o.name == name) return o;
    FAIL("no op " << name);
    return ops.front();
  };
  CHECK(named(w.layer.forward, "expert fc2 bias").operators == 33);
  CHECK(named(w.layer.backward, "expert fc2 bias backward").operators == 65);
  CHECK(named(w.layer.forward, "expert activation clamp").operators == 3);
  CHECK(named(w.layer.backward, "expert activation clamp backward").operators == 7);
  CHECK(named(w.layer.forward, "rotary embedding (unfused)").operators == 24);
  CHECK(named(w.layer.backward, "rotary embedding (unfused) backward").operators == 20);
  // weighted_bias_quick_geglu_impl makes its linear offset a GPU tensor from a Python float
  // (torch.tensor(..., device=...)): a synchronising copy before the fused activation.
  CHECK(named(w.layer.forward, "expert swiglu").host_sync);
  CHECK_FALSE(named(w.layer.backward, "expert swiglu backward").host_sync);
  CHECK_FALSE(named(w.layer.forward, "expert fc2 bias").host_sync);
  // moe_act recompute re-runs it where fc2's backward needs it, not where the layer's backward
  // starts, as here: its sync is left out.
  const stepsim::Scenario r = scenario("gpt-oss-120b", R"(training={"global_batch": 8, "micro_batch": 1,
    "recompute": "selective", "recompute_modules": ["moe_act"]})");
  CHECK_FALSE(named(stepsim::workload::build_work(r).layer.recompute, "expert swiglu").host_sync);
}
