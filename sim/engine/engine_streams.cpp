// Host issue, in-order streams, compute ops with their slowdown under communication, and
// what a finished op leaves in the timeline.
#include "engine/engine.hpp"

#include <algorithm>
#include <cmath>

#include "stepsim/error.hpp"

namespace stepsim::engine {

// The host issues ops back to back, each at its own cost, until an op that blocks the host
// on unfinished work. Their launch times follow from where the run began (launch_of): none is
// written, which at thousands of ranks that issue their whole step at once saves a pass over
// every op's state before the first event.
void Engine::issue_from_host(std::size_t r) {
  const RankProgram& rank = program_.ranks[r];
  RankState& state = ranks_[r];
  const ListIndex& list = *state.list;
  const auto size = static_cast<OpIndex>(list.ops.size());
  while (state.host_next < size) {
    if (list.ops[state.host_next].host_blocks) {
      if (!waits_done(r, state.host_next)) return;
      note_launches(r);
      end_host_run(r);
      Time issue_at = issued_before(state, state.host_next);
      for (OpIndex w : rank.waits_of(state.host_next)) issue_at = max(issue_at, end_of(r, w));
      state.run_first = state.host_next;
      state.run_start = issue_at;
      if (!host_runs_.empty()) host_runs_[r].emplace_back(state.run_first, state.run_start);
      ++state.host_next;
      continue;
    }
    const auto next_block = std::ranges::upper_bound(list.host_blocking, state.host_next);
    state.host_next = next_block == list.host_blocking.end() ? size : *next_block;
    // The last launch's time: a run too long for the clock fails here, where it is issued.
    (void)launch_of(state, state.host_next - 1, state.ops[state.host_next - 1]);
  }
}

// A new host run begins: the ops of the last one that still wait keep their launch times.
void Engine::note_launches(std::size_t r) {
  RankState& state = ranks_[r];
  for (OpIndex o = state.run_first; o < state.host_next; ++o) {
    OpState& op = state.ops[o];
    if (flags_of(op).status == Status::waiting) op.launch_ps = launch_of(state, o, op).ps();
  }
}

// The host's run of launches ends (it blocks, or the step is issued): the rank's CPU lane
// shows it busy from the run's start until its last op was issued.
void Engine::end_host_run(std::size_t r) {
  const RankState& state = ranks_[r];
  if (state.host_next == state.run_first) return;
  const Time end = issued_before(state, state.host_next);
  if (end == state.run_start) return;  // a CUDA graph's replay: nothing for the CPU to do
  const ListIndex& list = *state.list;
  timeline_.ranks[r].host.push_back(
      {state.run_start, end, list.issued_before[state.host_next] - list.issued_before[state.run_first]});
}

bool Engine::waits_done(std::size_t r, OpIndex o) const {
  return flags_of(ranks_[r].ops[o]).waits_met == ranks_[r].list->ops[o].wait_count;
}

void Engine::advance_rank(std::size_t r) {
  for (std::size_t s = 0; s < ranks_[r].list->streams.size(); ++s) try_start(r, s);
}

// After `o` ends only its stream's next op and the ops waiting on it can become startable,
// unless the host issued more ops.
void Engine::advance_after(std::size_t r, OpIndex o) {
  RankState& state = ranks_[r];
  if (state.host_issued) {
    state.host_issued = false;
    advance_rank(r);
    return;
  }
  const ListIndex& list = *state.list;
  try_start(r, list.ops[o].stream);
  // Of the streams of the ops waiting on `o`, only one whose head is such an op can move: no
  // other head's waits changed (and its state, rarely in cache, is not read for nothing).
  for (std::uint32_t d = list.dependents_begin[o]; d < list.dependents_begin[o + 1]; ++d) {
    const OpIndex dependent = list.dependents[d];
    const StreamIndex s = list.ops[dependent].stream;
    const std::uint32_t head = heads(r)[s].head;
    if (head < list.streams[s].size() && list.streams[s][head] == dependent) try_start(r, s);
  }
}

// Starts the head of a stream if it is issued, its events have fired and, for a collective,
// it reaches its rendezvous.
void Engine::try_start(std::size_t r, std::size_t stream) {
  RankState& state = ranks_[r];
  const std::vector<OpIndex>& s = state.list->streams[stream];
  const std::uint32_t head = heads(r)[stream].head;
  if (head == s.size()) return;
  const OpIndex o = s[head];
  if (o >= state.host_next) return;  // not issued yet
  OpState& op = state.ops[o];
  OpFlags& flags = flags_of(op);
  if (flags.status != Status::waiting) return;
  if (const Time launch = launch_of(state, o, op); launch > now_) {
    if (flags.wake_pending != 0) return;
    flags.wake_pending = 1;
    queue_.push({launch, 0, static_cast<std::uint32_t>(r), o, 0, EventKind::wake});
    return;
  }
  if (flags.waits_met != state.list->ops[o].wait_count) return;
  if (state.list->ops[o].kind == OpKind::collective) {
    arrive(r, o);
  } else {
    start_compute(r, o);  // a copy runs as a compute op does, for its own duration
  }
}

void Engine::start_compute(std::size_t r, OpIndex o) {
  require_prepared(o);  // its work
  if (arrivals_ && ranks_[r].list->ops[o].kind == OpKind::compute) note_held_back(r, o);  // reads the launch
  OpState& op = ranks_[r].ops[o];
  flags_of(op).status = Status::running;
  op.start = now_;
  op.since_ps = now_.ps();
  if (ranks_[r].list->ops[o].kind == OpKind::compute) ++ranks_[r].compute_running;
  schedule_compute_end(r, o);
  if (ranks_[r].list->ops[o].stream != 0) return;
  ranks_[r].compute_busy = true;
  update_bubble(r);
}

// Representative mode under jitter: the arrival model learns which collective of several real
// members ended last of what the compute op starting now waited for, and how long after the
// rest (its launch, the op before it on its stream, its other events) or before them. A compute
// op waiting for nothing is never held back, and starts chained (schedule_compute_end); one that
// waits starts here.
void Engine::note_held_back(std::size_t r, OpIndex o) {
  const RankState& state = ranks_[r];
  const ListIndex& list = *state.list;
  Time others = launch_of(state, o, state.ops[o]);
  OpIndex held = 0;
  Time held_end;
  bool any = false;
  const auto consider = [&](OpIndex w) {
    const Time end = end_of(r, w);
    const bool shared = list.ops[w].kind == OpKind::collective &&
                        program_.groups[static_cast<std::size_t>(call_of(r, w).group)].size > 1;
    if (!shared) {
      others = max(others, end);
    } else if (!any || end > held_end) {
      any = true;
      held = w;
      held_end = end;
    }
  };
  for (OpIndex w : program_.ranks[r].waits_of(o)) consider(w);
  const StreamIndex stream = list.ops[o].stream;
  if (const std::uint32_t head = heads(r)[stream].head; head > 0) consider(list.streams[stream][head - 1]);
  if (any) arrivals_->held_back(r, o, held, held_end - others);
}

// When a running compute op ends at the rank's current speed: its work left at `since`.
Time Engine::compute_end_of(std::size_t r, OpIndex o) const {
  const OpState& op = ranks_[r].ops[o];
  const double factor = compute_factor(r, o);
  return op.since() + (factor == 1.0 ? Time::from_ps(op.work) : Time::from_ps(op.work).scaled(factor));
}

void Engine::schedule_compute_end(std::size_t r, OpIndex o) {
  RankState& state = ranks_[r];
  const ListIndex& list = *state.list;
  const StreamIndex stream = list.ops[o].stream;
  StreamHead& head = heads(r)[stream];
  head.late = 0;
  const std::uint32_t version = ++head.version;
  Time end = compute_end_of(r, o);
  OpIndex last = o;
  if (stream == 0) {
    // The compute ops that follow, each started the moment the one before it ends: issued by
    // then, its waits done, and none before it waited on by another op.
    const std::vector<OpIndex>& s = list.streams[0];
    std::size_t next = std::size_t{head.head} + 1;
    std::uint32_t chained = 0;
    while (chained < kMaxChained && next < s.size() && list.dependents_begin[last] == list.dependents_begin[last + 1]) {
      const OpIndex n = s[next];
      const Op& op = list.ops[n];
      if (op.kind != OpKind::compute || n >= state.host_next) break;
      if (op.wait_count != 0 && flags_of(state.ops[n]).waits_met != op.wait_count) break;
      if (op.wait_count != 0 && arrivals_) break;  // it tells the arrival model what held it back
      if (launch_of(state, n, state.ops[n]) > end) break;
      require_prepared(n);
      const auto work = Time::from_ps(state.ops[n].work);
      const double factor = compute_factor(r, n);
      end = end + (factor == 1.0 ? work : work.scaled(factor));
      last = n;
      ++chained;
      ++next;
    }
    state.chained = static_cast<std::uint8_t>(chained);
  }
  queue_.push({end, 0, static_cast<std::uint32_t>(r), last, version, EventKind::compute_end, stream});
}

// The chained ops of the rank's compute stream that ended before now (all: by now) are done,
// and the next one runs: what their own end events would have done.
void Engine::catch_up(std::size_t r, bool all) {
  RankState& state = ranks_[r];
  if (state.chained == 0) return;
  const std::vector<OpIndex>& s = state.list->streams[0];
  StreamHead& head = heads(r)[0];
  while (state.chained > 0) {
    OpState& op = state.ops[s[head.head]];
    const Time end = compute_end_of(r, s[head.head]);
    if (!all && end >= now_) return;
    if (!taken_.empty()) note_slowed(r, end - op.since(), compute_factor(r, s[head.head]));
    flags_of(op).status = Status::done;
    op.end_ps = end.ps();
    op.order = state.finished++;
    ++head.head;
    --state.chained;
    ++stats_.chained;
    OpState& next = state.ops[s[head.head]];
    flags_of(next).status = Status::running;
    next.start = end;
    next.since_ps = end.ps();
  }
}

// A stale event reads nothing of its rank but the stream's version. The event's op is the
// last of the ops chained behind the head (see schedule_compute_end), the head itself if none.
// An op that slowed down since its event was queued (late) is queued again for when it ends
// now, with what follows it.
void Engine::on_compute_end(std::size_t r, OpIndex o, StreamIndex stream, std::uint32_t version) {
  StreamHead& head = heads(r)[stream];
  if (head.version != version) {
    ++stats_.stale;
    return;
  }
  if (head.late != 0) {
    // Slowed down since: what ended by now is done, and the rest is queued again.
    head.late = 0;
    catch_up(r, false);
    o = ranks_[r].list->streams[stream][head.head];
    if (ranks_[r].chained != 0 || compute_end_of(r, o) > now_) {
      schedule_compute_end(r, o);
      return;
    }
  } else {
    catch_up(r, stream == 0);
  }
  if (!taken_.empty()) note_slowed(r, now_ - ranks_[r].ops[o].since(), compute_factor(r, o));
  complete_op(r, o);
  advance_after(r, o);
}

double Engine::compute_factor(std::size_t r, OpIndex o) const {
  const RankState& state = ranks_[r];
  if (state.slowing_comm == 0) return 1.0;                  // the common case: read nothing else
  if (state.list->ops[o].kind == OpKind::copy) return 1.0;  // copy engines, not the SMs
  return factor_of(taken_.empty() ? Taken{} : taken_[r], true, state.list->ops[o].memory_bound);
}

// A kernel on the SMs (or HBM bandwidth) the NCCL kernels leave runs at that share of its
// speed; with the fitted comm_slowdown, every kernel slows alike.
double Engine::factor_of(const Taken& taken, bool slowing, bool memory_bound) const {
  if (!slowing) return 1.0;
  if (!program_.derived_slowdown) return slowed_;
  const double share = std::min(kMaxTaken, memory_bound ? taken.hbm : taken.sm);
  return share <= 0 ? 1.0 : 1.0 / (1.0 - share);
}

// `ran` of a compute op's time at `factor`: what it ran longer than at full speed.
void Engine::note_slowed(std::size_t r, Time ran, double factor) {
  if (factor != 1.0) taken_[r].slowed_ps += static_cast<double>(ran.ps()) * (1.0 - 1.0 / factor);
}

// Brings running compute ops up to date at the old speed and reschedules them at the new. An
// op that slows down keeps its queued event, now too early (late): the event finds it still
// running and queues it again (see on_compute_end). An op is slowed down and sped up again
// for each collective it overlaps, and most end while slowed down: one event is then
// superseded, not two.
void Engine::reschedule_compute(std::size_t r, const Taken& old, bool was_slowing) {
  RankState& state = ranks_[r];
  if (state.compute_running == 0) return;  // the common case while a rank waits on communication
  const ListIndex& list = *state.list;
  std::uint16_t seen = 0;  // running compute ops found: once all are, no later stream has one
  for (std::size_t stream = 0; stream < list.streams.size() && seen < state.compute_running; ++stream) {
    const std::vector<OpIndex>& s = list.streams[stream];
    const std::uint32_t head = heads(r)[stream].head;
    if (head == s.size()) continue;
    const OpIndex o = s[head];
    // The op's kind first: the list is shared by the stage's ranks and mostly in cache, the
    // op's state is the rank's own and mostly not.
    if (list.ops[o].kind != OpKind::compute) continue;
    OpState& op = state.ops[o];
    if (flags_of(op).status != Status::running) continue;
    ++seen;
    const double old_factor = factor_of(old, was_slowing, list.ops[o].memory_bound);
    const bool slower = compute_factor(r, o) > old_factor;
    if (!taken_.empty()) note_slowed(r, now_ - op.since(), old_factor);
    const auto elapsed = static_cast<double>((now_ - op.since()).ps());
    op.work = std::max<std::int64_t>(0, op.work - std::llround(elapsed / old_factor));
    op.since_ps = now_.ps();
    if (slower) {
      heads(r)[stream].late = 1;
    } else {
      schedule_compute_end(r, o);
    }
  }
}

// Marks an op finished (its interval is written after the run); the caller advances the rank
// afterwards.
void Engine::complete_op(std::size_t r, OpIndex o) {
  RankState& state = ranks_[r];
  const ListIndex& list = *state.list;
  const Op& op = list.ops[o];
  OpState& st = state.ops[o];
  flags_of(st).status = Status::done;
  st.end_ps = now_.ps();
  last_end_ = now_;
  if (op.kind == OpKind::compute) --state.compute_running;
  ++heads(r)[op.stream].head;  // a compute op's late mark was cleared by the event that ended it
  for (std::uint32_t d = list.dependents_begin[o]; d < list.dependents_begin[o + 1]; ++d) {
    ++flags_of(state.ops[list.dependents[d]]).waits_met;
  }
  st.order = state.finished++;  // its interval and its memory change are written after the run
  const OpIndex host_next = state.host_next;
  if (host_next < list.ops.size()) issue_from_host(r);
  state.host_issued = state.host_issued || state.host_next != host_next;
  if (op.stream != 0) return;
  state.compute_busy = false;
  update_bubble(r);
}

// What a finished op leaves in the timeline.
bool Engine::stands_in(std::size_t r, OpIndex o) const {
  if (ranks_[r].list->ops[o].kind != OpKind::collective) return false;
  return program_.groups[static_cast<std::size_t>(call_of(r, o).group)].stand_in;
}

Interval Engine::interval_of(std::size_t r, OpIndex o) const {
  const Op& op = ranks_[r].list->ops[o];
  Interval i{ranks_[r].ops[o].start, end_of(r, o)};
  i.name = name_map_[op.name];
  i.stream = op.stream;
  i.phase = op.phase;
  if (op.kind == OpKind::collective && call_of(r, o).host_copy) {
    i.activity = Activity::memory;
    i.bytes = call_of(r, o).size;
    return i;
  }
  if (op.kind == OpKind::collective) {
    const CollectiveCall& call = call_of(r, o);
    i.activity = Activity::comm;
    i.kind = call.kind;
    i.op = call.op;
    i.slows_compute = call.slows_compute;
    i.group = call.group;
    i.bytes = call.size;
    i.waited = ranks_[r].ops[o].start - ranks_[r].ops[o].since();
  }
  if (op.kind == OpKind::copy) {
    i.activity = Activity::memory;
    if (const auto work = program_.work.find(op.name); work != program_.work.end()) i.bytes = work->second.bytes;
  }
  return i;
}

// A bubble: the compute stream idles while the rank waits for a peer at a rendezvous and
// none of its own communication runs (that time is exposed communication instead).
void Engine::update_bubble(std::size_t r) {
  RankState& state = ranks_[r];
  // From the rank's own flag, not the head op's state: this runs for every member at every
  // start and end of a collective, and the op's state is rarely in cache.
  const bool bubble = !state.compute_busy && state.at_rendezvous > 0 && state.comm_running == 0;
  if (bubble == state.in_bubble) return;
  state.in_bubble = bubble;
  if (bubble) {
    state.bubble_since = now_;
    return;
  }
  if (now_ == state.bubble_since) return;
  add_bubble(r, {state.bubble_since, now_, state.finished});
  last_end_ = now_;
}

void Engine::add_bubble(std::size_t r, const Bubble& bubble) {
  RankBubbles& bubbles = bubbles_[r];
  const std::size_t at = bubbles.count % BubbleChunk::kSize;
  if (at == 0) {
    if (slab_used_ == slab_size_) new_bubble_slab();
    BubbleChunk* chunk = &bubble_slabs_.back()[slab_used_++];
    (bubbles.last == nullptr ? bubbles.first : bubbles.last->next) = chunk;
    bubbles.last = chunk;
  }
  bubbles.last->items[at] = bubble;
  ++bubbles.count;
}

// A rank done with the step waits for its end. Until the last rank of its own stage is done it
// waits on its peers (idle time, as a collective's straggler would make it; in representative
// mode under jitter, the real ranks that drew slower kernels since they last met); from then
// on on another stage, the pipeline's drain: a bubble to the step's end, which no op moves.
void Engine::add_drain_bubbles() {
  std::vector<Time> ends(ranks_.size());
  std::vector<Time> stage_ends;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    // A stream runs its ops in order, so its last op ends last; the rank's last bubble ended
    // when its last wait did.
    Time end = Time::zero();
    for (const std::vector<OpIndex>& stream : ranks_[r].list->streams)
      if (!stream.empty()) end = max(end, end_of(r, stream.back()));
    if (const RankBubbles& b = bubbles_[r]; b.count > 0)
      end = max(end, b.last->items[(b.count - 1) % BubbleChunk::kSize].end);
    ends[r] = end;
    const auto stage = static_cast<std::size_t>(program_.ranks[r].stage);
    if (stage >= stage_ends.size()) stage_ends.resize(stage + 1, Time::zero());
    // Representative mode under jitter: the stage is done when the slowest real rank is.
    if (arrivals_) end = end + arrivals_->finish(r);
    stage_ends[stage] = max(stage_ends[stage], end);
    last_end_ = max(last_end_, end);
  }
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const Time from = max(ends[r], stage_ends[static_cast<std::size_t>(program_.ranks[r].stage)]);
    if (from < last_end_) add_bubble(r, {from, last_end_, ranks_[r].finished});
  }
}

// Slabs double up to the largest size; a run with a preparing thread starts at the largest
// and takes the slabs that thread made ready, while it has one.
void Engine::new_bubble_slab() {
  slab_used_ = 0;
  if (second_thread_) {
    slab_size_ = kLargestSlab;
    if (ready_count_.load(std::memory_order_relaxed) != 0) {
      std::unique_lock lock(slab_mutex_);
      if (!ready_slabs_.empty()) {
        bubble_slabs_.push_back(std::move(ready_slabs_.back()));
        ready_slabs_.pop_back();
        ready_count_.store(ready_slabs_.size(), std::memory_order_relaxed);
        lock.unlock();
        slab_taken_.notify_one();
        return;
      }
    }
  } else {
    slab_size_ = slab_size_ == 0 ? kFirstSlab : std::min(2 * slab_size_, kLargestSlab);
  }
  bubble_slabs_.emplace_back(slab_size_);
}

Interval Engine::bubble_interval(const Bubble& b) const {
  Interval i{b.start, b.end};
  i.name = bubble_name_;
  i.stream = 0;
  i.activity = Activity::bubble;
  return i;
}

}  // namespace stepsim::engine
