// The registry of data-parallel strategies. Adding one: a file with its factory, one row.
#include "parallelism/data_parallel.hpp"

#include <array>

#include <fmt/format.h>

#include "stepsim/error.hpp"

namespace stepsim::parallelism {

namespace {

// dp = 1: no gradient synchronisation at all.
class NoDataParallel final : public DataParallel {
 public:
  void after_backward_op(StepBuilder&, const OpSite&, OpIndex) override {}
  void end_backward(StepBuilder&) override {}
  std::vector<OpIndex> optimizer_waits() const override { return {}; }
};

std::unique_ptr<DataParallel> not_simulated(const Scenario& scenario) {
  const char* name = "?";
  for (const DataParallelKind& k : data_parallel_kinds()) {
    if (k.kind == scenario.data_parallel.kind) name = k.name;
  }
  throw InputError(scenario.source, "/data_parallel/kind",
                   fmt::format("'{}' is not simulated yet (simulated: ddp)", name));
}

constexpr std::array<DataParallelKind, 5> kKinds{{
    {DpKind::ddp, "ddp", make_ddp},
    {DpKind::zero1, "zero1", not_simulated},
    {DpKind::zero2, "zero2", not_simulated},
    {DpKind::fsdp, "fsdp", not_simulated},
    {DpKind::hsdp, "hsdp", not_simulated},
}};

}  // namespace

std::span<const DataParallelKind> data_parallel_kinds() { return kKinds; }

std::unique_ptr<DataParallel> make_data_parallel(const Scenario& scenario) {
  if (scenario.parallel.dp <= 1) return std::make_unique<NoDataParallel>();
  for (const DataParallelKind& k : kKinds) {
    if (k.kind == scenario.data_parallel.kind) return k.make(scenario);
  }
  STEPSIM_CHECK(false, "data_parallel.kind missing from the registry");
  return nullptr;
}

}  // namespace stepsim::parallelism
