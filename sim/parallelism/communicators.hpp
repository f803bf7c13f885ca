// The communicators a rank belongs to, one list for the program builder, which gives each a
// group and a stream, and for the memory model, which counts NCCL's buffers per communicator.
#pragma once

#include <cstdint>
#include <vector>

#include "parallelism/mesh.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::parallelism {

// A collective communicator of one rank: tensor and context parallelism's, the data-parallel
// strategy's (dp; FSDP's; HSDP's shard group and its replica group), expert parallelism's
// all-to-all group, expert tensor parallelism's and the experts' data-parallel group.
struct RankCommunicator {
  // Which of the rank's communicators the program takes it for: its kind's, or the experts'
  // own (their TP group, their data-parallel group).
  enum class Use : std::uint8_t { kind, expert_tp, expert_dp };
  CommKind kind = CommKind::tp;
  const char* name = "tp";  // its group's and its stream's name
  RankGroup members;
  Use use = Use::kind;
};

// Rank `rank`'s collective communicators, in the order the program builder creates them; a
// group of one rank is none.
std::vector<RankCommunicator> rank_communicators(const Scenario& scenario, int rank);

// Beside its SendRecv links to the neighbouring stages, the pipeline groups of a rank of stage
// `stage`: the tied embedding's group of the first and the last stage (Megatron's embedding
// group, whose gradients it all-reduces), and DualPipe's group of a stage and its mirror image.
bool has_embedding_group(const Scenario& scenario, int stage);
bool has_mirror_group(const Scenario& scenario);

// The NCCL communicators rank `rank` creates: its collective communicators, its pipeline's
// (the SendRecv of Megatron's batched P2P runs on the pipeline group's one communicator), the
// tied embedding's and DualPipe's mirror group where it joins them.
int communicator_count(const Scenario& scenario, int rank);

}  // namespace stepsim::parallelism
