// The work of one context-parallel rank: its share of the sequence, its share of causal
// attention, and the K/V block it passes around the CP ring.
#include <catch2/catch.hpp>

#include <algorithm>

#include "scenarios.hpp"
#include "workload/work.hpp"

namespace st = stepsim::testing;
using stepsim::workload::OpCost;
using stepsim::workload::Role;

namespace {

const OpCost& forward_op(const stepsim::workload::ModelWork& w, Role role) {
  const auto& ops = w.layer.forward;
  auto it = std::find_if(ops.begin(), ops.end(), [&](const OpCost& op) { return op.role == role; });
  REQUIRE(it != ops.end());
  return *it;
}

stepsim::Scenario llama70b_tp8(int cp) {
  stepsim::Scenario s = st::scenario(st::llama3_70b(), 8, 1);
  s.parallel.sequence_parallel = true;
  s.parallel.cp = cp;
  return s;
}

}  // namespace

TEST_CASE("a CP rank of Llama 3 70B at TP 8, CP 2 does half of the causal attention work by hand count") {
  const auto w = stepsim::workload::build_work(llama70b_tp8(2));
  // 64 heads / TP 8 = 8 local heads of 128; 4096 of the 8192 queries meet on average half of
  // the 8192 keys: 2 FLOPs · 2 GEMMs · 8 · 4096 · 8192 · 128 / 2.
  const double attention = 2.0 * 2.0 * 8 * 4096.0 * 8192.0 * 128.0 / 2.0;
  CHECK(forward_op(w, Role::attention_core).flops == Approx(attention).epsilon(1e-12));
  CHECK(attention == Approx(68719476736.0));
  const auto whole = stepsim::workload::build_work(llama70b_tp8(1));
  CHECK(forward_op(whole, Role::attention_core).flops == Approx(2.0 * attention).epsilon(1e-12));
  // GEMMs see the rank's 4096 tokens.
  CHECK(forward_op(w, Role::qkv).m == 4096);
  CHECK(forward_op(w, Role::qkv).flops == Approx(forward_op(whole, Role::qkv).flops / 2));
}

TEST_CASE("one CP ring step passes the rank's K and V of its local KV heads") {
  const auto w = stepsim::workload::build_work(llama70b_tp8(2));
  // 8 KV heads / TP 8 = 1 local head of 128; K and V of 4096 tokens in bf16.
  CHECK(w.layer.kv_block.count() == 4096LL * 2 * 128 * 2);
  CHECK(w.layer.kv_block.count() == 2097152);
  const auto cp4 = stepsim::workload::build_work(llama70b_tp8(4));
  CHECK(cp4.layer.kv_block.count() == 1048576);
}

TEST_CASE("context parallelism shares activations but not parameters or model FLOPs") {
  const auto one = stepsim::workload::build_work(llama70b_tp8(1));
  const auto two = stepsim::workload::build_work(llama70b_tp8(2));
  CHECK(two.layer.activations.as_double() == Approx(one.layer.activations.as_double() / 2).epsilon(1e-9));
  CHECK(two.layer.param_count == one.layer.param_count);
  CHECK(two.params_total == one.params_total);
  CHECK(two.model_flops_per_step == one.model_flops_per_step);
}
