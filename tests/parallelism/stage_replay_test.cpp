// The ranks of a pipeline stage after its first replay its step on their own communicators
// (StepBuilder::replay) instead of writing it again: on every parallelism the builder knows,
// that gives exactly the program that writing every rank's step gives.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "hardware/gpu_model.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/costs.hpp"
#include "parallelism/program_builder.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
using stepsim::engine::Program;

namespace {

Program stage_program(const stepsim::Scenario& s, sp::StageRanks how) {
  const stepsim::hardware::GpuModel gpu(s.cluster.gpu, s.training.precision);
  const sp::ModelCosts costs(s, gpu);
  return sp::build_program(s, stepsim::workload::build_work(s), costs, how);
}

void check_same(const Program& replayed, const Program& written) {
  REQUIRE(replayed.ranks.size() == written.ranks.size());
  REQUIRE(replayed.groups.size() == written.groups.size());
  for (std::size_t g = 0; g < written.groups.size(); ++g) {
    CHECK(replayed.groups[g].name == written.groups[g].name);
    CHECK(replayed.groups[g].members == written.groups[g].members);
  }
  REQUIRE(replayed.resources.size() == written.resources.size());
  for (std::size_t r = 0; r < written.resources.size(); ++r) {
    CHECK(replayed.resources[r].name == written.resources[r].name);
    CHECK(replayed.resources[r].capacity == written.resources[r].capacity);
  }
  CHECK(replayed.names.size() == written.names.size());
  for (std::size_t r = 0; r < written.ranks.size(); ++r) {
    INFO("rank " << written.ranks[r].rank);
    const auto& a = replayed.ranks[r];
    const auto& b = written.ranks[r];
    CHECK(a.rank == b.rank);
    CHECK(a.streams == b.streams);
    CHECK(*a.list == *b.list);
    CHECK(a.memory_base == b.memory_base);
    // The ranks that share a list when every step is written share one when replayed.
    for (std::size_t q = 0; q < r; ++q) {
      CHECK((a.list == replayed.ranks[q].list) == (b.list == written.ranks[q].list));
    }
    // Each call: its op, kind, group, size, cost and every link it loads, with the load.
    CHECK(a.calls == b.calls);
  }
}

}  // namespace

TEST_CASE("replaying a stage's first rank builds the program that writing every rank's step builds", "[slow]") {
  const std::vector<std::string> all{"simulation.ranks=\"all\""};
  struct Job {
    const char* example;
    std::vector<std::string> sets;
  };
  const std::vector<Job> jobs{
      // 3D with the interleaved schedule and a 2:1 spine over shared NICs.
      {"gpt3-175b-selene",
       {"parallel.dp=2", "training.global_batch=16", "cluster.inter_node.nics_per_node=4",
        "cluster.inter_node.topology=\"fat-tree\"", "cluster.inter_node.oversubscription=2",
        "cluster.inter_node.nodes_per_leaf=2"}},
      {"fsdp-llama3-70b", {}},
      // Ranks that differ: a slow NIC and NVLink port, a node with half its NICs down, other
      // jobs' traffic (variation is applied to the calls once every rank has them).
      {"hsdp-llama3-8b-64xh100",
       {R"(simulation.variation.links=[{"rank": 9, "link": "nic", "factor": 0.5},
                                        {"node": 2, "link": "nvlink", "factor": 0.7}])",
        R"(simulation.variation.failed_nics=[{"node": 3, "count": 4}])", "simulation.variation.background_traffic=0.2",
        R"(simulation.variation.gpu_speed=[{"rank": 5, "factor": 0.8}])"}},
      {"hsdp-llama3-8b-64xh100", {}},
      {"zero1-llama3-8b-64xh100", {}},
      {"ddp-1.3b-64xa100", {}},
      // Activation offload over each A100's PCIe link: the copies are flows on it.
      {"ddp-1.3b-64xa100", {"training.activation_offload_layers=4", "training.framework=\"megatron\""}},
      // Context parallelism with its ring; tensor-parallel overlap (userbuffers transfers).
      {"llama3-70b-cp2-64xh100", {}},
      {"korthikanti-22b",
       {"parallel.dp=2", "training.global_batch=8", "parallel.sequence_parallel=true",
        "tensor_parallel.comm_overlap=true"}},
      // Experts: EP all-to-all and the expert-data-parallel group.
      {"mixtral-8x7b-ep8-64xh100", {}},
      // TP groups of two nodes on leaves of three: every other group crosses the spine, so its
      // ranks' TP communicator has another spine share than the stage's first rank's and they
      // write their step.
      {"gpt3-175b-selene",
       {"parallel.tp=16", "parallel.pp=2", "parallel.dp=3", "training.global_batch=24",
        "cluster.inter_node.topology=\"fat-tree\"", "cluster.inter_node.oversubscription=2",
        "cluster.inter_node.nodes_per_leaf=3"}},
      // DualPipe's two directions and the mirror group.
      {"gpt3-175b-selene",
       {"parallel.schedule=\"dualpipe\"", "parallel.virtual_stages=1", "parallel.pp=4", "parallel.dp=2",
        "training.global_batch=16"}},
  };
  for (const Job& job : jobs) {
    DYNAMIC_SECTION(job.example << " " << job.sets.size() << " setting(s)") {
      std::vector<std::string> sets = all;
      sets.insert(sets.end(), job.sets.begin(), job.sets.end());
      const stepsim::Scenario s = stepsim::io::load_scenario(job.example, sets);
      check_same(stage_program(s, sp::StageRanks::replay), stage_program(s, sp::StageRanks::write));
    }
  }
}

// On an x86 host the GPU's one PCIe x16 link to its switch carries both its copies to and from
// host memory and its NIC traffic (GPUDirect RDMA: GPU, PCIe switch, NIC), so activation
// offload's copies load the GPU's PCIe link as its collectives across nodes do; a Grace CPU's
// NVLink-C2C is another path than the NIC's, and its copies load no link the NICs load.
TEST_CASE("offload copies over an x86 host's PCIe link load the GPU's PCIe link, as its NIC traffic does") {
  const std::vector<std::string> offload{"training.activation_offload_layers=4", "training.framework=\"megatron\""};
  for (const char* cluster : {"cluster=dgx-h100-ndr", "cluster=dgx-a100-80g-hdr"}) {
    INFO(cluster);
    std::vector<std::string> sets = offload;
    sets.emplace_back(cluster);
    const stepsim::Scenario s = stepsim::io::load_scenario("ddp-1.3b-64xa100", sets);
    const Program p = stage_program(s, sp::StageRanks::replay);
    const auto& rank = p.ranks.front();
    const auto name = [&](stepsim::network::ResourceId id) { return p.resources[id].name; };
    int copies = 0;
    bool nic_on_link = false;
    for (const auto& call : rank.calls) {
      if (call.host_copy) {
        ++copies;
        REQUIRE(call.uses.size() == 1);
        CHECK((name(call.uses[0].resource) == "node 0 gpu 0 pcie tx" ||
               name(call.uses[0].resource) == "node 0 gpu 0 pcie rx"));
        CHECK(call.uses[0].weight == 1);
        CHECK(call.algbw == s.cluster.host_link.bandwidth);  // each GPU its own link
        CHECK(!call.slows_compute);
        continue;
      }
      for (const auto& u : call.uses) nic_on_link = nic_on_link || name(u.resource) == "node 0 gpu 0 pcie tx";
    }
    CHECK(copies == 2);  // the 4 layers' activations, one size: one call to the host, one back
    CHECK(nic_on_link);
    for (const auto& op : rank.ops()) CHECK(op.kind != stepsim::engine::OpKind::copy);
  }
  // GB200: the copies run for their duration at the GPU's share of the C2C link.
  std::vector<std::string> sets = offload;
  sets.emplace_back("cluster=gb200-nvl72");
  const Program grace = stage_program(stepsim::io::load_scenario("ddp-1.3b-64xa100", sets), sp::StageRanks::replay);
  for (const auto& call : grace.ranks.front().calls) CHECK(!call.host_copy);
  int copies = 0;
  for (const auto& op : grace.ranks.front().ops()) copies += op.kind == stepsim::engine::OpKind::copy ? 1 : 0;
  CHECK(copies > 0);
}
