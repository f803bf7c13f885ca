// The parts of stepsim-calibrate that need no GPU: what to measure (GEMM shapes of
// transformer layers, message sizes, communicator sizes), robust statistics over repeated
// timings, and the calibration file the measurements become.
#pragma once

#include <string>
#include <vector>

#include "calibration/calibration.hpp"

namespace stepsim::calibrate_tool {

struct GemmShape {
  long long m = 0, n = 0, k = 0;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
  auto operator<=>(const GemmShape&) const = default;
};

// The GEMMs of Megatron transformer layers (QKV, projection, MLP up and down, forward and
// both backward GEMMs) for a few model widths, token counts and tensor-parallel degrees,
// without repeats, smallest first, at most `limit` of them (spread over the FLOPs range).
std::vector<GemmShape> gemm_plan(std::size_t limit);

// One GEMM to measure exactly, as `--gemm MxNxK[:bf16|fp8]` names it (bf16 unless said).
struct GemmRequest {
  GemmShape shape;
  Precision dtype = Precision::bf16;
};
// Throws std::invalid_argument naming --gemm and the text when it is not such a shape.
GemmRequest parse_gemm(const std::string& text);

// `bytes` random bytes for GEMM inputs (zeroed inputs hold higher clocks than data does):
// each a finite FP8 E4M3 value, each pair a finite BF16 one of magnitude 2^-15 to 2 (high bytes
// 0x38-0x3f with a random sign), so one buffer serves both precisions. Same `seed`, same bytes.
std::vector<unsigned char> random_inputs(std::size_t bytes, unsigned seed);

// Sizes from `min_bytes` to `max_bytes` (inclusive) multiplying by `factor`, as nccl-tests -f.
std::vector<double> size_plan(double min_bytes, double max_bytes, double factor);

// Communicator sizes to measure on `gpus` local GPUs: 2, 4, 8, ... and `gpus` itself.
std::vector<int> group_sizes(int gpus);

// One timed run of `foreground` beside `background`, as the slowdown of a GEMM beside
// communication is measured: the background is started first, so that the host's time to
// start it (a thread per GPU, an NCCL enqueue each) lies outside the window `start` and `stop`
// mark, which holds the foreground alone, slowed by what runs beside it.
template <class Start, class Stop, class Background, class Foreground>
void run_beside(Start start, Stop stop, Background background, Foreground foreground) {
  background();
  start();
  foreground();
  stop();
}

struct Summary {
  double median = 0, min = 0, max = 0;
  int samples = 0;
};

// Median, min and max of repeated timings. No sample, a sample that is not a positive
// finite number, or a zero median is an error (std::runtime_error naming `what`): a
// measurement that timed nothing must not become a table entry.
Summary summarize(std::vector<double> samples, const std::string& what);

// How the timed collectives run: what NCCL_ALGO and NCCL_PROTO in the measuring process's
// environment force, in stepsim's names ("ring", "simple"); "" where NCCL chooses.
struct RunSettings {
  std::string algorithm, protocol;
};
// From the two variables' values (null or "" where unset). A value that forces no one
// algorithm or protocol (a list, an exclusion such as "^NVLS", an unknown name) throws
// std::invalid_argument naming the variable: a table stands for one forced setting or NCCL's
// own choice, and a table of either would stand for collectives that did not run so.
RunSettings nccl_forced(const char* nccl_algo, const char* nccl_proto);

// Builds the calibration file out of measurements as they arrive.
class Recorder {
 public:
  // `forced`: how the collectives it records ran (their tables say so, as import-nccl-tests
  // labels a log whose NCCL said "NCCL_ALGO set by environment to Ring").
  explicit Recorder(calibration::Provenance provenance, RunSettings forced = {});
  void gemm(const GemmShape& s, Precision dtype, const Summary& us);
  void attention(const calibration::AttentionPoint& shape, const Summary& us);
  void copy(double bytes_moved, const Summary& us);
  void launch_overhead(const Summary& us);
  void collective(CollOp op, int ranks, double bytes, const Summary& us);
  // Slowdown of a GEMM beside communication: alone and beside, in µs.
  void slowdown(const Summary& alone, const Summary& beside);

  // The file's text: the collective points sorted and fitted (alpha–beta), and every value
  // `stepsim simulate` would refuse left out (calibration::leave_out_unreadable), with the notes
  // that say so in `left_out` where given.
  std::string json(std::vector<std::string>* left_out = nullptr) const;
  const calibration::Calibration& calibration() const { return c_; }

 private:
  calibration::Calibration c_;
  RunSettings forced_;
};

}  // namespace stepsim::calibrate_tool
