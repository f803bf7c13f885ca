// FSDP under a pipeline schedule, as PyTorch's pipelining stages drive it: which pass of
// which micro-batch all-gathers each unit, and one ReduceScatter per unit after the
// chunk's last backward, counted per stage against numbers worked out by hand.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "parallelism/program_builder.hpp"
#include "support.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::DpKind;
using stepsim::Scenario;
using stepsim::Schedule;
using stepsim::engine::Program;

namespace {

// `layers` layers over pp stages, dp 2, m micro-batches, FSDP2 resharding after forward.
Scenario fsdp_pipeline(Schedule schedule, int pp, int v, int m, int layers) {
  Scenario s = spt::small_scenario(1, 2, m);
  s.model.layers = layers;
  s.parallel.pp = pp;
  s.parallel.schedule = schedule;
  s.parallel.virtual_stages = v;
  s.cluster.nodes = (2 * pp + 7) / 8;
  s.data_parallel.kind = DpKind::fsdp;
  s.data_parallel.fsdp_version = 2;
  s.data_parallel.reshard_after_forward = true;
  return s;
}

Program pipeline_program(const Scenario& s) {
  const spt::FixedCosts costs;
  return sp::build_program(s, spt::small_work(s), costs);
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// The passes of layer `layer` on rank `r` that an AllGather of its unit precedes, in step
// order: "F0" for micro-batch 0's forward, "B3" for micro-batch 3's backward. A chunk runs
// its micro-batches in order both ways, so the k-th forward of a layer is micro-batch k.
std::vector<std::string> gathered_passes(const Program& p, std::size_t r, int layer) {
  const std::string unit = fmt::format("AllGather fsdp L{} ", layer);
  const std::string forward = fmt::format("L{} input norm fwd", layer);
  const std::string backward = fmt::format("L{} mlp residual backward", layer);
  std::vector<std::string> out;
  bool gathered = false;
  int forwards = 0;
  int backwards = 0;
  for (const std::string& name : spt::op_names(p, r)) {
    if (starts_with(name, unit)) gathered = true;
    if (name != forward && name != backward) continue;
    const bool fwd = name == forward;
    if (gathered) out.push_back(fmt::format("{}{}", fwd ? 'F' : 'B', fwd ? forwards : backwards));
    gathered = false;
    ++(fwd ? forwards : backwards);
  }
  return out;
}

// Collectives on rank `r` whose name starts with `prefix`.
int count(const Program& p, std::size_t r, const std::string& prefix) {
  const auto names = spt::op_names(p, r);
  return static_cast<int>(
      std::count_if(names.begin(), names.end(), [&](const std::string& n) { return starts_with(n, prefix); }));
}

using Passes = std::vector<std::string>;

}  // namespace

// pp 2, m 4, 4 layers: stage 0 holds L0, L1 and the embedding, stage 1 L2, L3 and the head.
// 1F1B runs p − s − 1 warm-up forwards, so
//   stage 0: F0 F1 B0 F2 B1 F3 B2 B3,   stage 1: F0 B0 F1 B1 F2 B2 F3 B3.
// A unit needs an AllGather before a pass unless the pass before it on that unit was a
// backward that was not the last (it leaves the unit gathered); a forward reshards it.
//   stage 0: F0 (first), F1 (after F0), B0 (after F1), B1 (after F2), B2 (after F3):
//            2 forward + 3 backward = 5 = m + 1; F2, F3 follow B0, B1; B3 follows B2.
//   stage 1: F0, then B0..B3 each after a forward: 1 + 4 = 5; F1..F3 follow a backward.
// The root (embedding on stage 0, head on stage 1) stays gathered all step: 1 AllGather.
// Gradients are reduced once, after the last backward: 1 ReduceScatter per unit.
TEST_CASE("FSDP under 1F1B with two stages gathers each layer m + 1 times and reduces it once") {
  const Program p = pipeline_program(fsdp_pipeline(Schedule::one_f_one_b, 2, 1, 4, 4));
  REQUIRE(p.ranks.size() == 2);
  CHECK(gathered_passes(p, 0, 0) == Passes{"F0", "F1", "B0", "B1", "B2"});
  CHECK(gathered_passes(p, 0, 1) == Passes{"F0", "F1", "B0", "B1", "B2"});
  CHECK(gathered_passes(p, 1, 2) == Passes{"F0", "B0", "B1", "B2", "B3"});
  CHECK(gathered_passes(p, 1, 3) == Passes{"F0", "B0", "B1", "B2", "B3"});
  for (std::size_t r = 0; r < 2; ++r) {
    INFO("stage " << r);
    CHECK(count(p, r, "AllGather fsdp root") == 1);
    CHECK(count(p, r, "AllGather fsdp") == 1 + 2 * 5);
    CHECK(count(p, r, "ReduceScatter fsdp root") == 1);
    CHECK(count(p, r, "ReduceScatter fsdp") == 1 + 2);
  }
  // Layers of the other stage are neither gathered nor reduced here.
  CHECK(count(p, 0, "AllGather fsdp L2") == 0);
  CHECK(count(p, 1, "ReduceScatter fsdp L0") == 0);
}

// pp 4, m 4, 8 layers (two per stage). Warm-up w = 3 − s forwards; a layer is gathered
// before F0..Fw (the first forward and each after a forward: min(m, w + 1)) and before the
// m − w backwards of the steady phase (each after a forward); the w cool-down backwards
// follow a backward. Total (w + 1) + (m − w) = m + 1 = 5 on every stage.
//   stage 0 (w 3): F0 F1 F2 F3 B0      stage 1 (w 2): F0 F1 F2 B0 B1
//   stage 2 (w 1): F0 F1 B0 B1 B2      stage 3 (w 0): F0 B0 B1 B2 B3
TEST_CASE("FSDP under 1F1B with four stages gathers per warm-up depth and reduces once per unit") {
  const Program p = pipeline_program(fsdp_pipeline(Schedule::one_f_one_b, 4, 1, 4, 8));
  REQUIRE(p.ranks.size() == 4);
  const std::vector<Passes> expected{{"F0", "F1", "F2", "F3", "B0"},
                                     {"F0", "F1", "F2", "B0", "B1"},
                                     {"F0", "F1", "B0", "B1", "B2"},
                                     {"F0", "B0", "B1", "B2", "B3"}};
  for (std::size_t s = 0; s < 4; ++s) {
    INFO("stage " << s);
    const int first = 2 * static_cast<int>(s);
    CHECK(gathered_passes(p, s, first) == expected[s]);
    CHECK(gathered_passes(p, s, first + 1) == expected[s]);
    const bool outer = s == 0 || s == 3;
    CHECK(count(p, s, "AllGather fsdp root") == (outer ? 1 : 0));
    CHECK(count(p, s, "AllGather fsdp") == (outer ? 1 : 0) + 2 * 5);
    CHECK(count(p, s, "ReduceScatter fsdp") == (outer ? 1 : 0) + 2);
  }
}

// Interleaved, pp 2, v 2, m 4, 8 layers: virtual stages of two layers, stage 0 holds L0-1
// (chunk 0, with the embedding) and L4-5 (chunk 1), stage 1 L2-3 and L6-7 (with the head).
// Megatron's order (warm-up 2(p − s − 1) + (v − 1)p: 4 on stage 0, 2 on stage 1), written
// as micro-batch/chunk:
//   stage 0: F0/0 F1/0 F0/1 F1/1 F2/0 B0/1 F3/0 B1/1 F2/1 B0/0 F3/1 B1/0 B2/1 B3/1 B2/0 B3/0
//   stage 1: F0/0 F1/0 F0/1 B0/1 F1/1 B1/1 F2/0 B0/0 F3/0 B1/0 F2/1 B2/1 F3/1 B3/1 B2/0 B3/0
// Each chunk's own passes, with the rule of the 1F1B cases:
//   stage 0 chunk 0: F0 F1 F2 F3 B0 B1 B2 B3 -> F0 F1 F2 F3 B0
//   stage 0 chunk 1: F0 F1 B0 B1 F2 F3 B2 B3 -> F0 F1 B0 F3 B2
//   stage 1 chunk 0: F0 F1 F2 B0 F3 B1 B2 B3 -> F0 F1 F2 B0 B1
//   stage 1 chunk 1: F0 B0 F1 B1 F2 B2 F3 B3 -> F0 B0 B1 B2 B3
// Again m + 1 = 5 per layer, one root AllGather and one ReduceScatter per unit.
TEST_CASE("FSDP under the interleaved schedule gathers per chunk and reduces after each chunk's last backward") {
  const Program p = pipeline_program(fsdp_pipeline(Schedule::interleaved, 2, 2, 4, 8));
  REQUIRE(p.ranks.size() == 2);
  const std::map<int, Passes> expected{{0, {"F0", "F1", "F2", "F3", "B0"}}, {1, {"F0", "F1", "F2", "F3", "B0"}},
                                       {4, {"F0", "F1", "B0", "F3", "B2"}}, {5, {"F0", "F1", "B0", "F3", "B2"}},
                                       {2, {"F0", "F1", "F2", "B0", "B1"}}, {3, {"F0", "F1", "F2", "B0", "B1"}},
                                       {6, {"F0", "B0", "B1", "B2", "B3"}}, {7, {"F0", "B0", "B1", "B2", "B3"}}};
  for (const auto& [layer, passes] : expected) {
    INFO("layer " << layer);
    const std::size_t stage = layer % 4 < 2 ? 0 : 1;
    CHECK(gathered_passes(p, stage, layer) == passes);
  }
  for (std::size_t r = 0; r < 2; ++r) {
    INFO("stage " << r);
    CHECK(count(p, r, "AllGather fsdp") == 1 + 4 * 5);
    CHECK(count(p, r, "ReduceScatter fsdp") == 1 + 4);
  }
  // Stage 1's chunk 1 ends its backward (B3/1) before chunk 0's last two: its units' (the
  // root first, then L6, L7) ReduceScatters come after that backward, before B2/0 (which
  // starts with L3).
  const auto names = spt::op_names(p, 1);
  const auto position = [&](const std::string& prefix, long from) {
    for (auto i = static_cast<std::size_t>(from); i < names.size(); ++i) {
      if (starts_with(names[i], prefix)) return static_cast<long>(i);
    }
    return -1L;
  };
  const auto last_l6 = std::find(names.rbegin(), names.rend(), "L6 input norm backward");
  REQUIRE(last_l6 != names.rend());
  const long end = static_cast<long>(std::distance(names.begin(), last_l6.base()));
  const long root = position("ReduceScatter fsdp root", 0);
  const long l6 = position("ReduceScatter fsdp L6", 0);
  const long l7 = position("ReduceScatter fsdp L7", 0);
  const long next = position("L3 mlp residual backward", end);
  CHECK(end <= root);
  CHECK(root < l6);
  CHECK(l6 < l7);
  CHECK(l7 < next);
}

// torchtitan's default with a pipeline: no resharding after forward, so each unit is
// gathered once (micro-batch 0's forward) and kept until the last backward.
TEST_CASE("FSDP under a pipeline without resharding after forward gathers each unit once") {
  Scenario s = fsdp_pipeline(Schedule::one_f_one_b, 2, 1, 4, 4);
  s.data_parallel.reshard_after_forward = false;
  const Program p = pipeline_program(s);
  CHECK(gathered_passes(p, 0, 0) == Passes{"F0"});
  CHECK(gathered_passes(p, 1, 3) == Passes{"F0"});
  for (std::size_t r = 0; r < 2; ++r) {
    CHECK(count(p, r, "AllGather fsdp") == 3);
    CHECK(count(p, r, "ReduceScatter fsdp") == 3);
  }
}
