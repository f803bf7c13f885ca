// Zero-bubble schedules (Qi et al. 2024, "Zero Bubble Pipeline Parallelism"): each backward is
// split into B (input gradient, on the critical path) and W (weight gradient), and W passes
// are deferred into what would otherwise be the pipeline's bubbles.
#include <algorithm>

#include "parallelism/pipeline_schedule.hpp"

namespace stepsim::parallelism {

namespace {

// Appends passes of a stage and keeps the next micro-batch of each kind.
struct Passes {
  explicit Passes(int micro_batches) : m(micro_batches) {}
  int m;
  int f = 0, b = 0, w = 0;
  std::vector<PipelineOp> order;
  void forward() { order.push_back({f++, 0, true}); }
  void input_grad() { order.push_back({b++, 0, false}); }
  void weight_grad() { order.push_back({w++, 0, false, true}); }
};

}  // namespace

// ZB-H1, as the handcrafted generator of the reference implementation (sail-sg's
// ZeroBubbleH1Pipeline with exact semantics) orders it: 1F1B's p − i − 1 warm-up forwards
// (the same activations in flight), then i steps of F and B whose W is deferred, then F, B,
// W in turn and B, W to drain, and the i deferred W passes last. Stage i's i deferred W
// passes fill its cool-down bubble: with T_F = T_B = T_W the bubble is (p − 1)(T_F + T_B −
// T_W), a third of 1F1B's (p − 1)(T_F + T_B + T_W).
std::vector<PipelineOp> zb_h1_order(const PipelineShape& shape, int stage) {
  Passes s(shape.micro_batches);
  const int warmup = std::min(shape.stages - stage - 1, s.m);
  for (int k = 0; k < warmup; ++k) s.forward();
  for (int k = 0; k < stage && s.f < s.m; ++k) {
    s.forward();
    s.input_grad();
  }
  while (s.f < s.m) {
    s.forward();
    s.input_grad();
    s.weight_grad();
  }
  while (s.b < s.m) {
    s.input_grad();
    s.weight_grad();
  }
  while (s.w < s.m) s.weight_grad();
  return s.order;
}

// ZB-H2 without transfer latency, as OpenXLA Shardy's ZeroBubbleH2 predicate orders it:
// stage i runs 2(p − i) − 1 warm-up forwards (2p − 1 in flight on the first stage), then B,
// the W deferred by 2i micro-batches (W(k) after B(k + 2i), the stage's mirror image's
// warm-up minus one) and the next F in turn, and the deferred W passes last. The extra
// forwards fill the warm-up bubble and the deferred W passes the cool-down one: no bubble
// when T_F = T_B = T_W, at the cost of up to 2p − 1 micro-batches' activations.
std::vector<PipelineOp> zb_h2_order(const PipelineShape& shape, int stage) {
  Passes s(shape.micro_batches);
  const int warmup = std::min(2 * (shape.stages - stage) - 1, s.m);
  const int defer = 2 * stage;
  for (int k = 0; k < warmup; ++k) s.forward();
  while (s.b < s.m) {
    s.input_grad();
    if (s.b - s.w > defer) s.weight_grad();
    if (s.f < s.m) s.forward();
  }
  while (s.w < s.m) s.weight_grad();
  return s.order;
}

}  // namespace stepsim::parallelism
