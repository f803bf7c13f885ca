// Parameters and activation memory per GPU against Korthikanti et al. 2022's formulas.
#include <catch2/catch.hpp>

#include "scenarios.hpp"
#include "workload/work.hpp"

namespace st = stepsim::testing;
using stepsim::Recompute;

namespace {

// The 22B GPT of Korthikanti Table 4 with unfused attention, as the paper measured it.
stepsim::Scenario gpt22b(int tp, bool sp, Recompute recompute) {
  auto sc = st::scenario(st::gpt(48, 6144, 64), tp, 4);
  sc.parallel.sequence_parallel = sp;
  sc.training.recompute = recompute;
  sc.training.attention = stepsim::AttentionKind::unfused;
  return sc;
}

std::int64_t activations(int tp, bool sp, Recompute recompute) {
  return stepsim::workload::build_work(gpt22b(tp, sp, recompute)).layer.activations.count();
}

// The paper's sequence length s, micro-batch b, hidden size h and attention heads a.
constexpr std::int64_t kSeqLen = 2048, kMicroBatch = 4, kHiddenSize = 6144, kHeads = 64;
constexpr std::int64_t sbh = kSeqLen * kMicroBatch * kHiddenSize;
constexpr std::int64_t scores = kHeads * kSeqLen * kSeqLen * kMicroBatch;  // a·s²·b = sbh·a·s/h

}  // namespace

TEST_CASE("activations without parallelism are s·b·h·(34 + 5·a·s/h)") {
  CHECK(activations(1, false, Recompute::none) == 34 * sbh + 5 * scores);
}

TEST_CASE("activations with TP alone are s·b·h·(10 + 24/t + 5·a·s/(h·t))") {
  CHECK(activations(8, false, Recompute::none) == 10 * sbh + 24 * sbh / 8 + 5 * scores / 8);
}

TEST_CASE("activations with TP and sequence parallelism are s·b·h/t·(34 + 5·a·s/h)") {
  CHECK(activations(8, true, Recompute::none) == (34 * sbh + 5 * scores) / 8);
}

TEST_CASE("selective recomputation drops the 5·a·s/h term") {
  CHECK(activations(1, false, Recompute::selective) == 34 * sbh);
  CHECK(activations(8, false, Recompute::selective) == 10 * sbh + 24 * sbh / 8);
  CHECK(activations(8, true, Recompute::selective) == 34 * sbh / 8);
}

TEST_CASE("full recomputation keeps only the 2·s·b·h layer input") {
  CHECK(activations(8, false, Recompute::full) == 2 * sbh);
  CHECK(activations(8, true, Recompute::full) == 2 * sbh / 8);
}

TEST_CASE("flash attention keeps no s² scores, only a log-sum-exp per row") {
  auto sc = gpt22b(8, true, Recompute::none);
  sc.training.attention = stepsim::AttentionKind::flash;
  const auto w = stepsim::workload::build_work(sc);
  CHECK(w.layer.activations.count() == 34 * sbh / 8 + kMicroBatch * (kHeads / 8) * kSeqLen * 4);
}

TEST_CASE("one TP message is b·s·h elements") {
  CHECK(stepsim::workload::build_work(gpt22b(8, false, Recompute::none)).layer.tp_message.count() == sbh * 2);
}

TEST_CASE("a GPT layer at TP 8 holds its 12·h² weights split eight ways") {
  const auto w = stepsim::workload::build_work(gpt22b(8, false, Recompute::none));
  // Split weights and column biases, replicated row biases (2h) and LayerNorms (4h).
  const std::int64_t expected =
      12 * kHiddenSize * kHiddenSize / 8 + (3 * kHiddenSize + 4 * kHiddenSize) / 8 + 2 * kHiddenSize + 4 * kHiddenSize;
  CHECK(w.layer.param_count == expected);
  CHECK(w.layer.params.count() == 2 * expected);
}

TEST_CASE("Adam moves 34 bytes per parameter in mixed precision, 46 with gradient clipping") {
  stepsim::TrainingSpec t;
  t.precision = stepsim::Precision::bf16;
  t.grad_clip = false;
  const auto op = stepsim::workload::optimizer_step(1000000, t);
  // Gradient 4, master weight 4 + 4, m 4 + 4, v 4 + 4, and the copy of the fp32 master into
  // the bf16 model weight (Megatron's _copy_main_params_to_model_params): read 4, write 2.
  CHECK(op.bytes.count() == 34000000);
  CHECK(op.role == stepsim::workload::Role::optimizer);
  // Clipping (the default) reads the fp32 gradients for their norm (4) and scales them (4 + 4).
  t.grad_clip = true;
  CHECK(stepsim::workload::optimizer_step(1000000, t).bytes.count() == 46000000);
}

TEST_CASE("Adam with bf16 moments and main gradients moves 24 bytes per parameter, SGD 20") {
  stepsim::TrainingSpec t;
  t.precision = stepsim::Precision::bf16;
  t.optimizer_state = stepsim::Precision::bf16;
  t.main_grad = stepsim::Precision::bf16;
  t.grad_clip = false;
  // Gradient 2, master weight 4 + 4, m 2 + 2, v 2 + 2, the model copy 4 + 2.
  CHECK(stepsim::workload::optimizer_step(1000000, t).bytes.count() == 24000000);
  t.optimizer = "sgd";  // momentum only: 2 + 8 + 4 + 6
  const auto sgd = stepsim::workload::optimizer_step(1000000, t);
  CHECK(sgd.bytes.count() == 20000000);
  CHECK(sgd.name == "sgd");
}

TEST_CASE("weight-gradient GEMMs read and write the main gradient in its precision") {
  auto sc = gpt22b(8, false, Recompute::none);
  const auto fp32 = stepsim::workload::build_work(sc);
  sc.training.main_grad = stepsim::Precision::bf16;
  const auto bf16 = stepsim::workload::build_work(sc);
  REQUIRE(fp32.layer.backward.size() == bf16.layer.backward.size());
  int wgrads = 0;
  for (std::size_t i = 0; i < fp32.layer.backward.size(); ++i) {
    const auto& wide = fp32.layer.backward[i];
    const auto& narrow = bf16.layer.backward[i];
    if (wide.pass != stepsim::workload::Pass::backward_weight || wide.cls != stepsim::workload::OpClass::gemm) {
      CHECK(wide.bytes == narrow.bytes);
      continue;
    }
    ++wgrads;
    // m·n output elements, 8 bytes each in fp32 (read and write) and 4 in bf16.
    CHECK(wide.bytes.count() - narrow.bytes.count() == 4 * wide.m * wide.n);
  }
  CHECK(wgrads == 4);
}

TEST_CASE("Llama activations follow the GQA and SwiGLU widths") {
  auto sc = st::scenario(st::llama3_8b(), 8, 1);
  sc.parallel.sequence_parallel = true;
  const auto w = stepsim::workload::build_work(sc);
  constexpr std::int64_t tokens = 8192, hidden = 4096;
  // Norm and GEMM inputs on s/t rows (no dropout masks); Q, K, V, projection input,
  // SwiGLU input (gate and up) and fc2 input split by TP; log-sum-exp of 4 local heads.
  const std::int64_t replicated = tokens / 8 * hidden * 4 * 2;
  const std::int64_t split = tokens * (512 + 2 * 128 + 512 + 2 * 1792 + 1792) * 2;
  CHECK(w.layer.activations.count() == replicated + split + 4 * tokens * 4);
}

// Eager PyTorch runs `w2(F.silu(w1(x)) * w3(x))` (torchtitan's FeedForward and GroupedExperts):
// silu saves its input and the product both its operands, so silu's output is kept too, one
// ffn-wide tensor more than a fused SwiGLU keeps. Llama 3 8B at TP 8 with SP, 8,192 tokens:
// 8,192 · 14,336/8 · 2 bytes. With 8 experts of 14,336, 2 routed a token and one shared expert
// of the same width at TP 1 and EP 1: 8,192 · 2 routed copies and 8,192 shared rows of 14,336.
TEST_CASE("an eager SwiGLU keeps silu's output beside the gate and the up projection") {
  auto sc = st::scenario(st::llama3_8b(), 8, 1);
  sc.parallel.sequence_parallel = true;
  const auto layer = [&sc](stepsim::Fusion f, Recompute r = Recompute::none) {
    sc.training.fusion = f;
    sc.training.recompute = r;
    return stepsim::workload::build_work(sc).layer.activations.count();
  };
  constexpr std::int64_t tokens = 8192;
  CHECK(layer(stepsim::Fusion::eager) - layer(stepsim::Fusion::fused) == tokens * 1792 * 2);
  // Full recompute keeps the layer's input alone either way.
  CHECK(layer(stepsim::Fusion::eager, Recompute::full) == layer(stepsim::Fusion::fused, Recompute::full));
  sc = st::scenario(st::llama3_8b(), 1, 1);
  sc.model.moe.experts = 8;
  sc.model.moe.top_k = 2;
  sc.model.moe.expert_ffn_hidden = 14336;
  sc.model.moe.shared_experts = 1;
  CHECK(layer(stepsim::Fusion::eager) - layer(stepsim::Fusion::fused) == (tokens * 2 + tokens) * 14336 * 2);
}

// torchtitan's MoE.forward weighs the routed copies as
// `(routed_output.to(torch.float32) * top_scores_experts_sorted.reshape(-1, 1)).to(x.dtype)`,
// and the product saves its fp32 operand for the scores' gradient: top_k copies of each token's
// hidden state at 4 bytes, where another framework's combine keeps them at 2. A multi-head
// model (no repeated K/V) under FSDP (no autocast) at TP 1, 8,192 tokens, top 2 of 8 experts:
// 8,192 · 2 · 4,096 · (4 − 2) bytes more than the same eager layer elsewhere; compiled, the
// partitioner keeps the bf16 copy.
TEST_CASE("eager torchtitan keeps the expert outputs it weighs in fp32") {
  stepsim::ModelSpec m = st::llama3_8b();
  m.kv_heads = m.heads;
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 14336;
  auto sc = st::scenario(m, 1, 1);
  sc.data_parallel.kind = stepsim::DpKind::fsdp;
  sc.training.fusion = stepsim::Fusion::eager;
  const auto layer = [&sc](stepsim::Framework f) {
    sc.training.framework = f;
    return stepsim::workload::build_work(sc).layer.activations.count();
  };
  CHECK(layer(stepsim::Framework::torchtitan) - layer(stepsim::Framework::unspecified) == 8192LL * 2 * 4096 * 2);
  sc.training.fusion = stepsim::Fusion::fused;
  CHECK(layer(stepsim::Framework::torchtitan_compile) == layer(stepsim::Framework::unspecified));
}

TEST_CASE("under Megatron-Core in FP8 the Linear layers keep their inputs quantized") {
  // The 22B layer at TP 8 with SP and flash attention keeps 34·s·b·h/t bytes in bf16. Transformer
  // Engine's Linear layers keep the inputs they quantized for the weight gradient: the QKV and
  // fc1 inputs (s·b·h/t each) and fc2's (4·s·b·h/t) at 1 byte rather than 2, and the projection
  // its own 1-byte copy of the attention output (s·b·h/t), which the attention keeps in bf16:
  // 34 − 2 − 4 + 1 = 29.
  auto sc = gpt22b(8, true, Recompute::none);
  sc.training.attention = stepsim::AttentionKind::flash;
  sc.cluster.gpu = st::h100();
  sc.training.precision = stepsim::Precision::fp8;
  const std::int64_t lse = kMicroBatch * (kHeads / 8) * kSeqLen * 4;
  const auto kept = [&](stepsim::Framework f) {
    sc.training.framework = f;
    return stepsim::workload::build_work(sc).layer.activations.count();
  };
  CHECK(kept(stepsim::Framework::megatron) == 29 * sbh / 8 + lse);
  // torchtitan's float8 (torchao's Float8Linear) stays counted in bf16, and under DTensor's
  // sequence parallelism its attention and MLP inputs are kept as they were gathered, whole and
  // in FP8: 2 · 7/8 · s·b·h bytes more (under FSDP: its DDP would be autocast).
  sc.data_parallel.kind = stepsim::DpKind::fsdp;
  CHECK(kept(stepsim::Framework::torchtitan_compile) == (34 + 14) * sbh / 8 + lse);
  // MXFP8 adds an E8M0 scale per 32 elements to each quantized byte: 34 − 6·(2 − 33/32) + 33/32.
  sc.training.precision = stepsim::Precision::mxfp8;
  CHECK(kept(stepsim::Framework::megatron) == 34 * sbh / 8 - 153 * (sbh / 8) / 32 + lse);
}

TEST_CASE("query and key norms keep the query and key they normed, and their inverse RMS") {
  // Llama 3 8B at TP 8 with SP, 8,192 tokens: 4 local query heads and 1 K/V head of 128.
  // Transformer Engine's RMSNorm (Megatron-Core's q_layernorm and k_layernorm) saves its input,
  // made contiguous (a copy of the query reshaped across the groups, of the key sliced out of the
  // QKV output), and one fp32 inverse RMS per row, a row being one token's head: 8,192 · (512 +
  // 128) · 2 + 8,192 · (4 + 1) · 4 bytes. Full recompute keeps the layer's input alone.
  auto sc = st::scenario(st::llama3_8b(), 8, 1);
  sc.parallel.sequence_parallel = true;
  const auto plain = stepsim::workload::build_work(sc).layer.activations.count();
  sc.model.qk_norm = true;
  const auto normed = stepsim::workload::build_work(sc).layer.activations.count();
  constexpr std::int64_t tokens = 8192;
  CHECK(normed - plain == tokens * (512 + 128) * 2 + tokens * (4 + 1) * 4);
  CHECK(normed - plain == 10'649'600);
  sc.training.recompute = Recompute::full;
  const auto full = stepsim::workload::build_work(sc).layer.activations.count();
  sc.model.qk_norm = false;
  CHECK(stepsim::workload::build_work(sc).layer.activations.count() == full);
}

// Transformer Engine's parallel_cross_entropy (Megatron-Core's cross_entropy_fusion_impl "te")
// writes the gradient into the bf16 logits in its forward and saves them; its backward scales
// them in place (transformer_engine/pytorch/cross_entropy.py, triton/cross_entropy.py). Llama 3
// 70B at micro-batch 2 of 8192 tokens, TP 1: the head keeps the final norm's input and the
// head's input, 2 · 16,384 · 8192 · 2 bytes = 536,870,912, and the logits, 16,384 · 128,256 · 2
// = 4,202,692,608 bytes: 4,739,563,520 in all, and its backward adds nothing. The fused loss
// keeps the fp32 softmax, 4 bytes a logit, and casts its gradient back, 2 more.
TEST_CASE("Transformer Engine's cross entropy keeps the logits holding their gradient and adds nothing") {
  stepsim::ModelSpec m = st::llama3_70b();
  m.seq_len = 8192;
  m.vocab = 128256;
  stepsim::Scenario s = st::scenario(m, 1, 2);
  s.training.cross_entropy = stepsim::CrossEntropy::te;
  const auto te = stepsim::workload::build_work(s);
  CHECK(te.post.activations.count() == 4739563520LL);
  CHECK(te.post.backward_working.count() == 0);
  s.training.cross_entropy = stepsim::CrossEntropy::fused;
  const auto fused = stepsim::workload::build_work(s);
  CHECK(fused.post.activations.count() == 536870912LL + 2 * 4202692608LL);
  CHECK(fused.post.backward_working.count() == 4202692608LL);
}
