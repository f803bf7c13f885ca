// Appends one rank's ops in host issue order: compute ops with their durations, collectives
// with their cost and link loads, and the cross-stream waits (CUDA events) between them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/collective.hpp"
#include "engine/program.hpp"
#include "parallelism/costs.hpp"
#include "parallelism/fabric.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

using engine::OpIndex;

// Where an op sits in the step, for the strategies' hooks.
struct OpSite {
  int block = 0;  // 0: embedding, 1..layers: transformer layer block-1, layers+1: LM head
  const workload::OpCost* cost = nullptr;
  Phase phase = Phase::forward;
  bool last_micro_batch = false;
  int micro_batch = 0;  // of the chunk's micro-batches, from 0
};

// When a deferred wait attaches to a later compute op.
enum class WaitRule : std::uint8_t {
  next_op,          // the very next compute op (exposed communication)
  next_other_role,  // the first op of another role (overlaps the rest of this GEMM)
  wgrad_of_role,    // the weight-gradient op of this role, or the first op of another role
};

// A communicator as one rank sees it.
struct Communicator {
  std::int32_t group = -1;  // index into Program::groups
  engine::StreamIndex stream = 0;
  collectives::GroupShape shape;
  SpineShare spine{};   // share of the members' cross-node traffic that leaves their leaf
  LinkShares shares{};  // the bandwidth its slowest members' links carry (simulation.variation)
  // Representative mode under an oversubscribed spine: the loads on every leaf's uplinks that
  // the stage's groups of its kind cross (the rank's own leaf then takes no `spine` share).
  std::vector<LeafLoad> leaves{};
  // Representative mode: the links of members of the costed group that are placed otherwise
  // than the rank in another of its communicators (a TP group across two racks whose members
  // on one rack have other DP groups): the calls load them too, beside the rank's own, so
  // that a collective runs at the pace of its busiest member's links (see add_stand_in).
  std::vector<RankPorts> others{};
};

// The pipeline's point-to-point links of one rank, each a 2-member group of one direction
// (NCCL matches sends and receives per peer and direction, in order), and the tied
// embedding's group between the first and the last stage.
// DualPipe's reverse direction has its own four links, and its gradient sum of the two copies
// of each stage its own group of the stage and its mirror image.
enum class PpLink : std::uint8_t {
  forward_in,
  forward_out,
  backward_in,
  backward_out,
  embedding,
  reverse_forward_in,
  reverse_forward_out,
  reverse_backward_in,
  reverse_backward_out,
  mirror,
};
inline constexpr std::size_t kPpLinks = 10;

// State shared by every rank of one program: interned names and collective costs.
class BuildState {
 public:
  BuildState(engine::Program& program, const Costs& costs) : program_(program), costs_(costs) {}
  std::uint32_t name(const std::string& text);
  // NCCL's cost of `request` on a communicator whose links carry `shares` of their bandwidth.
  const CollectiveCost& collective(const collectives::Request& request, const LinkShares& shares);
  engine::Program& program() { return program_; }
  const Costs& costs() const { return costs_; }
  // CUDA graphs replay the transformer layers (training.cuda_graphs): their ops cost the host
  // nothing to issue (Program::host_costs[kReplayed - 1] is zero).
  void capture_layers() { capture_layers_ = true; }
  bool captures_layers() const { return capture_layers_; }
  // Or only these parts of each layer (training.cuda_graph_scope).
  void capture_scopes(const std::vector<CudaGraphScope>& scopes) { scopes_ = scopes; }
  // Whether a graph replays the ops of `role` (a cast's: its GEMM's).
  bool captures(workload::Role role) const;
  static constexpr std::uint8_t kReplayed = 1;
  // A grouped GEMM is one kernel, one launch whatever its groups (torch._grouped_mm, torchtitan's
  // experts), rather than Transformer Engine's GEMM per group.
  void launch_grouped_gemm_once() { grouped_gemm_once_ = true; }
  bool launches_grouped_gemm_once() const { return grouped_gemm_once_; }
  // The host cost class (Op::host) of an op that costs the CPU `cost`, added on first use.
  std::uint8_t host_class(Time cost);

 private:
  using Key = std::tuple<CollOp, std::int64_t, int, int, int, double, double, int, CommKind>;
  engine::Program& program_;
  const Costs& costs_;
  std::map<Key, CollectiveCost> collectives_;
  bool capture_layers_ = false;
  bool grouped_gemm_once_ = false;
  std::vector<CudaGraphScope> scopes_;
};

class StepBuilder {
 public:
  StepBuilder(BuildState& state, std::size_t rank_index);

  // The rank's NVLink port, NIC and leaf uplinks (Fabric::ports).
  void set_links(const RankPorts& ports) { ports_ = ports; }
  void add_communicator(CommKind kind, const Communicator& comm);
  bool has_communicator(CommKind kind) const;
  void add_pp_link(PpLink link, const Communicator& comm);
  // The expert-data-parallel communicator (kind dp) that reduces expert gradients.
  void add_expert_dp(const Communicator& comm) { slots_[kExpertDpSlot] = comm; }
  bool has_expert_dp() const { return slots_[kExpertDpSlot].group >= 0; }
  // `kind`: what the report counts it as (dp for the distributed optimizer's buckets, fsdp for
  // FSDP's expert units).
  OpIndex expert_dp_collective(CollOp op, Bytes size, const std::string& what, const std::vector<OpIndex>& waits,
                               CommKind kind = CommKind::dp);
  // The expert-tensor-parallel communicator (kind ep) that gathers an ETP group's tokens.
  void add_expert_tp(const Communicator& comm) { slots_[kExpertTpSlot] = comm; }
  OpIndex expert_tp_collective(CollOp op, Bytes size, std::uint32_t name, const std::vector<OpIndex>& waits);
  bool has_pp_link(PpLink link) const;
  // Representative mode: `kind`'s calls also load `ports`, another member's links
  // (Communicator::others).
  void add_other_links(CommKind kind, const RankPorts& ports);
  // Representative mode: a stand-in for the `kind` communicator of members placed otherwise
  // (Group::stand_in): each call on `kind` is made again on it, over `ports` (those members'
  // links), with the call's waits. It loads their links beside the calls of the rank's other
  // communicators that load them too (Communicator::others); nothing waits for it, it takes
  // no host time, and it slows no compute.
  void add_stand_in(CommKind kind, const Communicator& comm, const RankPorts& ports);

  // A compute op; it also waits for every deferred wait whose rule it meets.
  OpIndex compute(const workload::OpCost& op, Phase phase, const std::string& name,
                  const std::vector<OpIndex>& waits = {});
  // The same with a name already interned (BuildState::name), for names reused across
  // micro-batches.
  OpIndex compute(const workload::OpCost& op, Phase phase, std::uint32_t name, const std::vector<OpIndex>& waits = {});
  // An AllReduce of a few bytes over a group that is none of the rank's communicators (the
  // loss scale's overflow flag over the model-parallel group or the whole job), on the compute
  // stream, which waits for it: as long as NCCL's model gives for the group's shape, its
  // latency in effect. It neither loads links nor waits for the group's other members.
  OpIndex small_all_reduce(const collectives::GroupShape& shape, Bytes size, Phase phase, const std::string& name,
                           const std::vector<OpIndex>& waits);
  // A collective on `kind`'s stream, named "AllReduce dp bucket 3, 25.0 MiB".
  OpIndex collective(CommKind kind, CollOp op, Bytes size, const std::string& what, const std::vector<OpIndex>& waits);
  // The same with the name from collective_name().
  OpIndex collective(CommKind kind, CollOp op, Bytes size, std::uint32_t name, const std::vector<OpIndex>& waits);
  std::uint32_t collective_name(CommKind kind, CollOp op, Bytes size, const std::string& what);
  // The same on one of the pipeline's links (CommKind::pp).
  OpIndex pp_collective(PpLink link, CollOp op, Bytes size, const std::string& what, const std::vector<OpIndex>& waits);
  // Communication outside NCCL on `kind`'s stream, at the given cost (Transformer Engine's
  // userbuffers: copy engines and its own kernels over NVLink, without NCCL's launch and
  // protocol latency). It does not slow the compute beside it by comm_slowdown: the SMs it
  // takes, if any, are the caller's to charge to that compute.
  OpIndex transfer(CommKind kind, CollOp op, Bytes size, std::uint32_t name, const CollectiveCost& cost,
                   const std::vector<OpIndex>& waits);
  // `op` is launched by a library's own C++ loop, which the framework entered once for an
  // earlier op (Transformer Engine's userbuffers overlap launches its GEMM pieces and transfers
  // so): the CPU pays the kernel's launch for it, not the framework's dispatch too. A replayed
  // op stays free.
  void launched_from_cpp(OpIndex op);
  // The host issues `operators` PyTorch operators for `op`, each at the framework's cost, the
  // op's own launch among them (FSDP2's copy into an AllGather's input before the collective).
  // A replayed op stays free.
  void issued_with(OpIndex op, int operators);
  // The rank's copy-engine streams to and from host memory (activation offload), and what it
  // gets of its host link per direction. With groups (one rank each, one per direction) the
  // copies cross the GPU's PCIe link (RankPorts::pcie_tx, pcie_rx), which they share with the
  // GPU's NIC traffic.
  void set_host_streams(engine::StreamIndex to_host, engine::StreamIndex from_host, Bandwidth share,
                        std::int32_t to_host_group = -1, std::int32_t from_host_group = -1);
  Bandwidth host_share() const { return host_share_; }
  // A copy of `bytes` to (or from) host memory on its stream, taking `duration` (or, over the
  // GPU's PCIe link, as long as it takes at up to its share of the host link there); the
  // allocation changes by `memory_delta` when it ends.
  OpIndex host_copy(bool to_host, std::uint32_t name, Bytes bytes, Time duration, Bytes memory_delta, Phase phase,
                    const std::vector<OpIndex>& waits);
  void defer_wait(OpIndex op, WaitRule rule, workload::Role role);
  // Two passes issued interleaved (DualPipe's overlapped forward and backward) each keep their
  // own deferred waits and last compute op: a wait attaches only to a compute op of its lane.
  void set_lane(int lane);
  // Back to one lane: waits still deferred in either attach to the next compute op that
  // meets their rule, and the last compute op is the last one issued.
  void join_lanes();
  // How many waits the current lane has deferred so far: a pass that has just issued
  // communication it will wait for can give the compute stream to the other lane.
  long long deferrals() const { return deferrals_[static_cast<std::size_t>(lane_)]; }
  // Deferred waits not yet attached (the optimizer takes them).
  std::vector<OpIndex> take_deferred();
  // The last compute op issued, if any.
  std::vector<OpIndex> last_compute() const;
  // The last compute op issued by either lane: what a collective issued from the compute
  // stream waits for (PyTorch's process-group stream waits for all the work queued before it
  // on the current stream), where last_compute() is what one pass's own work depends on.
  std::vector<OpIndex> stream_tail() const;

  engine::RankProgram& rank();
  BuildState& state() { return state_; }
  // The op a TP collective or transfer about to be issued belongs to: under partial CUDA graph
  // scopes it is replayed with that op's scope. Cleared by passing nullopt.
  void set_comm_role(std::optional<workload::Role> role) { comm_role_ = role; }

  // Gives this rank the ops `model` (a rank of the same stage, already written) issued, and
  // calls of its own: each of `model`'s calls made again on this rank's communicator of the
  // same kind or link, over this rank's links. Writing the step again would give exactly that
  // when the two ranks' communicators differ only in their groups. When they differ in more
  // (which exist, a stream, a group's shape or spine share, which of them are one group), or
  // when their shares of their host links differ (their copies take other times), it changes
  // nothing and returns false: the rank's step must be written op by op.
  bool replay(StepBuilder& model);

 private:
  struct Deferred {
    OpIndex op;
    WaitRule rule;
    workload::Role role;
    int lane = 0;
  };
  static constexpr int kLanes = 2;
  // A collective call as the engine sees it; equal ones are shared by their ops.
  using CallKey = std::tuple<CollOp, CommKind, std::int32_t, std::int64_t>;
  // Where a communicator sits in slots_: the CommKinds first, then the pipeline's links, then
  // the expert-tp and the expert-dp communicators.
  static constexpr std::size_t kSlots = kCommKinds + kPpLinks + 4;
  static constexpr std::size_t kExpertTpSlot = kCommKinds + kPpLinks;
  static constexpr std::size_t kExpertDpSlot = kExpertTpSlot + 1;
  // Host copies over the GPU's PCIe link, one group of the rank alone per direction.
  static constexpr std::size_t kToHostSlot = kExpertTpSlot + 2;
  static constexpr std::size_t kFromHostSlot = kExpertTpSlot + 3;
  static constexpr std::size_t slot_of(CommKind kind) { return static_cast<std::size_t>(kind); }
  static constexpr std::size_t slot_of(PpLink link) { return kCommKinds + static_cast<std::size_t>(link); }
  // How a call was made, per call: replay() makes it again on another rank's communicator.
  struct CallOrigin {
    std::size_t slot = 0;
    Side side = Side::both;
    CollectiveCost cost;
    bool nccl = true;        // NCCL's cost for the communicator (a transfer's is the caller's)
    bool host_copy = false;  // a copy over the GPU's PCIe link (host_copy)
  };

  struct StandIn {
    std::size_t slot = 0;  // the communicator it stands in beside
    Communicator comm;
    RankPorts ports;
  };

  bool attaches(const Deferred& d, const workload::OpCost& op) const;
  std::vector<network::ResourceUse> uses(const Communicator& comm, CollOp op, const collectives::LinkLoad& load,
                                         Side side) const;
  // A host copy's: the GPU's PCIe link, its transmit side to the host, its receive side back.
  std::vector<network::ResourceUse> host_copy_uses(Side side) const;
  OpIndex append(const engine::Op& op, const std::vector<OpIndex>& waits);
  std::int32_t call_of(std::size_t slot, CommKind kind, CollOp op, Bytes size, Side side);
  std::int32_t stand_in_call(const StandIn& stand_in, CommKind kind, CollOp op, Bytes size, Side side);
  OpIndex collective_on(std::size_t slot, CommKind kind, CollOp op, Bytes size, std::uint32_t name,
                        const std::vector<OpIndex>& waits, Side side = Side::both);

  BuildState& state_;
  std::size_t rank_index_;
  RankPorts ports_;
  std::array<Communicator, kSlots> slots_{};
  std::vector<StandIn> stand_ins_;
  std::vector<Deferred> deferred_;
  std::vector<OpIndex> waits_;  // the op being appended: its waits, sorted (kept to reuse its memory)
  std::map<CallKey, std::int32_t> calls_;
  std::map<CallKey, std::int32_t> transfers_;
  std::vector<CallOrigin> origins_;  // per call of the rank
  std::array<std::int64_t, kLanes> last_compute_{-1, -1};
  std::array<long long, kLanes> deferrals_{0, 0};
  int lane_ = 0;
  engine::StreamIndex to_host_ = 0;
  engine::StreamIndex from_host_ = 0;
  Bandwidth host_share_;
  std::optional<workload::Role> comm_role_;
};

// "L12 fc1" inside a transformer layer, "lm head" outside: what op names start with.
std::string site_label(const OpSite& site, int layers);
// The compute op's full name: the label with " fwd" or " recompute" for those phases
// (workload already names backward ops "fc1 dgrad", "gelu backward").
std::string op_name(const OpSite& site, int layers);

// "48.0 MiB", "12.0 KiB", "512 B".
std::string format_size(Bytes size);

}  // namespace stepsim::parallelism
