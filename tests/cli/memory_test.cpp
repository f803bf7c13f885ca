// Memory per GPU of whole scenarios: GPT-3 175B with 3D parallelism, a 7B model under each
// data-parallel sharding mode, and the warning when a scenario does not fit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/simulate_support.hpp"
#include "io/scenario_loader.hpp"
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

}  // namespace stepsim
