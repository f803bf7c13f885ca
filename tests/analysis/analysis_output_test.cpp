// What `stepsim analyze` prints of a simulated trace: each process group on its own, and the
// exposed communication split among collectives and groups summing to the split by kind.
#include <fmt/format.h>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include "cli/run_stepsim.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"
#include "stepsim/report.hpp"

using namespace stepsim;

namespace {

namespace json = boost::json;

double sum_of(const json::object& o) {
  double sum = 0;
  for (const auto& kv : o) sum += kv.value().to_number<double>();
  return sum;
}

// The "by process group" line of analyze's table as label -> ms.
std::map<std::string, std::string> group_line(const std::string& table) {
  const std::string marker = "by process group: ";
  const std::size_t at = table.find(marker);
  REQUIRE(at != std::string::npos);
  const std::string line = table.substr(at + marker.size(), table.find('\n', at) - at - marker.size());
  // "  pp fwd [0, 2] 4.310  pp bwd [2, 0] 0.294": entries two spaces apart, each a label and its figure.
  std::map<std::string, std::string> out;
  for (std::size_t from = line.find_first_not_of(' '); from != std::string::npos;) {
    const std::size_t end = std::min(line.find("  ", from), line.size());
    const std::string entry = line.substr(from, end - from);
    const std::size_t space = entry.rfind(' ');
    out[entry.substr(0, space)] = entry.substr(space + 1);
    from = line.find_first_not_of(' ', end);
  }
  return out;
}

}  // namespace

TEST_CASE("analyze keeps apart a middle stage's two pp fwd and two pp bwd groups, in the table and the JSON") {
  // Four stages, one simulated rank each: stage 1 receives activations from stage 0 and sends
  // them to stage 2 ("pp fwd" both), and gradients the other way ("pp bwd" both).
  const SimulationResult sim =
      simulate(io::load_scenario("ddp-1.3b-64xa100", {"parallel.pp=4", "parallel.dp=2", "model.layers=8"}));
  REQUIRE(sim.timeline.ranks.size() == 4);
  const int before = sim.timeline.ranks[0].rank, rank = sim.timeline.ranks[1].rank, after = sim.timeline.ranks[2].rank;
  // The groups are named by their ranks in the order the transfer runs.
  const std::set<std::string> pp_groups{
      fmt::format("pp fwd [{}, {}]", before, rank), fmt::format("pp fwd [{}, {}]", rank, after),
      fmt::format("pp bwd [{}, {}]", rank, before), fmt::format("pp bwd [{}, {}]", after, rank)};
  const testing::Scratch scratch("analyze-group-labels");
  {
    std::ofstream perfetto(scratch.file("perfetto.json"));
    report::write_trace(sim.timeline, perfetto);
    std::ofstream kineto(scratch.file("kineto.json"));
    report::write_kineto_trace(sim.timeline, 1, "NVIDIA A100-SXM4-80GB", kineto);
  }
  for (const std::string& trace : {fmt::format("perfetto.json --rank {}", rank), std::string("kineto.json")}) {
    INFO(trace);
    const testing::Run js = scratch.run("analyze " + trace + " --json -");
    INFO(js.err);
    REQUIRE(js.status == 0);
    const json::object v = json::parse(js.out).as_object();
    CHECK(v.at("rank").to_number<int>() == rank);
    // Every transfer's group is one of the four, named as the pipeline's neighbours say.
    std::set<std::string> collective_groups;
    for (const json::value& c : v.at("collectives").as_array())
      if (c.at("op").as_string() == "sendrecv") collective_groups.insert(std::string(c.at("group").as_string()));
    CHECK(collective_groups == pp_groups);
    // No group's exposure is lost: the groups share out what the kinds do.
    const json::object& by_group = v.at("exposed_by_group_s").as_object();
    for (const std::string& g : pp_groups) CHECK(by_group.contains(g));
    for (const auto& kv : by_group)  // a name no other group of the rank has stays as it is
      if (!pp_groups.contains(std::string(kv.key()))) CHECK(kv.key() == "dp");
    const double exposed = sum_of(v.at("breakdown_s").at("exposed_comm").as_object());
    CHECK(exposed > 0);
    CHECK(sum_of(by_group) == Approx(exposed).epsilon(1e-9));
    CHECK(sum_of(v.at("exposed_by_collective_s").as_object()) == Approx(exposed).epsilon(1e-9));
    // The table names the same groups with the same figures.
    const testing::Run table = scratch.run("analyze " + trace);
    REQUIRE(table.status == 0);
    const std::map<std::string, std::string> printed = group_line(table.out);
    CHECK(printed.size() == by_group.size());
    for (const auto& kv : by_group) {
      INFO(kv.key());
      REQUIRE(printed.contains(std::string(kv.key())));
      CHECK(printed.at(std::string(kv.key())) == fmt::format("{:.3f}", kv.value().to_number<double>() * 1e3));
    }
    for (const std::string& g : pp_groups) CHECK(table.out.find("SendRecv       " + g) != std::string::npos);
  }
}

TEST_CASE("analyze counts a collective's wait for a slow peer in its collective and group as in its kind") {
  // Eight DDP ranks, rank 3 computing at 0.8x: the others' AllReduces wait for it at their
  // rendezvous, which the report counts as dp communication (docs/report.md).
  const SimulationResult sim = simulate(io::load_scenario(
      "ddp-1.3b-64xa100", {"parallel.dp=8", "simulation.ranks=all", "model.layers=4", "training.global_batch=64",
                           R"(simulation.variation.gpu_speed=[{"rank": 3, "factor": 0.8}])"}));
  Time waited;
  for (const Interval& iv : sim.timeline.ranks.at(0).intervals) waited += iv.waited;
  REQUIRE(waited > Time::from_us(100));
  const testing::Scratch scratch("analyze-waits-by-group");
  {
    std::ofstream out(scratch.file("t.json"));
    report::write_trace(sim.timeline, out);
  }
  const testing::Run js = scratch.run("analyze t.json --rank 0 --json -");
  INFO(js.err);
  REQUIRE(js.status == 0);
  const json::value v = json::parse(js.out);
  const double exposed_dp = v.at("breakdown_s").at("exposed_comm").at("dp").to_number<double>();
  CHECK(sum_of(v.at("breakdown_s").at("exposed_comm").as_object()) == exposed_dp);
  // The kinds (report::measure) count the wait; the split by collective and by group share
  // out the same time.
  CHECK(exposed_dp > 0);
  CHECK(v.at("exposed_by_collective_s").at("allreduce").to_number<double>() == Approx(exposed_dp).epsilon(1e-9));
  CHECK(v.at("exposed_by_group_s").at("dp").to_number<double>() == Approx(exposed_dp).epsilon(1e-9));
  CHECK(v.at("exposed_by_group_s").as_object().size() == 1);
}
