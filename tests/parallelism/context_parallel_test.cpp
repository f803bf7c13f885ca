// The program of a context-parallel rank: attention in ring steps with the K/V blocks on the
// cp stream, or one AllGather; gradients reduced over DP × CP.
#include <algorithm>

#include <catch2/catch.hpp>

#include "parallelism/memory_model.hpp"
#include "parallelism/program_builder.hpp"
#include "support.hpp"
#include "workload/work.hpp"

namespace sp = stepsim::parallelism;
namespace spt = stepsim::parallelism::test;
using stepsim::CollOp;
using stepsim::CommKind;
using stepsim::engine::OpIndex;
using stepsim::engine::Program;

namespace {

struct Built {
  stepsim::workload::ModelWork work;
  Program program;
};

Built work_and_program(const stepsim::Scenario& s) {
  const spt::FixedCosts costs;
  Built b{stepsim::workload::build_work(s), {}};
  b.program = sp::build_program(s, b.work, costs);
  return b;
}

// The cp collectives of rank 0 whose name contains `what`, as (op, size in bytes).
std::vector<std::pair<CollOp, long long>> cp_calls(const Program& p, const std::string& what) {
  std::vector<std::pair<CollOp, long long>> out;
  for (OpIndex i : spt::collectives_of(p, CommKind::cp)) {
    const auto& op = p.ranks[0].ops()[i];
    if (p.names[op.name].find(what) == std::string::npos) continue;
    const auto& call = p.ranks[0].calls[static_cast<std::size_t>(op.call)];
    out.emplace_back(call.op, call.size.count());
  }
  return out;
}

stepsim::Scenario cp_scenario(int cp) {
  stepsim::Scenario s = spt::small_scenario(1, 2, 1);
  s.parallel.cp = cp;
  return s;
}

}  // namespace

TEST_CASE("the CP ring passes cp − 1 K/V blocks in forward and each step's attention waits for its block") {
  const Built b = work_and_program(cp_scenario(4));
  const long long block = b.work.layer.kv_block.count();
  CHECK(block == 512LL * 2 * 1024 * 2);  // K and V of 2048/4 tokens, 16 heads of 64, bf16
  const long forward_end = spt::find_op(b.program, "L0 flash attention fwd");
  REQUIRE(forward_end >= 0);
  long forward_kv = 0;
  for (OpIndex i : spt::collectives_of(b.program, CommKind::cp)) {
    const auto& op = b.program.ranks[0].ops()[i];
    if (static_cast<long>(i) < forward_end &&
        b.program.names[op.name].find("L0 attention K/V ring step") != std::string::npos)
      ++forward_kv;
  }
  CHECK(forward_kv == 3);
  // The attention runs in 4 steps; each after the first waits for the block the ring brought.
  const long first = spt::find_op(b.program, "L0 flash attention fwd (step 1/4)");
  const long second = spt::find_op(b.program, "L0 flash attention fwd (step 2/4)");
  const long last = spt::find_op(b.program, "L0 flash attention fwd");
  REQUIRE(first >= 0);
  REQUIRE(second > first);
  REQUIRE(last > second);
  const auto waits = b.program.ranks[0].waits_of(static_cast<OpIndex>(second));
  REQUIRE(waits.size() == 1);
  CHECK(b.program.ranks[0].ops()[waits[0]].kind == stepsim::engine::OpKind::collective);
}

namespace {

// The first compute op of rank 0 after op `after`.
long next_compute(const Program& p, long after) {
  const auto& ops = p.ranks[0].ops();
  for (std::size_t i = static_cast<std::size_t>(after) + 1; i < ops.size(); ++i)
    if (ops[i].kind == stepsim::engine::OpKind::compute) return static_cast<long>(i);
  return -1;
}

bool waits_for(const Program& p, long op, long on) {
  const auto waits = p.ranks[0].waits_of(static_cast<OpIndex>(op));
  return std::find(waits.begin(), waits.end(), static_cast<OpIndex>(on)) != waits.end();
}

// The index of rank 0's last cp collective whose name contains `what`.
long last_cp(const Program& p, const std::string& what) {
  long last = -1;
  for (OpIndex i : spt::collectives_of(p, CommKind::cp))
    if (p.names[p.ranks[0].ops()[i].name].find(what) != std::string::npos) last = static_cast<long>(i);
  return last;
}

}  // namespace

TEST_CASE("Transformer Engine's ring backward sends K/V first, K/V with dK/dV between and dK/dV last") {
  // AttnFuncWithCPAndKVP2P.backward, for i in range(cp): i == 0 sends p2p_comm_buffers[0][0]
  // (K/V), i == cp − 1 sends [1] (dK/dV), the others both halves of the (2, *kv.shape)
  // buffer, in the K/V's dtype. With the forward's cp − 1 K/V blocks, per layer:
  struct Row {
    int cp;
    std::size_t kv, both, dkv;
  };
  for (const Row r : {Row{2, 1 + 1, 0, 1}, Row{4, 3 + 1, 2, 1}}) {
    INFO("cp " << r.cp);
    const Built b = work_and_program(cp_scenario(r.cp));
    const long long block = 2048LL / r.cp * 2 * 1024 * 2;  // K and V of the rank's tokens, bf16
    REQUIRE(b.work.layer.kv_block.count() == block);
    const auto kv = cp_calls(b.program, "L0 attention K/V ring step");
    const auto both = cp_calls(b.program, "L0 attention K/V and dK/dV ring step");
    const auto dkv = cp_calls(b.program, "L0 attention dK/dV ring step");
    CHECK(kv.size() == r.kv);
    CHECK(both.size() == r.both);
    CHECK(dkv.size() == r.dkv);
    for (const auto& call : kv) CHECK(call == std::pair{CollOp::sendrecv, block});
    for (const auto& call : both) CHECK(call == std::pair{CollOp::sendrecv, 2 * block});
    for (const auto& call : dkv) CHECK(call == std::pair{CollOp::sendrecv, block});
    // The dK/dV leave before the own block's attention, which runs beside them and does not
    // wait for them; the op after the attention does.
    const long message = last_cp(b.program, "L0 attention dK/dV ring step");
    const long own = spt::find_op(b.program, "L0 flash attention backward");
    REQUIRE(message >= 0);
    REQUIRE(own > message);
    CHECK_FALSE(waits_for(b.program, own, message));
    CHECK(waits_for(b.program, next_compute(b.program, own), message));
  }
}

TEST_CASE("PyTorch's ring backward passes cp float32 dK/dV blocks whichever way the K/V come") {
  // _templated_ring_attention_backward: kv_rotater as in forward (cp − 1 K/V blocks around
  // the ring, or one AllGather of the cp blocks), dkv_rotater an _AllToAllRotater that sends
  // the float32 dK/dV once a step, cp times, waited for after the loop. Eager PyTorch has no
  // other context parallelism than this torch.distributed.tensor.experimental.context_parallel,
  // which torchtitan calls too.
  struct Row {
    int cp;
    stepsim::CpComm comm;
    stepsim::Framework framework;
  };
  const auto tt = stepsim::Framework::torchtitan;
  const auto eager = stepsim::Framework::pytorch;
  for (const Row r : {Row{2, stepsim::CpComm::p2p, tt}, Row{4, stepsim::CpComm::p2p, tt},
                      Row{2, stepsim::CpComm::all_gather, tt}, Row{4, stepsim::CpComm::all_gather, tt},
                      Row{4, stepsim::CpComm::p2p, eager}, Row{4, stepsim::CpComm::all_gather, eager}}) {
    INFO("cp " << r.cp << (r.comm == stepsim::CpComm::p2p ? " p2p" : " all_gather")
               << (r.framework == eager ? " pytorch" : " torchtitan"));
    stepsim::Scenario s = cp_scenario(r.cp);
    s.context_parallel.comm = r.comm;
    s.training.framework = r.framework;
    const Built b = work_and_program(s);
    const long long block = 2048LL / r.cp * 2 * 1024 * 2;  // K and V of the rank's tokens, bf16
    REQUIRE(b.work.layer.kv_block.count() == block);
    const auto dkv = cp_calls(b.program, "L0 attention dK/dV ring step");
    REQUIRE(dkv.size() == static_cast<std::size_t>(r.cp));
    for (const auto& call : dkv) CHECK(call == std::pair{CollOp::sendrecv, 2 * block});  // float32
    CHECK(cp_calls(b.program, "L0 attention K/V and dK/dV").empty());
    CHECK(cp_calls(b.program, "L0 attention dK/dV,").empty());  // no ReduceScatter
    if (r.comm == stepsim::CpComm::p2p) {
      const auto kv = cp_calls(b.program, "L0 attention K/V ring step");
      CHECK(kv.size() == static_cast<std::size_t>(2 * (r.cp - 1)));
      for (const auto& call : kv) CHECK(call == std::pair{CollOp::sendrecv, block});
    } else {
      const auto gathers = cp_calls(b.program, "L0 attention K/V,");
      REQUIRE(gathers.size() == 2);
      for (const auto& call : gathers) CHECK(call == std::pair{CollOp::allgather, r.cp * block});
    }
    // The last dK/dV leave after the own block's attention and the op after it waits for them.
    const long own = spt::find_op(b.program, "L0 flash attention backward");
    const long message = last_cp(b.program, "L0 attention dK/dV ring step");
    REQUIRE(own >= 0);
    REQUIRE(message > own);
    CHECK(waits_for(b.program, message, own));
    CHECK(waits_for(b.program, next_compute(b.program, message), message));
    // Step 3 (cp 4) waits for the dK/dV of step 1, which step 2's addition waited for.
    if (r.cp == 4) {
      const long step1 = spt::find_op(b.program, "L0 flash attention backward (step 1/4)");
      const long step3 = spt::find_op(b.program, "L0 flash attention backward (step 3/4)");
      const long first_dkv = spt::find_op(b.program, b.program.names[b.program.ranks[0].ops()[message].name], step1);
      CHECK(first_dkv > step1);
      CHECK(waits_for(b.program, step3, first_dkv));
    }
  }
}

// Transformer Engine's AttnFuncWithCPAndKVAllGather gathers K and then V
// (gather_along_first_dim(k, cp_group), then of v), in forward and again in backward, and its
// backward ends with reduce_scatter_along_first_dim(dk) and then of dv: each of the four
// AllGathers and the two ReduceScatters moves the whole sequence's K, V, dK or dV, half of the
// gathered K/V: at CP 2 (1,024 tokens a rank) one rank's K/V block, 1,024 · 2 · 1024 · 2 bytes;
// V's after K's, the attention after V's, the dV's after the dK's.
TEST_CASE(
    "the all_gather variant gathers K, then V, before attention and reduce-scatters dK, then dV, after its "
    "backward") {
  stepsim::Scenario s = cp_scenario(2);
  s.context_parallel.comm = stepsim::CpComm::all_gather;
  const Built b = work_and_program(s);
  const long long block = b.work.layer.kv_block.count();
  CHECK(block == 1024LL * 2 * 1024 * 2);
  const long long half_whole = 1024LL * 1024 * 2 * 2;  // K (or V) of the 2,048 tokens, bf16
  CHECK(cp_calls(b.program, "L0 attention K/V,").empty());
  for (const char* what : {"L0 attention K,", "L0 attention V,"}) {
    INFO(what);
    const auto gathers = cp_calls(b.program, what);
    REQUIRE(gathers.size() == 2);  // forward and backward
    for (const auto& call : gathers) CHECK(call == std::pair{CollOp::allgather, half_whole});
  }
  // The backward's gathers: V's waits for K's and the attention for V's.
  const long k = last_cp(b.program, "L0 attention K,");
  const long v = last_cp(b.program, "L0 attention V,");
  CHECK(waits_for(b.program, v, k));
  CHECK(waits_for(b.program, spt::find_op(b.program, "L0 flash attention backward"), v));
  CHECK(cp_calls(b.program, "L0 attention dK/dV,").empty());
  const auto dk = cp_calls(b.program, "L0 attention dK,");
  const auto dv = cp_calls(b.program, "L0 attention dV,");
  REQUIRE(dk.size() == 1);
  REQUIRE(dv.size() == 1);
  CHECK(dk[0] == std::pair{CollOp::reducescatter, 1024LL * 1024 * 2 * 2});
  CHECK(dv[0] == dk[0]);
  const long dk_op = last_cp(b.program, "L0 attention dK,");
  const long dv_op = last_cp(b.program, "L0 attention dV,");
  CHECK(dv_op > dk_op);
  CHECK(waits_for(b.program, dv_op, dk_op));
}

TEST_CASE("gradients of CP ranks are reduced over the dp·cp group and CP sits between TP and DP") {
  stepsim::Scenario s = spt::small_scenario(2, 2, 1);
  s.parallel.cp = 2;
  const Built b = work_and_program(s);
  std::vector<std::string> groups;
  for (const auto& g : b.program.groups) groups.push_back(g.name + " " + g.ranks);
  CHECK(std::find(groups.begin(), groups.end(), "tp [0, 1]") != groups.end());
  CHECK(std::find(groups.begin(), groups.end(), "cp [0, 2]") != groups.end());
  CHECK(std::find(groups.begin(), groups.end(), "dp [0, 2, 4, 6]") != groups.end());
}

namespace {

std::vector<std::string> group_names(const Program& p) {
  std::vector<std::string> groups;
  for (const auto& g : p.groups) groups.push_back(g.name + " " + g.ranks);
  return groups;
}

bool has(const std::vector<std::string>& groups, const std::string& group) {
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

}  // namespace

// torchtitan's HSDP with context parallelism (parallel_dims.py): FSDP shards over the flattened
// dp_shard_cp mesh, dp_shard DP ranks times their cp ranks, and replicates over dp_replicate.
// At tp 2, cp 2, dp 2 (CP group [0, 2], DP group [0, 4]): a shard group of one DP rank is its CP
// group, the replicas the DP group; a shard group of two DP ranks is all four.
TEST_CASE("HSDP's shard group counts DP ranks and holds their whole CP groups") {
  stepsim::Scenario s = spt::small_scenario(2, 2, 1);
  s.parallel.cp = 2;
  s.data_parallel.kind = stepsim::DpKind::hsdp;
  s.data_parallel.shard_group = 1;
  const auto one = group_names(work_and_program(s).program);
  CHECK(has(one, "fsdp [0, 2]"));
  CHECK(has(one, "dp [0, 4]"));
  CHECK(sp::placement_notes(s).find("HSDP: shard groups of 1 DP ranks with their CP groups of 2 (2 GPUs), gradient "
                                    "shards all-reduced across 2 groups") != std::string::npos);
  CHECK(sp::placement_notes(s).find("Adam on 1/2 of the parameters") != std::string::npos);
  s.data_parallel.shard_group = 2;
  const auto both = group_names(work_and_program(s).program);
  CHECK(has(both, "fsdp [0, 2, 4, 6]"));
  CHECK(std::none_of(both.begin(), both.end(), [](const std::string& g) { return g.rfind("dp ", 0) == 0; }));
  // By default one node's DP ranks: the node's 8 GPUs hold tp·cp = 4 a DP rank, so both.
  s.data_parallel.shard_group = 0;
  CHECK(has(group_names(work_and_program(s).program), "fsdp [0, 2, 4, 6]"));
}

TEST_CASE("under torchtitan the K/V gathered are as wide as the queries and the own block runs beside the gather") {
  stepsim::Scenario s = cp_scenario(4);
  s.model.kv_heads = 4;  // 16 query heads of 64 share 4 K/V heads
  s.context_parallel.comm = stepsim::CpComm::all_gather;
  // Megatron-Core's attention takes the 4 K/V heads as they are: 512 tokens, K and V, bf16.
  CHECK(work_and_program(s).work.layer.kv_block.count() == 512LL * 2 * 4 * 64 * 2);
  s.training.framework = stepsim::Framework::torchtitan_compile;
  const Built b = work_and_program(s);
  // torchtitan repeats them to the 16 query heads before scaled_dot_product_attention.
  CHECK(b.work.layer.kv_block.count() == 512LL * 2 * 16 * 64 * 2);
  const auto gathers = cp_calls(b.program, "L0 attention K/V,");
  REQUIRE(!gathers.empty());
  CHECK(gathers[0] == std::pair{CollOp::allgather, 4 * 512LL * 2 * 16 * 64 * 2});
  // The own block's attention (a quarter of the work) waits for nothing on the cp stream; the
  // rest waits for the gather.
  const long own = spt::find_op(b.program, "L0 flash attention fwd (step 1/2)");
  const long rest = spt::find_op(b.program, "L0 flash attention fwd");
  REQUIRE(own >= 0);
  REQUIRE(rest > own);
  const auto& rank = b.program.ranks[0];
  for (OpIndex w : rank.waits_of(static_cast<OpIndex>(own)))
    CHECK(rank.ops()[w].kind != stepsim::engine::OpKind::collective);
  const auto rest_waits = rank.waits_of(static_cast<OpIndex>(rest));
  REQUIRE(rest_waits.size() == 1);
  CHECK(b.program.names[rank.ops()[rest_waits[0]].name].find("L0 attention K/V,") != std::string::npos);
}

TEST_CASE("context parallelism's K/V buffers are held during a layer's attention backward") {
  // Two stages (the first has no loss), full recompute: the first stage peaks in its first
  // backward, with one layer's working set and its attention's CP buffers on top of what it keeps.
  stepsim::Scenario s = cp_scenario(4);
  s.parallel.pp = 2;
  s.training.recompute = stepsim::Recompute::full;
  const auto peak = [](const stepsim::Scenario& sc) {
    return sp::estimate_memory(sc, stepsim::workload::build_work(sc)).stages.front().activations.count();
  };
  const long long block = 512LL * 2 * 1024 * 2;  // one rank's K and V: 512 tokens, 16 heads of 64, bf16
  const long long queries = block / 2;           // dQ's accumulator: 512 tokens, 16 heads of 64, bf16
  const long long ring = peak(s);                // Transformer Engine's two p2p_comm_buffers and dq_buffer
  s.context_parallel.comm = stepsim::CpComm::all_gather;
  const long long gathered = peak(s);  // the gathered K/V, the sequence's dK/dV, the steps' dK/dV
  CHECK(gathered - ring == (27 * block / 2 + queries) - (4 * block + queries));
  s.parallel.cp = 1;
  s.context_parallel.comm = stepsim::CpComm::p2p;
  s.model.seq_len /= 4;  // the same tokens on a rank without context parallelism
  CHECK(ring - peak(s) == 4 * block + queries);
}
