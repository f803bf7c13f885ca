// Activation offload to host memory (training.activation_offload_layers): the bytes each
// offloaded layer copies, the copies' time on the host link, the memory they save at the
// peak, and the settings Megatron-Core refuses it with.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "cli/run_stepsim.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/report.hpp"

namespace {

// A Llama-style model of 8 equal layers on one GB200 compute tray (4 GPUs, DP 4), one
// micro-batch per replica.
const std::string kTray = R"({
  "model": {"name": "llama-small", "layers": 8, "hidden": 1024, "heads": 16, "ffn_hidden": 4096, "vocab": 32000,
            "seq_len": 2048, "mlp": "swiglu"},
  "cluster": "gb200-nvl72",
  "parallel": {"tp": 1, "pp": 1, "dp": 4},
  "training": {"framework": "megatron", "global_batch": 4, "micro_batch": 1},
  "data_parallel": {"kind": "ddp"}
})";

// By hand (Korthikanti et al. 2022 for a layer without dropout, BF16, s = 2048, b = 1,
// h = 1024, ffn 4096, 16 heads, fused attention): the two norm inputs, the QKV and fc1
// inputs (4·sbh·2 B), Q, K, V and the projection input (4·sbh·2 B), SwiGLU's fc1 output of
// 2·ffn and fc2 input of ffn (3·sb·ffn·2 B), the attention's fp32 log-sum-exp (4·a·s·b B):
// 16 777 216 + 16 777 216 + 50 331 648 + 131 072 bytes.
constexpr double kLayerBytes = 84017152;
// Each Grace's NVLink-C2C carries 450 GB/s each way, shared by its superchip's two GPUs.
constexpr double kGpuShare = 225e9;

stepsim::SimulationResult run_tray(const std::vector<std::string>& sets) {
  return stepsim::simulate(stepsim::io::load_scenario_text(kTray, "tray.json", sets));
}

std::string layers(int n) { return "training.activation_offload_layers=" + std::to_string(n); }

// Rank 0's intervals on the stream named `stream`.
std::vector<stepsim::Interval> on_stream(const stepsim::Timeline& t, const std::string& stream) {
  const stepsim::RankTimeline& rank = t.ranks.front();
  std::vector<stepsim::Interval> found;
  for (const stepsim::Interval& i : rank.intervals)
    if (rank.streams[i.stream] == stream) found.push_back(i);
  return found;
}

// Each rank's copy times on its offload stream to host, by global rank.
std::map<int, std::vector<double>> copy_seconds_by_rank(const stepsim::Timeline& t) {
  std::map<int, std::vector<double>> by_rank;
  for (const stepsim::RankTimeline& rank : t.ranks)
    for (const stepsim::Interval& i : rank.intervals)
      if (rank.streams[i.stream] == "offload to host") by_rank[rank.rank].push_back((i.end - i.start).seconds());
  return by_rank;
}

// The note's sentence on the host link.
std::string offload_note(const stepsim::Report& report) {
  for (const std::string& note : report.notes)
    if (note.starts_with("activation offload:")) return note;
  return "";
}

}  // namespace

TEST_CASE("Each offloaded layer copies its activations to the host and back at its GPU's share of the link") {
  const stepsim::SimulationResult r = run_tray({layers(3)});
  const std::vector<stepsim::Interval> out = on_stream(r.timeline, "offload to host");
  const std::vector<stepsim::Interval> back = on_stream(r.timeline, "offload from host");
  REQUIRE(out.size() == 3);
  REQUIRE(back.size() == 3);
  for (const auto& copies : {out, back}) {
    for (const stepsim::Interval& i : copies) {
      CHECK(i.activity == stepsim::Activity::memory);
      CHECK(i.bytes.as_double() == kLayerBytes);
      CHECK((i.end - i.start).seconds() == Approx(kLayerBytes / kGpuShare).epsilon(1e-6));  // 373.4 us
    }
  }
  // Without offload there are no copies.
  CHECK(on_stream(run_tray({}).timeline, "offload to host").empty());
}

TEST_CASE("A GPU shares its host link only with the job's GPUs on that link") {
  // The job's ranks fill the tray's GPUs in order, the link of GPUs 0-1 first (each Grace's
  // NVLink-C2C, 450 GB/s each way, carries two GPUs). One GPU alone on its Grace copies at the
  // whole 450 GB/s: 84 017 152 B in 186.7 us, not the 373.4 us of half the link.
  const auto alone = run_tray({"parallel.dp=1", "training.global_batch=1", layers(1), "simulation.ranks=\"all\""});
  const auto one = copy_seconds_by_rank(alone.timeline);
  REQUIRE(one.size() == 1);
  REQUIRE(one.at(0).size() == 1);
  CHECK(one.at(0).front() == Approx(kLayerBytes / 450e9).epsilon(1e-6));
  CHECK(offload_note(alone.report).find("each way at 450 GB/s per GPU") != std::string::npos);
  // Three GPUs: GPUs 0 and 1 share the first Grace's link (225 GB/s each), GPU 2 has the
  // second to itself (450 GB/s).
  const auto three = run_tray({"parallel.dp=3", "training.global_batch=3", layers(1), "simulation.ranks=\"all\""});
  const auto by_rank = copy_seconds_by_rank(three.timeline);
  REQUIRE(by_rank.size() == 3);
  CHECK(by_rank.at(0).front() == Approx(kLayerBytes / 225e9).epsilon(1e-6));
  CHECK(by_rank.at(1).front() == Approx(kLayerBytes / 225e9).epsilon(1e-6));
  CHECK(by_rank.at(2).front() == Approx(kLayerBytes / 450e9).epsilon(1e-6));
  // A host link of 4 GPUs (one PCIe switch per tray, say) at 400 GB/s, and a job of 6 GPUs
  // over two trays: the first tray's 4 GPUs get 100 GB/s each, the second's 2 get 200 GB/s.
  const auto six = run_tray({"parallel.dp=6", "training.global_batch=6", layers(1), "simulation.ranks=\"all\"",
                             "cluster.host_link.gpus_per_link=4", R"(cluster.host_link.bandwidth="400 GB/s")"});
  const auto six_ranks = copy_seconds_by_rank(six.timeline);
  REQUIRE(six_ranks.size() == 6);
  for (int r = 0; r < 4; ++r) CHECK(six_ranks.at(r).front() == Approx(kLayerBytes / 100e9).epsilon(1e-6));
  for (int r = 4; r < 6; ++r) CHECK(six_ranks.at(r).front() == Approx(kLayerBytes / 200e9).epsilon(1e-6));
  // The note says both shares; the representative rank is the first, on a full link.
  CHECK(offload_note(six.report)
            .find("each way at 100 GB/s per GPU, 200 GB/s for the 2 GPUs of the job on a link "
                  "of 4 (cluster.host_link: 400 GB/s shared by 4 GPUs)") != std::string::npos);
  const auto representative =
      run_tray({"parallel.dp=6", "training.global_batch=6", layers(1), "cluster.host_link.gpus_per_link=4",
                R"(cluster.host_link.bandwidth="400 GB/s")"});
  CHECK(copy_seconds_by_rank(representative.timeline).at(0).front() == Approx(kLayerBytes / 100e9).epsilon(1e-6));
}

TEST_CASE("Offloaded layers' activations are not resident at the peak, but for the one in transit") {
  // The peak is the loss's backward, beside the head's activations (the b·s·V logits, more
  // than a layer's), when every offloaded layer is on the host: each saves its bytes.
  const double none = run_tray({}).report.memory_bytes.activations;
  CHECK(none - run_tray({layers(1)}).report.memory_bytes.activations == kLayerBytes);
  CHECK(none - run_tray({layers(3)}).report.memory_bytes.activations == kLayerBytes * 3);
  CHECK(none - run_tray({layers(7)}).report.memory_bytes.activations == kLayerBytes * 7);
  // The layer in transit is on the GPU only without the head's activations: with a head
  // smaller than a layer (a vocabulary of 64) the peak is the end of the forward, the last
  // offloaded layer still on its way out beside the layers kept, so beyond the first each
  // offloaded layer saves its bytes.
  const auto small_head = [](int n) { return run_tray({"model.vocab=64", layers(n)}).report.memory_bytes.activations; };
  CHECK(small_head(1) - small_head(3) == kLayerBytes * 2);
  CHECK(small_head(1) - small_head(7) == kLayerBytes * 6);
}

TEST_CASE("A host link too slow for the copies exposes them, each in full") {
  // At 1 GB/s each way per Grace, 0.5 GB/s per GPU, a layer's copy takes 168 ms, far more than
  // the whole step's compute. With 2 of 8 layers offloaded, Transformer Engine's windows end
  // after layers 3 and 7: the forward waits at each for one copy out, and the backward for
  // each reload before the next (at layer 3) and before layer 0: four copies exposed.
  const std::string slow = R"(cluster.host_link.bandwidth="1 GB/s")";
  const stepsim::SimulationResult base = run_tray({slow});
  const stepsim::SimulationResult offload = run_tray({slow, layers(2)});
  const double copy_s = kLayerBytes / 0.5e9;
  CHECK(offload.report.step_time_s - base.report.step_time_s == Approx(4 * copy_s).epsilon(0.01));
  // The report counts that time as memory copies alone (breakdown "other").
  CHECK(offload.report.breakdown_s.other - base.report.breakdown_s.other == Approx(4 * copy_s).epsilon(0.01));
}

TEST_CASE("Offload never makes a step faster, and more host bandwidth never slower") {
  const double none = run_tray({}).report.step_time_s;
  const double preset = run_tray({layers(4)}).report.step_time_s;
  const double slower = run_tray({layers(4), R"(cluster.host_link.bandwidth="50 GB/s")"}).report.step_time_s;
  const double slowest = run_tray({layers(4), R"(cluster.host_link.bandwidth="5 GB/s")"}).report.step_time_s;
  CHECK(none <= preset);
  CHECK(preset <= slower);
  CHECK(slower <= slowest);
  CHECK(none < slowest);
}

TEST_CASE("Activation offload is refused where Megatron-Core refuses it, and without a host link") {
  stepsim::testing::Scratch scratch("offload-refusals");
  scratch.write("s.json", kTray);
  const auto refused = [&](const std::string& sets, const std::string& message) {
    CHECK(refusal(scratch.run("simulate s.json " + sets), "--set: training.activation_offload_layers: " + message) ==
          "");
  };
  refused("--set training.activation_offload_layers=-1", "must be between 0 and 2048, got -1");
  refused("--set training.activation_offload_layers=8",
          "8 layers is more than the stage can offload: it has 8 transformer layers");
  refused("--set training.activation_offload_layers=2 --set parallel.pp=2 --set parallel.dp=2",
          "activation offload with pipeline parallelism (pp 2) is refused by Megatron-Core");
  refused("--set training.activation_offload_layers=2 --set training.recompute=selective",
          "activation offload with recompute is refused by Megatron-Core");
  refused("--set training.activation_offload_layers=2 --set training.cuda_graphs=true",
          "activation offload with CUDA graphs is refused by Megatron-Core");
  refused("--set training.activation_offload_layers=2 --set 'cluster.host_link.bandwidth=\"0 GB/s\"'",
          "cluster gb200-nvl72 describes no link to host memory");
  const auto odd = scratch.run("simulate s.json --set cluster.host_link.gpus_per_link=3");
  CHECK(odd.status == 2);
  CHECK(odd.err.find("--set: cluster.host_link.gpus_per_link: 3 GPUs per link do not divide the node's 4 GPUs") !=
        std::string::npos);
  // torchtitan and the others have no such offload: the key would be accepted and mean nothing.
  for (const char* framework : {"torchtitan", "pytorch", "deepspeed"}) {
    const auto r = scratch.run(std::string("simulate s.json --set training.activation_offload_layers=2 "
                                           "--set training.framework=") +
                               framework);
    CHECK(r.status == 2);
    CHECK(r.err.find("--set: training.framework: training.activation_offload_layers is Megatron-Core's") !=
          std::string::npos);
  }
}

// DGX B300: each B300's PCIe Gen6 x16 link goes to its ConnectX-8's switch, and on to Xeon 6
// hosts whose root ports are PCIe Gen5 x16: 64 GB/s each way. On 4 GPUs of one node (no NIC
// traffic) each layer's copy takes its bytes over that, 84 017 152 B / 64 GB/s = 1.3128 ms; the
// cluster was refused for offload while its preset described no host link.
TEST_CASE("DGX B300 offloads over each GPU's PCIe link to its Xeon host at Gen5 x16") {
  const stepsim::HostLink link =
      stepsim::io::load_scenario_text(kTray, "tray.json", {"cluster=dgx-b300"}).cluster.host_link;
  CHECK(link.bandwidth.bytes_per_s() == 64e9);
  CHECK(link.gpus_per_link == 1);
  const stepsim::SimulationResult r = run_tray({"cluster=dgx-b300", layers(3)});
  for (const char* stream : {"offload to host", "offload from host"}) {
    const std::vector<stepsim::Interval> copies = on_stream(r.timeline, stream);
    REQUIRE(copies.size() == 3);
    for (const stepsim::Interval& i : copies) {
      CHECK(i.bytes.as_double() == kLayerBytes);
      CHECK((i.end - i.start).seconds() == Approx(kLayerBytes / 64e9).epsilon(1e-6));
    }
  }
  CHECK(offload_note(r.report).find("over each GPU's PCIe link, which its NIC traffic shares") != std::string::npos);
  // A comparison with offload that names the cluster runs, where it was refused.
  stepsim::testing::Scratch scratch("offload-dgx-b300");
  scratch.write("s.json", kTray);
  const auto compared =
      scratch.run("simulate s.json --set training.activation_offload_layers=2 --compare-cluster dgx-b300");
  INFO(compared.err);
  CHECK(compared.status == 0);
}

// On a DGX the GPU's one PCIe x16 link to its switch carries its copies to and from host
// memory and its NIC traffic alike (GPUDirect RDMA: GPU, PCIe switch, NIC). GPT 1.3B on 64
// H100, DP 64 over 8 nodes, 12 of 24 layers offloaded: the gradient AllReduces of the
// backward run beside the reloads, and each took 32.560 ms in all with 0, 12 or 23 layers
// offloaded, as if each had the whole link. They share it now, and take longer beside the
// copies; the note says so. On GB200 the copies cross the Grace's NVLink-C2C, another path:
// their times are the share of the link exactly (the tests above).
TEST_CASE("Offload copies over an x86 host's PCIe link share it with the GPU's NIC traffic") {
  const std::string job = R"({"model": "gpt-1.3b", "cluster": "dgx-h100-ndr",
    "parallel": {"tp": 1, "pp": 1, "dp": 64}, "training": {"framework": "megatron", "global_batch": 256,
    "micro_batch": 4}})";
  const auto run = [&](const std::vector<std::string>& sets) {
    return stepsim::simulate(stepsim::io::load_scenario_text(job, "dgx.json", sets)).report;
  };
  const auto dp_busy = [](const stepsim::Report& r) {
    return r.comm_s[static_cast<std::size_t>(stepsim::CommKind::dp)];
  };
  for (const char* nic :
       {R"(cluster.inter_node.nic_bandwidth="400 Gb/s")", R"(cluster.inter_node.nic_bandwidth="800 Gb/s")"}) {
    INFO(nic);
    const stepsim::Report none = run({nic, "model.seq_len=4096"});
    const stepsim::Report offload = run({nic, "model.seq_len=4096", layers(12)});
    CHECK(dp_busy(offload) > 1.5 * dp_busy(none));
    CHECK(offload_note(offload).find("over each GPU's PCIe link, which its NIC traffic shares") != std::string::npos);
  }
  CHECK(offload_note(run_tray({layers(1)}).report).find("PCIe") == std::string::npos);
}
