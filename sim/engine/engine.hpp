// The discrete-event engine: executes a Program (ops on streams, host launches, collectives
// with rendezvous and max-min shared flows) and records what ran as a Timeline.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/event_queue.hpp"
#include "engine/program.hpp"
#include "network/max_min.hpp"
#include "stepsim/timeline.hpp"
#include "stepsim/units.hpp"

namespace stepsim::engine {

// Sees each rank's intervals as soon as they are written, rank after rank, and says whether
// the timeline keeps them. A run of thousands of ranks whose intervals only a summary reads
// then never holds more than a few ranks' intervals: the ones it drops share one buffer.
class IntervalObserver {
 public:
  virtual ~IntervalObserver() = default;
  // Called once, before the first rank, with the step the timeline will carry.
  virtual void begin(const StepWindow& step) = 0;
  // Rank r's intervals are in timeline.ranks[r]; false drops them (RankTimeline::dropped
  // counts them). It may also drop the intervals of ranks it kept before.
  virtual bool observe(Timeline& timeline, std::size_t r) = 0;
};

struct RunStats {
  std::uint64_t events = 0;       // events popped from the queue, stale ones included
  std::uint64_t stale = 0;        // of them, superseded ones (a compute op or flow rescheduled since)
  std::uint64_t rate_solves = 0;  // max-min solves (active flow set changed)
};

class Engine {
 public:
  // Validates the program's internal consistency (a failed check is a builder bug). The
  // program must outlive the engine.
  explicit Engine(const Program& program);
  Engine(const Engine&) = delete;  // ranks_ points into op_states_
  Engine& operator=(const Engine&) = delete;

  // Runs the program once to completion. With an observer, the timeline keeps the intervals
  // of the ranks the observer keeps; without, every rank's.
  Timeline run(IntervalObserver* observer = nullptr);
  const RunStats& stats() const { return stats_; }

 private:
  enum class Status : std::uint8_t { waiting, arrived, running, done };

  // Millions of these in all-ranks mode: fields that never live at the same time share a
  // slot, so that an op's state takes 40 bytes.
  struct OpState {
    // When the host has issued it; max() while not yet issued. Once done: its place among the
    // rank's finished ops, in picoseconds' stead (see write_intervals).
    Time launch = Time::max();
    Time start;
    // Compute: when `work` was last brought up to date. Collective: when it reached its
    // rendezvous.
    Time since;
    union {
      std::int64_t work = 0;  // running compute: picoseconds of full-speed work still to do
      std::int64_t end_ps;    // once done: when it ended, in picoseconds (see end_of)
    };
    union {
      std::uint32_t version = 0;  // compute: invalidates compute_end events after a reschedule
      std::uint32_t collective;   // collective: index into collectives_
    };
    Status status = Status::waiting;
    std::uint32_t waits_met : 23 = 0;  // entries of `waits` done so far, at most kMaxWaits (no setup pass)
    bool wake_pending : 1 = false;
  };
  static constexpr std::uint32_t kMaxWaits = (1U << 23) - 1;
  // Op states from which on a run maps and gives back its largest buffers by hand (a few
  // hundred all-ranks GPUs and up).
  static constexpr std::size_t kLargeRun = std::size_t{64} << 20;
  static_assert(sizeof(OpState) <= 40, "an op's state is the largest buffer of an all-ranks run");

  struct StreamState {
    std::span<const OpIndex> ops;  // this stream's ops in issue order
    std::size_t head = 0;          // first op not yet done
  };

  // What follows from an op list alone, worked out once for all the ranks that share it.
  struct ListIndex {
    std::vector<std::vector<OpIndex>> streams;    // per stream, its ops in issue order
    std::vector<std::uint32_t> dependents_begin;  // per op, into dependents (one past: next op's)
    std::vector<OpIndex> dependents;              // ops whose `waits` name the op
    std::size_t memory_changes = 0;               // ops with a memory delta
  };

  // A bubble as the run records it: half the size of its interval (jitter makes millions).
  struct Bubble {
    Time start;
    Time end;
    std::uint32_t after = 0;  // ops the rank had finished when it ended
  };

  struct RankState {
    std::span<OpState> ops;       // this rank's part of op_states_
    std::span<const Op> program;  // the rank's ops (its shared op list)
    std::vector<StreamState> streams;
    std::span<const std::uint32_t> dependents_begin;  // the list's ListIndex
    std::span<const OpIndex> dependents;
    OpIndex host_next = 0;     // next op the host issues
    Time host_time;            // when the host is free to issue it
    bool host_issued = false;  // an op's end unblocked the host: every stream may move
    int comm_running = 0;      // collectives of this rank in their latency or data phase
    int compute_running = 0;   // compute ops of this rank that run
    int at_rendezvous = 0;     // collectives waiting for peers
    bool in_bubble = false;
    bool compute_busy = false;  // the compute stream's head runs (only a stream's head can)
    Time bubble_since;
    std::uint32_t finished = 0;      // ops done so far
    std::vector<Bubble> bubbles;     // the timeline's bubbles, until the intervals are written
    std::size_t memory_changes = 0;  // ops that change the allocated memory (the list's)
    Bytes memory{0};
    // The timeline's memory counter, kept here until the run ends: the rank's timeline is one
    // more cache miss per op that allocates.
    std::vector<CounterSample> memory_samples;
    std::size_t done = 0;
  };

  struct Member {
    std::uint32_t rank = 0;
    OpIndex op = 0;
  };

  // One collective: the k-th call of a group, on every simulated member.
  struct Collective {
    std::uint32_t group = 0;
    std::uint32_t call_index = 0;    // k
    std::uint32_t first_member = 0;  // into members_
    std::uint32_t member_count = 0;
    std::uint32_t arrived = 0;
    Bytes size{0};
    Time latency;
    Bandwidth cap;
    Time not_before;  // representative mode under jitter: when its slowest real member arrives
  };

  struct Flow {
    std::uint32_t collective = 0;
    double remaining = 0;  // bytes
    double rate = 0;       // bytes per second
    Time last;
    std::uint32_t version = 0;
    Bandwidth cap;
    // All members' link loads, gathered when the flow starts: only running collectives hold
    // them (millions of collectives in all-ranks mode, a few thousand at a time). The buffer
    // keeps its memory from one use of the slot to the next.
    std::vector<network::ResourceUse> uses;
  };

  // A rank's place in one group, and how many calls of the group it has made so far.
  struct Membership {
    std::uint32_t group = 0;
    std::uint32_t position = 0;  // index into Group::members
    std::uint32_t calls = 0;
  };

  struct Memberships {
    std::vector<std::size_t> begin;  // per rank, into groups (one past: next rank's)
    std::vector<Membership> groups;
  };

  // Setup (engine.cpp).
  void validate_rank(std::size_t r) const;
  const ListIndex& index_of(const OpList& list);
  void index_streams(const OpList& list, ListIndex& index) const;
  void index_dependents(const OpList& list, ListIndex& index) const;
  void attach_index(std::size_t r, const ListIndex& index);
  void index_collectives();
  Memberships memberships() const;
  void summarize_collectives();
  void start_timeline();
  void advise_interval_buffers();
  void dispatch(const Event& e);
  void prefetch(const Event& e) const;
  void check_finished() const;
  std::string describe_stuck(std::size_t r) const;
  std::string describe_wait(std::size_t r, OpIndex o) const;

  // Host, streams and compute (engine_streams.cpp).
  void issue_from_host(std::size_t r);
  bool waits_done(std::size_t r, OpIndex o) const;
  Time end_of(std::size_t r, OpIndex o) const { return Time::from_ps(ranks_[r].ops[o].end_ps); }
  void advance_rank(std::size_t r);
  void advance_after(std::size_t r, OpIndex o);
  void try_start(std::size_t r, std::size_t stream);
  void start_compute(std::size_t r, OpIndex o);
  void on_compute_end(std::size_t r, OpIndex o, std::uint32_t version);
  void schedule_compute_end(std::size_t r, OpIndex o);
  void reschedule_compute(std::size_t r, double old_factor);
  double compute_factor(std::size_t r) const;
  void complete_op(std::size_t r, OpIndex o);
  Interval interval_of(std::size_t r, OpIndex o) const;
  void update_bubble(std::size_t r);
  void write_intervals(IntervalObserver* observer);
  void write_rank_intervals(std::size_t r, std::vector<std::uint32_t>& order);
  Interval bubble_interval(const Bubble& b) const;

  // Collectives and flows (engine_comm.cpp).
  void arrive(std::size_t r, OpIndex o);
  void note_skew(std::size_t r, OpIndex o, Collective& coll) const;
  void start_collective(std::uint32_t c);
  void set_comm_running(std::size_t r, int delta);
  void on_latency_end(std::uint32_t c);
  void end_collective(std::uint32_t c);
  void add_flow(std::uint32_t c);
  void on_flow_end(std::uint32_t f, std::uint32_t version);
  void collect_component(std::uint32_t f, bool with_seed);
  void visit_resource(network::ResourceId r);
  void reshare(std::uint32_t f, bool with_seed);
  void schedule_flow_end(std::uint32_t f);
  const CollectiveCall& call_of(std::size_t r, OpIndex o) const;

  const Program& program_;
  std::vector<OpState> op_states_;  // every rank's ops, rank by rank: one buffer on huge pages
  std::vector<RankState> ranks_;
  // Per rank, its first op's state and its first op: dense, to prefetch without touching ranks_.
  std::vector<OpState*> op_base_;
  std::vector<const Op*> program_base_;
  std::unordered_map<const OpList*, std::unique_ptr<ListIndex>> indexes_;  // one per distinct op list
  std::vector<Collective> collectives_;
  std::vector<Member> members_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_flows_;
  // Flows sharing a resource, transitively, form a component; only the component of a flow
  // that starts or ends can change rates, so only it is solved again.
  std::vector<std::vector<std::uint32_t>> resource_flows_;  // active flows per resource
  std::vector<std::uint32_t> component_;
  std::vector<std::uint32_t> flow_mark_;      // per flow slot: epoch_ when visited
  std::vector<std::uint32_t> resource_mark_;  // per resource: epoch_ when visited
  std::uint32_t epoch_ = 0;
  std::vector<network::FlowDemand> demands_;
  network::MaxMinSolver solver_;
  EventQueue queue_;
  Time now_;
  Time last_end_;  // when the last op or bubble ended: the step's end
  RunStats stats_;
  Timeline timeline_;
  std::vector<std::uint32_t> name_map_;  // Program::names index -> Timeline::names index
  std::uint32_t bubble_name_ = 0;
  bool ran_ = false;
};

// Runs `program` once and returns its timeline.
Timeline run(const Program& program, IntervalObserver* observer = nullptr);

}  // namespace stepsim::engine
