// Hand-built scenarios for the workload and hardware tests (dimensions from the papers).
#include "scenarios.hpp"

namespace stepsim::testing {

ModelSpec gpt(int layers, long long hidden, int heads) {
  ModelSpec m;
  m.name = "gpt";
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = 51200;
  m.seq_len = 2048;
  m.mlp = MlpKind::gelu;
  m.tied_embeddings = true;
  return m;
}

namespace {

ModelSpec llama3(int layers, long long hidden, int heads, long long ffn) {
  ModelSpec m;
  m.name = "llama3";
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = 8;
  m.ffn_hidden = ffn;
  m.vocab = 128256;
  m.seq_len = 8192;
  m.mlp = MlpKind::swiglu;
  m.tied_embeddings = false;
  return m;
}

}  // namespace

ModelSpec llama3_8b() { return llama3(32, 4096, 32, 14336); }
ModelSpec llama3_70b() { return llama3(80, 8192, 64, 28672); }
ModelSpec llama3_405b() { return llama3(126, 16384, 128, 53248); }

// A fixed A100 fixture for the compute-model tests, independent of the shipped preset: it
// keeps the isolated-GEMM efficiency 0.82 of a cuBLAS benchmark (docs/model.md), while configs/gpus/ carries
// the sustained-training value fitted to Korthikanti Table 4 (0.76; tested end to end in
// tests/cli/validation_test.cpp).
GpuSpec a100() {
  GpuSpec g;
  g.name = "a100-sxm4-80g";
  g.arch = GpuArch::ampere;
  g.flops = {FlopRate::tflops(312), FlopRate::tflops(312),  FlopRate{},
             FlopRate::tflops(156), FlopRate::tflops(19.5), FlopRate{}};
  g.memory = Bytes::gib(80);
  g.memory_bandwidth = Bandwidth::gbytes_per_s(2039);
  g.sms = 108;
  g.efficiency.gemm_max = 0.82;
  g.efficiency.gemm_half_flops = 2e9;
  g.efficiency.attention_max = 0.6;
  g.efficiency.hbm = 0.82;
  g.efficiency.kernel_min = Time::from_us(3.0);
  return g;
}

GpuSpec h100() {
  GpuSpec g;
  g.name = "h100-sxm5-80g";
  g.arch = GpuArch::hopper;
  g.flops = {FlopRate::tflops(989), FlopRate::tflops(989), FlopRate::tflops(1979),
             FlopRate::tflops(494), FlopRate::tflops(67),  FlopRate{}};
  g.memory = Bytes::gib(80);
  g.memory_bandwidth = Bandwidth::gbytes_per_s(3350);
  g.sms = 132;
  g.efficiency.gemm_max = 0.80;
  g.efficiency.gemm_half_flops = 6e9;
  g.efficiency.attention_max = 0.55;
  g.efficiency.hbm = 0.85;
  g.efficiency.kernel_min = Time::from_us(3.0);
  return g;
}

Scenario scenario(const ModelSpec& model, int tp, long long micro_batch, long long global_batch) {
  Scenario sc;
  sc.source = "<test>";
  sc.model = model;
  sc.cluster.gpu = a100();
  sc.cluster.nodes = 1;
  sc.parallel.tp = tp;
  sc.training.micro_batch = micro_batch;
  sc.training.global_batch = global_batch;
  sc.training.precision = Precision::bf16;
  return sc;
}

}  // namespace stepsim::testing
