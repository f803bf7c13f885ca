// Every rank of a job: the simulator's own trace of 8 DDP ranks, split into one file per
// rank with one rank slowed on purpose, read back as a folder of rank traces.
#include <fmt/format.h>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "analysis/job_analysis.hpp"
#include "analysis/trace_timeline.hpp"
#include "cli/run_stepsim.hpp"
#include "cli/simulate_support.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"
#include "stepsim/report.hpp"

using namespace stepsim;

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr int kRanks = 8;

// The trace of one DDP step on 8 ranks (every rank simulated), as JSON.
json::array simulated_events() {
  const SimulationResult sim = simulate(io::load_scenario(
      "ddp-1.3b-64xa100", {"parallel.dp=8", "simulation.ranks=all", "model.layers=4", "training.global_batch=64"}));
  std::ostringstream text;
  report::write_trace(sim.timeline, text);
  return json::parse(text.str()).at("traceEvents").as_array();
}

// One file per rank (its process in stepsim's trace); `slowed` runs `factor` times slower:
// every time of its trace is scaled from the step's start at 0. Returns the start (us) of
// each communication kernel of an unslowed rank.
std::vector<double> write_ranks(const fs::path& dir, int slowed, double factor) {
  const json::array events = simulated_events();
  std::vector<double> comm_starts;
  for (int r = 0; r < kRanks; ++r) {
    json::array mine;
    for (const json::value& v : events) {
      const json::object& e = v.as_object();
      if (e.at("pid").to_number<int>() != r) continue;
      json::object copy = e;
      if (r == slowed && copy.contains("ts")) {
        copy["ts"] = copy["ts"].to_number<double>() * factor;
        if (copy.contains("dur")) copy["dur"] = copy["dur"].to_number<double>() * factor;
      }
      if (r == 0 && copy.contains("cat") && copy["cat"] == "comm")
        comm_starts.push_back(copy["ts"].to_number<double>());
      mine.push_back(std::move(copy));
    }
    std::ofstream(dir / ("rank" + std::to_string(r) + ".json")) << json::serialize(json::object{{"traceEvents", mine}});
  }
  return comm_starts;
}

// A tiny Kineto trace of one rank: one step with a GEMM and an AllReduce over the world
// that starts `late_us` after the others'.
std::string kineto_rank(int rank, int world_size, int late_us) {
  return fmt::format(
      R"trace({{"distributedInfo": {{"backend": "nccl", "rank": {0}, "world_size": {1}}}, "traceEvents": [
    {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 9, "tid": 9, "ts": 1000, "dur": 200}},
    {{"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 1010, "dur": 40, "args": {{"stream": 7}}}},
    {{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
      "pid": 0, "tid": 20, "ts": {2}, "dur": 30, "args": {{"stream": 20, "In msg nelems": 1000, "Out msg nelems": 1000,
      "Group size": {1}, "dtype": "BFloat16", "Process Group Name": "0"}}}}]}})trace",
      rank, world_size, 1060 + late_us);
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("stepsim-job-" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("a rank slowed by 5 % is named the straggler with its lead within 1 %") {
  const TempDir dir;
  constexpr double kSlow = 1.05;
  const std::vector<double> starts = write_ranks(dir.path, 3, kSlow);
  REQUIRE(starts.size() > 10);
  const analysis::JobAnalysis job = analysis::analyze_job(analysis::trace_files(dir.path.string()), std::nullopt, 4);
  REQUIRE(job.ranks.size() == kRanks);
  CHECK(job.ranks[3].rank == 3);
  CHECK(job.ranks[3].mean(job.ranks[3].total.length) ==
        Approx(job.ranks[0].mean(job.ranks[0].total.length) * kSlow).epsilon(1e-6));
  CHECK(job.calls == starts.size());
  REQUIRE(job.stragglers.size() == 1);
  const analysis::Straggler& s = job.stragglers.front();
  CHECK(s.rank == 3);
  CHECK(s.last == starts.size());
  // Rank 3 starts call k at 1.05 t_k, the others at t_k: a lead of 0.05 t_k, which every
  // other rank waits.
  const double expected_us = std::accumulate(starts.begin(), starts.end(), 0.0) * (kSlow - 1);
  CHECK(s.lead.seconds() * 1e6 == Approx(expected_us).epsilon(0.01));
  CHECK(s.mean_lead_s() * 1e6 == Approx(expected_us / static_cast<double>(starts.size())).epsilon(0.01));
  CHECK(s.others_wait.seconds() * 1e6 == Approx(expected_us).epsilon(0.01));
}

TEST_CASE("ranks that start every call together have no straggler") {
  const TempDir dir;
  write_ranks(dir.path, -1, 1.0);
  for (unsigned workers : {1U, 3U}) {
    const analysis::JobAnalysis job =
        analysis::analyze_job(analysis::trace_files(dir.path.string()), std::nullopt, workers);
    CHECK(job.ranks.size() == kRanks);
    CHECK(job.calls > 10);
    CHECK(job.stragglers.empty());
  }
}

TEST_CASE("a broken rank file in a job is reported by name") {
  const TempDir dir;
  write_ranks(dir.path, -1, 1.0);
  std::ofstream(dir.path / "rank5.json") << "{\"traceEvents\": [";
  const std::string broken = (dir.path / "rank5.json").string();
  CHECK_THROWS_WITH(analysis::analyze_job(analysis::trace_files(dir.path.string()), std::nullopt, 2),
                    Catch::Contains(broken) && Catch::Contains("the JSON ends early"));
}

TEST_CASE("stepsim analyze on a folder of rank traces prints every rank and names the straggler") {
  const TempDir dir;
  write_ranks(dir.path, 6, 1.02);
  const testing::Scratch scratch("analyze-job");
  const testing::Run table = scratch.run("analyze " + dir.path.string());
  CHECK(table.status == 0);
  CHECK(table.out.find("8 rank(s)") != std::string::npos);
  CHECK(table.out.find("the others wait most for rank 6") != std::string::npos);
  const testing::Run js = scratch.run("analyze " + dir.path.string() + " --json -");
  REQUIRE(js.status == 0);
  const json::value v = json::parse(js.out);
  CHECK(v.at("ranks").as_array().size() == kRanks);
  CHECK(v.at("stragglers").at(0).at("rank").to_number<int>() == 6);
  CHECK(v.at("across_ranks").at("step_time_s").at("max_rank").to_number<int>() == 6);
  // Several files given one by one are the same job.
  std::string files;
  for (int r = 0; r < kRanks; ++r) files += " " + (dir.path / ("rank" + std::to_string(r) + ".json")).string();
  const testing::Run listed = scratch.run("analyze" + files + " --json -");
  REQUIRE(listed.status == 0);
  CHECK(json::parse(listed.out).at("stragglers").at(0).at("rank").to_number<int>() == 6);
}

TEST_CASE("analyze refuses --rank of several trace arguments and --trace of a job with status 2") {
  const TempDir dir;
  write_ranks(dir.path, -1, 1.0);
  const testing::Scratch scratch("analyze-job-flags");
  const std::string a = (dir.path / "rank0.json").string(), b = (dir.path / "rank1.json").string();
  const testing::Run rank = scratch.run("analyze " + a + " " + b + " --rank 1");
  CHECK(rank.status == 2);
  CHECK(rank.err.find("--rank: picks a rank of one folder or file, not of several TRACE arguments") !=
        std::string::npos);
  const testing::Run trace = scratch.run("analyze " + dir.path.string() + " --trace out.json");
  CHECK(trace.status == 2);
  CHECK(trace.err.find("--trace: several ranks are summarised one at a time") != std::string::npos);
  // One rank of the folder, as before.
  CHECK(scratch.run("analyze " + dir.path.string() + " --rank 2 --trace out.json").status == 0);
}

TEST_CASE("analyze refuses a folder with the traces of two jobs, naming a file of each and their world sizes") {
  const testing::Scratch scratch("analyze-two-jobs");
  const fs::path dir = scratch.file("traces");
  fs::create_directories(dir);
  for (int r = 0; r < 4; ++r)
    std::ofstream(dir / fmt::format("job64-rank{}.json", r)) << kineto_rank(r, 64, r == 2 ? 50 : 0);
  for (int r = 0; r < 2; ++r) std::ofstream(dir / fmt::format("job16-rank{}.json", r)) << kineto_rank(r, 16, 0);
  for (const char* json : {"", " --json -"}) {
    const testing::Run run = scratch.run("analyze " + dir.string() + json);
    INFO(run.err);
    CHECK(run.status == 2);
    CHECK(run.out.empty());
    // Files are read in name order: job16-rank0 sets the world size that job64-rank0 contradicts.
    CHECK(run.err.find((dir / "job64-rank0.json").string() + ": /distributedInfo/world_size: is 64, but " +
                       (dir / "job16-rank0.json").string() + "'s is 16: the traces are of two jobs") !=
          std::string::npos);
  }
}

// Files without distributedInfo are the ranks of their places in the folder. Named rank0.json
// to rank11.json, as people number rank files, rank10.json is rank 10: it came third in the
// plain order of names (rank0, rank1, rank10, ...), and the straggler it holds back every call
// for was reported as rank 2.
TEST_CASE("a folder's rank files without distributedInfo are ranked by the numbers in their names") {
  const TempDir dir;
  for (int r = 0; r < 12; ++r) {
    std::string trace = kineto_rank(r, 12, r == 10 ? 50 : 0);
    trace.erase(1, trace.find("\"traceEvents\"") - 1);  // {"traceEvents": ...}, no distributedInfo
    std::ofstream(dir.path / fmt::format("rank{}.json", r)) << trace;
  }
  const std::vector<std::string> files = analysis::trace_files(dir.path.string());
  REQUIRE(files.size() == 12);
  for (int r = 0; r < 12; ++r)
    CHECK(files[static_cast<std::size_t>(r)] == (dir.path / fmt::format("rank{}.json", r)).string());
  const analysis::JobAnalysis job = analysis::analyze_job(files, std::nullopt, 2);
  REQUIRE(job.stragglers.size() == 1);
  CHECK(job.stragglers.front().rank == 10);
  CHECK(job.ranks[10].file == (dir.path / "rank10.json").string());
}

TEST_CASE("analyze refuses a rank given by two files, naming both") {
  const testing::Scratch scratch("analyze-rank-twice");
  const fs::path dir = scratch.file("traces");
  fs::create_directories(dir);
  for (int r = 0; r < 4; ++r) std::ofstream(dir / fmt::format("rank{}.json", r)) << kineto_rank(r, 16, 0);
  std::ofstream(dir / "rank3-copy.json") << kineto_rank(3, 16, 40);
  const testing::Run run = scratch.run("analyze " + dir.string());
  INFO(run.err);
  CHECK(run.status == 2);
  CHECK(run.out.empty());
  CHECK(run.err.find((dir / "rank3.json").string() + ": /distributedInfo/rank: rank 3 is also in " +
                     (dir / "rank3-copy.json").string() + ": a job's traces hold each rank once") != std::string::npos);
  // One rank of such a folder is no clearer: --rank reads the folder as one job too.
  const testing::Run one = scratch.run("analyze " + dir.string() + " --rank 0");
  CHECK(one.status == 2);
  CHECK(one.err.find("rank 3 is also in") != std::string::npos);
  const std::string rank2 = (dir / "rank2.json").string();
  const testing::Run twice = scratch.run("analyze " + rank2 + " " + rank2);
  CHECK(twice.status == 2);
  CHECK(twice.err.find(rank2 + ": is given twice") != std::string::npos);
  // Without the copy the four ranks are one job (a part of its 16), every call started together.
  fs::remove(dir / "rank3-copy.json");
  const testing::Run job = scratch.run("analyze " + dir.string() + " --json -");
  INFO(job.err);
  REQUIRE(job.status == 0);
  const json::value v = json::parse(job.out);
  CHECK(v.at("ranks").as_array().size() == 4);
  CHECK(v.at("stragglers").as_array().empty());
}

namespace {

// A Kineto trace of one rank of `world_size` over ProfilerStep#first and #first+1, each a
// GEMM and an AllReduce of the world.
std::string two_steps(int rank, int world_size, int first) {
  std::string events;
  for (int s = 0; s < 2; ++s) {
    const int at = 1000 + 200 * s;
    events += fmt::format(
        R"trace({}{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{}", "pid": 9, "tid": 9, "ts": {}, "dur": 200}},
    {{"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": {}, "dur": 40, "args": {{"stream": 7}}}},
    {{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": 0, "tid": 20, "ts": {},
      "dur": 30, "args": {{"stream": 20, "Group size": {}, "Process Group Name": "0"}}}})trace",
        s == 0 ? "" : ",\n    ", first + s, at, at + 10, at + 60, world_size);
  }
  return fmt::format(
      R"({{"distributedInfo": {{"backend": "nccl", "rank": {}, "world_size": {}}}, "traceEvents": [{}]}})", rank,
      world_size, events);
}

}  // namespace

TEST_CASE("ranks profiled over different steps are said to share none, not shown as without stragglers") {
  const testing::Scratch scratch("analyze-no-shared-step");
  const fs::path dir = scratch.file("traces");
  fs::create_directories(dir);
  std::ofstream(dir / "rank0.json") << two_steps(0, 2, 1);
  std::ofstream(dir / "rank1.json") << two_steps(1, 2, 7);
  const analysis::JobAnalysis job = analysis::analyze_job(analysis::trace_files(dir.string()), std::nullopt, 2);
  CHECK(job.calls == 0);
  CHECK(job.stragglers.empty());
  CHECK(job.unshared == std::vector<int>{0, 1});
  const testing::Run table = scratch.run("analyze " + dir.string());
  REQUIRE(table.status == 0);
  CHECK(table.out.find("note: the ranks share no step (rank 0 ProfilerStep#1 to ProfilerStep#2, rank 1 "
                       "ProfilerStep#7 to ProfilerStep#8): no collective call can be matched across them") !=
        std::string::npos);
  const testing::Run js = scratch.run("analyze " + dir.string() + " --json -");
  REQUIRE(js.status == 0);
  CHECK(json::parse(js.out).at("ranks_sharing_no_step").as_array().size() == 2);
  // A third rank over steps 1 and 2 shares them with rank 0: their two AllReduce calls match,
  // and rank 1 alone is left out.
  for (const char* world : {"rank0.json", "rank1.json"}) fs::remove(dir / world);
  std::ofstream(dir / "rank0.json") << two_steps(0, 3, 1);
  std::ofstream(dir / "rank1.json") << two_steps(1, 3, 7);
  std::ofstream(dir / "rank2.json") << two_steps(2, 3, 1);
  const analysis::JobAnalysis three = analysis::analyze_job(analysis::trace_files(dir.string()), std::nullopt, 2);
  CHECK(three.calls == 2);
  CHECK(three.unshared == std::vector<int>{1});
  const testing::Run partial = scratch.run("analyze " + dir.string());
  REQUIRE(partial.status == 0);
  CHECK(partial.out.find("note: a rank shares no step with the other ranks (rank 1 ProfilerStep#7 to "
                         "ProfilerStep#8): its collective calls are matched with none") != std::string::npos);
}

TEST_CASE("one rank of a folder mixing two jobs is refused as two jobs, as the whole folder is") {
  const testing::Scratch scratch("analyze-rank-two-jobs");
  const fs::path dir = scratch.file("mixed");
  fs::create_directories(dir);
  for (const char* name : {"recsys-a100-rank0of16.json.gz", "recsys-a100-rank3of8.json.gz"})
    fs::copy_file(fs::path(STEPSIM_TEST_DATA) / "traces" / name, dir / name);
  const std::string two_jobs = (dir / "recsys-a100-rank3of8.json.gz").string() +
                               ": /distributedInfo/world_size: is 8, but " +
                               (dir / "recsys-a100-rank0of16.json.gz").string() +
                               "'s is 16: the traces are of two jobs (give one job's rank files)";
  for (const char* rank : {"", " --rank 0", " --rank 99"}) {
    INFO(rank);
    const testing::Run run = scratch.run("analyze " + dir.string() + rank);
    CHECK(testing::refusal(run, two_jobs).empty());
  }
}

TEST_CASE(
    "analyze picks with --rank the global rank that distributedInfo gives, and refuses one not held naming those "
    "held") {
  const testing::Scratch scratch("analyze-global-rank");
  const fs::path dir = scratch.file("ranks");
  fs::create_directories(dir);
  // Ranks 2 and 3 of a job of 4; rank 3's AllReduce starts 50 us late (1110 instead of 1060).
  std::ofstream(dir / "a.json") << kineto_rank(3, 4, 50);
  std::ofstream(dir / "b.json") << kineto_rank(2, 4, 0);
  const testing::Run three = scratch.run("analyze " + dir.string() + " --rank 3 --json -");
  INFO(three.err);
  REQUIRE(three.status == 0);
  const json::value v = json::parse(three.out);
  CHECK(v.at("rank").as_int64() == 3);
  CHECK(v.at("source").as_string() == (dir / "a.json").string());
  CHECK(v.at("collectives").at(0).at("start_s").as_double() == Approx(100e-6));  // 1110 - the gemm's 1010
  CHECK(scratch.run("analyze " + dir.string() + " --rank 2").out.find("measured on rank 2") != std::string::npos);
  for (const char* rank : {"0", "1"}) {
    INFO(rank);
    const testing::Run missing = scratch.run("analyze " + dir.string() + " --rank " + rank);
    CHECK(testing::refusal(missing, "stepsim: error: <command line>: --rank: " + dir.string() + " holds no rank " +
                                        rank + ": it holds ranks 2 and 3 (as its distributedInfo says)")
              .empty());
  }
  // One file alone is measured at its rank, and --rank names that rank, not an index.
  const std::string a = (dir / "a.json").string();
  CHECK(scratch.run("analyze " + a).out.find("(rank 3 of 4, nccl), 1 step, measured on rank 3") != std::string::npos);
  CHECK(scratch.run("analyze " + a + " --rank 3").status == 0);
  CHECK(testing::refusal(scratch.run("analyze " + a + " --rank 0"), "holds no rank 0: it holds rank 3").empty());
  // Files without distributedInfo are numbered by name: c.json is rank 0, d.json rank 1.
  const fs::path anon = scratch.file("anonymous");
  fs::create_directories(anon);
  auto without_info = [](const std::string& text) { return text.substr(text.find("\"traceEvents\"") - 1); };
  std::ofstream(anon / "d.json") << "{" + without_info(kineto_rank(3, 4, 50));
  std::ofstream(anon / "c.json") << "{" + without_info(kineto_rank(2, 4, 0));
  const testing::Run second = scratch.run("analyze " + anon.string() + " --rank 1 --json -");
  INFO(second.err);
  REQUIRE(second.status == 0);
  CHECK(json::parse(second.out).at("source").as_string() == (anon / "d.json").string());
  CHECK(testing::refusal(scratch.run("analyze " + anon.string() + " --rank 2"),
                         "holds no rank 2: it holds ranks 0 and 1 (a file without distributedInfo is numbered by its "
                         "place among the files)")
            .empty());
}

TEST_CASE("stepsim's trace keeps apart the process groups that share a name, and each group's calls match alone") {
  // TP 2 x DP 2: the TP groups [0, 1] and [2, 3] are both named "tp", the DP groups "dp".
  const SimulationResult sim =
      simulate(io::load_scenario("ddp-1.3b-64xa100", {"parallel.tp=2", "parallel.dp=2", "simulation.ranks=all",
                                                      "model.layers=4", "training.global_batch=16"}));
  // Every member of a group holds each of its calls, so a trace of every rank has as many
  // calls as communication intervals, each divided by its group's size.
  double expected_calls = 0;
  for (const RankTimeline& r : sim.timeline.ranks)
    for (const Interval& iv : r.intervals)
      if (iv.activity == Activity::comm)
        expected_calls += 1.0 / sim.timeline.groups.at(static_cast<std::size_t>(iv.group)).size;
  const testing::Scratch scratch("analyze-group-ranks");
  const std::string path = scratch.file("tp.json").string();
  {
    std::ofstream out(path);
    report::write_trace(sim.timeline, out);
  }
  const analysis::LoadedTrace back = analysis::load_trace(path);
  std::vector<std::string> tp;
  for (const ProcessGroup& g : back.timeline.groups)
    if (g.name == "tp") tp.push_back(g.ranks);
  std::sort(tp.begin(), tp.end());
  CHECK(tp == std::vector<std::string>{"[0, 1]", "[2, 3]"});
  const analysis::JobAnalysis job = analysis::analyze_job({path}, std::nullopt, 1);
  REQUIRE(job.ranks.size() == 4);
  CHECK(job.calls > 10);
  CHECK(static_cast<double>(job.calls) == expected_calls);
}

TEST_CASE("a rank that reaches its collectives late is the straggler of stepsim's traces, as the report says") {
  // Eight DDP ranks, every one simulated, rank 5 computing at 0.8x: every AllReduce's data
  // starts at once on all members, the others having waited at the rendezvous for rank 5.
  const SimulationResult sim = simulate(io::load_scenario(
      "ddp-1.3b-64xa100", {"parallel.dp=8", "simulation.ranks=all", "model.layers=4", "training.global_batch=64",
                           R"(simulation.variation.gpu_speed=[{"rank": 5, "factor": 0.8}])"}));
  REQUIRE(sim.report.ranks.straggler.rank == 5);
  std::size_t calls = 0;
  for (const Interval& iv : sim.timeline.ranks.at(0).intervals) calls += iv.activity == Activity::comm ? 1 : 0;
  // Two files of four ranks each, as `simulate --trace-ranks 0-3` and `4-7` write them.
  const TempDir dir;
  for (const auto& [name, first] : {std::pair{"ranks0-3.json", 0}, std::pair{"ranks4-7.json", 4}}) {
    std::ofstream out(dir.path / name);
    const int from = first;  // clang cannot capture a structured binding
    report::write_trace(
        sim.timeline, [from](int rank) { return rank >= from && rank < from + 4; }, out, kRanks);
  }
  const analysis::JobAnalysis job = analysis::analyze_job(analysis::trace_files(dir.path.string()), std::nullopt, 2);
  REQUIRE(job.ranks.size() == kRanks);
  CHECK(job.calls == calls);
  REQUIRE(job.stragglers.size() == 1);
  const analysis::Straggler& s = job.stragglers.front();
  CHECK(s.rank == 5);
  CHECK(s.last == calls);
  // The report charges rank 5 with the longest wait of a peer at each call, the analysis with
  // the mean wait of the others: the same where the others arrive together, as ranks of equal
  // speed do here. The trace gives each arrival in whole nanoseconds (0.5 ns off at most), so
  // each call's wait may differ by 1 ns.
  CHECK(sim.report.ranks.straggler.caused_wait_s > 0.05);
  CHECK(s.others_wait.seconds() ==
        Approx(sim.report.ranks.straggler.caused_wait_s).margin(static_cast<double>(calls) * 1e-9));
}

namespace {

// The row of `stream` in `analyze FILE`'s idle breakdown, without its label: the figures.
std::string idle_figures(const std::string& table, const std::string& stream) {
  const std::string head = fmt::format("    {:<10} ", stream);
  const std::size_t at = table.find("\n" + head);
  if (at == std::string::npos) return "no row for stream " + stream;
  const std::size_t begin = at + 1 + head.size();
  return table.substr(begin, table.find('\n', begin) - begin);
}

}  // namespace

// HolisticTraceAnalysis' get_idle_time_breakdown over several ranks is a row per rank and
// stream. The oracle of each rank is `analyze` of its file alone; of the mean across ranks,
// those files' figures added up by hand. Eight DDP ranks of the eager GPT-3 Small (the GPU
// waits for the host most of the step), every rank's Kineto trace with its host's side, rank 5
// computing at twice the speed: it waits for its host the longest.
TEST_CASE("analyze of a folder of Kineto ranks gives each rank's idle breakdown as analyze of its file alone") {
  const Scenario s = io::load_scenario_text(test::kEagerGpt3Small, "eager.json",
                                            {"simulation.ranks=all", "model.layers=2", "training.global_batch=8",
                                             R"(simulation.variation.gpu_speed=[{"rank": 5, "factor": 2}])"});
  SimulateOptions options;
  options.host_issues = true;
  const SimulationResult sim = simulate(s, options);
  REQUIRE(sim.timeline.ranks.size() == kRanks);
  const testing::Scratch scratch("analyze-job-idle");
  const fs::path dir = scratch.file("ranks");
  fs::create_directories(dir);
  for (int r = 0; r < kRanks; ++r) {
    std::ofstream out(dir / fmt::format("rank{}.json", r));
    report::write_kineto_trace(sim.timeline, r, "H100", out, report::collective_dtypes(s));
  }
  const testing::Run job = scratch.run("analyze " + dir.string() + " --json -");
  INFO(job.err);
  REQUIRE(job.status == 0);
  const json::value v = json::parse(job.out);
  const testing::Run table = scratch.run("analyze " + dir.string());
  REQUIRE(table.status == 0);
  CHECK(table.out.find("idle time breakdown (HolisticTraceAnalysis' get_idle_time_breakdown per rank and stream)") !=
        std::string::npos);
  double idle = 0, host = 0, kernel = 0, other = 0, most = -1;
  int most_rank = -1;
  for (int r = 0; r < kRanks; ++r) {
    INFO("rank " << r);
    const std::string file = (dir / fmt::format("rank{}.json", r)).string();
    const testing::Run alone = scratch.run("analyze " + file + " --json -");
    REQUIRE(alone.status == 0);
    const json::value one = json::parse(alone.out).at("hta").at("idle_time_breakdown");
    REQUIRE(one.at("available").as_bool());
    const json::value& mine = v.at("ranks").at(static_cast<std::size_t>(r));
    CHECK(mine.at("rank").to_number<int>() == r);
    CHECK(mine.at("idle_time_breakdown") == one);
    // The text: each stream's figures as analyze of the file prints them, after the rank and
    // the stream.
    const std::string text = scratch.run("analyze " + file).out;
    const json::array& streams = one.at("streams").as_array();
    REQUIRE(streams.size() >= 2);  // compute and communication
    for (const json::value& st : streams) {
      const std::string id = fmt::format("{}", st.at("stream").to_number<std::int64_t>());
      INFO("stream " << id);
      const std::string figures = idle_figures(text, id);
      CHECK(table.out.find(fmt::format("\n  {:>6} {:>9} {}\n", r, id, figures)) != std::string::npos);
    }
    CHECK(table.out.find(fmt::format("\n  {:>6} {:>9} {}\n", r, "all (sum)", idle_figures(text, "all (sum)"))) !=
          std::string::npos);
    const json::value& all = one.at("all_streams");
    idle += all.at("idle_s").to_number<double>();
    host += all.at("host_wait_s").to_number<double>();
    kernel += all.at("kernel_wait_s").to_number<double>();
    other += all.at("other_s").to_number<double>();
    if (all.at("host_wait_s").to_number<double>() > most) {
      most = all.at("host_wait_s").to_number<double>();
      most_rank = r;
    }
  }
  CHECK(most_rank == 5);
  const json::value& across = v.at("across_ranks").at("idle_time_breakdown");
  CHECK(across.at("ranks").to_number<int>() == kRanks);
  CHECK(across.at("idle_s").to_number<double>() == Approx(idle / kRanks).epsilon(1e-12));
  CHECK(across.at("host_wait_s").to_number<double>() == Approx(host / kRanks).epsilon(1e-12));
  CHECK(across.at("kernel_wait_s").to_number<double>() == Approx(kernel / kRanks).epsilon(1e-12));
  CHECK(across.at("other_s").to_number<double>() == Approx(other / kRanks).epsilon(1e-12));
  CHECK(across.at("host_wait_max_rank").to_number<int>() == 5);
  CHECK(across.at("host_wait_max_s").to_number<double>() == most);
  CHECK(table.out.find(fmt::format("most host wait: rank 5 {:.3f} ms", most * 1e3)) != std::string::npos);
}

// stepsim's own trace format has no launches for HTA: the job says so in one line, and its
// JSON has no breakdown.
TEST_CASE("analyze of a folder of stepsim's own rank traces says the idle breakdown is not available") {
  const TempDir dir;
  write_ranks(dir.path, -1, 1.0);
  const testing::Scratch scratch("analyze-job-idle-own");
  const testing::Run table = scratch.run("analyze " + dir.path.string());
  REQUIRE(table.status == 0);
  CHECK(table.out.find("\nidle time breakdown: n/a (traces in stepsim's own format") != std::string::npos);
  const testing::Run js = scratch.run("analyze " + dir.path.string() + " --json -");
  REQUIRE(js.status == 0);
  const json::value v = json::parse(js.out);
  CHECK(v.at("ranks").at(0).at("idle_time_breakdown").is_null());
  CHECK(v.at("across_ranks").at("idle_time_breakdown").is_null());
}
