// What stepsim keeps from one Kineto (PyTorch profiler) trace file: GPU activities, the
// CPU step annotations and kernel launches (to tie kernels to steps), and distributedInfo.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "stepsim/timeline.hpp"
#include "stepsim/units.hpp"

namespace stepsim::analysis {

enum class GpuCategory : std::uint8_t { kernel, memcpy, memset };

// The most elements one collective's message may have: no real message comes near 2^58, and
// below it elements × bytes per element (at most 8) cannot overflow.
inline constexpr std::int64_t kMaxMessageElements = std::int64_t{1} << 58;

// The NCCL arguments of a communication kernel; strings are indexes into KinetoTrace::strings
// (0 = absent).
struct NcclArgs {
  std::uint32_t collective = 0;   // "Collective name": "allreduce", "broadcast", ...
  std::uint32_t dtype = 0;        // "Float", "BFloat16", ...
  std::uint32_t group_name = 0;   // "Process Group Name"
  std::uint32_t group_desc = 0;   // "Process Group Description"
  std::uint32_t group_ranks = 0;  // "Process Group Ranks": "[0, 1]"
  std::int64_t in_nelems = -1;
  std::int64_t out_nelems = -1;
  int group_size = 0;
};

struct GpuEvent {
  Time start;
  Time end;
  std::uint32_t name = 0;  // index into KinetoTrace::strings
  GpuCategory category = GpuCategory::kernel;
  std::int64_t device = 0;  // pid
  std::int64_t stream = 0;  // args.stream, else tid
  std::int64_t correlation = -1;
  std::int64_t bytes = 0;  // memcpy/memset: args.bytes
  NcclArgs nccl;
  // Traces written by stepsim (`--trace`) say what each slice is: category compute, comm,
  // memory or bubble, with args kind, op, phase, bytes, group, group_size and group_ranks.
  bool tagged = false;
  Activity activity = Activity::compute;
  Phase phase = Phase::other;
  CommKind kind = CommKind::other;
  CollOp op = CollOp::other;
  Time wait;  // comm: time at the rendezvous before `start` (args wait_us)
};

// A CPU-side span: a ProfilerStep#N annotation (category user_annotation, or an operator's:
// cpu_op, old Kineto's Operator).
struct CpuSpan {
  std::uint32_t name = 0;
  Time start;
  Time end;
};

// A kernel launch on the CPU, matched to GPU events by correlation id: any event with "cat",
// "dur" and args.correlation that is not a GPU row (HTA's rule), or a cuda_runtime event.
struct Launch {
  std::int64_t correlation = 0;
  Time at;
  bool hta_row = true;  // with a dur, so a row of HTA's table (its idle time breakdown reads those)
};

// A CPU event on one thread: an operator (cat cpu_op, old Kineto's Operator; a ProfilerStep#N
// is a step, not an operator) or a kernel launch's runtime call.
struct CpuEvent {
  std::int64_t tid = -1;
  Time start;
  Time end;
};

struct DistributedInfo {
  int rank = -1;  // -1: not in the trace
  int world_size = 0;
  std::string backend;
  std::string nccl_version;
};

// HolisticTraceAnalysis' kernel types (hta/utils/utils.py, get_kernel_type).
enum class HtaKernelType : std::uint8_t { communication, memory, computation, other };

// An event as HolisticTraceAnalysis keeps it (any category, with "cat" and "dur") whose
// args.stream is not -1, with its exact times (hta_metrics.cpp rounds them as HTA does).
struct HtaActivity {
  Time start, end;
  std::int64_t correlation = -1;
  std::int64_t stream = -1;  // args.stream
  HtaKernelType type = HtaKernelType::other;
  bool gpu_row = false;  // HTA's GPU kernel: stream >= 0 and correlation >= 0
  // Of category kernel, gpu_memcpy or gpu_memset (old Kineto: Kernel, Memcpy, Memset): the
  // activities HTA's idle time breakdown takes.
  bool kernel_category = false;
};

// What HTA's comm-comp overlap and breakdowns need of one trace (see hta_metrics.hpp).
struct HtaView {
  std::vector<HtaActivity> activities;    // (the launches are KinetoTrace::launches)
  std::vector<std::uint32_t> step_names;  // distinct names "ProfilerStep#N" (KinetoTrace::strings)
  std::uint64_t cpu_rows = 0;             // events with cat and dur that are not GPU rows
  bool cpu_step = false;                  // some CPU row is a ProfilerStep#N
  Time last_step;                         // the latest start of a CPU ProfilerStep#N row
  bool fractional_ts = false;             // a ts written as a fraction, or an event without ts
  std::int64_t origin_us = 0;             // what the times are relative to (TimeOrigin)
};

struct KinetoTrace {
  std::string path;
  DistributedInfo dist;
  std::string gpu_name;   // deviceProperties' first "name" (CUDA's), "" when absent
  NameTable strings{""};  // index 0: absent
  std::vector<GpuEvent> gpu;
  std::vector<CpuSpan> steps;
  // ProfilerStep#N's GPU-side annotations (category gpu_user_annotation): where the step
  // begins and ends on the GPU, which may be before its first kernel or after its last.
  std::vector<CpuSpan> gpu_steps;
  std::vector<Launch> launches;           // in file order
  std::vector<CpuEvent> cpu_ops;          // the CPU operators (cat cpu_op or Operator), in file order
  // CPU operators left out of cpu_ops: not a complete event with ts and dur, or their times out
  // of range (a negative dur, a ts or dur beyond what the reader takes).
  std::size_t cpu_ops_left_out = 0;
  std::vector<CpuEvent> kernel_launches;  // the cudaLaunchKernel calls with their durations
  std::vector<CpuSpan> windows;           // stepsim traces: the step windows (category "step")
  bool stepsim_format = false;            // written by stepsim: one rank per pid
  std::uint64_t content_bytes = 0;        // decompressed JSON size
  HtaView hta;
  // stepsim traces: by kernel name, the work its args give (flops, hbm_bytes).
  std::map<std::uint32_t, KernelWork> work;

  std::uint32_t intern(std::string_view s) { return strings.intern(s); }
};

// Timestamps are microseconds since some epoch; Time holds ±106 days of picoseconds, so
// every timestamp is taken relative to an origin (whole microseconds). The first file read
// sets it; later files of the same job reuse it so that ranks stay aligned.
struct TimeOrigin {
  bool set = false;
  std::int64_t us = 0;
};

// Streams `path` (plain or gzip JSON). Throws InputError naming the file and the line/byte
// or JSON pointer on truncated, non-JSON or wrongly shaped input.
KinetoTrace read_kineto(const std::string& path, TimeOrigin& origin);

}  // namespace stepsim::analysis
