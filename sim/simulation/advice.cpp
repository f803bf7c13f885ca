// advise(): names the exposed communication's cause from the report and the scenario, and
// simulates the knobs that could hide it, best first; a knob that does not fit in memory is
// tried again with each change that makes a job fit.
#include "simulation/advice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "io/scenario_loader.hpp"
#include "io/validate.hpp"
#include "parallelism/data_parallel.hpp"
#include "parallelism/expert_parallel.hpp"
#include "parallelism/grad_buckets.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/pipeline_schedule.hpp"
#include "stepsim/error.hpp"
#include "stepsim/framework.hpp"

namespace stepsim {
namespace {

// How InternalError's message begins (check_failed).
constexpr std::string_view kInternalError = "internal error";

struct Candidate {
  std::vector<std::string> sets;
  std::string why;
};

// The GPU idles for the host, waiting for kernels to be issued, for at least kExposedTarget of
// the step: on the pipeline stage that waits longest for its host (Report::host), which holds
// back the other stages.
bool host_bound(const Report& r) { return r.host.gpu_wait_s >= kExposedTarget * r.step_time_s; }

// The GPU idles for activation offload's copies, late for their window, for at least
// kExposedTarget of the step (Report::offload_wait_s).
bool offload_bound(const Report& r) { return r.offload_wait_s >= kExposedTarget * r.step_time_s; }

// A change the advice names as the best must shorten the step by this share at least: less is
// within what a bucket boundary or a rounding moves.
constexpr double kWorthwhile = 0.005;

// Simulating every alternative of a scenario of more intervals than this takes seconds.
constexpr std::size_t kCheapIntervals = 400000;

std::string set(const std::string& key, const std::string& value) { return key + "=" + value; }
std::string set(const std::string& key, long long value) { return key + "=" + std::to_string(value); }

double of(const PerKind& v, CommKind k) { return v[static_cast<std::size_t>(k)]; }

// A switch of the data-parallel kind, with the scenario's keys of other kinds back at their
// defaults (the new kind would refuse them set otherwise).
Candidate kind_switch(const Scenario& s, DpKind kind, std::string why) {
  Candidate c{{set("data_parallel.kind", to_string(kind))}, std::move(why)};
  for (std::string& extra : io::kind_switch_sets(s, kind, [](const std::string&) { return false; }))
    c.sets.push_back(std::move(extra));
  return c;
}

// A switch of the data-parallel kind where the framework has that kind (has_dp_kind).
void add_kind_switch(std::vector<Candidate>& out, const Scenario& s, DpKind kind, std::string why) {
  if (has_dp_kind(s.training.framework, kind)) out.push_back(kind_switch(s, kind, std::move(why)));
}

CommKind dominant_kind(const Report& r) {
  CommKind best = CommKind::tp;
  for (std::size_t k = 0; k < kCommKinds; ++k)
    if (r.breakdown_s.exposed_comm[k] > of(r.breakdown_s.exposed_comm, best)) best = static_cast<CommKind>(k);
  return best;
}

// Why the CP group's K/V exchange is exposed, from the variant the framework runs
// (parallelism::ContextParallel) and where the group lies.
std::string cp_cause(const Scenario& s) {
  const bool gather = s.context_parallel.comm == CpComm::all_gather;
  const bool pytorch = pytorch_context_parallel(s.training.framework);
  std::string why;
  if (!gather)
    why = fmt::format(
        "each ring step's K/V block{} runs beside one step's attention, a cp-th of the layer's, which is too short "
        "to cover it where a rank's share of the sequence is short or the CP group's links are slow{}",
        pytorch ? " (and in the backward the float32 dK/dV)" : " (and in the backward the dK/dV with it)",
        pytorch ? ", and the last dK/dV message has nothing beside it" : "");
  else if (pytorch)
    why =
        "the AllGather of the whole sequence's K/V has only the rank's own block's attention beside it, and in the "
        "backward the float32 dK/dV go around the ring, the last message with nothing beside it";
  else
    why =
        "the AllGathers of the whole sequence's K and V come before the attention that needs them, and the "
        "ReduceScatters of its dK and dV after its backward, with nothing of that layer beside them";
  const int span = s.parallel.tp * s.parallel.cp;
  const int domain = s.cluster.domain_gpus();
  if (domain > 0 && span > domain)
    why += fmt::format(
        "; the CP group spans {} NVLink domains (tp·cp = {} GPUs, {} a domain), so its messages cross "
        "the scale-out network",
        (span + domain - 1) / domain, span, domain);
  return "the context-parallel K/V exchange is exposed: " + why +
         "; the other exchange (context_parallel.comm) or a smaller CP group with more data parallelism is what "
         "hides or shrinks it";
}

// Why FSDP's own AllGathers and ReduceScatters are exposed, by whose FSDP runs them and which
// of its keys the scenario may set: FSDP1's prefetch keys and rate limiter; FSDP2's prefetch of
// one unit each way, which has no key; Megatron-FSDP's double buffer of two units; DeepSpeed's
// ZeRO-3, simulated with FSDP1's defaults, none of whose keys it takes.
std::string fsdp_cause(const Scenario& s) {
  const DataParallelSpec& d = s.data_parallel;
  const char* bandwidth = "or the bandwidth is too low for one unit's compute to cover its gather";
  if (s.training.framework == Framework::deepspeed)
    return "DeepSpeed ZeRO-3's parameter AllGathers and gradient ReduceScatters are exposed: simulated with FSDP's "
           "layer units gathered one ahead (ZeRO-3's own prefetch, stage3_prefetch_bucket_size, is not modelled), "
           "and the bandwidth is too low for one layer's compute to cover the next one's gather";
  if (d.fsdp_impl == FsdpImpl::megatron)
    return fmt::format(
        "Megatron-FSDP's parameter AllGathers and gradient ReduceScatters are exposed: its double buffer holds two "
        "layers, so it gathers one layer ahead and no further, {}",
        bandwidth);
  if (d.fsdp_version == 2)
    return fmt::format(
        "FSDP2's parameter AllGathers and gradient ReduceScatters are exposed: fully_shard gathers one unit ahead "
        "in each pass by itself, with no key to gather further ahead, {}; keeping the gathered parameters from the "
        "forward to the backward (reshard_after_forward false) or sharding inside an NVLink domain (kind hsdp) is "
        "what hides or shrinks it",
        bandwidth);
  return fmt::format(
      "FSDP's parameter AllGathers and gradient ReduceScatters are exposed: the prefetch depth (backward_prefetch, "
      "forward_prefetch, in-flight AllGathers) does not gather far enough ahead of the compute, {}",
      bandwidth);
}

// Why HSDP's replica AllReduces are exposed: each unit's gradient shard is all-reduced across
// the replicas after its ReduceScatter, the root's (embedding, LM head) last, after the whole
// backward.
std::string hsdp_cause(const Scenario& s) {
  const int shard = stepsim::hsdp_shard_ranks(s);
  return fmt::format(
      "data-parallel gradient reduction is exposed: under HSDP each FSDP unit's gradient shard is all-reduced "
      "across the {} replicas of the shard group after its ReduceScatter, and the last, the root's (embedding, "
      "final norm, LM head), once the whole backward is done, with no compute beside it; a larger shard group "
      "(data_parallel.shard_group, now {} DP ranks) makes each shard and its AllReduce smaller",
      s.parallel.dp / std::max(shard, 1), shard);
}

std::string cause_of(const Scenario& s, CommKind kind) {
  const DataParallelSpec& d = s.data_parallel;
  switch (kind) {
    case CommKind::tp:
      return "tensor-parallel collectives are exposed: each AllReduce (or AllGather/ReduceScatter with sequence "
             "parallelism) sits between two GEMMs of the same layer that need its result, a data dependency that "
             "leaves no compute of that micro-batch to hide it behind; TP communication overlap, a smaller TP group "
             "or another layout is what hides or shrinks it";
    case CommKind::dp:
      if (deepspeed_pipeline_engine(s))
        return "data-parallel gradient reduction is exposed: DeepSpeed's pipeline engine reduces every stage's "
               "gradients after the whole schedule, so none of it runs beside compute";
      if (d.kind == DpKind::hsdp) return hsdp_cause(s);
      if (!d.overlap_grad_reduce)
        return "data-parallel gradient reduction is exposed because overlap_grad_reduce=false reduces every "
               "gradient after the backward, so none of it runs beside compute";
      return fmt::format(
          "data-parallel gradient reduction is exposed: buckets are reduced in order as the backward fills them, "
          "and what remains after the last gradient (the last bucket, at {}, and any backlog the network "
          "bandwidth leaves) cannot hide; bucket size and order decide how much that is",
          megatron_buckets(d.kind, s.training.framework) ? parallelism::megatron_bucket_text(s)
                                                         : fmt::format("{} MiB", d.bucket_cap_mb));
    case CommKind::fsdp:
      return fsdp_cause(s);
    case CommKind::pp:
      return "pipeline SendRecv is exposed: a stage waits for the activations or gradients of its neighbour";
    case CommKind::ep:
      return fmt::format(
          "the expert-parallel all-to-alls are exposed: {}{}{}",
          s.model.moe.a2a_overlap
              ? "Megatron-Core's EP overlap runs them under another micro-batch's compute where the schedule pairs a "
                "forward with a backward, not in the warm-up and cool-down, nor where they outlast the compute beside "
                "them"
              : "each MoE layer's dispatch feeds its experts and its combine feeds the next layer, so without "
                "Megatron-Core's EP overlap nothing of the same micro-batch runs beside them",
          ep_domains(s) > 1
              ? fmt::format("; the {} spans {} NVLink domains, so part of each crosses the scale-out network",
                            s.parallel.etp > 1 && s.model.moe.dispatcher == MoeDispatcher::flex
                                ? fmt::format("flex dispatcher's expert block of ep·etp = {} ranks",
                                              s.parallel.ep * s.parallel.etp)
                                : fmt::format("EP group of {}", s.parallel.ep),
                            ep_domains(s))
              : "",
          s.parallel.etp > 1 && s.model.moe.dispatcher == MoeDispatcher::alltoall
              ? fmt::format("; with etp {} the ETP group gathers the tokens after each all-to-all into the experts "
                            "and reduce-scatters them before each one out (also ep)",
                            s.parallel.etp)
              : "");
    case CommKind::cp:
      return cp_cause(s);
    default:
      return fmt::format("{} communication is exposed", to_string(kind));
  }
}

void add_data_parallel(const Scenario& s, std::vector<Candidate>& out) {
  const DataParallelSpec& d = s.data_parallel;
  if (s.parallel.dp <= 1) return;
  // DeepSpeed's pipeline engine reduces after the schedule, and its engine at ZeRO stage 0
  // (ddp) after the backward, in buffers of its own: neither the overlap nor a bucket size is
  // the scenario's to choose there.
  const bool engine =
      deepspeed_pipeline_engine(s) || (s.training.framework == Framework::deepspeed && d.kind == DpKind::ddp);
  const bool pytorch_buckets = d.kind == DpKind::ddp && !megatron_buckets(d.kind, s.training.framework);
  if (!engine && (d.kind == DpKind::ddp || d.kind == DpKind::zero1 || d.kind == DpKind::zero2) &&
      !d.overlap_grad_reduce) {
    out.push_back({{set("data_parallel.overlap_grad_reduce", "true")},
                   "overlap: reduce buckets during the backward (PyTorch DDP's default)"});
    // Megatron-Core sizes its buckets in parameters (ZeRO, and DDP under megatron or nemo).
    if (pytorch_buckets)
      for (const char* mb : {"10", "100"})
        out.push_back({{set("data_parallel.overlap_grad_reduce", "true"), set("data_parallel.bucket_cap_mb", mb)},
                       "overlap with another bucket size"});
  } else if (!engine && pytorch_buckets) {
    for (double mb : {d.bucket_cap_mb / 4, d.bucket_cap_mb / 2, d.bucket_cap_mb * 2, d.bucket_cap_mb * 4})
      if (mb >= 1 && mb <= 1024)
        out.push_back({{set("data_parallel.bucket_cap_mb", fmt::format("{}", mb))},
                       "bucket size: smaller buckets start earlier, larger ones use the bandwidth better"});
  } else if (!engine && megatron_buckets(d.kind, s.training.framework)) {
    // Megatron-Core's buckets, in parameters (--ddp-bucket-size): a quarter and four times.
    const long long size = parallelism::megatron_bucket_elements(s);
    for (long long n : {size / 4, size * 4})
      if (n >= 1 && n <= DataParallelSpec::kMaxBucketParameters)
        out.push_back(
            {{set("data_parallel.bucket_parameters", n)},
             "bucket size (parameters): smaller buckets start earlier, larger ones use the bandwidth better"});
  }
  // DeepSpeed's ZeRO gathers after its optimizer step; the overlap is Megatron-Core's.
  if ((d.kind == DpKind::zero1 || d.kind == DpKind::zero2) && d.overlap_grad_reduce && !d.overlap_param_gather &&
      s.training.framework != Framework::deepspeed)
    out.push_back({{set("data_parallel.overlap_param_gather", "true")}, "gather parameters during the next forward"});
  if (d.kind == DpKind::fsdp || d.kind == DpKind::hsdp) {
    // FSDP2 prefetches one unit ahead each way by itself, with no limit to raise; Megatron-FSDP
    // gathers one unit ahead each way into a double buffer of two units and frees each unit after
    // its forward; DeepSpeed's ZeRO-3 takes none of PyTorch FSDP's keys.
    const bool megatron_fsdp = d.fsdp_impl == FsdpImpl::megatron;
    const bool zero3 = s.training.framework == Framework::deepspeed;
    if (d.fsdp_version == 1 && !zero3 && !megatron_fsdp) {
      if (d.backward_prefetch != BackwardPrefetch::pre)
        out.push_back(
            {{set("data_parallel.backward_prefetch", "pre")}, "prefetch: gather before the current gradient"});
      if (!d.forward_prefetch)
        out.push_back(
            {{set("data_parallel.forward_prefetch", "true")}, "prefetch: gather the next unit in the forward"});
      out.push_back({{set("data_parallel.max_inflight_all_gathers", d.max_inflight_all_gathers * 2)},
                     "prefetch depth: more AllGathers in flight"});
    }
    if (d.reshard_after_forward && !megatron_fsdp && !zero3)
      out.push_back({{set("data_parallel.reshard_after_forward", "false")}, "keep gathered parameters (more memory)"});
    if (d.kind == DpKind::fsdp && s.parallel.dp > s.cluster.domain_gpus())
      add_kind_switch(out, s, DpKind::hsdp, "shard inside an NVLink domain, all-reduce across domains");
  }
  if (d.grad_reduce_dtype == Precision::fp32) {
    // Where the reduced buffer is the main gradients (Megatron-Core), grad_reduce_in_fp32 off halves both.
    Candidate c{{set("data_parallel.grad_reduce_dtype", "bf16")}, "reduce gradients in bf16 (half the bytes)"};
    if (io::main_grad_is_reduced_buffer(s)) c.sets.push_back(set("training.main_grad", "bf16"));
    out.push_back(std::move(c));
  }
}

// Megatron-Core's EP overlap where the scenario's framework and schedule allow it and its step
// has passes to pair (parallelism::ep_overlap_pairs: a single micro-batch per replica has
// none, and the overlap would change nothing), the flex dispatcher and a smaller EP group
// where the group crosses NVLink domains.
// Expert tensor parallelism: its gathers and scatters around the experts (the all-to-all
// dispatcher's), the flex dispatcher's copies of each token to every ETP rank of its experts,
// and the EP group's stride over etp times the ranks all go with etp 1, each expert whole on its
// GPU (the expert group of ep ranks divides the stage's ranks where one of ep·etp did).
void add_expert_tensor_parallel(const Scenario& s, std::vector<Candidate>& out) {
  if (s.parallel.etp <= 1) return;
  out.push_back({{set("parallel.etp", 1)},
                 "layout: each expert whole on its GPU (etp 1): no ETP gathers and scatters, an EP group that "
                 "strides 1, not etp"});
}

// For a mixture of experts that does not fit: each expert split over as many ranks as the TP
// group (etp = tp, Megatron-Core's default where not given), 1/tp of its weights, gradients and
// optimizer states a GPU, where tp divides the experts' width and ep·tp the stage's ranks.
void add_expert_memory_fix(const Scenario& s, std::vector<Candidate>& out) {
  const ParallelSpec& p = s.parallel;
  if (s.model.moe.experts == 0 || p.etp != 1 || p.tp <= 1) return;
  if (s.model.moe.expert_ffn_hidden % p.tp != 0 || p.tp * p.cp * p.dp % (p.ep * p.tp) != 0) return;
  out.push_back({{set("parallel.etp", p.tp)}, "fit: each expert split over the TP group's ranks (etp = tp)"});
}

void add_expert_parallel(const Scenario& s, std::vector<Candidate>& out) {
  const ParallelSpec& p = s.parallel;
  const MoeSpec& moe = s.model.moe;
  if (moe.experts == 0) return;
  add_expert_tensor_parallel(s, out);
  if (p.ep <= 1) return;
  const Schedule overlap_schedule = p.pp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
  if (!moe.a2a_overlap && runs_megatron_options(s.training.framework) && p.schedule == overlap_schedule &&
      s.training.recompute != Recompute::full && parallelism::ep_overlap_pairs(s))
    out.push_back({{set("model.moe.a2a_overlap", "true")},
                   "overlap: one micro-batch's dispatch and combine under another's compute (Megatron-Core's EP "
                   "overlap)"});
  const int domains = ep_domains(s);
  if (domains <= 1) return;
  // The flex dispatcher is Megatron-Core's.
  if (moe.dispatcher == MoeDispatcher::alltoall && runs_megatron_options(s.training.framework))
    out.push_back({{set("model.moe.dispatcher", "flex")},
                   "dispatcher: each token sent once to each NVLink domain holding its experts (DeepEP, HybridEP)"});
  if (p.ep % 2 == 0 && moe.experts % (p.ep / 2) == 0)
    out.push_back({{set("parallel.ep", p.ep / 2)},
                   "layout: half the EP group, twice the experts per GPU, fewer NVLink domains crossed"});
}

// The CP group's other K/V exchange (the ring beside each step's attention, or the gather before
// it), and half the CP group with twice the data parallelism: twice the tokens a rank, so each
// ring step's attention is longer beside a block of the same bytes per token, and fewer steps.
void add_context_parallel(const Scenario& s, std::vector<Candidate>& out) {
  const ParallelSpec& p = s.parallel;
  if (p.cp <= 1) return;
  const bool gather = s.context_parallel.comm == CpComm::all_gather;
  out.push_back({{set("context_parallel.comm", gather ? "p2p" : "all_gather")},
                 gather ? "context parallelism: the K/V around the ring, each block beside a step's attention"
                        : "context parallelism: the K/V gathered before the attention, no ring steps"});
  if (p.cp % 2 != 0) return;
  Candidate c{{set("parallel.cp", p.cp / 2), set("parallel.dp", static_cast<long long>(p.dp) * 2)},
              "layout: half the CP group, more data parallelism"};
  // all_gather needs a CP group.
  if (p.cp == 2 && gather) c.sets.push_back(set("context_parallel.comm", "p2p"));
  out.push_back(std::move(c));
}

// Sequence parallelism and TP communication overlap need a TP group (both are refused at tp 1):
// a layout candidate at `tp` 1 switches the scenario's off.
Candidate with_tp(const Scenario& s, int tp, Candidate c) {
  if (tp > 1) return c;
  if (s.parallel.sequence_parallel) c.sets.push_back(set("parallel.sequence_parallel", "false"));
  if (s.tensor_parallel.comm_overlap) c.sets.push_back(set("tensor_parallel.comm_overlap", "false"));
  return c;
}

void add_tensor_parallel(const Scenario& s, std::vector<Candidate>& out) {
  const ParallelSpec& p = s.parallel;
  if (p.tp <= 1) return;
  const bool overlapped = s.tensor_parallel.comm_overlap;
  // Transformer Engine overlaps sequence parallelism's AllGather and ReduceScatter: the
  // overlap needs it, so the candidate switches both on.
  if (!overlapped && p.sequence_parallel)
    out.push_back({{set("tensor_parallel.comm_overlap", "true")}, "TP communication overlap"});
  else if (!overlapped)
    out.push_back({{set("parallel.sequence_parallel", "true"), set("tensor_parallel.comm_overlap", "true")},
                   "TP communication overlap (with the sequence parallelism it needs)"});
  // Megatron requires sequence parallelism with MoE layers and tp > 1; switching it off
  // switches off the overlap that needs it.
  if (!p.sequence_parallel)
    out.push_back({{set("parallel.sequence_parallel", "true")},
                   "sequence parallelism: AllGather/ReduceScatter instead of AllReduce"});
  else if (s.model.moe.experts == 0) {
    Candidate c{{set("parallel.sequence_parallel", "false")},
                "no sequence parallelism: AllReduce instead of AllGather/ReduceScatter"};
    if (overlapped) {
      c.sets.push_back(set("tensor_parallel.comm_overlap", "false"));
      c.why = "no sequence parallelism nor the TP overlap that needs it: AllReduce instead of AllGather/ReduceScatter";
    }
    out.push_back(c);
  }
  for (int f : {2, 4})
    if (p.tp % f == 0)
      out.push_back(with_tp(s, p.tp / f,
                            {{set("parallel.tp", p.tp / f), set("parallel.dp", static_cast<long long>(p.dp) * f)},
                             "layout: a smaller TP group, more data parallelism"}));
  if (p.tp % 2 == 0 && p.pp == 1)
    out.push_back(with_tp(
        s, p.tp / 2, {{set("parallel.tp", p.tp / 2), set("parallel.pp", 2)}, "layout: half the TP group, two stages"}));
}

// More chunks per stage than the scenario's `now` (1 without interleaving) that split the model's
// layers evenly over the pipeline (model.layers a multiple of pp·chunks, as validation requires
// without parallel.stage_layers): twice as many where they do, otherwise the fewest more that
// do; 0 where none does.
int more_chunks(const Scenario& s, int now) {
  const auto even = [&](long long v) { return s.model.layers % (s.parallel.pp * v) == 0; };
  const int per_stage = s.model.layers / s.parallel.pp;
  if (2 * now <= per_stage && even(2 * now)) return 2 * now;
  for (int v = now + 1; v <= per_stage; ++v)
    if (v >= 2 && even(v)) return v;
  return 0;
}

void add_pipeline(const Scenario& s, const Report& r, std::vector<Candidate>& out) {
  const ParallelSpec& p = s.parallel;
  if (p.pp <= 1) return;
  const bool bubbly = r.breakdown_s.bubble >= kExposedTarget * r.step_time_s;
  if (!bubbly && of(r.breakdown_s.exposed_comm, CommKind::pp) <= 0) return;
  // The scenario's own layers per stage (parallel.stage_layers) fit its pipeline shape only:
  // another number of stages or chunks would need a layout of the user's making.
  const bool own_layout = !p.stage_layers.empty();
  // DeepSpeed's pipeline engine runs its own 1F1B schedule only.
  const bool interleavable = !deepspeed_pipeline_engine(s);
  const int chunks = more_chunks(s, p.schedule == Schedule::interleaved ? p.virtual_stages : 1);
  if (interleavable && !own_layout && chunks > 0 && p.schedule != Schedule::interleaved)
    out.push_back({{set("parallel.schedule", "interleaved"), set("parallel.virtual_stages", chunks)},
                   fmt::format("pipeline bubble: interleave {} chunks per stage", chunks)});
  else if (interleavable && !own_layout && chunks > 0)
    out.push_back({{set("parallel.virtual_stages", chunks)}, "pipeline bubble: more chunks per stage"});
  if (s.training.micro_batch > 1)
    out.push_back(
        {{set("training.micro_batch", s.training.micro_batch / 2)}, "pipeline bubble: more, smaller micro-batches"});
  if (p.pp % 2 == 0 && !own_layout) {
    Candidate c{{set("parallel.pp", p.pp / 2), set("parallel.dp", static_cast<long long>(p.dp) * 2)},
                "layout: fewer stages, more data parallelism"};
    // One stage has no pipeline to schedule: only 1F1B is accepted there.
    if (p.pp == 2 && p.schedule != Schedule::one_f_one_b) {
      c.sets.push_back(set("parallel.schedule", "1f1b"));
      if (p.virtual_stages != 1) c.sets.push_back(set("parallel.virtual_stages", 1));
    }
    out.push_back(std::move(c));
  }
}

// What makes a job that does not fit fit: PyTorch DDP's buckets as views of the gradients,
// sharding the model states, recompute, more pipeline stages (fewer layers' activations and
// weights per GPU), activation offload, experts split over the TP group's ranks, a smaller
// micro-batch, a larger TP group.
std::vector<Candidate> memory_fixes(const Scenario& s) {
  const ParallelSpec& p = s.parallel;
  const DataParallelSpec& d = s.data_parallel;
  std::vector<Candidate> out;
  if (p.dp * p.cp > 1 && d.kind == DpKind::ddp && !d.gradient_as_bucket_view)
    out.push_back({{set("data_parallel.gradient_as_bucket_view", "true")},
                   "fit: gradients as views of PyTorch DDP's buckets, no second gradient buffer"});
  if (p.dp > 1 && (d.kind == DpKind::ddp || d.kind == DpKind::zero1))
    add_kind_switch(out, s, d.kind == DpKind::ddp ? DpKind::zero1 : DpKind::zero2,
                    "fit: shard the optimizer states (and with zero2 the gradients) over data parallelism");
  // DeepSpeed's ZeRO-3 refuses a mixture of experts.
  if (p.dp > 1 && d.kind != DpKind::fsdp && d.kind != DpKind::hsdp && p.pp == 1 &&
      (s.model.moe.experts == 0 || s.training.framework != Framework::deepspeed))
    add_kind_switch(out, s, DpKind::fsdp, "fit: shard parameters, gradients and optimizer states (FSDP)");
  if (s.training.recompute == Recompute::none)
    out.push_back({{set("training.recompute", "selective")}, "fit: recompute the attention core in the backward"});
  if (s.training.recompute != Recompute::full) {
    // The modules are what selective recomputes; full recompute runs without them.
    std::vector<std::string> full{set("training.recompute", "full")};
    if (!s.training.recompute_modules.empty()) full.push_back(set("training.recompute_modules", "[]"));
    out.push_back({full, "fit: recompute whole layers, keep only their inputs"});
  }
  if (p.dp % 2 == 0 && p.stage_layers.empty() && s.model.layers % (2 * p.pp) == 0)
    out.push_back({{set("parallel.pp", p.pp * 2), set("parallel.dp", static_cast<long long>(p.dp) / 2)},
                   "fit: twice the pipeline stages, each with half the layers"});
  // Megatron-Core's offload through Transformer Engine (cpu_offloading_num_layers): half the
  // layers, or all it can but the last where the scenario offloads half already (validation
  // leaves it out where Megatron-Core refuses it: a pipeline, recompute, CUDA graphs).
  const int offloaded = s.training.activation_offload_layers;
  const int more = offloaded < s.model.layers / 2 ? s.model.layers / 2 : s.model.layers - 1;
  if (more > offloaded)
    out.push_back({{set("training.activation_offload_layers", more)},
                   fmt::format("fit: {} {} activations in host memory (Transformer Engine's CPU offload, its "
                               "copies beside the compute)",
                               more, more == 1 ? "layer's" : "layers'")});
  add_expert_memory_fix(s, out);
  if (s.training.micro_batch > 1)
    out.push_back(
        {{set("training.micro_batch", s.training.micro_batch / 2)}, "fit: half the micro-batch, half the activations"});
  if (p.dp % 2 == 0 && 2 * p.tp <= s.cluster.domain_gpus() && s.model.heads % (2 * p.tp) == 0) {
    Candidate c{{set("parallel.tp", p.tp * 2), set("parallel.dp", static_cast<long long>(p.dp) / 2)},
                "fit: twice the TP group, half the weights and activations per GPU"};
    // Megatron requires sequence parallelism with MoE layers and tp > 1.
    if (s.model.moe.experts > 0 && !p.sequence_parallel) c.sets.push_back(set("parallel.sequence_parallel", "true"));
    out.push_back(std::move(c));
  }
  return out;
}

// The parts of a mixture of experts' layers Megatron-Core's CUDA graphs can capture, beyond
// `have`: the attention block, a dense layer's MLP in a mixed stack, a MoE layer's router and,
// with it, the dispatcher's preprocessing (not the all-to-all dispatcher's with a capacity
// factor). The experts and the EP all-to-alls stay outside: their token counts change from
// step to step.
std::vector<CudaGraphScope> moe_graph_parts(const Scenario& s, const std::vector<CudaGraphScope>& have) {
  const auto has = [&](CudaGraphScope p) { return std::find(have.begin(), have.end(), p) != have.end(); };
  std::vector<CudaGraphScope> added;
  if (!has(CudaGraphScope::attn)) added.push_back(CudaGraphScope::attn);
  if (s.model.mixed_layers() && !has(CudaGraphScope::mlp)) added.push_back(CudaGraphScope::mlp);
  if (!has(CudaGraphScope::moe_router)) added.push_back(CudaGraphScope::moe_router);
  const bool preprocess = s.model.moe.dispatcher != MoeDispatcher::alltoall || s.model.moe.capacity_factor <= 0;
  if (preprocess && !has(CudaGraphScope::moe_preprocess)) added.push_back(CudaGraphScope::moe_preprocess);
  return added;
}

std::string scope_list(const std::vector<CudaGraphScope>& parts) {
  std::string list;
  for (CudaGraphScope p : parts) list += fmt::format("{}\"{}\"", list.empty() ? "" : ",", to_string(p));
  return "[" + list + "]";
}

std::string scope_names(const std::vector<CudaGraphScope>& parts) {
  std::string names;
  for (CudaGraphScope p : parts) names += fmt::format("{}{}", names.empty() ? "" : ", ", to_string(p));
  return names;
}

// CUDA graphs of a scope that leaves parts of the layers to the CPU: a dense model's whole
// layers (the empty scope); a mixture of experts' scope with every part moe_graph_parts adds.
std::optional<Candidate> wider_scope(const Scenario& s) {
  const std::vector<CudaGraphScope>& scope = s.training.cuda_graph_scope;
  if (s.model.moe.experts == 0)
    return Candidate{
        {set("training.cuda_graph_scope", "[]")},
        "host: replay the whole transformer layers from CUDA graphs, no launch per kernel (the graphs' own memory "
        "not counted)"};
  const std::vector<CudaGraphScope> added = moe_graph_parts(s, scope);
  if (added.empty()) return std::nullopt;
  std::vector<CudaGraphScope> wider = scope;
  wider.insert(wider.end(), added.begin(), added.end());
  return Candidate{
      {set("training.cuda_graph_scope", scope_list(wider))},
      fmt::format("host: replay {} from CUDA graphs too, no launch per kernel there (the graphs' own memory not "
                  "counted)",
                  scope_names(added))};
}

// The GPU waiting for the CPU to issue its kernels: CUDA graphs replay the layers without
// issuing them one by one, where the framework captures them (not torchtitan's nor
// DeepSpeed's steps, not FSDP-sharded layers), or a wider scope of them; a micro-batch twice
// as large issues half the kernels per token.
void add_host(const Scenario& s, std::vector<Candidate>& out) {
  // Where the graphs would be refused (the framework, FSDP, recompute, whole layers of a mixture
  // of experts outside Megatron-Core), validation leaves the change out.
  if (!s.training.cuda_graphs) {
    if (s.model.moe.experts > 0) {
      // A mixture of experts as Megatron-Core graphs it: the parts whose shapes do not change.
      const std::vector<CudaGraphScope> parts = moe_graph_parts(s, {});
      out.push_back({{set("training.cuda_graphs", "true"), set("training.cuda_graph_scope", scope_list(parts))},
                     fmt::format("host: replay {} from CUDA graphs, no launch per kernel there (the experts' "
                                 "token counts change every step; the graphs' own memory not counted)",
                                 scope_names(parts))});
    } else {
      out.push_back(
          {{set("training.cuda_graphs", "true")},
           "host: replay the transformer layers from CUDA graphs, no launch per kernel (the graphs' own memory not "
           "counted)"});
    }
  }
  if (s.training.cuda_graphs && !s.training.cuda_graph_scope.empty()) {
    if (auto wider = wider_scope(s)) out.push_back(std::move(*wider));
  }
  const long long mb = s.training.micro_batch;
  if (s.training.global_batch % (2 * mb * s.parallel.dp) == 0)
    out.push_back({{set("training.micro_batch", 2 * mb)}, "host: twice the micro-batch, half the kernels per token"});
}

// Activation offload's copies late for their windows: fewer layers offloaded, so fewer copies
// and longer windows of compute beside each (Transformer Engine spreads the synchronisations
// over the layers), half of them or none, each with its activations back on the GPU.
void add_offload(const Scenario& s, std::vector<Candidate>& out) {
  const int n = s.training.activation_offload_layers;
  if (n >= 2)
    out.push_back({{set("training.activation_offload_layers", n / 2)},
                   fmt::format("offload: {} layers' activations to host memory, fewer copies to wait for and longer "
                               "windows of compute beside each (more activations on the GPU)",
                               n / 2)});
  if (n >= 1)
    out.push_back({{set("training.activation_offload_layers", 0)},
                   "offload: none, no copies to wait for (every layer's activations on the GPU)"});
}

std::vector<Candidate> candidates(const Scenario& s, const Report& r, CommKind dominant) {
  std::vector<Candidate> first, rest;
  if (host_bound(r)) add_host(s, first);
  if (offload_bound(r)) add_offload(s, first);
  add_tensor_parallel(s, dominant == CommKind::tp ? first : rest);
  add_data_parallel(s, dominant == CommKind::dp || dominant == CommKind::fsdp ? first : rest);
  add_pipeline(s, r, dominant == CommKind::pp ? first : rest);
  add_expert_parallel(s, dominant == CommKind::ep ? first : rest);
  add_context_parallel(s, dominant == CommKind::cp ? first : rest);
  first.insert(first.end(), rest.begin(), rest.end());
  return first;
}

std::string key_of(const std::string& set) { return set.substr(0, set.find('=')); }

// Two changes that set no key in common (two layouts, two recompute settings, two data-parallel
// kinds would: one would undo the other).
bool disjoint(const Candidate& a, const Candidate& b) {
  for (const std::string& x : a.sets)
    for (const std::string& y : b.sets)
      if (key_of(x) == key_of(y)) return false;
  return true;
}

// "fit: " or "host: " heads a why; a pair reads better without the second one's.
std::string without_head(const std::string& why) {
  const auto colon = why.find(": ");
  return colon == std::string::npos || colon > 8 ? why : why.substr(colon + 2);
}

Candidate together(const Candidate& a, const Candidate& b, const std::string& link) {
  Candidate c{a.sets, a.why + link + without_head(b.why)};
  c.sets.insert(c.sets.end(), b.sets.begin(), b.sets.end());
  return c;
}

bool fits_not(const Advice& a) { return a.status.rfind("does not fit", 0) == 0; }

std::string joined(const std::vector<std::string>& sets) {
  std::string s;
  for (const auto& x : sets) s += (s.empty() ? "" : " ") + x;
  return s;
}

// The scenario with the change, validated as any scenario is; nothing where validation refuses
// it: a change the program would refuse is not advice, whatever its memory.
std::optional<Scenario> changed(const AdviceRequest& request, const Candidate& c) {
  std::vector<std::string> sets = request.sets;
  sets.insert(sets.end(), c.sets.begin(), c.sets.end());
  try {
    return io::load_scenario(request.scenario, sets);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

// The change simulated, or its memory where it does not fit; nothing where validation refuses it.
std::optional<Advice> try_candidate(const AdviceRequest& request, const Candidate& c) {
  Advice a;
  a.change = joined(c.sets);
  a.why = c.why;
  const std::optional<Scenario> scenario = changed(request, c);
  if (!scenario) return std::nullopt;
  try {
    const MemoryReport memory = estimate_memory(*scenario);  // cheap: no simulation for what cannot run
    if (!memory.fits) {
      a.status = fmt::format("does not fit in memory ({:.1f} GiB with {:.1f} GiB headroom)",
                             memory.device / 1073741824.0, memory.headroom / 1073741824.0);
      return a;
    }
    const SimulationResult r = request.simulate_change ? request.simulate_change(*scenario)
                                                       : simulate(*scenario, SimulateOptions::report_only());
    a.status = "ok";
    a.step_time_s = r.report.step_time_s;
    a.exposed_fraction_of_step = r.report.overlap.exposed_fraction_of_step;
  } catch (const InputError& e) {
    a.status = "not simulated: " + e.message();
  } catch (const InternalError& e) {
    // A bug, but in a simulation of its own (simulations share no state): the step already
    // simulated stands, and the row keeps the bug in sight; advice_bugs makes the command fail.
    a.status = e.what();
  }
  return a;
}

// The changes validation accepts, each with the scenario's --set: the rules of what runs
// together live in validation alone, and a change it refuses is neither shown nor paired.
std::vector<Candidate> admitted(const AdviceRequest& request, std::vector<Candidate> all) {
  std::erase_if(all, [&](const Candidate& c) { return !changed(request, c); });
  return all;
}

bool met_a_bug(const Advice& a) { return a.status.starts_with(kInternalError); }

std::size_t intervals_of(const Timeline& t) {
  std::size_t n = 0;
  for (const RankTimeline& r : t.ranks) n += r.intervals.size() + r.dropped;
  return n;
}

void rank(std::vector<Advice>& advice) {
  std::stable_sort(advice.begin(), advice.end(), [](const Advice& a, const Advice& b) {
    if ((a.status == "ok") != (b.status == "ok")) return a.status == "ok";
    return a.status == "ok" && a.step_time_s < b.step_time_s;
  });
}

// A change that helps but does not fit in memory, with each change that makes a job fit and
// sets none of its keys: the fastest pair that fits, if one does, into `out`, with every pair
// whose simulation met a bug. Memory is estimated before anything is simulated, so only the
// pairs that fit cost a simulation.
void fitted(const AdviceRequest& request, const Candidate& c, const std::vector<Candidate>& fixes,
            std::vector<Advice>& out) {
  std::optional<Advice> best;
  for (const Candidate& fix : fixes) {
    if (!disjoint(c, fix)) continue;
    std::optional<Advice> a = try_candidate(request, together(c, fix, "; to fit, "));
    if (!a) continue;
    if (met_a_bug(*a))
      out.push_back(std::move(*a));
    else if (a->status == "ok" && (!best || a->step_time_s < best->step_time_s))
      best = std::move(a);
  }
  if (best) out.push_back(std::move(*best));
}

}  // namespace

// A job that does not fit: the changes that make it fit, simulated and ranked, the fastest
// that fits first. When none fits alone, every pair of them that sets no key twice; those that
// fit join the table.
void advise_memory(const AdviceRequest& request, const Scenario& scenario, Report& r) {
  const MemoryReport& m = r.memory_bytes;
  r.advice_cause = parallelism::does_not_fit(m) + "; the changes below are simulated, those that fit first";
  const std::vector<Candidate> fixes = admitted(request, memory_fixes(scenario));
  for (const Candidate& c : fixes)
    if (std::optional<Advice> a = try_candidate(request, c)) r.advice.push_back(std::move(*a));
  const bool one_fits = std::any_of(r.advice.begin(), r.advice.end(), [](const Advice& a) { return a.status == "ok"; });
  std::size_t pairs = 0;
  if (!one_fits)
    for (std::size_t i = 0; i < fixes.size(); ++i)
      for (std::size_t j = i + 1; j < fixes.size(); ++j) {
        if (!disjoint(fixes[i], fixes[j])) continue;
        ++pairs;
        std::optional<Advice> a = try_candidate(request, together(fixes[i], fixes[j], "; and "));
        if (a && (a->status == "ok" || met_a_bug(*a))) r.advice.push_back(std::move(*a));
      }
  rank(r.advice);
  std::string note = "advice: " + r.advice_cause;
  const bool fits = !r.advice.empty() && r.advice.front().status == "ok";
  if (fits)
    note += fmt::format("; fastest {} that fits: {} ({}, step {:.3f} s)", one_fits ? "change" : "pair of changes",
                        r.advice.front().change, r.advice.front().why, r.advice.front().step_time_s);
  else if (pairs > 0)
    note += fmt::format(
        "; none of them fits alone, nor any of the {} pairs of them: search the layout with 'stepsim sweep --best', "
        "or use more GPUs",
        pairs);
  else
    note += "; none of them fits alone: search the layout with 'stepsim sweep --best', or use more GPUs";
  r.notes.push_back(std::move(note));
}

void advise(const AdviceRequest& request, const Scenario& scenario, SimulationResult& result) {
  Report& r = result.report;
  const double exposed = r.overlap.exposed_fraction_of_step;
  if (request.asked && r.memory_bytes.modelled && !r.memory_bytes.fits) {
    advise_memory(request, scenario, r);
    return;
  }
  const bool host = host_bound(r);
  const bool offload = offload_bound(r);
  if (!request.asked && exposed < kExposedTarget && !host && !offload) return;
  const CommKind dominant = dominant_kind(r);
  const double dominant_s = of(r.breakdown_s.exposed_comm, dominant);
  r.advice_cause =
      exposed < kExposedTarget
          ? fmt::format("exposed communication is {:.1f} % of the step, under the usual {:.0f} % target",
                        100.0 * exposed, 100.0 * kExposedTarget)
          : fmt::format("exposed communication is {:.1f} % of the step (target under {:.0f} %), {:.0f} % of it {}: {}",
                        100.0 * exposed, 100.0 * kExposedTarget, 100.0 * dominant_s / r.breakdown_s.exposed_total(),
                        to_string(dominant), cause_of(scenario, dominant));
  if (r.breakdown_s.bubble >= kExposedTarget * r.step_time_s)
    r.advice_cause +=
        fmt::format("; the pipeline bubble adds {:.1f} % of the step", 100.0 * r.breakdown_s.bubble / r.step_time_s);
  if (host && r.host.gpu_wait_s > r.host.breakdown_gpu_wait_s)
    r.advice_cause += fmt::format(
        "; the GPU of {} waits for its host {:.1f} % of the step: its CPU issues the kernels more slowly than they "
        "run, and the stages that wait for it see that time as bubble",
        r.host.rank, 100.0 * r.host.gpu_wait_s / r.step_time_s);
  else if (host)
    r.advice_cause += fmt::format(
        "; the GPU waits for the host {:.1f} % of the step: the CPU issues the kernels more slowly than they run",
        100.0 * r.host.gpu_wait_s / r.step_time_s);
  if (offload)
    r.advice_cause += fmt::format(
        "; the GPU waits for activation offload's copies {:.1f} % of the step: a window's copy to or from host "
        "memory takes longer over cluster.host_link than the compute beside it, and the compute waits for it at the "
        "window's end",
        100.0 * r.offload_wait_s / r.step_time_s);
  const bool simulate_them = request.asked || intervals_of(result.timeline) <= kCheapIntervals;
  std::vector<Advice> paired;
  std::optional<std::vector<Candidate>> fixes;  // validated when a change first does not fit
  for (const Candidate& c : candidates(scenario, r, dominant)) {
    if (!simulate_them) {
      // Validated all the same (a load, no simulation): a change the program refuses is not shown.
      if (changed(request, c))
        r.advice.push_back({joined(c.sets), c.why, "not simulated: a large scenario; run with --advise", 0, 0});
      continue;
    }
    std::optional<Advice> a = try_candidate(request, c);
    if (!a) continue;
    r.advice.push_back(std::move(*a));
    // A change that does not fit, tried again with what makes the job fit.
    if (!fits_not(r.advice.back())) continue;
    if (!fixes) fixes = admitted(request, memory_fixes(scenario));
    fitted(request, c, *fixes, paired);
  }
  r.advice.insert(r.advice.end(), paired.begin(), paired.end());
  rank(r.advice);
  // Asked for (--advise) or brought on by the exposure, the host or the offload copies: the note names the best
  // change that shortens the step by kWorthwhile or more, whatever the exposure.
  std::string note = "advice: " + r.advice_cause;
  const auto simulated =
      std::count_if(r.advice.begin(), r.advice.end(), [](const Advice& a) { return a.status == "ok"; });
  if (simulated == 0) {
    // Nothing simulated (a large scenario, or nothing that could run): the table says why.
  } else if (r.advice.front().step_time_s <= (1.0 - kWorthwhile) * r.step_time_s)
    note += fmt::format("; best simulated change: {} ({}, step {:+.1f} %, exposed {:.1f} % of the step)",
                        r.advice.front().change, r.advice.front().why,
                        100.0 * (r.advice.front().step_time_s / r.step_time_s - 1.0),
                        100.0 * r.advice.front().exposed_fraction_of_step);
  else
    note += fmt::format("; none of the {} changes simulated shortens the step by {:g} % or more", simulated,
                        100.0 * kWorthwhile);
  r.notes.push_back(std::move(note));
}

std::vector<std::string> advice_bugs(const Report& report) {
  std::vector<std::string> out;
  for (const Advice& a : report.advice)
    if (met_a_bug(a))
      out.push_back(
          fmt::format("{} (simulating the advice's change {}; the report stands without it)", a.status, a.change));
  return out;
}

}  // namespace stepsim
