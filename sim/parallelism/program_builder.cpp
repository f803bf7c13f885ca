// The step of one rank with pipeline depth 1: every micro-batch runs forward then backward
// (recompute just before each layer's backward), gradient synchronisation hooks into the
// last backward, and the optimizer step runs once every bucket has been reduced.
#include "parallelism/program_builder.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "parallelism/data_parallel.hpp"
#include "parallelism/grad_buckets.hpp"
#include "parallelism/mesh.hpp"
#include "parallelism/step_builder.hpp"
#include "parallelism/tensor_parallel.hpp"
#include "stepsim/error.hpp"

namespace stepsim::parallelism {

namespace {

using workload::OpCost;

void require_one(const Scenario& s, int value, const char* where, const char* what) {
  if (value == 1) return;
  throw InputError(s.source, where, fmt::format("{} {} is not simulated yet (use 1)", what, value));
}

void check_supported(const Scenario& s) {
  require_one(s, s.parallel.pp, "/parallel/pp", "pipeline parallelism");
  require_one(s, s.parallel.cp, "/parallel/cp", "context parallelism");
  require_one(s, s.parallel.ep, "/parallel/ep", "expert parallelism");
  if (s.training.micro_batches(s.parallel.dp) < 1) {
    throw InputError(s.source, "/training/global_batch",
                     fmt::format("global batch {} is smaller than micro_batch {} times dp {}",
                                 s.training.global_batch, s.training.micro_batch, s.parallel.dp));
  }
}

// Workload names backward ops already ("fc1 dgrad", "gelu backward"); forward and
// recomputed ones get a suffix.
std::string op_name(const OpSite& site, int layers) {
  const std::string label = site_label(site, layers);
  if (site.phase == Phase::recompute) return label + " recompute";
  if (site.cost->pass == workload::Pass::forward) return label + " fwd";
  return label;
}

// Issues one rank's step.
class StepWriter {
 public:
  StepWriter(const Scenario& s, const workload::ModelWork& work, StepBuilder& b)
      : s_(s), work_(work), b_(b), tp_(s, work), dp_(make_data_parallel(s)) {}

  void step() {
    const long long micro_batches = s_.training.micro_batches(s_.parallel.dp);
    for (long long mb = 0; mb < micro_batches; ++mb) {
      last_ = mb + 1 == micro_batches;
      forward();
      backward();
    }
    dp_->end_backward(b_);
    std::vector<OpIndex> waits = dp_->optimizer_waits();
    for (OpIndex op : b_.take_deferred()) waits.push_back(op);
    b_.compute(work_.optimizer, Phase::optimizer, "optimizer step", std::move(waits));
  }

 private:
  void forward() {
    ops(work_.pre.forward, 0, Phase::forward);
    for (int l = 0; l < s_.model.layers; ++l) ops(work_.layer.forward, l + 1, Phase::forward);
    ops(work_.post.forward, s_.model.layers + 1, Phase::forward);
  }

  void backward() {
    ops(work_.post.backward, s_.model.layers + 1, Phase::backward);
    for (int l = s_.model.layers - 1; l >= 0; --l) {
      ops(work_.layer.recompute, l + 1, Phase::recompute);
      ops(work_.layer.backward, l + 1, Phase::backward);
    }
    ops(work_.pre.backward, 0, Phase::backward);
  }

  void ops(const std::vector<OpCost>& list, int block, Phase phase) {
    for (const OpCost& cost : list) one(cost, block, phase);
  }

  void one(const OpCost& cost, int block, Phase phase) {
    const OpSite site{block, &cost, phase, last_};
    tp_.before_op(b_, site);
    const OpIndex op = b_.compute(cost, phase, op_name(site, s_.model.layers));
    tp_.after_op(b_, site, op);
    if (phase == Phase::backward && last_) dp_->after_backward_op(b_, site, op);
  }

  const Scenario& s_;
  const workload::ModelWork& work_;
  StepBuilder& b_;
  TensorParallel tp_;
  std::unique_ptr<DataParallel> dp_;
  bool last_ = false;
};

// Each GPU's share of its node's NICs. Behind an oversubscribed fat tree, traffic leaving
// the leaf switch gets only 1/oversubscription of it; a rail-optimized fabric keeps each
// rail's traffic on its own switches at full rate.
Bandwidth nic_share(const ClusterSpec& c) {
  const int nics = std::max(c.inter_node.nics_per_node, 1);
  double share = static_cast<double>(nics) / c.gpus_per_node;
  if (c.inter_node.topology == InterTopology::fat_tree) share /= c.inter_node.oversubscription;
  return c.inter_node.nic_bandwidth.scaled(share);
}

struct Comm {
  CommKind kind;
  Dim dim;
  const char* name;
};
constexpr Comm kComms[] = {{CommKind::tp, Dim::tp, "tp"}, {CommKind::dp, Dim::dp, "dp"}};

// Simulated ranks get communicators: one Group per real group that has simulated members.
class Layout {
 public:
  Layout(const Scenario& s, engine::Program& program)
      : s_(s), program_(program), ranks_(simulated_ranks(s.parallel, s.simulation.ranks)) {}

  const std::vector<SimulatedRank>& ranks() const { return ranks_; }

  void add_rank(std::size_t index, StepBuilder& b) {
    const SimulatedRank& r = ranks_[index];
    engine::RankProgram rank;
    rank.rank = r.rank;
    rank.multiplicity = r.multiplicity;
    rank.label = r.label;
    rank.streams = {"compute"};
    program_.ranks.push_back(std::move(rank));
    b.set_links(add_resource(fmt::format("rank {} nvlink", r.rank), s_.cluster.intra_node.bandwidth),
                add_resource(fmt::format("rank {} nic", r.rank), nic_share(s_.cluster)));
    for (const Comm& c : kComms) add_comm(index, c, b);
  }

 private:
  network::ResourceId add_resource(std::string name, Bandwidth capacity) {
    program_.resources.push_back({std::move(name), capacity});
    return static_cast<network::ResourceId>(program_.resources.size() - 1);
  }

  void add_comm(std::size_t index, const Comm& c, StepBuilder& b) {
    if (dim_size(s_.parallel, c.dim) <= 1) return;
    const std::vector<int> members = group_ranks(s_.parallel, ranks_[index].rank, c.dim);
    auto& streams = program_.ranks[index].streams;
    streams.push_back(c.name);
    const auto stream = static_cast<engine::StreamIndex>(streams.size() - 1);
    b.add_communicator(c.kind, {group(c, members, index), stream,
                                shape_of(members, s_.cluster.gpus_per_node)});
  }

  // Groups partition the ranks, so a group's first member names it.
  std::int32_t group(const Comm& c, const std::vector<int>& members, std::size_t index) {
    const auto [it, inserted] = groups_.try_emplace({c.kind, members.front()},
                                                    static_cast<std::int32_t>(program_.groups.size()));
    if (inserted) {
      program_.groups.push_back({c.name, c.kind, static_cast<int>(members.size()), {},
                                 ranks_string(members)});
    }
    program_.groups[static_cast<std::size_t>(it->second)].members.push_back(static_cast<int>(index));
    return it->second;
  }

  const Scenario& s_;
  engine::Program& program_;
  std::vector<SimulatedRank> ranks_;
  std::map<std::pair<CommKind, int>, std::int32_t> groups_;
};

}  // namespace

engine::Program build_program(const Scenario& scenario, const workload::ModelWork& work,
                              const Costs& costs) {
  check_supported(scenario);
  engine::Program program;
  program.kernel_launch = costs.kernel_launch();
  program.comm_slowdown = costs.comm_slowdown();
  BuildState state(program, costs);
  Layout layout(scenario, program);
  for (std::size_t r = 0; r < layout.ranks().size(); ++r) {
    StepBuilder b(state, r);
    layout.add_rank(r, b);
    StepWriter(scenario, work, b).step();
  }
  return program;
}

std::string placement_notes(const Scenario& scenario) {
  std::string notes = placement_description(scenario);
  if (scenario.parallel.dp <= 1 || scenario.data_parallel.kind != DpKind::ddp) return notes;
  const BucketLayout layout = bucket_layout(scenario);
  Bytes total{0};
  for (const Bucket& b : layout.buckets) total += b.size;
  return fmt::format("{}; DDP: {} gradient tensors in {} buckets, {} in all", notes,
                     layout.tensors.size(), layout.buckets.size(), format_size(total));
}

}  // namespace stepsim::parallelism
