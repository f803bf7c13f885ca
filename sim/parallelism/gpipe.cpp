// GPipe: every micro-batch's forward, then every backward (Megatron's 1F1B with all
// micro-batches in the warm-up); bubble (p − 1)/m, activations of all m micro-batches held.
#include "parallelism/pipeline_schedule.hpp"

namespace stepsim::parallelism {

std::vector<PipelineOp> gpipe_order(const PipelineShape& shape, int /*stage*/) {
  std::vector<PipelineOp> order;
  for (int mb = 0; mb < shape.micro_batches; ++mb) order.push_back({mb, 0, true});
  for (int mb = 0; mb < shape.micro_batches; ++mb) order.push_back({mb, 0, false});
  return order;
}

}  // namespace stepsim::parallelism
