// The groups over which each framework all-reduces the loss scale's overflow flag.
#include "parallelism/loss_scaling.hpp"

#include "parallelism/mesh.hpp"
#include "stepsim/framework.hpp"

namespace stepsim::parallelism {
namespace {

// Megatron's model-parallel group of `rank`: its TP group in every pipeline stage.
std::vector<int> model_parallel_ranks(const ParallelSpec& p, int rank) {
  std::vector<int> ranks;
  Coord c = coord_of(p, rank);
  for (int stage = 0; stage < p.pp; ++stage) {
    for (int t = 0; t < p.tp; ++t) {
      c.pp = stage;
      c.tp = t;
      ranks.push_back(global_rank(p, c));
    }
  }
  return ranks;
}

bool distributed_optimizer(DpKind kind) { return kind != DpKind::ddp; }

}  // namespace

bool scales_loss(const Scenario& s) {
  return s.training.precision == Precision::fp16 && loss_scaling(s.training.framework) != LossScaling::none;
}

std::vector<FlagReduce> overflow_flag_reduces(const Scenario& s, int rank) {
  std::vector<FlagReduce> out;
  if (!scales_loss(s)) return out;
  const ParallelSpec& p = s.parallel;
  const int domain = s.cluster.domain_gpus();
  const DpKind kind = s.data_parallel.kind;
  const FlagReduce world{"all ranks", shape_of(RankGroup{0, 1, p.gpus()}, domain), Bytes(4)};
  const auto model_parallel = [&](Bytes size) {
    return FlagReduce{"model-parallel", shape_of(model_parallel_ranks(p, rank), domain), size};
  };
  switch (loss_scaling(s.training.framework)) {
    case LossScaling::megatron_core:
      // found_inf, a float, over get_grad_stats_parallel_group(): every rank under the
      // distributed optimizer, the model-parallel group otherwise.
      out.push_back(distributed_optimizer(kind) ? world : model_parallel(Bytes(4)));
      break;
    case LossScaling::grad_scaler:
      // ShardedGradScaler's process_group, dist.group.WORLD unless given; DDP's gradients are
      // the same on every rank, and GradScaler reduces nothing.
      if (kind == DpKind::fsdp || kind == DpKind::hsdp) out.push_back(world);
      break;
    case LossScaling::deepspeed:
      // A byte: over the data-parallel group where ZeRO-2 and ZeRO-3 partition the gradients, then over
      // the model-parallel group (_model_parallel_all_reduce).
      if (kind == DpKind::zero2 || kind == DpKind::fsdp)
        out.push_back({"data-parallel", shape_of(group_of(p, rank, Dim::dp), domain), Bytes(1)});
      out.push_back(model_parallel(Bytes(1)));
      break;
    case LossScaling::none:
      break;
  }
  std::erase_if(out, [](const FlagReduce& r) { return r.shape.ranks <= 1; });
  return out;
}

}  // namespace stepsim::parallelism
