// The optimizer step of eager PyTorch against a real trace: ResNet-50 under DDP with SGD on an
// A100 (tests/data/traces/resnet50-ddp-a100-rank0of2.json.gz), whose Optimizer.step#SGD.step
// runs torch.optim's foreach path, three _foreach_ operators in nine multi_tensor_apply kernels.
#include <catch2/catch.hpp>

#include <string>

#include "analysis/trace_timeline.hpp"
#include "io/scenario_loader.hpp"
#include "workload/work.hpp"

using namespace stepsim;

TEST_CASE("Eager PyTorch's foreach SGD step takes, within a tenth, what the A100 trace measures") {
  const analysis::LoadedTrace t =
      analysis::load_trace(std::string(STEPSIM_TEST_DATA) + "/traces/resnet50-ddp-a100-rank0of2.json.gz");
  REQUIRE(t.timeline.ranks.size() == 1);
  double kernels_s = 0;
  for (const Interval& i : t.timeline.ranks.front().intervals)
    if (t.timeline.names[i.name].find("multi_tensor_apply_kernel") != std::string::npos)
      kernels_s += (i.end - i.start).seconds();
  const double measured_s = kernels_s / 3;  // ProfilerSteps 4 to 6: 692.8 us each
  CHECK(measured_s == Approx(692.76e-6).epsilon(1e-3));

  // The trace's GPU, an A100-PG509-200 (the 40 GB SXM4 A100: 1,555 GB/s), at the A100 preset's
  // achievable share of its HBM bandwidth; the model's 25,557,032 fp32 parameters (the five
  // buckets' elements), SGD with momentum, no clipping (the scenario's framework: pytorch).
  const Scenario s = io::load_scenario_text(R"({"model": "llama3-8b", "cluster": "dgx-a100-80g-hdr",
    "training": {"framework": "pytorch", "precision": "fp32", "optimizer": "sgd", "global_batch": 8}})",
                                            "resnet.json", {"cluster.gpu.memory_bandwidth=1555 GB/s"});
  const double hbm = s.cluster.gpu.memory_bandwidth.bytes_per_s() * s.cluster.gpu.efficiency.hbm;
  const long long params = 2049000LL + 7875584 + 6563840 + 6637568 + 2431040;
  const double foreach_s = workload::optimizer_step(params, s.training).bytes.as_double() / hbm;
  CHECK(foreach_s == Approx(measured_s).epsilon(0.10));
  // One fused pass (20 B a parameter) would be 42 % short of it.
  TrainingSpec fused = s.training;
  fused.framework = Framework::megatron;
  CHECK(workload::optimizer_step(params, fused).bytes.as_double() / hbm < 0.7 * measured_s);
}
