// Memory per GPU of whole scenarios: GPT-3 175B with 3D parallelism, a 7B model under each
// data-parallel sharding mode, and the warning when a scenario does not fit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/simulate_support.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/memory_model.hpp"
#include "stepsim/report.hpp"
#include "workload/work.hpp"

namespace stepsim {
namespace {

constexpr double GiB = 1073741824.0;

// GPT 7.5B (Narayanan et al. 2021) on one DGX H100 node (80 GB GPUs), data parallelism over its 8 GPUs.
std::vector<std::string> gpt_7b_on_8(const std::string& kind) {
  return {test::set("model", "gpt-7.5b"),
          test::set("cluster.nodes", "1"),
          test::set("parallel.tp", "1"),
          test::set("parallel.dp", "8"),
          test::set("training.global_batch", "16"),
          test::set("training.recompute", "full"),
          test::set("data_parallel.kind", kind)};
}

MemoryReport memory_of(const std::string& kind) { return test::run("", gpt_7b_on_8(kind)).report.memory_bytes; }

long long params_of_7b() { return workload::build_work(io::load_scenario("", gpt_7b_on_8("fsdp"))).params_total; }

bool has_note_starting(const Report& r, const std::string& prefix) {
  return std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
}

}  // namespace

TEST_CASE("GPT-3 175B with TP 8, PP 8 and selective recompute fits in 80 GiB with 20.0 GiB to spare") {
  const Report r = test::run("gpt3-175b-selene").report;
  const MemoryReport& m = r.memory_bytes;
  REQUIRE(m.modelled);
  CHECK(m.fits);
  CHECK(m.capacity == 80.0 * GiB);  // what the driver reports of an "80 GB" A100
  // Stage 0: 12 layers of 12·h²/8 parameters plus the embedding, at 2 + 4 + 12 bytes each.
  CHECK(m.params / 2 == Approx(12 * 12.0 * 12288 * 12288 / 8 + 51200.0 * 12288 / 8).epsilon(0.02));
  CHECK(m.grads == 2 * m.params);
  CHECK(m.optimizer == 6 * m.params);
  // Interleaved, 3 chunks of 4 layers: warm-up 2·7 + 2·8 = 30 chunks plus one, 34·s·b·h/t
  // per layer, and one layer's recomputed attention scores 5·a·s²·b/t.
  const double kept = 31 * 4 * 34.0 * 2048 * 12288 / 8;
  const double scores = 5.0 * 96 * 2048 * 2048 / 8;
  CHECK(m.activations == Approx(kept + scores).epsilon(0.01));
  CHECK(m.peak / GiB == Approx(59.95).epsilon(0.005));
  CHECK((m.capacity - m.peak) / GiB == Approx(20.05).epsilon(0.02));
  CHECK_FALSE(has_note_starting(r, "does not fit"));
}

TEST_CASE("GPT-3 175B without sequence parallelism or recompute does not fit and says so") {
  const Report r = test::run("gpt3-175b-selene",
                             {test::set("parallel.sequence_parallel", "false"), test::set("training.recompute", "none"),
                              test::set("training.attention", "unfused")})
                       .report;
  CHECK_FALSE(r.memory_bytes.fits);
  CHECK(r.memory_bytes.peak > r.memory_bytes.capacity);
  CHECK(has_note_starting(r, "does not fit: "));
}

TEST_CASE("FSDP of a 7B model on 8 GPUs holds an eighth of its states") {
  const double p = static_cast<double>(params_of_7b());
  CHECK(p == Approx(7.5e9).epsilon(0.02));
  const MemoryReport fsdp = memory_of("fsdp");
  REQUIRE(fsdp.modelled);
  CHECK(fsdp.optimizer == p);  // Adam's m and v, sharded
  // The fp32 shard, plus the gathered root and two layers in bf16.
  CHECK(fsdp.params > 4 * p / 8);
  CHECK(fsdp.params < 4 * p / 8 + 2 * 0.1 * p);
  CHECK(fsdp.fits);
  const MemoryReport ddp = memory_of("ddp");
  CHECK(ddp.params == 2 * p);
  CHECK(ddp.optimizer == 12 * p);
  CHECK_FALSE(ddp.fits);  // 18 bytes per parameter: 135 GB
  const MemoryReport zero1 = memory_of("zero1");
  CHECK(zero1.optimizer == Approx(12 * p / 8).margin(1));
  const MemoryReport zero2 = memory_of("zero2");
  CHECK(zero2.grads == Approx(4 * p / 8).margin(1));
  CHECK(fsdp.peak < zero2.peak);
  CHECK(zero2.peak < zero1.peak);
  CHECK(zero1.peak < ddp.peak);
}

// Llama 3 70B (80 layers of 4·8192² + 2·8192·1024 + 3·8192·28672 + 2·8192 = 855,654,400
// parameters; embedding and LM head 128256·8192 = 1,050,673,152 each, final norm 8192) under
// FSDP1 over 64 GPUs, gradients reduced in fp32. When the activations peak, at the backward's
// start, FSDP holds the fp32 gradient shard, 4 · 70,553,706,496 / 64 = 4,409,606,656 bytes, two
// layers' gradients awaiting their ReduceScatter, 2 · 855,654,400 · 4 = 6,845,235,200, and of the
// root's only the LM head's and the final norm's, as autograd computed them, in bf16:
// 1,050,681,344 · 2 = 2,101,362,688 (FSDP1's _post_backward_hook casts to the reduce dtype only
// when the root's FlatParameter has its whole gradient, after the embedding's backward). Before,
// the whole root was counted in fp32, 2,101,354,496 · 4 = 8,405,417,984 bytes, 5.87 GiB more, and
// the job below at 7168 tokens a sequence in micro-batches of 2 "did not fit" (81.3 GiB in use).
TEST_CASE("FSDP counts the LM head's bf16 gradient of the root's at the peak, and a job that fits fits") {
  const Report r = test::run("fsdp-llama3-70b").report;
  CHECK(r.memory_bytes.grads == 4'409'606'656.0 + 6'845'235'200.0 + 2'101'362'688.0);
  const Report longer =
      test::run("fsdp-llama3-70b", {"training.micro_batch=2", "training.global_batch=128", "model.seq_len=7168"})
          .report;
  CHECK(longer.memory_bytes.fits);
  CHECK_FALSE(has_note_starting(longer, "does not fit: "));
}

// Llama 3 70B with TP 8, PP 4 and DP 2: ZeRO-2 shards the gradients that ZeRO-1 holds whole
// (Rajbhandari et al. 2020), so on no stage does it hold more of them. Its unsharded buckets are
// DeepSpeed's on every stage (reduce_bucket_size whatever the stage), here Megatron-Core's size,
// max(4e7, 1e6·2) parameters, each closed once it holds that many: two of them at a time, each
// at most 4e7 plus its last tensor, in fp32. The largest tensor a rank holds is the LM head's
// shard on the last stage and the embedding's on the first, 128256·8192/8, and on the others
// fc1's, 8192·2·28672/8. Before, every
// stage but the first reduced as one bucket and held its whole gradient (7.97 GiB) beside the
// shard.
TEST_CASE("ZeRO-2 holds no more gradient memory than ZeRO-1 on any pipeline stage") {
  const auto memory = [](const std::string& kind) {
    const Scenario s = io::load_scenario(
        "zero1-llama3-8b-64xh100",
        {"model=llama3-70b", "parallel.tp=8", "parallel.pp=4", "parallel.dp=2", "training.global_batch=32",
         "parallel.sequence_parallel=true", "training.recompute=full", "data_parallel.kind=" + kind});
    return parallelism::estimate_memory(s, workload::build_work(s));
  };
  const parallelism::MemoryEstimate zero1 = memory("zero1");
  const parallelism::MemoryEstimate zero2 = memory("zero2");
  REQUIRE(zero1.stages.size() == 4);
  REQUIRE(zero2.stages.size() == 4);
  const double fc1 = 8192.0 * 2 * 28672 / 8;
  const double head = 128256.0 * 8192 / 8;
  for (std::size_t k = 0; k < 4; ++k) {
    INFO("stage " << k);
    const parallelism::StageMemory& one = zero1.stages[k];
    const parallelism::StageMemory& two = zero2.stages[k];
    CHECK(two.grads.count() * 2 == Approx(one.grads.count()).margin(8));  // the fp32 main gradients over dp 2
    CHECK((two.grads + two.buffers).count() <= (one.grads + one.buffers).count());
    const double buckets = static_cast<double>((two.buffers - one.buffers).count());
    CHECK(buckets > 0);
    const double largest = k == 0 || k == 3 ? head : fc1;
    CHECK(buckets <= 4 * (2 * 4e7 + largest + fc1));
  }
}

// DeepSpeed's overlap_comm is off by default for ZeRO stages 1 and 2 (on for stage 3 only), and
// without it DeepSpeed allocates one ipg buffer of reduce_bucket_size (5e8) elements, 0.93 GiB
// in BF16, where overlap_comm's two take 1.86 GiB. Before, the key's generic default (true)
// gave two buffers and the overlapped timing. (The default example gives the key itself, for
// its DDP: there it stays true.)
TEST_CASE("ZeRO-1 and ZeRO-2 under DeepSpeed leave the gradient reduction unoverlapped unless asked") {
  const std::string text = R"({ "model": "llama3-8b", "cluster": "dgx-h100-ndr", "parallel": { "tp": 8, "dp": 8 },
    "training": { "framework": "deepspeed", "global_batch": 64 } })";
  const auto buffers = [](const Scenario& x) {
    return parallelism::estimate_memory(x, workload::build_work(x)).stages.front().buffers.count();
  };
  for (const char* kind : {"zero1", "zero2"}) {
    INFO(kind);
    const std::string set_kind = std::string("data_parallel.kind=") + kind;
    const Scenario s = io::load_scenario_text(text, "ds.json", {set_kind});
    CHECK_FALSE(s.data_parallel.overlap_grad_reduce);
    CHECK(buffers(s) == 500'000'000LL * 2);
    // The same as a scenario that says so.
    const Scenario off = io::load_scenario_text(text, "ds.json", {set_kind, "data_parallel.overlap_grad_reduce=false"});
    CHECK(simulate(s).report.step_time_s == simulate(off).report.step_time_s);
    // Given, it holds: two buffers.
    const Scenario on = io::load_scenario_text(text, "ds.json", {set_kind, "data_parallel.overlap_grad_reduce=true"});
    CHECK(on.data_parallel.overlap_grad_reduce);
    CHECK(buffers(on) == 2 * 500'000'000LL * 2);
  }
  // Megatron-Core's distributed optimizer keeps the key's default.
  CHECK(io::load_scenario_text(text, "ds.json", {"data_parallel.kind=zero1", "training.framework=megatron"})
            .data_parallel.overlap_grad_reduce);
}

}  // namespace stepsim
