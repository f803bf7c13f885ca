// What ran where and when: intervals per rank and stream, tagged. Produced by the engine
// (simulation) and by analysis (real profiler traces); consumed by the one report code.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "stepsim/name_table.hpp"
#include "stepsim/units.hpp"

namespace stepsim {

enum class Activity : std::uint8_t { compute, comm, memory, bubble };
enum class Phase : std::uint8_t { forward, backward, recompute, optimizer, other };
// Kinds of communication in the report (docs/report.md). Keep `other` last.
enum class CommKind : std::uint8_t { tp, cp, ep, dp, fsdp, pp, other };
inline constexpr std::size_t kCommKinds = 7;
enum class CollOp : std::uint8_t { allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv, other };

const char* to_string(CommKind k);
const char* to_string(CollOp op);
const char* to_string(Activity a);
const char* to_string(Phase p);
const char* nccl_name(CollOp op);  // "AllReduce", "AllGather", ...
// AllToAll and SendRecv: NCCL runs them as grouped sends and receives, whose protocol follows
// each transfer's size; NCCL_ALGO and NCCL_PROTO choose among the collectives' algorithms only.
constexpr bool point_to_point(CollOp op) { return op == CollOp::alltoall || op == CollOp::sendrecv; }

struct Interval {
  Time start;
  Time end;
  std::uint32_t name = 0;    // index into Timeline::names
  std::uint16_t stream = 0;  // index into RankTimeline::streams
  Activity activity = Activity::compute;
  Phase phase = Phase::other;       // compute only
  CommKind kind = CommKind::other;  // comm only
  CollOp op = CollOp::other;        // comm only
  bool slows_compute = true;        // comm only: an NCCL kernel (slows compute), not userbuffers
  std::int32_t group = -1;          // comm only: index into Timeline::groups, -1 unknown
  Bytes bytes{0};                   // comm: nccl-tests size S; memory: bytes copied
  // comm only: how long the op sat at its rendezvous before `start`, waiting for the last
  // member to arrive. A real NCCL kernel runs (and is traced) through that wait.
  Time waited = Time::zero();

  bool operator==(const Interval&) const = default;
};

struct CounterSample {
  Time at;
  Bytes value;
};

struct ProcessGroup {
  std::string name;  // "tp", "dp", or the Kineto "Process Group Name"
  CommKind kind = CommKind::other;
  int size = 0;       // members
  std::string ranks;  // "[0, 1, 2, 3]" where known
  // Simulated groups: the NVLink domains the members span and members in each, the shape
  // its collectives were costed on (0 where not known).
  int nodes = 0, ranks_per_node = 0;
};

// The host (CPU) thread of a simulated rank issuing `ops` ops back to back, from `start` until
// the last of them was issued; between two such runs it waits for the GPU (a synchronising call).
// The kernels CUDA graphs replay among them cost the CPU nothing and are not counted in `ops`.
struct HostRun {
  Time start;
  Time end;
  std::uint32_t ops = 0;

  bool operator==(const HostRun&) const = default;
};

// How the host issued the op of one interval (simulated ranks, when a run is asked to record
// it: a Kineto trace's CPU side). The host pays `cost` for the op, its framework's dispatch and
// its kernel's launch, and is done with it at `issued`; an op a CUDA graph replays costs the
// host nothing (`replayed`), the graph's launch being free in the model.
struct HostIssue {
  Time issued;
  Time cost;
  std::uint32_t order = 0;  // its place in the host's issue order
  bool op = false;          // false: a bubble, which the host does not issue
  bool replayed = false;

  bool operator==(const HostIssue&) const = default;
};

struct RankTimeline {
  int rank = 0;                       // global rank it stands for (the first of its class)
  int multiplicity = 1;               // real ranks this one represents
  std::string label;                  // "rank 0 (stage 0)"
  std::vector<std::string> streams;   // "compute", "tp", "dp", ...
  std::vector<Interval> intervals;    // in start order per stream; streams interleaved
  std::vector<CounterSample> memory;  // allocated bytes over time
  std::vector<HostRun> host;          // simulated ranks: the CPU's runs of launches, in time order
  // When recorded (Program::record_host_issues), one per interval, in the same order; else empty.
  std::vector<HostIssue> issues;
  // Intervals the simulation ran and did not keep: all-ranks runs keep only the ranks that
  // a trace or the report's own measurements read (a summary of every rank is in the report).
  std::size_t dropped = 0;
  // How much longer its compute ran for the SMs and HBM bandwidth NCCL kernels took beside it
  // (simulated ranks whose program derives the slowdown from those shares; zero otherwise).
  Time compute_slowed = Time::zero();
};

// What the compute model charged a compute kernel: its FLOPs and HBM bytes (a piece of an
// op split beside its communication: that piece's own share). stepsim's traces carry it, so
// that a fit to them knows each kernel's work; profiler traces do not.
struct KernelWork {
  double flops = 0;
  Bytes bytes{0};

  bool operator==(const KernelWork&) const = default;
};

struct StepWindow {
  std::string name;  // "step", "ProfilerStep#4"
  Time start;
  Time end;
};

struct Timeline {
  NameTable names;
  std::vector<ProcessGroup> groups;
  std::vector<RankTimeline> ranks;
  std::vector<StepWindow> steps;  // at least one window
  // By name: the compute kernels whose work is known (simulated ones, stepsim's traces).
  std::map<std::uint32_t, KernelWork> work;
  // Simulated: the host's cost of one kernel launch (cluster.gpu.kernel_launch in force), the
  // part of each op's host cost that is its launch; the rest is the framework's dispatch.
  Time kernel_launch = Time::zero();

  std::uint32_t intern(std::string_view name) { return names.intern(name); }
};

}  // namespace stepsim
