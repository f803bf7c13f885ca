// Hand-made inputs for the parallelism tests.
#include "support.hpp"

#include <algorithm>

namespace stepsim::parallelism::test {

namespace {

using workload::OpClass;
using workload::OpCost;
using workload::Pass;
using workload::Role;

OpCost op(const char* name, Role role, Pass pass, OpClass cls = OpClass::gemm) {
  OpCost c;
  c.name = name;
  c.role = role;
  c.pass = pass;
  c.cls = cls;
  c.flops = 1e9;
  return c;
}

workload::LayerWork layer(Bytes message) {
  workload::LayerWork w;
  w.forward = {op("input norm", Role::input_norm, Pass::forward, OpClass::norm),
               op("qkv", Role::qkv, Pass::forward),
               op("attention core", Role::attention_core, Pass::forward, OpClass::attention),
               op("attn proj", Role::attn_proj, Pass::forward),
               op("attn residual", Role::attn_residual, Pass::forward, OpClass::elementwise),
               op("post norm", Role::post_norm, Pass::forward, OpClass::norm),
               op("fc1", Role::fc1, Pass::forward),
               op("gelu", Role::activation, Pass::forward, OpClass::elementwise),
               op("fc2", Role::fc2, Pass::forward),
               op("mlp residual", Role::mlp_residual, Pass::forward, OpClass::elementwise)};
  w.backward = {op("mlp residual backward", Role::mlp_residual, Pass::backward, OpClass::elementwise),
                op("fc2 dgrad", Role::fc2, Pass::backward_data),
                op("fc2 wgrad", Role::fc2, Pass::backward_weight),
                op("gelu backward", Role::activation, Pass::backward, OpClass::elementwise),
                op("fc1 dgrad", Role::fc1, Pass::backward_data),
                op("fc1 wgrad", Role::fc1, Pass::backward_weight),
                op("post norm backward", Role::post_norm, Pass::backward, OpClass::norm),
                op("attn residual backward", Role::attn_residual, Pass::backward, OpClass::elementwise),
                op("attn proj dgrad", Role::attn_proj, Pass::backward_data),
                op("attn proj wgrad", Role::attn_proj, Pass::backward_weight),
                op("attention core backward", Role::attention_core, Pass::backward, OpClass::attention),
                op("qkv dgrad", Role::qkv, Pass::backward_data),
                op("qkv wgrad", Role::qkv, Pass::backward_weight),
                op("input norm backward", Role::input_norm, Pass::backward, OpClass::norm)};
  w.tp_message = message;
  return w;
}

}  // namespace

Scenario small_scenario(int tp, int dp, int micro_batches) {
  Scenario s;
  s.source = "test.json";
  s.model = {"small", 2, 1024, 16, 16, 4096, 32000, 2048, MlpKind::gelu, false, {}};
  s.cluster.nodes = (tp * dp + 7) / 8;
  s.cluster.gpus_per_node = 8;
  s.cluster.intra_node.bandwidth = Bandwidth::gbytes_per_s(300);
  s.cluster.inter_node.nic_bandwidth = Bandwidth::gbits_per_s(200);
  s.parallel.tp = tp;
  s.parallel.dp = dp;
  s.training.global_batch = static_cast<long long>(dp) * micro_batches;
  return s;
}

workload::ModelWork small_work(const Scenario& s) {
  const Bytes message(s.training.micro_batch * s.model.seq_len * s.model.hidden * 2);
  workload::ModelWork w;
  w.layer = layer(message);
  w.pre.forward = {op("embedding", Role::embedding, Pass::forward, OpClass::embedding)};
  w.pre.backward = {op("embedding backward", Role::embedding, Pass::backward, OpClass::embedding)};
  w.pre.tp_message = message;
  w.post.forward = {op("final norm", Role::final_norm, Pass::forward, OpClass::norm),
                    op("lm head", Role::lm_head, Pass::forward), op("loss", Role::loss, Pass::forward, OpClass::loss)};
  w.post.backward = {op("loss backward", Role::loss, Pass::backward, OpClass::loss),
                     op("lm head dgrad", Role::lm_head, Pass::backward_data),
                     op("lm head wgrad", Role::lm_head, Pass::backward_weight),
                     op("final norm backward", Role::final_norm, Pass::backward, OpClass::norm)};
  w.post.tp_message = message;
  w.optimizer = op("optimizer", Role::optimizer, Pass::forward, OpClass::optimizer);
  return w;
}

std::vector<std::string> op_names(const engine::Program& program, std::size_t r) {
  std::vector<std::string> out;
  for (const engine::Op& op : program.ranks[r].ops()) out.push_back(program.names[op.name]);
  return out;
}

std::vector<engine::OpIndex> collectives_of(const engine::Program& program, CommKind kind, std::size_t r) {
  const engine::RankProgram& rank = program.ranks[r];
  std::vector<engine::OpIndex> out;
  for (std::size_t i = 0; i < rank.ops().size(); ++i) {
    const engine::Op& op = rank.ops()[i];
    if (op.kind != engine::OpKind::collective) continue;
    if (rank.calls[static_cast<std::size_t>(op.call)].kind == kind) {
      out.push_back(static_cast<engine::OpIndex>(i));
    }
  }
  return out;
}

long find_op(const engine::Program& program, const std::string& name, std::size_t from) {
  const auto names = op_names(program);
  for (std::size_t i = from; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<long>(i);
  }
  return -1;
}

PassCosts::PassCosts(const workload::LayerWork& layer, double f, double b, double w) : f_(f), b_(b), w_(w) {
  forward_ = static_cast<int>(layer.forward.size());
  for (const auto& op : layer.backward) (op.pass == Pass::backward_weight ? weight_ : input_) += 1;
}

Time PassCosts::compute(const workload::OpCost& op) const {
  const bool outer = op.role == Role::embedding || op.role == Role::final_norm || op.role == Role::lm_head ||
                     op.role == Role::loss || op.role == Role::optimizer;
  if (outer) return Time::zero();
  if (op.pass == Pass::forward) return Time::from_us(f_ / forward_);
  if (op.pass == Pass::backward_weight) return Time::from_us(w_ / weight_);
  return Time::from_us(b_ / input_);
}

Scenario pipeline_scenario(Schedule schedule, int p, int m) {
  Scenario s = small_scenario(1, 1, m);
  s.parallel.pp = p;
  s.parallel.schedule = schedule;
  s.model.layers = p;  // one layer per stage
  s.cluster.nodes = (p + 7) / 8;
  return s;
}

Scenario uniform_pipeline_scenario(Schedule schedule, int p, int m) {
  Scenario s = pipeline_scenario(schedule, p, m);
  s.model.layers = 4 * p;
  s.model.vocab = 1024;
  return s;
}

double largest_bubble_us(const Timeline& timeline) {
  double worst = 0;
  for (const auto& rank : timeline.ranks) {
    Time compute = Time::zero();
    Time first = Time::max();
    Time end = Time::zero();
    for (const auto& iv : rank.intervals) {
      if (iv.activity != Activity::compute || iv.phase == Phase::optimizer) continue;
      compute += iv.end - iv.start;
      first = std::min(first, iv.start);
      end = std::max(end, iv.end);
    }
    worst = std::max(worst, (end - first - compute).seconds() * 1e6);
  }
  return worst;
}

}  // namespace stepsim::parallelism::test
