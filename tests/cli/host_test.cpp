// The host side of a step: the CPU that issues every kernel (training.framework's cost per
// operator, CUDA graphs), the frameworks' kernel presets, and what the report and trace show.
#include <catch2/catch.hpp>

#include <boost/json/parse.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/kineto_events.hpp"
#include "cli/run_stepsim.hpp"
#include "cli/simulate_support.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"

namespace {

// GPT-3 Small (125M parameters) in eager PyTorch under DDP on one 8-GPU H100 node, short
// sequences: every kernel is shorter than the CPU takes to issue it.
const std::string& kSmall = stepsim::test::kEagerGpt3Small;

stepsim::Scenario small(const std::vector<std::string>& sets = {}) {
  return stepsim::io::load_scenario_text(kSmall, "small.json", sets);
}

// The sum of the durations of rank 0's compute kernels.
double kernel_sum_s(const stepsim::Timeline& t) {
  double sum = 0;
  for (const stepsim::Interval& i : t.ranks.front().intervals)
    if (i.activity == stepsim::Activity::compute) sum += (i.end - i.start).seconds();
  return sum;
}

bool mentions(const stepsim::Report& r, const std::string& part) {
  for (const auto& n : r.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("A launch-bound eager step lasts as long as its CPU takes to issue it, not the sum of its kernels") {
  const stepsim::SimulationResult r = stepsim::simulate(small());
  // By hand: an eager GPT layer runs 14 operators forward (2 layernorms, qkv, attention,
  // projection, fc1, GELU, fc2, and each of the 2 residuals' bias add, dropout and add) and 20
  // backward (a dgrad and a wgrad per Linear, the layernorms', attention's and GELU's nodes, the
  // qkv and fc1 biases' gradient sums, and each residual's dropout gradient, bias gradient sum
  // and the residual stream's two gradients summed); outside the layers the embedding, final
  // layernorm and LM head forward, the loss's upcast, log_softmax and nll_loss, and backward
  // the embedding's, the final layernorm's, the LM head's dgrad and wgrad and the loss's 5 (the
  // seed gradient, nll_loss_backward's zeroed gradient and kernel, log_softmax's backward, the
  // cast back): 12 x 34 + 6 + 9 = 423 per micro-batch. Autocast adds its casts (PyTorch's
  // cached_cast, an operator per tensor): forward each layer's qkv weight and bias, projection
  // weight, fc1 weight and bias and fc2 weight, and the LM head's weight, and backward each of
  // their gradients back to fp32 (_to_copy_backward): 2 x (12 x 6 + 1) = 146; and since its
  // residual stream is fp32, the qkv, fc1 and LM head inputs (the layernorms' fp32 outputs) cast
  // forward and their gradients backward, 2 x (12 x 2 + 1) = 50, and each residual's backward
  // casts the bf16 branch's gradient (the autograd engine's validate_outputs), 12 x 2 = 24: 643
  // per micro-batch.
  // 256 sequences on 8 replicas, one per micro-batch: 32 micro-batches. Then DDP's 14 bucket AllReduces (621 MiB of
  // fp32 gradients, autocast keeping the parameters fp32: the 147 MiB LM head alone in the 1 MiB first bucket, then 25
  // MiB buckets of about a 27 MiB layer each, 12, and the 147 MiB embedding with what is left) and the optimizer step
  // (torch.optim's foreach Adam: 7 operators). PyTorch's DDP reducer, without gradient_as_bucket_view, copies each of
  // the 149 gradients (word and position embeddings, 12 a layer: two layernorms, qkv, projection, fc1 and fc2, each a
  // weight and a bias; the final layernorm's two; the LM head) into its bucket in the last micro-batch and back after
  // its AllReduce: an operator each way. Under no_sync() the micro-batches accumulate into each parameter's .grad
  // through autograd's AccumulateGrad, which takes the first micro-batch's gradient as it is and adds each later one
  // in place (accumulate_grad.h: `variable_grad += new_grad`, an aten::add_ per tensor): 149 x 31. Each operator costs
  // the CPU the H100 preset's 5 us launch and eager PyTorch's 12 us dispatch.
  const double ops = (423.0 + 146 + 50 + 24) * 32 + 149 * 31 + 14 + 7 + 2 * 149;
  const double issue_s = ops * 17e-6;  // 25,514 operators: 433.7 ms
  // The optimizer's kernels, issued last, run after the last issue.
  CHECK(r.report.step_time_s - r.report.breakdown_s.optimizer == Approx(issue_s).epsilon(0.02));
  CHECK(kernel_sum_s(r.timeline) < 0.9 * r.report.step_time_s);
  // The report says the GPU waited for the host for the difference.
  CHECK(r.report.host.framework == "pytorch");
  CHECK(r.report.host.cpu_issue_s == Approx(issue_s).epsilon(0.001));
  CHECK(r.report.host.gpu_wait_s == Approx(r.report.step_time_s - kernel_sum_s(r.timeline)).epsilon(0.05));
}

TEST_CASE("Eager PyTorch adds each gradient into .grad in every micro-batch after the first") {
  // By hand: one micro-batch (global batch 8 on 8 replicas) issues 643 operators, then DDP's 14 AllReduces, the 7 of
  // the optimizer and the reducer's 2 x 149 copies: 962, 16.354 ms at 17 us. A second micro-batch adds its 643 and,
  // since the first left each parameter's .grad defined, AccumulateGrad's in-place add for each of the 149 gradient
  // tensors (torch/csrc/autograd/functions/accumulate_grad.h, accumulateGrad: `variable_grad += new_grad`, one
  // aten::add_ each): 1,754, 29.818 ms.
  const auto cpu_s = [](const std::vector<std::string>& sets) {
    return stepsim::simulate(small(sets)).report.host.cpu_issue_s;
  };
  CHECK(cpu_s({"training.global_batch=8"}) == Approx(962 * 17e-6).epsilon(1e-6));
  CHECK(cpu_s({"training.global_batch=16"}) == Approx(1754 * 17e-6).epsilon(1e-6));
  // Megatron-Core accumulates inside the weight-gradient GEMM (gradient_accumulation_fusion), and FSDP reduce-scatters
  // and frees each micro-batch's unsharded gradients: a second micro-batch costs them its own operators alone.
  for (const std::string kind : {"training.framework=megatron", "data_parallel.kind=fsdp"}) {
    INFO(kind);
    const double one = cpu_s({kind, "training.global_batch=8"});
    const double two = cpu_s({kind, "training.global_batch=16"});
    const double three = cpu_s({kind, "training.global_batch=24"});
    CHECK(three - two == Approx(two - one).epsilon(1e-9));
  }
  // The adds are ops of their own, named by the gradients they accumulate, none in the first micro-batch.
  const stepsim::SimulationResult r = stepsim::simulate(small({"training.global_batch=16"}));
  int adds = 0;
  for (const stepsim::Interval& i : r.timeline.ranks.front().intervals)
    if (i.activity == stepsim::Activity::compute && r.timeline.names[i.name].starts_with("AccumulateGrad ")) ++adds;
  CHECK(adds > 0);
}

TEST_CASE("FSDP2 under a pipeline schedule accumulates unsharded gradients in .grad, as DDP does") {
  // torchtitan, FSDP2 on 2 stages x 4 replicas, global batch 16: 4 micro-batches a replica. PyTorch's pipelining runs
  // every backward but the last without gradient sync or resharding, so AccumulateGrad adds each later micro-batch's
  // gradients into the unsharded .grad. Stage 0 (the embedding and 6 layers) completes gradients in 37 ops a
  // backward: the embedding's (word and position tables) and each layer's 6 gradient-making ops (its two
  // layernorms, qkv, projection, fc1, fc2): 37 x 3 adds.
  const auto adds = [](const std::vector<std::string>& sets) {
    std::vector<std::string> all{"training.framework=torchtitan", "data_parallel.kind=fsdp",
                                 "training.global_batch=16"};
    all.insert(all.end(), sets.begin(), sets.end());
    const stepsim::SimulationResult r = stepsim::simulate(small(all));
    int n = 0;
    for (const stepsim::Interval& i : r.timeline.ranks.front().intervals)
      if (i.activity == stepsim::Activity::compute && r.timeline.names[i.name].starts_with("AccumulateGrad ")) ++n;
    return n;
  };
  CHECK(adds({"parallel.pp=2", "parallel.dp=4"}) == 37 * 3);
  // Without a pipeline FSDP reduce-scatters and frees each micro-batch's unsharded gradients: nothing accumulates.
  CHECK(adds({}) == 0);
}

TEST_CASE("PyTorch's clip_grad_norm_ costs the host its operators") {
  // torch.nn.utils.clip_grad_norm_ on its foreach path: _foreach_norm, stack, linalg.vector_norm, the add of 1e-6,
  // max_norm divided by it (Tensor.__rtruediv__: reciprocal, mul), clamp and _foreach_mul_: 8 operators of 17 us.
  for (const std::string framework : {"pytorch", "torchtitan"}) {
    INFO(framework);
    const auto cpu_s = [&](bool clip) {
      return stepsim::simulate(small({"training.framework=" + framework, "training.global_batch=8",
                                      std::string("training.grad_clip=") + (clip ? "true" : "false")}))
          .report.host.cpu_issue_s;
    };
    CHECK(cpu_s(true) - cpu_s(false) == Approx(8 * 17e-6).epsilon(1e-6));
  }
}

TEST_CASE("With CUDA graphs the same step is the sum of its kernels") {
  const stepsim::SimulationResult r = stepsim::simulate(small({"training.cuda_graphs=true"}));
  // What the graphs do not capture (embedding, head, loss, buckets, optimizer: 9 ops a
  // micro-batch) still costs the CPU, but the GPU is ahead of it.
  CHECK(r.report.step_time_s == Approx(kernel_sum_s(r.timeline)).epsilon(0.02));
  CHECK(r.report.host.gpu_wait_s < 0.01 * r.report.step_time_s);
  CHECK(mentions(r.report, "replayed by CUDA graphs"));
  // The memory figures stay the eager step's, and the report says the graphs' own are missing.
  const stepsim::SimulationResult eager = stepsim::simulate(small());
  CHECK(mentions(r.report, "memory: the CUDA graphs' own memory is not counted"));
  CHECK_FALSE(mentions(eager.report, "CUDA graphs' own memory"));
  CHECK(r.report.memory_bytes.peak == eager.report.memory_bytes.peak);
  // More CPU per operator never makes a step faster, and graphs never slower.
  CHECK(r.report.step_time_s < eager.report.step_time_s);
}

TEST_CASE("Each framework sets the kernels it runs, and a key beside it overrides them") {
  struct Row {
    std::string framework, fusion, attention, cross_entropy;
    bool grad_clip;
  };
  // As each framework runs a transformer by default (docs/model.md, "The host").
  const std::vector<Row> rows{
      {"megatron", "fused", "flash", "unfused", true},  {"nemo", "fused", "flash", "fused", true},
      {"torchtitan", "eager", "flash2", "eager", true}, {"torchtitan-compile", "fused", "flash2", "compiled", true},
      {"pytorch", "eager", "flash2", "eager", false},   {"deepspeed", "eager", "flash2", "eager", false},
      {"unspecified", "fused", "flash", "fused", true},
  };
  for (const Row& row : rows) {
    INFO(row.framework);
    const stepsim::Scenario s = small({"training.framework=" + row.framework});
    const auto config = boost::json::parse(s.resolved_json).at("training");
    CHECK(config.at("framework").as_string() == row.framework);
    CHECK(config.at("fusion").as_string() == row.fusion);
    CHECK(config.at("attention").as_string() == row.attention);
    CHECK(config.at("cross_entropy").as_string() == row.cross_entropy);
    CHECK(config.at("grad_clip").as_bool() == row.grad_clip);
    // Each of its keys set beside it wins.
    const stepsim::Scenario own = small({"training.framework=" + row.framework, "training.attention=unfused",
                                         "training.fusion=" + std::string(row.fusion == "fused" ? "eager" : "fused"),
                                         "training.cross_entropy=compiled",
                                         std::string("training.grad_clip=") + (row.grad_clip ? "false" : "true")});
    const auto mine = boost::json::parse(own.resolved_json).at("training");
    CHECK(mine.at("framework").as_string() == row.framework);
    CHECK(mine.at("attention").as_string() == "unfused");
    CHECK(mine.at("fusion").as_string() != row.fusion);
    CHECK(mine.at("cross_entropy").as_string() == "compiled");
    CHECK(mine.at("grad_clip").as_bool() != row.grad_clip);
  }
  // A key beside the framework wins, wherever it stands in the object.
  const std::string before = R"({"model": "gpt-1.3b", "cluster": "dgx-h100-ndr", "parallel": {"dp": 8},
    "training": {"attention": "flash", "framework": "torchtitan", "global_batch": 8}})";
  const auto config = boost::json::parse(stepsim::io::load_scenario_text(before, "s.json", {}).resolved_json);
  CHECK(config.at("training").at("attention").as_string() == "flash");
  CHECK(config.at("training").at("fusion").as_string() == "eager");
  // And a --set after it.
  const auto set = boost::json::parse(small({"training.fusion=fused"}).resolved_json);
  CHECK(set.at("training").at("fusion").as_string() == "fused");
  const stepsim::SimulationResult r = stepsim::simulate(small({"training.fusion=fused"}));
  CHECK(mentions(r.report, "framework pytorch: eager PyTorch"));
  CHECK(mentions(r.report, "training.fusion set apart from it"));
}

TEST_CASE("A scenario without a framework says whose kernels it gets") {
  const std::string plain = R"({"model": "gpt-1.3b", "cluster": "dgx-h100-ndr", "parallel": {"dp": 8},
    "training": {"global_batch": 8}})";
  const stepsim::SimulationResult r = stepsim::simulate(stepsim::io::load_scenario_text(plain, "s.json", {}));
  CHECK(r.report.host.framework == "unspecified");
  CHECK(mentions(r.report, "framework unspecified: the kernel keys' own defaults"));
  CHECK(mentions(r.report, "set training.framework"));
}

TEST_CASE("An unknown framework is refused with the choices") {
  stepsim::testing::Scratch scratch("host-framework");
  scratch.write("s.json", kSmall);
  const auto run = scratch.run("simulate s.json --set training.framework=jax");
  CHECK(run.status == 2);
  CHECK(run.err.find("training.framework") != std::string::npos);
  CHECK(run.err.find("torchtitan-compile") != std::string::npos);
}

TEST_CASE("Megatron reads the gradient norm on the CPU: the host waits for the backward before the optimizer") {
  const stepsim::SimulationResult r = stepsim::simulate(small({"training.framework=megatron"}));
  const auto& host = r.timeline.ranks.front().host;
  REQUIRE(host.size() == 2);
  CHECK(host[1].ops == 1);  // the optimizer step, issued once the norm is read
  // The step ends one issue (17 us) plus the optimizer's own time after the last gradient.
  CHECK(host[1].end - host[1].start == stepsim::Time::from_us(17));
}

TEST_CASE("The trace has a CPU lane with the host's runs of launches") {
  stepsim::testing::Scratch scratch("host-trace");
  scratch.write("s.json", kSmall);
  const auto run = scratch.run("simulate s.json --trace t.json");
  REQUIRE(run.status == 0);
  const std::string trace = stepsim::testing::slurp(scratch.file("t.json"));
  CHECK(trace.find(R"x("name":"cpu (kernel issue)")x") != std::string::npos);
  // One run of 321 x 32 + 15 ops (a residual's three operators are one op, each layer's two
  // bias gradient sums two more), autocast's casts (a layer's four GEMMs' weights forward and
  // their gradients backward, the LM head's, and the qkv, fc1 and LM head inputs' gradients
  // backward, the inputs' casts forward going with the weights': 123 ops a micro-batch), the
  // reducer's 75 copies into
  // buckets (one after each of the last micro-batch's 75 backward ops that make gradients: 6 a
  // layer, the embedding, the final layernorm and the LM head) and its 14 copies back, one a
  // bucket: 14,312; and autograd's accumulation into .grad, an add after each of those 75 ops in
  // each of the 31 micro-batches after the first: 16,637.
  CHECK(trace.find(R"x("cat":"cpu_op","name":"issue 16637 ops")x") != std::string::npos);
}

TEST_CASE("CUDA graphs where the framework or FSDP cannot capture the layers are refused") {
  stepsim::testing::Scratch scratch("host-graphs");
  scratch.write("s.json", kSmall);
  const auto titan = scratch.run("simulate s.json --set training.framework=torchtitan --set training.cuda_graphs=true");
  CHECK(titan.status == 2);
  CHECK(titan.err.find("--set: training.cuda_graphs: torchtitan does not capture training steps in CUDA graphs") !=
        std::string::npos);
  const auto fsdp = scratch.run("simulate s.json --set data_parallel.kind=fsdp --set training.cuda_graphs=true");
  CHECK(fsdp.status == 2);
  CHECK(fsdp.err.find("CUDA graphs of FSDP-sharded layers are not simulated") != std::string::npos);
}

namespace {

// A small MoE (4 layers of 8 experts, top 2) at EP 8 on one 8-GPU H100 node under
// Megatron-Core's dropless all-to-all dispatcher, two micro-batches per replica.
const std::string kMoe = R"({
  "model": {"name": "moe-small", "layers": 4, "hidden": 1024, "heads": 16, "vocab": 32000, "seq_len": 2048,
            "ffn_hidden": 4096, "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 2048}},
  "cluster": "dgx-h100-ndr",
  "parallel": {"tp": 1, "pp": 1, "dp": 8, "ep": 8},
  "training": {"framework": "megatron", "global_batch": 16, "micro_batch": 1}
})";

}  // namespace

TEST_CASE("Megatron-Core's dropless dispatcher reads the tokens per expert on the CPU in every MoE layer's forward") {
  const stepsim::SimulationResult r = stepsim::simulate(stepsim::io::load_scenario_text(kMoe, "moe.json", {}));
  const stepsim::RankTimeline& rank = r.timeline.ranks.front();
  // By hand: the host starts one run of launches, stops before each forward dispatch until the
  // routing has ended (token_dispatcher.py's d2h_event.synchronize(), 4 layers x 2
  // micro-batches), and once more for the gradient norm before the optimizer: 1 + 8 + 1 runs.
  // The backward reuses the split sizes the forward read and does not wait.
  REQUIRE(rank.host.size() == 10);
  // Each wait ends when the permutation before the dispatch has ended; the CPU then issues
  // the dispatch, so the GPU waits at least one issue (5 + 12 us) for it each time.
  for (std::size_t i = 1; i + 1 < rank.host.size(); ++i) {
    INFO(i);
    bool after_permute = false;
    for (const stepsim::Interval& in : rank.intervals)
      after_permute = after_permute || (in.activity == stepsim::Activity::compute && in.end == rank.host[i].start &&
                                        r.timeline.names[in.name].find("moe permute") != std::string::npos);
    CHECK(after_permute);
  }
  CHECK(r.report.host.gpu_wait_s >= 8 * 17e-6);
}

TEST_CASE("torchtitan's grouped expert GEMM is one launch, Transformer Engine's one per local expert") {
  // The same MoE under FSDP with 8 experts (one a GPU at EP 8) and 64 (eight a GPU). Each MoE layer runs six grouped
  // GEMMs a micro-batch (fc1 and fc2: forward, input gradient, weight gradient): 4 layers x 6 x 2 micro-batches = 48.
  const auto cpu_s = [](const std::string& framework, int experts) {
    const stepsim::Scenario s = stepsim::io::load_scenario_text(
        kMoe, "moe.json",
        {"training.framework=" + framework, "data_parallel.kind=fsdp", "model.moe.experts=" + std::to_string(experts)});
    return stepsim::simulate(s).report.host.cpu_issue_s;
  };
  // Transformer Engine's GroupedLinear launches a cuBLAS GEMM per local expert: 7 more launches of 5 us each.
  CHECK(cpu_s("unspecified", 64) - cpu_s("unspecified", 8) == Approx(48 * 7 * 5e-6).epsilon(1e-6));
  // torchtitan's GroupedExperts calls torch._grouped_mm (torchtitan/models/moe/moe.py, _run_experts_grouped_mm):
  // one kernel whatever the experts.
  for (const std::string framework : {"torchtitan", "torchtitan-compile"}) {
    INFO(framework);
    CHECK(cpu_s(framework, 64) == Approx(cpu_s(framework, 8)).epsilon(1e-12));
  }
}

TEST_CASE("More CPU time per launch never shortens a step whose compute does not slow beside communication", "[slow]") {
  // DeepSeek-V3 BF16 on 256 GB200 (a Megatron-Bridge run): a kernel cannot start before the
  // CPU has issued it, so a slower launch can only delay what follows. With the GPU's fitted
  // comm_slowdown the step is not monotone (16.4161 s at 8 us, 16.4089 s at 10 us): a later
  // launch can move a kernel out from under a collective, where it would have run slower.
  // Without it the step grows with the launch cost.
  const std::string run =
      std::string(STEPSIM_SOURCE_DIR) + "/configs/validation/blackwell/mb2511-gb200-dsv3-bf16-nomtp.json";
  double last = 0;
  for (const char* launch : {"4 us", "5 us", "6 us", "8 us", "10 us", "12 us"}) {
    INFO(launch);
    const double step =
        stepsim::simulate(stepsim::io::load_scenario(run, {std::string("cluster.gpu.kernel_launch=\"") + launch + "\"",
                                                           "cluster.gpu.efficiency.comm_slowdown=0"}))
            .report.step_time_s;
    CHECK(step >= last);
    last = step;
  }
}

TEST_CASE("The EP all-to-all overlap runs where Megatron-Core runs it and is refused with exit status 2 elsewhere") {
  stepsim::testing::Scratch scratch("a2a-overlap");
  scratch.write("moe.json", kMoe);
  const auto ok = scratch.run("simulate moe.json --set model.moe.a2a_overlap=true");
  CHECK(ok.status == 0);
  const auto no_ep = scratch.run("simulate moe.json --set model.moe.a2a_overlap=true --set parallel.ep=1");
  CHECK(no_ep.status == 2);
  CHECK(no_ep.err.find("--set: model.moe.a2a_overlap: needs expert parallelism") != std::string::npos);
  const auto pipeline = scratch.run(
      "simulate moe.json --set model.moe.a2a_overlap=true --set parallel.pp=2 --set parallel.dp=4 "
      "--set parallel.ep=4 --set training.global_batch=8");
  CHECK(pipeline.status == 2);
  CHECK(pipeline.err.find("/parallel/schedule: model.moe.a2a_overlap with pp 2 needs \"schedule\": \"interleaved\"") !=
        std::string::npos);
}

namespace {

using stepsim::testing::kineto_events;
using stepsim::testing::KinetoEvent;

// The eager GPT-3 Small under Megatron-Core at TP 2 without sequence parallelism, one
// micro-batch per replica.
stepsim::Scenario small_tp2(const std::vector<std::string>& more = {}) {
  std::vector<std::string> sets{"training.framework=megatron", "parallel.tp=2", "parallel.dp=4",
                                "training.global_batch=4"};
  sets.insert(sets.end(), more.begin(), more.end());
  return small(sets);
}

}  // namespace

// By hand (the launch-bound test above): 25,514 operators, each costing the CPU 8 us of launch
// (set) and eager PyTorch's 12 us of dispatch. A kernel starts no earlier than its launch ends.
TEST_CASE("The Kineto trace shows each operator the host issued as a cpu_op ending in its launch") {
  Scratch s("host-kineto");
  s.write("small.json", kSmall);
  const auto sim =
      s.run("simulate small.json --set \"cluster.gpu.kernel_launch=8 us\" --trace-format kineto --trace step.json");
  INFO(sim.err);
  REQUIRE(sim.status == 0);
  const std::vector<KinetoEvent> events = kineto_events(stepsim::testing::slurp(s.file("step.json")));
  std::map<std::int64_t, const KinetoEvent*> runtime;
  std::vector<const KinetoEvent*> ops, kernels;
  double host_us = 0;
  int launches = 0;
  for (const KinetoEvent& e : events) {
    if (e.cat == "cuda_runtime") {
      CHECK(runtime.emplace(e.id, &e).second);  // one runtime call per correlation id
      if (e.name == "cudaLaunchKernel") {
        ++launches;
        CHECK(e.dur == Approx(8.0).margin(1e-3));
      }
      CHECK(e.name != "cudaGraphLaunch");
    } else if (e.cat == "cpu_op") {
      ops.push_back(&e);
      host_us += e.dur;
    } else if (e.cat == "kernel" || e.cat == "gpu_memcpy") {
      kernels.push_back(&e);
    }
  }
  CHECK(host_us == Approx(25514 * 20.0).epsilon(0.001));
  CHECK(launches > 9000);
  // Each operator ends with its launch, which it encloses.
  for (const KinetoEvent* op : ops) {
    const auto it = runtime.find(op->id);
    REQUIRE(it != runtime.end());
    CHECK(it->second->ts >= op->ts - 1e-3);
    CHECK(it->second->ts + it->second->dur == Approx(op->ts + op->dur).margin(1e-3));
  }
  // One host thread: its operators one after another.
  std::sort(ops.begin(), ops.end(), [](const KinetoEvent* a, const KinetoEvent* b) { return a->ts < b->ts; });
  for (std::size_t i = 1; i < ops.size(); ++i) CHECK(ops[i]->ts >= ops[i - 1]->ts + ops[i - 1]->dur - 1e-3);
  // Every kernel was launched by one call, and starts once it has returned.
  CHECK(kernels.size() == ops.size());
  for (const KinetoEvent* k : kernels) {
    const auto it = runtime.find(k->id);
    REQUIRE(it != runtime.end());
    CHECK(k->ts >= it->second->ts + it->second->dur - 1e-3);
  }
}

// Replayed kernels are launched by their graph: one cudaGraphLaunch for each run of them, whose
// correlation id they share, and no cpu_op or cudaLaunchKernel of their own.
// torchtitan's Llama (torchtitan/models/llama3/model/model.py) has, per layer, attention_norm, wq, wk, wv, wo,
// ffn_norm, w1, w2 and w3, and tok_embeddings, norm and output besides: 9 x 4 + 3 = 39 parameters in 4 layers, each
// an autograd leaf with its own AccumulateGrad and its own DDP hook.
TEST_CASE("DDP's hooks and autograd's adds count each parameter the model code holds, wq, wk and wv apart") {
  Scratch s("host-llama-parameters");
  s.write("llama.json", R"({
    "model": {"name": "llama-tiny", "layers": 4, "hidden": 1024, "heads": 16, "kv_heads": 4, "vocab": 32000,
              "seq_len": 512, "ffn_hidden": 2816, "mlp": "swiglu"},
    "cluster": "dgx-h100-ndr",
    "parallel": {"tp": 1, "pp": 1, "dp": 8},
    "training": {"framework": "torchtitan", "global_batch": 16, "micro_batch": 1},
    "data_parallel": {"kind": "ddp"}})");
  const auto sim = s.run("simulate llama.json --trace-format kineto --trace step.json");
  INFO(sim.err);
  REQUIRE(sim.status == 0);
  // Two micro-batches: the second adds each of the 39 gradients into .grad, then the reducer copies each into its
  // bucket and, after the AllReduces, back: 39 operators of 17 us each way.
  double adds_us = 0, into_us = 0, back_us = 0;
  for (const KinetoEvent& e : kineto_events(stepsim::testing::slurp(s.file("step.json")))) {
    if (e.cat != "cpu_op") continue;
    if (e.name.starts_with("AccumulateGrad ")) adds_us += e.dur;
    if (e.name.find(" scaled in bucket ") != std::string::npos || e.name.find(" into bucket ") != std::string::npos)
      into_us += e.dur;
    if (e.name.find(" back to gradients") != std::string::npos) back_us += e.dur;
  }
  CHECK(adds_us == Approx(39 * 17.0).epsilon(1e-6));
  CHECK(into_us == Approx(39 * 17.0).epsilon(1e-6));
  CHECK(back_us == Approx(39 * 17.0).epsilon(1e-6));
}

TEST_CASE("Under CUDA graphs the Kineto trace launches the replayed kernels by a cudaGraphLaunch each graph") {
  Scratch s("host-kineto-graphs");
  s.write("small.json", kSmall);
  const auto sim = s.run("simulate small.json --set training.cuda_graphs=true --trace-format kineto --trace step.json");
  INFO(sim.err);
  REQUIRE(sim.status == 0);
  const std::vector<KinetoEvent> events = kineto_events(stepsim::testing::slurp(s.file("step.json")));
  std::map<std::int64_t, std::string> call;
  std::map<std::int64_t, std::set<std::string>> layers_of;  // by correlation id, the layers of its kernels
  std::map<std::int64_t, int> kernels_of;
  int ops = 0, kernels = 0, graphs = 0;
  for (const KinetoEvent& e : events) {
    if (e.cat == "cuda_runtime") call[e.id] = e.name;
    if (e.cat == "cuda_runtime" && e.name == "cudaGraphLaunch") ++graphs;
    if (e.cat == "cpu_op") ++ops;
    if (e.cat == "kernel" || e.cat == "gpu_memcpy") {
      ++kernels;
      ++kernels_of[e.id];
      layers_of[e.id].insert(e.name.substr(0, e.name.find(' ')));
    }
  }
  // A graph for each layer's forward and each one's backward in every micro-batch: 12 layers,
  // 32 micro-batches. In each but the first autograd adds each gradient into its parameter's
  // .grad as the backward makes it (and in the last DDP's reducer then copies it into its
  // bucket), which the host issues between the replayed kernels: a layer's 6 gradient-making ops,
  // the last of them ending its backward, cut it in 6, 5 more graphs a layer and micro-batch.
  CHECK(graphs == 2 * 12 * 32 + 12 * 5 * 31);
  int replayed = 0;
  for (const auto& [id, n] : kernels_of) {
    REQUIRE(call.count(id) == 1);
    if (call[id] == "cudaGraphLaunch") {
      replayed += n;
      CHECK(layers_of[id].size() == 1);  // each graph one layer's
      CHECK(layers_of[id].begin()->front() == 'L');
    } else {
      CHECK(n == 1);
    }
  }
  // Every other kernel was issued by an operator of its own.
  CHECK(replayed > 12 * 32 * 2);
  CHECK(ops + replayed == kernels);
}

TEST_CASE("CUDA graphs of whole layers leave the embedding's, the head's and the loss's TP collectives to the CPU") {
  const stepsim::SimulationResult eager = stepsim::simulate(small_tp2());
  const stepsim::SimulationResult whole = stepsim::simulate(small_tp2({"training.cuda_graphs=true"}));
  const stepsim::SimulationResult scoped =
      stepsim::simulate(small_tp2({"training.cuda_graphs=true", R"(training.cuda_graph_scope=["attn","mlp"])"}));
  // A dense layer is its attention and its MLP: both ways the graphs replay the same ops.
  CHECK(whole.report.host.cpu_issue_s == Approx(scoped.report.host.cpu_issue_s).epsilon(1e-12));
  // By hand: the graphs replay each layer's 10 forward ops (2 layernorms, qkv, attention,
  // projection, 2 residual adds, fc1, GELU, fc2), its 14 backward ones and its 4 TP AllReduces
  // (after the projection and fc2 forward, after the qkv and fc1 dgrads): 12 x 28 ops at 17 us
  // for the one micro-batch. The embedding's AllReduce, the loss's three and the LM head
  // dgrad's stay with the CPU (85 us more would be left out if they were replayed too).
  CHECK(eager.report.host.cpu_issue_s - whole.report.host.cpu_issue_s == Approx(12 * 28 * 17e-6).epsilon(1e-9));
  int outside = 0;
  for (const stepsim::Interval& i : whole.timeline.ranks.front().intervals)
    if (i.activity == stepsim::Activity::comm && i.kind == stepsim::CommKind::tp &&
        whole.timeline.names[i.name].find(" L") == std::string::npos)
      ++outside;
  CHECK(outside == 5);
}

TEST_CASE("The CPU lane counts the ops the CPU issued, not the kernels CUDA graphs replay") {
  stepsim::testing::Scratch scratch("host-graphs-lane");
  scratch.write("s.json", kSmall);
  const auto run = scratch.run("simulate s.json --set training.cuda_graphs=true --trace t.json");
  REQUIRE(run.status == 0);
  const std::string trace = stepsim::testing::slurp(scratch.file("t.json"));
  // By hand: per micro-batch the embedding, final layernorm, LM head and loss forward and the
  // loss, LM head (dgrad, wgrad), final layernorm and embedding backward and autocast's casts for
  // the LM head, forward (its weight and input) and backward (its weight's and input's gradients)
  // (12 x 32), DDP's 14 bucket AllReduces, the optimizer step, the reducer's 75 copies into
  // buckets and 14 back: 488; and autograd's adds into .grad after the 75 gradient-making ops
  // in each of the 31 micro-batches after the first: 2,813.
  CHECK(trace.find(R"x("cat":"cpu_op","name":"issue 2813 ops")x") != std::string::npos);
  CHECK(trace.find("issue 16637 ops") == std::string::npos);
}

TEST_CASE("The framework note gives the CPU's cost per operator as plain microseconds") {
  const stepsim::SimulationResult r = stepsim::simulate(small({"cluster.gpu.kernel_launch=\"1 ms\""}));
  CHECK(mentions(r.report, "the CPU issues each operator in 1012 us (1000 us launch, 12 us dispatch)"));
  const stepsim::SimulationResult tenth = stepsim::simulate(small({"cluster.gpu.kernel_launch=\"4.5 us\""}));
  CHECK(mentions(tenth.report, "the CPU issues each operator in 16.5 us (4.5 us launch, 12 us dispatch)"));
}

TEST_CASE("Activation offload's copies do not hide the GPU's wait for the host") {
  // Megatron-Core's eager GPT-3 Small is host-bound: the GPU waits for the CPU 43 % of the step.
  // Its hosts' links to their memory carry 48 GB/s, not the preset's 64, so that the 11 layers'
  // copies below take longer than the CPU, which issues 26 operators a micro-batch for the loss.
  const auto megatron = [](const std::string& offload_layers) {
    return stepsim::simulate(small({"training.framework=megatron", "cluster.host_link.bandwidth=\"48 GB/s\"",
                                    "training.activation_offload_layers=" + offload_layers}));
  };
  const stepsim::SimulationResult plain = megatron("0");
  const stepsim::SimulationResult offload = megatron("1");
  REQUIRE(plain.report.host.gpu_wait_s > 0.3 * plain.report.step_time_s);
  // By hand: offloading one layer adds two copies a micro-batch for the CPU to issue (to the
  // host after its forward, back before its backward), 32 x 2 x 17 us, and leaves every kernel
  // of the compute and communication streams as it was; the copies run on copy engines beside
  // them. So the CPU, which sets the pace, issues 1.088 ms more, and the GPU waits for it no
  // less than before and at most that much more.
  const double copies_s = 32 * 2 * 17e-6;
  CHECK(offload.report.host.cpu_issue_s - plain.report.host.cpu_issue_s == Approx(copies_s).epsilon(1e-9));
  CHECK(offload.report.host.gpu_wait_s >= plain.report.host.gpu_wait_s);
  CHECK(offload.report.host.gpu_wait_s <= plain.report.host.gpu_wait_s + copies_s + 1e-9);
  // The copies of 11 layers lengthen the step by more than the CPU's 32 x 22 x 17 us of extra
  // issue: the GPU now waits for its copies, the CPU gets ahead, and the GPU waits for the host
  // less than without them.
  const stepsim::SimulationResult more = megatron("11");
  CHECK(more.report.step_time_s > plain.report.step_time_s + 32 * 22 * 17e-6);
  CHECK(more.report.host.gpu_wait_s < plain.report.host.gpu_wait_s);
}

// The GPU of docs/model.md's offload example, with its host link slowed to 4 GB/s, sits on its
// copies to host memory for most of the step while the CPU, with no framework dispatch, has
// issued every op in a few tens of milliseconds. Waiting for a copy is not waiting for the
// host: only the step's first kernel, which starts once the CPU has launched it (the H100
// preset's 5 us), waited for the CPU. Before, every idle stretch while the CPU was still
// issuing counted (32.7 ms here), whatever the kernel after it waited for.
TEST_CASE("A GPU stalled on activation offload's copies is not counted as waiting for the host") {
  const stepsim::SimulationResult r = stepsim::simulate(stepsim::io::load_scenario(
      "ddp-1.3b-64xa100", {"cluster=dgx-h100-ndr", "training.framework=unspecified",
                           "training.activation_offload_layers=16", "cluster.host_link.bandwidth=\"4 GB/s\""}));
  REQUIRE(r.report.host.cpu_issue_s < 0.05 * r.report.step_time_s);
  REQUIRE(kernel_sum_s(r.timeline) < 0.1 * r.report.step_time_s);
  CHECK(r.report.host.gpu_wait_s == Approx(5e-6).margin(1e-12));
}

// A calibration file's measured dispatch is charged in place of the framework's: every operator
// of the launch-bound step costs the CPU 5 us of launch and 30 us of dispatch instead of eager
// PyTorch's 12, so the CPU's issue time grows by 35/17 (no op of this step has another cost).
TEST_CASE("A calibrated per-operator dispatch is charged in place of the framework's") {
  stepsim::testing::Scratch scratch("host-dispatch");
  scratch.write("s.json", kSmall);
  scratch.write("d.json", R"({"stepsim_calibration": 1, "provenance": {"gpu": "NVIDIA H100 80GB HBM3"},
                              "compute": {"dispatch_us": 30}})");
  const auto plain = scratch.run("simulate s.json --json -");
  const auto calibrated = scratch.run("simulate s.json --calibration d.json --json -");
  INFO(calibrated.err);
  REQUIRE(plain.status == 0);
  REQUIRE(calibrated.status == 0);
  const auto p = boost::json::parse(plain.out);
  const auto c = boost::json::parse(calibrated.out);
  const double cpu = p.at("host").at("cpu_issue_s").to_number<double>();
  CHECK(c.at("host").at("cpu_issue_s").to_number<double>() == Approx(cpu * 35 / 17).epsilon(1e-9));
  bool in_force = false;
  for (const auto& v : c.at("calibration").at("values").as_array())
    if (v.at("key").as_string() == "dispatch_us")
      in_force = v.at("value").to_number<double>() == 30 && v.at("preset").to_number<double>() == 12;
  CHECK(in_force);
  CHECK(calibrated.out.find("the CPU issues each operator in 35 us (5 us launch, 30 us dispatch)") !=
        std::string::npos);
}

namespace {

// A 125M-parameter Llama-style model (SwiGLU, RMSNorm, rotary positions) sharded by FSDP on one
// 8-GPU H100 node, one sequence of 512 tokens per micro-batch.
const std::string kSmallLlama = R"({
  "model": {"name": "llama-125m", "layers": 12, "hidden": 768, "heads": 12, "kv_heads": 12, "ffn_hidden": 2048,
            "vocab": 32000, "seq_len": 512, "mlp": "swiglu"},
  "cluster": "dgx-h100-ndr",
  "parallel": {"tp": 1, "pp": 1, "dp": 8},
  "training": {"framework": "torchtitan", "global_batch": 8, "micro_batch": 1},
  "data_parallel": {"kind": "fsdp"}
})";

// What the host spent on each cpu_op of the Kineto trace of `scenario` under `sets`, by name.
std::map<std::string, double> cpu_op_us(const std::string& scenario, const std::string& sets) {
  stepsim::testing::Scratch scratch("host-operators");
  scratch.write("s.json", scenario);
  const auto run = scratch.run("simulate s.json " + sets + " --trace-format kineto --trace t.json");
  INFO(run.err);
  REQUIRE(run.status == 0);
  std::map<std::string, double> out;
  for (const KinetoEvent& e : kineto_events(stepsim::testing::slurp(scratch.file("t.json"))))
    if (e.cat == "cpu_op") out[e.name] = e.dur;
  return out;
}

}  // namespace

// Oracle: torchtitan's Llama (torchtitan/models/llama3/model/model.py): Attention.forward runs
// self.wq(x), self.wk(x), self.wv(x) and FeedForward.forward self.w2(F.silu(self.w1(x)) *
// self.w3(x)), each a Linear of its own, which stepsim runs as one QKV and one fc1 GEMM. Each is a
// PyTorch operator at eager PyTorch's 5 + 12 us: forward 3 and 2; backward each Linear's input
// gradient, and the sum of the input gradients of x's 3 and 2 consumers (2 and 1 adds), and each
// one's weight gradient. Megatron-Core fuses them (linear_qkv, linear_fc1): one operator each.
TEST_CASE("torchtitan's Llama issues wq, wk, wv and w1, w3 as Linear layers of their own") {
  for (const char* framework : {"torchtitan", "torchtitan-compile"}) {
    INFO(framework);
    const auto us = cpu_op_us(kSmallLlama, std::string("--set training.framework=") + framework);
    CHECK(us.at("L0 qkv fwd") == Approx(3 * 17.0));
    CHECK(us.at("L0 qkv dgrad") == Approx((3 + 2) * 17.0));
    CHECK(us.at("L0 qkv wgrad") == Approx(3 * 17.0));
    CHECK(us.at("L0 fc1 fwd") == Approx(2 * 17.0));
    CHECK(us.at("L0 fc1 dgrad") == Approx((2 + 1) * 17.0));
    CHECK(us.at("L0 fc1 wgrad") == Approx(2 * 17.0));
    CHECK(us.at("L0 fc2 fwd") == Approx(17.0));
  }
  const auto megatron = cpu_op_us(kSmallLlama, "--set training.framework=megatron --set data_parallel.kind=ddp");
  for (const char* op : {"L0 qkv fwd", "L0 qkv dgrad", "L0 qkv wgrad", "L0 fc1 fwd", "L0 fc1 dgrad", "L0 fc1 wgrad"}) {
    INFO(op);
    CHECK(megatron.at(op) == Approx(17.0));
  }
}

// Oracle: Megatron-Core's tensor_parallel/cross_entropy.py. _VocabParallelCrossEntropy.forward
// runs 18 PyTorch operators: .float() and max (calculate_logits_max); -=, <, >=, |, clone, -,
// the masked fill of the target, arange, the gather of the predicted logits, clone, their masked
// fill, exp and sum (calculate_predicted_logits); log, - and div_ (calculate_cross_entropy_loss).
// Its backward 8: arange, .float(), 1.0 - (prepare_gradient_calculation_operands), the index, -=
// and index_put of the target's gradient and mul_ (calculate_gradients), and .float()'s cast back.
// Each at Megatron's 5 + 12 us; the fused loss is one kernel.
TEST_CASE("Megatron's unfused vocab-parallel cross entropy costs the host each of its PyTorch operators") {
  const auto unfused = cpu_op_us(kSmall, "--set training.framework=megatron");
  CHECK(unfused.at("cross entropy fwd") == Approx(18 * 17.0));
  CHECK(unfused.at("cross entropy backward") == Approx(8 * 17.0));
  const auto fused = cpu_op_us(kSmall, "--set training.framework=megatron --set training.cross_entropy=fused");
  CHECK(fused.at("cross entropy fwd") == Approx(17.0));
  CHECK(fused.at("cross entropy backward") == Approx(17.0));
}

namespace {

// What the host spent on the first cpu_op of the Kineto trace whose name starts with `prefix`.
double first_cpu_op_us(const std::map<std::string, double>& ops, const std::string& prefix) {
  const auto it = ops.lower_bound(prefix);
  REQUIRE(it != ops.end());
  REQUIRE(it->first.rfind(prefix, 0) == 0);
  return it->second;
}

}  // namespace

// Oracle: PyTorch's FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py).
// foreach_all_gather copies the unit's shards into the AllGather's input
// (torch.ops.fsdp.all_gather_copy_in: torch._foreach_copy_), and with a param_dtype (torchtitan's
// bf16 over fp32 shards) _get_param_all_gather_inputs first casts them into one flat buffer of
// that dtype (another torch._foreach_copy_); then all_gather_into_tensor. So the host issues 3
// operators at 5 + 12 us for each AllGather under BF16, 2 for an fp32 model. FSDP1's flat
// parameter is gathered in place (its mixed-precision shard copy is not modelled): 1.
TEST_CASE("FSDP2 copies the shards into the AllGather's input on the host before each AllGather") {
  const auto bf16 = cpu_op_us(kSmallLlama, "");
  CHECK(first_cpu_op_us(bf16, "AllGather fsdp L0 forward") == Approx(3 * 17.0));
  CHECK(first_cpu_op_us(bf16, "AllGather fsdp L0 backward") == Approx(3 * 17.0));
  CHECK(first_cpu_op_us(bf16, "AllGather fsdp root forward") == Approx(3 * 17.0));
  const auto fp32 = cpu_op_us(kSmallLlama, "--set training.precision=fp32");
  CHECK(first_cpu_op_us(fp32, "AllGather fsdp L0 forward") == Approx(2 * 17.0));
  const auto fsdp1 = cpu_op_us(kSmallLlama, "--set training.framework=pytorch --set data_parallel.fsdp_version=1");
  CHECK(first_cpu_op_us(fsdp1, "AllGather fsdp L0 forward") == Approx(17.0));
}
