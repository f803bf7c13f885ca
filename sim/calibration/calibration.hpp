// A calibration file in memory: where the measurements come from, measured compute tables
// (GEMM, attention, memory bandwidth, launch overhead, slowdown under communication) and
// measured collective tables (op and communicator shape, size → time, with an α–β fit).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "stepsim/scenario.hpp"
#include "stepsim/timeline.hpp"
#include "stepsim/units.hpp"

namespace stepsim::calibration {

// Whether `name` is one of nccl-tests' data type names ("float", "bfloat16", ...), the only
// dtypes a collective table has.
bool is_nccl_type(const std::string& name);
// The bytes of one element of nccl-tests' type `name` (its wordSize: "bfloat16" 2, "float" 4);
// 0 for a name that is none of its types.
int nccl_type_bytes(const std::string& name);

// The format version this stepsim reads and writes ("stepsim_calibration": 1).
inline constexpr int kFormatVersion = 1;

struct Provenance {
  std::string gpu;  // the device name CUDA reports, e.g. "NVIDIA A100-SXM4-80GB"
  int gpu_count = 0;
  std::string driver, cuda, nccl, host, date, command;
  std::vector<std::string> sources;  // measured files it was made from (logs, traces)
};

struct GemmPoint {
  long long m = 0, n = 0, k = 0;
  Precision dtype = Precision::bf16;
  double time_us = 0;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

// A fused (flash) attention kernel. FLOPs are counted as a causal kernel executes them:
// forward 2·b·h·s²·d, backward 2.5 times that (it recomputes QKᵀ).
struct AttentionPoint {
  bool backward = false;
  long long batch = 0, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
  Precision dtype = Precision::bf16;
  double time_us = 0;
  double flops() const;
};

// Achieved bandwidth of a memory-bound kernel (element-wise or copy) moving `bytes` (read +
// written) in total.
struct BandwidthPoint {
  double bytes = 0;
  double gbytes_per_s = 0;
};

// GPU efficiencies fitted to a trace: each replaces the preset's value when present.
struct FittedEfficiency {
  std::optional<double> gemm_max, fp8_gemm_max, gemm_half_flops, gemm_half_k, attention_max, hbm, comm_slowdown;
};

// Each fitted efficiency with its key, its place in the GPU preset and the values a
// calibration file may hold (from `lo` to `hi`, in `unit`): a fraction of a peak above 1 is
// faster than the GPU can run.
struct EfficiencyField {
  const char* key;
  std::optional<double> FittedEfficiency::*fitted;
  double GpuEfficiency::*preset;
  double lo, hi;
  const char* unit;
};
inline constexpr EfficiencyField kEfficiencyFields[] = {
    {"gemm_max", &FittedEfficiency::gemm_max, &GpuEfficiency::gemm_max, 0.01, 1.0, "a fraction"},
    {"fp8_gemm_max", &FittedEfficiency::fp8_gemm_max, &GpuEfficiency::fp8_gemm_max, 0.01, 1.0, "a fraction"},
    {"gemm_half_flops", &FittedEfficiency::gemm_half_flops, &GpuEfficiency::gemm_half_flops, 0, 1e15, "FLOPs"},
    {"gemm_half_k", &FittedEfficiency::gemm_half_k, &GpuEfficiency::gemm_half_k, 0, 1e6, "elements of K"},
    {"attention_max", &FittedEfficiency::attention_max, &GpuEfficiency::attention_max, 0.01, 1.0, "a fraction"},
    {"hbm", &FittedEfficiency::hbm, &GpuEfficiency::hbm, 0.01, 1.0, "a fraction"},
    {"comm_slowdown", &FittedEfficiency::comm_slowdown, &GpuEfficiency::comm_slowdown, 0.0, 10.0, "a fraction"}};

// The values a calibration file may hold for a number of `unit` (from `lo` to `hi`): the
// reader refuses a value out of its range, and every writer leaves such a value out
// (leave_out_unreadable), so that what `stepsim calibrate` writes `simulate` reads.
struct ValueRange {
  double lo, hi;
  const char* unit;
  bool holds(double x) const { return x >= lo && x <= hi; }
};
inline constexpr ValueRange kKernelTimeUs{1e-3, 86400e6, "microseconds"};  // a day: beyond it a row is not one kernel
inline constexpr ValueRange kHostCostUs{0, 1e4, "microseconds"};           // launch_overhead_us, dispatch_us
inline constexpr ValueRange kSlowdown{0, 10, "a fraction"};                // compute.comm_slowdown
inline constexpr ValueRange kMemoryBytes{1, 1e13, "bytes"};
inline constexpr ValueRange kMemoryGbps{1e-3, 1e5, "GB/s"};
inline constexpr ValueRange kCollectiveBytes{1, 1LL << 40, "bytes"};

struct ComputeTables {
  std::vector<GemmPoint> gemm;
  std::vector<AttentionPoint> attention;
  std::vector<BandwidthPoint> memory;
  std::optional<double> launch_overhead_us;  // the host's cost of one kernel launch (cluster.gpu.kernel_launch)
  // The host's cost per operator beyond its kernel launch: the framework's dispatch
  // (training.framework), as a trace's CPU operators around their launches show it.
  std::optional<double> dispatch_us;
  std::optional<double> comm_slowdown;  // fraction by which a GEMM slows beside a collective
  FittedEfficiency efficiency;
};

struct CollectivePoint {
  double bytes = 0;  // nccl-tests S
  double time_us = 0;
};

// T(S) = alpha + S / algbw, fitted to the points by least relative squares.
struct AlphaBeta {
  double alpha_us = 0;
  double algbw_gbps = 0;     // algorithm bandwidth
  double busbw_gbps = 0;     // nccl-tests bus bandwidth: algbw × bus factor
  double max_error = 0;      // largest |fit − measured| / measured over the points
  bool alpha_fitted = true;  // false with a single point: alpha is then not known
};

struct CollectiveTable {
  CollOp op = CollOp::allreduce;
  int ranks = 0, nodes = 1, ranks_per_node = 0;
  std::string dtype = "float";
  std::string algorithm, protocol;      // forced when measured ("ring", "simple"); empty: NCCL's own choice
  std::vector<CollectivePoint> points;  // sorted by size, sizes distinct
  AlphaBeta fit;
};

struct Calibration {
  std::string source;  // file name, for errors and the report
  Provenance provenance;
  ComputeTables compute;
  std::vector<CollectiveTable> collectives;
};

// The whole of a measured file, at most 256 MiB (a device or a pipe that never ends is an
// InputError naming `path`, not a hang); `what` names the kind of file in errors. "-" is
// standard input, named <stdin> in errors.
std::string read_measured_file(const std::string& path, const char* what);
// How errors and provenance name a measured file's `path`: "<stdin>" for "-".
std::string measured_file_name(const std::string& path);

// Reads and checks a calibration file: unknown keys, wrong types, units, non-positive or
// absurd numbers are InputErrors naming the file, the JSON pointer and what was expected.
Calibration read_calibration(const std::string& path);
Calibration parse_calibration(const std::string& text, const std::string& source);

// The canonical JSON text of a calibration (what `stepsim calibrate` writes).
std::string calibration_json(const Calibration& c);

// True when a calibration measured on `measured_gpu` (CUDA's device name) may stand for the
// preset GPU `preset` ("a100-sxm4-80gb", "a100-80g", "h200"): the same family (a100, gh200,
// …), and the same form factor (SXM, PCIe, NVL) and memory (80 GB) where both names say
// them. An empty name is not known to differ.
bool gpu_matches(const std::string& measured_gpu, const std::string& preset);

// gpu_matches, and a PCIe or NVL board (CUDA names them so: "NVIDIA H200 NVL", "NVIDIA H100
// PCIe") stands only for a preset whose name says that form: a preset's name that says none is
// the SXM board (or superchip) every shipped one is, "h200" the H200 SXM. Two CUDA names of one
// run compare by gpu_matches alone.
bool gpu_stands_for(const std::string& measured_gpu, const std::string& preset);

// Leaves out of `c` every value the reader would refuse (out of its ValueRange, or of its
// EfficiencyField's bounds): a scalar is reset, a table's point dropped (a collective table
// refitted to the points left, and dropped when none is left). Returns one note per value left
// out, naming its key, the value and the range it must be in.
std::vector<std::string> leave_out_unreadable(Calibration& c);

// Throws an InputError naming the calibration file when it was measured on another GPU.
void check_gpu(const Calibration& c, const std::string& preset);

}  // namespace stepsim::calibration
