// The program of an EP rank: four all-to-alls per MoE layer and micro-batch on the ep
// stream, expert gradients in buckets of their own on the expert-dp communicator.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include <catch2/catch.hpp>

#include "hardware/gpu_model.hpp"
#include "parallelism/costs.hpp"
#include "parallelism/mesh.hpp"
#include "parallelism/program_builder.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::CollOp;
using stepsim::CommKind;
using stepsim::engine::OpIndex;

namespace {

stepsim::Scenario moe_scenario() {
  stepsim::Scenario s = spt::small_scenario(1, 16, 1);
  s.model.moe = {8, 2, 4096};
  s.parallel.ep = 4;
  return s;
}

// Rank 0's EP collectives whose name contains `what`, in issue order: name, collective and
// message.
struct EpCall {
  std::string name;
  CollOp op;
  stepsim::Bytes size;
};
std::vector<EpCall> ep_calls(const stepsim::Scenario& s, const std::string& what) {
  const auto work = stepsim::workload::build_work(s);
  const spt::FixedCosts costs;
  const auto p = sp::build_program(s, work, costs);
  std::vector<EpCall> out;
  for (OpIndex i : spt::collectives_of(p, CommKind::ep)) {
    const auto& op = p.ranks[0].ops()[i];
    const std::string& name = p.names[op.name];
    if (name.find(what) == std::string::npos) continue;
    const auto& call = p.ranks[0].calls[static_cast<std::size_t>(op.call)];
    out.push_back({name, call.op, call.size});
  }
  return out;
}

// Whether `s` issues no EP collective named `what` under the flex dispatcher, nor under
// `framework` with its own dispatcher: calls of Megatron-Core's all-to-all dispatcher alone.
bool none_beyond_alltoall_dispatcher(const stepsim::Scenario& s, const std::string& what,
                                     stepsim::Framework framework) {
  stepsim::Scenario flex = s;
  flex.model.moe.dispatcher = stepsim::MoeDispatcher::flex;
  stepsim::Scenario other = s;
  other.training.framework = framework;
  return ep_calls(flex, what).empty() && ep_calls(other, what).empty();
}

}  // namespace

// Megatron-Core's TopKRouter with the fused router kernels, operator by operator (router.py,
// moe_utils.py): the fused top-k; with a balancing loss its scores, the tokens per expert, the
// fused loss, its logged division and add (5), per sequence the division by the batch (1); the
// expert bias's sum and add (2); random logits' clone and normal_ (2). Backward: the top-k's,
// and with a loss the auto-scaler's ones_like and product, the loss's and the scores' backward
// and the logits' two gradients summed (5), per sequence one more.
TEST_CASE("the router's work beside its GEMM is Megatron-Core's operators for its balancing loss") {
  stepsim::Scenario s = moe_scenario();
  struct Row {
    stepsim::MoeBalancingLoss loss;
    bool bias, random;
    int forward, backward;
  };
  using L = stepsim::MoeBalancingLoss;
  for (const Row& row : {Row{L::none, false, false, 1, 1}, Row{L::aux_loss, false, true, 8, 6},
                         Row{L::seq_aux_loss, true, true, 11, 7}}) {
    s.model.moe.load_balancing = row.loss;
    s.model.moe.expert_bias = row.bias;
    s.model.moe.force_balance = row.random;
    const auto work = stepsim::workload::build_work(s);
    int found = 0;
    for (const auto& op : work.layer.forward) {
      if (op.name != "router top-k") continue;
      CHECK(op.operators == row.forward);
      ++found;
    }
    for (const auto& op : work.layer.backward) {
      if (op.name != "router top-k backward") continue;
      CHECK(op.operators == row.backward);
      ++found;
    }
    CHECK(found == 2);
  }
}

TEST_CASE("an MoE layer sends its routed tokens by four all-to-alls per micro-batch") {
  const stepsim::Scenario s = moe_scenario();
  const auto work = stepsim::workload::build_work(s);
  std::vector<std::string> names;
  for (const EpCall& c : ep_calls(s, "")) {
    CHECK(c.op == CollOp::alltoall);
    CHECK(c.size == work.layer.dispatch_message);
    if (c.name.find("L0 ") != std::string::npos) names.push_back(c.name);
  }
  REQUIRE(names.size() == 4);
  CHECK(names[0].find("L0 dispatch") != std::string::npos);
  CHECK(names[1].find("L0 combine,") != std::string::npos);
  CHECK(names[2].find("L0 combine backward") != std::string::npos);
  CHECK(names[3].find("L0 dispatch backward") != std::string::npos);
  // 2048 tokens · top 2 · hidden 1024 · 2 bytes.
  CHECK(work.layer.dispatch_message.count() == 2048LL * 2 * 1024 * 2);
}

TEST_CASE("Megatron-Core's all-to-all dispatcher sends the routing probabilities by an all-to-all of their own") {
  // MoEAlltoAllTokenDispatcher.token_dispatch: all_to_all of the permuted tokens, then of their
  // permuted probabilities (the experts' activation weighs by them); the probabilities'
  // gradient goes home by the backward of that all-to-all. The flex dispatcher's DeepEP and
  // HybridEP kernels carry them with the tokens.
  for (const auto dispatcher : {stepsim::MoeDispatcher::alltoall, stepsim::MoeDispatcher::flex}) {
    stepsim::Scenario s = moe_scenario();
    s.training.framework = stepsim::Framework::megatron;
    s.model.moe.dispatcher = dispatcher;
    std::vector<std::string> names;
    for (const EpCall& c : ep_calls(s, "L0 ")) {
      if (c.name.find("tokens per expert") != std::string::npos) continue;  // the counts' gather
      names.push_back(c.name);
      // 2048 tokens · top 2 probabilities of 2 bytes.
      if (c.name.find("probs") != std::string::npos) CHECK(c.size.count() == 2048LL * 2 * 2);
    }
    if (dispatcher == stepsim::MoeDispatcher::flex) {
      CHECK(names.size() == 4);
      continue;
    }
    REQUIRE(names.size() == 6);
    CHECK(names[0].find("L0 dispatch,") != std::string::npos);
    CHECK(names[1].find("L0 dispatch probs,") != std::string::npos);
    CHECK(names[4].find("L0 dispatch backward") != std::string::npos);
    CHECK(names[5].find("L0 dispatch probs backward") != std::string::npos);
  }
}

TEST_CASE("the host waits for the routing before each forward dispatch and not in the backward") {
  // Megatron-Core's dropless dispatchers need the tokens per expert on the CPU before the
  // forward all-to-all (token_dispatcher.py: the all-to-all dispatcher's
  // d2h_event.synchronize(), DeepEP's and HybridEP's dispatch waiting for the counts in pinned
  // memory); the backward reuses the split sizes and handle the forward kept.
  for (const char* dispatcher : {"alltoall", "flex"}) {
    INFO(dispatcher);
    stepsim::Scenario s = moe_scenario();
    if (std::string(dispatcher) == "flex") s.model.moe.dispatcher = stepsim::MoeDispatcher::flex;
    const spt::FixedCosts costs;
    const auto p = sp::build_program(s, stepsim::workload::build_work(s), costs);
    const auto& rank = p.ranks[0];
    int blocking = 0;
    for (OpIndex i : spt::collectives_of(p, CommKind::ep)) {
      const auto& op = rank.ops()[i];
      const std::string& name = p.names[op.name];
      const bool forward_dispatch = name.find("dispatch,") != std::string::npos;
      INFO(name);
      CHECK(op.host_blocks == forward_dispatch);
      if (!forward_dispatch) continue;
      ++blocking;
      // It waits for the permutation just before it.
      REQUIRE(rank.waits_of(i).size() == 1);
      CHECK(p.names[rank.ops()[rank.waits_of(i)[0]].name].find("moe permute") != std::string::npos);
    }
    // One per MoE layer and micro-batch.
    CHECK(blocking == s.model.layers * 1);
  }
}

// MoEAlltoAllTokenDispatcher.preprocess (Megatron-Core, dropless, ep > 1): the tokens per
// expert summed from the routing map, the EP group's AllGather of them
// (gather_from_sequence_parallel_region over the tp_ep group, E int64 from each rank: 8 experts
// · 8 bytes · 4 ranks = 256 bytes), the sums of the gathered counts and the four copies of the
// split sizes to the host: ten operators before the permutation, which waits for the gather.
// Forward only; not under the flex dispatcher nor outside Megatron-Core.
TEST_CASE("the all-to-all dispatcher gathers the tokens per expert over the EP group before the permutation") {
  stepsim::Scenario s = moe_scenario();
  s.training.framework = stepsim::Framework::megatron;
  const auto work = stepsim::workload::build_work(s);
  const auto counts = std::find_if(work.layer.forward.begin(), work.layer.forward.end(),
                                   [](const auto& op) { return op.name == "moe tokens per expert"; });
  REQUIRE(counts != work.layer.forward.end());
  CHECK(counts->operators == 10);
  CHECK(std::none_of(work.layer.backward.begin(), work.layer.backward.end(),
                     [](const auto& op) { return op.name.find("tokens per expert") != std::string::npos; }));
  const auto gathers = ep_calls(s, "tokens per expert");
  REQUIRE(gathers.size() == static_cast<std::size_t>(s.model.layers));  // one a layer, forward only
  CHECK(gathers[0].op == CollOp::allgather);
  CHECK(gathers[0].size.count() == 256);
  const spt::FixedCosts costs;
  const auto p = sp::build_program(s, work, costs);
  const auto& rank = p.ranks[0];
  for (OpIndex i = 0; i < rank.ops().size(); ++i) {
    // Ten operators at Megatron's 12 us dispatch and 5 us launch.
    if (p.names[rank.ops()[i].name].find("tokens per expert fwd") != std::string::npos)
      CHECK(p.host_cost(rank.ops()[i]) == stepsim::Time::from_us(10 * (12 + 5)));
    if (p.names[rank.ops()[i].name].find("moe permute fwd") == std::string::npos) continue;
    const auto waits = rank.waits_of(i);
    CHECK(std::any_of(waits.begin(), waits.end(), [&](OpIndex w) {
      return p.names[rank.ops()[w].name].find("tokens per expert") != std::string::npos;
    }));
  }
  CHECK(none_beyond_alltoall_dispatcher(s, "tokens per expert", stepsim::Framework::torchtitan));
}

TEST_CASE("the all-to-all dispatcher sorts the tokens by expert after the dispatch and back before the combine") {
  // MoEAlltoAllTokenDispatcher: dispatch_postprocess sorts what the all-to-all brought,
  // combine_preprocess sorts the experts' output back before the combine's all-to-all; the
  // backward mirrors both.
  stepsim::Scenario s = moe_scenario();  // 2 experts per GPU
  s.training.framework = stepsim::Framework::megatron;
  const spt::FixedCosts costs;
  const auto p = sp::build_program(s, stepsim::workload::build_work(s), costs);
  const auto& ops = p.ranks[0].ops();
  const auto first = [&](const std::string& prefix) {
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (p.names[ops[i].name].rfind(prefix, 0) == 0) return static_cast<long>(i);
    return -1L;
  };
  const long dispatch = first("AllToAll ep L0 dispatch,");
  const long sort = first("L0 moe sort chunks fwd");
  const long unsort = first("L0 moe unsort chunks fwd");
  const long combine = first("AllToAll ep L0 combine,");
  const long combine_backward = first("AllToAll ep L0 combine backward");
  const long unsort_backward = first("L0 moe unsort chunks backward");
  const long sort_backward = first("L0 moe sort chunks backward");
  const long dispatch_backward = first("AllToAll ep L0 dispatch backward");
  REQUIRE(dispatch >= 0);
  REQUIRE(sort >= 0);
  REQUIRE(unsort >= 0);
  REQUIRE(unsort_backward >= 0);
  REQUIRE(sort_backward >= 0);
  CHECK(dispatch < sort);
  CHECK(unsort < combine);
  CHECK(combine_backward < unsort_backward);
  CHECK(sort_backward < dispatch_backward);
  // The sort waits for the dispatch; the combine for the unsort.
  const auto waits_for = [&](long op, long on) {
    const auto w = p.ranks[0].waits_of(static_cast<OpIndex>(op));
    return std::find(w.begin(), w.end(), static_cast<OpIndex>(on)) != w.end();
  };
  CHECK(waits_for(sort, dispatch));
  CHECK(waits_for(combine, unsort));
}

TEST_CASE("a grouped expert GEMM costs the host one GEMM launch and GroupedLinear's own work per local expert") {
  // Transformer Engine's GroupedLinear runs its experts' GEMMs by nvte_multi_tensor_gemm,
  // which outside Hopper's BF16 CUTLASS path launches one cuBLAS GEMM per expert from C++
  // (cublaslt_gemm.cu, multi_stream_cublas_gemm): the framework's dispatch once, the launch
  // once per expert, and for each expert after the first GroupedLinear's host work around its
  // GEMM (73.4 us under Megatron-Core, fitted). At EP 4 each GPU holds 2 of the 8 experts.
  stepsim::Scenario s = moe_scenario();
  s.training.framework = stepsim::Framework::megatron;
  const spt::FixedCosts costs;  // 5 us launch
  const auto p = sp::build_program(s, stepsim::workload::build_work(s), costs);
  const auto& rank = p.ranks[0];
  int grouped = 0;
  for (const auto& op : rank.ops()) {
    if (op.kind != stepsim::engine::OpKind::compute) continue;
    const std::string& name = p.names[op.name];
    INFO(name);
    const bool expert_gemm = name.find("expert fc") != std::string::npos && name.find("shared") == std::string::npos;
    // The dispatcher's token counts are ten operators (their own test); Transformer Engine's
    // permute forward four Triton kernels, its chunk sorts forward two, each an operator.
    if (name.find("tokens per expert") != std::string::npos) continue;
    const bool fwd = name.ends_with(" fwd");
    const int operators = fwd && name.find("moe permute") != std::string::npos   ? 4
                          : fwd && name.find("sort chunks") != std::string::npos ? 2
                                                                                 : 1;
    // Megatron's 12 us dispatch and one 5 us launch; an expert GEMM launches twice, and the
    // second expert costs GroupedLinear 73.4 us more.
    CHECK(p.host_cost(op) == stepsim::Time::from_us(expert_gemm ? 12 + 2 * 5 + 73.4 : operators * (12 + 5)));
    grouped += expert_gemm ? 1 : 0;
  }
  // fc1 and fc2 forward, input and weight gradients: 6 per layer, 2 layers.
  CHECK(grouped == 12);
}

TEST_CASE("only Megatron-Core's grouped GEMMs cost the host per expert beyond the launches") {
  // The per-expert host work is GroupedLinear's (Transformer Engine), which Megatron-Core and
  // NeMo run; a framework without it pays the dispatch once and a launch per expert GEMM.
  stepsim::Scenario s = moe_scenario();
  const spt::FixedCosts costs;  // 5 us launch
  for (const auto& [framework, expert_host] :
       {std::pair{stepsim::Framework::nemo, 73.4}, std::pair{stepsim::Framework::pytorch, 0.0}}) {
    s.training.framework = framework;
    const auto p = sp::build_program(s, stepsim::workload::build_work(s), costs);
    int grouped = 0;
    for (const auto& op : p.ranks[0].ops()) {
      const std::string& name = p.names[op.name];
      // Under pytorch autocast's casts of the experts' weights are ops of their own.
      if (op.kind != stepsim::engine::OpKind::compute || name.find("expert fc") == std::string::npos ||
          name.find("shared") != std::string::npos || name.find(" cast") != std::string::npos)
        continue;
      INFO(name);
      CHECK(p.host_cost(op) == stepsim::Time::from_us(12 + 2 * 5 + expert_host));
      ++grouped;
    }
    CHECK(grouped == 12);
  }
}

TEST_CASE("a low-precision cast costs the host one launch per kernel Transformer Engine runs for it") {
  // GroupedLinear quantizes its input by tex.split_quantize (cast.cpp), which runs
  // multi_tensor_quantize_impl: one fused kernel for all the experts under FP8 delayed scaling
  // (nvte_multi_cast_transpose), otherwise each expert's rows by its own quantizer: MXFP8 one
  // kernel (nvte_quantize_v2), FP8 current scaling three (nvte_compute_amax_with_config,
  // nvte_compute_scale_from_amax, nvte_quantize_v2, Float8CurrentScalingQuantizer::quantize).
  // The weights, quantized on a chunk's first micro-batch under Megatron-Core, are one tensor
  // per expert, each quantized alone. Megatron's 12 us dispatch once, 5 us per launch; 2 local
  // experts.
  struct Case {
    stepsim::Precision precision;
    stepsim::Fp8Scaling scaling;
    int expert, expert_first, dense, dense_first;  // host us: later and first micro-batch
  };
  for (const Case c : {Case{stepsim::Precision::mxfp8, stepsim::Fp8Scaling::delayed, 22, 32, 17, 22},
                       Case{stepsim::Precision::fp8, stepsim::Fp8Scaling::current, 42, 72, 27, 42},
                       Case{stepsim::Precision::fp8, stepsim::Fp8Scaling::delayed, 17, 27, 17, 22}}) {
    stepsim::Scenario s = moe_scenario();
    s.training.framework = stepsim::Framework::megatron;
    s.training.global_batch = 32;  // 2 micro-batches
    s.training.precision = c.precision;
    s.training.fp8_scaling = c.scaling;
    INFO(stepsim::to_string(c.precision) << " " << static_cast<int>(c.scaling));
    const spt::FixedCosts costs;
    const auto p = sp::build_program(s, stepsim::workload::build_work(s), costs);
    std::map<std::string, std::vector<double>> host;
    for (const auto& op : p.ranks[0].ops()) {
      const std::string& name = p.names[op.name];
      if (name.rfind("L0 ", 0) == 0 && name.find(" cast") != std::string::npos)
        host[name].push_back(p.host_cost(op).us());
    }
    const std::string f = stepsim::to_string(c.precision);
    REQUIRE(host["L0 expert fc1 " + f + " cast fwd"].size() == 2);
    CHECK(host["L0 expert fc1 " + f + " cast fwd"][0] == Approx(c.expert_first));
    CHECK(host["L0 expert fc1 " + f + " cast fwd"][1] == Approx(c.expert));
    CHECK(host["L0 expert fc2 dgrad " + f + " cast"][0] == Approx(c.expert));
    CHECK(host["L0 fc1 " + f + " cast fwd"].empty());
    REQUIRE(host["L0 qkv " + f + " cast fwd"].size() == 2);
    CHECK(host["L0 qkv " + f + " cast fwd"][0] == Approx(c.dense_first));
    CHECK(host["L0 qkv " + f + " cast fwd"][1] == Approx(c.dense));
    CHECK(host["L0 qkv dgrad " + f + " cast"][0] == Approx(c.dense));
  }
}

TEST_CASE("EP groups are consecutive ranks and expert gradients go over the ranks holding the same experts") {
  const stepsim::Scenario s = moe_scenario();
  CHECK(sp::expert_group(s.parallel, 6) == sp::RankGroup{4, 1, 4});
  CHECK(sp::expert_data_group(s.parallel, 6) == sp::RankGroup{2, 4, 4});
  const spt::FixedCosts costs;
  const auto p = sp::build_program(s, stepsim::workload::build_work(s), costs);
  std::vector<std::string> groups;
  for (const auto& g : p.groups) groups.push_back(g.name + " " + g.ranks);
  CHECK(std::find(groups.begin(), groups.end(), "ep [0, 1, 2, 3]") != groups.end());
  CHECK(std::find(groups.begin(), groups.end(), "dp experts [0, 4, 8, 12]") != groups.end());
  // Expert buckets are all-reduced there, the dense ones over all 16 DP ranks.
  bool expert_bucket = false;
  for (OpIndex i : spt::collectives_of(p, CommKind::dp)) {
    const std::string& name = p.names[p.ranks[0].ops()[i].name];
    expert_bucket = expert_bucket || name.find("dp experts bucket") != std::string::npos;
  }
  CHECK(expert_bucket);
}

namespace {

// GB200 NVL72 racks as configs/clusters/gb200-nvl72.json has them (trays of 4 GPUs with one
// 400 Gb/s NIC each, `domain` GPUs to an NVLink domain), an MoE of 128 experts at EP `ep`
// over all `dp` GPUs.
stepsim::Scenario rack_scenario(int dp, int ep, int domain) {
  stepsim::Scenario s = spt::small_scenario(1, dp, 1);
  s.model.moe = {128, 2, 1024};
  s.parallel.ep = ep;
  s.cluster.nodes = dp / 4;
  s.cluster.gpus_per_node = 4;
  s.cluster.nvlink_domain = domain;
  s.cluster.gpu.arch = stepsim::GpuArch::blackwell;
  s.cluster.gpu.flops.bf16 = stepsim::FlopRate::tflops(2500);
  s.cluster.gpu.memory_bandwidth = stepsim::Bandwidth::gbytes_per_s(8000);
  s.cluster.gpu.sms = 148;
  s.cluster.intra_node.bandwidth = stepsim::Bandwidth::gbytes_per_s(900);
  s.cluster.intra_node.nvls = true;
  s.cluster.inter_node.nics_per_node = 4;
  s.cluster.inter_node.nic_bandwidth = stepsim::Bandwidth::gbits_per_s(400);
  return s;
}

// The kinds of link ("nvlink", "nic") that rank 0's EP all-to-alls load.
std::set<std::string> ep_links(const stepsim::Scenario& s) {
  const stepsim::hardware::GpuModel gpu(s.cluster.gpu, s.training.precision);
  const auto p = sp::build_program(s, stepsim::workload::build_work(s), sp::ModelCosts(s, gpu));
  std::set<std::string> kinds;
  for (OpIndex i : spt::collectives_of(p, CommKind::ep)) {
    const auto& call = p.ranks[0].calls[static_cast<std::size_t>(p.ranks[0].ops()[i].call)];
    for (const auto& use : call.uses) {
      const std::string& name = p.resources[use.resource].name;
      kinds.insert(name.find("nvlink") != std::string::npos ? "nvlink" : "nic");
    }
  }
  return kinds;
}

}  // namespace

TEST_CASE("an all-to-all inside an NVLink domain stays on NVLink across trays and one across two domains uses NICs") {
  // EP 64 on 16 trays of one 72-GPU domain: every byte over NVLink, none through a NIC.
  CHECK(ep_links(rack_scenario(64, 64, 72)) == std::set<std::string>{"nvlink"});
  // The same trays without a domain beyond the tray: the all-to-all leaves through the NICs.
  CHECK(ep_links(rack_scenario(64, 64, 4)) == std::set<std::string>{"nic", "nvlink"});
  // EP 128 on 32 trays, 72 GPUs in one domain and 56 in the next: part of it crosses the NICs.
  CHECK(ep_links(rack_scenario(128, 128, 72)) == std::set<std::string>{"nic", "nvlink"});
  CHECK(sp::shape_of(sp::expert_group(rack_scenario(64, 64, 72).parallel, 0), 72) ==
        stepsim::collectives::GroupShape{64, 1, 64});
}

// Megatron-Core's MoE parallel folding with expert tensor parallelism: ETP innermost, then
// EP, then expert DP over a stage's ranks; the ETP group gathers the tokens its all-to-alls
// brought before the experts and reduce-scatters their outputs after them.
TEST_CASE("with etp 2 each expert is split over two ranks that gather their tokens around the experts") {
  stepsim::Scenario s = moe_scenario();
  s.parallel.etp = 2;
  CHECK(sp::expert_tp_group(s.parallel, 5) == sp::RankGroup{4, 1, 2});
  CHECK(sp::expert_group(s.parallel, 5) == sp::RankGroup{1, 2, 4});
  CHECK(sp::expert_data_group(s.parallel, 5) == sp::RankGroup{5, 8, 2});
  const auto work = stepsim::workload::build_work(s);
  const spt::FixedCosts costs;
  const auto p = sp::build_program(s, work, costs);
  std::vector<std::string> groups;
  for (const auto& g : p.groups) groups.push_back(g.name + " " + g.ranks);
  CHECK(std::find(groups.begin(), groups.end(), "etp [0, 1]") != groups.end());
  CHECK(std::find(groups.begin(), groups.end(), "ep [0, 2, 4, 6]") != groups.end());
  CHECK(std::find(groups.begin(), groups.end(), "dp experts [0, 8]") != groups.end());
  std::vector<std::pair<CollOp, std::string>> calls;
  for (OpIndex i : spt::collectives_of(p, CommKind::ep)) {
    const auto& op = p.ranks[0].ops()[i];
    const auto& call = p.ranks[0].calls[static_cast<std::size_t>(op.call)];
    const std::string& name = p.names[op.name];
    if (name.find("L0 ") == std::string::npos) continue;
    calls.emplace_back(call.op, name);
    // The gather and the scatter carry both ranks' tokens: twice one all-to-all's.
    CHECK(call.size == (call.op == CollOp::alltoall ? work.layer.dispatch_message : work.layer.dispatch_message * 2));
  }
  REQUIRE(calls.size() == 8);
  const std::vector<CollOp> order{CollOp::alltoall, CollOp::allgather, CollOp::reducescatter, CollOp::alltoall,
                                  CollOp::alltoall, CollOp::allgather, CollOp::reducescatter, CollOp::alltoall};
  for (std::size_t i = 0; i < calls.size(); ++i) CHECK(calls[i].first == order[i]);
  CHECK(calls[1].second.find("L0 etp gather,") != std::string::npos);
  CHECK(calls[2].second.find("L0 etp scatter,") != std::string::npos);
  // A backward is named after the forward collective it is the backward of, as "combine
  // backward" is: the forward's ReduceScatter comes back as the backward's AllGather and its
  // AllGather as the ReduceScatter.
  CHECK(calls[4].second.find("L0 combine backward,") != std::string::npos);
  CHECK(calls[5].second.find("AllGather ep L0 etp scatter backward,") != std::string::npos);
  CHECK(calls[6].second.find("ReduceScatter ep L0 etp gather backward,") != std::string::npos);
  CHECK(calls[7].second.find("L0 dispatch backward,") != std::string::npos);
}

// MoEAlltoAllTokenDispatcher.dispatch_postprocess gathers over the ETP group the tokens the
// all-to-all brought and then their probabilities (gather_from_sequence_parallel_region of
// each): 2048 tokens · top 2 copies · 2 bytes from each of the 2 ETP ranks, 16 KiB; the
// probabilities' gradient goes back by the gather's backward, a ReduceScatter of as much.
TEST_CASE("with etp 2 Megatron-Core's all-to-all dispatcher gathers the probabilities over the ETP group too") {
  stepsim::Scenario s = moe_scenario();
  s.parallel.etp = 2;
  s.training.framework = stepsim::Framework::megatron;
  const auto gathers = ep_calls(s, "L0 etp probs gather");
  REQUIRE(gathers.size() == 2);
  CHECK(gathers[0].name.find("AllGather ep L0 etp probs gather,") != std::string::npos);
  CHECK(gathers[0].op == CollOp::allgather);
  CHECK(gathers[0].size.count() == 2048LL * 2 * 2 * 2);
  CHECK(gathers[1].name.find("ReduceScatter ep L0 etp probs gather backward,") != std::string::npos);
  CHECK(gathers[1].op == CollOp::reducescatter);
  CHECK(gathers[1].size == gathers[0].size);
  // The flex dispatcher carries them with the tokens, outside Megatron-Core none are sent.
  CHECK(none_beyond_alltoall_dispatcher(s, "probs gather", stepsim::Framework::unspecified));
}

// EP 16 over two nodes of 8, 8 experts (4 per node), top 2, tokens spread evenly: the
// all-to-all sends a token's copies for the other node's experts, 2 · 1/2 = 1 copy on average;
// the flex dispatcher sends one copy whenever any of the 2 distinct experts is there, with
// probability 1 − C(4,2)/C(8,2) = 22/28. Inside one node it changes nothing.
TEST_CASE("the flex dispatcher sends a token once to each other node holding one of its experts") {
  stepsim::Scenario s = spt::small_scenario(1, 16, 1);
  s.model.moe = {8, 2, 4096};
  s.parallel.ep = 16;
  const auto work = stepsim::workload::build_work(s);
  const auto size_of = [&](stepsim::MoeDispatcher d, int ep) {
    stepsim::Scenario t = s;
    t.model.moe.dispatcher = d;
    t.parallel.ep = ep;
    const spt::FixedCosts costs;
    const auto p = sp::build_program(t, stepsim::workload::build_work(t), costs);
    const auto ops = spt::collectives_of(p, CommKind::ep);
    REQUIRE(!ops.empty());
    const auto& op = p.ranks[0].ops()[ops.front()];
    return p.ranks[0].calls[static_cast<std::size_t>(op.call)].size.as_double();
  };
  CHECK(size_of(stepsim::MoeDispatcher::alltoall, 16) == work.layer.dispatch_message.as_double());
  CHECK(size_of(stepsim::MoeDispatcher::flex, 16) ==
        Approx(work.layer.dispatch_message.as_double() * 22.0 / 28.0).epsilon(1e-6));
  CHECK(size_of(stepsim::MoeDispatcher::flex, 8) == size_of(stepsim::MoeDispatcher::alltoall, 8));
}

// Megatron-Core carves expert groups out of a stage's ranks ETP innermost, then EP
// (RankGenerator's expert decoder, order tp-ep-dp-pp with tp = etp): at TP 2 and ETP 1 an EP
// group of 8 is 8 consecutive ranks, one node of 8, whatever TP is; only ETP spreads it. So
// TP 2 EP 8 on two nodes stays inside a node (the flex dispatcher sends what the all-to-all
// sends), TP 2 EP 16 spans two nodes (22/28 of it, as at TP 1), and ETP 2 EP 8 spans two (its
// expert block of 16, over which flex sends each token to both ETP ranks of its experts: the
// same bytes across nodes, the test below).
TEST_CASE("the flex dispatcher's nodes are those of Megatron's expert groups, which TP does not spread") {
  const auto size_of = [](int tp, int etp, int ep, stepsim::MoeDispatcher d) {
    stepsim::Scenario s = spt::small_scenario(tp, 32 / tp, 1);
    s.model.moe = {8, 2, 4096};
    s.parallel.sequence_parallel = tp > 1;
    s.parallel.ep = ep;
    s.parallel.etp = etp;
    s.model.moe.dispatcher = d;
    const spt::FixedCosts costs;
    const auto p = sp::build_program(s, stepsim::workload::build_work(s), costs);
    const auto ops = spt::collectives_of(p, CommKind::ep);
    REQUIRE(!ops.empty());
    for (OpIndex i : ops) {
      const auto& call = p.ranks[0].calls[static_cast<std::size_t>(p.ranks[0].ops()[i].call)];
      if (call.op == CollOp::alltoall) return call.size.as_double();
    }
    FAIL("no all-to-all");
    return 0.0;
  };
  using stepsim::MoeDispatcher;
  CHECK(size_of(2, 1, 8, MoeDispatcher::flex) == size_of(2, 1, 8, MoeDispatcher::alltoall));
  CHECK(size_of(2, 1, 16, MoeDispatcher::flex) ==
        Approx(size_of(2, 1, 16, MoeDispatcher::alltoall) * 22.0 / 28.0).epsilon(1e-6));
  CHECK(size_of(2, 2, 8, MoeDispatcher::flex) ==
        Approx(size_of(2, 2, 8, MoeDispatcher::alltoall) * 22.0 / 28.0).epsilon(1e-6));
}

// Megatron-Core's MoEFlexTokenDispatcher (token_dispatcher.py) runs one DeepEP or HybridEP
// dispatch over its tp_ep_group, the ep·etp ranks of an expert block, with router_topk and
// num_experts multiplied by the expert-TP size: _initialize_metadata repeats the routing map over
// the ETP ranks ("each TP ranks in a TP group should receive the same tokens"), and
// dispatch_postprocess and combine_preprocess gather and scatter nothing. TP 2 and EP 4 at ETP 2
// on one node of 8: the block is the node, each routed copy goes to both ranks of its expert,
// twice the all-to-all dispatcher's per-rank bytes, all over NVLink. EP 8 at ETP 2 on two nodes:
// the block of 16 spans both; a token goes once to the other node when any of its 2 experts is
// there, 1 − C(4,2)/C(8,2) = 22/28, against 2 · 2 · 1/2 = 2 copies the repeated map would send
// across: 2 · (22/28) / 2 of twice the all-to-all's bytes.
TEST_CASE("with etp 2 the flex dispatcher sends each token to every ETP rank of its experts over the expert block") {
  const auto program_of = [](int dp, int ep) {
    stepsim::Scenario s = spt::small_scenario(2, dp, 1);
    s.model.moe = {8, 2, 4096};
    s.parallel.sequence_parallel = true;
    s.parallel.ep = ep;
    s.parallel.etp = 2;
    s.model.moe.dispatcher = stepsim::MoeDispatcher::flex;
    const auto work = stepsim::workload::build_work(s);
    const spt::FixedCosts costs;
    return std::make_pair(sp::build_program(s, work, costs), work.layer.dispatch_message.as_double());
  };
  for (const auto& [dp, ep, share] : {std::tuple{4, 4, 1.0}, std::tuple{8, 8, 22.0 / 28.0 / 2.0}}) {
    INFO("ep " << ep);
    const auto [p, dispatch] = program_of(dp, ep);
    std::map<std::string, int> sizes;
    for (const auto& g : p.groups) sizes[g.name] = g.size;
    CHECK(sizes.at("ep") == 2 * ep);
    CHECK_FALSE(sizes.contains("etp"));
    const auto ops = spt::collectives_of(p, CommKind::ep);
    REQUIRE(!ops.empty());
    for (OpIndex i : ops) {
      const auto& call = p.ranks[0].calls[static_cast<std::size_t>(p.ranks[0].ops()[i].call)];
      CHECK(call.op == CollOp::alltoall);
      CHECK(call.size.as_double() == Approx(dispatch * 2 * share).epsilon(1e-6));
    }
  }
}

// Three pipeline stages of 6 ranks on 8-GPU nodes, EP 6 over 6 experts, top 2: stage 0's EP
// group (ranks 0 to 5) lies in node 0, stage 1's (6 to 11) holds 2 ranks on node 0 and 4 on
// node 1, stage 2's (12 to 17) 4 on node 1 and 2 on node 2. An EP group of 6 GPUs is no
// multiple of the node, yet two stages cross nodes. By hand, with one expert per rank: a token
// of the 2-rank side (1/3 of the tokens) has its 2 experts outside its node in 2 · 4/6 copies
// under the all-to-all, and under flex reaches the other side unless both experts are among
// its own 2, 1 − C(2,2)/C(6,2) = 14/15; a token of the 4-rank side (2/3) sends 2 · 2/6 copies
// against 1 − C(4,2)/C(6,2) = 9/15. Flex sends (1/3 · 14/15 + 2/3 · 9/15) / (1/3 · 4/3 + 2/3 ·
// 2/3) = (32/45) / (8/9) = 4/5 of the all-to-all's bytes across nodes.
TEST_CASE("the flex dispatcher's share follows where each stage's EP group lies, unevenly split included") {
  const auto sizes_of = [](stepsim::MoeDispatcher d) {
    stepsim::Scenario s = spt::small_scenario(1, 6, 1);
    s.model.moe = {6, 2, 4096};
    s.model.layers = 3;
    s.parallel.pp = 3;
    s.parallel.ep = 6;
    s.cluster.nodes = 3;
    s.model.moe.dispatcher = d;
    const spt::FixedCosts costs;
    const auto p = sp::build_program(s, stepsim::workload::build_work(s), costs);
    REQUIRE(p.ranks.size() == 3);  // one simulated rank per stage
    std::vector<double> out;
    for (std::size_t r = 0; r < p.ranks.size(); ++r) {
      const auto ops = spt::collectives_of(p, CommKind::ep, r);
      REQUIRE(!ops.empty());
      const auto& op = p.ranks[r].ops()[ops.front()];
      out.push_back(p.ranks[r].calls[static_cast<std::size_t>(op.call)].size.as_double());
    }
    return out;
  };
  const std::vector<double> all_to_all = sizes_of(stepsim::MoeDispatcher::alltoall);
  const std::vector<double> flex = sizes_of(stepsim::MoeDispatcher::flex);
  CHECK(flex[0] == all_to_all[0]);
  CHECK(flex[1] == Approx(all_to_all[1] * 4.0 / 5.0).epsilon(1e-6));
  CHECK(flex[2] == Approx(all_to_all[2] * 4.0 / 5.0).epsilon(1e-6));
}

// Twelve experts, top 2, EP 12 on 8-GPU nodes: ranks 0 to 11 hold 8 and 4. With one expert per
// rank a token of the 8 (2/3 of them) sends 2 · 4/12 copies out of its node under the
// all-to-all against 1 − C(8,2)/C(12,2) = 38/66 under flex; one of the 4 (1/3) 2 · 8/12
// against 1 − C(4,2)/C(12,2) = 60/66: (2/3 · 38/66 + 1/3 · 60/66) / (2/3 · 2/3 + 1/3 · 4/3) =
// 17/22. Counted as ep·etp / GPUs per node = 1 domain, the group had been sent whole.
TEST_CASE("the flex dispatcher sends less from an EP group over an uneven pair of nodes") {
  const auto size_of = [](stepsim::MoeDispatcher d) {
    stepsim::Scenario s = spt::small_scenario(1, 24, 1);
    s.model.moe = {12, 2, 4096};
    s.parallel.ep = 12;
    s.model.moe.dispatcher = d;
    const spt::FixedCosts costs;
    const auto p = sp::build_program(s, stepsim::workload::build_work(s), costs);
    const auto ops = spt::collectives_of(p, CommKind::ep);
    REQUIRE(!ops.empty());
    const auto& op = p.ranks[0].ops()[ops.front()];
    return p.ranks[0].calls[static_cast<std::size_t>(op.call)].size.as_double();
  };
  CHECK(size_of(stepsim::MoeDispatcher::flex) ==
        Approx(size_of(stepsim::MoeDispatcher::alltoall) * 17.0 / 22.0).epsilon(1e-6));
}
