// Low-precision training as Transformer Engine runs it: which GEMMs run in FP8, MXFP8 or NVFP4,
// the bytes their operands and quantization kernels move, and the peak each runs at.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "hardware/gpu_model.hpp"
#include "scenarios.hpp"
#include "workload/work.hpp"

namespace st = stepsim::testing;
using stepsim::FlopRate;
using stepsim::Fp8Scaling;
using stepsim::GpuArch;
using stepsim::Precision;
using stepsim::hardware::GpuModel;
using stepsim::workload::OpClass;
using stepsim::workload::OpCost;
using stepsim::workload::Pass;
using stepsim::workload::Role;

namespace {

// Llama 3 8B at TP 1, one 8192-token sequence, in `precision`.
stepsim::workload::ModelWork llama(Precision precision, Fp8Scaling scaling = Fp8Scaling::delayed) {
  stepsim::Scenario sc = st::scenario(st::llama3_8b(), 1, 1);
  sc.training.precision = precision;
  sc.training.fp8_scaling = scaling;
  return stepsim::workload::build_work(sc);
}

const OpCost& find_op(const std::vector<OpCost>& ops, Role role, Pass pass) {
  auto it = std::find_if(ops.begin(), ops.end(), [&](const OpCost& op) { return op.role == role && op.pass == pass; });
  REQUIRE(it != ops.end());
  return *it;
}

// The quantization kernel before the GEMM of `role` in `pass`.
const OpCost& cast(const stepsim::workload::ModelWork& w, Role role, Pass pass) {
  const auto& ops = pass == Pass::forward ? w.layer.forward : w.layer.backward;
  const auto gemm = std::find_if(ops.begin(), ops.end(), [&](const OpCost& op) {
    return op.role == role && op.pass == pass && op.cls == OpClass::gemm;
  });
  REQUIRE(gemm != ops.begin());
  REQUIRE(std::prev(gemm)->role == Role::fp8_cast);
  return *std::prev(gemm);
}

constexpr double kTokens = 8192, kHidden = 4096, kFc1 = 2 * 14336;  // fc1: gate and up fused

}  // namespace

TEST_CASE("NVFP4 and MXFP8 run forward, dgrad and wgrad of every Linear layer in their format, the rest in BF16") {
  for (Precision p : {Precision::mxfp8, Precision::nvfp4}) {
    const auto w = llama(p);
    for (Role role : {Role::qkv, Role::attn_proj, Role::fc1, Role::fc2}) {
      CHECK(find_op(w.layer.forward, role, Pass::forward).fp8);
      CHECK(find_op(w.layer.backward, role, Pass::backward_data).fp8);
      CHECK(find_op(w.layer.backward, role, Pass::backward_weight).fp8);
    }
    for (const auto& op : w.layer.forward) {
      if (op.cls == OpClass::attention) CHECK_FALSE(op.fp8);
    }
    for (const auto& op : w.post.forward) CHECK_FALSE(op.fp8);  // the LM head stays BF16
  }
}

// A BF16 tensor read for its amax is 2 bytes per element more than delayed scaling's cast,
// which takes the amax as it casts (fc1's activation and weight in forward, its output
// gradient in dgrad).
TEST_CASE("FP8 current scaling reads each quantized tensor once more than delayed scaling, for its amax") {
  const auto delayed = llama(Precision::fp8);
  const auto current = llama(Precision::fp8, Fp8Scaling::current);
  CHECK((cast(current, Role::fc1, Pass::forward).bytes - cast(delayed, Role::fc1, Pass::forward).bytes).as_double() ==
        Approx(2.0 * (kTokens * kHidden + kHidden * kFc1)));
  CHECK((cast(current, Role::fc1, Pass::backward_data).bytes - cast(delayed, Role::fc1, Pass::backward_data).bytes)
            .as_double() == Approx(2.0 * kTokens * kFc1));
  CHECK(find_op(current.layer.forward, Role::fc1, Pass::forward).bytes ==
        find_op(delayed.layer.forward, Role::fc1, Pass::forward).bytes);
}

// Transformer Engine's FP8 GEMMs take operands in any layout from compute capability 10.0
// (nvte_is_non_tn_fp8_gemm_supported), so on Blackwell Float8Quantizer and
// Float8CurrentScalingQuantizer write the row-wise copy alone (transformer_engine/pytorch/csrc/
// quantizer.cpp: with_transpose = columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()):
// fc1's forward cast reads its BF16 activation and weight (2 bytes, once more for current
// scaling's amax) and writes 1 byte of each, against Hopper's 2 (cast and transpose).
// torchao (torchtitan) transposes on every GPU.
TEST_CASE("On Blackwell Transformer Engine's per-tensor FP8 casts write no transposed copy") {
  const double forward = kTokens * kHidden + kHidden * kFc1;
  for (Fp8Scaling scaling : {Fp8Scaling::delayed, Fp8Scaling::current}) {
    const double read = scaling == Fp8Scaling::current ? 4.0 : 2.0;
    stepsim::Scenario sc = st::scenario(st::llama3_8b(), 1, 1);
    sc.training.precision = Precision::fp8;
    sc.training.fp8_scaling = scaling;
    const auto hopper = stepsim::workload::build_work(sc);
    sc.cluster.gpu.arch = GpuArch::blackwell;
    const auto blackwell = stepsim::workload::build_work(sc);
    sc.training.framework = stepsim::Framework::torchtitan_compile;
    const auto torchao = stepsim::workload::build_work(sc);
    CHECK(cast(hopper, Role::fc1, Pass::forward).bytes.as_double() == Approx(forward * (read + 2.0)));
    CHECK(cast(blackwell, Role::fc1, Pass::forward).bytes.as_double() == Approx(forward * (read + 1.0)));
    CHECK(cast(blackwell, Role::fc1, Pass::backward_data).bytes.as_double() == Approx(kTokens * kFc1 * (read + 1.0)));
    CHECK(cast(torchao, Role::fc1, Pass::forward).bytes.as_double() == Approx(forward * (read + 2.0)));
  }
}

// MXFP8 operands: FP8 values plus one E8M0 scale byte per 32; the cast needs no amax pass and
// writes both the rowwise and the columnwise copy with their scales.
TEST_CASE("MXFP8 GEMMs read a scale byte per 32 elements and their cast writes two scaled copies") {
  const auto fp8 = llama(Precision::fp8);
  const auto mx = llama(Precision::mxfp8);
  const double operands = kTokens * kHidden + kHidden * kFc1;
  CHECK((find_op(mx.layer.forward, Role::fc1, Pass::forward).bytes -
         find_op(fp8.layer.forward, Role::fc1, Pass::forward).bytes)
            .as_double() == Approx(operands / 32.0));
  CHECK(cast(mx, Role::fc1, Pass::forward).bytes.as_double() == Approx(operands * (2.0 + 2.0 * (1.0 + 1.0 / 32.0))));
}

// NVFP4 (NVFP4BlockScaling): activations and gradients get an amax pass, a rowwise cast and a
// columnwise cast through the random Hadamard transform (three reads of 2 bytes, two copies of
// half a byte plus an E4M3 scale per 16); weights, 2-D blocks of 16×16, an amax pass and one
// cast writing both copies (two reads, two copies of half a byte plus a scale per 256).
TEST_CASE("NVFP4 quantization moves an amax pass and two scaled 4-bit copies per tensor") {
  const auto w = llama(Precision::nvfp4);
  const double activation = kTokens * kHidden * (3.0 * 2.0 + 2.0 * (0.5 + 1.0 / 16.0));
  const double weight = kHidden * kFc1 * (2.0 * 2.0 + 2.0 * (0.5 + 1.0 / 256.0));
  CHECK(cast(w, Role::fc1, Pass::forward).bytes.as_double() == Approx(activation + weight));
  CHECK(cast(w, Role::fc1, Pass::backward_data).bytes.as_double() ==
        Approx(kTokens * kFc1 * (3.0 * 2.0 + 2.0 * (0.5 + 1.0 / 16.0))));
  // Operands: half a byte and a sixteenth per element; the output stays BF16.
  const OpCost& fc1 = find_op(w.layer.forward, Role::fc1, Pass::forward);
  CHECK(fc1.bytes.as_double() ==
        Approx((kTokens * kHidden + kHidden * kFc1) * (0.5 + 1.0 / 16.0) + kTokens * kFc1 * 2.0));
}

// A compute-bound GEMM's time is FLOPs / (peak × efficiency): NVFP4 at the FP4 peak, MXFP8 at
// the FP8 one. With the FP4 peak twice FP8's and equal maxima, the work takes half the time and
// the fixed time per GEMM the same: (F + F½·9000/989) / (9000 TFLOPS · max) against
// (F + F½·4500/989) / (4500 TFLOPS · max), F½ given at the 16-bit rate (989 TFLOPS here) and
// scaled by each format's peak over it.
TEST_CASE("NVFP4 GEMMs run at the FP4 peak and MXFP8 GEMMs at the FP8 peak") {
  stepsim::GpuSpec gpu = st::h100();
  gpu.arch = GpuArch::blackwell;
  gpu.flops.fp8 = FlopRate::tflops(4500);
  gpu.flops.fp4 = FlopRate::tflops(9000);
  gpu.efficiency.fp4_gemm_max = gpu.efficiency.fp8_gemm_max;
  const GpuModel fp4(gpu, Precision::nvfp4);
  const GpuModel mx(gpu, Precision::mxfp8);
  const GpuModel fp8(gpu, Precision::fp8);
  const OpCost nv_fc1 = find_op(llama(Precision::nvfp4).layer.forward, Role::fc1, Pass::forward);
  const OpCost mx_fc1 = find_op(llama(Precision::mxfp8).layer.forward, Role::fc1, Pass::forward);
  const double f = nv_fc1.flops;
  const double half = gpu.efficiency.gemm_half_flops;
  CHECK(fp4.compute_time(nv_fc1).seconds() ==
        Approx(0.5 * fp8.compute_time(nv_fc1).seconds() * (f + half * 9000.0 / 989.0) / (f + half * 4500.0 / 989.0)));
  CHECK(mx.compute_time(mx_fc1).seconds() == Approx(fp8.compute_time(mx_fc1).seconds()));
  CHECK(fp4.dtype(nv_fc1) == Precision::nvfp4);
  CHECK(mx.dtype(mx_fc1) == Precision::mxfp8);
  CHECK(fp4.peak().flops_per_s() == Approx(9000e12));
}

// Megatron-Core marks each chunk's first micro-batch (set_is_first_microbatch) and Transformer
// Engine quantizes the weights then and reuses the copies until the optimizer step: fc1's
// forward cast moves the activation's 8192 x 4096 elements on every micro-batch, and the
// 4096 x 28672 weight's only on the first (current scaling: 2 + 2 + 1 + 1 bytes each).
TEST_CASE("Under Megatron-Core the weights are quantized on a step's first micro-batch only") {
  stepsim::Scenario sc = st::scenario(st::llama3_8b(), 1, 1);
  sc.training.precision = Precision::fp8;
  sc.training.fp8_scaling = Fp8Scaling::current;
  for (stepsim::Framework f : {stepsim::Framework::megatron, stepsim::Framework::nemo}) {
    sc.training.framework = f;
    const auto w = stepsim::workload::build_work(sc);
    REQUIRE(w.layer.first_forward.size() == w.layer.forward.size());
    const auto first_cast = std::prev(std::find_if(w.layer.first_forward.begin(), w.layer.first_forward.end(),
                                                   [](const OpCost& op) { return op.role == Role::fc1; }));
    const auto cast_op = std::prev(std::find_if(w.layer.forward.begin(), w.layer.forward.end(),
                                                [](const OpCost& op) { return op.role == Role::fc1; }));
    REQUIRE(first_cast->role == Role::fp8_cast);
    REQUIRE(cast_op->role == Role::fp8_cast);
    CHECK(first_cast->bytes.as_double() == Approx(6.0 * (kTokens * kHidden + kHidden * kFc1)));
    CHECK(cast_op->bytes.as_double() == Approx(6.0 * kTokens * kHidden));
  }
  // torchao's Float8Linear casts the weight on every forward: one forward for every micro-batch.
  sc.training.framework = stepsim::Framework::torchtitan_compile;
  CHECK(stepsim::workload::build_work(sc).layer.first_forward.empty());
}
