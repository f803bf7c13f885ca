// 1F1B (PipeDream-Flush, Megatron's non-interleaved schedule): p − stage − 1 warm-up
// forwards, then one forward and one backward in turn, then the remaining backwards.
#include <algorithm>

#include "parallelism/pipeline_schedule.hpp"

namespace stepsim::parallelism {

std::vector<PipelineOp> one_f_one_b_order(const PipelineShape& shape, int stage) {
  const int m = shape.micro_batches;
  const int warmup = std::min(shape.stages - stage - 1, m);
  std::vector<PipelineOp> order;
  for (int mb = 0; mb < warmup; ++mb) order.push_back({mb, 0, true});
  for (int i = 0; i < m - warmup; ++i) {
    order.push_back({warmup + i, 0, true});
    order.push_back({i, 0, false});
  }
  for (int mb = m - warmup; mb < m; ++mb) order.push_back({mb, 0, false});
  return order;
}

}  // namespace stepsim::parallelism
