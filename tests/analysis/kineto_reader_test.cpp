// Reading Kineto traces: tolerant of what real traces vary in, strict about broken input,
// with the exact messages a user sees.
#include <fmt/format.h>
#include <zlib.h>
#include <catch2/catch.hpp>

#include <array>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "analysis/analysis_output.hpp"
#include "analysis/host_costs.hpp"
#include "analysis/hta_metrics.hpp"
#include "analysis/kineto_trace.hpp"
#include "analysis/step_analysis.hpp"
#include "analysis/trace_timeline.hpp"
#include "stepsim/error.hpp"
#include "stepsim/text.hpp"

using namespace stepsim;

namespace {

namespace fs = std::filesystem;

// A fresh folder under the system temporary directory, removed at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name) : path_(fs::temp_directory_path() / ("stepsim-analysis-" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string write_gz(const std::string& name, const std::string& text) const {
    const std::string p = (path_ / name).string();
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    return p;
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

std::string error_of(const std::string& path) {
  try {
    analysis::load_trace(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text(fs::file_size(path), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

// One rank, no distributedInfo, new NCCL kernel names, an event without dur, an unknown
// category, string pids, and a kernel without a launch (assigned by its own start).
constexpr const char* kSmallTrace = R"trace({
  "schemaVersion": 1,
  "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 9, "tid": 9, "ts": 1000, "dur": 100},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 9, "tid": 9, "ts": 1100, "dur": 100},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 1001, "dur": 1, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 1002, "dur": 1, "args": {"correlation": 2}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 1101, "dur": 1, "args": {"correlation": 3}},
    {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 1010.5, "dur": 40, "args": {"stream": 7, "correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 20, "ts": 1030.5, "dur": 30,
     "args": {"stream": 20, "correlation": 2, "In msg nelems": 1000, "Out msg nelems": 1000, "Group size": 4, "dtype": "BFloat16",
              "Process Group Name": "3", "Process Group Description": "tensor parallel group", "Process Group Ranks": "[0, 1, 2, 3]"}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 21, "ts": 1110, "dur": 10, "args": {"stream": 21, "correlation": 3}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 21, "ts": 1125, "dur": 5, "args": {"stream": 21}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7, "ts": 1130, "dur": 2, "args": {"stream": 7, "bytes": 64}},
    {"ph": "X", "cat": "kernel", "name": "no_duration_kernel", "pid": 0, "tid": 7, "ts": 1140},
    {"ph": "X", "cat": "some_future_category", "name": "x", "pid": "Spans", "tid": "y", "ts": 1000, "dur": 1},
    {"ph": "i", "name": "instant", "pid": "", "tid": "", "ts": 1000, "s": "g"}
  ]
})trace";

}  // namespace

TEST_CASE("a small trace with new NCCL names and no distributedInfo reads into steps") {
  const TempDir dir("small");
  const analysis::LoadedTrace t = analysis::load_trace(dir.write("small.json", kSmallTrace));
  REQUIRE(t.timeline.ranks.size() == 1);
  CHECK(t.dist[0].rank == -1);
  const RankTimeline& r = t.timeline.ranks[0];
  CHECK(r.streams == std::vector<std::string>{"stream 7", "stream 20", "stream 21"});
  REQUIRE(r.intervals.size() == 5);
  CHECK(r.intervals[0].activity == Activity::compute);
  CHECK(r.intervals[0].start.ps() == 10'500'000);  // 10.5 us after the first timestamp
  const Interval& ar = r.intervals[1];
  CHECK(ar.activity == Activity::comm);
  CHECK(ar.op == CollOp::allreduce);
  CHECK(ar.kind == CommKind::tp);
  CHECK(ar.bytes.count() == 2000);
  REQUIRE(t.timeline.groups.size() == 1);
  CHECK(t.timeline.groups[0].name == "tensor parallel group (3)");
  CHECK(t.timeline.groups[0].size == 4);
  CHECK(r.intervals[2].op == CollOp::sendrecv);
  CHECK(r.intervals[3].op == CollOp::other);
  CHECK(r.intervals[3].activity == Activity::comm);
  CHECK(r.intervals[4].activity == Activity::memory);
  CHECK(r.intervals[4].bytes.count() == 64);
  // Step 1: gemm and AllReduce (launched in it) from 1010.5; step 2 from the SendRecv at 1110
  // to the end of the Generic kernel (no launch; starts inside step 2) and the memcpy.
  REQUIRE(t.timeline.steps.size() == 2);
  CHECK(t.timeline.steps[0].name == "ProfilerStep#1");
  CHECK(t.timeline.steps[0].start.ps() == 10'500'000);
  CHECK(t.timeline.steps[0].end.ps() == 110'000'000);
  CHECK(t.timeline.steps[1].end.ps() == 132'000'000);
  const analysis::TraceMetrics m = analysis::measure_steps(t.timeline, 0, std::nullopt);
  // Step 1: compute 1010.5-1050.5, AllReduce 1030.5-1060.5: 20 us hidden, 10 us exposed.
  CHECK(m.steps[0].metrics.overlap == Approx(20e-6));
  CHECK(m.steps[0].metrics.exposed[static_cast<int>(CommKind::tp)] == Approx(10e-6));
  CHECK(m.steps[0].metrics.hidden_fraction() == Approx(20.0 / 30.0));
  CHECK(m.collectives.size() == 3);
  CHECK(m.collectives[0].busbw->gbytes_per_s() == Approx(2000.0 / 30e-6 * 1.5 * 1e-9));
}

TEST_CASE("old Kineto names and categories are understood") {
  const TempDir dir("old");
  const std::string path = dir.write("old.json", R"trace({"traceEvents": [
    {"ph": "X", "cat": "Kernel", "name": "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", "pid": 0, "tid": 1, "ts": 5, "dur": 2, "args": {"stream": 1}},
    {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": 1, "ts": 8, "dur": 1, "args": {"stream": 1}},
    {"ph": "X", "cat": "Kernel", "name": "volta_sgemm", "pid": 0, "tid": 2, "ts": 5, "dur": 1, "args": {"stream": 2}}]})trace");
  const analysis::LoadedTrace t = analysis::load_trace(path);
  const RankTimeline& r = t.timeline.ranks[0];
  REQUIRE(r.intervals.size() == 3);
  CHECK(r.intervals[0].op == CollOp::allgather);
  CHECK(r.intervals[2].activity == Activity::memory);
  REQUIRE(t.timeline.steps.size() == 1);
  CHECK(t.timeline.steps[0].name == "trace");
  CHECK(t.timeline.steps[0].end.ps() == 4'000'000);
}

TEST_CASE("a gzip trace reads the same as the plain one") {
  const TempDir dir("gzip");
  const analysis::LoadedTrace plain = analysis::load_trace(dir.write("a.json", kSmallTrace));
  const analysis::LoadedTrace gz = analysis::load_trace(dir.write_gz("a.json.gz", kSmallTrace));
  REQUIRE(gz.timeline.ranks.size() == 1);
  CHECK(gz.timeline.ranks[0].intervals.size() == plain.timeline.ranks[0].intervals.size());
  CHECK(gz.content_bytes == plain.content_bytes);
}

TEST_CASE("a folder of rank files gives one rank each, aligned in time and sorted by rank") {
  const TempDir dir("folder");
  auto rank_file = [](int rank, int offset_us) {
    return fmt::format(R"({{"distributedInfo": {{"rank": {}, "world_size": 2, "backend": "nccl"}}, "traceEvents": [
      {{"ph": "X", "cat": "kernel", "name": "gemm", "pid": {}, "tid": 7, "ts": {}, "dur": 10, "args": {{"stream": 7}}}}]}})",
                       rank, rank, 1000 + offset_us);
  };
  dir.write("b.json", rank_file(0, 0));
  dir.write("a.json", rank_file(1, 5));
  dir.write("notes.txt", "not a trace");
  const analysis::LoadedTrace t = analysis::load_trace(dir.path());
  REQUIRE(t.timeline.ranks.size() == 2);
  CHECK(t.timeline.ranks[0].rank == 0);
  CHECK(t.timeline.ranks[1].rank == 1);
  CHECK(t.timeline.ranks[1].intervals[0].start - t.timeline.ranks[0].intervals[0].start == Time::from_us(5));
  CHECK(t.dist[1].backend == "nccl");
}

TEST_CASE("a truncated gzip file is an error that says so") {
  const TempDir dir("truncgz");
  const std::string real = slurp(std::string(STEPSIM_TEST_DATA) + "/traces/resnet50-ddp-a100-rank0of2.json.gz");
  const std::string path = dir.write("cut.json.gz", real.substr(0, 100000));
  CHECK(error_of(path) == path + ": compressed byte 100000: gzip data ends early (truncated file?)");
}

TEST_CASE("corrupt gzip data is an error that says so") {
  const TempDir dir("corruptgz");
  std::string real = slurp(std::string(STEPSIM_TEST_DATA) + "/traces/resnet50-ddp-a100-rank0of2.json.gz");
  real[real.size() - 8] = static_cast<char>(real[real.size() - 8] ^ 0x55);  // the CRC-32 of the trailer
  const std::string path = dir.write("bad.json.gz", real);
  CHECK(error_of(path) ==
        path + ": compressed byte " + std::to_string(real.size() - 4) + ": corrupt gzip data: incorrect data check");
}

namespace {

// The decompressed text of a gzip file.
std::string gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string text;
  std::array<char, 1 << 16> chunk{};
  for (int n; (n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()))) > 0;)
    text.append(chunk.data(), static_cast<std::size_t>(n));
  gzclose(f);
  return text;
}

// What `analyze --json` writes of `path`, without the file's name.
std::string analysis_of(const std::string& path) {
  const analysis::Analysis a = analysis::analyze_trace(path, std::nullopt, std::nullopt);
  std::ostringstream out;
  analysis::write_analysis_json(a, out);
  boost::json::object o = boost::json::parse(out.str()).as_object();
  o.erase("source");
  return boost::json::serialize(o);
}

}  // namespace

// Some editors and tools write a UTF-8 byte order mark first, and every other text input of
// stepsim skips it: a real trace with one, plain or gzip, reads as the trace without it.
TEST_CASE("a real trace that begins with a byte order mark, plain or gzip, gives the same analysis") {
  const TempDir dir("bom");
  const std::string real = std::string(STEPSIM_TEST_DATA) + "/traces/resnet50-ddp-a100-rank0of2.json.gz";
  const std::string text = gunzip(real);
  REQUIRE_FALSE(text.starts_with(kUtf8Bom));
  const std::string expected = analysis_of(real);
  CHECK(analysis_of(dir.write("bom.json", std::string(kUtf8Bom) + text)) == expected);
  CHECK(analysis_of(dir.write_gz("bom.json.gz", std::string(kUtf8Bom) + text)) == expected);
  CHECK(analysis::load_trace(dir.write("bom2.json", std::string(kUtf8Bom) + text)).content_bytes == text.size());
  // An error's column is the text's; its byte counts the mark, as the file's bytes do.
  const std::string cut = "{\"traceEvents\": [\n  {\"ph\": \"X\", \"ts\": 12";
  const std::string path = dir.write("cut.json", std::string(kUtf8Bom) + cut);
  CHECK(error_of(path) == path + ": line 2, column 23 (byte 43): the JSON ends early (truncated file?)");
  // A mark alone is an empty file.
  const std::string empty = dir.write("empty.json", std::string(kUtf8Bom));
  CHECK(error_of(empty) == empty + ": the file is empty (expected a JSON trace)");
}

TEST_CASE("a truncated JSON trace is an error with the line and byte where it stops") {
  const TempDir dir("truncjson");
  const std::string path = dir.write("cut.json", "{\"traceEvents\": [\n  {\"ph\": \"X\", \"ts\": 12");
  CHECK(error_of(path) == path + ": line 2, column 23 (byte 40): the JSON ends early (truncated file?)");
}

TEST_CASE("data after a complete JSON trace is an error at its line and column, not a truncation") {
  const TempDir dir("trailing");
  const std::string trace = R"({"traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1, "args": {"stream": 7}}
]})";
  // The document is 3 lines; " {}" follows on its third line after "]}" (2 columns) and a space.
  const std::string second = dir.write("second.json", trace + " {}");
  CHECK(error_of(second) == second + ": line 3, column 4 (byte " + std::to_string(trace.size() + 1) +
                                "): unexpected data after the end of the JSON document (two documents in one file?)");
  const std::string log = dir.write("log.json", trace + "\n\nDone.\n");
  CHECK(error_of(log) == log + ": line 5, column 1 (byte " + std::to_string(trace.size() + 2) +
                             "): unexpected data after the end of the JSON document (two documents in one file?)");
  // Whitespace after it is no data.
  CHECK(error_of(dir.write("spaces.json", trace + "\n  \n")) == "no error");
}

TEST_CASE("a file that is not JSON is an error with the line and column") {
  const TempDir dir("notjson");
  const std::string path = dir.write("trace.json", "{\"traceEvents\": [\n  {\"ph\": X}\n]}");
  CHECK(error_of(path) == path + ": line 2, column 10 (byte 27): invalid JSON: syntax error");
  const std::string empty = dir.write("empty.json", "");
  CHECK(error_of(empty) == empty + ": the file is empty (expected a JSON trace)");
}

TEST_CASE("JSON of the wrong shape is an error naming the JSON pointer and what was expected") {
  const TempDir dir("schema");
  const std::string no_events = dir.write("a.json", R"({"schemaVersion": 1, "events": []})");
  CHECK(error_of(no_events) ==
        no_events + ": no \"traceEvents\" array at the top level (is this a PyTorch profiler trace?)");
  const std::string not_array = dir.write("b.json", R"({"traceEvents": {"ph": "X"}})");
  CHECK(error_of(not_array) == not_array + ": /traceEvents: expected an array of events, got an object");
  const std::string scalar_event = dir.write("c.json", R"({"traceEvents": [{"ph": "M"}, 42]})");
  CHECK(error_of(scalar_event) == scalar_event + ": /traceEvents/1: expected an event object, got a number");
  const std::string string_ts = dir.write("d.json", R"({"traceEvents": [{"ph": "M"}, {"ph": "X", "ts": "12.5"}]})");
  CHECK(error_of(string_ts) == string_ts + ": /traceEvents/1/ts: expected a number of microseconds, got a string");
  const std::string null_dur = dir.write("e.json", R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": null}]})");
  CHECK(error_of(null_dur) == null_dur + ": /traceEvents/0/dur: expected a number of microseconds, got null");
  const std::string top_array = dir.write("f.json", R"([1])");
  CHECK(error_of(top_array) == top_array + ": /traceEvents/0: expected an event object, got a number");
  const std::string missing = dir.path() + "/missing.json";
  CHECK(error_of(missing) == missing + ": no such file or folder");
}

TEST_CASE("steps numbered out of time order tile the time in the order they ran") {
  const TempDir dir("swapped");
  const std::string path = dir.write("swapped.json", R"trace({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#9", "pid": 9, "tid": 9, "ts": 1000, "dur": 100},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 9, "tid": 9, "ts": 1100, "dur": 100},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1010, "dur": 40, "args": {"stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1110, "dur": 40, "args": {"stream": 7}}]})trace");
  const analysis::LoadedTrace t = analysis::load_trace(path);
  REQUIRE(t.timeline.steps.size() == 2);
  CHECK(t.timeline.steps[0].name == "ProfilerStep#9");
  CHECK(t.timeline.steps[0].start.ps() == 10'000'000);
  CHECK(t.timeline.steps[0].end.ps() == 110'000'000);
  CHECK(t.timeline.steps[1].name == "ProfilerStep#3");
  CHECK(t.timeline.steps[1].end.ps() == 150'000'000);
}

TEST_CASE("the last step lasts until every step's work ends, so the steps sum to the whole trace") {
  const TempDir dir("drain");
  // Step 1 launches a 900 us AllReduce (100 to 1000 us); step 2's only kernel, a gemm, runs
  // from 150 to 250 us. Step 1's window: 100 to 150 (where step 2's starts); step 2's: 150
  // to 1000, the end of the AllReduce. Communication: 50 + 850 = 900 us, the whole trace's;
  // the gemm hides 100 us of it, all in step 2.
  const std::string path = dir.write("drain.json", R"trace({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 1, "args": {"correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 20, "ts": 100, "dur": 900, "args": {"stream": 20, "correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 150, "dur": 100, "args": {"stream": 7, "correlation": 2}}
]})trace");
  const analysis::LoadedTrace t = analysis::load_trace(path);
  REQUIRE(t.timeline.steps.size() == 2);
  CHECK(t.timeline.steps[0].start == Time::from_us(100));
  CHECK(t.timeline.steps[0].end == Time::from_us(150));
  CHECK(t.timeline.steps[1].start == Time::from_us(150));
  CHECK(t.timeline.steps[1].end == Time::from_us(1000));
  const analysis::TraceMetrics m = analysis::measure_steps(t.timeline, 0, std::nullopt);
  CHECK(m.steps[0].metrics.comm_union == Approx(50e-6));
  CHECK(m.steps[1].metrics.comm_union == Approx(850e-6));
  CHECK(m.total.metrics.comm_union == Approx(900e-6));
  CHECK(m.total.metrics.overlap == Approx(100e-6));
  CHECK(m.total.metrics.hidden_fraction() == Approx(100.0 / 900.0));
  CHECK(m.whole_trace_hidden_fraction == Approx(100.0 / 900.0));
  REQUIRE(m.collectives.size() == 1);
  CHECK(m.collectives[0].duration == Time::from_us(900));
}

TEST_CASE("times that are negative or too large for picoseconds name the event") {
  const TempDir dir("times");
  const std::string negative = dir.write("a.json", R"({"traceEvents": [
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 5, "dur": -0.5, "args": {"stream": 7}}]})");
  CHECK(error_of(negative) == negative +
                                  ": /traceEvents/0/dur: event 'Memcpy HtoD': expected a duration from 0 to "
                                  "1000000000000 us, got -0.5");
  const std::string far = dir.write("b.json", R"({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1, "args": {"stream": 7}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7, "ts": 2000000000005, "dur": 1}]})");
  CHECK(error_of(far) == far +
                             ": /traceEvents/1/ts: event 'ProfilerStep#1': ts 2000000000005 is more than "
                             "1000000000000 us away from the trace's first timestamp 5");
  // Events stepsim does not keep are not checked.
  const std::string ignored = dir.write("c.json", R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 0, "tid": 7, "ts": 5, "dur": -3},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1, "args": {"stream": 7}}]})");
  CHECK(error_of(ignored) == "no error");
}

TEST_CASE("ids and sizes beyond what their fields hold are unknown or refused, never wrapped") {
  const TempDir dir("big-numbers");
  const std::string ids = dir.write("a.json", R"({"traceEvents": [{"ph": "X", "cat": "kernel",
    "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 1e300, "tid": 7, "ts": 5, "dur": 1,
    "args": {"stream": 7}}]})");
  const analysis::LoadedTrace t = analysis::load_trace(ids);
  CHECK(t.timeline.ranks[0].intervals.size() == 1);
  const std::string group = dir.write("g.json", R"({"traceEvents": [{"ph": "X", "cat": "kernel",
    "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0, "tid": 7, "ts": 5, "dur": 1,
    "args": {"stream": 7, "Group size": 4294967298}}]})");
  CHECK(error_of(group) == group +
                               ": /traceEvents/0/args/Group size: event 'ncclKernel_AllReduce_RING_LL_Sum_float': "
                               "expected the ranks of the process group, a whole number from 1 to 1048576, got "
                               "4294967298");
  // distributedInfo's numbers name the job: beyond what a job holds they are refused.
  const std::string rank = dir.write("r.json", R"({"distributedInfo": {"rank": 4294967296},
    "traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5, "dur": 1,
    "args": {"stream": 7}}]})");
  CHECK(error_of(rank) == rank +
                              ": /distributedInfo/rank: expected a whole number from 0 to 1048575 (the process's "
                              "rank in its job), got 4294967296");
  const std::string elems = dir.write("b.json", R"({"traceEvents": [{"ph": "X", "cat": "kernel",
    "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0, "tid": 7, "ts": 5, "dur": 1,
    "args": {"stream": 7, "In msg nelems": 1152921504606846976, "dtype": "Double", "Process Group Name": "0"}}]})");
  CHECK(error_of(elems) == elems +
                               ": /traceEvents/0/args/In msg nelems: event 'ncclKernel_AllReduce_RING_LL_Sum_float': "
                               "expected the message's elements, a whole number from 0 to 288230376151711744, got "
                               "1152921504606846976");
}

// Two ProfilerSteps: HTA leaves out the last one (kernels launched after it starts) and the
// kernels whose launch is not in the trace, and rounds fractional times inward.
TEST_CASE("HTA's overlap leaves out the last step and kernels launched before the trace, rounding inward") {
  const TempDir dir("hta-rules");
  const std::string text = R"trace({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100.0, "dur": 100},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 200.0, "dur": 100},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 120, "dur": 1, "args": {"correlation": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 210, "dur": 1, "args": {"correlation": 3}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 130.4, "dur": 40.2, "args": {"stream": 7, "correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 20, "ts": 150.5, "dur": 40.0, "args": {"stream": 20, "correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 180, "dur": 40, "args": {"stream": 7, "correlation": 3}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 90, "dur": 70, "args": {"stream": 7, "correlation": 99}}
]})trace";
  const analysis::LoadedTrace t = analysis::load_trace(dir.write("hta.json", text));
  const analysis::HtaMetrics& h = t.hta.at(0);
  CHECK(h.last_step_excluded);
  CHECK(h.rounded);
  CHECK(h.activities == 2);
  // gemm [131, 170], AllReduce [151, 190]: 19 us of 39 together.
  CHECK(h.comm == Time::from_ps(39'000'000));
  CHECK(h.overlap == Time::from_ps(19'000'000));
  REQUIRE(h.overlap_pct.has_value());
  CHECK(*h.overlap_pct == 48.72);
  CHECK(h.kernel_time == Time::from_ps(59'000'000));
  CHECK(h.idle == Time::zero());
  CHECK(h.compute == Time::from_ps(39'000'000));
  CHECK(h.non_compute == Time::from_ps(20'000'000));
}

TEST_CASE("with one ProfilerStep HTA keeps every GPU activity, and without communication has no overlap") {
  const TempDir dir("hta-one-step");
  const std::string text = R"trace({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 90, "dur": 20, "args": {"stream": 7, "correlation": 99}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 150, "dur": 20, "args": {"stream": 7, "correlation": 98}}
]})trace";
  const analysis::HtaMetrics h = analysis::load_trace(dir.write("one.json", text)).hta.at(0);
  CHECK_FALSE(h.last_step_excluded);
  CHECK_FALSE(h.rounded);
  CHECK(h.activities == 2);
  CHECK_FALSE(h.overlap_pct.has_value());
  CHECK(h.kernel_time == Time::from_ps(80'000'000));
  CHECK(h.idle == Time::from_ps(40'000'000));
}

namespace {

// One step of one rank of 8, its times `shift_us` later: from 5 us the CPU launches a 50 us
// GEMM at 10 us and, from 6 us, a 40 us AllReduce at 40 us, so that the rank's own step runs
// from 10 to 80 us: 70 us, 50 of compute, 40 of communication of which 20 exposed, no idle.
std::string shifted_rank(int rank, int shift_us) {
  return fmt::format(
      R"trace({{"distributedInfo": {{"backend": "nccl", "rank": {0}, "world_size": 8}}, "traceEvents": [
  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": {1}, "dur": 100}},
  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {2}, "dur": 1, "args": {{"correlation": 1}}}},
  {{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": {4}, "dur": 50, "args": {{"stream": 7, "correlation": 1}}}},
  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {3}, "dur": 1, "args": {{"correlation": 2}}}},
  {{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", "pid": 0, "tid": 20, "ts": {5}, "dur": 40,
   "args": {{"stream": 20, "correlation": 2, "In msg nelems": 1000000, "dtype": "BFloat16", "Group size": 8}}}}]}})trace",
      rank, shift_us, 5 + shift_us, 6 + shift_us, 10 + shift_us, 40 + shift_us);
}

}  // namespace

TEST_CASE("a rank of a folder is measured over its own step, not over the other ranks' kernels") {
  const TempDir dir("own-step");
  // Rank 2 runs 9 us after rank 7, rank 5 3 us after it: together their kernels span 79 us.
  dir.write("r2.json", shifted_rank(2, 9));
  dir.write("r5.json", shifted_rank(5, 3));
  dir.write("r7.json", shifted_rank(7, 0));
  for (const int rank : {2, 5, 7}) {
    INFO("rank " << rank);
    const analysis::Analysis a = analysis::analyze_trace(dir.path(), rank, std::nullopt);
    REQUIRE(a.metrics.steps.size() == 1);
    CHECK(a.mean.step_time_s == Approx(70e-6));
    CHECK(a.metrics.total.metrics.compute == Approx(50e-6));
    CHECK(a.metrics.total.metrics.exposed_total() == Approx(20e-6));
    CHECK(a.metrics.total.metrics.idle == Approx(0).margin(1e-15));
  }
  // The same as the rank's file alone.
  CHECK(analysis::analyze_trace(dir.path() + "/r5.json", std::nullopt, std::nullopt).mean.step_time_s == Approx(70e-6));
  // Each rank's window in the loaded folder, from its own GEMM: rank 2's at 19 us, rank 5's at
  // 13 us, rank 7's at 10 us (the origin is the job's first timestamp, rank 7's step at 0).
  const analysis::LoadedTrace t = analysis::load_trace(dir.path());
  REQUIRE(t.rank_steps.size() == 3);
  const std::int64_t starts[] = {19, 13, 10};
  for (std::size_t i = 0; i < 3; ++i) {
    REQUIRE(t.rank_steps[i].size() == 1);
    CHECK(t.rank_steps[i][0].start == Time::from_us(starts[i]));
    CHECK(t.rank_steps[i][0].end - t.rank_steps[i][0].start == Time::from_us(70));
  }
}

// PyTorch 1.8's Kineto wrote CPU operators, the ProfilerStep#N annotations among them, with
// category "Operator" (and "Runtime", "Kernel").
constexpr const char* kOperatorTrace = R"trace({"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 100, "tid": 100, "ts": 0, "dur": 100, "args": {"External id": 1}},
  {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 100, "tid": 100, "ts": 100, "dur": 100, "args": {"External id": 2}},
  {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 100, "tid": 100, "ts": 2, "dur": 10, "args": {"External id": 3}},
  {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": 4, "dur": 3, "args": {"correlation": 11}},
  {"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 100, "tid": 100, "ts": 102, "dur": 12, "args": {"External id": 4}},
  {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": 104, "dur": 3, "args": {"correlation": 12}},
  {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": 14, "dur": 3, "args": {"correlation": 13}},
  {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": 114, "dur": 3, "args": {"correlation": 14}},
  {"ph": "X", "cat": "Kernel", "name": "volta_sgemm", "pid": 0, "tid": 7, "ts": 10, "dur": 50, "args": {"stream": 7, "correlation": 11}},
  {"ph": "X", "cat": "Kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "pid": 0, "tid": 20, "ts": 40, "dur": 40, "args": {"stream": 20, "correlation": 13}},
  {"ph": "X", "cat": "Kernel", "name": "add_kernel", "pid": 0, "tid": 7, "ts": 110, "dur": 50, "args": {"stream": 7, "correlation": 12}},
  {"ph": "X", "cat": "Kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "pid": 0, "tid": 20, "ts": 140, "dur": 40, "args": {"stream": 20, "correlation": 14}}
]})trace";

TEST_CASE("old Kineto's Operator category: ProfilerStep#N are the steps, the other operators CPU operators") {
  const TempDir dir("operator");
  const std::string path = dir.write("old18.json", kOperatorTrace);
  const analysis::LoadedTrace t = analysis::load_trace(path);
  // Step 1 from its GEMM at 10 us to step 2's first kernel at 110 us; step 2 to the end of its
  // AllReduce at 180 us. The times are relative to the first timestamp, 0.
  REQUIRE(t.timeline.steps.size() == 2);
  CHECK(t.timeline.steps[0].name == "ProfilerStep#1");
  CHECK(t.timeline.steps[0].start == Time::from_us(10));
  CHECK(t.timeline.steps[0].end == Time::from_us(110));
  CHECK(t.timeline.steps[1].name == "ProfilerStep#2");
  CHECK(t.timeline.steps[1].end == Time::from_us(180));
  CHECK(t.hta.at(0).last_step_excluded);
  // The launches at 4 and 104 us lie in aten::mm (10 us) and aten::add (12 us); those at 14
  // and 114 us in no operator but the steps, which are not operators. Median of 10 and 12:
  // 11 us; of the four 3 us launches: 3 us.
  const analysis::HostCosts h = analysis::host_costs(path);
  CHECK(h.operators == 2);
  CHECK(h.operator_median == Time::from_us(11));
  CHECK(h.launches == 4);
  CHECK(h.launch_median == Time::from_us(3));
  // Each operator less its own launch: 7 and 9 us, median 8.
  CHECK(h.dispatch_median == Time::from_us(8));
}

TEST_CASE("the median CPU cost of an even count is the mean of the two middle values") {
  const TempDir dir("median");
  // Operators of 30, 40, 10 and 30 us around launches of 5, 4 and 3, 2, 4 (tid 2) and 2 us
  // (tid 3, no operator): operators 10 30 30 40, median (30 + 30) / 2 = 30 us; launches
  // 2 2 3 4 4 5, median (3 + 4) / 2 = 3.5 us.
  const std::string path = dir.write("host.json", R"trace({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 300},
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 10, "dur": 30},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 50, "dur": 40},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 60, "dur": 4, "args": {"correlation": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 70, "dur": 3, "args": {"correlation": 3}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 110, "dur": 10},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 112, "dur": 2, "args": {"correlation": 4}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 2, "ts": 0, "dur": 30},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 5, "dur": 4, "args": {"correlation": 5}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 3, "ts": 200, "dur": 2, "args": {"correlation": 6}},
  {"ph": "X", "cat": "kernel", "name": "k0", "pid": 0, "tid": 7, "ts": 300, "dur": 5, "args": {"stream": 7, "correlation": 1}}
]})trace");
  const analysis::HostCosts h = analysis::host_costs(path);
  CHECK(h.operators == 4);
  CHECK(h.operator_median == Time::from_us(30));
  CHECK(h.launches == 6);
  CHECK(h.launch_median == Time::from_ps(3'500'000));
  // Each operator less the launches it encloses as their innermost operator: 30 - 5 = 25,
  // 40 - 4 - 3 = 33, 10 - 2 = 8 and 30 - 4 = 26; median (25 + 26) / 2 = 25.5 us, where the
  // operators' median less the launches' would say 30 - 3.5 = 26.5.
  CHECK(h.dispatch_median == Time::from_ps(25'500'000));
  const analysis::HostFit fit = analysis::fit_host(h);
  REQUIRE(fit.dispatch_us);
  CHECK(*fit.dispatch_us == 25.5);
}

TEST_CASE("a metadata event's ts, 0 before epoch timestamps, neither sets the origin nor is refused") {
  const TempDir dir("metadata-ts");
  const std::string text = R"trace({"distributedInfo": {"rank": 0, "world_size": 2}, "traceEvents": [
  {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "ts": 0, "args": {"name": "python"}},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1700000000000000, "dur": 100},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1700000000000001, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1700000000000010, "dur": 50, "args": {"stream": 7, "correlation": 1}},
  {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}}
]})trace";
  const analysis::LoadedTrace t = analysis::load_trace(dir.write("meta.json", text));
  // The origin is the step's ts: the GEMM starts 10 us after it and lasts the step's 50 us.
  REQUIRE(t.timeline.steps.size() == 1);
  CHECK(t.timeline.steps[0].name == "ProfilerStep#1");
  CHECK(t.timeline.steps[0].start == Time::from_us(10));
  CHECK(t.timeline.steps[0].end == Time::from_us(60));
  // In a folder too: the file is one job's rank beside another whose metadata has no ts.
  const TempDir job("metadata-job");
  job.write("a.json", text);
  std::string other = text;
  other.replace(other.find(R"("rank": 0)"), 9, R"("rank": 1)");
  other.replace(other.find(R"("ts": 0, )"), 9, "");
  job.write("b.json", other);
  const analysis::LoadedTrace both = analysis::load_trace(job.path());
  REQUIRE(both.timeline.ranks.size() == 2);
  CHECK(both.timeline.ranks[1].intervals[0].start == both.timeline.ranks[0].intervals[0].start);
}
