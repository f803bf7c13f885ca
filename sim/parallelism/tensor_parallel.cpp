// Megatron TP as a table: each row says which op (role and pass) a collective precedes or
// follows, with or without sequence parallelism, and which later op must wait for it.
// Forward collectives are exposed; backward ones overlap the GEMM's weight gradient.
#include "parallelism/tensor_parallel.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "stepsim/framework.hpp"
#include "workload/shape.hpp"

namespace stepsim::parallelism {

namespace {

using workload::Pass;
using workload::Role;

enum class When : std::uint8_t { before, after };
enum class Sp : std::uint8_t { off, on, any };
enum class Producer : std::uint8_t { last_compute, this_op, none };
enum class PassSel : std::uint8_t { forward, dgrad };  // dgrad: backward_data or fused backward

// What a collective moves (its S, the gathered or reduced whole):
// - hidden: b·s·h, the layer's hidden state (the loss's fp32 per token for the loss);
// - input: the GEMM's input as the column-parallel GEMM reads it, rows × input width (the
//   forward's m·k, the input gradient's m·n): latent attention's latents, MTP's 2h-wide pair;
// - rope: latent attention's shared rotary key, b·s·qk_rope;
// - loss_pair: two fp32 per token (Megatron's fused cross entropy: the predicted logit and the
//   sum of exponentials concatenated into one AllReduce);
// - loss_gathered: three fp32 per token from each TP rank (Transformer Engine's
//   parallel_cross_entropy all-gathers every rank's max, sum and target logit).
enum class Msg : std::uint8_t { hidden, input, rope, loss_pair, loss_gathered };

// Which implementations run the row (the collectives differ where the code does):
// - regather: Megatron-Core's Linear layers (Transformer Engine's too) save a sequence-parallel
//   input as the rank's shard and all-gather it again for the weight gradient
//   (LinearWithGradAccumulationAndAsyncCommunication, _LayerNormLinear's ln_out); PyTorch's
//   DTensor sequence parallelism lets F.linear save the tensor it gathered, and the backward of
//   that redistribute is the gradient's ReduceScatter alone;
// - the cross entropy's (training.cross_entropy): three AllReduces of one fp32 per token (max,
//   predicted logit, sum of exponentials) in Megatron's VocabParallelCrossEntropy (unfused)
//   and DTensor's loss_parallel (eager, compiled); two in Megatron's fused one
//   (fused_vocab_parallel_cross_entropy: the max, then the other two concatenated); one
//   AllGather in Transformer Engine's (te).
enum class Impl : std::uint8_t { any, regather, ce_three, ce_fused, ce_te };

// One TP collective placement.
struct Rule {
  Role role;
  PassSel pass;
  When when;
  Sp sp;
  CollOp op;
  Producer producer;  // what the collective waits for
  WaitRule rule;      // which later compute op waits for it
  int count;          // collectives issued back to back
  const char* what;
  Msg msg = Msg::hidden;
  Impl impl = Impl::any;
};

constexpr auto AR = CollOp::allreduce;
constexpr auto AG = CollOp::allgather;
constexpr auto RS = CollOp::reducescatter;

// Without SP: g (AllReduce) after the row-parallel GEMMs forward, f's conjugate (AllReduce)
// after the column-parallel GEMMs' input gradient. With SP: AllGather before the
// column-parallel GEMMs, ReduceScatter after the row-parallel ones; backward mirrors them
// (the embedding's ReduceScatter too: its gradient gathered back to every token, Megatron's
// _ReduceScatterToSequenceParallelRegion.backward, DTensor's Shard(1) to Replicate) and, under
// Megatron-Core, re-gathers the column-parallel input for the weight gradient.
// Latent attention (Megatron-Core's MLASelfAttention): its column-parallel up projections are
// the qkv rows, gathering and reducing their latents (Msg::input); the duplicated down
// projections have none, but under SP the shared rotary key is gathered after the kv down
// projection (gather_from_sequence_parallel_region) and its gradient reduce-scattered.
// Megatron-Core's shared experts (SharedExpertMLP, an MLP over the TP group) are the dense
// MLP's rows again.
// Multi-token prediction's eh_proj (MultiTokenPredictionLayer): column-parallel over the
// gathered 2h-wide pair, its h/t-wide output gathered along h whatever SP
// (all_gather_last_dim_from_tensor_parallel_region) and, with SP, split back to s/t rows
// (scatter_to_sequence_parallel_region, whose backward gathers them).
constexpr std::array<Rule, 41> kRules{{
    {Role::embedding, PassSel::forward, When::after, Sp::off, AR, Producer::this_op, WaitRule::next_op, 1, "fwd"},
    {Role::embedding, PassSel::forward, When::after, Sp::on, RS, Producer::this_op, WaitRule::next_op, 1, "fwd"},
    {Role::qkv, PassSel::forward, When::before, Sp::on, AG, Producer::last_compute, WaitRule::next_op, 1, "fwd"},
    {Role::attn_proj, PassSel::forward, When::after, Sp::off, AR, Producer::this_op, WaitRule::next_op, 1, "fwd"},
    {Role::attn_proj, PassSel::forward, When::after, Sp::on, RS, Producer::this_op, WaitRule::next_op, 1, "fwd"},
    {Role::fc1, PassSel::forward, When::before, Sp::on, AG, Producer::last_compute, WaitRule::next_op, 1, "fwd"},
    {Role::fc2, PassSel::forward, When::after, Sp::off, AR, Producer::this_op, WaitRule::next_op, 1, "fwd"},
    {Role::fc2, PassSel::forward, When::after, Sp::on, RS, Producer::this_op, WaitRule::next_op, 1, "fwd"},
    {Role::lm_head, PassSel::forward, When::before, Sp::on, AG, Producer::last_compute, WaitRule::next_op, 1, "fwd"},
    {Role::loss, PassSel::forward, When::after, Sp::any, AR, Producer::this_op, WaitRule::next_op, 3, "fwd",
     Msg::hidden, Impl::ce_three},
    {Role::loss, PassSel::forward, When::after, Sp::any, AR, Producer::this_op, WaitRule::next_op, 1, "max fwd",
     Msg::hidden, Impl::ce_fused},
    {Role::loss, PassSel::forward, When::after, Sp::any, AR, Producer::this_op, WaitRule::next_op, 1, "sum fwd",
     Msg::loss_pair, Impl::ce_fused},
    {Role::loss, PassSel::forward, When::after, Sp::any, AG, Producer::this_op, WaitRule::next_op, 1, "fwd",
     Msg::loss_gathered, Impl::ce_te},
    {Role::lm_head, PassSel::dgrad, When::before, Sp::on, AG, Producer::none, WaitRule::wgrad_of_role, 1, "wgrad input",
     Msg::hidden, Impl::regather},
    {Role::lm_head, PassSel::dgrad, When::after, Sp::off, AR, Producer::this_op, WaitRule::next_other_role, 1, "dgrad"},
    {Role::lm_head, PassSel::dgrad, When::after, Sp::on, RS, Producer::this_op, WaitRule::next_other_role, 1, "dgrad"},
    {Role::fc2, PassSel::dgrad, When::before, Sp::on, AG, Producer::last_compute, WaitRule::next_op, 1, "output grad"},
    {Role::fc1, PassSel::dgrad, When::before, Sp::on, AG, Producer::none, WaitRule::wgrad_of_role, 1, "wgrad input",
     Msg::hidden, Impl::regather},
    {Role::fc1, PassSel::dgrad, When::after, Sp::off, AR, Producer::this_op, WaitRule::next_other_role, 1, "dgrad"},
    {Role::fc1, PassSel::dgrad, When::after, Sp::on, RS, Producer::this_op, WaitRule::next_other_role, 1, "dgrad"},
    {Role::attn_proj, PassSel::dgrad, When::before, Sp::on, AG, Producer::last_compute, WaitRule::next_op, 1,
     "output grad"},
    {Role::qkv, PassSel::dgrad, When::before, Sp::on, AG, Producer::none, WaitRule::wgrad_of_role, 1, "wgrad input",
     Msg::hidden, Impl::regather},
    {Role::qkv, PassSel::dgrad, When::after, Sp::off, AR, Producer::this_op, WaitRule::next_other_role, 1, "dgrad"},
    {Role::qkv, PassSel::dgrad, When::after, Sp::on, RS, Producer::this_op, WaitRule::next_other_role, 1, "dgrad"},
    {Role::embedding, PassSel::dgrad, When::before, Sp::on, AG, Producer::last_compute, WaitRule::next_op, 1, "grad"},
    {Role::shared_fc1, PassSel::forward, When::before, Sp::on, AG, Producer::last_compute, WaitRule::next_op, 1, "fwd"},
    {Role::shared_fc2, PassSel::forward, When::after, Sp::off, AR, Producer::this_op, WaitRule::next_op, 1, "fwd"},
    {Role::shared_fc2, PassSel::forward, When::after, Sp::on, RS, Producer::this_op, WaitRule::next_op, 1, "fwd"},
    {Role::shared_fc2, PassSel::dgrad, When::before, Sp::on, AG, Producer::last_compute, WaitRule::next_op, 1,
     "output grad"},
    {Role::shared_fc1, PassSel::dgrad, When::before, Sp::on, AG, Producer::none, WaitRule::wgrad_of_role, 1,
     "wgrad input", Msg::hidden, Impl::regather},
    {Role::shared_fc1, PassSel::dgrad, When::after, Sp::off, AR, Producer::this_op, WaitRule::next_other_role, 1,
     "dgrad"},
    {Role::shared_fc1, PassSel::dgrad, When::after, Sp::on, RS, Producer::this_op, WaitRule::next_other_role, 1,
     "dgrad"},
    {Role::kv_down, PassSel::forward, When::after, Sp::on, AG, Producer::this_op, WaitRule::next_op, 1,
     "rotary key fwd", Msg::rope},
    {Role::kv_down, PassSel::dgrad, When::before, Sp::on, RS, Producer::last_compute, WaitRule::next_op, 1,
     "rotary key grad", Msg::rope},
    {Role::mtp_projection, PassSel::forward, When::before, Sp::on, AG, Producer::last_compute, WaitRule::next_op, 1,
     "fwd", Msg::input},
    {Role::mtp_projection, PassSel::forward, When::after, Sp::any, AG, Producer::this_op, WaitRule::next_op, 1,
     "output fwd"},
    {Role::mtp_projection, PassSel::dgrad, When::before, Sp::on, AG, Producer::last_compute, WaitRule::next_op, 1,
     "sequence grad"},
    {Role::mtp_projection, PassSel::dgrad, When::before, Sp::any, RS, Producer::last_compute, WaitRule::next_op, 1,
     "output grad"},
    {Role::mtp_projection, PassSel::dgrad, When::before, Sp::on, AG, Producer::none, WaitRule::wgrad_of_role, 1,
     "wgrad input", Msg::input, Impl::regather},
    {Role::mtp_projection, PassSel::dgrad, When::after, Sp::off, AR, Producer::this_op, WaitRule::next_other_role, 1,
     "dgrad", Msg::input},
    {Role::mtp_projection, PassSel::dgrad, When::after, Sp::on, RS, Producer::this_op, WaitRule::next_other_role, 1,
     "dgrad", Msg::input},
}};

bool pass_matches(PassSel sel, Pass pass) {
  if (sel == PassSel::forward) return pass == Pass::forward;
  return pass == Pass::backward_data || pass == Pass::backward;
}

constexpr unsigned bit(Impl impl) { return 1U << static_cast<unsigned>(impl); }

// The Impl rows `scenario` runs: Megatron-Core's re-gathers where the framework runs its Linear
// layers (megatron, nemo, and the unspecified framework, whose defaults are Megatron-Core's),
// and the cross entropy's collectives as its kernels run (LayerShape::loss).
unsigned impls_of(const Scenario& scenario) {
  unsigned out = bit(Impl::any);
  if (regathers_inputs(scenario.training.framework)) out |= bit(Impl::regather);
  switch (workload::layer_shape(scenario).loss) {
    case CrossEntropy::fused:
      return out | bit(Impl::ce_fused);
    case CrossEntropy::te:
      return out | bit(Impl::ce_te);
    case CrossEntropy::unfused:
    case CrossEntropy::eager:
    case CrossEntropy::compiled:
      break;
  }
  return out | bit(Impl::ce_three);
}

bool matches(const Rule& rule, const OpSite& site, bool after, bool sequence_parallel, unsigned impls) {
  if (rule.role != site.cost->role || (rule.when == When::after) != after) return false;
  if (rule.sp != Sp::any && (rule.sp == Sp::on) != sequence_parallel) return false;
  if ((impls & bit(rule.impl)) == 0) return false;
  return pass_matches(rule.pass, site.cost->pass);
}

// "L3 fc1" for the GEMM an op belongs to: workload names backward GEMMs "fc1 dgrad".
std::string gemm_label(const OpSite& site, int layers) {
  std::string label = site_label(site, layers);
  constexpr std::string_view kDgrad = " dgrad";
  if (label.ends_with(kDgrad)) label.resize(label.size() - kDgrad.size());
  return label;
}

}  // namespace

TensorParallel::TensorParallel(const Scenario& scenario, const workload::ModelWork& work)
    : enabled_(scenario.parallel.tp > 1),
      overlap_(enabled_ && scenario.tensor_parallel.comm_overlap && scenario.parallel.sequence_parallel),
      tp_(scenario.parallel.tp),
      sms_(scenario.cluster.gpu.sms),
      nvlink_latency_(scenario.cluster.intra_node.latency),
      nvlink_(scenario.cluster.intra_node.bandwidth),
      sequence_parallel_(scenario.parallel.sequence_parallel),
      layers_(scenario.model.layers),
      layer_message_(work.layer.tp_message),
      pre_message_(work.pre.tp_message.count() > 0 ? work.pre.tp_message : work.layer.tp_message),
      post_message_(work.post.tp_message.count() > 0 ? work.post.tp_message : work.layer.tp_message),
      loss_message_(Bytes(scenario.training.micro_batch * scenario.model.seq_len / scenario.parallel.cp * 4)),
      rope_message_(work.layer.rope_message),
      latent_attention_(scenario.model.latent_attention()),
      act_bytes_(workload::layer_shape(scenario).act_bytes),
      impls_(impls_of(scenario)),
      pieces_(scenario.model.layers) {
  const Precision p = scenario.training.precision;
  const bool low = p == Precision::fp8 || p == Precision::mxfp8 || p == Precision::nvfp4;
  if (!low) return;
  double element = 1.0;                                   // FP8: one byte, its scale per tensor
  if (p == Precision::mxfp8) element = 1.0 + 1.0 / 32.0;  // a byte and an E8M0 scale per 32
  if (p == Precision::nvfp4) element = 0.5 + 1.0 / 16.0;  // four bits and an FP8 scale per 16
  quantized_share_ = element / act_bytes_;
  const Framework f = scenario.training.framework;
  quantizes_inputs_ = traits_of(f).megatron_core || f == Framework::torchtitan || f == Framework::torchtitan_compile;
  quantizes_backward_ = traits_of(f).megatron_core;
}

Bytes TensorParallel::message(const OpSite& site) const {
  if (site.cost->role == Role::loss) return loss_message_;
  if (site.block == 0) return pre_message_;
  if (site.block == layers_ + 1) return post_message_;
  return layer_message_;
}

// A latent attention layer's up projections (the qkv rows) gather and reduce their latents.
Bytes TensorParallel::message(const OpSite& site, std::size_t rule) const {
  const workload::OpCost& op = *site.cost;
  Msg msg = kRules[rule].msg;
  if (op.role == Role::qkv && latent_attention_) msg = Msg::input;
  switch (msg) {
    case Msg::rope:
      return rope_message_;
    case Msg::loss_pair:
      return loss_message_ * 2;
    case Msg::loss_gathered:
      return loss_message_ * (3LL * tp_);
    case Msg::input:
      return Bytes(op.m * (op.pass == Pass::forward ? op.k : op.n) * act_bytes_);
    case Msg::hidden:
      break;
  }
  return message(site);
}

// Transformer Engine gathers a low-precision GEMM's operand quantized (gather_along_first_dim
// with the GEMM's quantizer): the column-parallel input forward and again for the weight
// gradient, and the row-parallel GEMM's output gradient; torchao's Float8 tensor parallelism
// (PrepareFloat8ModuleInput) the column-parallel inputs forward.
Bytes TensorParallel::gathered(const OpSite& site, std::size_t rule) const {
  const Rule& r = kRules[rule];
  if (r.op != AG || r.msg != Msg::hidden) return message(site, rule);
  return quantized(site, message(site, rule));
}

// `whole` gathered before or for the GEMM of `site`, in the bytes it moves in.
Bytes TensorParallel::quantized(const OpSite& site, Bytes whole) const {
  const workload::OpCost& op = *site.cost;
  if (!op.fp8) return whole;
  const bool column = op.role == Role::qkv || op.role == Role::fc1 || op.role == Role::shared_fc1;
  const bool row = op.role == Role::fc2 || op.role == Role::attn_proj || op.role == Role::shared_fc2;
  const bool forward_input = op.pass == Pass::forward && column;
  const bool backward = op.pass != Pass::forward && (column || row);
  if ((forward_input && quantizes_inputs_) || (backward && quantizes_backward_))
    return Bytes(std::llround(whole.as_double() * quantized_share_));
  return whole;
}

bool TensorParallel::has_rule(const OpSite& site, bool after) const {
  return std::ranges::any_of(kRules,
                             [&](const Rule& rule) { return matches(rule, site, after, sequence_parallel_, impls_); });
}

void TensorParallel::issue(StepBuilder& b, const OpSite& site, bool after, const std::vector<OpIndex>& producer) {
  const std::vector<OpIndex> none;
  for (std::size_t r = 0; r < kRules.size(); ++r) {
    const Rule& rule = kRules[r];
    if (!matches(rule, site, after, sequence_parallel_, impls_)) continue;
    const std::uint32_t collective = name(b, r, site);
    const std::vector<OpIndex>& waits = rule.producer == Producer::none ? none : producer;
    OpIndex last = 0;
    b.set_comm_role(site.cost->role);
    for (int i = 0; i < rule.count; ++i) {
      last = b.collective(CommKind::tp, rule.op, gathered(site, r), collective, waits);
    }
    b.set_comm_role(std::nullopt);
    b.defer_wait(last, rule.rule, site.cost->role);
  }
}

// Formatted and interned once per layer and op; later micro-batches reuse the name.
std::uint32_t TensorParallel::name(StepBuilder& b, std::size_t rule, const OpSite& site) {
  const auto [it, inserted] = names_.try_emplace({rule, site.block, site.cost}, 0);
  if (inserted) {
    const std::string what = fmt::format("{} {}", gemm_label(site, layers_), kRules[rule].what);
    it->second = b.collective_name(CommKind::tp, kRules[rule].op, gathered(site, rule), what);
  }
  return it->second;
}

// A pipelined GEMM issues its own collectives (issue_pipelined) in place of the table's.
void TensorParallel::before_op(StepBuilder& b, const OpSite& site) {
  if (enabled_ && !pipelines(site) && has_rule(site, false)) issue(b, site, false, b.stream_tail());
}

void TensorParallel::after_op(StepBuilder& b, const OpSite& site, OpIndex op) {
  if (site.cost->reduced_output_saved) return;
  if (enabled_ && !pipelines(site) && has_rule(site, true)) issue(b, site, true, {op});
}

}  // namespace stepsim::parallelism
