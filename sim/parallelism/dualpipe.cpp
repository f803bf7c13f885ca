// DualPipe (DeepSeek-AI 2024, the DeepSeek-V3 technical report, §3.2.1): a bidirectional pipeline.
// Each stage holds two model chunks, virtual stage i and p − 1 − i; half of the micro-batches
// enter at the first stage and half at the last, and in the steady state one micro-batch's
// forward chunk runs overlapped with another's backward chunk.
#include <algorithm>
#include <deque>
#include <utility>

#include "parallelism/pipeline_schedule.hpp"
#include "stepsim/error.hpp"

namespace stepsim::parallelism {

namespace {

// The passes of one stage. Phase 0 is the direction whose entry is nearer to this stage (the
// forward direction on the first half of the stages, the reverse one on the second half),
// phase 1 the other; chunk 0 is the forward direction's model chunk, chunk 1 the reverse's.
class DualPasses {
 public:
  DualPasses(const PipelineShape& shape, int stage) : second_half_(stage >= shape.stages / 2) {}

  void forward(int phase, bool overlapped = false) {
    const int c = chunk(phase);
    order.push_back({f_[c]++, c, true, false, overlapped});
  }
  // A backward whose weight-gradient pass is deferred (`zero_bubble`) or follows at once.
  void backward(int phase, bool zero_bubble = false) {
    const int c = chunk(phase);
    order.push_back({b_[c], c, false});
    if (zero_bubble) {
      deferred_.emplace_back(b_[c]++, c);
      return;
    }
    order.push_back({b_[c]++, c, false, true});
  }
  // The oldest deferred weight-gradient pass (the reference keeps them first in, first out).
  void weight() {
    STEPSIM_CHECK(!deferred_.empty(), "a DualPipe W pass with no deferred backward");
    const auto [mb, c] = deferred_.front();
    deferred_.pop_front();
    order.push_back({mb, c, false, true});
  }
  // A forward of `phase0` overlapped with a whole backward of the other phase.
  void forward_backward(int phase0, int phase1) {
    forward(phase0, true);
    backward(phase1);
  }

  std::vector<PipelineOp> order;

 private:
  int chunk(int phase) const { return phase ^ (second_half_ ? 1 : 0); }

  bool second_half_;
  int f_[2] = {0, 0};
  int b_[2] = {0, 0};
  std::deque<std::pair<int, int>> deferred_;
};

}  // namespace

// The eight steps of the reference implementation (github.com/deepseek-ai/DualPipe), with
// n = m / 2 micro-batches per direction, h the stage's distance from the nearer end and
// q = p / 2: 2(q − h − 1) forwards of phase 0; h + 1 pairs of forwards of both phases; q − h − 1
// times B, W and F of phase 1; n − p + h + 1 times F0&B1 and F1&B0 overlapped (the middle
// stages run their first F0 and B1 apart); q − h − 1 times B1 and F1&B0; h + 1 times B1 and B0,
// the second half of them with W deferred; q − h − 1 times W and B0 (W deferred); the h + 1
// W passes left.
std::vector<PipelineOp> dualpipe_order(const PipelineShape& shape, int stage) {
  const int half = shape.stages / 2;
  const int h = std::min(stage, shape.stages - 1 - stage);
  const int n = shape.micro_batches / 2;
  const bool middle = h == half - 1;
  DualPasses s(shape, stage);
  for (int i = 0; i < 2 * (half - h - 1); ++i) s.forward(0);
  for (int i = 0; i < h + 1; ++i) {
    s.forward(0);
    s.forward(1);
  }
  for (int i = 0; i < half - h - 1; ++i) {
    s.backward(1);
    s.forward(1);
  }
  for (int i = 0; i < n - shape.stages + h + 1; ++i) {
    if (i == 0 && middle) {
      s.forward(0);
      s.backward(1);
    } else {
      s.forward_backward(0, 1);
    }
    s.forward_backward(1, 0);
  }
  for (int i = 0; i < half - h - 1; ++i) {
    s.backward(1);
    s.forward_backward(1, 0);
  }
  bool zero_bubble = false;
  for (int i = 0; i < h + 1; ++i) {
    if (i == (h + 1) / 2 && h % 2 == 1) zero_bubble = true;
    s.backward(1, zero_bubble);
    if (i == (h + 1) / 2 && h % 2 == 0) zero_bubble = true;
    s.backward(0, zero_bubble);
  }
  for (int i = 0; i < half - h - 1; ++i) {
    s.weight();
    s.backward(0, true);
  }
  for (int i = 0; i < h + 1; ++i) s.weight();
  return s.order;
}

}  // namespace stepsim::parallelism
