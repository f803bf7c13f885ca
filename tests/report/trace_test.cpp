// write_trace(): Chrome Trace Event JSON that Perfetto opens and trace tools classify.
#include <catch2/catch.hpp>
#include <random>
#include <sstream>

#include "report/report_io.hpp"
#include "timeline_builder.hpp"
#include "trace_rules.hpp"

namespace stepsim {
namespace {

using test::bubble_us;
using test::comm_us;
using test::compute_us;
using test::memory_us;
using test::rank_of;

Timeline pipeline_timeline() {
  Timeline t;
  t.groups.push_back({"dp", CommKind::dp, 4, "[0, 2, 4, 6]"});
  for (int stage = 0; stage < 2; ++stage) {
    RankTimeline r = rank_of({compute_us(0, 40), comm_us(30, 45, CommKind::dp), bubble_us(45, 60),
                              compute_us(60, 70, Phase::optimizer), memory_us(70, 72)},
                             stage);
    r.label = "rank " + std::to_string(stage) + " (stage " + std::to_string(stage) + ")";
    r.multiplicity = 4;
    r.intervals[0].name = t.intern("layer 0 forward");
    r.intervals[1].name = t.intern("AllReduce dp bucket 3, 25.0 MiB");
    r.intervals[1].group = 0;
    r.intervals[2].name = t.intern("bubble");
    r.memory = {{Time::from_us(0), Bytes::gib(1)}, {Time::from_us(40), Bytes::gib(3)}};
    t.ranks.push_back(r);
  }
  t.steps.push_back({"step", Time::zero(), Time::from_us(72)});
  return t;
}

std::string trace_of(const Timeline& t) {
  std::ostringstream out;
  report::write_trace(t, out);
  return out.str();
}

boost::json::array events_of(const Timeline& t) { return boost::json::parse(trace_of(t)).at("traceEvents").as_array(); }

const boost::json::object* find_event(const boost::json::array& events, std::string_view ph, std::string_view name) {
  for (const auto& v : events) {
    const auto& e = v.as_object();
    if (e.at("ph").as_string() == ph && e.at("name").as_string() == name) return &e;
  }
  return nullptr;
}

TEST_CASE("a simulated timeline gives a trace that follows the Chrome trace rules") {
  const std::string text = trace_of(pipeline_timeline());
  const auto trace = boost::json::parse(text);
  CHECK(test::trace_rule_violations(trace).empty());
  CHECK(trace.at("displayTimeUnit").as_string() == "ms");
  CHECK(trace.at("traceEvents").as_array().size() > 20);
}

TEST_CASE("each rank is a process named by its label") {
  const auto events = events_of(pipeline_timeline());
  std::vector<std::string> names;
  for (const auto& v : events)
    if (v.at("name").as_string() == "process_name") names.emplace_back(v.at("args").at("name").as_string());
  CHECK(names ==
        std::vector<std::string>{"rank 0 (stage 0) [stands for 4 ranks]", "rank 1 (stage 1) [stands for 4 ranks]"});
}

TEST_CASE("communication kernels are named with an nccl prefix and described in args") {
  const auto events = events_of(pipeline_timeline());
  const auto* e = find_event(events, "X", "ncclDevKernel_AllReduce dp bucket 3, 25.0 MiB");
  REQUIRE(e != nullptr);
  const auto& args = e->at("args").as_object();
  CHECK(args.at("kind").as_string() == "dp");
  CHECK(args.at("op").as_string() == "allreduce");
  CHECK(args.at("bytes").as_int64() == 25 * 1048576);
  CHECK(args.at("group").as_string() == "dp");
  CHECK(e->at("ts").as_double() == 30.0);
  CHECK(e->at("dur").as_double() == 15.0);
}

TEST_CASE("a name that already starts with nccl is kept as it is") {
  Timeline t = pipeline_timeline();
  t.ranks[0].intervals[1].name = t.intern("ncclKernel_AllReduce_RING_LL_Sum_float");
  CHECK(find_event(events_of(t), "X", "ncclKernel_AllReduce_RING_LL_Sum_float") != nullptr);
}

TEST_CASE("bubble markers sit on their own thread") {
  const auto events = events_of(pipeline_timeline());
  const auto* bubble = find_event(events, "X", "bubble");
  REQUIRE(bubble != nullptr);
  bool named = false;
  for (const auto& v : events)
    if (v.at("name").as_string() == "thread_name" && v.at("tid") == bubble->at("tid") &&
        v.at("pid") == bubble->at("pid"))
      named = v.at("args").at("name").as_string() == "bubble";
  CHECK(named);
}

TEST_CASE("memory is a counter of allocated bytes") {
  const auto events = events_of(pipeline_timeline());
  const auto* c = find_event(events, "C", "memory");
  REQUIRE(c != nullptr);
  CHECK(c->at("args").at("allocated").as_int64() == 1073741824);
}

TEST_CASE("times are microseconds rounded to the nanosecond") {
  Timeline t;
  RankTimeline r = rank_of({});
  Interval iv{Time::from_ps(1'234'567), Time::from_ps(3'000'400)};
  r.intervals.push_back(iv);
  t.ranks.push_back(r);
  const std::string text = trace_of(t);
  CHECK(text.find("\"ts\":1.235,\"dur\":1.765") != std::string::npos);
}

TEST_CASE("slices that overlap on one stream move to a thread of their own") {
  Timeline t;
  t.ranks.push_back(rank_of({compute_us(0, 10), compute_us(5, 15), compute_us(2, 4), compute_us(12, 20)}));
  const auto trace = boost::json::parse(trace_of(t));
  CHECK(test::trace_rule_violations(trace).empty());
  CHECK(find_event(trace.at("traceEvents").as_array(), "M", "thread_name") != nullptr);
  CHECK(trace_of(t).find("\"name\":\"compute (overlap 1)\"") != std::string::npos);
}

TEST_CASE("names with quotes and control characters are escaped") {
  Timeline t = pipeline_timeline();
  t.ranks[0].intervals[0].name = t.intern("odd \"name\"\n\\ \x01");
  const auto events = events_of(t);
  CHECK(find_event(events, "X", "odd \"name\"\n\\ \x01") != nullptr);
}

TEST_CASE("two writes of a trace are byte-identical") {
  const Timeline t = pipeline_timeline();
  CHECK(trace_of(t) == trace_of(t));
}

TEST_CASE("a large profiler-like timeline still follows the rules") {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::int64_t> gap(0, 5'000'000), len(1'000, 2'000'000);
  Timeline t;
  for (int rank = 0; rank < 4; ++rank) {
    RankTimeline r;
    r.rank = rank;
    r.streams = {"stream 7", "stream 13", "stream 20"};
    for (std::uint16_t s = 0; s < 3; ++s) {
      Time at = Time::zero();
      for (int i = 0; i < 20'000; ++i) {
        at += Time::from_ps(gap(rng));
        Interval iv{at, at + Time::from_ps(len(rng))};
        iv.stream = s;
        iv.activity = s == 0 ? Activity::compute : Activity::comm;
        r.intervals.push_back(iv);
        at = iv.end;
      }
    }
    t.ranks.push_back(std::move(r));
  }
  const auto trace = boost::json::parse(trace_of(t));
  CHECK(test::trace_rule_violations(trace).empty());
  CHECK(trace.at("traceEvents").as_array().size() > 240'000);
}

TEST_CASE("the rule checker rejects slices that overlap without nesting") {
  const auto bad = boost::json::parse(R"({"traceEvents":[
    {"ph":"X","pid":0,"tid":1,"ts":0,"dur":10,"name":"a"},
    {"ph":"X","pid":0,"tid":1,"ts":5,"dur":10,"name":"b"}]})");
  CHECK(test::trace_rule_violations(bad) == std::vector<std::string>{"slices overlap without nesting"});
}

TEST_CASE("the rule checker rejects unnamed threads and communication without the nccl prefix") {
  const auto bad = boost::json::parse(R"({"traceEvents":[
    {"ph":"M","pid":0,"tid":1,"name":"thread_name","args":{}},
    {"ph":"X","pid":0,"tid":1,"ts":0,"dur":1,"cat":"comm","name":"AllReduce"}]})");
  CHECK(test::trace_rule_violations(bad) ==
        std::vector<std::string>{"thread_name without args.name", "comm event not named nccl*: AllReduce"});
}

TEST_CASE("a chosen subset of ranks leaves the others out of the trace") {
  std::ostringstream out;
  report::write_trace(
      pipeline_timeline(), [](int rank) { return rank == 1; }, out);
  const auto trace = boost::json::parse(out.str());
  CHECK(test::trace_rule_violations(trace).empty());
  std::vector<std::string> names;
  for (const auto& v : trace.at("traceEvents").as_array())
    if (v.at("name").as_string() == "process_name") names.emplace_back(v.at("args").at("name").as_string());
  CHECK(names == std::vector<std::string>{"rank 1 (stage 1) [stands for 4 ranks]"});
}

}  // namespace
}  // namespace stepsim
