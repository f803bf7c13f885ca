// The discrete-event engine: executes a Program (ops on streams, host launches, collectives
// with rendezvous and max-min shared flows) and records what ran as a Timeline.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/event_queue.hpp"
#include "engine/flow_set.hpp"
#include "engine/huge_pages.hpp"
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
  std::uint64_t chained = 0;      // compute ops' ends taken with a later op's event (see schedule_compute_end)
  std::uint64_t rate_solves = 0;  // max-min solves (active flow set changed)
  std::uint64_t ops = 0;          // of every simulated rank
  std::size_t op_lists = 0;       // distinct op lists (the ranks of a stage share one)
  std::size_t collectives = 0;
  // Wall-clock seconds: checking and indexing the program, the event loop, writing the
  // timeline's intervals. A run with a second thread (SecondThread) prepares its ops' states
  // (their durations drawn, their collectives noted) on it while the loop starts: prepare_s is
  // how long that took from the start of setup, partly hidden in loop_s; 0 without.
  double setup_s = 0;
  double prepare_s = 0;
  double loop_s = 0;
  double write_s = 0;

  // The loop's events per second for the log, in the unit that shows its digits: "2.4 M/s",
  // "36.9 k/s", "950/s" ("-" when the loop was not timed).
  std::string event_rate() const;
};

// Whether a run takes a second thread: to prepare the ops' states alongside the start of the
// loop, and to write the intervals. By default (by_size) a large run on more than one core
// does; `always` makes any run do it (tests).
enum class SecondThread : std::uint8_t { by_size, always };

class Engine {
 public:
  // Validates the program's internal consistency (a failed check is a builder bug). The
  // program must outlive the engine.
  explicit Engine(const Program& program, SecondThread second = SecondThread::by_size);
  Engine(const Engine&) = delete;  // ranks_ points into op_states_
  Engine& operator=(const Engine&) = delete;

  // Runs the program once to completion. With an observer, the timeline keeps the intervals
  // of the ranks the observer keeps; without, every rank's.
  Timeline run(IntervalObserver* observer = nullptr);
  const RunStats& stats() const { return stats_; }

 private:
  enum class Status : std::uint8_t { waiting, arrived, running, done };

  // Millions of these in all-ranks mode: fields that never live at the same time share a
  // slot, so that an op's state takes 32 bytes, two to a cache line (aligned, so that none
  // straddles two). All bytes zero is the initial state (see ZeroedArray).
  struct alignas(32) OpState {
    union {
      // While it waits, issued before its rank's current host run: when the host issued it
      // (see launch_of). An op at or after its rank's host_next has not been issued.
      std::int64_t launch_ps = 0;
      // From when it arrives at its rendezvous (collective) or starts (compute): compute, when
      // `work` was last brought up to date; collective, when it reached its rendezvous.
      std::int64_t since_ps;
    };
    Time start;
    union {
      std::int64_t work = 0;  // compute: picoseconds of work still to do at full speed (see prepare_row)
      std::int64_t end_ps;    // once done: when it ended, in picoseconds (see end_of)
    };
    union {
      std::uint32_t collective = 0;  // collective: index into collectives_ (see prepare_row)
      std::uint32_t order;           // once done: its place among the rank's finished ops (see write_intervals)
    };

    Time since() const { return Time::from_ps(since_ps); }
  };
  static constexpr std::uint32_t kMaxWaits = (1U << 23) - 1;

  // What the loop asks of an op most (whether it waits, runs or is done; how many of its waits
  // are done), in four bytes per op, in an array laid out like the op states (flags_of): the
  // flags of a block of a rank's ops share one cache line, so that the next op of a stream or
  // an op waiting on the one that ended is told not ready, or counted, without reading its
  // state, rarely in cache at thousands of ranks. All bytes zero is the initial value.
  struct OpFlags {
    std::uint32_t waits_met : 23 = 0;  // entries of `waits` done so far, at most kMaxWaits (no setup pass)
    std::uint32_t wake_pending : 1 = 0;
    Status status : 8 = Status::waiting;
  };
  static_assert(sizeof(OpFlags) == 4, "sixteen ops' flags to a cache line");

  // A rank's op states. The ranks that share an op list (a stage's thousand GPUs in all-ranks
  // mode) move through its ops at about the same time, so their states are stored in blocks
  // of kOpBlock consecutive ops, one block per rank in turn: the ops they run at a given moment
  // lie in a few hundred kilobytes, not one huge page per rank. A rank with a list of its own
  // has its states one after the other.
  static constexpr std::size_t kOpBlock = 16;  // 512 bytes: eight cache lines
  // How far a row of op states (block k of every rank) is prepared (see prepare_row).
  enum class RowState : std::uint8_t { untouched, drawn, claimed, ready };
  class OpStates {
   public:
    OpStates() = default;
    OpStates(OpState* first, std::uint32_t stride, std::uint32_t size) : first_(first), stride_(stride), size_(size) {}
    OpState& operator[](std::size_t o) const { return first_[o / kOpBlock * stride_ + o % kOpBlock]; }
    std::size_t size() const { return size_; }

   private:
    OpState* first_ = nullptr;  // the rank's first block
    std::uint32_t stride_ = 0;  // states from one of its blocks to the next
    std::uint32_t size_ = 0;
  };

  // The op states of the ranks that share a list: given back to the kernel once every one of
  // them has had its intervals written.
  struct ListIndex;
  struct StateRegion {
    const ListIndex* list = nullptr;  // the ranks' list
    std::size_t first = 0;            // into op_states_
    std::size_t end = 0;
    std::size_t ranks_left = 0;
  };
  // Op states from which on a run maps and gives back its largest buffers by hand (a few
  // hundred all-ranks GPUs and up).
  static constexpr std::size_t kLargeRun = std::size_t{64} << 20;
  static_assert(sizeof(OpState) == 32, "an op's state is the largest buffer of an all-ranks run");

  // What follows from an op list alone, worked out once for all the ranks that share it.
  struct ListIndex {
    std::vector<std::vector<OpIndex>> streams;    // per stream, its ops in issue order
    std::vector<std::uint32_t> dependents_begin;  // per op, into dependents (one past: next op's)
    std::vector<OpIndex> dependents;              // ops whose `waits` name the op
    std::vector<OpIndex> collectives;             // the collective ops, in list order
    std::vector<OpIndex> host_blocking;           // the ops that block the host, in list order
    std::vector<Time> host_before;                // per op, the host's cost to issue the ops before it (one past: all)
    std::vector<OpIndex> issued_before;           // per op, the ops before it the host issues at a cost (one past: all)
    std::size_t memory_changes = 0;               // ops with a memory delta
    std::span<const Op> ops;                      // the list's ops
  };

  // A bubble as the run records it: half the size of its interval (jitter makes millions).
  struct Bubble {
    Time start;
    Time end;
    std::uint32_t after = 0;  // ops the rank had finished when it ended
  };

  // A rank's bubbles are a list of chunks cut from slabs the run shares: thousands of ranks
  // add to their lists at once, and a list grows without copying what it holds.
  struct BubbleChunk {
    static constexpr std::size_t kSize = 42;  // a kilobyte with the link
    std::array<Bubble, kSize> items;
    BubbleChunk* next = nullptr;
  };
  static constexpr std::size_t kFirstSlab = 8;       // chunks; each slab doubles the last
  static constexpr std::size_t kLargestSlab = 2048;  // two megabytes

  // Where a rank's stream stands. Only a stream's first op not yet done can run, so the
  // version that tells a compute op's current end event from superseded ones is the stream's:
  // a stale event is then told without reading the op's state, which is rarely in cache.
  struct StreamHead {
    std::uint32_t head : 31 = 0;  // first op not yet done, into the list's stream (kMaxStreamOps)
    std::uint32_t late : 1 = 0;   // the head's queued compute end is earlier than its end (it slowed down)
    std::uint32_t version = 0;    // bumped whenever the head's compute end is (re)scheduled
  };
  static_assert(sizeof(StreamHead) == 8, "eight streams' heads to a cache line");
  static constexpr std::size_t kMaxStreamOps = (std::size_t{1} << 31) - 1;
  static constexpr std::size_t kMaxStreams = 0xFFFF;  // each counter above counts at most one op a stream
  static constexpr std::size_t kInlineHeads = 8;      // streams whose heads a rank's state holds
  static constexpr std::size_t kMaxChained = 255;     // RankState::chained

  // What a rank's running NCCL kernels take of its GPU (Program::derived_slowdown): shares of
  // its SMs and of its HBM bandwidth, summed over the kernels; and, kept beside them, how much
  // longer its compute ran for them (ps).
  struct Taken {
    double sm = 0;
    double hbm = 0;
    double slowed_ps = 0;
  };
  // The most of a GPU's SMs or HBM bandwidth that kernels beside a compute op take from it:
  // concurrent collectives add, and a compute op keeps at least a tenth of its GPU.
  static constexpr double kMaxTaken = 0.9;

  // What an event reads of its rank, in one cache line, and its stream heads in the next (the
  // two lines of an aligned pair, on one page); what its ranks share is in the list's index. At
  // thousands of ranks every line of a rank's own state is a likely cache miss, and only a few
  // megabytes stay in cache.
  struct alignas(128) RankState {
    OpStates ops;                     // this rank's part of op_states_
    const ListIndex* list = nullptr;  // its op list's ops, streams and dependents
    // The host issued ops run_first, ..., host_next - 1 back to back from run_start, each at its
    // own cost (Program::host_cost): it is free to issue the next op once their costs are paid.
    Time run_start;
    Time bubble_since;
    OpIndex run_first = 0;
    OpIndex host_next = 0;              // next op the host issues
    std::uint32_t finished = 0;         // ops done so far
    std::uint16_t comm_running = 0;     // collectives of this rank in their latency or data phase (no host copy)
    std::uint16_t slowing_comm = 0;     // those of them that slow its compute (NCCL kernels)
    std::uint16_t compute_running = 0;  // compute ops of this rank that run
    std::uint16_t at_rendezvous = 0;    // collectives waiting for peers
    bool host_issued = false;           // an op's end unblocked the host: every stream may move
    bool in_bubble = false;
    bool compute_busy = false;  // the compute stream's head runs (only a stream's head can)
    // Compute ops queued behind the compute stream's running head under one end event (see
    // schedule_compute_end): each starts when the one before it ends.
    std::uint8_t chained = 0;
    // Its streams' heads when its list has at most kInlineHeads streams (else in heads_).
    alignas(64) std::array<StreamHead, kInlineHeads> heads{};
  };
  static_assert(sizeof(RankState) == 128 && offsetof(RankState, heads) == 64,
                "what every event of a rank reads is in one line, its heads in the next");

  // The timeline's bubbles of a rank, until the intervals are written. (The memory counter is
  // not kept during the run: it follows from the ops' ends and their order, see
  // write_rank_intervals.)
  struct RankBubbles {
    BubbleChunk* first = nullptr;
    BubbleChunk* last = nullptr;  // the chunk the next one goes to
    std::uint32_t count = 0;
  };

  // What the collectives of a group whose members make the same calls share (see
  // index_kinds): the members' calls merged (one size, the longest latency, the lowest
  // bandwidth), and the run of link uses their flow loads. Read once a collective, when its
  // data phase starts.
  struct CollectiveKind {
    std::uint32_t uses_count = 0;  // its flow's link uses: flow_uses_[uses_begin, + uses_count)
    bool slows_compute = true;     // see CollectiveCall::slows_compute
    bool host_copy = false;        // see CollectiveCall::host_copy
    float sm_share = 0;            // see CollectiveCall::sm_share (the members' largest)
    float hbm_share = 0;
    std::size_t uses_begin = 0;
    Bytes size{0};
    Bandwidth cap;
  };

  // One collective: the k-th call of a group, on every simulated member. 32 bytes, two to a
  // cache line, with what its arrivals and its start read. Its members are its group's ranks
  // (group_ranks_[members, + member_count)), and mostly make it with the same op of the list
  // they share; where their ops differ (a pipeline transfer between two stages' lists), member
  // m's is member_ops_[spread + m].
  static constexpr std::uint32_t kSameOp = UINT32_MAX;
  struct alignas(32) Collective {
    std::uint32_t kind = 0;  // into kinds_
    std::uint32_t op = 0;    // the op that makes the call on its first member (on all, unless spread)
    std::uint32_t arrived = 0;
    std::uint32_t spread = kSameOp;
    std::uint32_t members = 0;  // into group_ranks_
    std::uint32_t member_count = 0;
    Time latency;  // the longest of its members' calls'
  };
  static_assert(sizeof(Collective) == 32, "two collectives to a cache line");
  OpIndex member_op(const Collective& coll, std::uint32_t m) const {
    return coll.spread == kSameOp ? coll.op : member_ops_[std::size_t{coll.spread} + m];
  }
  std::size_t member_rank(const Collective& coll, std::uint32_t m) const {
    return group_ranks_[std::size_t{coll.members} + m];
  }

  struct Flow {
    std::uint32_t collective = 0;
    double remaining = 0;  // bytes
    double rate = 0;       // bytes per second
    Time last;
    std::uint32_t version = 0;
    Bandwidth cap;
    std::span<const network::ResourceUse> uses;  // all members' link loads (its kind's, in flow_uses_)
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
  void validate_list(std::size_t r) const;
  void validate_rank(std::size_t r) const;
  const ListIndex& index_of(std::size_t r);
  void index_streams(const OpList& list, ListIndex& index) const;
  void index_dependents(const OpList& list, ListIndex& index) const;
  void index_collectives();
  void index_kinds();
  std::uint32_t call_index_of(std::uint32_t c) const;
  std::uint32_t group_of(std::uint32_t c) const;
  bool reaches(std::size_t r, std::uint32_t group, std::uint32_t k) const;
  // Calls f(c, k, g) for every collective c, call k of group g, in order.
  template <typename F>
  void for_each_collective(F&& f) {
    for (std::size_t k = 0; k + 1 < collective_first_.size(); ++k) {
      for (std::size_t c = collective_first_[k]; c < collective_first_[k + 1]; ++c)
        f(c, static_cast<std::uint32_t>(k), collective_groups_[c - collective_first_[k]]);
    }
  }
  void number_resources();
  Memberships memberships() const;
  void check_members();
  void start_timeline();
  void advise_interval_buffers();
  void dispatch(const Event& e);
  void prefetch(const Event& e) const;
  void check_finished() const;
  std::string describe_stuck(std::size_t r) const;
  std::string describe_wait(std::size_t r, OpIndex o) const;

  // Laying the op states out and preparing them (engine_prepare.cpp).
  void place_op_states();
  void start_preparing(std::chrono::steady_clock::time_point setup_start);
  void prepare(const std::stop_token& stop, std::chrono::steady_clock::time_point setup_start);
  void prepare_rows(const std::stop_token& stop);
  void prepare_row(std::size_t row, bool draw, bool note_collectives);
  void prepare_all(bool draw, bool note_collectives);
  void draw_work(std::uint32_t r, const ListIndex& list, std::size_t first, std::size_t end) const;
  void note_collectives_of(std::uint32_t r, const ListIndex& list, std::size_t from, std::size_t to) const;
  bool claim_row(std::size_t row, RowState from, RowState& seen);
  void complete_row(std::size_t row);
  void collectives_indexed();
  void require_prepared(OpIndex o) {
    if (!all_prepared_ && row_state_[o / kOpBlock].load(std::memory_order_acquire) != RowState::ready) [[unlikely]]
      prepare_now(o / kOpBlock);
  }
  void prepare_now(std::size_t row);
  void finish_preparing();
  void keep_slabs_ready(const std::stop_token& stop);
  void add_ready_slab();
  void new_bubble_slab();

  // Host, streams and compute (engine_streams.cpp).
  void issue_from_host(std::size_t r);
  bool waits_done(std::size_t r, OpIndex o) const;
  void note_launches(std::size_t r);
  void end_host_run(std::size_t r);
  // When the host is done issuing the ops of its current run before op `o`.
  static Time issued_before(const RankState& state, OpIndex o) {
    return state.run_start + (state.list->host_before[o] - state.list->host_before[state.run_first]);
  }
  // When the host issued op `o` of the rank (issued: o < host_next), whose state is `op`.
  Time launch_of(const RankState& state, OpIndex o, const OpState& op) const {
    if (o < state.run_first) return Time::from_ps(op.launch_ps);
    return issued_before(state, o + 1);
  }
  Time end_of(std::size_t r, OpIndex o) const { return Time::from_ps(ranks_[r].ops[o].end_ps); }
  OpFlags& flags_of(const OpState& op) const { return op_flags_[static_cast<std::size_t>(&op - op_states_.data())]; }
  StreamHead* heads(std::size_t r) {
    return inline_heads_ ? ranks_[r].heads.data() : heads_.data() + r * heads_stride_;
  }
  const StreamHead* heads(std::size_t r) const {
    return inline_heads_ ? ranks_[r].heads.data() : heads_.data() + r * heads_stride_;
  }
  void advance_rank(std::size_t r);
  void advance_after(std::size_t r, OpIndex o);
  void try_start(std::size_t r, std::size_t stream);
  void start_compute(std::size_t r, OpIndex o);
  void note_held_back(std::size_t r, OpIndex o);
  void on_compute_end(std::size_t r, OpIndex o, StreamIndex stream, std::uint32_t version);
  void schedule_compute_end(std::size_t r, OpIndex o);
  void catch_up(std::size_t r, bool all);
  Time compute_end_of(std::size_t r, OpIndex o) const;
  void reschedule_compute(std::size_t r, const Taken& old, bool was_slowing);
  double compute_factor(std::size_t r, OpIndex o) const;
  double factor_of(const Taken& taken, bool slowing, bool memory_bound) const;
  void note_slowed(std::size_t r, Time ran, double factor);
  void complete_op(std::size_t r, OpIndex o);
  Interval interval_of(std::size_t r, OpIndex o) const;
  // Whether op o of rank r is a collective of a stand-in group (Group::stand_in), which the
  // timeline leaves out.
  bool stands_in(std::size_t r, OpIndex o) const;
  void update_bubble(std::size_t r);
  void add_bubble(std::size_t r, const Bubble& bubble);
  void add_drain_bubbles();
  void write_intervals(IntervalObserver* observer);
  template <class OnBubble, class OnOp>
  void walk_rank(std::size_t r, const std::vector<std::uint32_t>& order, OnBubble on_bubble, OnOp on_op) const;
  void write_rank_intervals(std::size_t r, std::vector<std::uint32_t>& order, bool record);
  void write_rank_issues(std::size_t r, const std::vector<std::uint32_t>& order);
  // How the host issued op `o` of rank `r` (Program::record_host_issues).
  HostIssue host_issue(std::size_t r, OpIndex o) const;
  Interval bubble_interval(const Bubble& b) const;

  // Collectives and flows (engine_comm.cpp).
  void arrive(std::size_t r, OpIndex o);
  Time note_skew(std::size_t r, OpIndex o, std::uint32_t c);
  void start_collective(std::uint32_t c);
  void set_comm_running(std::size_t r, int delta, const CollectiveKind& kind);
  void on_latency_end(std::uint32_t c);
  void end_collective(std::uint32_t c);
  void add_flow(std::uint32_t c);
  void on_flow_end(std::uint32_t f, std::uint32_t version);
  void collect_component(std::uint32_t f, bool with_seed);
  void visit_resource(network::ResourceId r);
  void reshare(std::uint32_t f, bool with_seed);
  void set_rate(std::uint32_t f, double rate);
  void schedule_flow_end(std::uint32_t f);
  const CollectiveCall& call_of(std::size_t r, OpIndex o) const;

  const Program& program_;
  ZeroedArray<OpState> op_states_;        // every rank's ops, list by list (see OpStates): one buffer on huge pages
  ZeroedArray<OpFlags> op_flags_;         // per op state, at the same index: its flags
  std::vector<StateRegion> regions_;      // per distinct op list, in the order of op_states_
  std::vector<std::uint32_t> region_of_;  // per rank
  std::vector<std::vector<std::uint32_t>> region_ranks_;  // per region, its ranks in the order of their states
  HugePageVector<RankState> ranks_;
  HugePageVector<StreamHead> heads_;  // heads_stride_ per rank, one per stream of its list (unless inline_heads_)
  std::size_t heads_stride_ = 0;
  bool inline_heads_ = false;         // every list has at most kInlineHeads streams: the heads are in ranks_
  std::vector<RankBubbles> bubbles_;  // per rank
  // Per rank, when the program records host issues: each host run's first op and start.
  std::vector<std::vector<std::pair<OpIndex, Time>>> host_runs_;
  // Per rank, its op states and its first op: dense, to prefetch without touching ranks_.
  std::vector<OpStates> op_base_;
  std::vector<const Op*> program_base_;
  std::unordered_map<const OpList*, std::unique_ptr<ListIndex>> indexes_;  // one per distinct op list
  std::vector<Collective> collectives_;
  HugePageVector<CollectiveKind> kinds_;
  // Every group's ranks, group after group (group_begin_): a few per rank, read by every
  // collective's start and end.
  HugePageVector<std::uint32_t> group_ranks_;
  std::vector<std::uint32_t> group_begin_;
  HugePageVector<OpIndex> member_ops_;  // the members' ops of the collectives whose members' ops differ
  // Collectives are numbered call by call (see index_collectives): call k's are
  // [collective_first_[k], collective_first_[k + 1]), of the groups collective_groups_[0, ...].
  std::vector<std::size_t> collective_first_;
  std::vector<std::uint32_t> collective_groups_;
  // Representative mode under jitter, per collective: when its slowest real member arrives.
  std::vector<Time> not_before_;
  // Per kind, its members' uses one after the other (see index_kinds).
  HugePageVector<network::ResourceUse> flow_uses_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_flows_;
  // Flows sharing a resource, transitively, form a component; only the component of a flow
  // that starts or ends can change rates, so only it is solved again.
  HugePageVector<FlowSet> resource_flows_;  // active flows per resource
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
  std::vector<HugePageVector<BubbleChunk>> bubble_slabs_;
  std::size_t slab_size_ = 0;            // chunks in the last slab
  std::size_t slab_used_ = 0;            // of them, handed out
  std::vector<std::uint32_t> name_map_;  // Program::names index -> Timeline::names index
  std::uint32_t bubble_name_ = 0;
  double slowed_ = 1.0;  // a rank's compute speed factor while its communication runs (compute_factor)
  // Program::derived_slowdown: per rank, what its running NCCL kernels take (with how many
  // run, RankState::slowing_comm) and how much longer its compute ran for it.
  std::vector<Taken> taken_;
  // Representative mode under jitter: the run's arrival model (Program::arrivals).
  std::unique_ptr<ArrivalModel::Run> arrivals_;
  bool second_thread_ = false;
  bool ran_ = false;

  // Preparing the op states: the compute ops' work drawn, the collective ops' collectives
  // written. Row k is block k (see OpStates) of every rank; the loop uses an op once its row is
  // prepared. A large run prepares them on a thread of its own, front to back, while the main
  // thread indexes the collectives and then runs the loop: the thread also takes the page
  // faults of the gigabytes of states. A row the loop needs before the thread has reached it,
  // the loop prepares itself: whichever thread claims a row first prepares it.
  std::size_t rows_ = 0;
  std::vector<std::uint32_t> op_collective_;            // per rank, per collective op of its list: its collective
  std::vector<std::size_t> op_collective_begin_;        // per rank, into op_collective_
  std::unique_ptr<std::atomic<RowState>[]> row_state_;  // per row
  bool all_prepared_ = false;
  double prepared_at_s_ = 0;          // written by the preparing thread, read after it is joined
  std::exception_ptr prepare_error_;  // the same; thrown again on the caller's thread
  std::atomic<bool> prepare_failed_{false};
  std::atomic<bool> collectives_indexed_{false};
  // Bubble slabs of the largest size made ready (allocated, their pages mapped: a few
  // milliseconds each on a virtual machine) by the preparing thread, between rows and once they
  // are done, for the loop to take (see new_bubble_slab).
  static constexpr std::size_t kReadySlabs = 2;
  std::mutex slab_mutex_;
  std::condition_variable_any slab_taken_;
  std::vector<HugePageVector<BubbleChunk>> ready_slabs_;  // guarded by slab_mutex_
  std::atomic<std::size_t> ready_count_{0};               // ready_slabs_.size(), read without the lock
  bool loop_done_ = false;                                // guarded by slab_mutex_: no more slabs wanted
  std::jthread preparer_;  // last: stopped and joined before anything it reads is destroyed
};

// Runs `program` once and returns its timeline; `stats`, when given, receives the run's.
Timeline run(const Program& program, IntervalObserver* observer = nullptr, RunStats* stats = nullptr);

}  // namespace stepsim::engine
