// The TP collectives of multi-head latent attention and of multi-token prediction at tp 2, as
// Megatron-Core issues them: DeepSeek-V3's widths on a stack of four layers, sizes by hand.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "io/scenario_loader.hpp"
#include "parallelism/program_builder.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace spt = stepsim::parallelism::test;
using stepsim::CommKind;
using stepsim::engine::Program;

namespace {

// DeepSeek-V3's layers (three dense, one MoE) and its multi-token prediction depth, one
// sequence of 4096 tokens per rank in bf16, TP 2 on one node. Megatron requires sequence
// parallelism beside MoE layers; without it, only the dense layer L0 is looked at.
stepsim::Scenario deepseek(bool sequence_parallel) {
  constexpr const char* kBase = R"({ "cluster": "dgx-h100-ndr", "parallel": { "tp": 2, "dp": 4, "ep": 4,
    "sequence_parallel": true }, "training": { "global_batch": 4, "micro_batch": 1 } })";
  stepsim::Scenario s =
      stepsim::io::load_scenario_text(kBase, "t.json", {"model=deepseek-v3", "model.layers=4", "model.mtp_layers=1"});
  s.parallel.sequence_parallel = sequence_parallel;
  return s;
}

Program build(const stepsim::Scenario& s) {
  const spt::FixedCosts costs;
  return stepsim::parallelism::build_program(s, stepsim::workload::build_work(s), costs);
}

// The TP collectives whose names start with `prefix` ("AllGather tp L0 "), as (name, bytes) in
// issue order.
std::vector<std::pair<std::string, long long>> tp_calls(const Program& p, const std::string& prefix) {
  std::vector<std::pair<std::string, long long>> out;
  for (stepsim::engine::OpIndex i : spt::collectives_of(p, CommKind::tp)) {
    const auto& op = p.ranks[0].ops()[i];
    const std::string& name = p.names[op.name];
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string what = name.substr(0, name.find(','));
    out.emplace_back(what, p.ranks[0].calls[static_cast<std::size_t>(op.call)].size.count());
  }
  return out;
}

using Calls = std::vector<std::pair<std::string, long long>>;

constexpr long long kHidden = 4096LL * 7168 * 2;  // b·s·h in bf16: 56 MiB
constexpr long long kQ = 4096LL * 1536 * 2;       // the query latent of the sequence: 12 MiB
constexpr long long kKv = 4096LL * 512 * 2;       // the kv latent: 4 MiB
constexpr long long kRope = 4096LL * 64 * 2;      // the shared rotary key: 512 KiB
constexpr long long kPair = 4096LL * 14336 * 2;   // MTP's two normed streams, 2h wide: 112 MiB

}  // namespace

// Under sequence parallelism MLASelfAttention gathers no hidden state before attention: the
// duplicated down projections run on the rank's s/t rows, the rotary key is gathered
// (gather_from_sequence_parallel_region), and each column-parallel up projection gathers its
// normed latent (TELayerNormColumnParallelLinear); the backward reduce-scatters those
// gradients and gathers the latents again for the weight gradients.
TEST_CASE("latent attention at tp 2 with sequence parallelism gathers its latents, not the hidden state") {
  const Program p = build(deepseek(true));
  CHECK(tp_calls(p, "AllGather tp L0 ") == Calls{{"AllGather tp L0 kv down projection rotary key fwd", kRope},
                                                 {"AllGather tp L0 q up projection fwd", kQ},
                                                 {"AllGather tp L0 kv up projection fwd", kKv},
                                                 {"AllGather tp L0 fc1 fwd", kHidden},
                                                 {"AllGather tp L0 fc2 output grad", kHidden},
                                                 {"AllGather tp L0 fc1 wgrad input", kHidden},
                                                 {"AllGather tp L0 attention projection output grad", kHidden},
                                                 {"AllGather tp L0 kv up projection wgrad input", kKv},
                                                 {"AllGather tp L0 q up projection wgrad input", kQ}});
  CHECK(tp_calls(p, "ReduceScatter tp L0 ") ==
        Calls{{"ReduceScatter tp L0 attention projection fwd", kHidden},
              {"ReduceScatter tp L0 fc2 fwd", kHidden},
              {"ReduceScatter tp L0 fc1 dgrad", kHidden},
              {"ReduceScatter tp L0 kv up projection dgrad", kKv},
              {"ReduceScatter tp L0 q up projection dgrad", kQ},
              {"ReduceScatter tp L0 kv down projection rotary key grad", kRope}});
  CHECK(tp_calls(p, "AllReduce tp L0 ").empty());
}

// Without sequence parallelism every rank holds the whole sequence: the up projections' input
// gradients are all-reduced (the conjugate of copy_to_tensor_model_parallel_region), nothing
// is gathered.
TEST_CASE("latent attention at tp 2 without sequence parallelism all-reduces the latents' gradients") {
  const Program p = build(deepseek(false));
  CHECK(tp_calls(p, "AllGather tp L0 ").empty());
  CHECK(tp_calls(p, "AllReduce tp L0 ") == Calls{{"AllReduce tp L0 attention projection fwd", kHidden},
                                                 {"AllReduce tp L0 fc2 fwd", kHidden},
                                                 {"AllReduce tp L0 fc1 dgrad", kHidden},
                                                 {"AllReduce tp L0 kv up projection dgrad", kKv},
                                                 {"AllReduce tp L0 q up projection dgrad", kQ}});
}

// MultiTokenPredictionLayer: the vocabulary-parallel embedding reduced (scattered to s/t rows
// under SP), eh_proj column-parallel over the gathered 2h-wide pair, its h/t-wide output
// gathered along the hidden dimension (all_gather_last_dim_from_tensor_parallel_region) and
// scattered back to the rank's rows; backward: the rows gathered, the hidden dimension
// reduce-scattered, the pair's gradient reduce-scattered and the pair gathered again for the
// weight gradient.
TEST_CASE("multi-token prediction at tp 2 reduces its embedding and gathers its projection's output") {
  const Program sp = build(deepseek(true));
  CHECK(tp_calls(sp, "ReduceScatter tp mtp0 embedding") == Calls{{"ReduceScatter tp mtp0 embedding fwd", kHidden}});
  Calls projection = tp_calls(sp, "AllGather tp mtp0 projection");
  for (auto& c : tp_calls(sp, "ReduceScatter tp mtp0 projection")) projection.push_back(c);
  CHECK(projection == Calls{{"AllGather tp mtp0 projection fwd", kPair},
                            {"AllGather tp mtp0 projection output fwd", kHidden},
                            {"AllGather tp mtp0 projection sequence grad", kHidden},
                            {"AllGather tp mtp0 projection wgrad input", kPair},
                            {"ReduceScatter tp mtp0 projection output grad", kHidden},
                            {"ReduceScatter tp mtp0 projection dgrad", kPair}});
  // Its transformer layer's collectives are the model's layers'.
  CHECK(tp_calls(sp, "AllGather tp mtp0 q up projection fwd") == Calls{{"AllGather tp mtp0 q up projection fwd", kQ}});

  const Program plain = build(deepseek(false));
  CHECK(tp_calls(plain, "AllReduce tp mtp0 embedding") == Calls{{"AllReduce tp mtp0 embedding fwd", kHidden}});
  CHECK(tp_calls(plain, "AllGather tp mtp0 projection") == Calls{{"AllGather tp mtp0 projection output fwd", kHidden}});
  CHECK(tp_calls(plain, "ReduceScatter tp mtp0 projection") ==
        Calls{{"ReduceScatter tp mtp0 projection output grad", kHidden}});
  CHECK(tp_calls(plain, "AllReduce tp mtp0 projection") == Calls{{"AllReduce tp mtp0 projection dgrad", kPair}});
}
