// write_kineto_trace(): one simulated rank's step shaped as a PyTorch profiler (Kineto) trace,
// so that `stepsim analyze`, HolisticTraceAnalysis and other Kineto tools read a simulation as
// they read a measurement: GPU work as "kernel" events on CUDA stream threads with NCCL's
// kernel names, a ProfilerStep#1 annotation on the CPU thread and its GPU side (category
// gpu_user_annotation) over the report's window. The host thread shows what the simulated
// host did: each op it issued as a cpu_op over the host's cost of it (the framework's dispatch,
// then the launch), ending in the cudaLaunchKernel (cudaMemcpyAsync for a copy) that takes the
// kernel launch's share of it and shares the kernel's correlation id; the ops a CUDA graph
// replays under one cudaGraphLaunch at the time the host reached them, whose correlation id all
// their kernels share, as Kineto links a graph's kernels to its launch. A timeline that did not
// record its host issues (RankTimeline::issues) gets a launch of no duration at each kernel's
// start.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <string_view>
#include <vector>

#include "report/json_text.hpp"
#include "report/report_io.hpp"
#include "report/trace_writer.hpp"

namespace stepsim::report {
namespace {

constexpr std::int64_t kCpuTid = 1;
constexpr std::int64_t kFirstStreamTid = 7;  // CUDA's first non-default stream id

// A collective's element type as NCCL's kernel names (src/device/generate.py), PyTorch's
// profiler (the c10 scalar type of record_param_comms' "dtype") and its size give it. stepsim's
// collectives move 16-bit or 32-bit floats; an 8-bit format's tensors are gathered and reduced
// in these.
struct Dtype {
  const char* nccl;
  const char* torch;
  int bytes;
};

Dtype dtype_of(Precision p) {
  switch (p) {
    case Precision::fp16:
      return {"f16", "Half", 2};
    case Precision::fp32:
    case Precision::tf32:
      return {"f32", "Float", 4};
    default:
      return {"bf16", "BFloat16", 2};
  }
}

// The bytes an FP8 run's parameter AllGathers move: each Linear weight at 1 byte, the other
// tensors at 2, in one byte buffer (Megatron-Core's FP8 parameter buffer is uint8; FSDP2 views
// inputs of mixed types as uint8), which PyTorch's profiler names Byte.
constexpr Dtype kByte{"u8", "Byte", 1};

// A gradient reduction (CollectiveDtypes): reduced in data_parallel.grad_reduce_dtype.
bool reduces_gradients(const Interval& iv) {
  const bool reduction = iv.op == CollOp::allreduce || iv.op == CollOp::reducescatter || iv.op == CollOp::reduce;
  return reduction && (iv.kind == CommKind::dp || iv.kind == CommKind::fsdp || iv.kind == CommKind::pp);
}

// A parameter AllGather: the distributed optimizer's or FSDP's.
bool gathers_parameters(const Interval& iv) {
  return iv.op == CollOp::allgather && (iv.kind == CommKind::dp || iv.kind == CommKind::fsdp);
}

// FSDP's root unit (embedding, final norm, LM head; named "root" by parallelism/
// data_parallel_fsdp.cpp) holds no FP8 weight (gathered_bytes: the Linear layers' weights alone),
// so its inputs share one dtype and FSDP2 gathers them in it: foreach_all_gather views a group's
// inputs as uint8 only where their dtypes differ (_get_all_gather_input_metadatas).
bool gathers_fsdp_root(std::string_view name) { return name.starts_with("AllGather fsdp root "); }

// The first rank of a group's list "[3, 7]", or -1.
int first_rank(const std::string& ranks) {
  const std::size_t at = ranks.find_first_of("0123456789");
  if (at == std::string::npos || ranks.find_first_not_of("[ ") != at) return -1;
  return std::atoi(ranks.c_str() + at);
}

// NCCL's device kernel name, as NCCL 2.19+ writes it: ncclDevKernel_AllReduce_Sum_bf16_RING_LL.
// An all-to-all has no kernel of its own: PyTorch's all_to_all_single issues grouped ncclSend and
// ncclRecv calls, which NCCL runs as ncclDevKernel_SendRecv; the profiler's "Collective name"
// (all_to_all) tells it from a pipeline's send.
std::string nccl_kernel_name(CollOp op, const Dtype& dtype) {
  switch (op) {
    case CollOp::allreduce:
    case CollOp::reducescatter:
    case CollOp::reduce:
      return fmt::format("ncclDevKernel_{}_Sum_{}_RING_LL", nccl_name(op), dtype.nccl);
    case CollOp::sendrecv:
    case CollOp::alltoall:
      return "ncclDevKernel_SendRecv";
    default:
      return fmt::format("ncclDevKernel_{}_RING_LL", nccl_name(op));
  }
}

// A simulated copy's direction follows its phase: activation offload copies out during the
// forward and back during the backward; a copy read from a trace keeps no direction.
const char* memcpy_name(const Interval& iv) {
  if (iv.phase == Phase::forward) return "Memcpy DtoH (Device -> Pinned)";
  if (iv.phase == Phase::backward) return "Memcpy HtoD (Pinned -> Device)";
  return "Memcpy DtoD (Device -> Device)";
}

const char* kineto_collective(CollOp op) {
  switch (op) {
    case CollOp::allreduce:
      return "allreduce";
    case CollOp::allgather:
      return "_allgather_base";
    case CollOp::reducescatter:
      return "_reduce_scatter_base";
    case CollOp::broadcast:
      return "broadcast";
    case CollOp::reduce:
      return "reduce";
    case CollOp::alltoall:
      return "all_to_all";
    case CollOp::sendrecv:
      return "send";  // the receiving side: comm_args
    default:
      return "unknown";
  }
}

// `s` as a JSON string.
std::string json_quoted(std::string_view s) {
  fmt::memory_buffer b;
  append_json_string(b, s);
  return fmt::to_string(b);
}

// The layer an op's name places it in ("L12 " of "L12 fc1 fwd"), or "".
std::string_view layer_of(std::string_view name) {
  if (name.size() < 3 || name[0] != 'L') return {};
  const std::size_t digits = name.find_first_not_of("0123456789", 1);
  if (digits == 1 || digits == std::string_view::npos || name[digits] != ' ') return {};
  return name.substr(0, digits + 1);
}

// The ops of `rank` the host issued (not its bubbles), in the order it issued them.
std::vector<std::size_t> issue_order(const RankTimeline& rank) {
  std::vector<std::size_t> issued;
  for (std::size_t i = 0; i < rank.intervals.size(); ++i)
    if (rank.issues[i].op && rank.intervals[i].activity != Activity::bubble) issued.push_back(i);
  std::ranges::sort(issued, {}, [&](std::size_t i) { return rank.issues[i].order; });
  return issued;
}

// Where a kernel starts on its stream: a collective from when its rank reached it, spinning
// until the last member arrives (the report counts the wait as communication); a pipeline
// transfer's wait for its neighbour stays outside it, the bubble the report makes it.
Time kernel_start(const Interval& iv) {
  const bool spins = iv.activity == Activity::comm && iv.kind != CommKind::pp;
  return spins ? iv.start - iv.waited : iv.start;
}

class KinetoWriter {
 public:
  KinetoWriter(const Timeline& t, const RankTimeline& rank, const std::string& gpu, const CollectiveDtypes& dtypes,
               std::ostream& out)
      : t_(t), rank_(rank), gpu_(gpu), dtypes_(dtypes), out_(out) {}

  void write(const StepWindow& window) {
    out_ << fmt::format(
        "{{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {}, "
        "\"world_size\": {}}},\n  \"deviceProperties\": [{{\"id\": 0, \"name\": {}}}],\n"
        "  \"traceName\": \"stepsim simulation\",\n  \"displayTimeUnit\": \"ms\",\n  \"traceEvents\": [\n",
        rank_.rank, world_size(), json_quoted(gpu_));
    metadata();
    const std::int64_t start = ps_to_ns(window.start.ps());
    const std::int64_t end = ps_to_ns(window.end.ps());
    event("user_annotation", "ProfilerStep#1", pid(), kCpuTid, start, end - start, "");
    // The step's GPU side, as PyTorch's profiler writes it on the first stream: the whole
    // step, so that a rank waiting before its first kernel (a later pipeline stage) reads
    // back over the report's window.
    event("gpu_user_annotation", "ProfilerStep#1", 0, kFirstStreamTid, start, end - start, "");
    const std::vector<std::int64_t> correlation = host_side(window);
    for (std::size_t i = 0; i < rank_.intervals.size(); ++i) {
      const Interval& iv = rank_.intervals[i];
      if (iv.activity == Activity::bubble) continue;
      const std::int64_t s = ps_to_ns(kernel_start(iv).ps());
      const std::int64_t e = ps_to_ns(iv.end.ps());
      const std::int64_t tid = kFirstStreamTid + iv.stream;
      const std::string name = iv.activity == Activity::comm     ? nccl_kernel_name(iv.op, dtype(iv))
                               : iv.activity == Activity::memory ? memcpy_name(iv)
                                                                 : std::string(t_.names[iv.name]);
      std::string args = fmt::format("\"device\": 0, \"stream\": {}, \"correlation\": {}, \"External id\": {}", tid,
                                     correlation[i], correlation[i]);
      if (iv.activity == Activity::comm) args += comm_args(iv);
      if (iv.activity == Activity::compute) args += work_args(iv);
      event(iv.activity == Activity::memory ? "gpu_memcpy" : "kernel", name, 0, tid, s, e - s, args);
    }
    out_ << "\n  ]\n}\n";
  }

 private:
  std::int64_t pid() const { return 1000 + rank_.rank; }

  static const char* runtime_call(const Interval& iv) {
    return iv.activity == Activity::memory ? "cudaMemcpyAsync" : "cudaLaunchKernel";
  }

  // The host thread's events, and each interval's correlation id (0 for a bubble).
  std::vector<std::int64_t> host_side(const StepWindow& window) {
    const std::vector<Interval>& intervals = rank_.intervals;
    const std::vector<KernelLaunch> launches = kernel_launches(t_, rank_, window);
    std::vector<std::int64_t> correlation(intervals.size(), 0);
    std::int64_t next = 1;
    const auto ids = [](std::int64_t id) { return fmt::format("\"correlation\": {}, \"External id\": {}", id, id); };
    if (rank_.issues.size() != intervals.size()) {
      for (std::size_t i = 0; i < intervals.size(); ++i) {
        if (!launches[i].at) continue;
        correlation[i] = next++;
        event("cuda_runtime", runtime_call(intervals[i]), pid(), kCpuTid, ps_to_ns(launches[i].at->ps()), 0,
              ids(correlation[i]));
      }
      return correlation;
    }
    std::uint32_t graph = 0;    // the graph replay the last op belonged to; 0: none
    std::int64_t graph_id = 0;  // its launch's correlation id
    for (std::size_t i : issue_order(rank_)) {
      const HostIssue& h = rank_.issues[i];
      const Interval& iv = intervals[i];
      const KernelLaunch& l = launches[i];
      const std::int64_t done = ps_to_ns(h.issued.ps());
      if (l.graph != 0) {
        if (l.graph != graph) {
          graph = l.graph;
          graph_id = next++;
          event("cuda_runtime", "cudaGraphLaunch", pid(), kCpuTid, ps_to_ns(l.at->ps()), 0, ids(graph_id));
        }
        correlation[i] = graph_id;
        continue;
      }
      graph = 0;
      correlation[i] = next++;
      const std::int64_t from = ps_to_ns((h.issued - h.cost).ps());
      const std::int64_t launch = ps_to_ns(l.at->ps());
      event("cpu_op", std::string(t_.names[iv.name]), pid(), kCpuTid, from, done - from,
            fmt::format("\"External id\": {}", correlation[i]));
      event("cuda_runtime", runtime_call(iv), pid(), kCpuTid, launch, done - launch, ids(correlation[i]));
    }
    return correlation;
  }

  int world_size() const {
    int n = 0;
    for (const RankTimeline& r : t_.ranks) n += r.multiplicity;
    return n;
  }

  // The FLOPs and HBM bytes the compute model charged the kernel (PyTorch's profiler gives
  // "flops" to the operator, not the kernel; stepsim knows each kernel's own).
  std::string work_args(const Interval& iv) const {
    const auto it = t_.work.find(iv.name);
    if (it == t_.work.end()) return "";
    return fmt::format(", \"flops\": {}, \"hbm_bytes\": {}", it->second.flops, it->second.bytes.count());
  }

  Dtype dtype(const Interval& iv) const {
    if (dtypes_.byte_parameter_gathers && gathers_parameters(iv) && !gathers_fsdp_root(t_.names[iv.name])) return kByte;
    return dtype_of(reduces_gradients(iv) ? dtypes_.gradients : dtypes_.other);
  }

  const ProcessGroup* group_of(const Interval& iv) const {
    if (iv.group < 0 || static_cast<std::size_t>(iv.group) >= t_.groups.size()) return nullptr;
    return &t_.groups[static_cast<std::size_t>(iv.group)];
  }

  // As PyTorch's ProcessGroupNCCL records them (record_param_comms): a receive is "recv"
  // (a pipeline transfer's group lists its sender first); each side's element count, the
  // shard In and the whole Out for _allgather_base, the reverse for _reduce_scatter_base, the
  // same on both sides for the others.
  std::string comm_args(const Interval& iv) const {
    fmt::memory_buffer b;
    const Dtype d = dtype(iv);
    const ProcessGroup* g = group_of(iv);
    const bool receives = iv.op == CollOp::sendrecv && g != nullptr && g->size == 2 && first_rank(g->ranks) >= 0 &&
                          first_rank(g->ranks) != rank_.rank;
    const std::int64_t whole = iv.bytes.count() / d.bytes;
    const std::int64_t shard = g != nullptr && g->size > 1 ? whole / g->size : whole;
    const std::int64_t in = iv.op == CollOp::allgather ? shard : whole;
    const std::int64_t out = iv.op == CollOp::reducescatter ? shard : whole;
    fmt::format_to(std::back_inserter(b),
                   ", \"Collective name\": \"{}\", \"dtype\": \"{}\", \"In msg nelems\": {}, \"Out msg nelems\": {}",
                   receives ? "recv" : kineto_collective(iv.op), d.torch, in, out);
    if (g != nullptr) {
      fmt::format_to(std::back_inserter(b), ", \"Group size\": {}, \"Process Group Name\": ", g->size);
      append_json_string(b, g->name);
      b.append(std::string_view(", \"Process Group Description\": "));
      append_json_string(b, g->name);
      b.append(std::string_view(", \"Process Group Ranks\": "));
      append_json_string(b, g->ranks);
    }
    return fmt::to_string(b);
  }

  void metadata() {
    thread_meta(pid(), kCpuTid, "python", "thread_name");
    for (std::size_t s = 0; s < rank_.streams.size(); ++s)
      thread_meta(0, kFirstStreamTid + static_cast<std::int64_t>(s),
                  fmt::format("stream {} ({})", kFirstStreamTid + s, rank_.streams[s]), "thread_name");
    thread_meta(0, 0, "GPU 0", "process_name");
    thread_meta(pid(), 0, rank_title(rank_), "process_name");
  }

  void thread_meta(std::int64_t pid, std::int64_t tid, const std::string& name, const char* kind) {
    fmt::memory_buffer b;
    fmt::format_to(std::back_inserter(b),
                   "{}    {{\"ph\": \"M\", \"name\": \"{}\", \"pid\": {}, \"tid\": {}, \"args\": {{\"name\": ",
                   first_ ? "" : ",\n", kind, pid, tid);
    append_json_string(b, name);
    b.append(std::string_view("}}"));
    out_.write(b.data(), static_cast<std::streamsize>(b.size()));
    first_ = false;
  }

  void event(const char* cat, const std::string& name, std::int64_t pid, std::int64_t tid, std::int64_t ts_ns,
             std::int64_t dur_ns, const std::string& args) {
    fmt::memory_buffer b;
    fmt::format_to(std::back_inserter(b), "{}    {{\"ph\": \"X\", \"cat\": \"{}\", \"name\": ", first_ ? "" : ",\n",
                   cat);
    append_json_string(b, name);
    fmt::format_to(std::back_inserter(b), ", \"pid\": {}, \"tid\": {}, \"ts\": ", pid, tid);
    append_us(b, ts_ns);
    b.append(std::string_view(", \"dur\": "));
    append_us(b, dur_ns);
    fmt::format_to(std::back_inserter(b), ", \"args\": {{{}}}}}", args);
    out_.write(b.data(), static_cast<std::streamsize>(b.size()));
    first_ = false;
  }

  const Timeline& t_;
  const RankTimeline& rank_;
  const std::string& gpu_;
  const CollectiveDtypes& dtypes_;
  std::ostream& out_;
  bool first_ = true;
};

}  // namespace

std::vector<KernelLaunch> kernel_launches(const Timeline& timeline, const RankTimeline& rank,
                                          const StepWindow& window) {
  const std::vector<Interval>& intervals = rank.intervals;
  std::vector<KernelLaunch> out(intervals.size());
  if (rank.issues.size() != intervals.size()) {
    for (std::size_t i = 0; i < intervals.size(); ++i)
      if (intervals[i].activity != Activity::bubble)
        out[i].at = max(window.start, min(kernel_start(intervals[i]), window.end));
    return out;
  }
  // One replay of a graph for the ops of one layer replayed one after the other (the
  // frameworks capture a graph per layer).
  std::uint32_t graphs = 0;
  bool replaying = false;
  std::string_view layer;
  std::uint32_t last = 0;
  Time replay_at;
  for (std::size_t i : issue_order(rank)) {
    const HostIssue& h = rank.issues[i];
    if (!h.replayed) {
      replaying = false;
      out[i].at = h.issued - min(timeline.kernel_launch, h.cost);
      continue;
    }
    const std::string_view op_layer = layer_of(timeline.names[intervals[i].name]);
    if (!replaying || h.order != last + 1 || op_layer != layer) {
      replaying = true;
      layer = op_layer;
      replay_at = h.issued;
      ++graphs;
    }
    out[i] = {replay_at, graphs};
    last = h.order;
  }
  return out;
}

CollectiveDtypes collective_dtypes(const Scenario& s) {
  const Precision p = s.training.precision;
  // Per-tensor FP8 gathers its Linear weights at 1 byte (parallelism::gathered_bytes), but for
  // FSDP1's FlatParameter, gathered in BF16 (DataParallelSpec::flat_parameter).
  return {s.data_parallel.grad_reduce_dtype, low_precision(p) ? Precision::bf16 : p,
          p == Precision::fp8 && !s.data_parallel.flat_parameter()};
}

void write_kineto_trace(const Timeline& timeline, int rank_index, const std::string& gpu, std::ostream& out,
                        const CollectiveDtypes& dtypes) {
  const StepWindow window = report_window(timeline);
  const int index = rank_index >= 0 ? rank_index : critical_rank(timeline, window);
  if (index < 0) return;
  KinetoWriter(timeline, timeline.ranks[static_cast<std::size_t>(index)], gpu, dtypes, out).write(window);
}

}  // namespace stepsim::report
