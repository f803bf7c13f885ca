// The memory model: state bytes per sharding mode, activations kept by each pipeline
// schedule (Korthikanti et al. 2022 per layer), and the trace's memory counter.
#include <algorithm>

#include <catch2/catch.hpp>

#include "engine/engine.hpp"
#include "parallelism/data_parallel.hpp"
#include "parallelism/grad_buckets.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/program_builder.hpp"
#include "stepsim/framework.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
using stepsim::Bytes;
using stepsim::DpKind;
using stepsim::Recompute;
using stepsim::Schedule;

namespace {

// 4 layers of 1M parameters, a 0.5M embedding and a 0.25M head: 4.75M parameters.
stepsim::Scenario states_scenario(DpKind kind, int dp) {
  auto s = sp::test::small_scenario(1, dp, 1);
  s.model.layers = 4;
  s.data_parallel.kind = kind;
  return s;
}

stepsim::workload::ModelWork states_work() {
  stepsim::workload::ModelWork w;
  w.layer.param_count = 1'000'000;
  w.pre.param_count = 500'000;
  w.post.param_count = 250'000;
  return w;
}

sp::StageMemory states(DpKind kind, int dp) {
  return sp::estimate_memory(states_scenario(kind, dp), states_work()).stages.front();
}

constexpr std::int64_t P = 4'750'000;

// A GPT layer of Korthikanti Table 4's 22B shape (s 2048, h 6144, a 64) at TP 8 with sequence
// parallelism and flash attention, micro-batch 1, vocabulary 51,200.
stepsim::Scenario gpt(int layers, int pp, Schedule schedule, int v, long long m, Recompute r) {
  stepsim::Scenario s = sp::test::small_scenario(8, 1, 1);
  s.model = {"gpt", layers, 6144, 64, 64, 4 * 6144, 51200, 2048, stepsim::MlpKind::gelu, true, {}};
  s.cluster.nodes = pp;
  s.parallel.pp = pp;
  s.parallel.sequence_parallel = true;
  s.parallel.schedule = schedule;
  s.parallel.virtual_stages = v;
  s.training.global_batch = m;
  s.training.recompute = r;
  s.training.attention = stepsim::AttentionKind::flash;
  return s;
}

constexpr std::int64_t sbh = 2048LL * 1 * 6144;
// Korthikanti with TP and SP: s·b·h/t·34 (selective or flash: no s² scores), plus flash
// attention's fp32 log-sum-exp per query row of the 8 local heads.
constexpr std::int64_t layer_kept = 34 * sbh / 8 + 4 * 8 * 2048;
// The last stage's final norm input and the output layer's (the norm's output), each s·b·h/t
// in bf16 with SP, and the fp32 logits b·s·V/t.
constexpr std::int64_t head_kept = 2 * 2 * sbh / 8 + 4 * 2048LL * 51200 / 8;

std::int64_t kept(const stepsim::Scenario& s, int stage) {
  return sp::kept_activations(s, stepsim::workload::build_work(s), stage).bytes.count();
}

// The largest value of each simulated rank's memory counter.
std::vector<std::int64_t> counter_peaks(const stepsim::Scenario& s) {
  const auto work = stepsim::workload::build_work(s);
  const sp::test::FixedCosts costs;
  stepsim::engine::Program program = sp::build_program(s, work, costs);
  sp::annotate_memory(program, s, work);
  const stepsim::Timeline timeline = stepsim::engine::run(program);
  std::vector<std::int64_t> peaks;
  for (const auto& rank : timeline.ranks) {
    std::int64_t peak = 0;
    for (const auto& sample : rank.memory) peak = std::max(peak, sample.value.count());
    peaks.push_back(peak);
  }
  return peaks;
}

void check_counter_matches_model(const stepsim::Scenario& s) {
  const auto estimate = sp::estimate_memory(s, stepsim::workload::build_work(s));
  const auto peaks = counter_peaks(s);
  REQUIRE(peaks.size() == estimate.stages.size());
  for (std::size_t i = 0; i < peaks.size(); ++i) {
    INFO("stage " << i);
    CHECK(static_cast<double>(peaks[i]) == Approx(estimate.stages[i].peak().as_double()).epsilon(0.02));
  }
}

}  // namespace

TEST_CASE("DDP holds 2 + 4 + 12 bytes per parameter on every GPU") {
  const auto m = states(DpKind::ddp, 8);
  CHECK(m.param_count == P);
  CHECK(m.params.count() == 2 * P);
  CHECK(m.grads.count() == 4 * P);
  CHECK(m.optimizer.count() == 12 * P);
  CHECK(m.buffers.count() == 0);  // buckets are views into the gradient buffer
}

TEST_CASE("bf16 moments and main gradients hold 2 + 2 + (4 + 4) bytes per parameter under DDP") {
  stepsim::Scenario s = states_scenario(DpKind::ddp, 8);
  s.training.optimizer_state = stepsim::Precision::bf16;
  s.training.main_grad = stepsim::Precision::bf16;
  const auto m = sp::estimate_memory(s, states_work()).stages.front();
  CHECK(m.params.count() == 2 * P);
  CHECK(m.grads.count() == 2 * P);
  CHECK(m.optimizer.count() == (4 + 2 + 2) * P);  // fp32 master weight, bf16 m and v
  s.training.optimizer = "sgd";
  CHECK(sp::estimate_memory(s, states_work()).stages.front().optimizer.count() == (4 + 2) * P);
}

// PyTorch's DDP with torch.optim (torchtitan's DDP path, PyTorch's AMP recipe): mixed precision
// is torch.autocast over an fp32 model (torchtitan's maybe_enable_amp: "Mixed precision
// training is handled by AMP"), so the parameters and their gradients stay fp32 and the
// optimizer steps the parameters themselves, with no master copy: 4 + 4 + 8 bytes a parameter,
// plus autocast's bf16 copy of each Linear weight and the LM head, saved for the backward (2
// bytes each), and
// the reducer's fp32 buckets (gradient_as_bucket_view off, PyTorch's default).
TEST_CASE("PyTorch's DDP under autocast holds fp32 parameters and gradients and no master copy") {
  stepsim::Scenario s = states_scenario(DpKind::ddp, 8);
  s.training.framework = stepsim::Framework::torchtitan;
  s.training.main_grad = stepsim::Precision::fp32;
  s.data_parallel.gradient_as_bucket_view = false;
  stepsim::workload::ModelWork w = states_work();
  w.layer.linear_param_count = 900'000;
  const long long linear = 4 * 900'000 + 250'000;  // the layers' Linear weights and the head
  const auto m = sp::estimate_memory(s, w).stages.front();
  CHECK(m.params.count() == 4 * P);
  CHECK(m.grads.count() == 4 * P);
  CHECK(m.optimizer.count() == 8 * P);
  CHECK(m.buffers.count() == 4 * P + 2 * linear);
  // A model cast to bf16 (main_grad bf16): bf16 parameters and gradients, still no master copy.
  s.training.main_grad = stepsim::Precision::bf16;
  const auto cast = sp::estimate_memory(s, w).stages.front();
  CHECK(cast.params.count() == 2 * P);
  CHECK(cast.grads.count() == 2 * P);
  CHECK(cast.optimizer.count() == 8 * P);
  CHECK(cast.buffers.count() == 2 * P);
}

TEST_CASE("FSDP keeps its fp32 shard as the master copy with bf16 moments and gradients") {
  stepsim::Scenario s = states_scenario(DpKind::fsdp, 8);
  s.training.optimizer_state = stepsim::Precision::bf16;
  s.training.main_grad = stepsim::Precision::bf16;
  const auto m = sp::estimate_memory(s, states_work()).stages.front();
  CHECK(m.params.count() == 4 * P / 8 + 2 * (750'000 + 2 * 1'000'000));
  // Of the root's gradients, the head's alone at the peak (see below).
  CHECK(m.grads.count() == 2 * P / 8 + 2 * (250'000 + 2 * 1'000'000));
  CHECK(m.optimizer.count() == 4 * P / 8);  // Adam's m and v in bf16
}

TEST_CASE("Transformer Engine's low-precision Linear weights take their format's bytes under Megatron-Core") {
  // Of each 1M-parameter layer, 800k are Linear weights; the embedding and head stay BF16.
  stepsim::workload::ModelWork w = states_work();
  w.layer.linear_param_count = 800'000;
  constexpr std::int64_t L = 4 * 800'000;
  stepsim::Scenario s = states_scenario(DpKind::zero1, 8);
  s.training.framework = stepsim::Framework::megatron;
  s.cluster.gpu.arch = stepsim::GpuArch::blackwell;
  const auto params = [&](stepsim::Precision p) {
    s.training.precision = p;
    return sp::estimate_memory(s, w).stages.front().params.count();
  };
  CHECK(params(stepsim::Precision::bf16) == 2 * P);
  // FP8 with fp8_param_gather: the FP8 weight alone on Blackwell...
  CHECK(params(stepsim::Precision::fp8) == 2 * (P - L) + L);
  // ... a row- and a column-wise MXFP8 copy, 1 + 1/32 bytes each ...
  CHECK(params(stepsim::Precision::mxfp8) == 2 * (P - L) + L * 2 * 33 / 32);
  // ... and NVFP4 keeps the BF16 weight and caches both 1/2 + 1/16-byte copies for the step.
  CHECK(params(stepsim::Precision::nvfp4) == 2 * P + L * 2 * 9 / 16);
  // On Hopper FP8 also keeps its transpose.
  s.cluster.gpu.arch = stepsim::GpuArch::hopper;
  CHECK(params(stepsim::Precision::fp8) == 2 * P);
  // Other frameworks' weights stay at the compute precision.
  s.cluster.gpu.arch = stepsim::GpuArch::blackwell;
  s.training.framework = stepsim::Framework::torchtitan;
  CHECK(params(stepsim::Precision::fp8) == 2 * P);
  // FSDP2's gathered layers (two) hold theirs in the same format...
  s.training.framework = stepsim::Framework::megatron;
  s.data_parallel.kind = DpKind::fsdp;
  s.data_parallel.fsdp_version = 2;
  s.training.precision = stepsim::Precision::bf16;
  const auto bf16_fsdp2 = sp::estimate_memory(s, w).stages.front().params.count();
  CHECK(params(stepsim::Precision::fp8) == bf16_fsdp2 - 2 * 800'000);
  // ... FSDP1's (two, with prefetch) are its FlatParameter gathered in its param_dtype, BF16:
  // the FP8 run holds what the BF16 run does.
  s.data_parallel.fsdp_version = 1;
  s.training.precision = stepsim::Precision::bf16;
  const auto bf16_fsdp1 = sp::estimate_memory(s, w).stages.front().params.count();
  CHECK(params(stepsim::Precision::fp8) == bf16_fsdp1);
}

TEST_CASE("ZeRO-1 shards the 12 bytes of optimizer state over dp") {
  const auto m = states(DpKind::zero1, 8);
  CHECK(m.params.count() == 2 * P);
  CHECK(m.grads.count() == 4 * P);
  CHECK(m.optimizer.count() == 12 * P / 8);
}

// The small GPT's gradients in reverse registration order, in Megatron's buckets of 4e7
// parameters closed once they hold at least that: the LM head (32,768,000), the final norm
// (2,048) and layer 3's fc2 and fc1 (8,393,728) make 41,163,776; the rest of layer 3
// (4,202,496), layers 2 and 1 (12,596,224 each) and layer 0 down to its QKV weight (12,594,176)
// 41,989,120; layer 0's input norm and the embeddings 34,867,200. ZeRO-2 holds the bucket
// filling and the one before it in its ReduceScatter, at most the first two, in fp32.
TEST_CASE("ZeRO-2 also shards gradients but keeps two of its buckets unsharded") {
  const auto m = states(DpKind::zero2, 8);
  CHECK(m.grads.count() == 4 * P / 8);
  CHECK(m.optimizer.count() == 12 * P / 8);
  CHECK(m.buffers.count() == 4LL * (41'163'776 + 41'989'120));
}

// Without overlap_grad_reduce DeepSpeed's hook still reduces its one buffer whenever the next
// gradient would overfill it: one bucket held at a time, the largest of the three above, in
// fp32 (before, the whole model's gradient as one bucket, 118,020,096 parameters, beside the
// shard: more than ZeRO-1 holds).
TEST_CASE("ZeRO-2 without overlap holds one bucket unsharded") {
  auto s = states_scenario(DpKind::zero2, 8);
  s.data_parallel.overlap_grad_reduce = false;
  const auto m = sp::estimate_memory(s, states_work()).stages.front();
  CHECK(m.buffers.count() == 4LL * 41'989'120);
}

// The same answer from the program: the ReduceScatters of one micro-batch, in launch order,
// each a bucket in bf16 (grad_reduce_dtype); the most two consecutive ones hold, in fp32.
TEST_CASE("ZeRO-2's unsharded buckets are the ones its program reduce-scatters") {
  auto s = sp::test::small_scenario(1, 8, 1);
  s.data_parallel.kind = DpKind::zero2;
  s.model.vocab = 256'000;  // an LM head of 262 M parameters, a bucket of its own
  const auto work = stepsim::workload::build_work(s);
  const sp::test::FixedCosts costs;
  const stepsim::engine::Program program = sp::build_program(s, work, costs);
  std::vector<std::int64_t> buckets;
  for (auto i : sp::test::collectives_of(program, stepsim::CommKind::dp)) {
    const auto& call = program.ranks[0].calls[static_cast<std::size_t>(program.ranks[0].ops()[i].call)];
    if (call.op == stepsim::CollOp::reducescatter) buckets.push_back(call.size.count() / 2);
  }
  REQUIRE(buckets.size() >= 2);
  CHECK(buckets.front() >= 1024LL * 256'000);  // the LM head
  std::int64_t most = 0;
  for (std::size_t k = 1; k < buckets.size(); ++k) most = std::max(most, buckets[k - 1] + buckets[k]);
  CHECK(sp::estimate_memory(s, work).stages.front().buffers.count() == 4 * most);
}

TEST_CASE("FSDP shards everything and gathers the root plus two layers") {
  const auto m = states(DpKind::fsdp, 8);
  // fp32 flat-parameter shard (the master copy) plus bf16 root and current + prefetched layer.
  CHECK(m.params.count() == 4 * P / 8 + 2 * (750'000 + 2 * 1'000'000));
  // fp32 gradient shard plus the bf16 gradients of two layers awaiting ReduceScatter and, of the
  // root's, the head's alone (below).
  CHECK(m.grads.count() == 4 * P / 8 + 2 * (250'000 + 2 * 1'000'000));
  CHECK(m.optimizer.count() == 8 * P / 8);  // Adam's m and v
}

// When the activations peak, at the backward's start, the root unit has only the LM head's
// gradient, in the parameters' dtype: autograd computes it in the unsharded parameter's
// param_dtype and FSDP casts it to reduce_dtype in the unit's post-backward hook, which for the
// root runs once the embedding's gradient is in, after every layer's backward (FSDP1's
// _post_backward_hook, on the FlatParameter's gradient; FSDP2 after the whole backward). So the
// reduction's fp32 does not apply to it: 0.25M x 2 bytes, not 0.75M x 4.
TEST_CASE("FSDP holds only the LM head's gradient of the root's at the peak, in the compute precision") {
  auto s = states_scenario(DpKind::fsdp, 8);
  s.data_parallel.grad_reduce_dtype = stepsim::Precision::fp32;
  for (const int version : {1, 2}) {
    INFO("fsdp_version " << version);
    s.data_parallel.fsdp_version = version;
    const auto m = sp::estimate_memory(s, states_work()).stages.front();
    CHECK(m.grads.count() == 4 * P / 8 + 4 * 2 * 1'000'000 + 2 * 250'000);
  }
  // A head that shares the embedding's weight has that weight's gradient from the start: here the
  // 0.5M of the embedding beside the 0.25M.
  s.model.tied_embeddings = true;
  CHECK(sp::estimate_memory(s, states_work()).stages.front().grads.count() ==
        4 * P / 8 + 4 * 2 * 1'000'000 + 2 * 750'000);
}

TEST_CASE("FSDP without prefetch gathers one layer, and without resharding all of them") {
  auto s = states_scenario(DpKind::fsdp, 8);
  s.data_parallel.backward_prefetch = stepsim::BackwardPrefetch::none;
  const auto none = sp::estimate_memory(s, states_work()).stages.front();
  CHECK(none.params.count() == 4 * P / 8 + 2 * (750'000 + 1'000'000));
  s.data_parallel.reshard_after_forward = false;
  const auto kept = sp::estimate_memory(s, states_work()).stages.front();
  CHECK(kept.params.count() == 4 * P / 8 + 2 * P);
}

// FSDP1's rate limiter lets a unit's AllGather start once the free of the unit
// max_inflight_all_gathers before it has run (the program's waits, below), and the host, ahead
// of the GPU, issues them that early: so many layers are gathered at once, not two.
TEST_CASE("FSDP1 holds as many layers gathered as its AllGather limit lets in flight") {
  auto s = states_scenario(DpKind::fsdp, 8);
  for (const int limit : {1, 2, 3, 4, 8}) {
    s.data_parallel.max_inflight_all_gathers = limit;
    const long long layers = std::min(limit, 4);  // the stage has 4
    INFO("max_inflight_all_gathers " << limit);
    CHECK(sp::estimate_memory(s, states_work()).stages.front().params.count() ==
          4 * P / 8 + 2 * (750'000 + layers * 1'000'000));
  }
  // The program: at a limit of 3, layer 3's forward AllGather waits for layer 0's last forward op
  // (its free), layers 1 and 2's for none; so layers 1 to 3 are gathered together.
  auto g = sp::test::small_scenario(1, 8, 1);
  g.model.layers = 4;
  g.data_parallel.kind = DpKind::fsdp;
  g.data_parallel.max_inflight_all_gathers = 3;
  const sp::test::FixedCosts costs;
  const stepsim::engine::Program program = sp::build_program(g, sp::test::small_work(g), costs);
  const auto names = sp::test::op_names(program);
  const auto first = [&names](const std::string& prefix) {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i].rfind(prefix, 0) == 0) return static_cast<stepsim::engine::OpIndex>(i);
    FAIL("no op named " << prefix);
    return stepsim::engine::OpIndex{0};
  };
  const auto waits = [&](const std::string& gather) {
    const auto w = program.ranks[0].waits_of(first(gather));
    return std::vector<stepsim::engine::OpIndex>(w.begin(), w.end());
  };
  const stepsim::engine::OpIndex free0 = first("L0 mlp residual fwd");
  CHECK(waits("AllGather fsdp L1 forward").empty());
  CHECK(waits("AllGather fsdp L2 forward").empty());
  CHECK(waits("AllGather fsdp L3 forward") == std::vector<stepsim::engine::OpIndex>{free0});
  // The trace's counter starts from the same states: it follows the limit too.
  CHECK(program.ranks[0].memory_base == sp::estimate_memory(g, sp::test::small_work(g)).stages.front().states());
}

TEST_CASE("HSDP shards within one node") {
  const auto m = states(DpKind::hsdp, 32);
  CHECK(m.optimizer.count() == 8 * P / 8);
  CHECK(m.params.count() == 4 * P / 8 + 2 * (750'000 + 2 * 1'000'000));
}

TEST_CASE("1F1B keeps p - stage micro-batches of Korthikanti activations") {
  const auto s = gpt(8, 4, Schedule::one_f_one_b, 1, 8, Recompute::selective);
  CHECK(kept(s, 1) == 3 * 2 * layer_kept);
  CHECK(kept(s, 2) == 2 * 2 * layer_kept);
  // The last stage adds the logits, and at the loss's backward Megatron's cast of their fp32
  // gradient back to bf16 (2 bytes per local logit).
  CHECK(kept(s, 3) == 1 * 2 * layer_kept + head_kept + 2 * 2048LL * 51200 / 8);
  // The first stage adds the embedding's dropout mask (1 byte per local element with SP).
  CHECK(kept(s, 0) == 4 * (2 * layer_kept + sbh / 8));
}

TEST_CASE("GPipe keeps every micro-batch of activations") {
  const auto s = gpt(8, 4, Schedule::gpipe, 1, 8, Recompute::selective);
  CHECK(kept(s, 1) == 8 * 2 * layer_kept);
}

TEST_CASE("the interleaved schedule keeps its warm-up plus one model chunk") {
  // Stage 1 of 4 with 2 chunks of 2 layers: warm-up 2·(4 − 1 − 1) + (2 − 1)·4 = 8 chunks.
  const auto s = gpt(16, 4, Schedule::interleaved, 2, 8, Recompute::selective);
  const auto kept_1 = sp::kept_activations(s, stepsim::workload::build_work(s), 1);
  CHECK(kept_1.chunks == 9);
  CHECK(kept_1.bytes.count() == 9 * 2 * layer_kept);
}

TEST_CASE("full recomputation keeps layer inputs plus one layer's working set") {
  const auto s = gpt(8, 4, Schedule::one_f_one_b, 1, 8, Recompute::full);
  const std::int64_t input = 2 * sbh / 8;
  CHECK(kept(s, 1) == 3 * 2 * input + (layer_kept - input));
}

TEST_CASE("the trace's memory counter peaks at the modelled peak of each stage") {
  check_counter_matches_model(gpt(8, 4, Schedule::one_f_one_b, 1, 8, Recompute::selective));
  check_counter_matches_model(gpt(8, 4, Schedule::gpipe, 1, 8, Recompute::full));
  check_counter_matches_model(gpt(16, 4, Schedule::interleaved, 2, 8, Recompute::selective));
  // Zero-bubble: B frees all but the W pass's inputs, W frees those.
  check_counter_matches_model(gpt(8, 4, Schedule::zb_h1, 1, 8, Recompute::selective));
  check_counter_matches_model(gpt(8, 4, Schedule::zb_h2, 1, 8, Recompute::selective));
}

TEST_CASE("a model larger than the GPU does not fit and says by how much") {
  auto s = gpt(8, 4, Schedule::one_f_one_b, 1, 8, Recompute::none);
  s.cluster.gpu.memory = Bytes::gib(1);
  const auto estimate = sp::estimate_memory(s, stepsim::workload::build_work(s));
  CHECK_FALSE(estimate.fits());
  CHECK_FALSE(sp::memory_report(estimate).fits);
  CHECK(sp::memory_note(estimate).rfind("does not fit: ", 0) == 0);
  CHECK(sp::memory_note(estimate).find(" GiB in use at the peak + 2.0 GiB headroom > capacity 1.0 GiB (stage 0)") !=
        std::string::npos);
}

// 70 GiB of live tensors, 1 GiB outside the allocator and 2 GiB of headroom; with memory to
// spare the allocator would hold 4 GiB beyond the tensors. On 80 GiB it does; on 76 GiB it has
// 76 - 2 - 1 - 70 = 3 GiB left, frees cached blocks to stay within it, and the layout fits as a
// close call; on 72 GiB the tensors alone do not fit: 71 GiB in use with no reserve.
TEST_CASE("a job that fits but for the allocator's estimated reserve is called a close call") {
  constexpr long long kGiB = 1LL << 30;
  sp::StageMemory m;
  m.activations = Bytes(70 * kGiB);
  m.runtime = Bytes(kGiB);
  m.reserve_ample = Bytes(4 * kGiB);
  sp::MemoryEstimate e;
  e.headroom = Bytes(2 * kGiB);
  const auto at = [&](long long capacity_gib) {
    e.capacity = Bytes(capacity_gib * kGiB);
    e.stages = {m};
    sp::press_reserve(e.stages.front(), e.capacity, e.headroom);
    return e.stages.front().reserve.count();
  };
  CHECK(at(80) == 4 * kGiB);
  CHECK(e.fits());
  CHECK(sp::memory_note(e).empty());
  CHECK(at(76) == 3 * kGiB);
  CHECK(e.fits());
  CHECK(sp::memory_report(e).device + 2.0 * kGiB == 76.0 * kGiB);
  CHECK(sp::memory_note(e).rfind("memory: a close call that fragmentation decides: the caching allocator would hold "
                                 "4.0 GiB beyond the live tensors with memory to spare, and has 3.0 GiB left; ",
                                 0) == 0);
  CHECK(at(72) == 0);
  CHECK_FALSE(e.fits());
  // One stage: the note names none.
  CHECK(sp::memory_note(e) == "does not fit: 71.0 GiB in use at the peak + 2.0 GiB headroom > capacity 72.0 GiB");
}

// The memory model and the program take the shard group from one place: TP 2 on 8-GPU
// nodes gives 4 DP ranks per node, which do not divide dp 6, so the group is gcd(4, 6) = 2.
TEST_CASE("HSDP's default shard group divides dp and the memory model shards over it") {
  const auto s = states_scenario(DpKind::hsdp, 6);
  auto tp2 = s;
  tp2.parallel.tp = 2;
  tp2.cluster.nodes = 2;
  CHECK(stepsim::hsdp_shard_ranks(tp2) == 2);
  CHECK(sp::state_sharding(tp2).optimizer == 2);
  CHECK(stepsim::hsdp_shard_ranks(states_scenario(DpKind::hsdp, 32)) == 8);
}

// ZeRO-2's buckets are Megatron's: with dp 64 of 6.4e7 parameters. Of the small GPT with 8
// layers (12,596,224 parameters each), in reverse order: the LM head and final norm
// (32,770,048), layers 7 and 6 and layer 5's fc2 and fc1 (8,393,728) make 66,356,224; the rest
// of layer 5 (4,202,496), layers 4 to 1 and layer 0 down to its projection weight (9,445,376)
// 64,032,768; the rest 38,016,000. The first two are held together, in fp32.
TEST_CASE("ZeRO-2's bucket buffers take Megatron's bucket size") {
  auto s = states_scenario(DpKind::zero2, 64);
  s.model.layers = 8;
  const auto m = sp::estimate_memory(s, states_work()).stages.front();
  CHECK(m.buffers.count() == 4 * (66'356'224LL + 64'032'768LL));
  // One bucket as large as the model (Megatron's --ddp-bucket-size) holds every gradient.
  s.data_parallel.bucket_parameters = 1'000'000'000;
  CHECK(sp::estimate_memory(s, states_work()).stages.front().buffers.count() == 4 * 168'404'992LL);
}

// Under a pipeline schedule PyTorch keeps every unit of the stage gathered after a backward
// that is not the last, and their gradients unsharded until the last.
TEST_CASE("FSDP under a pipeline holds the stage's units gathered and their gradients unsharded") {
  auto s = states_scenario(DpKind::fsdp, 8);
  s.parallel.pp = 2;
  s.cluster.nodes = 2;
  const auto m = sp::estimate_memory(s, states_work()).stages.front();
  // Stage 0: 2 layers and the 0.5M embedding; shards of 4 bytes over 8.
  const long long stage = 2 * 1'000'000 + 500'000;
  CHECK(m.params.count() == 4 * stage / 8 + 2 * stage);
  CHECK(m.grads.count() == 4 * stage / 8 + 2 * stage);
}

// A stack that mixes dense and MoE layers (DeepSeek-V3's first_dense_layers): the first layer
// here is a dense one of 3M parameters, the others MoE layers of 1M. Stage 0 of two holds the
// dense layer, one MoE layer and the 0.5M embedding: 4.5M parameters, every one of them
// gathered in bf16 and its gradient held unsharded, as the pipelined FSDP above.
TEST_CASE("FSDP gathers each layer of a stage at its own size where dense and MoE layers mix") {
  auto s = states_scenario(DpKind::fsdp, 8);
  s.parallel.pp = 2;
  s.cluster.nodes = 2;
  stepsim::workload::ModelWork w = states_work();
  w.dense_layer.param_count = 3'000'000;
  w.dense = {true, false, false, false};
  const auto m = sp::estimate_memory(s, w).stages.front();
  const long long stage = 3'000'000 + 1'000'000 + 500'000;
  CHECK(m.params.count() == 4 * stage / 8 + 2 * stage);
  CHECK(m.grads.count() == 4 * stage / 8 + 2 * stage);
  // Without resharding after the forward every layer stays gathered too: 6.75M in bf16.
  s.parallel.pp = 1;
  s.cluster.nodes = 1;
  s.data_parallel.reshard_after_forward = false;
  const long long all = 3'000'000 + 3 * 1'000'000 + 750'000;
  CHECK(sp::estimate_memory(s, w).stages.front().params.count() == 4 * all / 8 + 2 * all);
}

// On one stage the activations peak at the backward's start, where FSDP holds gathered the last
// units the prefetch has issued and the gradients of the last two, each unit at its own size
// (the program gathers and reduces them so). Dense layers of 0.4M beside MoE layers of 1M, the
// 0.75M root, 8 ranks, bf16 gathers and gradients:
// - the last two layers dense: 2 x 0.4M gathered and waiting, not 2 x 1M;
// - alternating (Llama 4's dense, MoE, dense, MoE): the last two one of each, 1.4M; FSDP1 at an
//   AllGather limit of 3 holds layers 1 to 3 gathered, 2.4M, and still two gradients, 1.4M.
TEST_CASE("FSDP holds its last units gathered at their own sizes where dense and MoE layers mix") {
  auto s = states_scenario(DpKind::fsdp, 8);
  stepsim::workload::ModelWork w = states_work();
  w.dense_layer.param_count = 400'000;
  const auto check = [&](std::vector<bool> dense, long long gathered, long long waiting) {
    w.dense = std::move(dense);
    const long long all = 2 * 1'000'000 + 2 * 400'000 + 750'000;
    const auto m = sp::estimate_memory(s, w).stages.front();
    CHECK(m.params.count() == 4 * all / 8 + 2 * (750'000 + gathered));
    CHECK(m.grads.count() == 4 * all / 8 + 2 * waiting + 2 * 250'000);
  };
  check({false, false, true, true}, 2 * 400'000, 2 * 400'000);
  check({true, false, true, false}, 1'400'000, 1'400'000);
  s.data_parallel.max_inflight_all_gathers = 3;
  check({true, false, true, false}, 2'400'000, 1'400'000);
}

// Megatron-FSDP (Megatron-LM 4415119414, megatron/core/distributed/fsdp/), by hand from its
// rules for the small model above on 8 GPUs in per-tensor FP8 on Blackwell, each layer's 1M
// parameters 800k Linear weights (FP8 with fp8_param_gather) and 200k others (BF16), the 0.5M
// embedding and 0.25M head BF16; main gradients BF16, as grad_reduce_in_fp32 off leaves them:
// - ParamAndGradBuffer keeps three buffers sharded over the 8 ranks (optim_grads_params): fp32
//   main weights 4 x 4.75M / 8 = 2,375,000; the model weights, FP8 Linear weights as uint8
//   and the rest BF16, (3.2M x 1 + 1.55M x 2) / 8 = 787,500; BF16 main gradients
//   2 x 4.75M / 8 = 1,187,500.
// - fsdp_double_buffer's two pools of UB_BUFFER_NUM = 2 units: two layers gathered,
//   2 x (800k x 1 + 200k x 2) = 2,400,000, and two layers' BF16 gradients 2 x 1M x 2 = 4,000,000.
// - The modules outside the units stay gathered in BF16 for the step: 0.75M x 2 = 1,500,000;
//   the head's gradient is held from the start of the backward, 0.25M x 2 = 500,000, the
//   embedding's only after the layers' backward (1M more when the head shares its weight).
// - Adam's fp32 moments on the main weights' shards: 8 x 4.75M / 8 = 4,750,000.
TEST_CASE("Megatron-FSDP holds its sharded buffers, a double buffer of two layers and the root gathered") {
  stepsim::workload::ModelWork w = states_work();
  w.layer.linear_param_count = 800'000;
  auto s = states_scenario(DpKind::fsdp, 8);
  s.training.framework = stepsim::Framework::nemo;
  s.training.precision = stepsim::Precision::fp8;
  s.training.main_grad = stepsim::Precision::bf16;
  s.cluster.gpu.arch = stepsim::GpuArch::blackwell;
  s.data_parallel.fsdp_impl = stepsim::FsdpImpl::megatron;
  const auto m = sp::estimate_memory(s, w).stages.front();
  CHECK(m.params.count() == 2'375'000 + 787'500 + 2'400'000 + 1'500'000);
  CHECK(m.grads.count() == 1'187'500 + 4'000'000 + 500'000);
  CHECK(m.optimizer.count() == 4'750'000);
  CHECK(m.buffers.count() == 0);
  // The same model under PyTorch's FSDP holds no model-weight shard beside its fp32 one, and of
  // the root's gradients the head's alone as well; FSDP1 gathers each layer's FlatParameter in its
  // param_dtype, BF16 (2 x 1M x 2 = 4,000,000), FSDP2 the Linear weights in FP8 as above.
  s.data_parallel.fsdp_impl = stepsim::FsdpImpl::pytorch;
  const auto pytorch = sp::estimate_memory(s, w).stages.front();
  CHECK(pytorch.params.count() == 2'375'000 + 4'000'000 + 1'500'000);
  CHECK(pytorch.grads.count() == 1'187'500 + 4'000'000 + 500'000);
  s.data_parallel.fsdp_version = 2;
  CHECK(sp::estimate_memory(s, w).stages.front().params.count() == 2'375'000 + 2'400'000 + 1'500'000);
  s.data_parallel.fsdp_version = 1;
  // A head that shares the embedding's weight has its gradient from the start of the backward.
  s.data_parallel.fsdp_impl = stepsim::FsdpImpl::megatron;
  s.model.tied_embeddings = true;
  CHECK(sp::estimate_memory(s, w).stages.front().grads.count() == 1'187'500 + 4'000'000 + 500'000 + 1'000'000);
}

// Under a pipeline Megatron-FSDP still frees each layer after its forward and its backward
// (its hooks are the module's, whatever the schedule): two layers, not the stage's all.
TEST_CASE("Megatron-FSDP under a pipeline holds two layers, and the embedding's gradient") {
  auto s = states_scenario(DpKind::fsdp, 8);
  s.training.framework = stepsim::Framework::megatron;
  s.data_parallel.fsdp_impl = stepsim::FsdpImpl::megatron;
  s.model.layers = 8;
  s.parallel.pp = 2;
  s.cluster.nodes = 2;
  const auto m = sp::estimate_memory(s, states_work()).stages.front();
  // Stage 0: 4 layers and the 0.5M embedding, BF16; shards over 8 of 4 (main) + 2 (model) bytes.
  const long long stage = 4 * 1'000'000 + 500'000;
  CHECK(m.params.count() == (4 + 2) * stage / 8 + 2 * (500'000 + 2 * 1'000'000));
  // fp32 main gradients sharded; two layers' and the embedding's gradients in BF16.
  CHECK(m.grads.count() == 4 * stage / 8 + 2 * (500'000 + 2 * 1'000'000));
}

// torchtitan's tensor parallelism (DTensor; its loss runs under loss_parallel, here eager)
// with sequence parallelism all-gathers a Linear's input and the Linear saves it whole,
// where Megatron saves its shard and gathers it again for the backward: the LM head keeps
// s·b·h, not s·b·h/t, and a recomputed layer holds its attention and MLP inputs whole until
// its backward. At the 22B shape, TP 8: 7/8 of s·b·h·2 bytes more for the head, twice that
// for the working set.
TEST_CASE("torchtitan's sequence parallelism keeps the inputs it gathered whole") {
  stepsim::Scenario megatron = gpt(2, 1, Schedule::one_f_one_b, 1, 1, Recompute::full);
  megatron.model.mlp = stepsim::MlpKind::swiglu;
  stepsim::Scenario torchtitan = megatron;
  torchtitan.training.framework = stepsim::Framework::torchtitan;
  torchtitan.training.cross_entropy = stepsim::CrossEntropy::eager;
  torchtitan.data_parallel.kind = DpKind::fsdp;  // as torchtitan runs TP: its DDP is autocast's fp32 stream
  const auto m = stepsim::workload::build_work(megatron), t = stepsim::workload::build_work(torchtitan);
  const std::int64_t gathered = sbh * 7 / 8 * 2;
  // The eager loss keeps fp32 log-probabilities as the fused one keeps its fp32 softmax.
  CHECK(t.post.activations.count() - m.post.activations.count() == gathered);
  CHECK(sp::layer_working_set(torchtitan, t, 0).count() - sp::layer_working_set(megatron, m, 0).count() ==
        2 * gathered);
}

// Without recompute each torchtitan layer keeps the attention's and the MLP's inputs as
// PrepareModuleInput all-gathered them: wq, wk, wv and w1, w3 (nn.Linear) save the gathered
// tensor. The 22B shape with SwiGLU (ffn 4h, fc1 2·4h wide) at TP 8, s 2048, b 1, h 6144,
// 64 heads (8 local), bf16, per layer:
//   the two norms' inputs on the rank's rows:             2 · 2·sbh/8 =  4·sbh/8
//   the attention's and the MLP's inputs gathered whole:  2 · 2·sbh   = 32·sbh/8
//   Q, K, V and the attention output:                     4 · 2·sbh/8 =  8·sbh/8
//   w1 and w3's output (8h/8 wide) and w2's input (4h/8): 2·sbh·(8 + 4)/8 = 24·sbh/8
//   the log-sum-exp:                                      4 bytes · 8 heads · 2048 rows
// 68·sbh/8 + 65,536 = 107,020,288 bytes, where Megatron (the inputs kept as shards) keeps
// 40·sbh/8 + 65,536. Selective recompute of the attention core keeps them too; full recompute
// keeps the layer input alone, s·b·h/t.
TEST_CASE("without recompute torchtitan's layers keep the attention and MLP inputs they gathered whole") {
  stepsim::Scenario megatron = gpt(2, 1, Schedule::one_f_one_b, 1, 1, Recompute::none);
  megatron.model.mlp = stepsim::MlpKind::swiglu;
  stepsim::Scenario torchtitan = megatron;
  torchtitan.training.framework = stepsim::Framework::torchtitan;
  torchtitan.training.cross_entropy = stepsim::CrossEntropy::eager;
  torchtitan.data_parallel.kind = DpKind::fsdp;  // as torchtitan runs TP: its DDP is autocast's fp32 stream
  const auto layer = [](stepsim::Scenario sc, Recompute r) {
    sc.training.recompute = r;
    return stepsim::workload::build_work(sc).layer.activations.count();
  };
  constexpr std::int64_t lse = 4 * 8 * 2048;
  CHECK(layer(torchtitan, Recompute::none) == 68 * sbh / 8 + lse);
  CHECK(68 * sbh / 8 + lse == 107'020'288);
  CHECK(layer(megatron, Recompute::none) == 40 * sbh / 8 + lse);
  CHECK(layer(torchtitan, Recompute::selective) == 68 * sbh / 8 + lse);
  CHECK(layer(torchtitan, Recompute::full) == 2 * sbh / 8);
}

namespace {

// The 22B shape's pipeline as torchtitan runs it: FSDP under torch.distributed.pipelining,
// full recomputation, 1F1B over 4 stages of 2 layers, 8 micro-batches.
stepsim::Scenario pytorch_pipeline() {
  stepsim::Scenario s = gpt(8, 4, Schedule::one_f_one_b, 1, 8, Recompute::full);
  s.data_parallel.kind = DpKind::fsdp;
  return s;
}

// What a stage sends on: one micro-batch's residual stream, s·b·h/t bf16 elements with SP.
constexpr std::int64_t boundary = 2 * sbh / 8;
// The last stage's output: the bf16 logits of its local vocabulary, b·s·V/t.
constexpr std::int64_t logits = 2 * 2048LL * 51200 / 8;

}  // namespace

// PipelineStage._prepare_forward_infra allocates an activation receive buffer per micro-batch
// on every stage but the first, _prepare_backward_infra a gradient receive buffer per
// micro-batch on every stage but the last; both live as long as the stage. Megatron's
// pipelines receive into tensors allocated per transfer.
TEST_CASE("PyTorch's pipeline stages hold a receive buffer per micro-batch for activations and gradients") {
  const auto s = pytorch_pipeline();
  const auto estimate = sp::estimate_memory(s, stepsim::workload::build_work(s));
  CHECK(estimate.stages[0].buffers.count() == 8 * boundary);
  CHECK(estimate.stages[1].buffers.count() == 16 * boundary);
  CHECK(estimate.stages[3].buffers.count() == 8 * boundary);
  auto megatron = s;
  megatron.data_parallel.kind = DpKind::ddp;
  CHECK(sp::estimate_memory(megatron, stepsim::workload::build_work(megatron)).stages[1].buffers.count() == 0);
}

// PipelineStage.forward_one_chunk appends each micro-batch's output to output_chunks, which
// the schedule merges after the last backward: the last stage keeps every micro-batch's
// logits, and before PyTorch 2.8 (torch.distributed.pipelining's stage.py then appended on
// every stage) the other stages every output they sent. A stage's first layer saves its input
// in the receive buffer it arrived in, already held (above).
TEST_CASE("PyTorch's pipeline stages keep every micro-batch's output until the step ends") {
  const auto torchtitan = pytorch_pipeline();
  auto megatron = torchtitan;
  megatron.data_parallel.kind = DpKind::ddp;
  // The first stage peaks at its last forward: 4 micro-batches in flight, 8 outputs kept.
  CHECK(kept(torchtitan, 0) - kept(megatron, 0) == 8 * boundary);
  // The last stage peaks in the last micro-batch's backward, with all 8 logits kept and its
  // first layer's input in a receive buffer.
  CHECK(kept(torchtitan, 3) - kept(megatron, 3) == 8 * logits - boundary);
  // A middle stage: 3 in flight, each one input in its receive buffer; 8 outputs kept.
  CHECK(kept(torchtitan, 1) - kept(megatron, 1) == 8 * boundary - 3 * boundary);
}

TEST_CASE("the trace's memory counter follows PyTorch's pipeline outputs and receive buffers") {
  check_counter_matches_model(pytorch_pipeline());
  auto interleaved = gpt(16, 4, Schedule::interleaved, 2, 8, Recompute::full);
  interleaved.data_parallel.kind = DpKind::fsdp;
  check_counter_matches_model(interleaved);
}

TEST_CASE("torchtitan's attention backward holds K, V and their gradients as wide as the queries") {
  // Two stages (the first has no loss) under full recompute: the first stage peaks in its first
  // backward, with one layer's working set on top of what it keeps. FSDP's stages, so that
  // both frameworks run PyTorch's pipelining and keep the same stage outputs.
  auto s = sp::test::small_scenario(1, 2, 1);
  s.data_parallel.kind = stepsim::DpKind::fsdp;
  s.parallel.pp = 2;
  s.training.recompute = Recompute::full;
  s.model.kv_heads = 4;  // 16 query heads of 64 share 4 K/V heads
  const auto first_stage = [](const stepsim::Scenario& sc) {
    return sp::estimate_memory(sc, stepsim::workload::build_work(sc)).stages.front().activations.count();
  };
  const long long megatron = first_stage(s);
  s.training.framework = stepsim::Framework::torchtitan_compile;
  s.training.main_grad = stepsim::Precision::bf16;  // a bf16 model, not autocast's fp32 residual stream
  // repeat_kv: K, V, dK and dV of 2,048 tokens 12 heads of 64 wider, in bf16.
  CHECK(first_stage(s) - megatron == 4LL * 2048 * (16 - 4) * 64 * 2);
  // Eager, the recomputed layer holds K and V repeated as the attention saved them, and its
  // backward adds dK and dV: the same four tensors.
  s.training.framework = stepsim::Framework::torchtitan;
  s.training.fusion = stepsim::Fusion::eager;
  auto eager_megatron = s;
  eager_megatron.training.framework = stepsim::Framework::unspecified;
  CHECK(first_stage(s) - first_stage(eager_megatron) == 4LL * 2048 * (16 - 4) * 64 * 2);
}

// Eager, torchtitan's repeat_kv (expand, then a reshape that copies) hands
// scaled_dot_product_attention K and V repeated to the query heads, and the kernel saves those
// for its backward: without recompute a layer keeps K and V as wide as the queries. The small
// model (h 1024, 16 query heads of 64, s 2048, b 1, TP 1) with 4 K/V heads keeps K and V
// 2 · 2048 · (16 − 4) · 64 · 2 bytes = 6,291,456 wider than at the K/V heads' width, which is
// what multi-head attention keeps; Megatron, and torchtitan compiled (the partitioner saves the
// narrow K and V and repeats them again in the backward), keep them narrow. The attention
// backward then holds only dK and dV wider than the K/V heads, 6,291,456 bytes more at the
// first stage's peak (one layer, one micro-batch in flight, no loss), not four tensors'.
TEST_CASE("torchtitan's eager attention keeps K and V repeated to the query heads") {
  auto s = sp::test::small_scenario(1, 2, 1);
  s.parallel.pp = 2;
  s.training.recompute = Recompute::none;
  const auto layer = [](stepsim::Scenario sc, int kv_heads) {
    sc.model.kv_heads = kv_heads;
    return stepsim::workload::build_work(sc).layer.activations.count();
  };
  const auto first_stage = [](stepsim::Scenario sc, int kv_heads) {
    sc.model.kv_heads = kv_heads;
    return sp::estimate_memory(sc, stepsim::workload::build_work(sc)).stages.front().activations.count();
  };
  constexpr std::int64_t wider = 2LL * 2048 * (16 - 4) * 64 * 2;
  CHECK(wider == 6'291'456);
  CHECK(layer(s, 16) - layer(s, 4) == wider);  // Megatron
  auto eager = s;
  eager.training.framework = stepsim::Framework::torchtitan;
  eager.training.fusion = stepsim::Fusion::eager;
  CHECK(layer(eager, 4) == layer(eager, 16));
  CHECK(first_stage(eager, 4) - first_stage(eager, 16) == wider);
  auto compiled = s;
  compiled.training.framework = stepsim::Framework::torchtitan_compile;
  CHECK(layer(compiled, 16) - layer(compiled, 4) == wider);
}

namespace {

// The largest value of each stage's memory counter less the stage's states: the activations
// the counter holds at its peak.
std::vector<std::int64_t> counter_activations(const stepsim::Scenario& s) {
  const auto estimate = sp::estimate_memory(s, stepsim::workload::build_work(s));
  std::vector<std::int64_t> peaks = counter_peaks(s);
  for (std::size_t i = 0; i < peaks.size(); ++i) peaks[i] -= estimate.stages[i].states().count();
  return peaks;
}

std::int64_t first_stage_activations(const stepsim::Scenario& s) {
  return sp::estimate_memory(s, stepsim::workload::build_work(s)).stages.front().activations.count();
}

}  // namespace

// The counter holds the attention backward's buffers from the backward op before the attention's
// to the attention's last piece. The small model (s 2048, h 1024, 16 heads of 64, TP 1) at CP 4
// over two stages under full recompute: one rank's K/V block is 512 tokens · 2 · 1024 · 2 bytes
// = 2,097,152 and its queries half that; gathered (all_gather) the attention backward holds
// 13.5 blocks and the queries, around the ring (p2p) 4 and the queries (the test above), so the
// first stage's counter peaks 9.5 blocks, 19,922,944 bytes, higher gathered.
// torchtitan eager without recompute, 4 K/V heads: dK and dV 2 · 2048 · (16 − 4) · 64 · 2 =
// 6,291,456 bytes wider than the K/V heads during the attention backward.
TEST_CASE("the trace's memory counter holds the attention backward's K/V buffers") {
  auto s = sp::test::small_scenario(1, 2, 1);
  s.parallel.pp = 2;
  s.parallel.cp = 4;
  s.training.recompute = Recompute::full;
  const std::int64_t ring = counter_activations(s)[0];
  CHECK(ring == first_stage_activations(s));
  s.context_parallel.comm = stepsim::CpComm::all_gather;
  const std::int64_t gathered = counter_activations(s)[0];
  CHECK(gathered == first_stage_activations(s));
  CHECK(gathered - ring == 19 * 512LL * 2 * 1024 * 2 / 2);

  auto eager = sp::test::small_scenario(1, 2, 1);
  eager.parallel.pp = 2;
  eager.training.recompute = Recompute::none;
  eager.training.framework = stepsim::Framework::torchtitan;
  eager.training.fusion = stepsim::Fusion::eager;
  const std::int64_t mha = counter_activations(eager)[0];
  eager.model.kv_heads = 4;
  const std::int64_t gqa = counter_activations(eager)[0];
  CHECK(gqa == first_stage_activations(eager));
  CHECK(gqa - mha == 2LL * 2048 * (16 - 4) * 64 * 2);
}

// Context parallelism's attention backward buffers, counted by hand from each framework's
// source. The small model (s 2048, h 1024, 16 heads of 64, TP 1, micro-batch 1) at CP 4: a rank
// has 512 tokens, its K/V block kv = 512 · 2 · 1024 · 2 = 2,097,152 bytes and its queries
// q = 512 · 1024 · 2 = 1,048,576.
// - Transformer Engine's ring: two p2p_comm_buffers of torch.empty((2, *kv.shape)) in the K/V's
//   dtype (4 kv) and dq_buffer = torch.empty_like(q): 9,437,184.
// - Transformer Engine's gather, at the second index_select of the reordered dK/dV: k_ag and v_ag
//   (cp kv = 8,388,608), the reordered dK (cp/2 kv), dV before and after its reorder (cp kv), the
//   steps' dk_per_step and dv_per_step ((rank + 1)/2 + (2 cp − rank)/2 = 4.5 kv), dq and
//   dq_per_step's halves (2 q), less a kernel's own dQ, dK and dV (q + kv): q + 13.5 kv =
//   29,360,128.
// - PyTorch's ring backward (torchtitan, no repeated heads here): the float32 dK/dV,
//   512 · 2 · 1024 · 4 = 4,194,304 bytes, three at once (12,582,912), the float32 dQ
//   (2,097,152), and the K/V: allgather the gathered 4 blocks and next_kv's copy (5 kv =
//   10,485,760), 25,165,824 in all; alltoall the block in hand, next_kv and the one arriving
//   (3 kv), 20,971,520. At CP 2 (1,024 tokens, kv 4,194,304) alltoall holds 2 kv at most, the
//   copy the first step sent still referenced at the second: 3 · 8,388,608 + 2 · 4,194,304 +
//   4,194,304 = 37,748,736.
TEST_CASE("context parallelism's attention backward holds each framework's buffers") {
  auto s = sp::test::small_scenario(1, 1, 1);
  s.parallel.cp = 4;
  const auto buffers = [](const stepsim::Scenario& sc) {
    return sp::attention_backward_buffers(sc, stepsim::workload::build_work(sc)).count();
  };
  CHECK(buffers(s) == 9'437'184);
  s.context_parallel.comm = stepsim::CpComm::all_gather;
  CHECK(buffers(s) == 29'360'128);

  auto titan = s;
  titan.training.framework = stepsim::Framework::torchtitan;
  CHECK(buffers(titan) == 25'165'824);
  titan.context_parallel.comm = stepsim::CpComm::p2p;
  CHECK(buffers(titan) == 20'971'520);
  titan.parallel.cp = 2;
  CHECK(buffers(titan) == 37'748'736);
}

// Megatron-Core's output layer is a ColumnParallelLinear whose
// LinearWithGradAccumulationAndAsyncCommunication saves its input (the final norm's output) for
// the weight gradient, the rank's s/t rows under sequence parallelism (gathered again in the
// backward), beside the final norm's input, which the norm saves. At the 22B shape (s 2048,
// b 1, h 6144, V 51,200) at TP 8: 2 · 2·sbh/8 = 6,291,456 bytes and the fp32 logits
// 4 · 2048 · 6,400 = 52,428,800; without sequence parallelism the norm's input and output are
// whole, 2 · 2·sbh = 50,331,648 bytes. torchtitan's nn.Linear saves the input it all-gathered:
// 2·sbh/8 + 2·sbh = 28,311,552 bytes with the norm's.
TEST_CASE("the LM head keeps its input for its weight gradient beside the final norm's") {
  stepsim::Scenario s = gpt(2, 1, Schedule::one_f_one_b, 1, 1, Recompute::none);
  s.model.mlp = stepsim::MlpKind::swiglu;
  const auto head = [](const stepsim::Scenario& sc) {
    return stepsim::workload::build_work(sc).post.activations.count();
  };
  constexpr std::int64_t fp32_logits = 4 * 2048LL * 51200 / 8;
  CHECK(head(s) == 2 * 2 * sbh / 8 + fp32_logits);
  CHECK(2 * 2 * sbh / 8 == 6'291'456);
  auto whole = s;
  whole.parallel.sequence_parallel = false;
  CHECK(head(whole) == 2 * 2 * sbh + fp32_logits);
  auto torchtitan = s;
  torchtitan.training.framework = stepsim::Framework::torchtitan;
  torchtitan.training.cross_entropy = stepsim::CrossEntropy::eager;
  torchtitan.data_parallel.kind = DpKind::fsdp;  // as torchtitan runs TP: its DDP is autocast's fp32 stream
  CHECK(head(torchtitan) == 2 * sbh / 8 + 2 * sbh + fp32_logits);  // eager keeps fp32 log-probabilities
  CHECK(2 * sbh / 8 + 2 * sbh == 28'311'552);
}

namespace {

// Each stage's memory counter: where it starts, its highest and lowest values, where it ends.
struct Counter {
  std::int64_t first = 0, peak = 0, low = 0, last = 0;
};

std::vector<Counter> counters(const stepsim::Scenario& s) {
  const auto work = stepsim::workload::build_work(s);
  const sp::test::FixedCosts costs;
  const stepsim::Timeline timeline = stepsim::engine::run(sp::build_program(s, work, costs));
  std::vector<Counter> out;
  for (const auto& rank : timeline.ranks) {
    REQUIRE(!rank.memory.empty());
    Counter c{rank.memory.front().value.count(), 0, rank.memory.front().value.count(),
              rank.memory.back().value.count()};
    for (const auto& sample : rank.memory) {
      c.peak = std::max(c.peak, sample.value.count());
      c.low = std::min(c.low, sample.value.count());
    }
    out.push_back(c);
  }
  return out;
}

// Each stage's counter peaks at the stage's modelled peak to the byte, never goes below the
// states it starts with and returns to them: every op frees only what its own block allocated.
void check_counter_is_model(const stepsim::Scenario& s) {
  const auto estimate = sp::estimate_memory(s, stepsim::workload::build_work(s));
  const std::vector<Counter> stages = counters(s);
  REQUIRE(stages.size() == estimate.stages.size());
  for (std::size_t i = 0; i < stages.size(); ++i) {
    INFO("stage " << i);
    CHECK(stages[i].first == estimate.stages[i].states().count());
    CHECK(stages[i].peak == estimate.stages[i].peak().count());
    CHECK(stages[i].low == stages[i].first);
    CHECK(stages[i].last == stages[i].first);
  }
}

// Two MoE layers (8 experts, top 2) at EP 4, `m` micro-batches of one sequence.
stepsim::Scenario moe(int m, bool overlap) {
  stepsim::Scenario s = sp::test::small_scenario(1, 4, m);
  s.model.moe = {8, 2, 4096};
  s.model.moe.a2a_overlap = overlap;
  s.parallel.ep = 4;
  return s;
}

}  // namespace

// Megatron-Core's combined 1F1B runs the backward of micro-batch n beside the forward of n + 1,
// layer L − 1 − i beside layer i: the backward's head and each of its layers end before the
// forward's layer that runs beside them, so the pair frees before it allocates. Without a
// pipeline its peak is then the plain 1F1B's, one micro-batch's activations with the loss's
// backward, and not two micro-batches'. Interleaved (p 2, v 2), each stage's peak is where its
// counter goes.
TEST_CASE("the combined forward and backward keeps what the trace's memory counter holds") {
  const auto plain = sp::estimate_memory(moe(4, false), stepsim::workload::build_work(moe(4, false)));
  const auto combined = sp::estimate_memory(moe(4, true), stepsim::workload::build_work(moe(4, true)));
  CHECK(combined.stages[0].activations == plain.stages[0].activations);
  check_counter_is_model(moe(4, true));
  check_counter_is_model(moe(4, false));
  auto interleaved = moe(4, true);
  interleaved.model.layers = 4;
  interleaved.parallel.pp = 2;
  interleaved.parallel.schedule = Schedule::interleaved;
  interleaved.parallel.virtual_stages = 2;
  check_counter_is_model(interleaved);
  interleaved.training.recompute = Recompute::selective;
  check_counter_is_model(interleaved);
}

// Multi-token prediction runs in the head's block, whose ops' names end as the main head's
// ("mtp0 final rmsnorm backward"): only the head's own last backward op frees the block.
TEST_CASE("the memory counter frees the head with multi-token prediction once") {
  auto s = sp::test::small_scenario(1, 4, 4);
  s.model.mlp = stepsim::MlpKind::swiglu;
  s.model.mtp_layers = 1;
  check_counter_is_model(s);
  s.model.layers = 4;
  s.parallel.pp = 2;
  for (const Schedule schedule : {Schedule::one_f_one_b, Schedule::interleaved, Schedule::zb_h1, Schedule::zb_h2}) {
    INFO("schedule " << static_cast<int>(schedule));
    s.parallel.schedule = schedule;
    s.parallel.virtual_stages = schedule == Schedule::interleaved ? 2 : 1;
    check_counter_is_model(s);
  }
  auto latent = moe(4, false);
  latent.model.mlp = stepsim::MlpKind::swiglu;
  latent.model.mtp_layers = 1;
  latent.model.mla = {256, 128, 64, 32, 64};
  latent.model.moe.first_dense_layers = 1;
  check_counter_is_model(latent);
  latent.model.moe.a2a_overlap = true;
  check_counter_is_model(latent);
  // The depth's recompute holds what it makes again from its last recomputed op to the end of
  // its backward.
  latent.model.moe.a2a_overlap = false;
  latent.training.recompute = Recompute::full;
  check_counter_is_model(latent);
  latent.training.recompute = Recompute::selective;
  latent.training.recompute_modules = {stepsim::RecomputeModule::mla_up_proj};
  check_counter_is_model(latent);
}

// A zero-bubble B pass leaves the W pass's inputs for each layer as it goes, so the last layer's
// recompute working set comes on top of the other layers' W inputs, not of the whole chunk's.
TEST_CASE("a zero-bubble stage's peak under full recompute is its counter's") {
  check_counter_is_model(gpt(8, 4, Schedule::zb_h2, 1, 8, Recompute::full));
  check_counter_is_model(gpt(8, 4, Schedule::zb_h1, 1, 8, Recompute::full));
  check_counter_is_model(gpt(8, 4, Schedule::one_f_one_b, 1, 8, Recompute::full));
  check_counter_is_model(gpt(16, 4, Schedule::interleaved, 2, 8, Recompute::selective));
}

// Each multi-token prediction depth keeps its layer's activations, its two norms' inputs and
// its projection's 2h-wide input, its final norm's input and the shared head's input (that
// norm's output), each s·b·h/t in bf16 with SP, and the fp32 logits b·s·V/t: at the 22B
// shape (s 2048, b 1, h 6144, V 51,200) at TP 8, 6 · 2·sbh/8 = 18,874,368 bytes and
// 4 · 2048 · 6,400 = 52,428,800 beside the layer's.
TEST_CASE("a multi-token prediction depth keeps the shared head's input as the main head does") {
  stepsim::Scenario s = gpt(2, 1, Schedule::one_f_one_b, 1, 1, Recompute::none);
  s.model.mlp = stepsim::MlpKind::swiglu;
  const auto without = stepsim::workload::build_work(s);
  s.model.mtp_layers = 1;
  const auto with = stepsim::workload::build_work(s);
  CHECK(6 * 2 * sbh / 8 == 18'874'368);
  CHECK(with.post.activations.count() - without.post.activations.count() ==
        with.layer.activations.count() + 18'874'368 + 52'428'800);
}

// Under full recompute Megatron-Core checkpoints the depth's projection, layer and final norm
// (MultiTokenPredictionLayer._checkpointed_forward): the depth keeps its two norms' inputs, the
// checkpoint's two inputs (the norms' outputs), the head's input and the logits: 5 · 2·sbh/8 =
// 15,728,640 bytes and the same 52,428,800. While its backward runs it holds again what the
// layer keeps without recompute, the projection's 2h-wide input and the final norm's input:
// 34·sbh/8 + 4·8·2048 (flash attention's log-sum-exp) + 3 · 2·sbh/8 = 62,980,096 bytes.
TEST_CASE("a multi-token prediction depth under full recompute keeps the checkpoint's inputs") {
  stepsim::Scenario s = gpt(2, 1, Schedule::one_f_one_b, 1, 1, Recompute::full);
  const auto without = stepsim::workload::build_work(s);
  s.model.mtp_layers = 1;
  const auto with = stepsim::workload::build_work(s);
  CHECK(5 * 2 * sbh / 8 == 15'728'640);
  CHECK(with.post.activations.count() - without.post.activations.count() == 15'728'640 + 52'428'800);
  CHECK(34 * sbh / 8 + 4 * 8 * 2048 + 3 * 2 * sbh / 8 == 62'980'096);
  CHECK(with.post.mtp_recompute_working.count() == 62'980'096);
  check_counter_is_model(s);
}

namespace {

// What lies outside the allocator on each stage: the CUDA context's 0.5 GiB and 0.25 GiB per
// NCCL communicator.
std::vector<std::int64_t> runtime_gib_quarters(const stepsim::Scenario& s) {
  std::vector<std::int64_t> out;
  for (const auto& m : sp::estimate_memory(s, stepsim::workload::build_work(s)).stages)
    out.push_back(m.runtime.count() / (256LL << 20));
  return out;
}

// The groups the program makes rank 0 a member of (every rank simulated, no pipeline).
std::int64_t program_groups_of_rank_0(stepsim::Scenario s) {
  s.simulation.ranks = stepsim::RankMode::all;
  const sp::test::FixedCosts costs;
  const auto program = sp::build_program(s, stepsim::workload::build_work(s), costs);
  std::int64_t n = 0;
  for (const auto& g : program.groups) n += std::count(g.members.begin(), g.members.end(), 0) > 0 ? 1 : 0;
  return n;
}

}  // namespace

// A rank's NCCL communicators are the program's: an MoE model at EP 4 on 8 data-parallel ranks
// has the data-parallel one, the EP group's and the experts' data-parallel group's (8 / 4 = 2
// ranks): 0.5 + 3 · 0.25 GiB, in quarters of a GiB 2 + 3; with expert TP 2 at EP 2, the ETP
// group's too: 2 + 4. HSDP at TP 2 on 16 GPUs: the TP group, the shard group of the node's
// 4 DP ranks and the replica group across the 2 nodes: 2 + 3. Two stages of a model with tied
// embeddings: the pipeline's and the embedding group's on top of the data-parallel one: 2 + 3.
TEST_CASE("every communicator the program gives a rank counts NCCL's buffers") {
  auto moe = sp::test::small_scenario(1, 8, 1);
  moe.model.moe = {8, 2, 4096};
  moe.parallel.ep = 4;
  CHECK(runtime_gib_quarters(moe) == std::vector<std::int64_t>{5});
  CHECK(program_groups_of_rank_0(moe) == 3);
  moe.parallel.ep = 2;
  moe.parallel.etp = 2;
  CHECK(runtime_gib_quarters(moe) == std::vector<std::int64_t>{6});
  CHECK(program_groups_of_rank_0(moe) == 4);
  auto hsdp = sp::test::small_scenario(2, 8, 1);
  hsdp.data_parallel.kind = DpKind::hsdp;
  CHECK(runtime_gib_quarters(hsdp) == std::vector<std::int64_t>{5});
  CHECK(program_groups_of_rank_0(hsdp) == 3);
  auto tied = sp::test::small_scenario(1, 2, 2);
  tied.model.tied_embeddings = true;
  tied.parallel.pp = 2;
  CHECK(runtime_gib_quarters(tied) == std::vector<std::int64_t>{5, 5});
}

// The caching allocator's reserve: without expandable segments 13.3 % of the activations at the
// peak (the fitted factor), nothing of the states allocated once; under expandable_segments:True
// the pages at the end of its two pools' segments, kLargeBuffer's 20 MiB and kSmallBuffer's 2 MiB:
// 23,068,672 bytes, whatever the peak. Four layers of 1M parameters, a 0.5M embedding and a 0.25M
// head under DDP: 4.75M parameters at 2 + 4 + 12 bytes, 85,500,000 bytes of states (no
// activations in this work). 1 GB of activations: 133,000,000 bytes.
TEST_CASE("under expandable segments the allocator holds a page of each pool beyond the live tensors") {
  auto s = states_scenario(DpKind::ddp, 1);
  const sp::StageMemory fitted = sp::estimate_memory(s, states_work()).stages.front();
  CHECK(fitted.peak().count() == 85'500'000);
  CHECK(fitted.reserve.count() == 0);
  CHECK(sp::allocator_reserve(s, Bytes(1'000'000'000)).count() == 133'000'000);
  s.cluster.gpu.memory = Bytes::gib(80);
  s.training.expandable_segments = true;
  const sp::StageMemory paged = sp::estimate_memory(s, states_work()).stages.front();
  CHECK(paged.peak().count() == 85'500'000);
  CHECK(paged.reserve.count() == 23'068'672);
  CHECK(paged.reserved().count() == 85'500'000 + 23'068'672);
}
