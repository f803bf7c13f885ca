// The work of a mixture-of-experts layer: parameters per GPU, active FLOPs per token and the
// all-to-all message, against hand counts for Mixtral 8x7B and (approximated) DeepSeek-V3.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "scenarios.hpp"
#include "workload/layer.hpp"
#include "workload/shape.hpp"
#include "workload/work.hpp"

namespace st = stepsim::testing;
using stepsim::workload::OpCost;
using stepsim::workload::Role;

namespace {

stepsim::ModelSpec mixtral_8x7b() {
  stepsim::ModelSpec m = st::llama3_8b();
  m.name = "mixtral-8x7b";
  m.layers = 32;
  m.ffn_hidden = 14336;
  m.vocab = 32000;
  m.seq_len = 4096;
  m.moe = {8, 2, 14336};
  return m;
}

stepsim::ModelSpec deepseek_v3() {
  stepsim::ModelSpec m = st::llama3_8b();
  m.name = "deepseek-v3";
  m.layers = 61;
  m.hidden = 7168;
  m.heads = 128;
  m.kv_heads = 128;
  m.ffn_hidden = 18432;
  m.vocab = 129280;
  m.seq_len = 4096;
  m.moe = {256, 8, 2048};
  m.moe.shared_experts = 1;
  return m;
}

stepsim::Scenario moe(const stepsim::ModelSpec& m, int ep, long long global_batch) {
  stepsim::Scenario s = st::scenario(m, 1, 1, global_batch);
  s.parallel.ep = ep;
  s.parallel.dp = 64;
  return s;
}

double sum_flops(const std::vector<OpCost>& ops, Role role) {
  double f = 0;
  for (const OpCost& op : ops) f += op.role == role ? op.flops : 0.0;
  return f;
}

// Attention 4096·(4096 + 2·1024) + 4096·4096, router 8·4096, one expert 3·4096·14336.
constexpr long long kMixtralAttention = 41943040;
constexpr long long kMixtralRouter = 32768;
constexpr long long kMixtralExpert = 176160768;

}  // namespace

TEST_CASE("Mixtral 8x7B at EP 8 holds one expert per GPU and 46.7 B parameters in all") {
  const auto w = stepsim::workload::build_work(moe(mixtral_8x7b(), 8, 64));
  // Attention, router, one local expert and two RMSNorm scales.
  CHECK(w.layer.param_count == kMixtralAttention + kMixtralRouter + kMixtralExpert + 2 * 4096);
  CHECK(w.layer.param_count == 218144768);
  CHECK(w.layer.expert_param_count == kMixtralExpert);
  CHECK(w.layer.linear_param_count == kMixtralAttention + kMixtralExpert);  // no router, no norm
  // 32 layers of 8 experts, embedding and LM head of 32000·4096, final norm.
  const long long layer = kMixtralAttention + kMixtralRouter + 8 * kMixtralExpert + 2 * 4096;
  CHECK(w.params_total == 32 * layer + 2 * 32000LL * 4096 + 4096);
  CHECK(w.params_total == 46702792704);
}

TEST_CASE("Mixtral 8x7B's model FLOPs count the 2 active experts per token") {
  const auto w = stepsim::workload::build_work(moe(mixtral_8x7b(), 8, 64));
  // 6 · (32 · (attention + router + 2 experts) + LM head) + causal attention 6 · s · l · h.
  const double active = 32.0 * (kMixtralAttention + kMixtralRouter + 2.0 * kMixtralExpert) + 4096.0 * 32000;
  const double per_token = 6.0 * active + 6.0 * 4096 * 32 * 4096;
  CHECK(per_token == Approx(79712747520.0));
  CHECK(w.model_flops_per_step / (64.0 * 4096) == Approx(per_token).epsilon(1e-12));
  // Each GPU's experts compute top_k copies of its 4096 tokens.
  CHECK(sum_flops(w.layer.forward, Role::expert_fc1) == Approx(2.0 * 4096 * 2 * 2 * 14336 * 4096));
}

TEST_CASE("one MoE all-to-all carries the routed copies of the GPU's tokens, times the imbalance") {
  stepsim::Scenario s = moe(mixtral_8x7b(), 8, 64);
  // 4096 tokens · top 2 · hidden 4096 · 2 bytes.
  CHECK(stepsim::workload::build_work(s).layer.dispatch_message.count() == 67108864);
  s.model.moe.imbalance = 1.5;
  CHECK(stepsim::workload::build_work(s).layer.dispatch_message.count() == 100663296);
  s.model.moe.capacity_factor = 1.25;  // the busiest expert drops what exceeds 1.25× its share
  CHECK(stepsim::workload::build_work(s).layer.dispatch_message.count() == 83886080);
}

TEST_CASE("tokens a capacity factor below 1 drops are neither computed nor counted as model FLOPs") {
  stepsim::Scenario s = moe(mixtral_8x7b(), 8, 64);
  s.model.moe.capacity_factor = 0.5;  // every expert keeps half of its even share
  const auto w = stepsim::workload::build_work(s);
  // Each GPU's experts compute half of the 2 copies of its 4096 tokens.
  CHECK(sum_flops(w.layer.forward, Role::expert_fc1) == Approx(2.0 * 4096 * 2 * 0.5 * 2 * 14336 * 4096));
  CHECK(sum_flops(w.layer.forward, Role::expert_fc2) == Approx(2.0 * 4096 * 2 * 0.5 * 14336 * 4096));
  // A dropped copy skips its expert (the residual carries the token): one active expert per token.
  const double active = 32.0 * (kMixtralAttention + kMixtralRouter + 1.0 * kMixtralExpert) + 4096.0 * 32000;
  const double per_token = 6.0 * active + 6.0 * 4096 * 32 * 4096;
  CHECK(w.model_flops_per_step / (64.0 * 4096) == Approx(per_token).epsilon(1e-12));
}

TEST_CASE("the busiest EP rank's drops come off the model FLOPs, the other ranks sharing the rest evenly") {
  stepsim::Scenario s = moe(mixtral_8x7b(), 8, 64);
  s.model.moe.imbalance = 2;
  s.model.moe.capacity_factor = 1.5;
  const auto w = stepsim::workload::build_work(s);
  // The busiest rank's experts receive 2 times the mean and keep 1.5; the other 7 receive
  // (8 - 2) / 7 of it each and keep it all: (1.5 + 6) / 8 = 0.9375 of the routed copies.
  const double active = 32.0 * (kMixtralAttention + kMixtralRouter + 2.0 * 0.9375 * kMixtralExpert) + 4096.0 * 32000;
  CHECK(w.model_flops_per_step / (64.0 * 4096) == Approx(6.0 * active + 6.0 * 4096 * 32 * 4096).epsilon(1e-12));
  // The busiest rank, which sets the pace, computes its 1.5 times the mean.
  CHECK(sum_flops(w.layer.forward, Role::expert_fc1) == Approx(2.0 * 4096 * 2 * 1.5 * 2 * 14336 * 4096));
  // Full recompute runs each expert's GEMMs again on the copies kept, 2 FLOPs per weight per
  // copy (its SwiGLU, element-wise, counted in neither model FLOPs nor their recompute), 0.0625
  // of the 2 copies per token fewer than without drops.
  s.training.recompute = stepsim::Recompute::full;
  stepsim::Scenario even = s;
  even.model.moe.imbalance = 1;
  even.model.moe.capacity_factor = 0;
  const double fewer = stepsim::workload::build_work(even).recompute_flops_per_step -
                       stepsim::workload::build_work(s).recompute_flops_per_step;
  CHECK(fewer == Approx((64.0 * 4096) * 32 * 2 * 0.0625 * 2.0 * kMixtralExpert).epsilon(1e-9));
}

TEST_CASE("DeepSeek-V3 as approximated holds 4 routed experts and the shared one per GPU at EP 64") {
  const auto w = stepsim::workload::build_work(moe(deepseek_v3(), 64, 64));
  const long long expert = 3LL * 7168 * 2048;  // 44,040,192
  const long long attention = 4LL * 7168 * 7168;
  const long long router = 256LL * 7168;
  CHECK(w.layer.param_count == attention + router + 4 * expert + expert + 2 * 7168);
  CHECK(w.layer.param_count == 427571200);
  const long long layer = attention + router + 257 * expert + 2 * 7168;
  CHECK(w.params_total == 61 * layer + 2 * 129280LL * 7168 + 7168);
  CHECK(w.params_total == 704921039872);
  // Active per token: attention, router, 8 routed and 1 shared expert, and the LM head
  // (DeepSeek's 37 B); model FLOPs are 6 per active weight plus causal attention.
  const double active = 61.0 * (attention + router + 9.0 * expert) + 129280.0 * 7168;
  CHECK(active == Approx(37753454592.0));
  CHECK(w.model_flops_per_step / (64.0 * 4096) == Approx(6.0 * active + 6.0 * 4096 * 61 * 7168).epsilon(1e-12));
  // 4096 tokens · top 8 · 7168 · 2 bytes per all-to-all.
  CHECK(w.layer.dispatch_message.count() == 4096LL * 8 * 7168 * 2);
}

TEST_CASE("the expert GEMMs are grouped over the GPU's local experts, backward included") {
  const auto w = stepsim::workload::build_work(moe(deepseek_v3(), 64, 64));  // 256 / 64 = 4 per GPU
  int grouped = 0;
  for (const auto* ops : {&w.layer.forward, &w.layer.backward}) {
    for (const OpCost& op : *ops) {
      const bool expert = op.role == Role::expert_fc1 || op.role == Role::expert_fc2;
      if (op.cls != stepsim::workload::OpClass::gemm) continue;
      CHECK(op.groups == (expert ? 4 : 1));
      grouped += expert ? 1 : 0;
    }
  }
  CHECK(grouped == 6);  // fc1 and fc2: forward, dgrad and wgrad
  // Mixtral at EP 8 holds one expert per GPU: a plain GEMM.
  const auto mixtral = stepsim::workload::build_work(moe(mixtral_8x7b(), 8, 64));
  for (const OpCost& op : mixtral.layer.forward) CHECK(op.groups == 1);
}

// Expert tensor parallelism splits each expert's fc1 by columns and fc2 by rows over etp ranks,
// which gather the tokens of their ETP group: the same FLOPs per GPU, 1/etp of the weights.
TEST_CASE("etp 2 halves each GPU's expert weights and doubles the tokens its expert GEMMs run over") {
  stepsim::Scenario s = moe(mixtral_8x7b(), 4, 64);  // 2 experts per EP rank
  const auto ep4 = stepsim::workload::build_work(s);
  s.parallel.etp = 2;
  const auto etp2 = stepsim::workload::build_work(s);
  CHECK(etp2.layer.expert_param_count == 2 * kMixtralExpert / 2);
  CHECK(ep4.layer.expert_param_count == 2 * kMixtralExpert);
  const auto fc1 = [](const stepsim::workload::ModelWork& w) {
    for (const OpCost& op : w.layer.forward)
      if (op.role == Role::expert_fc1) return op;
    return OpCost{};
  };
  CHECK(fc1(etp2).m == 2 * fc1(ep4).m);
  CHECK(fc1(etp2).n == 14336);  // the SwiGLU gate and up halves of 2 · 14336 / 2
  CHECK(fc1(etp2).flops == Approx(fc1(ep4).flops));
  CHECK(etp2.layer.expert_tp_message == etp2.layer.dispatch_message * 2);
  // The model is the same: parameters and model FLOPs do not move.
  CHECK(etp2.params_total == ep4.params_total);
  CHECK(etp2.model_flops_per_step == Approx(ep4.model_flops_per_step).epsilon(1e-12));
}

// Megatron-Core's all-to-all dispatcher (token_dispatcher.py, MoEAlltoAllTokenDispatcher) sorts
// the tokens the dispatch brought, grouped by source rank, into runs by local expert
// (dispatch_postprocess: sort_chunks_by_idxs) and sorts the experts' output back by source rank
// before the combine (combine_preprocess), when a rank holds several experts. Each is one
// Transformer Engine kernel (moe_sort_chunks_by_index: sort_chunks_by_map) reading and writing
// every routed token, the dispatch's sort with its router probability; its backward moves the
// gradients the same way once.
TEST_CASE("Megatron-Core's all-to-all dispatcher sorts the received tokens by local expert and back") {
  stepsim::Scenario s = moe(mixtral_8x7b(), 4, 64);  // 2 experts per EP rank
  s.training.framework = stepsim::Framework::megatron;
  const auto w = stepsim::workload::build_work(s);
  std::vector<std::string> names;
  for (const OpCost& op : w.layer.forward) names.push_back(op.name);
  const auto at = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
  REQUIRE(at("moe sort chunks") < static_cast<long>(names.size()));
  REQUIRE(at("moe unsort chunks") < static_cast<long>(names.size()));
  CHECK(at("moe permute") < at("moe sort chunks"));
  CHECK(at("moe sort chunks") < at("expert fc1"));
  CHECK(at("expert fc2") < at("moe unsort chunks"));
  CHECK(at("moe unsort chunks") < at("moe unpermute"));
  // 4096 tokens · top 2 routed copies, each 4096 wide in BF16, read and written; the dispatch's
  // sort also moves each copy's BF16 probability.
  const long long copies = 4096LL * 2;
  const OpCost& sort = w.layer.forward[static_cast<std::size_t>(at("moe sort chunks"))];
  const OpCost& unsort = w.layer.forward[static_cast<std::size_t>(at("moe unsort chunks"))];
  CHECK(sort.bytes.count() == copies * (2 * 4096 * 2 + 2 * 2));
  CHECK(unsort.bytes.count() == copies * 2 * 4096 * 2);
  // Forward, make_chunk_sort_map's kernel, then the sort; backward the sort over the saved map.
  CHECK(sort.operators == 2);
  CHECK(unsort.operators == 2);
  int backward = 0;
  for (const OpCost& op : w.layer.backward) {
    if (op.name == "moe sort chunks backward") CHECK(op.bytes == sort.bytes);
    if (op.name == "moe unsort chunks backward") CHECK(op.bytes == unsort.bytes);
    if (op.name.find("sort chunks backward") != std::string::npos) CHECK(op.operators == 1);
    backward += op.name.find("sort chunks backward") != std::string::npos ? 1 : 0;
  }
  CHECK(backward == 2);
}

// Transformer Engine's fused mask-map permutation (transformer_engine/common/triton/
// permutation.py, which Megatron-Core runs with moe_permute_fusion): _permute_kernel loads each
// token's row once and stores it to each of its routed destinations, _unpermute_kernel loads
// each routed copy and stores one row per token; the backward of each is the other kernel.
// Mixtral 8x7B, 4096 tokens of 4096 in BF16, top 2: a token's row read once (4096 · 4096 · 2 =
// 33,554,432 bytes) and its 2 copies written once (67,108,864): 100,663,296 bytes each way, in
// each of the four kernels; at top 8 (DeepSeek-V3's routing, hidden 7168) 4096 · 7168 · 2 · 9 =
// 528,482,304 bytes. The permute forward first builds its row map (make_row_id_map: three
// Triton kernels over the 4096 × E routing map, a byte a score read and 16 bytes of int32 row
// ids written and read back, 17 bytes a score): 4096 · 8 · 17 = 557,056 bytes more for
// Mixtral's 8 experts, 4096 · 256 · 17 = 17,825,792 for DeepSeek-V3's 256; four kernels, each
// an operator, where the backward and the unpermute reuse the map (one kernel each).
TEST_CASE("the fused permutation moves each token's row once and each routed copy once, each way") {
  stepsim::Scenario s = moe(mixtral_8x7b(), 4, 64);
  s.training.framework = stepsim::Framework::megatron;
  const auto bytes_of = [](const std::vector<OpCost>& ops, const std::string& name) {
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const OpCost& op) { return op.name == name; });
    REQUIRE(it != ops.end());
    return it->bytes.count();
  };
  const auto w = stepsim::workload::build_work(s);
  CHECK(bytes_of(w.layer.forward, "moe permute") == 100663296 + 557056);
  CHECK(bytes_of(w.layer.forward, "moe unpermute") == 100663296);
  CHECK(bytes_of(w.layer.backward, "moe permute backward") == 100663296);
  CHECK(bytes_of(w.layer.backward, "moe unpermute backward") == 100663296);
  stepsim::Scenario d = moe(deepseek_v3(), 8, 64);
  d.training.framework = stepsim::Framework::nemo;
  const auto dw = stepsim::workload::build_work(d);
  CHECK(bytes_of(dw.layer.forward, "moe permute") == 528482304 + 17825792);
  const auto operators_of = [](const std::vector<OpCost>& ops, const std::string& name) {
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const OpCost& op) { return op.name == name; });
    REQUIRE(it != ops.end());
    return it->operators;
  };
  CHECK(operators_of(dw.layer.forward, "moe permute") == 4);
  CHECK(operators_of(dw.layer.backward, "moe permute backward") == 1);
  CHECK(operators_of(dw.layer.forward, "moe unpermute") == 1);
  CHECK(operators_of(dw.layer.backward, "moe unpermute backward") == 1);
  CHECK(bytes_of(dw.layer.backward, "moe unpermute backward") == 528482304);
}

// Megatron-Core's router with a capacity factor (moe_utils.apply_router_token_dropping, drop
// policy "probs"): torch.topk over the tokens, zeros_like, scatter, the cast to bool, the
// routing map's and, the probabilities' product by the mask, 6 operators and 25 bytes a score
// beside the fused top-k's 9; backward the product's (9 bytes a score) beside the top-k's 8.
// Mixtral 8x7B's 4096 tokens · 8 experts: 4096 · 8 · 34 = 1,114,112 bytes forward, 4096 · 8 ·
// 17 = 557,056 backward. The dispatcher also sums the kept copies and copies the count to the
// host (num_out_tokens): 12 operators in its preprocessing.
TEST_CASE("a capacity factor adds Megatron-Core's token dropping to the router and the kept count to the dispatcher") {
  stepsim::Scenario s = moe(mixtral_8x7b(), 4, 64);
  s.training.framework = stepsim::Framework::megatron;
  s.model.moe.capacity_factor = 1.25;
  const auto w = stepsim::workload::build_work(s);
  const auto find = [](const std::vector<OpCost>& ops, const std::string& name) {
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const OpCost& op) { return op.name == name; });
    REQUIRE(it != ops.end());
    return *it;
  };
  const OpCost routing = find(w.layer.forward, "router top-k");
  CHECK(routing.operators == 7);
  CHECK(routing.bytes.count() == 1114112);
  const OpCost back = find(w.layer.backward, "router top-k backward");
  CHECK(back.operators == 2);
  CHECK(back.bytes.count() == 557056);
  CHECK(find(w.layer.forward, "moe tokens per expert").operators == 12);
  s.model.moe.capacity_factor = 0;
  CHECK(find(stepsim::workload::build_work(s).layer.forward, "router top-k").operators == 1);
}

TEST_CASE("no chunk sort with one expert per rank, the flex dispatcher or outside Megatron-Core") {
  const auto sorts = [](const stepsim::Scenario& s) {
    const auto w = stepsim::workload::build_work(s);
    return std::any_of(w.layer.forward.begin(), w.layer.forward.end(),
                       [](const OpCost& op) { return op.name.find("sort chunks") != std::string::npos; });
  };
  stepsim::Scenario s = moe(mixtral_8x7b(), 4, 64);
  s.training.framework = stepsim::Framework::nemo;
  CHECK(sorts(s));
  stepsim::Scenario one = moe(mixtral_8x7b(), 8, 64);  // one expert per GPU
  one.training.framework = stepsim::Framework::nemo;
  CHECK_FALSE(sorts(one));
  stepsim::Scenario flex = s;  // DeepEP and HybridEP hand the tokens over by expert
  flex.model.moe.dispatcher = stepsim::MoeDispatcher::flex;
  CHECK_FALSE(sorts(flex));
  stepsim::Scenario titan = s;
  titan.training.framework = stepsim::Framework::torchtitan;
  CHECK_FALSE(sorts(titan));
}

// Megatron-Core weighs each routed copy by its router probability in the experts (Megatron-LM
// 2659630721, "Memory efficient token permutation"; TEGroupedMLP.bias_act_func): the fused
// weighted SwiGLU saves its input and the fp32 probabilities, and the unpermutation sums the
// expert outputs unweighted, keeping none of them. Mixtral 8x7B at EP 1, 4096 tokens, top 2:
// 8192 routed copies. Weighted in the combine, the expert outputs are kept, 4096 · 2 · 4096 ·
// 2 bytes = 67,108,864; weighted in the experts, the probabilities, 8192 · 4 = 32,768 bytes.
// Ungated experts multiply the activation's output by the probabilities, which keeps that
// output too: 8192 · 14336 · 2 = 234,881,024 bytes.
TEST_CASE("Megatron-Core's MoE layer keeps the routing probabilities, not the expert outputs the combine sums") {
  stepsim::Scenario s = moe(mixtral_8x7b(), 1, 64);
  s.training.framework = stepsim::Framework::megatron;
  stepsim::workload::LayerShape shape = stepsim::workload::layer_shape(s);
  REQUIRE(shape.weighs_in_experts);
  using stepsim::workload::layer_activations;
  const auto in_experts = layer_activations(shape, stepsim::Recompute::none);
  shape.weighs_in_experts = false;
  const auto in_combine = layer_activations(shape, stepsim::Recompute::none);
  CHECK((in_combine - in_experts).count() == 67108864 - 32768);
  // Ungated experts of the same width.
  shape.expert_fc1_out = shape.expert_ffn;
  const auto ungated_combine = layer_activations(shape, stepsim::Recompute::none);
  shape.weighs_in_experts = true;
  const auto ungated_experts = layer_activations(shape, stepsim::Recompute::none);
  CHECK((ungated_experts - ungated_combine).count() == 32768 + 234881024 - 67108864);
  // Other frameworks weigh the outputs in the combine.
  s.training.framework = stepsim::Framework::pytorch;
  CHECK_FALSE(stepsim::workload::layer_shape(s).weighs_in_experts);
}
