// The range of every numeric scenario key, and the limits on what they multiply into. The
// ranges are wide enough for any real cluster and model and narrow enough that no product of
// them overflows and no step asks for unbounded work; each refusal names the key and the range.
#include "io/validate_limits.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "io/units_text.hpp"
#include "stepsim/error.hpp"

namespace stepsim::io {
namespace {

// Every rank of the job in all-ranks mode: micro-batches × layers × tp·dp·cp.
constexpr double kMaxRankLayerPasses = 8388608;
constexpr double kMaxStepSeconds = 1e6;                        // about 11.6 days, well inside Time's range
constexpr double kMaxParams = 1125899906842624.0;              // 2^50 parameters
constexpr double kMaxTokensPerMicroBatch = 4294967296;         // 2^32 tokens
constexpr double kMaxMicroBatchBytes = 1152921504606846976.0;  // 2^60 bytes of one layer's activations

// How a range's bounds and a refused value are written: in the units a scenario writes them in.
// A bandwidth is written in bytes per second, a NIC's in bits (bit_rate).
enum class Quantity { compute_rate, size, bandwidth, bit_rate };

struct BoundUnit {
  const char* name;
  double factor;
};

constexpr BoundUnit kRateUnits[] = {{"EFLOPS", 1e18}, {"PFLOPS", 1e15}, {"TFLOPS", 1e12}, {"GFLOPS", 1e9},
                                    {"MFLOPS", 1e6},  {"KFLOPS", 1e3},  {"FLOPS", 1.0}};
constexpr BoundUnit kSizeUnits[] = {{"TiB", 1099511627776.0},
                                    {"GiB", 1073741824.0},
                                    {"MiB", 1048576.0},
                                    {"KiB", 1024.0},
                                    {"TB", 1e12},
                                    {"GB", 1e9},
                                    {"MB", 1e6},
                                    {"KB", 1e3},
                                    {"B", 1.0}};
constexpr BoundUnit kByteRateUnits[] = {{"TB/s", 1e12}, {"GB/s", 1e9}, {"MB/s", 1e6}, {"kB/s", 1e3}, {"B/s", 1.0}};
constexpr BoundUnit kBitRateUnits[] = {
    {"Tb/s", 1e12 / 8}, {"Gb/s", 1e9 / 8}, {"Mb/s", 1e6 / 8}, {"Kb/s", 1e3 / 8}, {"b/s", 1.0 / 8}};

// `v` as the shortest whole number of one of `units` ("100 TB/s", "1 MiB"), or "" when none.
std::string whole_text(double v, std::span<const BoundUnit> units) {
  std::string best;
  for (const BoundUnit& u : units) {
    const double count = v / u.factor;
    if (count < 1 || count > 1e15 || count != std::floor(count) || count * u.factor != v) continue;
    std::string text = fmt::format("{:.0f} {}", count, u.name);
    if (best.empty() || text.size() < best.size()) best = std::move(text);
  }
  return best;
}

// The shorter of two texts, the first when they tie; an empty one loses.
std::string shorter(std::string a, std::string b) {
  if (a.empty() || (!b.empty() && b.size() < a.size())) return b;
  return a;
}

// A refused value: in the key's own units where a whole number writes it ("999999 b/s" for a
// NIC, "500 kB/s" for a host link), else in the other units of its kind, else exactly as the
// resolved scenario writes it.
std::string value_text(double v, Quantity q) {
  switch (q) {
    case Quantity::compute_rate:
      return shorter(whole_text(v, kRateUnits), format_flop_rate(FlopRate::flops_per_s(v)));
    case Quantity::size: {
      const std::string whole = whole_text(v, kSizeUnits);
      return whole.empty() ? format_bytes(Bytes(std::llround(v))) : whole;
    }
    case Quantity::bandwidth:
    case Quantity::bit_rate:
      break;
  }
  const bool bits = q == Quantity::bit_rate;
  std::string text = whole_text(v, bits ? std::span(kBitRateUnits) : std::span(kByteRateUnits));
  if (text.empty()) text = whole_text(v, bits ? std::span(kByteRateUnits) : std::span(kBitRateUnits));
  return text.empty() ? format_bandwidth(Bandwidth::bytes_per_s(v), bits) : text;
}

// A range's bound: a bandwidth in bits or bytes, whichever is shorter (125 MB/s is "1 Gb/s",
// 10^14 B/s "100 TB/s", as README gives link bandwidths' range).
std::string bound_text(double v, Quantity q) {
  if (q != Quantity::bandwidth && q != Quantity::bit_rate) return value_text(v, q);
  const std::string text = shorter(whole_text(v, kByteRateUnits), whole_text(v, kBitRateUnits));
  return text.empty() ? value_text(v, q) : text;
}

const char* quantity_noun(Quantity q) {
  switch (q) {
    case Quantity::compute_rate:
      return "a compute rate";
    case Quantity::size:
      return "a size";
    case Quantity::bandwidth:
    case Quantity::bit_rate:
      break;
  }
  return "a bandwidth";
}

class Limits {
 public:
  explicit Limits(const std::string& file) : file_(file) {}

  void integer(long long v, long long lo, long long hi, const char* where) const {
    if (v < lo || v > hi) fail(where, fmt::format("must be between {} and {}, got {}", lo, hi, v));
  }
  void number(double v, double lo, double hi, const char* where) const {
    if (!(v >= lo && v <= hi)) fail(where, fmt::format("must be between {} and {}, got {}", lo, hi, v));
  }
  void duration(Time v, double max_s, const char* where) const {
    if (v < Time::zero() || v.seconds() > max_s)
      fail(where, fmt::format("must be between 0 and {} s, got {} s", max_s, v.seconds()));
  }
  // A quantity within [lo, hi]; 0 means "not available" where `zero_allowed`. A 0 that the range
  // refuses is a key left out (a section given as an object without it), or given as 0.
  void quantity(double v, double lo, double hi, Quantity q, bool zero_allowed, const char* where) const {
    if (zero_allowed && v == 0) return;
    if (v >= lo && v <= hi) return;
    const std::string range = fmt::format("between {} and {}", bound_text(lo, q), bound_text(hi, q));
    if (v == 0) fail(where, fmt::format("is missing (or 0): expected {} {}", quantity_noun(q), range));
    fail(where,
         fmt::format("must be {}{}, got {}", range, zero_allowed ? " (or 0: not available)" : "", value_text(v, q)));
  }
  [[noreturn]] void fail(const char* where, const std::string& message) const {
    throw InputError(file_, where, message);
  }

 private:
  const std::string& file_;
};

void model_ranges(const ModelSpec& m, const Limits& l) {
  l.integer(m.layers, 1, 2048, "/model/layers");
  l.integer(m.hidden, 1, 1LL << 18, "/model/hidden");
  l.integer(m.heads, 1, 4096, "/model/heads");
  l.integer(m.kv_heads, 0, 4096, "/model/kv_heads");           // 0: as many as heads
  l.integer(m.ffn_hidden, 0, 1LL << 21, "/model/ffn_hidden");  // 0: 4·hidden
  l.integer(m.head_dim, 0, 1LL << 12, "/model/head_dim");      // 0: hidden / heads
  l.integer(m.vocab, 1, 1LL << 24, "/model/vocab");
  l.integer(m.seq_len, 1, 1LL << 23, "/model/seq_len");
  l.integer(m.moe.experts, 0, 4096, "/model/moe/experts");
  l.integer(m.moe.top_k, 1, 4096, "/model/moe/top_k");
  l.integer(m.moe.expert_ffn_hidden, 0, 1LL << 21, "/model/moe/expert_ffn_hidden");
  l.number(m.moe.capacity_factor, 0, 1024, "/model/moe/capacity_factor");  // 0: dropless
  l.number(m.moe.imbalance, 1, 1024, "/model/moe/imbalance");
  l.integer(m.moe.shared_experts, 0, 64, "/model/moe/shared_experts");
  l.integer(m.moe.first_dense_layers, 0, 2048, "/model/moe/first_dense_layers");
  l.integer(m.mtp_layers, 0, 16, "/model/mtp_layers");
  l.integer(m.sliding_window, 0, 1LL << 23, "/model/sliding_window");
  l.integer(m.window_skip_freq, 0, 2048, "/model/window_skip_freq");
  l.number(m.swiglu_limit, 0, 1e6, "/model/swiglu_limit");  // 0: no clamp
  l.number(m.yarn_factor, 0, 1024, "/model/yarn_factor");   // 0: plain RoPE
  l.integer(m.mla.q_lora_rank, 0, 1LL << 16, "/model/mla/q_lora_rank");
  l.integer(m.mla.kv_lora_rank, 0, 1LL << 16, "/model/mla/kv_lora_rank");
  l.integer(m.mla.qk_nope_head_dim, 0, 4096, "/model/mla/qk_nope_head_dim");
  l.integer(m.mla.qk_rope_head_dim, 0, 4096, "/model/mla/qk_rope_head_dim");
  l.integer(m.mla.v_head_dim, 0, 4096, "/model/mla/v_head_dim");
}

void gpu_ranges(const GpuSpec& g, const Limits& l) {
  constexpr double kFlopsLo = 1e9, kFlopsHi = 1e21;  // 1 GFLOPS to 1 ZFLOPS
  l.quantity(g.flops.bf16.flops_per_s(), kFlopsLo, kFlopsHi, Quantity::compute_rate, true, "/cluster/gpu/flops/bf16");
  l.quantity(g.flops.fp16.flops_per_s(), kFlopsLo, kFlopsHi, Quantity::compute_rate, true, "/cluster/gpu/flops/fp16");
  l.quantity(g.flops.fp8.flops_per_s(), kFlopsLo, kFlopsHi, Quantity::compute_rate, true, "/cluster/gpu/flops/fp8");
  l.quantity(g.flops.tf32.flops_per_s(), kFlopsLo, kFlopsHi, Quantity::compute_rate, true, "/cluster/gpu/flops/tf32");
  l.quantity(g.flops.fp32.flops_per_s(), kFlopsLo, kFlopsHi, Quantity::compute_rate, true, "/cluster/gpu/flops/fp32");
  l.quantity(g.flops.fp4.flops_per_s(), kFlopsLo, kFlopsHi, Quantity::compute_rate, true, "/cluster/gpu/flops/fp4");
  l.quantity(g.memory.as_double(), 1048576.0, 1125899906842624.0, Quantity::size, false, "/cluster/gpu/memory");
  l.quantity(g.memory_bandwidth.bytes_per_s(), 1e9, 1e15, Quantity::bandwidth, false, "/cluster/gpu/memory_bandwidth");
  l.integer(g.sms, 1, 4096, "/cluster/gpu/sms");
  l.number(g.efficiency.gemm_half_flops, 0, 1e18, "/cluster/gpu/efficiency/gemm_half_flops");
  l.number(g.efficiency.gemm_half_k, 0, 1e6, "/cluster/gpu/efficiency/gemm_half_k");
  l.duration(g.efficiency.kernel_min, 1.0, "/cluster/gpu/efficiency/kernel_min");
  l.duration(g.kernel_launch, 1.0, "/cluster/gpu/kernel_launch");
  l.number(g.board_power_w, 0, 1e5, "/cluster/gpu/board_power_w");
}

void cluster_ranges(const ClusterSpec& c, const Limits& l) {
  l.integer(c.nodes, 0, kMaxGpus, "/cluster/nodes");  // 0: as many as the job needs
  l.integer(c.gpus_per_node, 1, 1024, "/cluster/gpus_per_node");
  l.integer(c.nvlink_domain, 0, kMaxGpus, "/cluster/nvlink_domain");  // 0: the node
  gpu_ranges(c.gpu, l);
  l.number(c.gpu_hour_price, 0, ClusterSpec::kMaxGpuHourPrice, "/cluster/gpu_hour_price");
  l.quantity(c.intra_node.bandwidth.bytes_per_s(), 1.25e8, 1e14, Quantity::bandwidth, false,
             "/cluster/intra_node/bandwidth");
  l.duration(c.intra_node.latency, 1.0, "/cluster/intra_node/latency");
  l.integer(c.inter_node.nics_per_node, 1, 1024, "/cluster/inter_node/nics_per_node");
  l.quantity(c.inter_node.nic_bandwidth.bytes_per_s(), 1.25e8, 1e14, Quantity::bit_rate, false,
             "/cluster/inter_node/nic_bandwidth");
  l.duration(c.inter_node.latency, 1.0, "/cluster/inter_node/latency");
  l.quantity(c.host_link.bandwidth.bytes_per_s(), 1e6, 1e14, Quantity::bandwidth, true, "/cluster/host_link/bandwidth");
  l.integer(c.host_link.gpus_per_link, 1, 1024, "/cluster/host_link/gpus_per_link");
  l.number(c.inter_node.oversubscription, 1, 1024, "/cluster/inter_node/oversubscription");
  l.integer(c.inter_node.nodes_per_leaf, 1, 1 << 20, "/cluster/inter_node/nodes_per_leaf");
  l.duration(c.tuning.launch_overhead, 1.0, "/cluster/collective_tuning/launch_overhead");
  l.quantity(c.tuning.ramp_half_bytes.as_double(), 0, 1099511627776.0, Quantity::size, false,
             "/cluster/collective_tuning/ramp_half_bytes");
  // Above 1 the shortfall would fall faster than the buffer grows: a larger buffer would take
  // less time.
  l.number(c.tuning.ramp_exponent, 0.01, 1, "/cluster/collective_tuning/ramp_exponent");
  l.duration(c.tuning.latency_floor, 1.0, "/cluster/collective_tuning/latency_floor");
}

void parallel_ranges(const ParallelSpec& p, const Limits& l) {
  l.integer(p.tp, 1, 1024, "/parallel/tp");
  l.integer(p.pp, 1, 2048, "/parallel/pp");
  l.integer(p.dp, 1, kMaxGpus, "/parallel/dp");
  l.integer(p.cp, 1, 1024, "/parallel/cp");
  l.integer(p.ep, 1, 4096, "/parallel/ep");
  l.integer(p.etp, 1, 1024, "/parallel/etp");
  l.integer(p.virtual_stages, 1, 2048, "/parallel/virtual_stages");
  const double gpus = static_cast<double>(p.tp) * p.pp * p.dp * p.cp;
  if (gpus > static_cast<double>(kMaxGpus))
    l.fail("/parallel",
           fmt::format("tp·pp·dp·cp = {}·{}·{}·{} = {:.0f} GPUs; stepsim simulates jobs of at most {} GPUs", p.tp, p.pp,
                       p.dp, p.cp, gpus, kMaxGpus));
}

void training_ranges(const Scenario& s, const Limits& l) {
  const TrainingSpec& t = s.training;
  l.integer(t.micro_batch, 1, 1LL << 20, "/training/micro_batch");
  // Required, with no default: 0 is the key left out (or given as 0), not a value to range-check.
  if (t.global_batch == 0)
    l.fail("/training/global_batch",
           fmt::format("is missing (or 0): expected the global batch, the sequences of one optimizer step over "
                       "every data-parallel rank, a whole number divisible by micro_batch·dp ({}·{}), e.g. "
                       "\"global_batch\": {}",
                       t.micro_batch, s.parallel.dp, 8 * t.micro_batch * s.parallel.dp));
  l.integer(t.global_batch, 1, 1LL << 40, "/training/global_batch");
  l.integer(t.activation_offload_layers, 0, 2048, "/training/activation_offload_layers");
  // Up to the GPU's own memory: more would leave no layout that fits. Said of both keys, since
  // either may be the one the user set (a small cluster.gpu.memory under the default headroom).
  if (t.memory_headroom.as_double() > s.cluster.gpu.memory.as_double() && s.cluster.gpu.memory.as_double() > 0)
    l.fail("/training/memory_headroom",
           fmt::format("{} is more than the GPU's whole memory (cluster.gpu.memory, {}): lower "
                       "training.memory_headroom or give the GPU more memory",
                       format_bytes(t.memory_headroom), format_bytes(s.cluster.gpu.memory)));
  l.quantity(t.memory_headroom.as_double(), 0, s.cluster.gpu.memory.as_double(), Quantity::size, false,
             "/training/memory_headroom");
  if (static_cast<double>(t.micro_batch) * s.parallel.dp > static_cast<double>(t.global_batch))
    l.fail("/training/global_batch", fmt::format("{} is smaller than micro_batch·dp ({}·{}): each data-parallel rank "
                                                 "needs at least one micro-batch",
                                                 t.global_batch, t.micro_batch, s.parallel.dp));
}

void data_parallel_ranges(const DataParallelSpec& d, const Limits& l) {
  l.number(d.bucket_cap_mb, 1.0 / 1024, 1048576, "/data_parallel/bucket_cap_mb");
  l.number(d.first_bucket_mb, 1.0 / 1024, 1048576, "/data_parallel/first_bucket_mb");
  l.integer(d.bucket_parameters, 0, DataParallelSpec::kMaxBucketParameters, "/data_parallel/bucket_parameters");
  l.integer(d.max_inflight_all_gathers, 1, 1024, "/data_parallel/max_inflight_all_gathers");
  l.integer(d.shard_group, 0, kMaxGpus, "/data_parallel/shard_group");
}

std::string seconds_text(double s) { return s < 1e9 ? fmt::format("{:.0f} s", s) : fmt::format("{:.3g} s", s); }

// Work and sizes that several keys multiply into; checked in floating point so that the
// check itself cannot overflow.
void products(const Scenario& s, const Limits& l) {
  const ModelSpec& m = s.model;
  const double b = static_cast<double>(s.training.micro_batch), seq = static_cast<double>(m.seq_len);
  const double h = static_cast<double>(m.hidden), layers = m.layers, heads = m.heads;
  const double micro_batches = static_cast<double>(s.training.global_batch) / (b * s.parallel.dp);
  // A layer under context parallelism runs its attention in the ring's cp steps, each with its
  // transfers, and under TP communication overlap each GEMM beside a collective runs in tp
  // pieces: measured, a layer then costs representative mode about 1 + (cp - 1)/5 plain layers'
  // ops, time and memory (3.9 at CP 16, 195 at CP 1024), and 1 + (tp - 1)/4 (2.7 at TP 8);
  // all-ranks mode about 1 + (cp - 1)/2 for context parallelism.
  const double tp_weight = s.tensor_parallel.comm_overlap ? 1.0 + (s.parallel.tp - 1) / 4.0 : 1.0;
  const auto weights_text = [&](const char* cp_text, const char* after = "") {
    std::vector<std::string> parts;
    if (s.parallel.cp > 1) parts.push_back(fmt::format("{} for its ring's steps", cp_text));
    if (tp_weight > 1) parts.push_back("1 + (tp - 1)/4 for TP overlap's pieces");
    return parts.empty() ? std::string() : fmt::format(", a layer counting {}{}", fmt::join(parts, " and "), after);
  };
  const double passes =
      layer_passes(micro_batches, m.layers, s.parallel.cp, s.parallel.tp, s.tensor_parallel.comm_overlap);
  if (passes > kMaxLayerPasses)
    l.fail("/training/global_batch",
           fmt::format("{:.0f} micro-batches per step (global_batch / (micro_batch·dp)) times {} layers{} is {:.0f} "
                       "layer passes, more than the {:.0f} stepsim simulates per step: raise micro_batch or dp",
                       micro_batches, m.layers, weights_text("1 + (cp - 1)/5", ","), passes, kMaxLayerPasses));
  // All-ranks mode simulates every GPU of the model-parallel group and every DP replica.
  const double ranks = static_cast<double>(s.parallel.tp) * s.parallel.dp * s.parallel.cp;
  const double rank_passes = micro_batches * layers * (1.0 + (s.parallel.cp - 1) / 2.0) * tp_weight * ranks;
  if (s.simulation.ranks == RankMode::all && rank_passes > kMaxRankLayerPasses)
    l.fail("/simulation/ranks",
           fmt::format("simulating every rank is {:.0f} layer passes (micro-batches × layers × tp·dp·cp{}), more "
                       "than the {:.0f} stepsim simulates per step: use \"representative\"",
                       rank_passes, weights_text("1 + (cp - 1)/2"), kMaxRankLayerPasses));
  if (b * seq > kMaxTokensPerMicroBatch)
    l.fail("/training/micro_batch", fmt::format("micro_batch·seq_len = {:.0f} tokens; at most {:.0f} per micro-batch",
                                                b * seq, kMaxTokensPerMicroBatch));
  const double ffn = static_cast<double>(m.ffn_hidden), vocab = static_cast<double>(m.vocab);
  const double params = layers * (4 * h * h + 3 * h * ffn) * std::max(1, m.moe.experts) + 2 * vocab * h;
  if (params > kMaxParams)
    l.fail("/model", fmt::format("about {:.3g} parameters; stepsim models at most {:.0f}", params, kMaxParams));
  // Korthikanti's per-layer activations, s·b·h·(34 + 5·a·s/h) bytes, without any parallelism.
  if (seq * b * h * (34 + 5 * heads * seq / h) > kMaxMicroBatchBytes)
    l.fail("/model/seq_len",
           fmt::format("one layer's activations for one micro-batch exceed {:.0f} bytes (seq_len {}, micro_batch {}, "
                       "hidden {}, heads {})",
                       kMaxMicroBatchBytes, m.seq_len, s.training.micro_batch, m.hidden, m.heads));
  // The step's model FLOPs at the GPU's peak, and its gradients over the slowest link: a
  // lower bound on the step, which must stay inside the range the simulator times.
  const double peak = s.cluster.gpu.flops.for_precision(s.training.precision).flops_per_s();
  const double tokens = static_cast<double>(s.training.global_batch) * seq;
  const double flops = 6 * tokens * params + 6 * tokens * seq * layers * h;
  const double gpus = static_cast<double>(s.parallel.gpus());
  if (peak > 0 && flops / gpus / peak > kMaxStepSeconds)
    l.fail("/cluster/gpu/flops",
           fmt::format("one step is at least {} of compute per GPU at the peak of {} ({} FLOPS); stepsim simulates "
                       "steps of up to {:.0f} s",
                       seconds_text(flops / gpus / peak), to_string(s.training.precision), peak, kMaxStepSeconds));
  const double slowest =
      std::min(s.cluster.intra_node.bandwidth.bytes_per_s(), s.cluster.inter_node.nic_bandwidth.bytes_per_s());
  const double grad_bytes = 4 * params / (static_cast<double>(s.parallel.tp) * s.parallel.pp);
  if (slowest > 0 && grad_bytes / slowest > kMaxStepSeconds)
    l.fail("/cluster",
           fmt::format("moving one GPU's {:.0f} bytes of gradients over its slowest link ({} B/s) takes {}; stepsim "
                       "simulates steps of up to {:.0f} s",
                       grad_bytes, slowest, seconds_text(grad_bytes / slowest), kMaxStepSeconds));
}

}  // namespace

double layer_passes(double micro_batches, int layers, int cp, int tp, bool tp_overlap) {
  return micro_batches * layers * (1.0 + (cp - 1) / 5.0) * (tp_overlap ? 1.0 + (tp - 1) / 4.0 : 1.0);
}

void check_key_ranges(const Scenario& s) {
  const Limits l(s.source);
  model_ranges(s.model, l);
  cluster_ranges(s.cluster, l);
  parallel_ranges(s.parallel, l);
  training_ranges(s, l);
  data_parallel_ranges(s.data_parallel, l);
}

void check_products(const Scenario& s) { products(s, Limits(s.source)); }

void check_cluster_ranges(const ClusterSpec& c, const std::string& source) { cluster_ranges(c, Limits(source)); }

}  // namespace stepsim::io
