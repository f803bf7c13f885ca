// HolisticTraceAnalysis' idle time breakdown on traces built by hand, where each gap's class
// is known by construction.
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "analysis/analysis_output.hpp"
#include "analysis/hta_metrics.hpp"
#include "analysis/trace_timeline.hpp"

using namespace stepsim;

namespace {

namespace fs = std::filesystem;

// `text` written to a file of its own, removed when this goes.
class TraceFile {
 public:
  TraceFile(const std::string& name, const std::string& text)
      : path_(fs::temp_directory_path() / ("stepsim-idle-" + std::to_string(::getpid()) + "-" + name)) {
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TraceFile() { fs::remove(path_); }
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

Time us(std::int64_t n) { return Time::from_ps(n * 1000000); }

// Two ProfilerSteps, so HTA's window is the first (its CPU events start before 1000 us), whole
// microseconds (nothing rounded). Stream 7 runs, in us:
//   gemm_a [20, 120]     launched at 10: the stream's first kernel, no gap before it
//   gemm_b [130, 230]    launched at 30, before gemm_a ended: gap 10 < 30   -> kernel wait 10
//   gemm_c [310, 400]    launched at 300, after gemm_b ended at 230: gap 80 -> host wait 80
//   gemm_d [500, 600]    launched at 320, before gemm_c ended: gap 100 >= 30 -> other 100
//   graph_node_1 [610, 650] and graph_node_2 [655, 700], both of one cudaGraphLaunch at 350:
//                        gaps 10 and 5, the launch long before               -> kernel wait 15
//   unlaunched [760, 800] without a correlation id, so without a launch: gap 60 -> other 60
//   a memcpy [850, 870]  its cudaMemcpyAsync at 805, after 800: gap 50     -> host wait 50
//   next_step [1020, 1100] launched at 1010, in the last ProfilerStep: outside the window
// Stream 20 (NCCL):
//   AllReduce [150, 450] launched at 100: the first
//   AllReduce [480, 520] launched at 200, before 450: gap 30, not under 30   -> other 30
//   AllReduce [625, 700] launched at 600, after 520: gap 105                 -> host wait 105
// Stream 7: host wait 130, kernel wait 25, other 160, idle 315 us; stream 20: host wait 105,
// other 30, idle 135 us; summed: host wait 235, kernel wait 25, other 190, idle 450 us.
// HolisticTraceAnalysis itself (f4d0062c, get_idle_time_breakdown) prints the same for this
// trace: stream 7 host_wait 130.0, kernel_wait 25.0, other 160.0; stream 20 host_wait 105.0,
// other 30.0.
constexpr const char* kHandTrace = R"trace({"schemaVersion": 1,
  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}, "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 1000, "dur": 1000},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 30, "dur": 5, "args": {"correlation": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 100, "dur": 5, "args": {"correlation": 10}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 200, "dur": 5, "args": {"correlation": 11}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 300, "dur": 5, "args": {"correlation": 3}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 320, "dur": 5, "args": {"correlation": 4}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 350, "dur": 5, "args": {"correlation": 5}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 600, "dur": 5, "args": {"correlation": 12}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 805, "dur": 5, "args": {"correlation": 8}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1010, "dur": 5, "args": {"correlation": 9}},
  {"ph": "X", "cat": "kernel", "name": "gemm_a", "pid": 0, "tid": 7, "ts": 20, "dur": 100, "args": {"stream": 7, "correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "gemm_b", "pid": 0, "tid": 7, "ts": 130, "dur": 100, "args": {"stream": 7, "correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "gemm_c", "pid": 0, "tid": 7, "ts": 310, "dur": 90, "args": {"stream": 7, "correlation": 3}},
  {"ph": "X", "cat": "kernel", "name": "gemm_d", "pid": 0, "tid": 7, "ts": 500, "dur": 100, "args": {"stream": 7, "correlation": 4}},
  {"ph": "X", "cat": "kernel", "name": "graph_node_1", "pid": 0, "tid": 7, "ts": 610, "dur": 40, "args": {"stream": 7, "correlation": 5}},
  {"ph": "X", "cat": "kernel", "name": "graph_node_2", "pid": 0, "tid": 7, "ts": 655, "dur": 45, "args": {"stream": 7, "correlation": 5}},
  {"ph": "X", "cat": "kernel", "name": "unlaunched", "pid": 0, "tid": 7, "ts": 760, "dur": 40, "args": {"stream": 7}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": 850, "dur": 20, "args": {"stream": 7, "correlation": 8}},
  {"ph": "X", "cat": "kernel", "name": "next_step", "pid": 0, "tid": 7, "ts": 1020, "dur": 80, "args": {"stream": 7, "correlation": 9}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 20, "ts": 150, "dur": 300, "args": {"stream": 20, "correlation": 10}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 20, "ts": 480, "dur": 40, "args": {"stream": 20, "correlation": 11}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 20, "ts": 625, "dur": 75, "args": {"stream": 20, "correlation": 12}}
]})trace";

}  // namespace

TEST_CASE("HTA's idle breakdown classes each gap on a stream as host wait, kernel wait or other") {
  const TraceFile file("hand.json", kHandTrace);
  const analysis::HtaMetrics h = analysis::load_trace(file.path()).hta.at(0);
  CHECK(h.last_step_excluded);
  CHECK(h.steps == 1);
  const analysis::HtaIdleBreakdown& b = h.idle_breakdown;
  CHECK_FALSE(b.rounded);
  CHECK_FALSE(h.idle_breakdown_exact.has_value());
  REQUIRE(b.streams.size() == 2);
  const analysis::HtaStreamIdle& s7 = b.streams[0];
  CHECK(s7.stream == 7);
  CHECK(s7.kernels == 8);   // next_step is outside the window
  CHECK(s7.launched == 7);  // all but the kernel without a correlation id
  CHECK(s7.host_wait == us(130));
  CHECK(s7.kernel_wait == us(25));
  CHECK(s7.other == us(160));
  const analysis::HtaStreamIdle& s20 = b.streams[1];
  CHECK(s20.stream == 20);
  CHECK(s20.kernels == 3);
  CHECK(s20.host_wait == us(105));
  CHECK(s20.kernel_wait == Time::zero());
  CHECK(s20.other == us(30));
  CHECK(b.total.host_wait == us(235));
  CHECK(b.total.kernel_wait == us(25));
  CHECK(b.total.other == us(190));
  CHECK(b.total.idle() == us(450));
}

TEST_CASE("analyze prints the idle breakdown per stream in ms per step with shares, and writes it in the JSON") {
  const TraceFile file("hand-out.json", kHandTrace);
  const analysis::Analysis a = analysis::analyze_trace(file.path(), std::nullopt, std::nullopt);
  std::ostringstream table;
  analysis::write_analysis_table(a, table);
  const std::string text = table.str();
  INFO(text);
  CHECK(text.find("idle time breakdown, ms per step over 1 step") != std::string::npos);
  // Stream 7: 0.315 ms idle, of which 0.130 host wait (41.3 %), 0.025 kernel wait (7.9 %),
  // 0.160 other (50.8 %).
  CHECK(text.find("    7              0.315      0.130  41.3%      0.025   7.9%      0.160  50.8%") !=
        std::string::npos);
  CHECK(text.find("    all (sum)      0.450      0.235  52.2%") != std::string::npos);
  CHECK(text.find("1 of 11 kernels without a launch in the trace (never host wait)") != std::string::npos);
  std::ostringstream json_text;
  analysis::write_analysis_json(a, json_text);
  const boost::json::value v = boost::json::parse(json_text.str());
  const boost::json::object& idle = v.at("hta").at("idle_time_breakdown").as_object();
  CHECK(idle.at("available").as_bool());
  CHECK(idle.at("steps").to_number<double>() == 1);
  CHECK(idle.at("consecutive_kernel_delay_us").to_number<double>() == Approx(30));
  CHECK(idle.at("exact_timestamps").is_null());
  const boost::json::object& s7 = idle.at("streams").at(0).as_object();
  CHECK(s7.at("stream").to_number<double>() == 7);
  CHECK(s7.at("host_wait_s").to_number<double>() == Approx(130e-6));
  CHECK(s7.at("host_wait_us").to_number<double>() == Approx(130));
  CHECK(s7.at("other_ratio").to_number<double>() == Approx(160.0 / 315.0));
  const boost::json::object& all = idle.at("all_streams").as_object();
  CHECK_FALSE(all.contains("stream"));
  CHECK(all.at("idle_s").to_number<double>() == Approx(450e-6));
  CHECK(all.at("kernel_wait_us").to_number<double>() == Approx(25));
}

// One step, fractional timestamps: k1 [10.4, 20.6] launched at 5, k2 [25.2, 30] launched at 20.8.
// HTA rounds inward to k1 [11, 20], k2's start to 26 and its launch to 21: host wait 6 us. On
// the exact timestamps (HTA_DISABLE_NS_ROUNDING=1): 25.2 - 20.6 = 4.6 us. HTA prints both.
TEST_CASE("HTA's idle breakdown rounds fractional timestamps as HTA does, and is given on the exact ones too") {
  const TraceFile file("round.json", R"trace({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 100},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20.8, "dur": 1, "args": {"correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 10.4, "dur": 10.2, "args": {"stream": 7, "correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 25.2, "dur": 4.8, "args": {"stream": 7, "correlation": 2}}
]})trace");
  const analysis::HtaMetrics h = analysis::load_trace(file.path()).hta.at(0);
  CHECK_FALSE(h.last_step_excluded);
  CHECK(h.steps == 1);
  CHECK(h.idle_breakdown.rounded);
  CHECK(h.idle_breakdown.total.host_wait == us(6));
  CHECK(h.idle_breakdown.total.other == Time::zero());
  REQUIRE(h.idle_breakdown_exact.has_value());
  CHECK_FALSE(h.idle_breakdown_exact->rounded);
  CHECK(h.idle_breakdown_exact->total.host_wait == Time::from_ps(4600000));
}

TEST_CASE("Without launch events tied to kernels the idle breakdown says so instead of a split") {
  const TraceFile file("no-launch.json", R"trace({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 10, "dur": 10, "args": {"stream": 7, "correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 50, "dur": 10, "args": {"stream": 7, "correlation": 2}}
]})trace");
  const analysis::Analysis a = analysis::analyze_trace(file.path(), std::nullopt, std::nullopt);
  const analysis::HtaMetrics& h = a.trace.hta.at(0);
  CHECK(h.idle_breakdown.total.launched == 0);
  std::ostringstream table;
  analysis::write_analysis_table(a, table);
  CHECK(
      table.str().find("  idle time breakdown: n/a (no kernel is tied by its correlation id to a launch on the CPU") !=
      std::string::npos);
  CHECK(table.str().find("kernel wait") == std::string::npos);
  std::ostringstream json_text;
  analysis::write_analysis_json(a, json_text);
  const boost::json::value v = boost::json::parse(json_text.str());
  const boost::json::object& idle = v.at("hta").at("idle_time_breakdown").as_object();
  CHECK_FALSE(idle.at("available").as_bool());
  CHECK(idle.at("note").as_string().starts_with("no kernel is tied"));
  CHECK_FALSE(idle.contains("streams"));
}
