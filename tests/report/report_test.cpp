// make_report() and write_json(): the contract's numbers and exactly its field names.
#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <set>
#include <sstream>

#include "report/report_io.hpp"
#include "timeline_builder.hpp"

namespace stepsim {
namespace {

using test::comm_us;
using test::compute_us;
using test::rank_of;

// Rank 0 finishes at 90 us, rank 1 at 100 us: rank 1 is the critical path.
Timeline two_rank_timeline() {
  Timeline t;
  t.ranks.push_back(rank_of({compute_us(0, 60), comm_us(50, 90, CommKind::dp)}, 0));
  t.ranks.push_back(
      rank_of({compute_us(0, 60), comm_us(40, 80, CommKind::tp, 2), compute_us(80, 100, Phase::optimizer)}, 1));
  t.steps.push_back({"step", Time::zero(), Time::from_us(100)});
  return t;
}

report::ReportInputs inputs() {
  report::ReportInputs in;
  in.version = "0.1.0";
  in.gpus = 8;
  in.tokens_per_step = 8 * 2048;
  in.samples_per_step = 8;
  in.model_flops_per_step = 8e9;
  in.peak_flops_per_gpu = FlopRate::tflops(100);
  in.config_json = R"({"parallel": {"tp": 2, "dp": 4}, "data_parallel": {"bucket_cap_mb": 25.0},})";
  return in;
}

std::string json_of(const Report& r) {
  std::ostringstream out;
  report::write_json(r, out);
  return out.str();
}

std::set<std::string> keys(const boost::json::value& v) {
  std::set<std::string> s;
  for (const auto& kv : v.as_object()) s.emplace(kv.key());
  return s;
}

TEST_CASE("the report measures the rank that finishes last") {
  const Report r = report::make_report(two_rank_timeline(), inputs());
  CHECK(r.step_time_s == Approx(100e-6));
  CHECK(r.breakdown_s.compute == Approx(60e-6));
  CHECK(r.breakdown_s.optimizer == Approx(20e-6));
  CHECK(r.breakdown_s.exposed_comm[static_cast<std::size_t>(CommKind::tp)] == Approx(20e-6));
  CHECK(r.breakdown_s.exposed_comm[static_cast<std::size_t>(CommKind::dp)] == 0);
  CHECK(r.comm_s[static_cast<std::size_t>(CommKind::tp)] == Approx(40e-6));
  CHECK(r.overlap.hidden_fraction == Approx(0.5));
  CHECK(r.overlap.exposed_fraction_of_step == Approx(0.2));
  CHECK(r.notes.front() == "breakdown measured on rank 1");
}

TEST_CASE("the breakdown adds up to the step time") {
  const Report r = report::make_report(two_rank_timeline(), inputs());
  const Breakdown& b = r.breakdown_s;
  CHECK(b.compute + b.exposed_total() + b.bubble + b.optimizer + b.other == Approx(r.step_time_s));
}

TEST_CASE("throughput and MFU follow from the step time") {
  const Report r = report::make_report(two_rank_timeline(), inputs());
  CHECK(r.throughput.tokens_per_s == Approx(8 * 2048 / 100e-6));
  CHECK(r.throughput.samples_per_s == Approx(8 / 100e-6));
  CHECK(r.throughput.tflops_per_gpu == Approx(8e9 / 100e-6 / 8 * 1e-12));
  CHECK(r.throughput.mfu == Approx(r.throughput.tflops_per_gpu / 100));
}

TEST_CASE("a chosen representative rank overrides the critical path") {
  report::ReportInputs in = inputs();
  in.representative = 0;
  const Report r = report::make_report(two_rank_timeline(), in);
  CHECK(r.breakdown_s.exposed_comm[static_cast<std::size_t>(CommKind::dp)] == Approx(30e-6));
  CHECK(r.breakdown_s.other == Approx(10e-6));
}

// While an NCCL kernel runs, compute advances at 1 / 1.5 of its speed: of the 20 us it runs
// beside one, a third is the slowdown. A userbuffers transfer beside it slows nothing.
TEST_CASE("the compute slowdown counts compute beside NCCL kernels only") {
  Interval transfer = comm_us(40, 60, CommKind::tp, 2);
  transfer.slows_compute = false;
  Timeline t;
  t.ranks.push_back(rank_of({compute_us(0, 60), comm_us(10, 30, CommKind::dp), transfer}));
  t.steps.push_back({"step", Time::zero(), Time::from_us(60)});
  report::ReportInputs in = inputs();
  in.comm_slowdown = 0.5;
  CHECK(report::make_report(t, in).compute_slowdown_s == Approx(20e-6 / 3));
}

// With the slowdown derived from what each NCCL kernel takes, the engine measured the time
// the rank's compute lost as it ran: the report says that, not the fitted fraction's figure.
TEST_CASE("the derived compute slowdown is the time the engine measured") {
  Timeline t;
  t.ranks.push_back(rank_of({compute_us(0, 60), comm_us(10, 30, CommKind::dp)}));
  t.ranks[0].compute_slowed = Time::from_us(3);
  t.steps.push_back({"step", Time::zero(), Time::from_us(60)});
  report::ReportInputs in = inputs();
  in.comm_slowdown = 0.5;
  in.derived_slowdown = true;
  CHECK(report::make_report(t, in).compute_slowdown_s == Approx(3e-6));
  in.derived_slowdown = false;
  CHECK(report::make_report(t, in).compute_slowdown_s == Approx(20e-6 / 3));
}

// Compute 0–10 us; a copy 5–30 us with the next compute, 30–40 us, issued at 8 us: the 20 us
// between is the GPU waiting for the copy. A copy 40–48 us; the next compute, 50–60 us, issued
// at 45 us: 40–45 us is the GPU waiting for the host (a copy running does not make it the
// copy's), 45–48 us for the copy, 48–50 us for nothing the breakdown names. other = 20 + 8 + 2.
TEST_CASE("the GPU waiting for its copies is named apart from its wait for the host") {
  Timeline t;
  t.ranks.push_back(rank_of(
      {compute_us(0, 10), test::memory_us(5, 30), compute_us(30, 40), test::memory_us(40, 48), compute_us(50, 60)}));
  const auto us = [](double v) { return Time::from_us(v); };
  t.ranks[0].issues = {{us(0), us(1), 0, true, false},
                       {us(4), us(1), 1, true, false},
                       {us(8), us(1), 2, true, false},
                       {us(9), us(1), 3, true, false},
                       {us(45), us(1), 4, true, false}};
  t.steps.push_back({"step", Time::zero(), us(60)});
  const Report r = report::make_report(t, inputs());
  CHECK(r.breakdown_s.other == Approx(30e-6).epsilon(1e-12));
  CHECK(r.host.breakdown_gpu_wait_s == Approx(5e-6).epsilon(1e-12));
  CHECK(r.offload_wait_s == Approx(23e-6).epsilon(1e-12));
  const auto v = boost::json::parse(json_of(r));
  CHECK(v.at("offload_wait_s").as_double() == Approx(23e-6).epsilon(1e-12));
  std::ostringstream table;
  report::write_table(r, table);
  CHECK(table.str().find("    GPU waiting for the host        5.000 us       8.3 %\n"
                         "    waiting for offload copies     23.000 us      38.3 %\n") != std::string::npos);
}

TEST_CASE("a timeline without step windows is measured over its whole span") {
  Timeline t = two_rank_timeline();
  t.steps.clear();
  const StepWindow w = report::report_window(t);
  CHECK(w.start == Time::zero());
  CHECK(w.end == Time::from_us(100));
}

TEST_CASE("unmodelled memory is reported as zeros with a note") {
  const Report r = report::make_report(two_rank_timeline(), inputs());
  CHECK_FALSE(r.memory_bytes.modelled);
  CHECK(r.notes.back() == "memory not modelled: memory_bytes are zero");
}

TEST_CASE("the JSON report has exactly the contract's fields") {
  const auto v = boost::json::parse(json_of(report::make_report(two_rank_timeline(), inputs())));
  const std::set<std::string> kinds{"tp", "cp", "ep", "dp", "fsdp", "pp"};
  CHECK(keys(v) == std::set<std::string>{"stepsim_version", "gpus", "step_time_s", "throughput", "breakdown_s",
                                         "comm_s", "overlap", "memory_bytes", "config", "notes",
                                         // added after the first contract, never renamed
                                         "compute_slowdown_s", "stages", "cost", "flop_convention", "provenance",
                                         "advice", "ranks", "offload_wait_s"});
  CHECK(keys(v.at("ranks")) == std::set<std::string>{"simulated", "step_time_s", "compute_s", "rendezvous_wait_s",
                                                     "rendezvous_wait_max_s", "straggler"});
  CHECK(keys(v.at("ranks").at("rendezvous_wait_s")) == kinds);
  CHECK(keys(v.at("ranks").at("straggler")) == std::set<std::string>{"rank", "caused_wait_s", "cause"});
  CHECK(keys(v.at("throughput")) == std::set<std::string>{"tokens_per_s", "samples_per_s", "tflops_per_gpu", "mfu",
                                                          "hardware_tflops_per_gpu", "hfu"});
  CHECK(keys(v.at("cost")) == std::set<std::string>{"gpu_power_w", "energy_per_step_j", "energy_per_mtoken_kwh",
                                                    "gpu_hour_price", "cost_per_step", "cost_per_mtoken"});
  CHECK(keys(v.at("breakdown_s")) == std::set<std::string>{"compute", "exposed_comm", "bubble", "optimizer", "other"});
  CHECK(keys(v.at("breakdown_s").at("exposed_comm")) == kinds);
  CHECK(keys(v.at("comm_s")) == kinds);
  CHECK(keys(v.at("overlap")) == std::set<std::string>{"hidden_fraction", "exposed_fraction_of_step"});
  CHECK(keys(v.at("memory_bytes")) == std::set<std::string>{"peak", "params", "grads", "optimizer", "activations",
                                                            "buffers", "reserved", "device", "headroom", "capacity",
                                                            "fits"});
  CHECK(v.at("config").at("parallel").at("dp").as_int64() == 4);
  CHECK(v.at("gpus").as_int64() == 8);
  CHECK(v.at("memory_bytes").at("fits").as_bool());
}

TEST_CASE("communication of unknown kind appears as other instead of vanishing") {
  Timeline t = two_rank_timeline();
  t.ranks[1].intervals.push_back(comm_us(90, 95, CommKind::other));
  const auto v = boost::json::parse(json_of(report::make_report(t, inputs())));
  CHECK(v.at("comm_s").at("other").as_double() == Approx(5e-6));
}

TEST_CASE("two writes of one report are byte-identical") {
  const Report r = report::make_report(two_rank_timeline(), inputs());
  CHECK(json_of(r) == json_of(r));
}

TEST_CASE("the JSON report is laid out as documented") {
  Report r;
  r.stepsim_version = "0.1.0";
  r.gpus = 2;
  r.step_time_s = 13.75;
  r.breakdown_s.compute = 1.5e-5;
  r.config_json = "{}";
  r.notes = {"say \"hi\""};
  const std::string text = json_of(r);
  CHECK(text.starts_with("{\n  \"stepsim_version\": \"0.1.0\",\n  \"gpus\": 2,\n  \"step_time_s\": 13.75,\n"));
  CHECK(text.find("\"compute\": 1.5e-05,") != std::string::npos);
  CHECK(text.find("\"config\": {},") != std::string::npos);
  CHECK(text.find("\"notes\": [\n    \"say \\\"hi\\\"\"\n  ],\n") != std::string::npos);
  CHECK(text.find("\"provenance\": [],\n") != std::string::npos);
  CHECK(text.find("\"advice\": {\n    \"cause\": \"\",\n    \"alternatives\": []\n  },\n") != std::string::npos);
  CHECK(text.ends_with(
      "\"straggler\": {\n      \"rank\": null,\n      \"caused_wait_s\": 0,\n      \"cause\": \"\"\n    }\n  }\n}\n"));
}

TEST_CASE("a rank the report does not know is null in the JSON, never a rank number") {
  // No straggler (members arrived together) and no ranks to spread over: JSON's null, since
  // -1 reads as a rank to a consumer that indexes with it.
  const Report none;
  const auto v = boost::json::parse(json_of(none));
  CHECK(v.at("ranks").at("straggler").at("rank").is_null());
  CHECK(v.at("ranks").at("step_time_s").at("min_rank").is_null());
  CHECK(v.at("ranks").at("compute_s").at("max_rank").is_null());
  // A known rank stays a number.
  const auto r = boost::json::parse(json_of(report::make_report(two_rank_timeline(), inputs())));
  CHECK(r.at("ranks").at("step_time_s").at("max_rank").as_int64() == 1);
}

TEST_CASE("the table shows the step, the breakdown and the notes") {
  const Report r = report::make_report(two_rank_timeline(), inputs());
  std::ostringstream out;
  report::write_table(r, out);
  const std::string text = out.str();
  CHECK(text.find("step time") != std::string::npos);
  CHECK(text.find("100.000 us") != std::string::npos);
  CHECK(text.find("20.0 %") != std::string::npos);
  CHECK(text.find("hidden behind compute") != std::string::npos);
  CHECK(text.find("memory not modelled") != std::string::npos);
}

}  // namespace
}  // namespace stepsim
