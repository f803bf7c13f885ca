// The scenario schema: one table of keys per struct of stepsim/scenario.hpp and one table of
// names per enumeration. Adding a key is one row here; parsing, unknown-key suggestions,
// the resolved scenario and `stepsim presets --keys` all follow from the tables.
#include "io/scenario_schema.hpp"

#include <algorithm>
#include <initializer_list>
#include <iterator>

#include "io/schema.hpp"
#include "stepsim/framework.hpp"

namespace stepsim::io {

// Declared first so that the field templates below can refer to any section.
Schema<GpuFlops> schema_of(Tag<GpuFlops>);
Schema<Provenance> schema_of(Tag<Provenance>);
Schema<GpuEfficiency> schema_of(Tag<GpuEfficiency>);
Schema<GpuSpec> schema_of(Tag<GpuSpec>);
Schema<IntraNode> schema_of(Tag<IntraNode>);
Schema<InterNode> schema_of(Tag<InterNode>);
Schema<HostLink> schema_of(Tag<HostLink>);
Schema<CollectiveTuning> schema_of(Tag<CollectiveTuning>);
Schema<ClusterSpec> schema_of(Tag<ClusterSpec>);
Schema<MoeSpec> schema_of(Tag<MoeSpec>);
Schema<MlaSpec> schema_of(Tag<MlaSpec>);
Schema<ModelSpec> schema_of(Tag<ModelSpec>);
Schema<ParallelSpec> schema_of(Tag<ParallelSpec>);
Schema<TrainingSpec> schema_of(Tag<TrainingSpec>);
Schema<DataParallelSpec> schema_of(Tag<DataParallelSpec>);
Schema<TensorParallelSpec> schema_of(Tag<TensorParallelSpec>);
Schema<CollectivesSpec> schema_of(Tag<CollectivesSpec>);
Schema<SimulationSpec> schema_of(Tag<SimulationSpec>);
Schema<ContextParallelSpec> schema_of(Tag<ContextParallelSpec>);
Schema<GpuSpeed> schema_of(Tag<GpuSpeed>);
Schema<NodeSpeed> schema_of(Tag<NodeSpeed>);
Schema<LinkFactor> schema_of(Tag<LinkFactor>);
Schema<FailedNics> schema_of(Tag<FailedNics>);
Schema<JitterSpec> schema_of(Tag<JitterSpec>);
Schema<VariationSpec> schema_of(Tag<VariationSpec>);
Schema<Scenario> schema_of(Tag<Scenario>);

// ---- names of the enumerations (the first name of a value is the one written back) ----

std::span<const EnumName<Precision>> enum_names(Tag<Precision>) {
  static constexpr EnumName<Precision> names[] = {
      {"bf16", Precision::bf16}, {"fp16", Precision::fp16},   {"fp8", Precision::fp8},    {"tf32", Precision::tf32},
      {"fp32", Precision::fp32}, {"mxfp8", Precision::mxfp8}, {"nvfp4", Precision::nvfp4}};
  return names;
}

std::span<const EnumName<Fp8Scaling>> enum_names(Tag<Fp8Scaling>) {
  static constexpr EnumName<Fp8Scaling> names[] = {{"delayed", Fp8Scaling::delayed}, {"current", Fp8Scaling::current}};
  return names;
}

std::span<const EnumName<MlpKind>> enum_names(Tag<MlpKind>) {
  static constexpr EnumName<MlpKind> names[] = {{"gelu", MlpKind::gelu}, {"swiglu", MlpKind::swiglu}};
  return names;
}

std::span<const EnumName<Recompute>> enum_names(Tag<Recompute>) {
  static constexpr EnumName<Recompute> names[] = {{"none", Recompute::none},
                                                  {"selective", Recompute::selective},
                                                  {"full", Recompute::full},
                                                  {"selective-op", Recompute::selective_op}};
  return names;
}

std::span<const EnumName<CudaGraphScope>> enum_names(Tag<CudaGraphScope>) {
  static constexpr EnumName<CudaGraphScope> names[] = {{"attn", CudaGraphScope::attn},
                                                       {"mlp", CudaGraphScope::mlp},
                                                       {"moe", CudaGraphScope::moe},
                                                       {"moe_router", CudaGraphScope::moe_router},
                                                       {"moe_preprocess", CudaGraphScope::moe_preprocess}};
  return names;
}

std::span<const EnumName<RecomputeModule>> enum_names(Tag<RecomputeModule>) {
  static constexpr EnumName<RecomputeModule> names[] = {{"core_attn", RecomputeModule::core_attn},
                                                        {"moe_act", RecomputeModule::moe_act},
                                                        {"layernorm", RecomputeModule::layernorm},
                                                        {"mla_up_proj", RecomputeModule::mla_up_proj},
                                                        {"mlp", RecomputeModule::mlp},
                                                        {"moe", RecomputeModule::moe},
                                                        {"shared_experts", RecomputeModule::shared_experts}};
  return names;
}

std::span<const EnumName<AttentionKind>> enum_names(Tag<AttentionKind>) {
  static constexpr EnumName<AttentionKind> names[] = {
      {"flash", AttentionKind::flash}, {"flash2", AttentionKind::flash2}, {"unfused", AttentionKind::unfused}};
  return names;
}

std::span<const EnumName<Fusion>> enum_names(Tag<Fusion>) {
  static constexpr EnumName<Fusion> names[] = {{"fused", Fusion::fused}, {"eager", Fusion::eager}};
  return names;
}

std::span<const EnumName<Framework>> enum_names(Tag<Framework>) {
  static constexpr EnumName<Framework> names[] = {{"unspecified", Framework::unspecified},
                                                  {"megatron", Framework::megatron},
                                                  {"nemo", Framework::nemo},
                                                  {"torchtitan", Framework::torchtitan},
                                                  {"torchtitan-compile", Framework::torchtitan_compile},
                                                  {"pytorch", Framework::pytorch},
                                                  {"deepspeed", Framework::deepspeed}};
  return names;
}

std::span<const EnumName<CrossEntropy>> enum_names(Tag<CrossEntropy>) {
  static constexpr EnumName<CrossEntropy> names[] = {{"fused", CrossEntropy::fused},
                                                     {"unfused", CrossEntropy::unfused},
                                                     {"eager", CrossEntropy::eager},
                                                     {"compiled", CrossEntropy::compiled},
                                                     {"te", CrossEntropy::te}};
  return names;
}

std::span<const EnumName<Schedule>> enum_names(Tag<Schedule>) {
  static constexpr EnumName<Schedule> names[] = {
      {"1f1b", Schedule::one_f_one_b}, {"gpipe", Schedule::gpipe}, {"interleaved", Schedule::interleaved},
      {"zb-h1", Schedule::zb_h1},      {"zb-h2", Schedule::zb_h2}, {"dualpipe", Schedule::dualpipe}};
  return names;
}

std::span<const EnumName<DpKind>> enum_names(Tag<DpKind>) {
  static constexpr EnumName<DpKind> names[] = {{"ddp", DpKind::ddp},
                                               {"zero1", DpKind::zero1},
                                               {"zero2", DpKind::zero2},
                                               {"fsdp", DpKind::fsdp},
                                               {"hsdp", DpKind::hsdp}};
  return names;
}

std::string_view enum_hint(Tag<DpKind>, std::string_view text) {
  if (same_name(text, "zero3") || same_name(text, "zero-3") || same_name(text, "full_shard"))
    return "ZeRO-3 is 'fsdp' here (parameters, gradients and optimizer state sharded; 'hsdp' shards inside groups)";
  return {};
}

std::span<const EnumName<BackwardPrefetch>> enum_names(Tag<BackwardPrefetch>) {
  static constexpr EnumName<BackwardPrefetch> names[] = {
      {"pre", BackwardPrefetch::pre}, {"post", BackwardPrefetch::post}, {"none", BackwardPrefetch::none}};
  return names;
}

std::span<const EnumName<FsdpImpl>> enum_names(Tag<FsdpImpl>) {
  static constexpr EnumName<FsdpImpl> names[] = {{"pytorch", FsdpImpl::pytorch}, {"megatron", FsdpImpl::megatron}};
  return names;
}

std::span<const EnumName<IntraFabric>> enum_names(Tag<IntraFabric>) {
  static constexpr EnumName<IntraFabric> names[] = {
      {"nvswitch", IntraFabric::nvswitch}, {"nvlink-mesh", IntraFabric::nvlink_mesh}, {"pcie", IntraFabric::pcie}};
  return names;
}

std::span<const EnumName<InterFabric>> enum_names(Tag<InterFabric>) {
  static constexpr EnumName<InterFabric> names[] = {
      {"infiniband", InterFabric::infiniband}, {"roce", InterFabric::roce}, {"ethernet", InterFabric::ethernet}};
  return names;
}

std::span<const EnumName<InterTopology>> enum_names(Tag<InterTopology>) {
  static constexpr EnumName<InterTopology> names[] = {{"rail-optimized", InterTopology::rail_optimized},
                                                      {"fat-tree", InterTopology::fat_tree}};
  return names;
}

std::span<const EnumName<HostCpu>> enum_names(Tag<HostCpu>) {
  static constexpr EnumName<HostCpu> names[] = {
      {"intel", HostCpu::intel}, {"amd", HostCpu::amd}, {"arm", HostCpu::arm}};
  return names;
}

std::span<const EnumName<RankMode>> enum_names(Tag<RankMode>) {
  static constexpr EnumName<RankMode> names[] = {{"representative", RankMode::representative}, {"all", RankMode::all}};
  return names;
}

std::span<const EnumName<LinkKind>> enum_names(Tag<LinkKind>) {
  static constexpr EnumName<LinkKind> names[] = {{"nic", LinkKind::nic}, {"nvlink", LinkKind::nvlink}};
  return names;
}

std::span<const EnumName<JitterKind>> enum_names(Tag<JitterKind>) {
  static constexpr EnumName<JitterKind> names[] = {{"none", JitterKind::none},
                                                   {"normal", JitterKind::normal},
                                                   {"lognormal", JitterKind::lognormal},
                                                   {"uniform", JitterKind::uniform}};
  return names;
}

std::span<const EnumName<GpuArch>> enum_names(Tag<GpuArch>) {
  static constexpr EnumName<GpuArch> names[] = {
      {"ampere", GpuArch::ampere}, {"hopper", GpuArch::hopper}, {"blackwell", GpuArch::blackwell}};
  return names;
}

std::span<const EnumName<Algorithm>> enum_names(Tag<Algorithm>) {
  static constexpr EnumName<Algorithm> names[] = {
      {"auto", Algorithm::automatic}, {"ring", Algorithm::ring},           {"tree", Algorithm::tree},
      {"nvls", Algorithm::nvls},      {"nvls-tree", Algorithm::nvls_tree}, {"collnet", Algorithm::collnet},
      {"pat", Algorithm::pat},        {"direct", Algorithm::direct}};
  return names;
}

std::span<const EnumName<Protocol>> enum_names(Tag<Protocol>) {
  static constexpr EnumName<Protocol> names[] = {
      {"auto", Protocol::automatic}, {"LL", Protocol::ll}, {"LL128", Protocol::ll128}, {"Simple", Protocol::simple}};
  return names;
}

std::span<const EnumName<MoeBalancingLoss>> enum_names(Tag<MoeBalancingLoss>) {
  static constexpr EnumName<MoeBalancingLoss> names[] = {{"none", MoeBalancingLoss::none},
                                                         {"aux_loss", MoeBalancingLoss::aux_loss},
                                                         {"seq_aux_loss", MoeBalancingLoss::seq_aux_loss}};
  return names;
}

std::span<const EnumName<MoeDispatcher>> enum_names(Tag<MoeDispatcher>) {
  static constexpr EnumName<MoeDispatcher> names[] = {{"alltoall", MoeDispatcher::alltoall},
                                                      {"flex", MoeDispatcher::flex}};
  return names;
}

std::span<const EnumName<CpComm>> enum_names(Tag<CpComm>) {
  static constexpr EnumName<CpComm> names[] = {{"p2p", CpComm::p2p}, {"all_gather", CpComm::all_gather}};
  return names;
}

// ---- the keys of each section (docs/scenario-reference.md is generated from them) ----

Schema<GpuFlops> schema_of(Tag<GpuFlops>) {
  static constexpr Field<GpuFlops> fields[] = {field<&GpuFlops::bf16>("bf16"), field<&GpuFlops::fp16>("fp16"),
                                               field<&GpuFlops::fp8>("fp8"),   field<&GpuFlops::tf32>("tf32"),
                                               field<&GpuFlops::fp32>("fp32"), field<&GpuFlops::fp4>("fp4")};
  return {fields, ""};
}

Schema<GpuEfficiency> schema_of(Tag<GpuEfficiency>) {
  static constexpr Field<GpuEfficiency> fields[] = {
      field<&GpuEfficiency::gemm_max>("gemm_max"),
      field<&GpuEfficiency::gemm_half_flops>("gemm_half_flops"),
      field<&GpuEfficiency::gemm_half_k>("gemm_half_k"),
      field<&GpuEfficiency::attention_max>("attention_max"),
      field<&GpuEfficiency::hbm>("hbm"),
      field<&GpuEfficiency::kernel_min>("kernel_min"),
      field<&GpuEfficiency::comm_slowdown>("comm_slowdown"),
      field<&GpuEfficiency::fp8_gemm_max>("fp8_gemm_max"),
      field<&GpuEfficiency::fp4_gemm_max>("fp4_gemm_max"),
      field<&GpuEfficiency::derived_comm_slowdown>("derived_comm_slowdown")};
  return {fields, ""};
}

Schema<Provenance> schema_of(Tag<Provenance>) {
  static constexpr Field<Provenance> fields[] = {field<&Provenance::fitted>("fitted"),
                                                 field<&Provenance::source>("source")};
  return {fields, ""};
}

Schema<GpuSpec> schema_of(Tag<GpuSpec>) {
  static constexpr Field<GpuSpec> fields[] = {field<&GpuSpec::name>("name"),
                                              field<&GpuSpec::arch>("arch"),
                                              field<&GpuSpec::flops>("flops"),
                                              field<&GpuSpec::memory>("memory"),
                                              field<&GpuSpec::memory_bandwidth>("memory_bandwidth"),
                                              field<&GpuSpec::sms>("sms"),
                                              field<&GpuSpec::kernel_launch>("kernel_launch"),
                                              field<&GpuSpec::efficiency>("efficiency"),
                                              field<&GpuSpec::board_power_w>("board_power_w"),
                                              field<&GpuSpec::provenance>("provenance")};
  return {fields, "gpus"};
}

Schema<IntraNode> schema_of(Tag<IntraNode>) {
  static constexpr Field<IntraNode> fields[] = {field<&IntraNode::fabric>("fabric"),
                                                field<&IntraNode::bandwidth>("bandwidth"),
                                                field<&IntraNode::latency>("latency"), field<&IntraNode::nvls>("nvls")};
  return {fields, ""};
}

Schema<InterNode> schema_of(Tag<InterNode>) {
  static constexpr Field<InterNode> fields[] = {field<&InterNode::fabric>("fabric"),
                                                field<&InterNode::nics_per_node>("nics_per_node"),
                                                field<&InterNode::nic_bandwidth, UnitStyle::bits>("nic_bandwidth"),
                                                field<&InterNode::latency>("latency"),
                                                field<&InterNode::topology>("topology"),
                                                field<&InterNode::oversubscription>("oversubscription"),
                                                field<&InterNode::nodes_per_leaf>("nodes_per_leaf")};
  return {fields, ""};
}

Schema<HostLink> schema_of(Tag<HostLink>) {
  static constexpr Field<HostLink> fields[] = {field<&HostLink::bandwidth>("bandwidth"),
                                               field<&HostLink::gpus_per_link>("gpus_per_link")};
  return {fields, ""};
}

Schema<CollectiveTuning> schema_of(Tag<CollectiveTuning>) {
  static constexpr Field<CollectiveTuning> fields[] = {field<&CollectiveTuning::launch_overhead>("launch_overhead"),
                                                       field<&CollectiveTuning::bus_efficiency>("bus_efficiency"),
                                                       field<&CollectiveTuning::ramp_half_bytes>("ramp_half_bytes"),
                                                       field<&CollectiveTuning::ramp_exponent>("ramp_exponent"),
                                                       field<&CollectiveTuning::latency_floor>("latency_floor")};
  return {fields, ""};
}

Schema<ClusterSpec> schema_of(Tag<ClusterSpec>) {
  static constexpr Field<ClusterSpec> fields[] = {field<&ClusterSpec::name>("name"),
                                                  field<&ClusterSpec::nodes>("nodes"),
                                                  field<&ClusterSpec::gpus_per_node>("gpus_per_node"),
                                                  field<&ClusterSpec::nvlink_domain>("nvlink_domain"),
                                                  field<&ClusterSpec::gpu>("gpu"),
                                                  field<&ClusterSpec::intra_node>("intra_node"),
                                                  field<&ClusterSpec::inter_node>("inter_node"),
                                                  field<&ClusterSpec::host_link>("host_link"),
                                                  field<&ClusterSpec::host_cpu>("host_cpu"),
                                                  field<&ClusterSpec::tuning>("collective_tuning"),
                                                  field<&ClusterSpec::gpu_hour_price>("gpu_hour_price"),
                                                  field<&ClusterSpec::provenance>("provenance")};
  return {fields, "clusters"};
}

Schema<MoeSpec> schema_of(Tag<MoeSpec>) {
  static constexpr Field<MoeSpec> fields[] = {field<&MoeSpec::experts>("experts"),
                                              field<&MoeSpec::top_k>("top_k"),
                                              field<&MoeSpec::expert_ffn_hidden>("expert_ffn_hidden"),
                                              field<&MoeSpec::capacity_factor>("capacity_factor"),
                                              field<&MoeSpec::dispatcher>("dispatcher"),
                                              field<&MoeSpec::a2a_overlap>("a2a_overlap"),
                                              field<&MoeSpec::imbalance>("imbalance"),
                                              field<&MoeSpec::shared_experts>("shared_experts"),
                                              field<&MoeSpec::load_balancing>("load_balancing"),
                                              field<&MoeSpec::expert_bias>("expert_bias"),
                                              field<&MoeSpec::force_balance>("force_balance"),
                                              field<&MoeSpec::first_dense_layers>("first_dense_layers"),
                                              field<&MoeSpec::layer_pattern>("layer_pattern")};
  return {fields, ""};
}

Schema<MlaSpec> schema_of(Tag<MlaSpec>) {
  static constexpr Field<MlaSpec> fields[] = {
      field<&MlaSpec::q_lora_rank>("q_lora_rank"), field<&MlaSpec::kv_lora_rank>("kv_lora_rank"),
      field<&MlaSpec::qk_nope_head_dim>("qk_nope_head_dim"), field<&MlaSpec::qk_rope_head_dim>("qk_rope_head_dim"),
      field<&MlaSpec::v_head_dim>("v_head_dim")};
  return {fields, ""};
}

Schema<ModelSpec> schema_of(Tag<ModelSpec>) {
  static constexpr Field<ModelSpec> fields[] = {field<&ModelSpec::name>("name"),
                                                field<&ModelSpec::layers>("layers"),
                                                field<&ModelSpec::hidden>("hidden"),
                                                field<&ModelSpec::heads>("heads"),
                                                field<&ModelSpec::kv_heads>("kv_heads"),
                                                field<&ModelSpec::ffn_hidden>("ffn_hidden"),
                                                field<&ModelSpec::head_dim>("head_dim"),
                                                field<&ModelSpec::qk_norm>("qk_norm"),
                                                field<&ModelSpec::vocab>("vocab"),
                                                field<&ModelSpec::seq_len>("seq_len"),
                                                field<&ModelSpec::mlp>("mlp"),
                                                field<&ModelSpec::tied_embeddings>("tied_embeddings"),
                                                field<&ModelSpec::moe>("moe"),
                                                field<&ModelSpec::mla>("mla"),
                                                field<&ModelSpec::mtp_layers>("mtp_layers"),
                                                field<&ModelSpec::sliding_window>("sliding_window"),
                                                field<&ModelSpec::window_skip_freq>("window_skip_freq"),
                                                field<&ModelSpec::swiglu_limit>("swiglu_limit"),
                                                field<&ModelSpec::linear_bias>("linear_bias"),
                                                field<&ModelSpec::yarn_factor>("yarn_factor")};
  return {fields, "models"};
}

Schema<ParallelSpec> schema_of(Tag<ParallelSpec>) {
  static constexpr Field<ParallelSpec> fields[] = {field<&ParallelSpec::tp>("tp"),
                                                   field<&ParallelSpec::pp>("pp"),
                                                   field<&ParallelSpec::dp>("dp"),
                                                   field<&ParallelSpec::cp>("cp"),
                                                   field<&ParallelSpec::ep>("ep"),
                                                   field<&ParallelSpec::etp>("etp"),
                                                   field<&ParallelSpec::sequence_parallel>("sequence_parallel"),
                                                   field<&ParallelSpec::schedule>("schedule"),
                                                   field<&ParallelSpec::virtual_stages>("virtual_stages"),
                                                   field<&ParallelSpec::stage_layers>("stage_layers")};
  return {fields, ""};
}

// Records whether the scenario gave etp, which follows tp under Megatron-Core where it does not,
// and sequence_parallel, which torchtitan turns on under TP (io/validate.cpp).
void read_value(ParallelSpec& out, const json::value& v, const Reader& r) {
  if (const json::object* object = v.if_object(); object != nullptr) {
    if (object->contains("etp")) out.etp_given = true;
    if (object->contains("sequence_parallel")) out.sequence_parallel_given = true;
  }
  read_value<ParallelSpec>(out, v, r);
}

// training.framework gives the kernel keys their defaults: it sets those that no layer of the
// scenario (the file, an example preset it starts from, a --set) gives itself, whatever the
// order of the layers and the place of the keys in their object.
void read_value(TrainingSpec& out, const json::value& v, const Reader& r) {
  if (const json::object* object = v.if_object(); object != nullptr) {
    if (object->contains("main_grad")) out.main_grad_given = true;
    if (object->contains("fusion")) out.fusion_given = true;
    if (object->contains("attention")) out.attention_given = true;
    if (object->contains("cross_entropy")) out.cross_entropy_given = true;
    if (object->contains("grad_clip")) out.grad_clip_given = true;
    if (object->contains("fp8_scaling")) out.fp8_scaling_given = true;
    if (const json::value* framework = object->if_contains("framework"); framework != nullptr) {
      read_value(out.framework, *framework, r.at("framework"));
      const FrameworkTraits& traits = traits_of(out.framework);
      if (!out.fusion_given) out.fusion = traits.fusion;
      if (!out.attention_given) out.attention = traits.attention;
      if (!out.cross_entropy_given) out.cross_entropy = traits.cross_entropy;
      if (!out.grad_clip_given) out.grad_clip = traits.grad_clip;
    }
  }
  read_value<TrainingSpec>(out, v, r);
}

bool assignment_covers(std::string_view key, std::string_view other) {
  return other.size() > key.size() && other.starts_with(key) && other[key.size()] == '.';
}

Schema<TrainingSpec> schema_of(Tag<TrainingSpec>) {
  static constexpr Field<TrainingSpec> fields[] = {
      field<&TrainingSpec::global_batch>("global_batch"),
      field<&TrainingSpec::micro_batch>("micro_batch"),
      field<&TrainingSpec::precision>("precision"),
      field<&TrainingSpec::fp8_scaling>("fp8_scaling"),
      field<&TrainingSpec::recompute>("recompute"),
      field<&TrainingSpec::recompute_modules>("recompute_modules"),
      field<&TrainingSpec::framework>("framework"),
      field<&TrainingSpec::cuda_graphs>("cuda_graphs"),
      field<&TrainingSpec::cuda_graph_scope>("cuda_graph_scope"),
      field<&TrainingSpec::activation_offload_layers>("activation_offload_layers"),
      field<&TrainingSpec::attention>("attention"),
      field<&TrainingSpec::optimizer>("optimizer"),
      field<&TrainingSpec::optimizer_state>("optimizer_state"),
      field<&TrainingSpec::main_grad>("main_grad"),
      field<&TrainingSpec::fusion>("fusion"),
      field<&TrainingSpec::cross_entropy>("cross_entropy"),
      field<&TrainingSpec::grad_clip>("grad_clip"),
      field<&TrainingSpec::memory_headroom>("memory_headroom"),
      field<&TrainingSpec::expandable_segments>("expandable_segments")};
  return {fields, ""};
}

// Records whether the scenario gave grad_reduce_dtype, which Megatron-Core ties to the main
// gradients' precision, gradient_as_bucket_view, overlap_grad_reduce, reshard_after_forward and
// fsdp_version, whose defaults the framework decides, and the
// bucket sizes, the first of which follows bucket_cap_mb where only that is given
// (io/validate.cpp).
void read_value(DataParallelSpec& out, const json::value& v, const Reader& r) {
  if (const json::object* object = v.if_object(); object != nullptr) {
    if (object->contains("grad_reduce_dtype")) out.grad_reduce_dtype_given = true;
    if (object->contains("gradient_as_bucket_view")) out.gradient_as_bucket_view_given = true;
    if (object->contains("overlap_grad_reduce")) out.overlap_grad_reduce_given = true;
    if (object->contains("bucket_cap_mb")) out.bucket_cap_mb_given = true;
    if (object->contains("first_bucket_mb")) out.first_bucket_mb_given = true;
    if (object->contains("fsdp_version")) out.fsdp_version_given = true;
    if (object->contains("reshard_after_forward")) out.reshard_after_forward_given = true;
  }
  read_value<DataParallelSpec>(out, v, r);
}

Schema<DataParallelSpec> schema_of(Tag<DataParallelSpec>) {
  static constexpr Field<DataParallelSpec> fields[] = {
      field<&DataParallelSpec::kind>("kind"),
      field<&DataParallelSpec::bucket_cap_mb>("bucket_cap_mb"),
      field<&DataParallelSpec::first_bucket_mb>("first_bucket_mb"),
      field<&DataParallelSpec::bucket_parameters>("bucket_parameters"),
      field<&DataParallelSpec::overlap_grad_reduce>("overlap_grad_reduce"),
      field<&DataParallelSpec::gradient_as_bucket_view>("gradient_as_bucket_view"),
      field<&DataParallelSpec::grad_reduce_dtype>("grad_reduce_dtype"),
      field<&DataParallelSpec::reshard_after_forward>("reshard_after_forward"),
      field<&DataParallelSpec::forward_prefetch>("forward_prefetch"),
      field<&DataParallelSpec::backward_prefetch>("backward_prefetch"),
      field<&DataParallelSpec::max_inflight_all_gathers>("max_inflight_all_gathers"),
      field<&DataParallelSpec::overlap_param_gather>("overlap_param_gather"),
      field<&DataParallelSpec::fsdp_version>("fsdp_version"),
      field<&DataParallelSpec::fsdp_impl>("fsdp_impl"),
      field<&DataParallelSpec::shard_group>("shard_group")};
  return {fields, ""};
}

Schema<TensorParallelSpec> schema_of(Tag<TensorParallelSpec>) {
  static constexpr Field<TensorParallelSpec> fields[] = {field<&TensorParallelSpec::comm_overlap>("comm_overlap")};
  return {fields, ""};
}

Schema<CollectivesSpec> schema_of(Tag<CollectivesSpec>) {
  static constexpr Field<CollectivesSpec> fields[] = {field<&CollectivesSpec::algorithm>("algorithm"),
                                                      field<&CollectivesSpec::protocol>("protocol")};
  return {fields, ""};
}

Schema<SimulationSpec> schema_of(Tag<SimulationSpec>) {
  static constexpr Field<SimulationSpec> fields[] = {field<&SimulationSpec::ranks>("ranks"),
                                                     field<&SimulationSpec::variation>("variation")};
  return {fields, ""};
}

// The keys a variation entry must give: which GPU or node, and its factor. Left out, the
// entry would mean rank or node 0, or a factor of 1 that changes nothing.
void require_keys(const json::value& v, const Reader& r, std::initializer_list<const char*> keys, const char* what) {
  const json::object* object = v.if_object();
  if (object == nullptr) return;  // the object reader names the type
  for (const char* key : keys)
    if (!object->contains(key)) r.fail(fmt::format("needs \"{}\" ({})", key, what));
}

void read_value(GpuSpeed& out, const json::value& v, const Reader& r) {
  require_keys(v, r, {"rank", "factor"}, "an entry is {\"rank\": R, \"factor\": F}");
  read_value<GpuSpeed>(out, v, r);
}

void read_value(NodeSpeed& out, const json::value& v, const Reader& r) {
  require_keys(v, r, {"node", "factor"}, "an entry is {\"node\": N, \"factor\": F}");
  read_value<NodeSpeed>(out, v, r);
}

// "rank" or "node" is validation's to check: one of them, not both.
void read_value(LinkFactor& out, const json::value& v, const Reader& r) {
  require_keys(v, r, {"factor"}, "an entry is {\"rank\": R} or {\"node\": N} with \"factor\": F");
  read_value<LinkFactor>(out, v, r);
}

// "count" is 1 unless given.
void read_value(FailedNics& out, const json::value& v, const Reader& r) {
  require_keys(v, r, {"node"}, "an entry is {\"node\": N, \"count\": C}");
  read_value<FailedNics>(out, v, r);
}

Schema<GpuSpeed> schema_of(Tag<GpuSpeed>) {
  static constexpr Field<GpuSpeed> fields[] = {field<&GpuSpeed::rank>("rank"), field<&GpuSpeed::factor>("factor")};
  return {fields, ""};
}

Schema<NodeSpeed> schema_of(Tag<NodeSpeed>) {
  static constexpr Field<NodeSpeed> fields[] = {field<&NodeSpeed::node>("node"), field<&NodeSpeed::factor>("factor")};
  return {fields, ""};
}

Schema<LinkFactor> schema_of(Tag<LinkFactor>) {
  static constexpr Field<LinkFactor> fields[] = {field<&LinkFactor::rank>("rank"), field<&LinkFactor::node>("node"),
                                                 field<&LinkFactor::link>("link"),
                                                 field<&LinkFactor::factor>("factor")};
  return {fields, ""};
}

Schema<FailedNics> schema_of(Tag<FailedNics>) {
  static constexpr Field<FailedNics> fields[] = {field<&FailedNics::node>("node"), field<&FailedNics::count>("count")};
  return {fields, ""};
}

Schema<JitterSpec> schema_of(Tag<JitterSpec>) {
  static constexpr Field<JitterSpec> fields[] = {field<&JitterSpec::distribution>("distribution"),
                                                 field<&JitterSpec::sigma>("sigma"), field<&JitterSpec::seed>("seed")};
  return {fields, ""};
}

Schema<VariationSpec> schema_of(Tag<VariationSpec>) {
  static constexpr Field<VariationSpec> fields[] = {
      field<&VariationSpec::gpu_speed>("gpu_speed"), field<&VariationSpec::node_speed>("node_speed"),
      field<&VariationSpec::links>("links"),         field<&VariationSpec::failed_nics>("failed_nics"),
      field<&VariationSpec::jitter>("jitter"),       field<&VariationSpec::background_traffic>("background_traffic")};
  return {fields, ""};
}

Schema<ContextParallelSpec> schema_of(Tag<ContextParallelSpec>) {
  static constexpr Field<ContextParallelSpec> fields[] = {field<&ContextParallelSpec::comm>("comm")};
  return {fields, ""};
}

Schema<Scenario> schema_of(Tag<Scenario>) {
  static constexpr Field<Scenario> fields[] = {field<&Scenario::model>("model"),
                                               field<&Scenario::cluster>("cluster"),
                                               field<&Scenario::parallel>("parallel"),
                                               field<&Scenario::training>("training"),
                                               field<&Scenario::data_parallel>("data_parallel"),
                                               field<&Scenario::tensor_parallel>("tensor_parallel"),
                                               field<&Scenario::collectives>("collectives"),
                                               field<&Scenario::calibration>("calibration"),
                                               field<&Scenario::simulation>("simulation"),
                                               field<&Scenario::context_parallel>("context_parallel")};
  return {fields, "examples"};
}

// ---- entry points ----

void read_scenario(Scenario& out, const json::value& v, const Reader& r) { read_value(out, v, r); }
void read_cluster(ClusterSpec& out, const json::value& v, const Reader& r) { read_value(out, v, r); }
void read_gpu(GpuSpec& out, const json::value& v, const Reader& r) { read_value(out, v, r); }
void read_model(ModelSpec& out, const json::value& v, const Reader& r) { read_value(out, v, r); }

json::value write_scenario(const Scenario& s) { return write_value(s, UnitStyle::bytes); }
json::value write_cluster(const ClusterSpec& c) { return write_value(c, UnitStyle::bytes); }
json::value write_gpu(const GpuSpec& g) { return write_value(g, UnitStyle::bytes); }

}  // namespace stepsim::io
