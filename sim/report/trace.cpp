// write_trace(): a Timeline as Chrome Trace Event JSON that Perfetto opens (Trace Event
// Format): a process per rank, a thread per stream, nested slices, memory counters.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "report/json_text.hpp"
#include "report/report_io.hpp"
#include "report/trace_writer.hpp"

namespace stepsim::report {
namespace {

// Thread ids inside a rank's process: steps, then one per stream, then bubble markers,
// then extra lanes for slices that would not nest on their own thread.
constexpr std::int64_t kStepsTid = 0;

// One slice to place, with its endpoints already rounded to what the trace will say.
struct Slice {
  std::uint32_t thread;  // tid before lane splitting
  std::int64_t start_ns;
  std::int64_t end_ns;
  std::uint32_t index;  // into the rank's intervals (or the timeline's steps)
};

bool slice_order(const Slice& a, const Slice& b) {
  if (a.thread != b.thread) return a.thread < b.thread;
  if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
  if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;  // enclosing slice first
  return a.index < b.index;
}

// Stacks of open slices per lane: a slice joins the first lane where it nests.
class Lanes {
 public:
  void reset() { lanes_.clear(); }
  std::size_t place(std::int64_t start, std::int64_t end) {
    for (std::size_t i = 0; i < lanes_.size(); ++i)
      if (fits(lanes_[i], start, end)) return i;
    lanes_.emplace_back(1, end);
    return lanes_.size() - 1;
  }

 private:
  static bool fits(std::vector<std::int64_t>& open, std::int64_t start, std::int64_t end) {
    while (!open.empty() && open.back() <= start) open.pop_back();
    if (!open.empty() && end > open.back()) return false;
    open.push_back(end);
    return true;
  }
  std::vector<std::vector<std::int64_t>> lanes_;
};

class RankTraceWriter {
 public:
  RankTraceWriter(const Timeline& timeline, TraceStream& stream) : timeline_(timeline), stream_(stream) {}
  void write(const RankTimeline& rank, std::size_t sort_index);

 private:
  void write_metadata(const RankTimeline& rank, std::size_t sort_index);
  void thread_name(std::int64_t tid, std::string_view name);
  void collect_slices(const RankTimeline& rank);
  void write_slices(const RankTimeline& rank);
  void write_slice(const RankTimeline& rank, const Slice& s, std::int64_t tid);
  void write_interval(const Interval& iv, std::int64_t tid, std::int64_t start_ns, std::int64_t dur_ns);
  void write_step(const StepWindow& w, std::int64_t tid, std::int64_t start_ns, std::int64_t dur_ns);
  void write_args(fmt::memory_buffer& buf, const Interval& iv);
  void write_counters(const RankTimeline& rank);
  void write_host(const RankTimeline& rank);
  fmt::memory_buffer& open_event(std::string_view ph, std::int64_t tid);
  std::string thread_title(const RankTimeline& rank, std::uint32_t thread) const;

  const Timeline& timeline_;
  TraceStream& stream_;
  std::vector<Slice> slices_;  // reused across ranks
  Lanes lanes_;
  std::int64_t pid_ = 0;
  std::uint32_t threads_ = 0;  // stream threads of the current rank
  std::int64_t next_extra_tid_ = 0;
  std::vector<std::int64_t> lane_tids_;  // of the thread being written
};

fmt::memory_buffer& RankTraceWriter::open_event(std::string_view ph, std::int64_t tid) {
  fmt::memory_buffer& buf = stream_.begin_event();
  fmt::format_to(std::back_inserter(buf), "\"ph\":\"{}\",\"pid\":{},\"tid\":{}", ph, pid_, tid);
  return buf;
}

void RankTraceWriter::thread_name(std::int64_t tid, std::string_view name) {
  fmt::memory_buffer& buf = open_event("M", tid);
  buf.append(std::string_view(",\"name\":\"thread_name\",\"args\":{\"name\":"));
  append_json_string(buf, name);
  buf.push_back('}');
  stream_.end_event();
  fmt::format_to(std::back_inserter(open_event("M", tid)),
                 ",\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{}}}", tid);
  stream_.end_event();
}

std::string RankTraceWriter::thread_title(const RankTimeline& rank, std::uint32_t thread) const {
  if (thread == kStepsTid) return "steps";
  if (thread == threads_ + 1) return "bubble";
  const std::size_t s = thread - 1;
  return s < rank.streams.size() && !rank.streams[s].empty() ? rank.streams[s] : fmt::format("stream {}", s);
}

void RankTraceWriter::write_metadata(const RankTimeline& rank, std::size_t sort_index) {
  std::string title = rank_title(rank);
  if (rank.multiplicity > 1) title += fmt::format(" [stands for {} ranks]", rank.multiplicity);
  fmt::memory_buffer& buf = open_event("M", 0);
  buf.append(std::string_view(",\"name\":\"process_name\",\"args\":{\"name\":"));
  append_json_string(buf, title);
  buf.push_back('}');
  stream_.end_event();
  fmt::format_to(std::back_inserter(open_event("M", 0)),
                 ",\"name\":\"process_sort_index\",\"args\":{{\"sort_index\":{}}}", sort_index);
  stream_.end_event();
}

void RankTraceWriter::collect_slices(const RankTimeline& rank) {
  slices_.clear();
  threads_ = static_cast<std::uint32_t>(rank.streams.size());
  for (const Interval& iv : rank.intervals) threads_ = std::max<std::uint32_t>(threads_, iv.stream + 1u);
  for (std::size_t i = 0; i < timeline_.steps.size(); ++i) {
    const StepWindow& w = timeline_.steps[i];
    slices_.push_back({kStepsTid, ps_to_ns(w.start.ps()), ps_to_ns(w.end.ps()), static_cast<std::uint32_t>(i)});
  }
  for (std::size_t i = 0; i < rank.intervals.size(); ++i) {
    const Interval& iv = rank.intervals[i];
    const std::uint32_t thread = iv.activity == Activity::bubble ? threads_ + 1 : iv.stream + 1u;
    slices_.push_back({thread, ps_to_ns(iv.start.ps()), ps_to_ns(iv.end.ps()), static_cast<std::uint32_t>(i)});
  }
  std::sort(slices_.begin(), slices_.end(), slice_order);
}

void RankTraceWriter::write_slices(const RankTimeline& rank) {
  next_extra_tid_ = threads_ + 2;
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    const std::uint32_t thread = slices_[i].thread;
    if (i == 0 || slices_[i - 1].thread != thread) {
      lanes_.reset();
      lane_tids_.assign(1, thread);
      thread_name(thread, thread_title(rank, thread));
    }
    const std::size_t lane = lanes_.place(slices_[i].start_ns, std::max(slices_[i].start_ns, slices_[i].end_ns));
    if (lane == lane_tids_.size()) {
      lane_tids_.push_back(next_extra_tid_++);
      thread_name(lane_tids_.back(), fmt::format("{} (overlap {})", thread_title(rank, thread), lane));
    }
    write_slice(rank, slices_[i], lane_tids_[lane]);
  }
}

void RankTraceWriter::write_slice(const RankTimeline& rank, const Slice& s, std::int64_t tid) {
  const std::int64_t dur = std::max<std::int64_t>(0, s.end_ns - s.start_ns);
  if (s.thread == kStepsTid) return write_step(timeline_.steps[s.index], tid, s.start_ns, dur);
  write_interval(rank.intervals[s.index], tid, s.start_ns, dur);
}

void RankTraceWriter::write_step(const StepWindow& w, std::int64_t tid, std::int64_t start_ns, std::int64_t dur_ns) {
  fmt::memory_buffer& buf = open_event("X", tid);
  buf.append(std::string_view(",\"ts\":"));
  append_us(buf, start_ns);
  buf.append(std::string_view(",\"dur\":"));
  append_us(buf, dur_ns);
  buf.append(std::string_view(",\"cat\":\"step\",\"name\":"));
  append_json_string(buf, w.name.empty() ? std::string_view("step") : std::string_view(w.name));
  stream_.end_event();
}

// Communication kernels start with "nccl" so that trace tools (HTA) classify them as such.
void append_interval_name(fmt::memory_buffer& buf, const Timeline& timeline, const Interval& iv) {
  const std::string_view stored = iv.name < timeline.names.size() ? std::string_view(timeline.names[iv.name]) : "";
  if (iv.activity != Activity::comm || stored.starts_with("nccl")) {
    append_json_string(buf, stored.empty() ? std::string_view(to_string(iv.activity)) : stored);
    return;
  }
  const std::string what = stored.empty() ? std::string(nccl_name(iv.op)) : std::string(stored);
  append_json_string(buf, "ncclDevKernel_" + what);
}

void RankTraceWriter::write_args(fmt::memory_buffer& buf, const Interval& iv) {
  buf.append(std::string_view(",\"args\":{"));
  switch (iv.activity) {
    case Activity::compute:
      fmt::format_to(std::back_inserter(buf), "\"phase\":\"{}\"", to_string(iv.phase));
      if (const auto it = timeline_.work.find(iv.name); it != timeline_.work.end())
        fmt::format_to(std::back_inserter(buf), ",\"flops\":{},\"hbm_bytes\":{}", it->second.flops,
                       it->second.bytes.count());
      break;
    case Activity::comm:
      fmt::format_to(std::back_inserter(buf), "\"kind\":\"{}\",\"op\":\"{}\",\"bytes\":{},\"phase\":\"{}\"",
                     to_string(iv.kind), to_string(iv.op), iv.bytes.count(), to_string(iv.phase));
      if (iv.group >= 0 && static_cast<std::size_t>(iv.group) < timeline_.groups.size()) {
        const ProcessGroup& g = timeline_.groups[static_cast<std::size_t>(iv.group)];
        buf.append(std::string_view(",\"group\":"));
        append_json_string(buf, g.name);
        fmt::format_to(std::back_inserter(buf), ",\"group_size\":{}", g.size);
        // Groups share names (every TP group is "tp"; a middle stage's "pp fwd" to the next
        // stage and from the one before): their ranks tell them apart when the trace is read.
        if (!g.ranks.empty()) {
          buf.append(std::string_view(",\"group_ranks\":"));
          append_json_string(buf, g.ranks);
        }
      }
      if (iv.waited > Time::zero()) {
        // In whole nanoseconds of the slice's rounded start, so that ts - wait_us is the arrival.
        buf.append(std::string_view(",\"wait_us\":"));
        append_us(buf, ps_to_ns(iv.start.ps()) - ps_to_ns((iv.start - iv.waited).ps()));
      }
      break;
    case Activity::memory:
      fmt::format_to(std::back_inserter(buf), "\"bytes\":{}", iv.bytes.count());
      break;
    case Activity::bubble:
      break;
  }
  buf.push_back('}');
}

void RankTraceWriter::write_interval(const Interval& iv, std::int64_t tid, std::int64_t start_ns, std::int64_t dur_ns) {
  fmt::memory_buffer& buf = open_event("X", tid);
  buf.append(std::string_view(",\"ts\":"));
  append_us(buf, start_ns);
  buf.append(std::string_view(",\"dur\":"));
  append_us(buf, dur_ns);
  fmt::format_to(std::back_inserter(buf), ",\"cat\":\"{}\",\"name\":", to_string(iv.activity));
  append_interval_name(buf, timeline_, iv);
  write_args(buf, iv);
  stream_.end_event();
}

void RankTraceWriter::write_counters(const RankTimeline& rank) {
  for (const CounterSample& c : rank.memory) {
    fmt::memory_buffer& buf = open_event("C", 0);
    buf.append(std::string_view(",\"ts\":"));
    append_us(buf, ps_to_ns(c.at.ps()));
    fmt::format_to(std::back_inserter(buf), ",\"name\":\"memory\",\"args\":{{\"allocated\":{}}}", c.value.count());
    stream_.end_event();
  }
}

// The CPU lane: the host's runs of launches, on a thread after every stream's lanes. Between
// two runs the CPU waits for the GPU (a synchronising call, FSDP's rate limiter).
void RankTraceWriter::write_host(const RankTimeline& rank) {
  if (rank.host.empty()) return;
  const std::int64_t tid = next_extra_tid_;
  thread_name(tid, "cpu (kernel issue)");
  for (const HostRun& run : rank.host) {
    const std::int64_t start_ns = ps_to_ns(run.start.ps());
    fmt::memory_buffer& buf = open_event("X", tid);
    buf.append(std::string_view(",\"ts\":"));
    append_us(buf, start_ns);
    buf.append(std::string_view(",\"dur\":"));
    append_us(buf, std::max<std::int64_t>(0, ps_to_ns(run.end.ps()) - start_ns));
    fmt::format_to(std::back_inserter(buf), ",\"cat\":\"cpu_op\",\"name\":\"issue {} ops\"", run.ops);
    stream_.end_event();
  }
}

void RankTraceWriter::write(const RankTimeline& rank, std::size_t sort_index) {
  pid_ = rank.rank;
  write_metadata(rank, sort_index);
  collect_slices(rank);
  write_slices(rank);
  write_host(rank);
  write_counters(rank);
}

}  // namespace

void write_trace(const Timeline& timeline, std::ostream& out, int world_size, const std::string& gpu) {
  write_trace(
      timeline, [](int) { return true; }, out, world_size, gpu);
}

void write_trace(const Timeline& timeline, const std::function<bool(int)>& keep, std::ostream& out, int world_size,
                 const std::string& gpu) {
  TraceStream stream(out);
  RankTraceWriter writer(timeline, stream);
  std::vector<int> written;
  for (std::size_t i = 0; i < timeline.ranks.size(); ++i) {
    if (!keep(timeline.ranks[i].rank)) continue;
    writer.write(timeline.ranks[i], i);
    written.push_back(timeline.ranks[i].rank);
  }
  fmt::memory_buffer members;
  if (world_size > 0) {
    // Each process is a rank (its pid); "rank" names the trace's one rank, as a profiler's does.
    const std::string rank = written.size() == 1 ? fmt::format(",\"rank\":{}", written.front()) : "";
    fmt::format_to(std::back_inserter(members), ",\n\"distributedInfo\":{{\"backend\":\"nccl\"{},\"world_size\":{}}}",
                   rank, world_size);
  }
  // Every simulated rank runs on the scenario's GPU: one device, named as the Kineto trace
  // names it.
  if (!gpu.empty()) {
    members.append(std::string_view(",\n\"deviceProperties\":[{\"id\":0,\"name\":"));
    append_json_string(members, gpu);
    members.append(std::string_view("}]"));
  }
  stream.finish(std::string_view(members.data(), members.size()));
}

}  // namespace stepsim::report
