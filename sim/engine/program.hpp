// The per-rank program the parallelism layer builds and the engine executes: ops on
// streams, in host issue order, with cross-stream events and collective groups.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/variation.hpp"
#include "network/resource.hpp"
#include "stepsim/timeline.hpp"
#include "stepsim/units.hpp"

namespace stepsim::engine {

using OpIndex = std::uint32_t;
using StreamIndex = std::uint16_t;

// copy: a memory copy on a copy engine (cudaMemcpyAsync between the GPU and host memory): it
// takes its duration as given, neither slowed by NCCL kernels nor jittered like a kernel. A
// copy whose bytes share a link with other traffic is a collective op instead, whose call is
// a host copy (CollectiveCall::host_copy).
enum class OpKind : std::uint8_t { compute, collective, copy };

// The data phase of a collective as NCCL's cost model sees it: a fixed latency, then `size`
// bytes (nccl-tests S) at up to `algbw`, loading link resources while it runs.
struct CollectiveCall {
  CollOp op = CollOp::allreduce;
  CommKind kind = CommKind::other;
  std::int32_t group = -1;  // index into Program::groups
  Bytes size{0};
  Time latency;
  Bandwidth algbw;
  std::vector<network::ResourceUse> uses;
  // An NCCL kernel takes SMs and HBM bandwidth from the compute beside it (comm_slowdown).
  // Transformer Engine's userbuffers transfers do not: the SMs they take are charged to the
  // GEMM pieces they run beside, whose work says so.
  bool slows_compute = true;
  // What one member's kernel takes of its GPU (Program::derived_slowdown): its channels' SMs
  // over the GPU's, and the HBM bandwidth its bytes use over the GPU's.
  double sm_share = 0;
  double hbm_share = 0;
  // A copy engine's copy between the GPU and host memory whose bytes cross a link other
  // traffic loads too (the GPU's PCIe link, which its NIC traffic also crosses): a flow of its
  // one rank, at up to `algbw`, over `uses`. No NCCL kernel: the timeline shows it as a memory
  // copy, not as communication, and it neither slows the compute nor counts as communication
  // running.
  bool host_copy = false;

  bool operator==(const CollectiveCall&) const = default;
};

// Large programs hold millions of ops: the fields are ordered to leave no padding.
struct Op {
  Time duration;                  // compute: duration at full speed on an idle GPU; copy: its duration
  Bytes memory_delta{0};          // allocation change when the op ends (memory counter)
  std::uint32_t name = 0;         // index into Program::names
  std::int32_t call = -1;         // collective: index into RankProgram::calls
  std::uint32_t waits_begin = 0;  // into RankProgram::waits: see RankProgram::waits_of
  std::uint32_t wait_count = 0;
  StreamIndex stream = 0;
  OpKind kind = OpKind::compute;
  Phase phase = Phase::other;
  bool host_blocks = false;  // the host waits for the op's waits before launching it
  // The host's cost to issue it: 0, Program::kernel_launch; k > 0, Program::host_costs[k - 1]
  // (a framework's dispatch and Python beside the launch; nothing for what a CUDA graph replays).
  std::uint8_t host = 0;
  bool memory_bound = false;  // compute: HBM bandwidth bounds it, not the SMs (derived_slowdown)

  bool operator==(const Op&) const = default;
};
static_assert(sizeof(Op) == 40, "an op's host cost class fits in what was padding");

// A rank's ops in host issue order and their waits. Ranks that issue the same ops (the
// data-parallel replicas of a stage, in all-ranks mode) share one list; only their calls
// (groups and links) differ.
struct OpList {
  std::vector<Op> ops;
  std::vector<OpIndex> waits;  // every op's waits, one run per op (no vector per op)

  bool operator==(const OpList&) const = default;
};

// Representative mode under kernel jitter: a simulated rank stands for real ranks whose
// kernels drift apart, each by the sum of its kernels' jitter, until a collective holds their
// compute back together. The model (built with the program) says when a collective's last
// real member arrives; the engine tells it where a collective held back a rank's compute.
class ArrivalModel {
 public:
  // The state of one run: what it was told so far.
  class Run {
   public:
    virtual ~Run() = default;
    // When the real members of collective op o of simulated rank r arrive, from when the
    // rank's work for it is ready (its events fired): the mean one and the last one; its
    // stream frees `lag` after that (negative: before), and a member whose work is ready
    // earlier waits for it.
    struct Arrival {
      Time mean;
      Time last;
    };
    virtual Arrival arrival(std::size_t r, OpIndex o, Time lag) = 0;
    // Compute op o of rank r starts, and of what it waited for (its launch, the op before it
    // on its stream, its events), `collective`, of a group of more than one real member, ended
    // last, `slack` after the rest (negative: before them): a real member whose own work was
    // not ready by then started later, and only the others were held back.
    virtual void held_back(std::size_t r, OpIndex o, OpIndex collective, Time slack) = 0;
    // The expected time from when rank r's last op ends until the last of the real ranks it
    // stands for is done: the step ends with the slowest of them.
    virtual Time finish(std::size_t r) = 0;
  };
  virtual ~ArrivalModel() = default;
  virtual std::unique_ptr<Run> start() const = 0;
};

struct RankProgram {
  int rank = 0;
  int multiplicity = 1;
  std::string label;
  // Its pipeline stage. Once the last rank of its stage is done, a rank waits on another stage
  // until the step ends (the pipeline's drain): a bubble, as a wait at a SendRecv is.
  int stage = 0;
  std::vector<std::string> streams;                           // stream 0 is "compute"
  std::shared_ptr<OpList> list = std::make_shared<OpList>();  // shared by ranks with equal ops
  std::vector<CollectiveCall> calls;
  Bytes memory_base{0};  // allocated before the step starts

  const std::vector<Op>& ops() const { return list->ops; }
  const std::vector<OpIndex>& waits() const { return list->waits; }
  // Changes the ops of every rank that shares them: only for a list not shared yet, or for a
  // change that is the same for every rank (an op's memory delta follows from its name).
  std::vector<Op>& ops() { return list->ops; }
  // Appends `op`, which waits for `op_waits` (ops of this rank that must end first: CUDA events).
  OpIndex add_op(Op op, std::span<const OpIndex> op_waits = {});
  std::span<const OpIndex> waits_of(OpIndex o) const;
  // Shares `other`'s op list if it holds the same ops, releasing this rank's own copy.
  void share_ops_with(const RankProgram& other);
};

// A communicator. Its k-th collective on every member rank is the same collective
// (NCCL orders calls per communicator); it starts when all simulated members reach it.
struct Group {
  std::string name;
  CommKind kind = CommKind::other;
  int size = 0;              // real members
  std::vector<int> members;  // indices into Program::ranks that take part
  std::string ranks;         // "[0, 8, 16, ...]" for the report
  // The shape its collectives are costed on: NVLink domains its members span, members in
  // each (0: not said).
  int nodes = 0, ranks_per_node = 0;
  // Representative mode: the group of members of a rank's costed group that are placed
  // otherwise in this kind (a TP group across two racks whose members' DP groups differ). Its
  // collectives load those members' links beside the rank's own and are left out of the
  // timeline: the rank stands for them only on the links they share.
  bool stand_in = false;
};

struct Program {
  NameTable names;
  std::map<std::uint32_t, KernelWork> work;  // by name: what the compute model charged its kernels, and copies' bytes
  std::vector<Group> groups;
  std::vector<RankProgram> ranks;
  std::vector<network::Resource> resources;
  Time kernel_launch = Time::from_us(5.0);  // host cost per launched kernel
  // Host cost per expert GEMM of a grouped GEMM beyond the first, beyond its launch.
  Time expert_gemm_host = Time::zero();
  std::vector<Time> host_costs;             // the other host costs ops name (Op::host), at most 255
  double comm_slowdown = 0.0;               // compute slows by this fraction while NCCL runs
  // Instead: compute slows by the shares of SMs (a compute-bound op) or of HBM bandwidth (a
  // memory-bound one) that the running NCCL kernels take (CollectiveCall::sm_share, hbm_share).
  bool derived_slowdown = false;
  ComputeVariation variation;  // ranks that compute slower, kernel jitter
  // Representative mode under kernel jitter: when a collective's slowest real member arrives.
  std::shared_ptr<const ArrivalModel> arrivals;
  // The timeline records how the host issued each op (RankTimeline::issues): a Kineto trace's
  // CPU side. Off by default: large runs keep no more per interval than they need.
  bool record_host_issues = false;

  std::uint32_t intern(std::string_view name) { return names.intern(name); }
  // The host's cost to issue `op`.
  Time host_cost(const Op& op) const { return op.host == 0 ? kernel_launch : host_costs[op.host - 1U]; }
};

}  // namespace stepsim::engine
