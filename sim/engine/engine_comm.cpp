// Collectives: rendezvous of the members, the latency phase, and the data phase as a flow
// whose rate the max-min solver sets whenever the set of active flows changes.
#include "engine/engine.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "stepsim/error.hpp"

namespace stepsim::engine {

void Engine::arrive(std::size_t r, OpIndex o) {
  require_prepared(o);  // its collective
  RankState& state = ranks_[r];
  const std::uint32_t c = state.ops[o].collective;
  Collective& coll = collectives_[c];
  const Time since = arrivals_ ? note_skew(r, o, c) : now_;  // reads the launch, which `since` replaces
  flags_of(state.ops[o]).status = Status::arrived;
  state.ops[o].since_ps = since.ps();
  ++state.at_rendezvous;
  const bool all = ++coll.arrived == coll.member_count;
  if (all && (!arrivals_ || not_before_[c] <= now_)) {
    start_collective(c);
    return;
  }
  if (all) queue_.push({not_before_[c], 0, c, 0, 0, EventKind::skew_end});
  update_bubble(r);
}

// Representative mode under jitter: the collective starts no earlier than the expected last
// real member arrives, after this rank's work for the call was ready (issued and its events
// fired), not after this rank reached it: a busy stream has already delayed it, and the members
// whose work was ready while it was busy arrive together when it frees. Returns when the mean
// real member arrives, from which on the rank's wait is counted (the wait a real rank sees).
Time Engine::note_skew(std::size_t r, OpIndex o, std::uint32_t c) {
  const RankState& state = ranks_[r];
  Time ready = launch_of(state, o, state.ops[o]);
  for (OpIndex w : program_.ranks[r].waits_of(o)) ready = max(ready, end_of(r, w));  // all done by now
  // The op before it on its stream: a kernel is the call's data as its events are, a
  // collective holds the stream until it ends on every member.
  Time free = Time::zero();
  const StreamIndex stream = state.list->ops[o].stream;
  if (const std::uint32_t head = heads(r)[stream].head; head > 0) {
    const OpIndex before = state.list->streams[stream][head - 1];
    if (state.list->ops[before].kind == OpKind::collective) {
      free = end_of(r, before);
    } else {
      ready = max(ready, end_of(r, before));
    }
  }
  const ArrivalModel::Run::Arrival a = arrivals_->arrival(r, o, free - ready);
  not_before_[c] = max(not_before_[c], ready + a.last);
  return max(now_, min(ready + a.mean, ready + a.last));
}

// Every member has reached the call: it starts on all of them at once.
void Engine::start_collective(std::uint32_t c) {
  const Collective& coll = collectives_[c];
  const CollectiveKind& kind = kinds_[coll.kind];
  for (std::uint32_t m = 0; m < coll.member_count; ++m) {
    const std::size_t r = member_rank(coll, m);
    const OpIndex o = member_op(coll, m);
    catch_up(r, false);
    RankState& state = ranks_[r];
    OpState& op = state.ops[o];
    flags_of(op).status = Status::running;
    op.start = now_;
    if (state.list->ops[o].stream == 0) state.compute_busy = true;
    --state.at_rendezvous;
    set_comm_running(r, +1, kind);
  }
  queue_.push({now_ + coll.latency, 0, c, 0, 0, EventKind::latency_end});
}

void Engine::set_comm_running(std::size_t r, int delta, const CollectiveKind& kind) {
  RankState& state = ranks_[r];
  if (!kind.host_copy) state.comm_running += delta;  // a copy engine's copy is no communication
  if (kind.slows_compute) {
    const Taken old = program_.derived_slowdown ? taken_[r] : Taken{};
    const bool was_slowing = state.slowing_comm > 0;
    state.slowing_comm += delta;
    if (program_.derived_slowdown) {
      Taken& taken = taken_[r];
      taken.sm += delta * static_cast<double>(kind.sm_share);
      taken.hbm += delta * static_cast<double>(kind.hbm_share);
      // Exactly nothing once no kernel runs, whatever the rounding of the sums.
      if (state.slowing_comm == 0) taken = {0, 0, taken.slowed_ps};
      if (taken.sm != old.sm || taken.hbm != old.hbm) reschedule_compute(r, old, was_slowing);
    } else if (program_.comm_slowdown != 0.0 && (state.slowing_comm > 0) != was_slowing) {
      reschedule_compute(r, old, was_slowing);
    }
  }
  update_bubble(r);
}

void Engine::on_latency_end(std::uint32_t c) {
  if (kinds_[collectives_[c].kind].size.count() == 0) {
    end_collective(c);
    return;
  }
  add_flow(c);
}

// All members finish together; only then may any of them move on.
void Engine::end_collective(std::uint32_t c) {
  const Collective& coll = collectives_[c];
  const CollectiveKind& kind = kinds_[coll.kind];
  for (std::uint32_t m = 0; m < coll.member_count; ++m) {
    const std::size_t r = member_rank(coll, m);
    catch_up(r, false);
    complete_op(r, member_op(coll, m));
    set_comm_running(r, -1, kind);
  }
  for (std::uint32_t m = 0; m < coll.member_count; ++m) advance_after(member_rank(coll, m), member_op(coll, m));
}

void Engine::add_flow(std::uint32_t c) {
  std::uint32_t f = 0;
  if (free_flows_.empty()) {
    f = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(0);
  } else {
    f = free_flows_.back();
    free_flows_.pop_back();
  }
  const CollectiveKind& kind = kinds_[collectives_[c].kind];
  Flow& flow = flows_[f];
  flow.collective = c;
  flow.remaining = kind.size.as_double();
  flow.rate = 0;
  flow.last = now_;
  flow.cap = kind.cap;
  flow.uses = {flow_uses_.data() + kind.uses_begin, kind.uses_count};
  bool alone = true;  // no other flow loads any of its links
  for (const network::ResourceUse& u : flow.uses) {
    auto& users = resource_flows_[u.resource];
    if (users.empty()) {
      users.push_back(f);
    } else if (users.back() != f) {
      alone = false;
      users.push_back(f);
    }
  }
  if (!alone) {
    reshare(f, true);
    return;
  }
  // What reshare() does for a component of this flow alone, without gathering it.
  ++stats_.rate_solves;
  set_rate(f, solver_.solve_alone({flow.cap, flow.uses}));
}

void Engine::on_flow_end(std::uint32_t f, std::uint32_t version) {
  Flow& flow = flows_[f];
  if (flow.version != version) {
    ++stats_.stale;
    return;
  }
  ++flow.version;       // no later event of this slot's previous life may fire
  bool shared = false;  // another flow loads one of its links: their rates may rise
  for (const network::ResourceUse& u : flow.uses) {
    auto& users = resource_flows_[u.resource];
    users.erase(f);
    shared = shared || !users.empty();
  }
  if (shared) reshare(f, false);
  free_flows_.push_back(f);
  end_collective(flow.collective);  // starts no flow synchronously: `flow` stays intact
}

// The flows connected to `f` through shared resources (`f` itself only if `with_seed`).
void Engine::collect_component(std::uint32_t f, bool with_seed) {
  ++epoch_;
  component_.clear();
  if (with_seed) {
    flow_mark_[f] = epoch_;
    component_.push_back(f);
  } else {
    for (const network::ResourceUse& u : flows_[f].uses) visit_resource(u.resource);
  }
  for (std::size_t i = 0; i < component_.size(); ++i) {
    for (const network::ResourceUse& u : flows_[component_[i]].uses) visit_resource(u.resource);
  }
}

void Engine::visit_resource(network::ResourceId r) {
  if (resource_mark_[r] == epoch_) return;
  resource_mark_[r] = epoch_;
  for (std::uint32_t g : resource_flows_[r].items()) {
    if (flow_mark_[g] == epoch_) continue;
    flow_mark_[g] = epoch_;
    component_.push_back(g);
  }
}

// Brings the flows of `f`'s component up to date at their old rates, solves for new rates,
// and reschedules the flows whose rate changed.
void Engine::reshare(std::uint32_t f, bool with_seed) {
  collect_component(f, with_seed);
  if (component_.empty()) return;
  demands_.clear();
  for (std::uint32_t g : component_) {
    Flow& flow = flows_[g];
    flow.remaining -= flow.rate * (now_ - flow.last).seconds();
    flow.last = now_;
    demands_.push_back({flow.cap, flow.uses});
  }
  ++stats_.rate_solves;
  const auto rates = solver_.solve(demands_);
  for (std::size_t i = 0; i < component_.size(); ++i) set_rate(component_[i], rates[i]);
}

// A flow whose rate changed ends at another time.
void Engine::set_rate(std::uint32_t f, double rate) {
  Flow& flow = flows_[f];
  if (rate == flow.rate) return;
  STEPSIM_CHECK(rate > 0, fmt::format("collective {} gets no bandwidth", flow.collective));
  flow.rate = rate;
  schedule_flow_end(f);
}

void Engine::schedule_flow_end(std::uint32_t f) {
  Flow& flow = flows_[f];
  const double ps = std::max(0.0, flow.remaining) * 1e12 / flow.rate;
  const Time at = now_ + Time::from_ps(std::llround(ps));
  queue_.push({at, 0, f, 0, ++flow.version, EventKind::flow_end});
}

}  // namespace stepsim::engine
