// torch.autocast over an fp32 model as its casts run: each Linear layer's weight cast to the
// autocast dtype before its GEMM, every micro-batch, and the weight's gradient cast back to fp32;
// an fp32 input cast likewise.
#pragma once

#include <vector>

#include "workload/shape.hpp"
#include "workload/work.hpp"

namespace stepsim::workload {

// `forward` with, before each GEMM against a weight that runs in the 16-bit precision, the op
// that casts its weights (and a bias the GEMM adds) to it, and in eager mode its fp32 input
// where that is a norm of the residual stream; `forward` itself unless shape.autocast.
std::vector<OpCost> with_autocast_casts(const std::vector<OpCost>& forward, const LayerShape& shape);

// `backward` with, after each such GEMM's weight gradient (and its bias's), the op that casts
// them to the parameters' fp32, and after its input gradient, where the forward cast its input,
// the op that casts that to fp32; `backward` itself unless shape.autocast.
std::vector<OpCost> with_autocast_gradient_casts(const std::vector<OpCost>& backward, const LayerShape& shape);

}  // namespace stepsim::workload
