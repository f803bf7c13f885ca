// A timeline written by report::write_trace and read back by the trace reader measures the
// same: `analyze` on stepsim's own traces agrees with the simulator's report.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/step_analysis.hpp"
#include "analysis/trace_timeline.hpp"
#include "report/report_io.hpp"

using namespace stepsim;

namespace {

Interval make(std::int64_t start_us, std::int64_t end_us, std::uint16_t stream, Activity a) {
  Interval iv;
  iv.start = Time::from_us(static_cast<double>(start_us));
  iv.end = Time::from_us(static_cast<double>(end_us));
  iv.stream = stream;
  iv.activity = a;
  return iv;
}

Interval comm(std::int64_t start_us, std::int64_t end_us, std::uint16_t stream, CommKind kind, CollOp op,
              std::int32_t group) {
  Interval iv = make(start_us, end_us, stream, Activity::comm);
  iv.kind = kind;
  iv.op = op;
  iv.group = group;
  iv.bytes = Bytes::mib(25);
  return iv;
}

// Two ranks: forward/backward compute, TP AllReduce inside backward, DP buckets that are
// partly exposed, a memcpy, an optimizer step, and a pipeline bubble on rank 1.
Timeline hand_made() {
  Timeline t;
  t.groups.push_back({"tp", CommKind::tp, 2, "[0, 1]"});
  t.groups.push_back({"dp", CommKind::dp, 2, "[0, 1]"});
  for (int r = 0; r < 2; ++r) {
    RankTimeline rank;
    rank.rank = r;
    rank.streams = {"compute", "tp", "dp"};
    Interval fwd = make(0, 100, 0, Activity::compute);
    fwd.phase = Phase::forward;
    fwd.name = t.intern("forward");
    Interval bwd = make(100, 300, 0, Activity::compute);
    bwd.phase = Phase::backward;
    bwd.name = t.intern("backward");
    Interval opt = make(400, 450, 0, Activity::compute);
    opt.phase = Phase::optimizer;
    rank.intervals = {fwd,
                      comm(120, 140, 1, CommKind::tp, CollOp::allreduce, 0),
                      bwd,
                      comm(250, 330, 2, CommKind::dp, CollOp::allreduce, 1),
                      comm(330, 380, 2, CommKind::dp, CollOp::allreduce, 1),
                      make(380, 390, 0, Activity::memory),
                      opt};
    if (r == 1) rank.intervals.push_back(make(450, 470, 0, Activity::bubble));
    t.ranks.push_back(rank);
  }
  t.steps.push_back({"step", Time::zero(), Time::from_us(480)});
  return t;
}

void check_same(const report::WindowMetrics& a, const report::WindowMetrics& b) {
  CHECK(a.length == b.length);
  CHECK(a.compute == b.compute);
  CHECK(a.optimizer == b.optimizer);
  CHECK(a.comm_union == b.comm_union);
  CHECK(a.overlap == b.overlap);
  CHECK(a.bubble == b.bubble);
  CHECK(a.memory_only == b.memory_only);
  CHECK(a.idle == b.idle);
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    CHECK(a.exposed[k] == b.exposed[k]);
    CHECK(a.busy[k] == b.busy[k]);
  }
}

}  // namespace

TEST_CASE("a timeline written as a trace and read back measures the same") {
  const Timeline original = hand_made();
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "stepsim-analysis-round-trip.json";
  {
    std::ofstream out(path);
    report::write_trace(original, out);
  }
  const analysis::LoadedTrace back = analysis::load_trace(path.string());
  std::filesystem::remove(path);
  REQUIRE(back.timeline.ranks.size() == 2);
  REQUIRE(back.timeline.steps.size() == 1);
  CHECK(back.timeline.steps[0].name == "step");
  const StepWindow& w0 = original.steps[0];
  const StepWindow& w1 = back.timeline.steps[0];
  CHECK(w1.end - w1.start == w0.end - w0.start);
  for (std::size_t r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const report::WindowMetrics m0 = report::measure(original.ranks[r], w0.start, w0.end);
    const report::WindowMetrics m1 = report::measure(back.timeline.ranks[r], w1.start, w1.end);
    check_same(m0, m1);
  }
  // The hand-made numbers, so that the test cannot pass on two equally wrong readings.
  const report::WindowMetrics m = report::measure(back.timeline.ranks[1], w1.start, w1.end);
  CHECK(m.compute == Approx(300e-6));
  CHECK(m.optimizer == Approx(50e-6));
  CHECK(m.overlap == Approx(70e-6));  // TP 120-140 and DP 250-300 under backward
  CHECK(m.exposed[static_cast<int>(CommKind::dp)] == Approx(80e-6));
  CHECK(m.comm_union == Approx(150e-6));
  CHECK(m.memory_only == Approx(10e-6));
  CHECK(m.bubble == Approx(20e-6));
  CHECK(m.idle == Approx(20e-6));  // 390-400 and 470-480
  REQUIRE(back.timeline.groups.size() == 2);
  CHECK(back.timeline.groups[1].name == "dp");
  CHECK(back.timeline.groups[1].kind == CommKind::dp);
  CHECK(back.timeline.groups[1].size == 2);
  const analysis::TraceMetrics tm = analysis::measure_steps(back.timeline, 0, std::nullopt);
  REQUIRE(tm.collectives.size() == 3);
  CHECK(tm.collectives[1].bytes == Bytes::mib(25));
  CHECK(tm.collectives[1].op == CollOp::allreduce);
}
