// stepsim analyze on the three real Kineto traces of tests/data/traces. Every pinned number
// of the step windows comes from tests/analysis/step_windows.py, an independent plain-Python
// reading of the raw events by stepsim's step-window rules (its output is
// tests/analysis/pinned_steps.json); HolisticTraceAnalysis' own figures are checked against
// what HTA printed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "analysis/hta_metrics.hpp"
#include "analysis/nccl_kernels.hpp"
#include "analysis/step_analysis.hpp"
#include "analysis/trace_timeline.hpp"

using namespace stepsim;

namespace {

// Picoseconds, exactly as the script computes them from the decimal timestamps.
struct PinnedStep {
  const char* name;
  std::int64_t step, compute, comm, overlap, exposed, memory_only, idle;
};

std::string trace(const char* file) { return std::string(STEPSIM_TEST_DATA) + "/traces/" + file; }

std::int64_t ps(double seconds) { return std::llround(seconds * 1e12); }

void check_steps(const char* file, const std::vector<PinnedStep>& pinned, double whole_hidden) {
  const analysis::LoadedTrace t = analysis::load_trace(trace(file));
  REQUIRE(t.timeline.ranks.size() == 1);
  const analysis::TraceMetrics m = analysis::measure_steps(t.timeline, 0, std::nullopt);
  REQUIRE(m.steps.size() == pinned.size());
  for (std::size_t i = 0; i < pinned.size(); ++i) {
    const PinnedStep& p = pinned[i];
    const report::WindowMetrics& w = m.steps[i].metrics;
    INFO(p.name);
    CHECK(m.steps[i].name == p.name);
    CHECK(ps(w.length) == p.step);
    CHECK(ps(w.compute + w.optimizer) == p.compute);
    CHECK(ps(w.comm_union) == p.comm);
    CHECK(ps(w.overlap) == p.overlap);
    double exposed = 0;
    for (double e : w.exposed) exposed += e;
    CHECK(ps(exposed) == p.exposed);
    CHECK(ps(w.memory_only) == p.memory_only);
    CHECK(ps(w.idle) == p.idle);
    CHECK(w.hidden_fraction() == Approx(static_cast<double>(p.overlap) / static_cast<double>(p.comm)).epsilon(1e-12));
    double by_op = 0;
    for (double e : m.steps[i].exposed_by_op) by_op += e;
    CHECK(by_op == Approx(exposed).epsilon(1e-9));
  }
  CHECK(m.whole_trace_hidden_fraction == Approx(whole_hidden).epsilon(1e-9));
}

}  // namespace

TEST_CASE("resnet-50 DDP steps match the independent step-window reading") {
  check_steps(
      "resnet50-ddp-a100-rank0of2.json.gz",
      {{"ProfilerStep#4", 222054811000, 38506406000, 11989021000, 1825259000, 10163762000, 768753000, 172615890000},
       {"ProfilerStep#5", 219732155000, 38429422000, 12300029000, 1760420000, 10539609000, 759895000, 170003229000},
       {"ProfilerStep#6", 218764039000, 38720019000, 22587443000, 3731346000, 18856097000, 756051000, 160431872000}},
      0.156091561713);
}

TEST_CASE("recsys rank 3 of 8 steps match the independent step-window reading") {
  check_steps(
      "recsys-a100-rank3of8.json.gz",
      {{"ProfilerStep#1009", 75467000000, 45364000000, 16256000000, 6552000000, 9704000000, 3007000000, 17392000000},
       {"ProfilerStep#1010", 76989000000, 47024000000, 21122000000, 8811000000, 12311000000, 2965000000, 14689000000},
       {"ProfilerStep#1011", 76247000000, 48105000000, 31488000000, 17004000000, 14484000000, 3042000000, 10616000000},
       {"ProfilerStep#1012", 76786000000, 47228000000, 29164000000, 14576000000, 14588000000, 4214000000, 10756000000},
       {"ProfilerStep#1013", 78520000000, 47039000000, 34480000000, 15370000000, 19110000000, 3100000000, 9271000000},
       {"ProfilerStep#1014", 80585000000, 46576000000, 31025000000, 13301000000, 17724000000, 3002000000, 13283000000}},
      0.462371969303);
}

TEST_CASE("recsys rank 0 of 16 steps match the independent step-window reading") {
  check_steps(
      "recsys-a100-rank0of16.json.gz",
      {{"ProfilerStep#550", 211086000000, 36213000000, 29532000000, 460000000, 29072000000, 7158000000, 138643000000},
       {"ProfilerStep#551", 216392000000, 36019000000, 36850000000, 495000000, 36355000000, 7887000000, 136131000000},
       {"ProfilerStep#552", 216331000000, 36226000000, 30134000000, 483000000, 29651000000, 8205000000, 142249000000},
       {"ProfilerStep#553", 215375000000, 36049000000, 36810000000, 433000000, 36377000000, 7701000000, 135248000000},
       {"ProfilerStep#554", 372277000000, 66491000000, 54544000000, 682000000, 53862000000, 11158000000, 240766000000}},
      0.013589184010);
}

TEST_CASE("resnet-50 DDP shows five AllReduce buckets and two Broadcasts per step") {
  const analysis::LoadedTrace t = analysis::load_trace(trace("resnet50-ddp-a100-rank0of2.json.gz"));
  CHECK(t.dist.front().rank == 0);
  CHECK(t.dist.front().world_size == 2);
  CHECK(t.dist.front().nccl_version == "2.17.1");
  REQUIRE(t.timeline.groups.size() == 1);
  CHECK(t.timeline.groups[0].name == "default_pg (0)");
  CHECK(t.timeline.groups[0].size == 2);
  CHECK(t.timeline.groups[0].ranks == "[0, 1]");
  CHECK(t.timeline.groups[0].kind == CommKind::other);
  const analysis::TraceMetrics m = analysis::measure_steps(t.timeline, 0, std::string("5"));
  REQUIRE(m.steps.size() == 1);
  REQUIRE(m.collectives.size() == 7);
  const std::int64_t elements[] = {2049000, 7875584, 6563840, 6637568, 2431040};
  // Durations (ps) and busbw (GB/s) of ProfilerStep#5 from step_windows.py.
  const std::int64_t durations[] = {2520607000, 2673916000, 2621533000, 2417184000, 2028293000};
  const double busbw[] = {3.2515977302292667, 11.78134840436274, 10.01526969143627, 10.983968121582803,
                          4.794258028795643};
  CHECK(m.collectives[0].op == CollOp::broadcast);
  CHECK(m.collectives[0].bytes.count() == 53120 * 4);
  CHECK(m.collectives[1].op == CollOp::broadcast);
  for (std::size_t i = 0; i < 5; ++i) {
    const analysis::CollectiveRecord& c = m.collectives[i + 2];
    INFO("bucket " << i);
    CHECK(c.op == CollOp::allreduce);
    CHECK(c.ranks == 2);
    CHECK(c.bytes.count() == elements[i] * 4);
    CHECK(c.duration.ps() == durations[i]);
    // Two ranks: AllReduce's factor 2(n-1)/n is 1, busbw = algbw.
    CHECK(c.busbw->gbytes_per_s() == Approx(busbw[i]).epsilon(1e-12));
    CHECK(c.algbw->gbytes_per_s() == Approx(busbw[i]).epsilon(1e-12));
  }
  std::int64_t total = 0;
  for (std::int64_t e : elements) total += e;
  CHECK(total == 25557032);  // ResNet-50's parameters
}

TEST_CASE("recsys SendRecv kernels are all_to_all traffic without message sizes") {
  const analysis::LoadedTrace t = analysis::load_trace(trace("recsys-a100-rank3of8.json.gz"));
  CHECK(t.dist.front().rank == 3);
  CHECK(t.timeline.groups.empty());
  const analysis::TraceMetrics m = analysis::measure_steps(t.timeline, 0, std::string("ProfilerStep#1011"), 8);
  REQUIRE(m.collectives.size() == 10);
  int sendrecv = 0, allreduce = 0;
  for (const analysis::CollectiveRecord& c : m.collectives) {
    sendrecv += c.op == CollOp::sendrecv;
    allreduce += c.op == CollOp::allreduce;
    CHECK(c.bytes.count() == 0);
    CHECK(c.ranks == 8);  // no process group in the trace: the world
  }
  CHECK(sendrecv == 7);
  CHECK(allreduce == 3);
  // Exposed time per op, ProfilerStep#1011, from step_windows.py.
  CHECK(std::llround(m.steps[0].exposed_by_op[static_cast<int>(CollOp::allreduce)] * 1e12) == 596000000);
  CHECK(std::llround(m.steps[0].exposed_by_op[static_cast<int>(CollOp::sendrecv)] * 1e12) == 13888000000);
}

// The figures HolisticTraceAnalysis itself printed for these traces
// (TraceAnalysis(...).get_comm_comp_overlap(), include_last_profiler_step=False).
TEST_CASE("the HTA comm-comp overlap equals the figures HTA printed for the three real traces") {
  const std::pair<const char*, double> printed[] = {{"resnet50-ddp-a100-rank0of2.json.gz", 14.31},
                                                    {"recsys-a100-rank3of8.json.gz", 47.03},
                                                    {"recsys-a100-rank0of16.json.gz", 1.37}};
  for (const auto& [file, pct] : printed) {
    INFO(file);
    const analysis::LoadedTrace t = analysis::load_trace(trace(file));
    REQUIRE(t.hta.size() == 1);
    const analysis::HtaMetrics& h = t.hta[0];
    CHECK(h.available);
    CHECK(h.last_step_excluded);
    REQUIRE(h.overlap_pct.has_value());
    CHECK(std::fabs(*h.overlap_pct - pct) < 0.005);
  }
}

TEST_CASE("HTA rounds fractional timestamps inward and keeps integer ones") {
  CHECK(analysis::load_trace(trace("resnet50-ddp-a100-rank0of2.json.gz")).hta[0].rounded);
  CHECK_FALSE(analysis::load_trace(trace("recsys-a100-rank3of8.json.gz")).hta[0].rounded);
}

TEST_CASE("HTA's temporal breakdown splits the kernel span into idle, compute and non-compute") {
  const analysis::HtaMetrics h = analysis::load_trace(trace("recsys-a100-rank3of8.json.gz")).hta[0];
  REQUIRE(h.kernel_time > Time::zero());
  CHECK(h.idle + h.compute + h.non_compute == h.kernel_time);
  CHECK(h.idle >= Time::zero());
  CHECK(h.non_compute >= Time::zero());
  // Kernel-type stretches never overlap, so they sum to the busy part of the span.
  Time types;
  bool both = false;
  for (const analysis::HtaKernelTypeTime& k : h.kernel_types) {
    types += k.time;
    both = both || k.label == "COMPUTATION overlapping COMMUNICATION";
  }
  CHECK(types <= h.kernel_time - h.idle);
  CHECK(both);
  Time overlapping;
  for (const analysis::HtaKernelTypeTime& k : h.kernel_types)
    if (k.label.starts_with("COMPUTATION overlapping COMMUNICATION")) overlapping += k.time;
  CHECK(overlapping == h.overlap);
}

// HTA's get_temporal_breakdown() rules on the ResNet-50 trace (microseconds, from a port of
// breakdown_analysis.py to plain Python over the same events).
TEST_CASE("HTA's temporal breakdown of the resnet-50 trace in microseconds") {
  const analysis::HtaMetrics h = analysis::load_trace(trace("resnet50-ddp-a100-rank0of2.json.gz")).hta[0];
  CHECK(h.kernel_time == Time::from_ps(435586000000));
  CHECK(h.idle == Time::from_ps(338781000000));
  CHECK(h.compute == Time::from_ps(75169000000));
  CHECK(h.non_compute == Time::from_ps(21636000000));
  CHECK(analysis::hta_round(100.0 * 338781 / 435586, 2) == 77.78);
}

TEST_CASE("HTA's classes of kernel names") {
  using analysis::HtaKernelType;
  CHECK(analysis::hta_kernel_type("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)") ==
        HtaKernelType::communication);
  CHECK(analysis::hta_kernel_type("void ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)") ==
        HtaKernelType::communication);
  CHECK(analysis::hta_kernel_type("hccl_allreduce") == HtaKernelType::communication);
  CHECK(analysis::hta_kernel_type("Memcpy DtoD (Device -> Device)") == HtaKernelType::memory);
  CHECK(analysis::hta_kernel_type("Memset (Device)") == HtaKernelType::memory);
  CHECK(analysis::hta_kernel_type("volta_sgemm_128x64_nn") == HtaKernelType::computation);
  CHECK(analysis::hta_kernel_type("Event Sync") == HtaKernelType::other);
  CHECK(analysis::hta_kernel_type("Stream Wait Event") == HtaKernelType::other);
  CHECK(analysis::hta_kernel_type("cudaLaunchKernel") == HtaKernelType::other);
  CHECK(analysis::hta_kernel_type("void copy_kernel_with_Memcpy_in_name") == HtaKernelType::other);
  // "." does not cross a newline in Python's re.match.
  CHECK(analysis::hta_kernel_type("gemm\nSync") == HtaKernelType::computation);
}

// HolisticTraceAnalysis' idle time breakdown of the three real traces, as HTA itself prints it
// (facebookresearch/HolisticTraceAnalysis at f4d0062c, pandas 1.5.3:
// TraceAnalysis(trace_dir).get_idle_time_breakdown(ranks=[the trace's rank]), its idle_time
// column, in microseconds; a class HTA prints no row for is 0). HTA's own tests pin no figure
// for these traces.
TEST_CASE("HTA's idle time breakdown of the three real traces equals what HTA printed") {
  struct Row {
    std::int64_t stream, host_wait, kernel_wait, other;
  };
  const std::pair<const char*, std::vector<Row>> printed[] = {
      {"resnet50-ddp-a100-rank0of2.json.gz", {{7, 357247, 2155, 0}, {40, 381499, 0, 0}}},
      {"recsys-a100-rank3of8.json.gz",
       {{7, 102154, 14226, 32183}, {20, 346996, 621, 7470}, {21, 237710, 71, 0}, {22, 271786, 1253, 0}}},
      {"recsys-a100-rank0of16.json.gz",
       {{7, 0, 17159, 691231},
        {25, 628598, 85, 0},
        {27, 792592, 1000, 7135},
        {84, 62901, 12, 665192},
        {285, 0, 0, 675305},
        {363, 0, 75, 673182}}},
  };
  const auto us = [](std::int64_t n) { return Time::from_ps(n * 1000000); };
  for (const auto& [file, rows] : printed) {
    INFO(file);
    const analysis::HtaMetrics h = analysis::load_trace(trace(file)).hta.at(0);
    const analysis::HtaIdleBreakdown& b = h.idle_breakdown;
    REQUIRE(b.streams.size() == rows.size());
    for (const Row& r : rows) {
      INFO("stream " << r.stream);
      const auto it = std::find_if(b.streams.begin(), b.streams.end(),
                                   [&r](const analysis::HtaStreamIdle& s) { return s.stream == r.stream; });
      REQUIRE(it != b.streams.end());
      CHECK(it->host_wait == us(r.host_wait));
      CHECK(it->kernel_wait == us(r.kernel_wait));
      CHECK(it->other == us(r.other));
    }
  }
}

TEST_CASE("HTA's idle breakdown is per step over the ProfilerSteps its window covers") {
  // ResNet-50: ProfilerSteps 4 to 6, the last left out: 2 steps. With two or more steps HTA
  // keeps a kernel only when its launch is in the window, so every kernel kept has one.
  const analysis::HtaMetrics h = analysis::load_trace(trace("resnet50-ddp-a100-rank0of2.json.gz")).hta.at(0);
  CHECK(h.steps == 2);
  REQUIRE(h.idle_breakdown_exact.has_value());  // its timestamps are fractional
  CHECK(h.idle_breakdown.total.launched == h.idle_breakdown.total.kernels);
}

// The same on the exact timestamps: HTA with HTA_DISABLE_NS_ROUNDING=1 prints, for the
// ResNet-50 trace, stream 7 host_wait 355484.56 us over 1,742 gaps and kernel_wait 1414.17 us
// over 759, stream 40 host_wait 381488.45 us over 13. HTA holds each timestamp (about 4.46e12
// us) as a double, within half an ulp (0.5 ns) of its text, so each gap it sums is within 2 ns
// of the exact one; stepsim's are exact picoseconds. Allowed: 2 ns a gap, and HTA's rounding to
// two decimals.
TEST_CASE("HTA's idle breakdown of the resnet-50 trace on the exact timestamps equals HTA's unrounded figures") {
  const analysis::HtaMetrics h = analysis::load_trace(trace("resnet50-ddp-a100-rank0of2.json.gz")).hta.at(0);
  REQUIRE(h.idle_breakdown_exact.has_value());
  const auto& streams = h.idle_breakdown_exact->streams;
  REQUIRE(streams.size() == 2);
  const auto near = [](Time t, double printed_us, int gaps) {
    return std::fabs(t.seconds() * 1e6 - printed_us) <= gaps * 0.002 + 0.005;
  };
  CHECK(streams[0].stream == 7);
  CHECK(near(streams[0].host_wait, 355484.56, 1742));
  CHECK(near(streams[0].kernel_wait, 1414.17, 759));
  CHECK(streams[0].other == Time::zero());
  CHECK(streams[1].stream == 40);
  CHECK(near(streams[1].host_wait, 381488.45, 13));
  CHECK(streams[1].kernel_wait == Time::zero());
  CHECK(streams[1].other == Time::zero());
}

// Each ProfilerStep's own host wait on the compute stream (stream 7), by HTA's rule on the
// exact timestamps, each gap in the step whose annotation holds the launch of the kernel after
// it, the last step too. The oracle is a plain-Python reading of the raw events (decimal
// arithmetic on the trace's text): 870, 871 and 872 host-wait gaps summing to 175666.220,
// 179818.327 and 184606.770 us. Steps 4 and 5 together are HTA's window, whose unrounded
// figure HTA prints as 355484.56 us over 1,742 gaps (2 ns a gap allowed, as above).
TEST_CASE("each ProfilerStep's host wait on the compute stream of the resnet-50 trace") {
  const analysis::HtaMetrics h = analysis::load_trace(trace("resnet50-ddp-a100-rank0of2.json.gz")).hta.at(0);
  REQUIRE(h.step_host_wait.size() == 3);
  const std::pair<const char*, std::int64_t> pinned[] = {
      {"ProfilerStep#4", 175666220000}, {"ProfilerStep#5", 179818327000}, {"ProfilerStep#6", 184606770000}};
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(pinned[i].first);
    CHECK(h.step_host_wait[i].step == pinned[i].first);
    CHECK(h.step_host_wait[i].host_wait.ps() == pinned[i].second);
  }
  const Time window = h.step_host_wait[0].host_wait + h.step_host_wait[1].host_wait;
  CHECK(std::fabs(window.seconds() * 1e6 - 355484.56) <= 1742 * 0.002 + 0.005);
}
