// The roofline GPU model: GEMM efficiency by size, memory-bound element-wise kernels, floors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "hardware/gpu_model.hpp"
#include "io/scenario_loader.hpp"
#include "scenarios.hpp"
#include "stepsim/error.hpp"
#include "workload/work.hpp"

namespace st = stepsim::testing;
using stepsim::Bytes;
using stepsim::Precision;
using stepsim::Time;
using stepsim::hardware::GpuModel;
using stepsim::workload::OpClass;
using stepsim::workload::OpCost;

namespace {

OpCost square_gemm(long long n) {
  OpCost op;
  op.cls = OpClass::gemm;
  op.m = op.n = op.k = n;
  op.flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  op.bytes = Bytes(3 * n * n * 2);
  return op;
}

double achieved_tflops(const GpuModel& gpu, const OpCost& op) { return op.flops / gpu.duration(op).seconds() * 1e-12; }

}  // namespace

TEST_CASE("a large GEMM reaches the measured 80% of H100's bf16 peak") {
  const GpuModel gpu(st::h100(), Precision::bf16);
  CHECK(achieved_tflops(gpu, square_gemm(8192)) == Approx(790).epsilon(0.02));
}

TEST_CASE("a large GEMM reaches the measured 82% of A100's bf16 peak") {
  const GpuModel gpu(st::a100(), Precision::bf16);
  CHECK(achieved_tflops(gpu, square_gemm(8192)) == Approx(0.82 * 312).epsilon(0.01));
}

TEST_CASE("GEMM efficiency rises with size and small GEMMs fall far below the peak") {
  const GpuModel gpu(st::a100(), Precision::bf16);
  double previous = 0;
  for (long long n = 64; n <= 16384; n *= 2) {
    const double eff = gpu.efficiency(square_gemm(n));
    CHECK(eff > previous);
    CHECK(eff <= st::a100().efficiency.gemm_max);
    previous = eff;
  }
  CHECK(achieved_tflops(gpu, square_gemm(512)) < 0.3 * 312);
}

// Megatron-Core's grouped GEMM runs the local experts' GEMMs in one kernel; each is a GEMM
// of its expert's tokens, and small experts sit low on the size curve.
TEST_CASE("a grouped GEMM runs each of its experts at the efficiency of that expert's GEMM") {
  const GpuModel gpu(st::h100(), Precision::bf16);
  OpCost grouped = square_gemm(4096);
  grouped.groups = 4;
  const double per_expert = grouped.flops / 4;
  const stepsim::GpuEfficiency& e = st::h100().efficiency;
  CHECK(gpu.efficiency(grouped) == Approx(e.gemm_max * per_expert / (per_expert + e.gemm_half_flops)));
  CHECK(gpu.efficiency(grouped) < gpu.efficiency(square_gemm(4096)));
  // One group is the plain GEMM.
  grouped.groups = 1;
  CHECK(gpu.efficiency(grouped) == gpu.efficiency(square_gemm(4096)));
}

namespace {

OpCost gemm(long long m, long long n, long long k) {
  OpCost op = square_gemm(1);
  op.m = m;
  op.n = n;
  op.k = k;
  op.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return op;
}

stepsim::GpuSpec h100_with_depth() {
  stepsim::GpuSpec g = st::h100();
  g.efficiency.gemm_half_k = 350;
  return g;
}

}  // namespace

// A fixed time per output tile beside its K loop: K / (K + gemm_half_k), by hand.
TEST_CASE("a GEMM's efficiency carries its inner dimension's share K / (K + gemm_half_k)") {
  const GpuModel plain(st::h100(), Precision::bf16);
  const GpuModel deep(h100_with_depth(), Precision::bf16);
  const OpCost op = gemm(4096, 4096, 1024);
  CHECK(deep.depth_share(op) == Approx(1024.0 / 1374.0));
  CHECK(deep.efficiency(op) == Approx(plain.efficiency(op) * 1024.0 / 1374.0));
  // Without the key there is no such term.
  CHECK(plain.depth_share(op) == 1.0);
  // A grouped weight gradient reduces over each expert's tokens: K is one expert's.
  OpCost wgrad = gemm(2048, 1536, 4 * 1024);
  wgrad.pass = stepsim::workload::Pass::backward_weight;
  wgrad.groups = 4;
  CHECK(deep.depth_share(wgrad) == Approx(1024.0 / 1374.0));
  // The unfused attention core's batched GEMMs are left out.
  OpCost scores = gemm(4096, 4096, 128);
  scores.role = stepsim::workload::Role::attention_core;
  CHECK(deep.depth_share(scores) == 1.0);
  // An FP8 GEMM does the K loop at twice the rate: the same fixed time is 700 of its elements.
  const GpuModel fp8(h100_with_depth(), Precision::fp8);
  OpCost low = op;
  low.fp8 = true;
  CHECK(fp8.depth_share(low) == Approx(1024.0 / (1024.0 + 350.0 * 1979.0 / 989.0)));
}

namespace {

struct TableRow {
  std::string sm, dtype;
  long long m = 0, n = 0, k = 0;
  double tflops = 0;
};

// tests/data/gemm/xla-matmul-table.csv: OpenXLA's measured GEMM table, the rows the presets'
// GEMM curves were fitted to (its header says which and why).
std::vector<TableRow> read_xla_table() {
  std::ifstream in(std::string(STEPSIM_TEST_DATA) + "/gemm/xla-matmul-table.csv");
  REQUIRE(in);
  std::vector<TableRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("sm,", 0) == 0) continue;
    std::istringstream fields(line);
    TableRow r;
    std::string m, n, k, tflops;
    std::getline(fields, r.sm, ',');
    std::getline(fields, r.dtype, ',');
    std::getline(fields, m, ',');
    std::getline(fields, n, ',');
    std::getline(fields, k, ',');
    std::getline(fields, tflops, ',');
    r.m = std::stoll(m);
    r.n = std::stoll(n);
    r.k = std::stoll(k);
    r.tflops = std::stod(tflops);
    rows.push_back(r);
  }
  return rows;
}

const std::vector<TableRow>& xla_table() {
  static const std::vector<TableRow> rows = read_xla_table();
  return rows;
}

struct Residual {
  double rms = 0, worst = 0;
  std::size_t rows = 0;
};

// The model's compute rate for each row of one GPU beside the measured one, with one scale per
// precision taken out (the geometric mean of measured over model: the curve's shape is what the
// table fits, gemm_max is set by a whole step): RMS and worst of scale × model / measured − 1.
Residual table_residual(const stepsim::GpuSpec& gpu, const std::string& sm) {
  std::vector<double> errors;
  for (const char* dtype : {"bf16", "fp8"}) {
    const GpuModel model(gpu, std::string(dtype) == "fp8" ? Precision::fp8 : Precision::bf16);
    std::vector<std::pair<double, double>> pairs;  // model, measured
    double log_scale = 0;
    for (const TableRow& r : xla_table()) {
      if (r.sm != sm || r.dtype != dtype) continue;
      OpCost op = gemm(r.m, r.n, r.k);
      op.fp8 = r.dtype == "fp8";
      pairs.emplace_back(op.flops / model.compute_time(op).seconds() * 1e-12, r.tflops);
      log_scale += std::log(r.tflops / pairs.back().first);
    }
    const double scale = std::exp(log_scale / static_cast<double>(std::max<std::size_t>(pairs.size(), 1)));
    for (const auto& [modelled, measured] : pairs) errors.push_back(scale * modelled / measured - 1);
  }
  Residual out;
  out.rows = errors.size();
  for (double e : errors) {
    out.rms += e * e;
    out.worst = std::max(out.worst, std::abs(e));
  }
  out.rms = std::sqrt(out.rms / static_cast<double>(std::max<std::size_t>(errors.size(), 1)));
  return out;
}

// The GPU a cluster preset carries, as a scenario file naming it loads it.
stepsim::GpuSpec preset_gpu(const std::string& cluster) {
  return stepsim::io::load_scenario_text(
             R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8}, "cluster": ")" + cluster + R"("})",
             "preset.json", {})
      .cluster.gpu;
}

}  // namespace

// The GEMM curves of the presets (gemm_half_flops, gemm_half_k) against the measured rows they
// were fitted to: the H100's (4e9 FLOPs, 70) to the 45 BF16 rows of sm_90, the B200's (7.8e9,
// 40) to the 90 BF16 and FP8 rows of sm_100 (a low-precision GEMM's half points at its rate).
// Not a validation, being the fit's own data: the test holds the residual docs/model.md
// states, so that it fails when the curve's form or a preset's half points drift.
TEST_CASE("the presets' GEMM size and depth curves fit the measured XLA rows within the residual stated") {
  struct Case {
    const char* cluster;
    const char* sm;
    std::size_t rows;
    double rms, worst;
  };
  const Case cases[] = {{"dgx-h100-ndr", "sm_90", 45, 0.0489, 0.1339}, {"dgx-b200", "sm_100", 90, 0.0804, 0.2560}};
  for (const Case& c : cases) {
    const Residual r = table_residual(preset_gpu(c.cluster), c.sm);
    INFO(c.cluster);
    CHECK(r.rows == c.rows);
    CHECK(r.rms <= c.rms);
    CHECK(r.worst <= c.worst);
  }
  // The curve they replaced (6e9 FLOPs and 350 elements, from DeepGEMM's block-scaled FP8
  // rows) misses the sm_90 rows five times as far (26.4 % RMS).
  stepsim::GpuSpec old = preset_gpu("dgx-h100-ndr");
  old.efficiency.gemm_half_flops = 6e9;
  old.efficiency.gemm_half_k = 350;
  CHECK(table_residual(old, "sm_90").rms > 0.25);
}

// A fixed time t0 per GEMM in front of its work: at the 16-bit rate it is gemm_half_flops
// FLOPs, at FP8's twice the rate twice as many. By hand, on the test H100 (6e9 FLOPs): a BF16
// GEMM of 6e9 FLOPs runs at half of gemm_max, an FP8 one of 12e9 at half of fp8_gemm_max.
TEST_CASE("a low-precision GEMM's size half point is the same time, so its FLOPs scale with its peak") {
  stepsim::GpuSpec spec = st::h100();
  spec.efficiency.fp8_gemm_max = 0.6;
  const GpuModel bf16(spec, Precision::bf16);
  const GpuModel fp8(spec, Precision::fp8);
  OpCost half = gemm(1000, 1000, 3000);  // 6e9 FLOPs
  CHECK(bf16.efficiency(half) == Approx(0.5 * spec.efficiency.gemm_max));
  OpCost low = gemm(1000, 1000, 6000);  // 12e9 FLOPs
  low.fp8 = true;
  CHECK(fp8.rate_ratio(low) == Approx(1979.0 / 989.0));
  CHECK(fp8.efficiency(low) == Approx(0.6 * 12e9 / (12e9 + 6e9 * 1979.0 / 989.0)));
  // With equal maxima the FP8 GEMM takes its work at the FP8 rate plus the BF16 GEMM's fixed
  // time t0 = F½ / (989 TFLOPS · max), not half of it.
  spec.efficiency.fp8_gemm_max = spec.efficiency.gemm_max;
  const GpuModel fp8_same(spec, Precision::fp8);
  const double t0_bf16 = 6e9 / (989e12 * spec.efficiency.gemm_max);
  CHECK(fp8_same.compute_time(low).seconds() == Approx(12e9 / (1979e12 * spec.efficiency.gemm_max) + t0_bf16));
}

// The same fixed time t0 in front of a slower format's work is fewer FLOPs: TF32's and FP32's
// half points scale down with their peaks as FP8's scale up. By hand, fc1 of the eager GPT-3
// Small example on the H100 preset (512 tokens, 768 → 3072: F = 2.416e9, K = 768; gemm_max
// 0.681, F½ 4e9 and K½ 70 at the 989 TFLOPS BF16 rate): at TF32 (494.5 TFLOPS, r = 0.5)
// 0.681 · 2.416/(2.416 + 2) · 768/(768 + 35) of 494.5 TFLOPS, 13.7 us; at FP32 (67 TFLOPS,
// r = 0.0677) 0.681 · 2.416/(2.416 + 0.271) · 768/(768 + 4.74), 59.3 us. A fixed half point
// would price them at 20.8 and 153 us, the BF16 time times the peaks' ratio.
TEST_CASE("tf32 and fp32 GEMMs pay the same fixed time per GEMM as bf16, at their own peaks") {
  const stepsim::GpuSpec spec = preset_gpu("dgx-h100-ndr");
  const OpCost fc1 = gemm(512, 3072, 768);
  const GpuModel tf32(spec, Precision::tf32);
  const GpuModel fp32(spec, Precision::fp32);
  CHECK(tf32.rate_ratio(fc1) == Approx(494.5 / 989.0));
  CHECK(fp32.rate_ratio(fc1) == Approx(67.0 / 989.0));
  CHECK(tf32.duration(fc1).seconds() == Approx(13.71e-6).epsilon(0.002));
  CHECK(fp32.duration(fc1).seconds() == Approx(59.26e-6).epsilon(0.002));
  // The fixed time itself, F½ / (peak · gemm_max) at a size far past the half point less its
  // work, is the BF16 one at every precision: 4e9 / (989e12 · 0.681) = 5.94 us.
  const OpCost big = gemm(16384, 16384, 1LL << 20);
  for (const GpuModel* model : {&tf32, &fp32}) {
    const double peak = model == &tf32 ? 494.5e12 : 67e12;
    const double work = big.flops / (peak * 0.681 * model->depth_share(big));
    CHECK(model->compute_time(big).seconds() - work == Approx(4e9 / (989e12 * 0.681)).epsilon(0.01));
  }
}

TEST_CASE("an element-wise kernel runs at the achievable HBM bandwidth") {
  const GpuModel gpu(st::a100(), Precision::bf16);
  OpCost op;
  op.cls = OpClass::elementwise;
  op.flops = 1e8;
  op.bytes = Bytes(400'000'000);
  const double seconds = 4e8 / (2039e9 * 0.82);
  CHECK(gpu.duration(op).seconds() == Approx(seconds).epsilon(1e-6));
}

TEST_CASE("no kernel is shorter than kernel_min") {
  const GpuModel gpu(st::a100(), Precision::bf16);
  OpCost op;
  op.cls = OpClass::elementwise;
  op.bytes = Bytes(64);
  CHECK(gpu.duration(op) == Time::from_us(3.0));
  // An op standing for a chain of PyTorch operators (the router's top-k and balancing loss, an
  // eager rotary embedding) runs a kernel for each.
  op.operators = 11;
  CHECK(gpu.duration(op) == Time::from_us(33.0));
}

TEST_CASE("a precision the GPU lacks is an input error") {
  CHECK_THROWS_AS(GpuModel(st::a100(), Precision::fp8), stepsim::InputError);
}

namespace {

OpCost attention_op(long long head_dim, stepsim::workload::Pass pass, bool flash2) {
  OpCost op;
  op.cls = OpClass::attention;
  op.pass = pass;
  op.flash2 = flash2;
  op.k = head_dim;
  op.flops = 1e13;  // large: the size term is 1 within 0.1 %
  op.bytes = Bytes(1 << 20);
  return op;
}

// Rate of head dim `narrow` over head dim 128's, the same FLOPs on the same GPU.
double rate_ratio(const GpuModel& gpu, long long narrow, stepsim::workload::Pass pass, bool flash2) {
  return gpu.duration(attention_op(128, pass, flash2)).seconds() /
         gpu.duration(attention_op(narrow, pass, flash2)).seconds();
}

}  // namespace

TEST_CASE("FlashAttention-2 reaches 0.55 of the fused attention on Hopper and all of it on Ampere") {
  const OpCost op = attention_op(128, stepsim::workload::Pass::forward, false);
  const OpCost fa2 = attention_op(128, stepsim::workload::Pass::forward, true);
  const GpuModel h100(st::h100(), Precision::bf16);
  CHECK(h100.duration(op).seconds() / h100.duration(fa2).seconds() == Approx(0.55).epsilon(1e-9));
  const GpuModel a100(st::a100(), Precision::bf16);
  CHECK(a100.duration(fa2).seconds() == Approx(a100.duration(op).seconds()).epsilon(1e-12));
}

// Shah et al. 2024 (FlashAttention-3), figures 5 and 6: cuDNN's fused attention on an H100
// SXM5, BF16, head dim 128, 16k tokens per batch, without causal mask, forward against
// backward TFLOPS: 609 and 499 at 4k keys, 600 and 518 at 8k, 595 and 516 at 16k. The same
// FLOPs take the backward 609/499 times as long at 4k.
TEST_CASE("fused attention's backward runs at the fraction of its forward's rate cuDNN measures on H100") {
  OpCost fwd = attention_op(128, stepsim::workload::Pass::forward, false);
  OpCost bwd = attention_op(128, stepsim::workload::Pass::backward, false);
  const GpuModel h100(st::h100(), Precision::bf16);
  const auto ratio = [&](long long keys) {
    fwd.n = bwd.n = keys;
    return h100.duration(fwd).seconds() / h100.duration(bwd).seconds();
  };
  CHECK(ratio(4096) == Approx(499.0 / 609.0).epsilon(1e-9));
  CHECK(ratio(8192) == Approx(518.0 / 600.0).epsilon(1e-9));
  CHECK(ratio(16384) == Approx(516.0 / 595.0).epsilon(1e-9));
  // Between two measured lengths, between their fractions; beyond the last, the last.
  CHECK(ratio(6144) > 499.0 / 609.0);
  CHECK(ratio(6144) < 518.0 / 600.0);
  CHECK(ratio(131072) == Approx(516.0 / 595.0).epsilon(1e-9));
  // FlashAttention-2 keeps the same fraction of its own forward.
  fwd.flash2 = bwd.flash2 = true;
  CHECK(ratio(4096) == Approx(499.0 / 609.0).epsilon(1e-9));
  // No such figures for Ampere: its forward and backward share attention_max.
  fwd.flash2 = bwd.flash2 = false;
  const GpuModel a100(st::a100(), Precision::bf16);
  fwd.n = bwd.n = 4096;
  CHECK(a100.duration(bwd).seconds() == Approx(a100.duration(fwd).seconds()).epsilon(1e-12));
}

// Shah et al. 2024 (FlashAttention-3), figures 5 and 6: BF16 on H100 SXM5 at 4k tokens, in
// TFLOPS, cuDNN's causal forward 363 at head dim 64 against 518 at 128 and backward 417
// against 499; FlashAttention-2's causal forward 284 against 319 and backward 279 against 310.
TEST_CASE("a fused attention kernel at head dim 64 runs at the published share of head dim 128's rate on Hopper") {
  using stepsim::workload::Pass;
  const GpuModel h100(st::h100(), Precision::bf16);
  CHECK(rate_ratio(h100, 64, Pass::forward, false) == Approx(363.0 / 518.0).epsilon(1e-9));
  CHECK(rate_ratio(h100, 64, Pass::backward, false) == Approx(417.0 / 499.0).epsilon(1e-9));
  CHECK(rate_ratio(h100, 64, Pass::forward, true) == Approx(284.0 / 319.0).epsilon(1e-9));
  CHECK(rate_ratio(h100, 64, Pass::backward, true) == Approx(279.0 / 310.0).epsilon(1e-9));
}

TEST_CASE("a narrower attention head never runs faster per FLOP, and heads of 128 and wider keep attention_max") {
  using stepsim::workload::Pass;
  const GpuModel h100(st::h100(), Precision::bf16);
  double previous = 0.0;
  for (long long d : {32LL, 48LL, 64LL, 80LL, 96LL, 112LL, 128LL, 192LL, 256LL}) {
    const double e = h100.efficiency(attention_op(d, Pass::forward, false));
    CHECK(e >= previous);
    previous = e;
  }
  const double at_128 = h100.efficiency(attention_op(128, Pass::backward, false));
  CHECK(h100.efficiency(attention_op(256, Pass::backward, false)) == Approx(at_128).epsilon(1e-12));
  // Ampere: no published figure taken, so every width keeps attention_max.
  const GpuModel a100(st::a100(), Precision::bf16);
  CHECK(rate_ratio(a100, 64, Pass::forward, false) == Approx(1.0).epsilon(1e-12));
}
