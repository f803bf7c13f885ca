// Engine setup, the event loop, and the deadlock report.
#include "engine/engine.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <limits>
#include <span>
#include <thread>

#include <fmt/format.h>

#include "engine/huge_pages.hpp"
#include "engine/parallel.hpp"
#include "stepsim/error.hpp"

namespace stepsim::engine {

std::string RunStats::event_rate() const {
  if (loop_s <= 0) return "-";
  const double rate = static_cast<double>(events) / loop_s;
  if (rate >= 1e6) return fmt::format("{:.1f} M/s", rate * 1e-6);
  if (rate >= 1e3) return fmt::format("{:.1f} k/s", rate * 1e-3);
  return fmt::format("{:.0f}/s", rate);
}
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Engine::Engine(const Program& program, SecondThread second)
    : program_(program), solver_(std::span<const network::Resource>{}) {
  const auto start = std::chrono::steady_clock::now();
  ranks_.resize(program_.ranks.size());
  for (const RankProgram& rank : program_.ranks) {
    STEPSIM_CHECK(rank.list != nullptr, fmt::format("rank {} has no op list", rank.rank));
  }
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    ranks_[r].list = &index_of(r);
    validate_rank(r);
    program_base_.push_back(ranks_[r].list->ops.data());
    heads_stride_ = std::max(heads_stride_, ranks_[r].list->streams.size());
  }
  inline_heads_ = heads_stride_ <= kInlineHeads;
  if (!inline_heads_) heads_.assign(ranks_.size() * heads_stride_, StreamHead{});
  bubbles_.resize(ranks_.size());
  if (program_.record_host_issues) host_runs_.assign(ranks_.size(), {{OpIndex{0}, Time::zero()}});
  slowed_ = 1.0 + program_.comm_slowdown;
  if (program_.derived_slowdown) taken_.resize(ranks_.size());
  if (program_.arrivals) arrivals_ = program_.arrivals->start();
  STEPSIM_CHECK(program_.variation.speed.empty() || program_.variation.speed.size() == ranks_.size(),
                "compute speeds do not match the simulated ranks");
  place_op_states();
  second_thread_ =
      second == SecondThread::always || (op_states_.size() * sizeof(OpState) >= kLargeRun && setup_threads() > 1);
  start_preparing(start);
  index_collectives();
  collectives_indexed();
  check_members();
  index_kinds();
  for (const RankState& rank : ranks_) stats_.ops += rank.ops.size();
  stats_.op_lists = indexes_.size();
  stats_.collectives = collectives_.size();
  stats_.setup_s = seconds_since(start);
}

// What a rank's op list says alone is checked once for the ranks that share it, in the name
// of the first of them; what differs between them (their streams and calls), for each rank.
// Messages are formatted only on failure: validation runs over every op.
void Engine::validate_list(std::size_t r) const {
  const RankProgram& rank = program_.ranks[r];
  const auto bad = [&rank](std::size_t o, const char* what) {
    return fmt::format("rank {} op {}: {}", rank.rank, o, what);
  };
  const std::vector<Op>& ops = rank.ops();
  for (std::size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    STEPSIM_CHECK(op.name < program_.names.size(), bad(o, "unknown name"));
    STEPSIM_CHECK(op.host <= program_.host_costs.size(), bad(o, "unknown host cost"));
    STEPSIM_CHECK(std::size_t{op.waits_begin} + op.wait_count <= rank.waits().size(), bad(o, "bad waits"));
    STEPSIM_CHECK(op.wait_count <= kMaxWaits, bad(o, "too many waits"));
    for (OpIndex w : rank.waits_of(static_cast<OpIndex>(o))) {
      STEPSIM_CHECK(w < ops.size() && w != o, bad(o, "bad wait"));
    }
    if (op.kind != OpKind::collective) {
      STEPSIM_CHECK(op.duration >= Time::zero(), bad(o, "negative duration"));
    } else {
      STEPSIM_CHECK(op.call >= 0, bad(o, "unknown call"));
    }
  }
}

void Engine::validate_rank(std::size_t r) const {
  const RankProgram& rank = program_.ranks[r];
  const ListIndex& list = *ranks_[r].list;
  STEPSIM_CHECK(!rank.streams.empty(), fmt::format("rank {} has no streams", rank.rank));
  STEPSIM_CHECK(rank.streams.size() <= kMaxStreams, fmt::format("rank {} has too many streams", rank.rank));
  const auto bad = [&rank](std::size_t o, const char* what) {
    return fmt::format("rank {} op {}: {}", rank.rank, o, what);
  };
  if (list.streams.size() > rank.streams.size()) {
    // The first op on a stream the rank does not have.
    const auto o = std::ranges::find_if(list.ops, [&](const Op& op) { return op.stream >= rank.streams.size(); });
    STEPSIM_CHECK(false, bad(static_cast<std::size_t>(o - list.ops.begin()), "unknown stream"));
  }
  for (const OpIndex o : list.collectives) {
    const Op& op = list.ops[o];
    STEPSIM_CHECK(static_cast<std::size_t>(op.call) < rank.calls.size(), bad(o, "unknown call"));
    const CollectiveCall& call = rank.calls[static_cast<std::size_t>(op.call)];
    STEPSIM_CHECK(call.group >= 0 && static_cast<std::size_t>(call.group) < program_.groups.size(),
                  bad(o, "unknown group"));
    STEPSIM_CHECK(call.size.count() == 0 || call.algbw.positive(), bad(o, "data without bandwidth"));
    for (const network::ResourceUse& u : call.uses) {
      STEPSIM_CHECK(u.resource < program_.resources.size(), bad(o, "unknown resource"));
    }
  }
}

const Engine::ListIndex& Engine::index_of(std::size_t r) {
  const OpList& list = *program_.ranks[r].list;
  std::unique_ptr<ListIndex>& index = indexes_[&list];
  if (index) return *index;
  validate_list(r);
  index = std::make_unique<ListIndex>();
  index_streams(list, *index);
  index_dependents(list, *index);
  index->ops = list.ops;
  index->host_before.reserve(list.ops.size() + 1);
  index->host_before.push_back(Time::zero());
  index->issued_before.reserve(list.ops.size() + 1);
  index->issued_before.push_back(0);
  for (std::size_t o = 0; o < list.ops.size(); ++o) {
    if (list.ops[o].kind == OpKind::collective) index->collectives.push_back(static_cast<OpIndex>(o));
    if (list.ops[o].host_blocks) index->host_blocking.push_back(static_cast<OpIndex>(o));
    const Time cost = program_.host_cost(list.ops[o]);
    index->host_before.push_back(index->host_before.back() + cost);
    // A kernel a CUDA graph replays costs the CPU nothing: the CPU lane does not count it.
    index->issued_before.push_back(index->issued_before.back() + (cost > Time::zero() ? 1 : 0));
  }
  index->memory_changes = static_cast<std::size_t>(
      std::ranges::count_if(list.ops, [](const Op& op) { return op.memory_delta.count() != 0; }));
  return *index;
}

void Engine::index_streams(const OpList& list, ListIndex& index) const {
  std::vector<std::size_t> count;
  for (const Op& op : list.ops) {
    if (op.stream >= count.size()) count.resize(op.stream + std::size_t{1}, 0);
    ++count[op.stream];
  }
  index.streams.resize(count.size());
  for (std::size_t s = 0; s < count.size(); ++s) {
    STEPSIM_CHECK(count[s] <= kMaxStreamOps, fmt::format("stream {} has more than {} ops", s, kMaxStreamOps));
    index.streams[s].reserve(count[s]);
  }
  for (std::size_t o = 0; o < list.ops.size(); ++o)
    index.streams[list.ops[o].stream].push_back(static_cast<OpIndex>(o));
}

// Reverse edges of `waits`, so that a finished op releases exactly the ops waiting on it.
void Engine::index_dependents(const OpList& list, ListIndex& index) const {
  const auto waits_of = [&list](const Op& op) { return std::span(list.waits).subspan(op.waits_begin, op.wait_count); };
  std::vector<std::uint32_t> count(list.ops.size() + 1, 0);
  for (const Op& op : list.ops) {
    for (OpIndex w : waits_of(op)) ++count[w + 1];
  }
  for (std::size_t o = 1; o < count.size(); ++o) count[o] += count[o - 1];
  index.dependents_begin = count;
  index.dependents.resize(count.back());
  for (std::size_t o = 0; o < list.ops.size(); ++o) {
    for (OpIndex w : waits_of(list.ops[o])) index.dependents[count[w]++] = static_cast<OpIndex>(o);
  }
}

// Matches the k-th collective of each group across its members. Each rank looks its groups
// up in its own short list, so matching costs time linear in the calls, whatever the number
// of groups and their sizes.
//
// Collectives are numbered call by call: the k-th calls of all groups side by side. The groups
// of a kind (a stage's hundred tensor-parallel groups, say) make their k-th call at about the
// same time, so the collectives and members a stretch of the run reads lie on a few pages
// instead of one page per group; at 16,384 GPUs that takes a tenth off the event loop.
void Engine::index_collectives() {
  Memberships all = memberships();
  const auto mine = [&all](std::size_t r) {
    return std::span<Membership>(all.groups.data() + all.begin[r], all.groups.data() + all.begin[r + 1]);
  };
  const auto membership = [&](std::size_t r, const CollectiveCall& call) -> Membership& {
    const RankProgram& rank = program_.ranks[r];
    const auto g = static_cast<std::uint32_t>(call.group);
    const std::span<Membership> groups = mine(r);
    const auto it = std::ranges::find(groups, g, &Membership::group);
    STEPSIM_CHECK(it != groups.end(),
                  fmt::format("rank {} calls group '{}' without being a member", rank.rank, program_.groups[g].name));
    return *it;
  };
  // How many calls each group makes: the most any of its members makes (a member that makes
  // fewer is reported by check_members).
  std::vector<std::uint32_t> calls(program_.groups.size(), 0);
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    for (const OpIndex o : ranks_[r].list->collectives) ++membership(r, call_of(r, o)).calls;
    for (Membership& m : mine(r)) {
      calls[m.group] = std::max(calls[m.group], m.calls);
      m.calls = 0;
    }
  }
  // Groups in order of their calls, most first (then by number): the groups that make a k-th
  // call are the first first_of[k + 1] - first_of[k] of them, and collective (g, k) is
  // first_of[k] + place[g].
  std::vector<std::uint32_t> order(program_.groups.size());
  for (std::size_t g = 0; g < order.size(); ++g) order[g] = static_cast<std::uint32_t>(g);
  std::ranges::stable_sort(order, std::greater<>{}, [&calls](std::uint32_t g) { return calls[g]; });
  std::vector<std::uint32_t> place(order.size());
  for (std::size_t p = 0; p < order.size(); ++p) place[order[p]] = static_cast<std::uint32_t>(p);
  const std::uint32_t most = order.empty() ? 0 : calls[order.front()];
  std::vector<std::size_t> first_of(std::size_t{most} + 1, 0);
  std::size_t with = order.size();  // groups that make call k
  for (std::uint32_t k = 0; k < most; ++k) {
    while (with > 0 && calls[order[with - 1]] <= k) --with;
    first_of[k + 1] = first_of[k] + with;
  }
  const std::size_t total = first_of[most];
  STEPSIM_CHECK(total <= UINT32_MAX, "too many collectives");
  std::size_t members = 0;
  for (std::size_t g = 0; g < calls.size(); ++g) members += std::size_t{calls[g]} * program_.groups[g].members.size();
  STEPSIM_CHECK(members <= UINT32_MAX, "too many collective members");
  resize_on_huge_pages(collectives_, total);
  group_begin_.assign(program_.groups.size() + 1, 0);
  std::size_t listed = 0;
  for (std::size_t g = 0; g < program_.groups.size(); ++g) {
    listed += program_.groups[g].members.size();
    STEPSIM_CHECK(listed <= UINT32_MAX, "too many group members");
    group_begin_[g + 1] = static_cast<std::uint32_t>(listed);
  }
  group_ranks_.reserve(group_begin_.back());
  for (const Group& group : program_.groups) {
    for (const int m : group.members) group_ranks_.push_back(static_cast<std::uint32_t>(m));
  }
  op_collective_begin_.resize(ranks_.size() + 1, 0);
  for (std::size_t r = 0; r < ranks_.size(); ++r)
    op_collective_begin_[r + 1] = op_collective_begin_[r] + ranks_[r].list->collectives.size();
  resize_on_huge_pages(op_collective_, op_collective_begin_.back());
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    std::uint32_t* written = op_collective_.data() + op_collective_begin_[r];
    for (const OpIndex o : ranks_[r].list->collectives) {
      Membership& m = membership(r, call_of(r, o));
      const std::size_t c = first_of[m.calls++] + place[m.group];
      Collective& coll = collectives_[c];
      if (coll.arrived++ == 0) {
        coll.op = o;
        coll.members = group_begin_[m.group];
        coll.member_count = group_begin_[m.group + 1] - group_begin_[m.group];
      } else if (o != coll.op && coll.spread == kSameOp) {
        // The first member whose op differs: the members so far all made it with coll.op.
        coll.spread = static_cast<std::uint32_t>(member_ops_.size());
        member_ops_.resize(member_ops_.size() + program_.groups[m.group].members.size(), coll.op);
      }
      if (coll.spread != kSameOp) member_ops_[std::size_t{coll.spread} + m.position] = o;
      *written++ = static_cast<std::uint32_t>(c);  // into the op's state when its row is prepared
    }
  }
  collective_first_ = std::move(first_of);
  collective_groups_ = std::move(order);
  if (arrivals_) not_before_.assign(total, Time::zero());
}

// Collective c is call k of its group: k is found among the calls' first collectives.
std::uint32_t Engine::call_index_of(std::uint32_t c) const {
  const auto after = std::ranges::upper_bound(collective_first_, std::size_t{c});
  return static_cast<std::uint32_t>(after - collective_first_.begin() - 1);
}

std::uint32_t Engine::group_of(std::uint32_t c) const {
  return collective_groups_[c - collective_first_[call_index_of(c)]];
}

// Every rank's groups and its position in each, rank by rank, in group order: a lookup finds
// a rank listed twice in a group at its first position.
Engine::Memberships Engine::memberships() const {
  Memberships out;
  out.begin.assign(ranks_.size() + 1, 0);
  for (const Group& group : program_.groups) {
    for (int m : group.members) {
      STEPSIM_CHECK(m >= 0 && static_cast<std::size_t>(m) < ranks_.size(),
                    fmt::format("group '{}' names unknown rank {}", group.name, m));
      ++out.begin[static_cast<std::size_t>(m) + 1];
    }
  }
  for (std::size_t r = 1; r < out.begin.size(); ++r) out.begin[r] += out.begin[r - 1];
  out.groups.resize(out.begin.back());
  std::vector<std::size_t> next(out.begin.begin(), out.begin.end() - 1);
  for (std::size_t g = 0; g < program_.groups.size(); ++g) {
    const std::vector<int>& members = program_.groups[g].members;
    for (std::size_t pos = 0; pos < members.size(); ++pos) {
      const auto m = static_cast<std::size_t>(members[pos]);
      out.groups[next[m]++] = {static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(pos), 0};
    }
  }
  return out;
}

// Checks that every member takes part (index_collectives counted them in `arrived`, which
// the run counts from zero again). Each arrival is a distinct rank at its first place in the
// group, so a count short of the group's size names a member that never makes the call: one
// that makes too few, or a rank listed twice.
void Engine::check_members() {
  for_each_collective([this](std::size_t c, std::uint32_t k, std::uint32_t g) {
    Collective& coll = collectives_[c];
    const Group& group = program_.groups[g];
    if (coll.arrived != group.members.size()) [[unlikely]] {
      for (std::size_t m = 0; m < group.members.size(); ++m) {
        const int rank = group.members[m];
        const bool first_place = std::ranges::find(group.members, rank) - group.members.begin() == std::ptrdiff_t(m);
        STEPSIM_CHECK(first_place && reaches(static_cast<std::size_t>(rank), g, k),
                      fmt::format("group '{}' call {} never reaches member {}", group.name, k, rank));
      }
    }
    coll.arrived = 0;
  });
}

// Whether rank r makes call k of group g (more than k calls on it).
bool Engine::reaches(std::size_t r, std::uint32_t group, std::uint32_t k) const {
  std::uint32_t calls = 0;
  for (const OpIndex o : ranks_[r].list->collectives) {
    if (static_cast<std::uint32_t>(call_of(r, o).group) == group && calls++ == k) return true;
  }
  return false;
}

// A group's collectives mostly repeat a few calls (a layer's AllGather, its ReduceScatter):
// the collectives whose members make the same calls share one kind, which holds the calls
// merged and the links their flow loads, all its members' in member order, in one run. A
// starting flow reads that run instead of gathering its members' calls.
void Engine::index_kinds() {
  struct Seen {
    std::size_t key = 0;  // into keys: the members' calls, one per member
    std::uint32_t kind = 0;
    Time latency;
  };
  constexpr std::size_t kSeenPerGroup = 32;  // distinct call lists remembered per group
  std::vector<std::vector<Seen>> seen(program_.groups.size());
  std::vector<std::int32_t> keys;
  std::vector<std::int32_t> key;
  for_each_collective([&](std::size_t c, std::uint32_t k, std::uint32_t g) {
    Collective& coll = collectives_[c];
    const std::vector<int>& members = program_.groups[g].members;
    key.clear();
    for (std::uint32_t m = 0; m < members.size(); ++m)
      key.push_back(program_base_[static_cast<std::size_t>(members[m])][member_op(coll, m)].call);
    std::vector<Seen>& mine = seen[g];
    const auto same = std::ranges::find_if(mine, [&](const Seen& s) {
      return std::equal(key.begin(), key.end(), keys.begin() + static_cast<std::ptrdiff_t>(s.key));
    });
    if (same != mine.end()) {
      coll.kind = same->kind;
      coll.latency = same->latency;
      return;
    }
    STEPSIM_CHECK(kinds_.size() < UINT32_MAX, "too many kinds of collectives");
    CollectiveKind kind;
    Time latency;
    for (std::uint32_t m = 0; m < members.size(); ++m) {
      const CollectiveCall& call =
          program_.ranks[static_cast<std::size_t>(members[m])].calls[static_cast<std::size_t>(key[m])];
      if (m == 0) {
        kind.size = call.size;
        kind.cap = call.algbw;
        kind.slows_compute = call.slows_compute;
        kind.host_copy = call.host_copy;
      } else {
        STEPSIM_CHECK(call.size == kind.size,
                      fmt::format("group '{}' call {} has different sizes on its members", program_.groups[g].name, k));
        STEPSIM_CHECK(call.slows_compute == kind.slows_compute && call.host_copy == kind.host_copy,
                      fmt::format("group '{}' call {} is NCCL on some members only", program_.groups[g].name, k));
        if (call.algbw < kind.cap) kind.cap = call.algbw;
      }
      kind.sm_share = std::max(kind.sm_share, static_cast<float>(call.sm_share));
      kind.hbm_share = std::max(kind.hbm_share, static_cast<float>(call.hbm_share));
      latency = max(latency, call.latency);
    }
    if (kind.size.count() != 0) {
      kind.uses_begin = flow_uses_.size();
      for (std::uint32_t m = 0; m < members.size(); ++m) {
        const RankProgram& rank = program_.ranks[static_cast<std::size_t>(members[m])];
        const std::vector<network::ResourceUse>& uses = rank.calls[static_cast<std::size_t>(key[m])].uses;
        flow_uses_.insert(flow_uses_.end(), uses.begin(), uses.end());
      }
      STEPSIM_CHECK(flow_uses_.size() - kind.uses_begin <= UINT32_MAX, "too many link uses in one collective");
      kind.uses_count = static_cast<std::uint32_t>(flow_uses_.size() - kind.uses_begin);
    }
    coll.kind = static_cast<std::uint32_t>(kinds_.size());
    coll.latency = latency;
    kinds_.push_back(kind);
    if (mine.size() < kSeenPerGroup) {
      mine.push_back({keys.size(), coll.kind, latency});
      keys.insert(keys.end(), key.begin(), key.end());
    }
  });
  flow_uses_.shrink_to_fit();
  number_resources();
}

// The run numbers the link resources its flows load in the order they first appear in
// flow_uses_, and leaves out the others: the links a flow loads (a node's NVLink ports, a
// ring's NICs) are then neighbours in every per-link array, and a flow that starts or ends
// touches a few cache lines of them, not one per link. The solver sees the same loads in the
// same order, so the rates are the same.
void Engine::number_resources() {
  constexpr auto kNone = std::numeric_limits<network::ResourceId>::max();
  std::vector<network::ResourceId> id(program_.resources.size(), kNone);
  std::vector<network::Resource> used;
  for (network::ResourceUse& u : flow_uses_) {
    if (id[u.resource] == kNone) {
      id[u.resource] = static_cast<network::ResourceId>(used.size());
      used.push_back(program_.resources[u.resource]);
    }
    u.resource = id[u.resource];
  }
  solver_ = network::MaxMinSolver(used);
  resource_flows_.resize(used.size());
  resource_mark_.resize(used.size());
}

const CollectiveCall& Engine::call_of(std::size_t r, OpIndex o) const {
  const RankProgram& rank = program_.ranks[r];
  return rank.calls[static_cast<std::size_t>(ranks_[r].list->ops[o].call)];
}

Timeline Engine::run(IntervalObserver* observer) {
  STEPSIM_CHECK(!ran_, "an engine runs its program once");
  ran_ = true;
  start_timeline();
  std::size_t total_ops = 0;
  for (const RankProgram& rank : program_.ranks) total_ops += rank.ops().size();
  queue_.reserve(total_ops / 4 + 64);
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    issue_from_host(r);
    advance_rank(r);
  }
  const auto loop = std::chrono::steady_clock::now();
  while (!queue_.empty()) {
    const Event e = queue_.pop();
    if (!queue_.empty()) prefetch(queue_.top());
    now_ = e.at;
    ++stats_.events;
    dispatch(e);
  }
  stats_.loop_s = seconds_since(loop);
  finish_preparing();
  check_finished();
  for (std::size_t r = 0; r < ranks_.size(); ++r) end_host_run(r);
  add_drain_bubbles();
  // Every interval ends at the time of the event that ended it, and time only grows: the step
  // ends when the last op or bubble did, known before any interval is written.
  timeline_.steps.push_back({"step", Time::zero(), last_end_});
  if (observer != nullptr) observer->begin(timeline_.steps.front());
  const auto write = std::chrono::steady_clock::now();
  write_intervals(observer);
  stats_.write_s = seconds_since(write);
  return std::move(timeline_);
}

void Engine::start_timeline() {
  name_map_.reserve(program_.names.size());
  for (const std::string& name : program_.names) name_map_.push_back(timeline_.intern(name));
  for (const auto& [name, work] : program_.work) timeline_.work[name_map_[name]] = work;
  bubble_name_ = timeline_.intern("bubble");
  for (const Group& g : program_.groups)
    timeline_.groups.push_back({g.name, g.kind, g.size, g.ranks, g.nodes, g.ranks_per_node});
  timeline_.ranks.resize(program_.ranks.size());
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const RankProgram& rank = program_.ranks[r];
    RankTimeline& out = timeline_.ranks[r];
    out.rank = rank.rank;
    out.multiplicity = rank.multiplicity;
    out.label = rank.label;
    out.streams = rank.streams;
  }
}

// The ops' intervals are written once the run is over, rank after rank, in the order the
// ops finished, with the bubbles (recorded during the run) in their places, and the memory
// counter as the ops changed it. Written during the run they went to thousands of buffers at
// once, a cache miss each in all-ranks mode; an op's state keeps all they need. The two
// largest buffers, the ops' states and their intervals, do not peak together: each rank's
// states are given back once its intervals are written, and the collectives' bookkeeping
// before any is.
void Engine::write_intervals(IntervalObserver* observer) {
  collectives_ = {};
  kinds_ = {};
  group_ranks_ = {};
  member_ops_ = {};
  not_before_ = {};
  flow_uses_ = {};
  op_flags_ = {};
  // Small runs (representative mode) keep their memory: the allocator hands it out again
  // already mapped, and system calls would cost more than they save.
  const bool large = op_states_.size() * sizeof(OpState) >= kLargeRun;
  if (observer == nullptr) {
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      timeline_.ranks[r].intervals.reserve(ranks_[r].ops.size() + bubbles_[r].count);
    }
    if (large) advise_interval_buffers();
  }
  // Whole huge pages only: the buffer's first and last pages may hold the allocator's own data,
  // and giving back part of a huge page splits it, so that the ranks still to be written would
  // read the rest of it through 512 small pages.
  constexpr std::uintptr_t kPage = std::uintptr_t{2} << 20;
  std::uintptr_t released = (reinterpret_cast<std::uintptr_t>(op_states_.data()) + kPage - 1) & ~(kPage - 1);
  std::size_t regions_done = 0;  // the regions before it have all their ranks written
  const auto done = [&](std::size_t r) {
    if (--regions_[region_of_[r]].ranks_left != 0 || !large) return;
    // Ranks are placed TP innermost and PP outermost, so a stage's list is done after its last
    // rank and the regions end in order; in any other order they wait for the ones before.
    while (regions_done < regions_.size() && regions_[regions_done].ranks_left == 0) ++regions_done;
    if (regions_done == 0) return;
    const std::uintptr_t end =
        reinterpret_cast<std::uintptr_t>(op_states_.data() + regions_[regions_done - 1].end) & ~(kPage - 1);
    if (end <= released) return;
    release_pages(reinterpret_cast<void*>(released), end - released);
    released = end;
  };
  // A large run writes on two threads, each rank on one of them into a buffer of that thread's
  // (a dropped rank's buffer serves its next rank, still in its cache); the observer sees the
  // ranks in order, each on the thread that wrote it, the threads taking turns.
  const std::size_t threads = second_thread_ ? 2 : 1;
  const bool record = !host_runs_.empty();
  std::atomic<std::size_t> turn{0};  // the rank to be shown to the observer next
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  run_parts(threads, [&](std::size_t part) {
    try {
      std::vector<std::uint32_t> order;
      std::vector<Interval> spare;
      for (std::size_t r = part; r < ranks_.size(); r += threads) {
        std::vector<Interval>& intervals = timeline_.ranks[r].intervals;
        if (observer != nullptr) {
          intervals = std::move(spare);
          intervals.clear();
          intervals.reserve(ranks_[r].ops.size() + bubbles_[r].count);
        } else if (large) {
          populate_pages(intervals.data(), intervals.capacity() * sizeof(Interval));
        }
        // Under an observer the host's issues are written for the ranks it keeps, once kept.
        write_rank_intervals(r, order, record && observer == nullptr);
        while (turn.load(std::memory_order_acquire) != r) {
          if (failed.load(std::memory_order_acquire)) return;
          std::this_thread::yield();
        }
        if (observer != nullptr && !observer->observe(timeline_, r)) {
          timeline_.ranks[r].dropped = intervals.size();
          spare = std::move(intervals);
          intervals = {};
        } else if (observer != nullptr && record) {
          write_rank_issues(r, order);
        }
        done(r);
        turn.store(r + 1, std::memory_order_release);
      }
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  });
  if (error) std::rethrow_exception(error);
}

// Rank r's ops in the order they finished (`order`: their op indices), each bubble after the
// ops finished before it ended: on_bubble(bubble) and on_op(k) in the timeline's order.
template <class OnBubble, class OnOp>
void Engine::walk_rank(std::size_t r, const std::vector<std::uint32_t>& order, OnBubble on_bubble, OnOp on_op) const {
  const BubbleChunk* chunk = bubbles_[r].first;
  std::size_t at = 0;  // in chunk
  std::size_t left = bubbles_[r].count;
  const auto next = [&]() -> const Bubble* { return left == 0 ? nullptr : &chunk->items[at]; };
  const auto advance = [&] {
    --left;
    if (++at < BubbleChunk::kSize) return;
    chunk = chunk->next;
    at = 0;
  };
  for (std::size_t k = 0; k < order.size(); ++k) {
    for (const Bubble* b = next(); b != nullptr && b->after <= k; b = next()) {
      on_bubble(*b);
      advance();
    }
    on_op(k);
  }
  for (const Bubble* b = next(); b != nullptr; b = next()) {
    on_bubble(*b);
    advance();
  }
}

// The ops in the order they finished, each bubble after the ops finished before it ended:
// written front to back, so that the buffer is filled as a stream. With `record`, how the host
// issued each (write_rank_issues) beside them.
void Engine::write_rank_intervals(std::size_t r, std::vector<std::uint32_t>& order, bool record) {
  const RankState& state = ranks_[r];
  if (!taken_.empty()) timeline_.ranks[r].compute_slowed = Time::from_ps(std::llround(taken_[r].slowed_ps));
  std::vector<Interval>& out = timeline_.ranks[r].intervals;
  std::vector<HostIssue>& issues = timeline_.ranks[r].issues;
  issues.clear();
  if (record) issues.reserve(state.ops.size() + bubbles_[r].count);
  order.resize(state.ops.size());
  // A rank's blocks of states lie a whole row apart: the hardware does not fetch the next one
  // ahead, so this pass asks for the block kAhead blocks on while it reads one.
  constexpr std::size_t kAhead = 4;
  for (std::size_t o = 0; o < state.ops.size(); ++o) {
    if (o % kOpBlock == 0 && o + kAhead * kOpBlock < state.ops.size()) {
      const auto* block = reinterpret_cast<const char*>(&state.ops[o + kAhead * kOpBlock]);
      for (std::size_t line = 0; line < kOpBlock * sizeof(OpState); line += 64) __builtin_prefetch(block + line);
    }
    order[static_cast<std::size_t>(state.ops[o].order)] = static_cast<std::uint32_t>(o);
  }
  // The memory counter changes when an op ends, in the order they ended.
  std::vector<CounterSample>& memory = timeline_.ranks[r].memory;
  memory.reserve(1 + state.list->memory_changes);  // exactly: no slack in all-ranks mode
  Bytes allocated = program_.ranks[r].memory_base;
  memory.push_back({Time::zero(), allocated});
  walk_rank(
      r, order,
      [&](const Bubble& b) {
        out.push_back(bubble_interval(b));
        if (record) issues.emplace_back();
      },
      [&](std::size_t k) {
        if (!stands_in(r, order[k])) {
          out.push_back(interval_of(r, order[k]));
          if (record) issues.push_back(host_issue(r, order[k]));
        }
        const Bytes delta = state.list->ops[order[k]].memory_delta;
        if (delta.count() == 0) return;
        allocated += delta;
        memory.push_back({end_of(r, order[k]), allocated});
      });
}

// How the host issued each op of rank r, in the order write_rank_intervals wrote them: for a
// rank an observer keeps, once it has kept it (so the ranks it drops cost nothing for it).
void Engine::write_rank_issues(std::size_t r, const std::vector<std::uint32_t>& order) {
  std::vector<HostIssue>& issues = timeline_.ranks[r].issues;
  issues.clear();
  issues.reserve(order.size() + bubbles_[r].count);
  walk_rank(
      r, order, [&](const Bubble&) { issues.emplace_back(); },
      [&](std::size_t k) {
        if (!stands_in(r, order[k])) issues.push_back(host_issue(r, order[k]));
      });
}

// The host run that issued `o` began at its first op: `o`'s issue ended once the host had paid
// its cost and those of the run's ops before it (launch_of).
HostIssue Engine::host_issue(std::size_t r, OpIndex o) const {
  const std::vector<std::pair<OpIndex, Time>>& runs = host_runs_[r];
  const auto run =
      std::prev(std::ranges::upper_bound(runs, o, {}, [](const std::pair<OpIndex, Time>& p) { return p.first; }));
  const std::vector<Time>& before = ranks_[r].list->host_before;
  const Op& op = ranks_[r].list->ops[o];
  HostIssue h;
  h.issued = run->second + (before[o + 1] - before[run->first]);
  h.cost = before[o + 1] - before[o];
  h.order = o;
  h.op = true;
  h.replayed = op.host != 0 && h.cost == Time::zero();
  return h;
}

// Each rank's buffer is smaller than a huge page in all-ranks mode, but the allocator places
// them one after the other: advising the range they span as a whole lets the first touch of
// all of them take 512 times fewer page faults. Buffers scattered over the address space are
// advised one by one.
void Engine::advise_interval_buffers() {
  std::uintptr_t lo = UINTPTR_MAX;
  std::uintptr_t hi = 0;
  std::size_t bytes = 0;
  for (const RankTimeline& rank : timeline_.ranks) {
    const auto begin = reinterpret_cast<std::uintptr_t>(rank.intervals.data());
    const std::size_t size = rank.intervals.capacity() * sizeof(Interval);
    lo = std::min(lo, begin);
    hi = std::max(hi, begin + size);
    bytes += size;
  }
  if (hi > lo && hi - lo <= 2 * bytes) {
    advise_huge_pages(reinterpret_cast<void*>(lo), hi - lo);
    return;
  }
  for (RankTimeline& rank : timeline_.ranks) {
    advise_huge_pages(rank.intervals.data(), rank.intervals.capacity() * sizeof(Interval));
  }
}

// With thousands of ranks, the state an event needs is rarely in cache: while one event is
// handled, the next one's rank and op (or collective, or flow) are fetched.
void Engine::prefetch(const Event& e) const {
  switch (e.kind) {
    case EventKind::wake:
    case EventKind::compute_end: {
      // The line of the rank's state that every event reads; an op's state is aligned within one.
      const auto* rank = reinterpret_cast<const char*>(&ranks_[e.a]);
      __builtin_prefetch(rank);
      __builtin_prefetch(&op_base_[e.a][e.b]);
      __builtin_prefetch(&flags_of(op_base_[e.a][e.b]));
      __builtin_prefetch(heads(e.a));
      __builtin_prefetch(program_base_[e.a] + e.b);
      return;
    }
    case EventKind::latency_end:
    case EventKind::skew_end:
      __builtin_prefetch(&collectives_[e.a]);
      return;
    case EventKind::flow_end:
      __builtin_prefetch(&flows_[e.a]);
      return;
  }
}

void Engine::dispatch(const Event& e) {
  switch (e.kind) {
    case EventKind::wake:
      flags_of(ranks_[e.a].ops[e.b]).wake_pending = 0;
      try_start(e.a, ranks_[e.a].list->ops[e.b].stream);
      return;
    case EventKind::compute_end:
      on_compute_end(e.a, e.b, e.stream, e.version);
      return;
    case EventKind::latency_end:
      on_latency_end(e.a);
      return;
    case EventKind::flow_end:
      on_flow_end(e.a, e.version);
      return;
    case EventKind::skew_end:
      start_collective(e.a);
      return;
  }
}

void Engine::check_finished() const {
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r].finished == ranks_[r].ops.size()) continue;
    const std::string stuck = describe_stuck(r);
    STEPSIM_CHECK(stuck.empty(), stuck);
  }
}

// Names the first stream of a stuck rank whose head cannot start, and why.
std::string Engine::describe_stuck(std::size_t r) const {
  const RankProgram& rank = program_.ranks[r];
  const RankState& state = ranks_[r];
  for (std::size_t s = 0; s < state.list->streams.size(); ++s) {
    const std::vector<OpIndex>& stream = state.list->streams[s];
    const std::uint32_t head = heads(r)[s].head;
    if (head == stream.size()) continue;
    const OpIndex o = stream[head];
    return fmt::format("deadlock: rank {} ({}) stream {} '{}' op {} '{}' {}", rank.rank, rank.label, s, rank.streams[s],
                       o, program_.names[rank.ops()[o].name], describe_wait(r, o));
  }
  return fmt::format("deadlock: rank {} ({}) has ops left on no stream", rank.rank, rank.label);
}

std::string Engine::describe_wait(std::size_t r, OpIndex o) const {
  const RankProgram& rank = program_.ranks[r];
  const RankState& state = ranks_[r];
  if (o >= state.host_next) {
    return fmt::format("is never issued: the host blocks before op {} '{}'", state.host_next,
                       program_.names[rank.ops()[state.host_next].name]);
  }
  for (OpIndex w : rank.waits_of(o)) {
    if (flags_of(state.ops[w]).status != Status::done) {
      return fmt::format("waits on op {} '{}', which never ends", w, program_.names[rank.ops()[w].name]);
    }
  }
  const std::uint32_t c = state.ops[o].collective;
  const Group& group = program_.groups[group_of(c)];
  return fmt::format("waits at the rendezvous of group '{}' call {} ({} of {} members arrived)", group.name,
                     call_index_of(c), collectives_[c].arrived, group.members.size());
}

Timeline run(const Program& program, IntervalObserver* observer, RunStats* stats) {
  Engine engine(program);
  Timeline timeline = engine.run(observer);
  if (stats != nullptr) *stats = engine.stats();
  return timeline;
}

}  // namespace stepsim::engine
