// Kineto events to Timeline intervals, process groups and step windows (the rules are in
// trace_timeline.hpp).
#include "analysis/trace_timeline.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include "analysis/nccl_kernels.hpp"
#include "analysis/one_job.hpp"
#include "stepsim/error.hpp"

namespace stepsim::analysis {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxStreams = 65535;  // Interval::stream is 16 bits

bool is_trace_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.ends_with(".json") || name.ends_with(".json.gz");
}

[[noreturn]] void cannot_read(const std::string& path, int error) {
  if (error == ENOENT) throw InputError(path, "", "no such file or folder");
  throw InputError(path, "", fmt::format("cannot read the trace: {}", std::strerror(error)));
}

// File names in the order a person numbers them: runs of digits by their value, so that
// rank2.json comes before rank10.json (rank files are named by rank, and a file without
// distributedInfo is the rank of its place); the plain order breaks ties (rank01, rank1).
bool natural_less(const std::string& a, const std::string& b) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (!digit(a[i]) || !digit(b[j])) {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
      continue;
    }
    std::size_t ie = i, je = j;
    while (ie < a.size() && digit(a[ie])) ++ie;
    while (je < b.size() && digit(b[je])) ++je;
    std::size_t is = i, js = j;  // past the leading zeros
    while (is + 1 < ie && a[is] == '0') ++is;
    while (js + 1 < je && b[js] == '0') ++js;
    if (ie - is != je - js) return ie - is < je - js;
    if (const int c = a.compare(is, ie - is, b, js, je - js); c != 0) return c < 0;
    i = ie, j = je;
  }
  if (i < a.size() || j < b.size()) return j < b.size() && i == a.size();
  return a < b;
}

// The trace files of a folder, in natural_less order. Entries that cannot be examined are skipped
// like any other non-trace entry; a folder that cannot be listed is an error.
std::vector<std::string> folder_files(const std::string& path) {
  std::error_code ec;
  fs::directory_iterator it(path, ec);
  if (ec) cannot_read(path, ec.value());
  std::vector<std::string> files;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) cannot_read(path, ec.value());
    std::error_code type_ec;
    if (it->is_regular_file(type_ec) && is_trace_file(it->path())) files.push_back(it->path().string());
  }
  if (ec) cannot_read(path, ec.value());
  std::sort(files.begin(), files.end(), natural_less);
  if (files.empty()) throw InputError(path, "", "the folder holds no *.json or *.json.gz trace files");
  return files;
}

// A trace without one GPU activity of positive length has nothing to measure: its step
// would be 0 s.
void require_gpu_activity(const KinetoTrace& trace) {
  for (const GpuEvent& g : trace.gpu)
    if (g.end > g.start) return;
  throw InputError(trace.path, "",
                   "no timed GPU activity (complete events of category kernel, gpu_memcpy or gpu_memset with ts and "
                   "dur): nothing to measure (was the profiler recording CUDA activities?)");
}

// Which step launched each GPU activity: launches sorted by correlation id, steps by start.
class StepAssigner {
 public:
  explicit StepAssigner(const KinetoTrace& trace) : steps_(trace.steps), launches_(trace.launches) {
    std::sort(launches_.begin(), launches_.end(),
              [](const Launch& a, const Launch& b) { return a.correlation < b.correlation; });
    std::sort(steps_.begin(), steps_.end(), [](const CpuSpan& a, const CpuSpan& b) { return a.start < b.start; });
  }

  // The index into steps() of the step of `g`, or nullopt.
  std::optional<std::size_t> step_of(const GpuEvent& g) const {
    const std::optional<Time> launched = launch_time(g.correlation);
    return step_at(launched ? *launched : g.start);
  }
  const std::vector<CpuSpan>& steps() const { return steps_; }

 private:
  std::optional<Time> launch_time(std::int64_t correlation) const {
    if (correlation < 0) return std::nullopt;
    auto it = std::lower_bound(launches_.begin(), launches_.end(), correlation,
                               [](const Launch& l, std::int64_t c) { return l.correlation < c; });
    if (it == launches_.end() || it->correlation != correlation) return std::nullopt;
    return it->at;
  }

  std::optional<std::size_t> step_at(Time t) const {
    auto it = std::upper_bound(steps_.begin(), steps_.end(), t, [](Time at, const CpuSpan& s) { return at < s.start; });
    if (it == steps_.begin()) return std::nullopt;
    --it;
    if (t >= it->end) return std::nullopt;
    return static_cast<std::size_t>(it - steps_.begin());
  }

  std::vector<CpuSpan> steps_;
  std::vector<Launch> launches_;
};

std::int64_t step_number(const std::string& name) {
  const std::size_t hash = name.find('#');
  if (hash == std::string::npos) return -1;
  return std::atoll(name.c_str() + hash + 1);
}

struct Window {
  Time start = Time::max();
  Time end;
  bool used = false;
  void add(Time s, Time e) {
    start = used ? min(start, s) : s;
    end = used ? max(end, e) : e;
    used = true;
  }
};

// Builds the Timeline rank by rank; shares names, groups and step windows across ranks.
class Builder {
 public:
  // One rank: the whole file (Kineto), or the events of one pid (`device`, stepsim traces).
  void add_rank(const KinetoTrace& trace, int rank_id, std::optional<std::int64_t> device) {
    RankTimeline rank;
    rank.rank = rank_id;
    rank.label = fmt::format("rank {}", rank.rank);
    const StepAssigner steps(trace);
    const bool many_devices = !device && devices(trace).size() > 1;
    StreamIds ids;
    RankWindows own{{}, {}, trace.stepsim_format};
    for (const GpuEvent& g : trace.gpu) {
      if (device && g.device != *device) continue;
      rank.intervals.push_back(interval_of(trace, g, stream_index(trace, rank, ids, g, many_devices)));
      if (!trace.stepsim_format) note_step(trace, steps, g, own.windows);
      own.whole.add(g.start, g.end);
    }
    if (!trace.stepsim_format) extend_to_gpu_annotations(trace, own.windows);
    for (const auto& [key, w] : own.windows) windows_[key].add(w.start, w.end);
    if (own.whole.used) whole_.add(own.whole.start, own.whole.end);
    for (const CpuSpan& w : trace.windows) add_window(trace.strings[w.name], w.start, w.end);
    std::stable_sort(rank.intervals.begin(), rank.intervals.end(),
                     [](const Interval& a, const Interval& b) { return a.start < b.start; });
    timeline_.ranks.push_back(std::move(rank));
    ranks_.push_back(std::move(own));
  }

  static std::vector<std::int64_t> devices(const KinetoTrace& trace) {
    std::vector<std::int64_t> seen;
    for (const GpuEvent& g : trace.gpu)
      if (std::find(seen.begin(), seen.end(), g.device) == seen.end()) seen.push_back(g.device);
    return seen;
  }

  // The timeline, its step windows those of every rank together; `rank_steps`, each rank's
  // own (a Kineto rank's from its own GPU activities, a stepsim trace's the windows it gives).
  Timeline finish(std::vector<std::vector<StepWindow>>& rank_steps) {
    timeline_.steps = tile(windows_, whole_);
    rank_steps.clear();
    for (const RankWindows& r : ranks_) rank_steps.push_back(r.shared ? timeline_.steps : tile(r.windows, r.whole));
    return std::move(timeline_);
  }

 private:
  // Keyed by (N of ProfilerStep#N, name), so that ranks share a window by name; ordered by
  // time in tile().
  using Windows = std::map<std::pair<std::int64_t, std::string>, Window>;

  // Steps tile the time in the order they ran (their numbers may say otherwise): each ends
  // where the next begins; the last one where the work of every step ends, so that a kernel
  // of an earlier step still running then (a long collective) is measured in full, as the
  // whole-trace figure and the collectives table count it. The windows a trace gives follow;
  // without any, one window "trace" over `whole`.
  std::vector<StepWindow> tile(const Windows& windows, const Window& whole) const {
    std::vector<StepWindow> steps;
    Time last_end = windows.empty() ? Time::zero() : windows.begin()->second.end;
    for (const auto& [key, w] : windows) {
      steps.push_back({key.second, w.start, w.end});
      last_end = max(last_end, w.end);
    }
    std::stable_sort(steps.begin(), steps.end(),
                     [](const StepWindow& a, const StepWindow& b) { return a.start < b.start; });
    for (std::size_t i = 0; i + 1 < steps.size(); ++i) steps[i].end = steps[i + 1].start;
    if (!steps.empty()) steps.back().end = last_end;
    for (const StepWindow& w : given_) steps.push_back(w);
    if (steps.empty())
      steps.push_back({"trace", whole.used ? whole.start : Time::zero(), whole.used ? whole.end : Time::zero()});
    return steps;
  }

  // One rank's step windows and the span of its GPU activity; `shared`: a stepsim trace's
  // rank, whose windows are the ones the trace gives for the whole job.
  struct RankWindows {
    Windows windows;
    Window whole;
    bool shared = false;
  };

  // A window given by the trace itself (stepsim traces repeat it for every rank).
  void add_window(const std::string& name, Time start, Time end) {
    for (const StepWindow& w : given_)
      if (w.name == name && w.start == start && w.end == end) return;
    given_.push_back({name, start, end});
  }

  // (device, stream) to the index into RankTimeline::streams; the name is made once.
  using StreamIds = std::map<std::pair<std::int64_t, std::int64_t>, std::uint16_t>;

  static std::uint16_t stream_index(const KinetoTrace& trace, RankTimeline& rank, StreamIds& ids, const GpuEvent& g,
                                    bool many_devices) {
    const auto [it, fresh] = ids.try_emplace({g.device, g.stream}, static_cast<std::uint16_t>(rank.streams.size()));
    if (!fresh) return it->second;
    if (rank.streams.size() >= kMaxStreams)
      throw InputError(trace.path, "", fmt::format("more than {} GPU streams on one rank", kMaxStreams));
    rank.streams.push_back(many_devices ? fmt::format("gpu {} stream {}", g.device, g.stream)
                                        : fmt::format("stream {}", g.stream));
    return it->second;
  }

  Interval interval_of(const KinetoTrace& trace, const GpuEvent& g, std::uint16_t stream) {
    const std::string& name = trace.strings[g.name];
    Interval iv;
    iv.start = g.start;
    iv.end = g.end;
    iv.name = timeline_.intern(name);
    iv.stream = stream;
    if (const auto it = trace.work.find(g.name); it != trace.work.end()) timeline_.work[iv.name] = it->second;
    if (g.tagged) return tagged_interval(trace, g, iv);
    if (g.category != GpuCategory::kernel || is_memory_name(name)) {
      iv.activity = Activity::memory;
      iv.bytes = Bytes(g.bytes);
      return iv;
    }
    if (!is_comm_kernel(name)) return iv;
    iv.activity = Activity::comm;
    iv.op = coll_op_of(trace.strings[g.nccl.collective], name);
    iv.group = group_index(trace, g.nccl, std::nullopt);
    iv.kind = iv.group >= 0 ? timeline_.groups[static_cast<std::size_t>(iv.group)].kind : CommKind::other;
    iv.bytes = message_bytes(trace, g.nccl);
    return iv;
  }

  // stepsim's own trace says what the slice is; nothing is guessed from the name.
  Interval tagged_interval(const KinetoTrace& trace, const GpuEvent& g, Interval iv) {
    iv.activity = g.activity;
    iv.phase = g.phase;
    iv.bytes = Bytes(g.bytes);
    if (g.activity != Activity::comm) return iv;
    iv.kind = g.kind;
    iv.op = g.op;
    iv.waited = g.wait;
    iv.group = group_index(trace, g.nccl, g.kind);
    return iv;
  }

  // nccl-tests' size S: the per-rank buffer of AllReduce, the whole buffer of AllGather and
  // ReduceScatter: the larger of the input and output element counts times the dtype size.
  static Bytes message_bytes(const KinetoTrace& trace, const NcclArgs& n) {
    const std::int64_t elems = std::max(n.in_nelems, n.out_nelems);
    if (elems <= 0) return Bytes(0);
    STEPSIM_CHECK(elems <= kMaxMessageElements, "the reader refuses larger messages");
    return Bytes(elems * dtype_bytes(trace.strings[n.dtype]));
  }

  std::int32_t group_index(const KinetoTrace& trace, const NcclArgs& n, std::optional<CommKind> kind) {
    if (n.group_name == 0 && n.group_ranks == 0) return -1;
    const std::string& name = trace.strings[n.group_name];
    const std::string& desc = trace.strings[n.group_desc];
    const std::string label = desc.empty() || desc == name ? name : fmt::format("{} ({})", desc, name);
    const std::string& ranks = trace.strings[n.group_ranks];
    for (std::size_t i = 0; i < timeline_.groups.size(); ++i)
      if (timeline_.groups[i].name == label && timeline_.groups[i].ranks == ranks) return static_cast<std::int32_t>(i);
    timeline_.groups.push_back({label, kind ? *kind : kind_of_group(name, desc), n.group_size, ranks});
    return static_cast<std::int32_t>(timeline_.groups.size() - 1);
  }

  // A step's GPU-side annotation (PyTorch's gpu_user_annotation ProfilerStep#N) says where
  // the step begins and ends on the GPU: a rank that waits before its first kernel (a later
  // pipeline stage) or after its last is in its step meanwhile. A step without GPU activity
  // stays dropped.
  static void extend_to_gpu_annotations(const KinetoTrace& trace, Windows& windows) {
    for (const CpuSpan& span : trace.gpu_steps) {
      const std::string& name = trace.strings[span.name];
      const auto it = windows.find({step_number(name), name});
      if (it != windows.end()) it->second.add(span.start, span.end);
    }
  }

  static void note_step(const KinetoTrace& trace, const StepAssigner& steps, const GpuEvent& g, Windows& windows) {
    const std::optional<std::size_t> s = steps.step_of(g);
    if (!s) return;
    const CpuSpan& span = steps.steps()[*s];
    const std::string& name = trace.strings[span.name];
    windows[{step_number(name), name}].add(g.start, g.end);
  }

  Timeline timeline_;
  Windows windows_;  // every rank's together
  Window whole_;
  std::vector<StepWindow> given_;
  std::vector<RankWindows> ranks_;
};

// The ranks the traces hold, as check_one_job reads them: a Kineto trace is the rank its
// distributedInfo names, else its place among the files; stepsim's own trace one rank per
// process.
std::vector<RankSource> rank_sources(const std::vector<KinetoTrace>& traces) {
  std::vector<RankSource> sources;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const KinetoTrace& t = traces[i];
    if (!t.stepsim_format) {
      sources.push_back(
          {t.path, t.dist.rank >= 0 ? t.dist.rank : static_cast<int>(i), t.dist.world_size, t.dist.rank >= 0});
      continue;
    }
    for (std::int64_t pid : Builder::devices(t))
      sources.push_back({t.path, static_cast<int>(pid), t.dist.world_size, true});
  }
  return sources;
}

// Moves every time of `t` `by` later, and its origin as much earlier, so that its events keep
// their absolute timestamps.
void shift(KinetoTrace& t, std::int64_t by_us) {
  const Time by = Time::from_ps(by_us * 1000000);
  for (GpuEvent& g : t.gpu) g.start += by, g.end += by;
  for (CpuSpan& s : t.steps) s.start += by, s.end += by;
  for (CpuSpan& s : t.gpu_steps) s.start += by, s.end += by;
  for (CpuSpan& s : t.windows) s.start += by, s.end += by;
  for (Launch& l : t.launches) l.at += by;
  for (CpuEvent& e : t.cpu_ops) e.start += by, e.end += by;
  for (CpuEvent& e : t.kernel_launches) e.start += by, e.end += by;
  for (HtaActivity& a : t.hta.activities) a.start += by, a.end += by;
  t.hta.last_step += by;
  t.hta.origin_us -= by_us;
}

// Each file was read with its own origin (its first timestamp); the job's is the earliest,
// and every file's times move onto it.
void align(std::vector<KinetoTrace>& traces, const std::vector<std::int64_t>& origins) {
  const std::int64_t base = *std::min_element(origins.begin(), origins.end());
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const std::int64_t skew = origins[i] - base;
    if (skew > kMaxRankSkewUs)
      throw InputError(traces[i].path, "",
                       fmt::format("its timestamps start {} us after another rank's: not one job", skew));
    if (skew > 0) shift(traces[i], skew);
  }
}

}  // namespace

LoadedTrace to_timeline(std::vector<KinetoTrace> traces) {
  const bool ranked = std::all_of(traces.begin(), traces.end(), [](const KinetoTrace& t) { return t.dist.rank >= 0; });
  if (ranked)
    std::stable_sort(traces.begin(), traces.end(),
                     [](const KinetoTrace& a, const KinetoTrace& b) { return a.dist.rank < b.dist.rank; });
  LoadedTrace out;
  Builder builder;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const KinetoTrace& t = traces[i];
    out.content_bytes += t.content_bytes;
    out.simulated = out.simulated || t.stepsim_format;
    if (!t.stepsim_format) {
      const int rank = t.dist.rank >= 0 ? t.dist.rank : static_cast<int>(i);
      builder.add_rank(t, rank, std::nullopt);
      out.dist.push_back(t.dist);
      out.files.push_back(t.path);
      out.hta.push_back(measure_hta(t.hta, t.launches));
      out.hta.back().step_host_wait = step_host_wait(t);
      continue;
    }
    // stepsim's own trace: each process is the rank its pid says, of the world size its
    // distributedInfo gives (none in traces written before it did: unknown, 0).
    const std::vector<std::int64_t> pids = Builder::devices(t);
    for (std::int64_t pid : pids) {
      if (t.dist.world_size > 0 && (pid < 0 || pid >= t.dist.world_size))
        throw InputError(
            t.path, "/distributedInfo/world_size",
            fmt::format("is {}, but the trace holds rank {} (its process {})", t.dist.world_size, pid, pid));
      builder.add_rank(t, static_cast<int>(pid), pid);
      out.dist.push_back({static_cast<int>(pid), t.dist.world_size, t.dist.backend, ""});
      out.files.push_back(t.path);
      out.hta.emplace_back();
    }
  }
  check_one_job(rank_sources(traces));
  out.timeline = builder.finish(out.rank_steps);
  return out;
}

std::vector<std::string> trace_files(const std::string& path) {
  if (path == "-") return {"/dev/stdin"};  // read once, as a pipe can be
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) cannot_read(path, errno);
  if (!S_ISDIR(st.st_mode)) return {path};
  return folder_files(path);
}

LoadedTrace load_file(const std::string& file, TimeOrigin& origin) {
  std::vector<KinetoTrace> traces;
  traces.push_back(read_kineto(file, origin));
  require_gpu_activity(traces.back());
  return to_timeline(std::move(traces));
}

std::vector<KinetoTrace> read_traces(const std::string& path) {
  // Each file on its own origin: the timestamps of two jobs' files may lie days apart, and
  // that they are two jobs is what to say (check_one_job), not that the times are far.
  std::vector<KinetoTrace> traces;
  std::vector<std::int64_t> origins;
  for (const std::string& file : trace_files(path)) {
    TimeOrigin origin;
    traces.push_back(read_kineto(file, origin));
    require_gpu_activity(traces.back());
    origins.push_back(origin.us);
  }
  check_one_job(rank_sources(traces));
  align(traces, origins);
  return traces;
}

LoadedTrace load_trace(const std::string& path) { return to_timeline(read_traces(path)); }

}  // namespace stepsim::analysis
