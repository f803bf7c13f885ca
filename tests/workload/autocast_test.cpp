// torch.autocast over an fp32 model (PyTorch's mixed precision beside DDP): the fp32 residual
// stream it leaves between the bf16 GEMMs, by hand from PyTorch's autocast lists
// (aten/src/ATen/autocast_mode.h) and its type promotion.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "scenarios.hpp"
#include "workload/layer.hpp"
#include "workload/work.hpp"

namespace st = stepsim::testing;
using stepsim::workload::LayerWork;
using stepsim::workload::OpCost;
using stepsim::workload::Pass;
using stepsim::workload::Role;

namespace {

// A GPT of hidden 1024 at TP 1, one 2048-token sequence, in eager PyTorch under DDP: autocast,
// or (bf16_model) the model cast to bf16, whose gradients are bf16.
stepsim::Scenario pytorch(bool bf16_model, stepsim::Fusion fusion = stepsim::Fusion::eager) {
  stepsim::Scenario sc = st::scenario(st::gpt(2, 1024, 16), 1, 1);
  sc.training.framework = stepsim::Framework::pytorch;
  sc.training.fusion = fusion;
  if (bf16_model) sc.training.main_grad = stepsim::Precision::bf16;
  return sc;
}

constexpr double kAutocastRows = 2048, kAutocastHidden = 1024, kStreamElements = kAutocastRows * kAutocastHidden;

const OpCost& named(const std::vector<OpCost>& ops, const std::string& name) {
  const auto it = std::find_if(ops.begin(), ops.end(), [&](const OpCost& op) { return op.name == name; });
  REQUIRE(it != ops.end());
  return *it;
}

double op_bytes(const OpCost& op) { return static_cast<double>(op.bytes.count()); }

}  // namespace

// The embedding's table is fp32 and F.embedding is on none of autocast's lists: the lookup and
// the learned positions' add are fp32 (GPT: 4 passes of 4 bytes). LayerNorm is on its fp32 list:
// read and write 4 bytes. Each eager Linear layer reading a norm casts that fp32 output
// (cached_cast, not cached: not a leaf), 4 + 2 bytes an element, and its backward casts the
// gradient back.
TEST_CASE("Under autocast the embedding and the norms run in fp32, and the Linear layers cast their inputs") {
  const auto a = stepsim::workload::build_work(pytorch(false));
  const auto b = stepsim::workload::build_work(pytorch(true));
  CHECK(op_bytes(a.pre.forward.front()) == 4 * 4 * kStreamElements);
  CHECK(op_bytes(b.pre.forward.front()) == 4 * 2 * kStreamElements);
  CHECK(op_bytes(named(a.layer.forward, "input layernorm")) == 2 * 4 * kStreamElements);
  CHECK(op_bytes(named(b.layer.forward, "input layernorm")) == 2 * 2 * kStreamElements);
  CHECK(op_bytes(named(a.post.forward, "final layernorm")) == 2 * 4 * kStreamElements);
  // The QKV GEMM's casts: its weight (1024 x 3072), bias and input, three operators.
  const OpCost& qkv = named(a.layer.forward, "qkv bf16 cast");
  CHECK(op_bytes(qkv) == 6 * (kAutocastHidden * 3072 + 3072 + kStreamElements));
  CHECK(qkv.operators == 3);
  const OpCost& input_grad = named(a.layer.backward, "qkv dgrad fp32 cast");
  CHECK(op_bytes(input_grad) == 6 * kStreamElements);
  CHECK(input_grad.pass == Pass::backward_data);
  // The projection reads the attention's bf16 output: its weight alone.
  CHECK(op_bytes(named(a.layer.forward, "attention projection bf16 cast")) == 6 * kAutocastHidden * kAutocastHidden);
  // The model cast to bf16 casts nothing.
  for (const OpCost& op : b.layer.forward) CHECK(op.role != Role::fp8_cast);
}

// Megatron's unfused bias-dropout-add beside an fp32 stream: the bias is fp32, so the bias add
// promotes the bf16 branch (read 2, write 4), the dropout reads and writes fp32 with its 1-byte
// mask (4 + 4 + 1), the add reads two fp32 tensors and writes one (12): 27 bytes an element
// against 15. Backward: the dropout's gradient (4 + 1 + 4), the bias's sum (4), the stream's two
// gradients summed (12), and the autograd engine's cast of the branch's gradient to its bf16
// (validate_outputs, 4 + 2), a fourth kernel: 31 bytes against 13.
TEST_CASE("Under autocast the residual adds promote the bf16 branch to the fp32 stream") {
  const auto a = stepsim::workload::build_work(pytorch(false));
  const auto b = stepsim::workload::build_work(pytorch(true));
  const OpCost& residual = named(a.layer.forward, "attention residual");
  CHECK(op_bytes(residual) == 27 * kStreamElements);
  CHECK(op_bytes(named(b.layer.forward, "attention residual")) == 15 * kStreamElements);
  const OpCost& backward = named(a.layer.backward, "attention residual backward");
  CHECK(op_bytes(backward) == 31 * kStreamElements);
  CHECK(backward.operators == 4);
  CHECK(named(b.layer.backward, "attention residual backward").operators == 3);
}

// torch.compile fuses the input's cast into the norm, which reads fp32 and writes the bf16 copy
// (4 + 2); the Linear layers then cast only their weights. Eager RMSNorm on an fp32 input makes
// no casts (x.float() and type_as(x) return x): pow (8), mean (4), the product by rsqrt (8), the
// product by the fp32 weight (8), 28 bytes and 6 operators (14 backward) against 36 and 8 (16).
TEST_CASE("Under autocast a compiled norm casts for its Linear layers, and eager RMSNorm needs no casts") {
  const auto compiled = stepsim::workload::build_work(pytorch(false, stepsim::Fusion::fused));
  CHECK(op_bytes(named(compiled.layer.forward, "input layernorm")) == 6 * kStreamElements);
  CHECK(op_bytes(named(compiled.layer.forward, "qkv bf16 cast")) == 6 * (kAutocastHidden * 3072 + 3072));
  auto llama = pytorch(false);
  llama.model.mlp = stepsim::MlpKind::swiglu;
  const auto eager = stepsim::workload::build_work(llama);
  const OpCost& norm = named(eager.layer.forward, "input rmsnorm");
  CHECK(op_bytes(norm) == 28 * kStreamElements);
  CHECK(norm.operators == 6);
  CHECK(norm.backward_operators == 14);
  llama.training.main_grad = stepsim::Precision::bf16;
  const auto bf16_model = stepsim::workload::build_work(llama);
  const OpCost& bf16 = named(bf16_model.layer.forward, "input rmsnorm");
  CHECK(op_bytes(bf16) == 36 * kStreamElements);
  CHECK(bf16.operators == 8);
}

// The norms save their fp32 inputs: each layer keeps two, 2 bytes an element more than in bf16;
// the final norm one; full recompute keeps each layer's fp32 input.
TEST_CASE("Under autocast the norms' saved inputs are fp32") {
  for (const stepsim::Recompute r : {stepsim::Recompute::none, stepsim::Recompute::selective}) {
    auto a = pytorch(false), b = pytorch(true);
    a.training.recompute = b.training.recompute = r;
    const LayerWork la = stepsim::workload::build_work(a).layer, lb = stepsim::workload::build_work(b).layer;
    CHECK(la.activations.count() - lb.activations.count() == static_cast<long long>(2 * 2 * kStreamElements));
  }
  auto a = pytorch(false);
  a.training.recompute = stepsim::Recompute::full;
  CHECK(stepsim::workload::build_work(a).layer.activations.count() == static_cast<long long>(4 * kStreamElements));
  CHECK(stepsim::workload::build_work(pytorch(false)).post.activations.count() -
            stepsim::workload::build_work(pytorch(true)).post.activations.count() ==
        static_cast<long long>(2 * kStreamElements));
}
