// The workload of a transformer layer: op order, GEMM shapes, FLOPs and parameter counts.
#include <catch2/catch.hpp>

#include <algorithm>

#include "scenarios.hpp"
#include "stepsim/error.hpp"
#include "workload/work.hpp"

namespace st = stepsim::testing;
using stepsim::Recompute;
using stepsim::workload::OpClass;
using stepsim::workload::OpCost;
using stepsim::workload::Pass;
using stepsim::workload::Role;

namespace {

// Korthikanti's formula with attention counted causal (s/(12h) where the paper has s/(6h)).
double korthikanti_model_flops(double B, double l, double s, double h, double V) {
  return 72.0 * B * l * s * h * h * (1.0 + s / (12.0 * h) + V / (12.0 * h * l));
}

double gpt_params(double l, double h, double V, double s) {
  return 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (V + s) / (12.0 * l * h));
}

double total_flops(const std::vector<OpCost>& ops, Pass pass) {
  double f = 0;
  for (const OpCost& op : ops) f += op.pass == pass ? op.flops : 0.0;
  return f;
}

const OpCost& find(const std::vector<OpCost>& ops, Role role, Pass pass = Pass::forward) {
  auto it = std::find_if(ops.begin(), ops.end(), [&](const OpCost& op) { return op.role == role && op.pass == pass; });
  REQUIRE(it != ops.end());
  return *it;
}

}  // namespace

TEST_CASE("model FLOPs of a GPT equal Korthikanti's 72·B·l·s·h² formula with causal attention") {
  struct Row {
    int layers;
    long long hidden;
    int heads;
    long long batch;
  };
  for (const Row& r :
       {Row{48, 6144, 64, 4}, Row{96, 12288, 96, 64}, Row{105, 20480, 128, 280}, Row{128, 25600, 160, 512}}) {
    const auto sc = st::scenario(st::gpt(r.layers, r.hidden, r.heads), 8, 1, r.batch);
    const auto w = stepsim::workload::build_work(sc);
    const double expected =
        korthikanti_model_flops(static_cast<double>(r.batch), r.layers, 2048.0, static_cast<double>(r.hidden), 51200.0);
    CHECK(w.model_flops_per_step == Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("model FLOPs of Llama count six FLOPs per GEMM weight per token plus causal attention") {
  const auto sc = st::scenario(st::llama3_8b(), 8, 1, 16);
  const auto w = stepsim::workload::build_work(sc);
  const double tokens = 16.0 * 8192.0;
  const double layer_weights = 4096.0 * (4096 + 2 * 1024) + 4096.0 * 4096 + 3.0 * 4096 * 14336;
  const double gemm_weights = 32 * layer_weights + 4096.0 * 128256;
  const double attention = 6.0 * tokens * 8192.0 * 32 * 4096;  // causal: half of the s² scores
  CHECK(w.model_flops_per_step == Approx(6.0 * tokens * gemm_weights + attention));
}

TEST_CASE("GPT parameter counts match 12·l·h² within one percent") {
  for (auto [l, h, a] : {std::tuple{48, 6144LL, 64}, std::tuple{96, 12288LL, 96}, std::tuple{128, 25600LL, 160}}) {
    const auto w = stepsim::workload::build_work(st::scenario(st::gpt(l, h, a), 8, 1));
    const double expected = gpt_params(l, static_cast<double>(h), 51200.0, 2048.0);
    CHECK(static_cast<double>(w.params_total) == Approx(expected).epsilon(0.01));
  }
}

TEST_CASE("Llama 3 parameter counts are 8.03 B, 70.6 B and 405.8 B") {
  auto total = [](const stepsim::ModelSpec& m) {
    return static_cast<double>(stepsim::workload::build_work(st::scenario(m, 8, 1)).params_total);
  };
  CHECK(total(st::llama3_8b()) == Approx(8.03e9).epsilon(0.01));
  CHECK(total(st::llama3_70b()) == Approx(70.6e9).epsilon(0.01));
  CHECK(total(st::llama3_405b()) == Approx(405.8e9).epsilon(0.01));
}

TEST_CASE("a GPT layer runs its forward ops in Megatron order") {
  const auto w = stepsim::workload::build_work(st::scenario(st::gpt(48, 6144, 64), 8, 4));
  std::vector<Role> roles;
  for (const OpCost& op : w.layer.forward) {
    if (roles.empty() || roles.back() != op.role) roles.push_back(op.role);
  }
  CHECK(roles == std::vector<Role>{Role::input_norm, Role::qkv, Role::attention_core, Role::attn_proj,
                                   Role::attn_residual, Role::post_norm, Role::fc1, Role::activation, Role::fc2,
                                   Role::mlp_residual});
}

TEST_CASE("Llama 3 8B at TP 8 has GQA and SwiGLU GEMM shapes") {
  const auto w = stepsim::workload::build_work(st::scenario(st::llama3_8b(), 8, 1));
  const auto& fwd = w.layer.forward;
  const OpCost& qkv = find(fwd, Role::qkv);
  CHECK(qkv.m == 8192);
  CHECK(qkv.k == 4096);
  CHECK(qkv.n == (4 + 2 * 1) * 128);  // 4 local query heads, 1 key and 1 value head
  CHECK(find(fwd, Role::attn_proj).k == 512);
  CHECK(find(fwd, Role::fc1).n == 2 * 1792);  // gate and up fused
  CHECK(find(fwd, Role::fc2).k == 1792);
  CHECK(find(fwd, Role::fc2).n == 4096);
  CHECK(find(fwd, Role::input_norm).name == "input rmsnorm");
  CHECK(find(fwd, Role::activation).name == "swiglu");
}

// Megatron-Core takes divide(num_query_groups, tp) key/value heads per rank and divide asserts
// that tp divides them; torchtitan shards wk and wv over TP as whole heads. Neither replicates.
TEST_CASE("TP splits the key and value heads and refuses fewer of them than its ranks") {
  auto model = st::llama3_8b();
  CHECK_THROWS_AS(stepsim::workload::build_work(st::scenario(model, 16, 1)), stepsim::InputError);
  model.kv_heads = 16;
  const auto w = stepsim::workload::build_work(st::scenario(model, 16, 1));
  CHECK(find(w.layer.forward, Role::qkv).n == (2 + 2 * 1) * 128);  // 2 query heads, 1 key and 1 value head
}

TEST_CASE("backward GEMMs run dgrad then wgrad with the forward's FLOPs each") {
  const auto w = stepsim::workload::build_work(st::scenario(st::gpt(48, 6144, 64), 8, 4));
  for (Role role : {Role::qkv, Role::attn_proj, Role::fc1, Role::fc2}) {
    const auto& bwd = w.layer.backward;
    const auto data = std::find_if(bwd.begin(), bwd.end(),
                                   [&](const OpCost& op) { return op.role == role && op.pass == Pass::backward_data; });
    REQUIRE(data != bwd.end());
    REQUIRE(std::next(data) != bwd.end());
    CHECK(std::next(data)->pass == Pass::backward_weight);
    CHECK(std::next(data)->role == role);
    CHECK(data->flops == find(w.layer.forward, role).flops);
    CHECK(std::next(data)->flops == data->flops);
  }
  CHECK(w.layer.backward.front().role == Role::mlp_residual);
  CHECK(w.layer.backward.back().role == Role::input_norm);
}

TEST_CASE("unfused attention core runs the full s² scores at 4·b·s²·h/t FLOPs") {
  auto sc = st::scenario(st::gpt(48, 6144, 64), 8, 4);
  sc.training.attention = stepsim::AttentionKind::unfused;
  const auto w = stepsim::workload::build_work(sc);
  double core = 0;
  for (const OpCost& op : w.layer.forward) {
    core += op.role == Role::attention_core && op.cls == OpClass::gemm ? op.flops : 0;
  }
  CHECK(core == Approx(4.0 * 4 * 2048.0 * 2048.0 * 6144.0 / 8).epsilon(1e-12));
  double linear = 0;
  for (const OpCost& op : w.layer.forward) {
    linear += op.cls == OpClass::gemm && op.role != Role::attention_core ? op.flops : 0;
  }
  CHECK(linear == Approx(24.0 * 4 * 2048 * 6144.0 * 6144.0 / 8).epsilon(1e-12));
  const double bwd = total_flops(w.layer.backward, Pass::backward_data) +
                     total_flops(w.layer.backward, Pass::backward_weight) +
                     total_flops(w.layer.backward, Pass::backward);
  CHECK(bwd == Approx(2.0 * total_flops(w.layer.forward, Pass::forward)).epsilon(1e-12));
}

TEST_CASE("recomputation re-runs nothing, the attention core, or the whole forward") {
  auto sc = st::scenario(st::gpt(48, 6144, 64), 8, 4);
  sc.training.attention = stepsim::AttentionKind::unfused;
  sc.training.recompute = Recompute::none;
  CHECK(stepsim::workload::build_work(sc).layer.recompute.empty());
  sc.training.recompute = Recompute::selective;
  const auto selective = stepsim::workload::build_work(sc).layer.recompute;
  REQUIRE(selective.size() == 4);  // QKᵀ, softmax, dropout, ·V
  for (const OpCost& op : selective) CHECK(op.role == Role::attention_core);
  sc.training.recompute = Recompute::full;
  const auto full = stepsim::workload::build_work(sc).layer;
  CHECK(full.recompute.size() == full.forward.size());
}

TEST_CASE("torchtitan's per-op recompute re-runs the K, output and up projections of Llama 3 8B") {
  // _get_custom_policy counts a block's aten.mm calls (wq, wk, wv, wo, w1, w3, w2) and saves
  // every odd-numbered one: wk, wo and w3 run again. Per token at TP 1, hidden 4096, 8 K/V
  // heads of 128: 2 · 4096 · (1024 + 4096 + 14336) FLOPs, whatever the GEMMs are called here.
  auto sc = st::scenario(st::llama3_8b(), 1, 1);
  sc.training.recompute = Recompute::selective_op;
  const auto w = stepsim::workload::build_work(sc);
  const double tokens = 8192.0;
  double gemm = 0;
  for (const OpCost& op : w.layer.recompute) gemm += op.cls == OpClass::gemm ? op.flops : 0.0;
  CHECK(gemm / tokens == Approx(2.0 * 4096 * (1024 + 4096 + 14336)).epsilon(1e-12));
  // Per token over the 32 layers, the K projection alone: 2 · 4096 · 1024 · 32 = 0.268 GFLOP.
  const auto& k = find(w.layer.recompute, Role::qkv);
  CHECK(k.flops / tokens * 32 == Approx(268435456.0).epsilon(1e-12));
}

TEST_CASE("the last stage runs a vocab-parallel LM head and its backward") {
  const auto w = stepsim::workload::build_work(st::scenario(st::gpt(48, 6144, 64), 8, 4));
  const OpCost& head = find(w.post.forward, Role::lm_head);
  CHECK(head.n == 6400);
  CHECK(head.flops == Approx(2.0 * 4 * 2048 * 6144 * 6400.0));
  CHECK(w.post.backward.front().role == Role::loss);
  CHECK(find(w.post.backward, Role::lm_head, Pass::backward_weight).flops == head.flops);
  CHECK(w.pre.forward.front().role == Role::embedding);
}

TEST_CASE("tensor parallelism that does not divide the heads is an input error") {
  const auto sc = st::scenario(st::gpt(48, 6144, 64), 3, 1);
  CHECK_THROWS_AS(stepsim::workload::build_work(sc), stepsim::InputError);
}

// Eager element-wise work (training.fusion "eager"), bytes per element by hand from the
// kernels PyTorch runs (docs/model.md): RMSNorm x.float() 2+4, pow 4+4, mean 4, times rsqrt
// 4+4, cast back 4+2, times weight 2+2 = 36; rotary 2+4, 4+4, 4+2 = 20; SwiGLU silu 2+2 and
// product 2+2+2 = 10; the loss's upcast 2+4 and log-softmax 4+4 = 14.
TEST_CASE("eager element-wise kernels move the bytes of each PyTorch operator and fused ones move each tensor once") {
  auto sc = st::scenario(st::llama3_8b(), 1, 1, 16);
  const auto fused = stepsim::workload::build_work(sc);
  sc.training.fusion = stepsim::Fusion::eager;
  const auto eager = stepsim::workload::build_work(sc);
  const double tokens = static_cast<double>(sc.training.micro_batch * sc.model.seq_len);
  const double h = 4096, qk = 4096 + 1024, ffn = 14336, vocab = 128256;
  const auto bytes = [](const OpCost& op) { return static_cast<double>(op.bytes.count()); };
  CHECK(bytes(find(fused.layer.forward, Role::input_norm)) == Approx(tokens * h * 4));
  CHECK(bytes(find(eager.layer.forward, Role::input_norm)) == Approx(tokens * h * 36));
  CHECK(bytes(find(fused.layer.forward, Role::rotary)) == Approx(tokens * qk * 4));
  CHECK(bytes(find(eager.layer.forward, Role::rotary)) == Approx(tokens * qk * 20));
  CHECK(bytes(find(fused.layer.forward, Role::activation)) == Approx(tokens * ffn * 6));
  CHECK(bytes(find(eager.layer.forward, Role::activation)) == Approx(tokens * ffn * 10));
  CHECK(bytes(find(fused.post.forward, Role::loss)) == Approx(tokens * vocab * 6));
  CHECK(bytes(find(eager.post.forward, Role::loss)) == Approx(tokens * vocab * 14));
  // The residual add of a Llama layer is one kernel either way; GEMMs do not change.
  CHECK(bytes(find(eager.layer.forward, Role::attn_residual)) == bytes(find(fused.layer.forward, Role::attn_residual)));
  CHECK(find(eager.layer.forward, Role::fc1).flops == find(fused.layer.forward, Role::fc1).flops);
  // Backward kernels move twice the forward's bytes.
  CHECK(bytes(find(eager.layer.backward, Role::rotary, Pass::backward)) == Approx(2 * tokens * qk * 20));
}

// The PyTorch operators the host issues for one Llama layer, counted by hand from the eager
// code (docs/model.md, "The host"): forward the RMSNorm's x.float(), pow, mean, + eps, rsqrt,
// product, type_as and weight product (8, twice), the rotary embedding's x.float(), complex
// product and type_as on the queries and on the keys (6), SwiGLU's silu and product (2), and one
// operator each for the QKV, attention, projection, fc1 and fc2 and the two residual adds (7):
// 16 + 6 + 2 + 7 = 31, where a fused layer issues one per op, 11. Backward autograd's 16 per
// RMSNorm, 4 per rotary tensor, 3 for SwiGLU, a dgrad and a wgrad per GEMM (8), one for the
// attention and one per residual add (3): 32 + 8 + 3 + 8 + 3 = 54, against 15 fused. The loss:
// the upcast, log_softmax and nll_loss (3); backward the seed gradient, nll_loss_backward's
// zeroed gradient and kernel, log_softmax's backward and the cast back (5).
TEST_CASE("An eager Llama layer issues each PyTorch operator of its norms, rotary embedding and SwiGLU") {
  auto sc = st::scenario(st::llama3_8b(), 1, 1, 16);
  const auto fused = stepsim::workload::build_work(sc);
  sc.training.fusion = stepsim::Fusion::eager;
  const auto eager = stepsim::workload::build_work(sc);
  const auto operators = [](const std::vector<OpCost>& ops) {
    int n = 0;
    for (const OpCost& op : ops) n += op.operators;
    return n;
  };
  CHECK(fused.layer.forward.size() == 11);
  CHECK(operators(fused.layer.forward) == 11);
  CHECK(operators(eager.layer.forward) == 31);
  CHECK(operators(fused.layer.backward) == 15);
  CHECK(operators(eager.layer.backward) == 54);
  CHECK(find(eager.layer.forward, Role::input_norm).operators == 8);
  CHECK(find(eager.layer.backward, Role::input_norm, Pass::backward).operators == 16);
  CHECK(find(eager.post.forward, Role::final_norm).operators == 8);
  CHECK(find(eager.post.forward, Role::loss).operators == 3);
  CHECK(find(eager.post.backward, Role::loss, Pass::backward).operators == 5);
  CHECK(find(fused.post.forward, Role::loss).operators == 1);
  // The same chains re-run by full recomputation issue the same operators.
  sc.training.recompute = Recompute::full;
  CHECK(operators(stepsim::workload::build_work(sc).layer.recompute) == 31);
}

TEST_CASE("GPT layers have no rotary embedding and their LayerNorm is one kernel in eager mode too") {
  auto sc = st::scenario(st::gpt(24, 2048, 16), 1, 1);
  sc.training.fusion = stepsim::Fusion::eager;
  const auto w = stepsim::workload::build_work(sc);
  CHECK(std::none_of(w.layer.forward.begin(), w.layer.forward.end(),
                     [](const OpCost& op) { return op.role == Role::rotary; }));
  const double rows = static_cast<double>(sc.training.micro_batch * sc.model.seq_len);
  CHECK(static_cast<double>(find(w.layer.forward, Role::input_norm).bytes.count()) == Approx(rows * 2048 * 4));
}

// An eager GPT layer, counted by hand from Megatron's unfused bias-dropout-add and PyTorch's
// autograd (docs/model.md, "Element-wise work"): each residual is three operators forward
// (bias add, dropout, add: 2 + 2+2+1 + 2+2+2 = 15 bytes an element at 2-byte activations) and
// three backward (dropout's gradient times the mask 2+1+2, the bias gradient's sum over the
// rows 2, the residual stream's two gradients summed 2+2+2: 13 bytes); the qkv and fc1 biases'
// gradients are one sum each over their output gradient (2 bytes an element). Forward: two
// LayerNorms, qkv, attention, projection, fc1, GeLU, fc2 (8) and the residuals (6): 14.
// Backward: a dgrad and a wgrad per GEMM (8), the LayerNorms, attention and GeLU (4), the two
// bias sums (2) and the residuals (6): 20.
TEST_CASE("An eager GPT residual issues its three operators and its biases' gradients are summed apart") {
  auto sc = st::scenario(st::gpt(24, 2048, 16), 1, 1);
  sc.training.fusion = stepsim::Fusion::eager;
  const auto w = stepsim::workload::build_work(sc);
  const auto operators = [](const std::vector<OpCost>& ops) {
    int n = 0;
    for (const OpCost& op : ops) n += op.operators;
    return n;
  };
  CHECK(operators(w.layer.forward) == 14);
  CHECK(operators(w.layer.backward) == 20);
  const double rows = static_cast<double>(sc.training.micro_batch * sc.model.seq_len);
  const auto bytes = [](const OpCost& op) { return static_cast<double>(op.bytes.count()); };
  for (const Role role : {Role::attn_residual, Role::mlp_residual}) {
    CHECK(find(w.layer.forward, role).operators == 3);
    CHECK(bytes(find(w.layer.forward, role)) == Approx(rows * 2048 * 15));
    CHECK(find(w.layer.backward, role, Pass::backward).operators == 3);
    CHECK(bytes(find(w.layer.backward, role, Pass::backward)) == Approx(rows * 2048 * 13));
  }
  CHECK(bytes(find(w.layer.backward, Role::qkv, Pass::backward)) == Approx(rows * 3 * 2048 * 2));
  CHECK(bytes(find(w.layer.backward, Role::fc1, Pass::backward)) == Approx(rows * 4 * 2048 * 2));
  // Fused, the residual is one kernel each way and no bias gradient runs apart.
  sc.training.fusion = stepsim::Fusion::fused;
  const auto fused = stepsim::workload::build_work(sc);
  CHECK(operators(fused.layer.forward) == 10);
  CHECK(operators(fused.layer.backward) == 14);
}

// Megatron's vocab-parallel cross entropy without --cross-entropy-loss-fusion, per logit:
// logits.float() 2+4, max 4, subtract 4+4, exp 4+4, sum 4, divide 4+4 = 38 forward; the
// backward scales the saved softmax 4+4 and casts it back 4+2 = 14.
TEST_CASE("the unfused cross entropy reads and writes the fp32 logits once per kernel") {
  auto sc = st::scenario(st::gpt(24, 2048, 16), 1, 1);
  const auto fused = stepsim::workload::build_work(sc);
  sc.training.cross_entropy = stepsim::CrossEntropy::unfused;
  const auto unfused = stepsim::workload::build_work(sc);
  const double logits = static_cast<double>(sc.training.micro_batch * sc.model.seq_len * sc.model.vocab);
  const auto bytes = [](const OpCost& op) { return static_cast<double>(op.bytes.count()); };
  CHECK(bytes(find(fused.post.forward, Role::loss)) == Approx(logits * 6));
  CHECK(bytes(find(fused.post.backward, Role::loss, Pass::backward)) == Approx(logits * 12));
  CHECK(bytes(find(unfused.post.forward, Role::loss)) == Approx(logits * 38));
  CHECK(bytes(find(unfused.post.backward, Role::loss, Pass::backward)) == Approx(logits * 14));
}

// Transformer Engine's parallel_cross_entropy: the forward reads the bf16 logits twice (online
// max and sum, then the gradient) and writes the gradient over them, 2 + 2 + 2 = 6 bytes a
// logit; the backward multiplies that gradient in place by each token's loss gradient
// (element_mul_kernel): read 2, write 2 = 4, against the fused loss's 12 and Megatron's 14.
TEST_CASE("Transformer Engine's cross entropy backward reads and writes the logits once") {
  auto sc = st::scenario(st::gpt(24, 2048, 16), 1, 1);
  sc.training.cross_entropy = stepsim::CrossEntropy::te;
  const auto te = stepsim::workload::build_work(sc);
  const double logits = static_cast<double>(sc.training.micro_batch * sc.model.seq_len * sc.model.vocab);
  const auto bytes = [](const OpCost& op) { return static_cast<double>(op.bytes.count()); };
  CHECK(bytes(find(te.post.forward, Role::loss)) == Approx(logits * 6));
  CHECK(bytes(find(te.post.backward, Role::loss, Pass::backward)) == Approx(logits * 4));
}

// PyTorch's embedding_dense_backward_cuda returns a dense gradient of the whole table, zeroed
// (at::zeros) before the tokens' rows are summed into it; Megatron-Core's DDP hook then adds it
// into the FP32 main gradient (param.main_grad.add_(param.grad.data)): read it, read and
// write the main gradient. The learned positions' table likewise.
TEST_CASE("the embedding's backward zeroes its whole table's gradient and Megatron adds it into the main gradient") {
  auto sc = st::scenario(st::gpt(24, 2048, 16), 2, 1);
  const auto bytes = [&] {
    const auto w = stepsim::workload::build_work(sc);
    return static_cast<double>(find(w.pre.backward, Role::embedding, Pass::backward).bytes.count());
  };
  const double tokens = 2048.0;
  const double table = (51200.0 / 2 + 2048.0) * 2048.0;     // the local vocabulary and the positions
  const double lookup = 2.0 * tokens * 2048.0 * 4.0 * 2.0;  // twice the forward's bytes
  sc.training.framework = stepsim::Framework::torchtitan;
  sc.data_parallel.kind = stepsim::DpKind::fsdp;  // bf16 parameters
  CHECK(bytes() == Approx(lookup + table * 2.0));
  sc.training.framework = stepsim::Framework::megatron;
  CHECK(bytes() == Approx(lookup + table * (2.0 + 2.0 + 4.0 + 4.0)));
  // Under autocast (torchtitan's DDP) the table, its gradient and the lookup are fp32.
  sc.training.framework = stepsim::Framework::torchtitan;
  sc.data_parallel.kind = stepsim::DpKind::ddp;
  CHECK(bytes() == Approx(2.0 * lookup + table * 4.0));
}
