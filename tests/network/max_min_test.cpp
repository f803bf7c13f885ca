// Max-min fair rates of concurrent flows over shared link resources.
#include <catch2/catch.hpp>

#include <limits>
#include <random>
#include <span>
#include <vector>

#include "network/max_min.hpp"

namespace {

using stepsim::Bandwidth;
using stepsim::network::FlowDemand;
using stepsim::network::MaxMinSolver;
using stepsim::network::Resource;
using stepsim::network::ResourceUse;

Bandwidth gbps(double gb) { return Bandwidth::gbytes_per_s(gb); }

std::vector<Resource> links(std::initializer_list<double> gbytes_per_s) {
  std::vector<Resource> out;
  for (double c : gbytes_per_s) out.push_back({"link", gbps(c)});
  return out;
}

}  // namespace

TEST_CASE("a lone flow runs at its cap when the link is faster") {
  const auto resources = links({100});
  MaxMinSolver solver(resources);
  const std::vector<ResourceUse> uses{{0, 1.0}};
  const std::vector<FlowDemand> flows{{gbps(40), uses}};
  const auto rates = solver.solve(flows);
  REQUIRE(rates.size() == 1);
  CHECK(rates[0] == Approx(40e9));
}

TEST_CASE("a lone flow is held to the link when the link is slower than its cap") {
  const auto resources = links({25});
  MaxMinSolver solver(resources);
  const std::vector<ResourceUse> uses{{0, 1.0}};
  const std::vector<FlowDemand> flows{{gbps(40), uses}};
  CHECK(solver.solve(flows)[0] == Approx(25e9));
}

TEST_CASE("two flows on one link share it equally") {
  const auto resources = links({100});
  MaxMinSolver solver(resources);
  const std::vector<ResourceUse> uses{{0, 1.0}};
  const std::vector<FlowDemand> flows{{gbps(80), uses}, {gbps(80), uses}};
  const auto rates = solver.solve(flows);
  CHECK(rates[0] == Approx(50e9));
  CHECK(rates[1] == Approx(50e9));
}

TEST_CASE("a flow bottlenecked elsewhere leaves its share to the other flow") {
  // Flow 0 crosses a 20 GB/s link and the shared 100 GB/s one; flow 1 only the shared one.
  const auto resources = links({100, 20});
  MaxMinSolver solver(resources);
  const std::vector<ResourceUse> both{{0, 1.0}, {1, 1.0}};
  const std::vector<ResourceUse> shared{{0, 1.0}};
  const std::vector<FlowDemand> flows{{gbps(200), both}, {gbps(200), shared}};
  const auto rates = solver.solve(flows);
  CHECK(rates[0] == Approx(20e9));
  CHECK(rates[1] == Approx(80e9));
}

TEST_CASE("a capped flow leaves its share to the other flow") {
  const auto resources = links({100});
  MaxMinSolver solver(resources);
  const std::vector<ResourceUse> uses{{0, 1.0}};
  const std::vector<FlowDemand> flows{{gbps(10), uses}, {gbps(500), uses}};
  const auto rates = solver.solve(flows);
  CHECK(rates[0] == Approx(10e9));
  CHECK(rates[1] == Approx(90e9));
}

TEST_CASE("weights scale how much of a link a flow consumes") {
  // An all-reduce moving 2 link bytes per algorithm byte gets half the algorithm rate of a
  // flow that moves one, at equal algorithm rates r: 2r + r = 90 GB/s.
  const auto resources = links({90});
  MaxMinSolver solver(resources);
  const std::vector<ResourceUse> heavy{{0, 2.0}};
  const std::vector<ResourceUse> light{{0, 1.0}};
  const std::vector<FlowDemand> flows{{gbps(500), heavy}, {gbps(500), light}};
  const auto rates = solver.solve(flows);
  CHECK(rates[0] == Approx(30e9));
  CHECK(rates[1] == Approx(30e9));
}

TEST_CASE("a flow without link uses runs at its cap") {
  const auto resources = links({1});
  MaxMinSolver solver(resources);
  const std::vector<FlowDemand> flows{{gbps(7), {}}};
  CHECK(solver.solve(flows)[0] == Approx(7e9));
}

TEST_CASE("solving again gives the same rates") {
  const auto resources = links({100, 30, 55});
  MaxMinSolver solver(resources);
  const std::vector<ResourceUse> a{{0, 1.0}, {1, 0.5}};
  const std::vector<ResourceUse> b{{1, 1.5}, {2, 1.0}};
  const std::vector<ResourceUse> c{{0, 0.25}, {2, 2.0}};
  const std::vector<FlowDemand> flows{{gbps(60), a}, {gbps(60), b}, {gbps(60), c}};
  const auto once = solver.solve(flows);
  const std::vector<double> first(once.begin(), once.end());
  const auto second = solver.solve(flows);
  for (std::size_t i = 0; i < flows.size(); ++i) CHECK(first[i] == second[i]);
}

TEST_CASE("a lone flow's shortcut gives solve()'s rate to the last bit") {
  // Link speeds and weights that do not divide evenly, repeated links and unused ones: the
  // shortcut must round as the general filling does, wherever the flow's limit lies.
  const auto resources = links({100, 33.3, 47.9, 0.7, 250, 12.5});
  MaxMinSolver solver(resources);
  std::mt19937_64 random(11);
  std::uniform_int_distribution<std::uint32_t> link(0, 5);
  std::uniform_int_distribution<int> count(0, 9);
  std::uniform_int_distribution<int> many(10, 200);  // a collective's members' uses, all together
  std::uniform_real_distribution<double> weight(0, 3);
  std::uniform_real_distribution<double> cap(0.1, 300);
  int at_cap = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<ResourceUse> uses;
    for (int i = trial % 10 == 0 ? many(random) : count(random); i > 0; --i)
      uses.push_back({link(random), i % 4 == 0 ? 0.0 : weight(random)});
    const FlowDemand flow{gbps(cap(random)), uses};
    const double general = solver.solve(std::span(&flow, 1))[0];
    const double alone = solver.solve_alone(flow);
    CHECK(alone == general);
    at_cap += alone == flow.cap.bytes_per_s() ? 1 : 0;
  }
  CHECK(at_cap > 100);  // both kinds of limit were tried
  CHECK(at_cap < 1900);
}

TEST_CASE("a lone flow's shortcut fails as solve() does on a bad demand") {
  const auto resources = links({10});
  MaxMinSolver solver(resources);
  const std::vector<ResourceUse> unknown{{3, 1.0}};
  CHECK_THROWS_WITH(solver.solve_alone({gbps(1), unknown}), Catch::Contains("unknown resource 3"));
  const std::vector<ResourceUse> negative{{0, -1.0}};
  CHECK_THROWS_WITH(solver.solve_alone({gbps(1), negative}), Catch::Contains("must not be negative"));
  const std::vector<ResourceUse> not_a_number{{0, std::numeric_limits<double>::quiet_NaN()}};
  CHECK_THROWS_WITH(solver.solve_alone({gbps(1), not_a_number}), Catch::Contains("must not be negative"));
  CHECK_THROWS_WITH(solver.solve_alone({Bandwidth{}, {}}), Catch::Contains("positive rate cap"));
  // Nothing of a refused demand, or of an earlier flow, is left in the next one's sums.
  const std::vector<ResourceUse> twice{{0, 1.0}, {0, 1.0}};
  const FlowDemand good{gbps(100), twice};
  const double general = solver.solve(std::span(&good, 1))[0];
  CHECK(solver.solve_alone(good) == general);
  CHECK(solver.solve_alone(good) == general);
  CHECK(general < gbps(100).bytes_per_s());  // the link, loaded twice, is the limit
}
