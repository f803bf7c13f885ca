// Whole scenarios through simulate(): the embedded default and DDP's bucket-size trade-off.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/simulate_support.hpp"

namespace stepsim {
namespace {

double exposed_of(const Report& r, CommKind k) { return r.breakdown_s.exposed_comm[static_cast<int>(k)]; }
double busy_of(const Report& r, CommKind k) { return r.comm_s[static_cast<int>(k)]; }

double step_with_bucket(double cap_mb) {
  return test::run("ddp-1.3b-64xa100", {test::set("data_parallel.bucket_cap_mb", std::to_string(cap_mb))})
      .report.step_time_s;
}

}  // namespace

TEST_CASE("the default scenario is Llama-3-8B on 64 H100 with TP and DP communication") {
  const Report r = test::run("").report;
  CHECK(r.gpus == 64);
  CHECK(r.step_time_s > 0);
  CHECK(busy_of(r, CommKind::tp) > 0);
  CHECK(busy_of(r, CommKind::dp) > 0);
  CHECK(r.throughput.mfu > 0.2);
  CHECK(r.throughput.mfu < 0.8);
  // The breakdown covers the step exactly.
  const double sum = r.breakdown_s.compute + r.breakdown_s.exposed_total() + r.breakdown_s.bubble +
                     r.breakdown_s.optimizer + r.breakdown_s.other;
  CHECK(sum == Approx(r.step_time_s).epsilon(1e-9));
}

TEST_CASE("DDP bucket size: tiny buckets and one huge bucket are slower than the default") {
  const std::vector<double> caps = {0.001, 0.25, 1, 5, 10, 25, 50, 100, 200, 400, 4000};
  std::vector<double> steps;
  for (double cap : caps) steps.push_back(step_with_bucket(cap));
  const double tiny = steps[0];
  const double quarter = steps[1];
  const double fallback = steps[5];  // 25 MiB, PyTorch's default
  const double huge = steps.back();
  const double best = *std::min_element(steps.begin(), steps.end());
  CHECK(tiny > fallback);
  CHECK(quarter > fallback);
  CHECK(huge > fallback * 1.02);
  // Bigger buckets run nearer the link rate and slow the overlapped compute for less time,
  // but the last one is exposed: the default stays within a few percent of the best.
  CHECK(fallback <= best * 1.06);
}

TEST_CASE("DDP with overlap hides most DP communication, and without it all is exposed") {
  const Report on = test::run("ddp-1.3b-64xa100").report;
  const Report off = test::run("ddp-1.3b-64xa100", {"data_parallel.overlap_grad_reduce=false"}).report;
  CHECK(exposed_of(on, CommKind::dp) < 0.2 * busy_of(on, CommKind::dp));
  CHECK(on.overlap.hidden_fraction > 0.8);
  CHECK(exposed_of(off, CommKind::dp) == Approx(busy_of(off, CommKind::dp)).epsilon(1e-9));
  CHECK(off.overlap.hidden_fraction == Approx(0).margin(1e-9));
  CHECK(off.step_time_s > on.step_time_s);
}

TEST_CASE("gradient accumulation sends DP gradients once per step whatever the micro-batch count") {
  const Report one = test::run("ddp-1.3b-64xa100", {"training.global_batch=128"}).report;
  const Report four = test::run("ddp-1.3b-64xa100", {"training.global_batch=512"}).report;
  CHECK(busy_of(four, CommKind::dp) == Approx(busy_of(one, CommKind::dp)).epsilon(1e-9));
  // Four micro-batches' forward and backward, one optimizer step (torch.optim's foreach Adam,
  // the same 61 ms whatever the micro-batch count).
  CHECK(four.breakdown_s.optimizer == Approx(one.breakdown_s.optimizer));
  CHECK(four.step_time_s - four.breakdown_s.optimizer > 3 * (one.step_time_s - one.breakdown_s.optimizer));
}

// Default scenario with PP 4 and 64 MiB TP AllReduces (2 × 4096 tokens × 4096 × 2 bytes):
// with 1200 GB/s NVLink NCCL's model runs them as Ring LL128 where with 1000 GB/s it runs
// NVLS; a tuning that slowed LL128 alone (0.58) made each one slower.
TEST_CASE("more NVLink bandwidth never makes a pipelined step slower, on every schedule") {
  const std::vector<std::vector<std::string>> schedules{
      {"parallel.schedule=1f1b"},     {"parallel.schedule=gpipe"},
      {"parallel.schedule=zb-h1"},    {"parallel.schedule=zb-h2"},
      {"parallel.schedule=dualpipe"}, {"parallel.schedule=interleaved", "parallel.virtual_stages=2"}};
  for (const auto& schedule : schedules) {
    const auto step = [&](const char* nvlink) {
      std::vector<std::string> sets{"parallel.pp=4", "training.micro_batch=2", "model.seq_len=4096",
                                    test::set("cluster.intra_node.bandwidth", nvlink)};
      sets.insert(sets.end(), schedule.begin(), schedule.end());
      return test::run("", sets).report.step_time_s;
    };
    INFO(schedule.front());
    CHECK(step("\"1200 GB/s\"") <= step("\"1000 GB/s\""));
  }
}

}  // namespace stepsim
