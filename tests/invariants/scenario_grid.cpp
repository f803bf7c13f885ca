// The dimensions of the generated scenarios and the fixed-seed draw over their product.
#include "invariants/scenario_grid.hpp"

#include <array>
#include <random>
#include <set>

namespace stepsim::test {
namespace {

struct Shape {
  int tp, pp, dp;
};

constexpr std::array<const char*, 3> kModels = {"gpt-1.3b", "llama3-8b", "gpt-22b"};
constexpr std::array<const char*, 3> kClusters = {"dgx-h100-ndr", "dgx-a100-80g-hdr", "dgx-b200"};
// Shapes inside one node, across nodes, and with a partly used last node (4 × 3 = 12 GPUs).
constexpr std::array<Shape, 10> kShapes = {
    {{1, 1, 8}, {2, 1, 4}, {8, 1, 2}, {2, 2, 2}, {4, 2, 2}, {1, 4, 2}, {2, 4, 1}, {8, 2, 4}, {4, 1, 3}, {1, 3, 2}}};
constexpr std::array<const char*, 3> kSchedules = {"1f1b", "gpipe", "interleaved"};
constexpr std::array<const char*, 5> kDpKinds = {"ddp", "zero1", "zero2", "fsdp", "hsdp"};
constexpr std::array<const char*, 3> kRecompute = {"none", "selective", "full"};
constexpr std::array<int, 2> kMicroBatch = {1, 2};
constexpr std::array<int, 3> kBucketCapMb = {1, 25, 100};
constexpr std::array<int, 2> kSeqLen = {0, 32768};  // 0: the model's own
constexpr std::array<int, 2> kShardGroup = {0, 2};  // hsdp: 0 leaves the default (one node)

// Draws one index below `n` from the generator's raw output: std::mt19937 is specified bit
// for bit, unlike the standard distributions.
std::size_t draw(std::mt19937& rng, std::size_t n) { return static_cast<std::size_t>(rng() % n); }

GridPoint make_point(std::mt19937& rng) {
  const char* model = kModels[draw(rng, kModels.size())];
  const char* cluster = kClusters[draw(rng, kClusters.size())];
  const Shape shape = kShapes[draw(rng, kShapes.size())];
  // One stage has no pipeline to schedule: 1F1B, the only schedule accepted there.
  const char* schedule = kSchedules[draw(rng, kSchedules.size())];
  if (shape.pp == 1) schedule = kSchedules[0];
  const char* dp_kind = kDpKinds[draw(rng, kDpKinds.size())];
  const char* recompute = kRecompute[draw(rng, kRecompute.size())];
  // Sequence parallelism needs a TP group (the draw is made either way, to keep the sequence).
  const bool sequence_parallel = draw(rng, 2) == 1 && shape.tp > 1;
  const int micro_batch = kMicroBatch[draw(rng, kMicroBatch.size())];
  const int bucket_cap_mb = kBucketCapMb[draw(rng, kBucketCapMb.size())];
  const int seq_len = kSeqLen[draw(rng, kSeqLen.size())];
  const int shard_group = kShardGroup[draw(rng, kShardGroup.size())];
  const bool hsdp = std::string(dp_kind) == "hsdp";
  // The bucket size is DDP's key alone: FSDP's units have no buckets, ZeRO sizes its own.
  const bool buckets = std::string(dp_kind) == "ddp";
  const bool interleaved = std::string(schedule) == "interleaved";
  // Two micro-batches per stage: enough for every schedule to reach its steady state.
  const int micro_batches = 2 * shape.pp;
  const long long global_batch = 1LL * micro_batch * shape.dp * micro_batches;
  GridPoint p;
  p.label = std::string(model) + (seq_len ? " seq" + std::to_string(seq_len) : "") + " " + cluster + " tp" +
            std::to_string(shape.tp) + " pp" + std::to_string(shape.pp) + " dp" + std::to_string(shape.dp) + " " +
            schedule + " " + dp_kind + (hsdp && shard_group ? " shard" + std::to_string(shard_group) : "") +
            " recompute=" + recompute + (sequence_parallel ? " sp" : "") + " mb" + std::to_string(micro_batch) +
            (buckets ? " bucket" + std::to_string(bucket_cap_mb) : "");
  p.sets = {"model=" + std::string(model),
            "cluster=" + std::string(cluster),
            "parallel.tp=" + std::to_string(shape.tp),
            "parallel.pp=" + std::to_string(shape.pp),
            "parallel.dp=" + std::to_string(shape.dp),
            "parallel.schedule=" + std::string(schedule),
            "parallel.virtual_stages=" + std::string(interleaved ? "2" : "1"),
            "parallel.sequence_parallel=" + std::string(sequence_parallel ? "true" : "false"),
            "training.micro_batch=" + std::to_string(micro_batch),
            "training.global_batch=" + std::to_string(global_batch),
            "training.recompute=" + std::string(recompute),
            "data_parallel.kind=" + std::string(dp_kind)};
  if (buckets) p.sets.push_back("data_parallel.bucket_cap_mb=" + std::to_string(bucket_cap_mb));
  if (seq_len) p.sets.push_back("model.seq_len=" + std::to_string(seq_len));
  if (hsdp && shard_group) p.sets.push_back("data_parallel.shard_group=" + std::to_string(shard_group));
  return p;
}

}  // namespace

std::vector<GridPoint> scenario_grid(std::size_t count) {
  std::mt19937 rng(20240607);
  std::vector<GridPoint> grid;
  std::set<std::string> seen;
  // Draws stop after a bounded number of attempts even if the product has fewer points.
  for (std::size_t attempts = 0; grid.size() < count && attempts < 100 * count; ++attempts) {
    GridPoint p = make_point(rng);
    if (seen.insert(p.label).second) grid.push_back(std::move(p));
  }
  return grid;
}

}  // namespace stepsim::test
