// The optimizer step's HBM traffic per parameter as each framework runs it: one fused kernel,
// or torch.optim's foreach path of one multi-tensor kernel per operator, and fp16's overflow
// check. Each figure is counted by hand from the frameworks' source.
#include <catch2/catch.hpp>

#include <string>

#include "stepsim/framework.hpp"
#include "workload/work.hpp"

using stepsim::Framework;
using stepsim::Precision;

namespace {

constexpr long long kParams = 1000000;

stepsim::TrainingSpec fp32(Framework framework, const std::string& optimizer) {
  stepsim::TrainingSpec t;
  t.framework = framework;
  t.precision = Precision::fp32;
  t.optimizer = optimizer;
  t.grad_clip = false;
  return t;
}

double bytes_per_param(const stepsim::workload::OpCost& op) { return op.bytes.as_double() / kParams; }

}  // namespace

TEST_CASE("Eager PyTorch's foreach Adam makes seven passes of 72 bytes per fp32 parameter, AdamW eight of 80") {
  // torch/optim/adam.py _multi_tensor_adam, not capturable, weight_decay 0 (Adam's default):
  // _foreach_lerp_(m, g) reads m and g, writes m: 12; _foreach_mul_(v): 8;
  // _foreach_addcmul_(v, g, g): 12; _foreach_sqrt(v) into a new list: 8; _foreach_div_ and
  // _foreach_add_ on that list: 8 + 8; _foreach_addcdiv_(p, m, sqrt): reads p, m and the
  // list, writes p: 16. 72 in all. AdamW first multiplies every weight by 1 - lr·wd
  // (_foreach_mul_(params)): 8 more.
  const auto adam = stepsim::workload::optimizer_step(kParams, fp32(Framework::pytorch, "adam"));
  CHECK(bytes_per_param(adam) == 72.0);
  CHECK(adam.operators == 7);
  const auto adamw = stepsim::workload::optimizer_step(kParams, fp32(Framework::pytorch, "adamw"));
  CHECK(bytes_per_param(adamw) == 80.0);
  CHECK(adamw.operators == 8);
}

TEST_CASE("Eager PyTorch's foreach SGD with momentum makes three passes of 32 bytes per fp32 parameter") {
  // torch/optim/sgd.py _multi_tensor_sgd: _foreach_mul_(bufs, momentum) 8,
  // _foreach_add_(bufs, grads) 12, _foreach_add_(params, bufs, alpha=-lr) 12.
  const auto sgd = stepsim::workload::optimizer_step(kParams, fp32(Framework::pytorch, "sgd"));
  CHECK(bytes_per_param(sgd) == 32.0);
  CHECK(sgd.operators == 3);
  // DeepSpeed takes SGD from torch.optim (its _configure_basic_optimizer's fallback): the same.
  CHECK(bytes_per_param(stepsim::workload::optimizer_step(kParams, fp32(Framework::deepspeed, "sgd"))) == 32.0);
}

TEST_CASE("A fused optimizer reads the gradient and reads and writes the weight and each moment once") {
  // FusedAdam (Transformer Engine, Apex, DeepSpeed; torchtitan's fused=True): 4 + 8 + 16 = 28,
  // AdamW the same kernel; FusedSGD 4 + 8 + 8 = 20.
  for (const Framework f : {Framework::megatron, Framework::torchtitan, Framework::deepspeed, Framework::unspecified}) {
    INFO(stepsim::traits_of(f).name);
    const auto adam = stepsim::workload::optimizer_step(kParams, fp32(f, "adam"));
    CHECK(bytes_per_param(adam) == 28.0);
    CHECK(adam.operators == 1);
    CHECK(bytes_per_param(stepsim::workload::optimizer_step(kParams, fp32(f, "adamw"))) == 28.0);
  }
  CHECK(bytes_per_param(stepsim::workload::optimizer_step(kParams, fp32(Framework::megatron, "sgd"))) == 20.0);
}

TEST_CASE("fp16's overflow check unscales every main gradient in place, or casts and sums it under DeepSpeed") {
  stepsim::TrainingSpec t;
  t.precision = Precision::fp16;
  // Megatron-Core and GradScaler: _amp_foreach_non_finite_check_and_unscale_ reads and writes
  // each fp32 main gradient.
  for (const Framework f : {Framework::megatron, Framework::nemo, Framework::pytorch, Framework::unspecified}) {
    t.framework = f;
    CHECK(bytes_per_param(stepsim::workload::overflow_check(kParams, t)) == 8.0);
  }
  // DeepSpeed's _has_inf_or_nan: float(x.float().sum()) over each 2-byte gradient: read 2,
  // write the fp32 copy 4, sum it 4.
  t.framework = Framework::deepspeed;
  t.main_grad = Precision::bf16;
  CHECK(bytes_per_param(stepsim::workload::overflow_check(kParams, t)) == 10.0);
  // torchtitan has no GradScaler: nothing.
  t.framework = Framework::torchtitan;
  CHECK(stepsim::workload::overflow_check(kParams, t).bytes.count() == 0);
}
