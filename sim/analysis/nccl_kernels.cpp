// Name rules for communication kernels and collectives; see nccl_kernels.hpp.
#include "analysis/nccl_kernels.hpp"

#include <array>
#include <cctype>
#include <initializer_list>
#include <optional>
#include <string>

namespace stepsim::analysis {
namespace {

// Lower-case letters and digits only: "_reduce_scatter_base" -> "reducescatterbase".
std::string squeeze(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) out.push_back(static_cast<char>(std::tolower(u)));
  }
  return out;
}

struct OpPrefix {
  std::string_view prefix;
  CollOp op;
};

// Longest prefixes first: "reducescatter" before "reduce".
constexpr std::array kOpPrefixes{OpPrefix{"allreduce", CollOp::allreduce},
                                 OpPrefix{"allgather", CollOp::allgather},
                                 OpPrefix{"reducescatter", CollOp::reducescatter},
                                 OpPrefix{"broadcast", CollOp::broadcast},
                                 OpPrefix{"bcast", CollOp::broadcast},
                                 OpPrefix{"alltoall", CollOp::alltoall},
                                 OpPrefix{"sendrecv", CollOp::sendrecv},
                                 OpPrefix{"send", CollOp::sendrecv},
                                 OpPrefix{"recv", CollOp::sendrecv},
                                 OpPrefix{"reduce", CollOp::reduce}};

CollOp op_of_squeezed(std::string_view s) {
  for (const OpPrefix& p : kOpPrefixes)
    if (s.starts_with(p.prefix)) return p.op;
  return CollOp::other;
}

// The word after "ncclKernel_" / "ncclDevKernel_" up to the next '_' or '('.
std::string_view kernel_word(std::string_view name) {
  for (std::string_view lead : {std::string_view("ncclDevKernel_"), std::string_view("ncclKernel_")}) {
    const std::size_t at = name.find(lead);
    if (at == std::string_view::npos) continue;
    std::string_view rest = name.substr(at + lead.size());
    return rest.substr(0, rest.find_first_of("_("));
  }
  return {};
}

struct DtypeSize {
  std::string_view name;
  int bytes;
};

constexpr std::array kDtypes{DtypeSize{"float", 4},   DtypeSize{"float32", 4},  DtypeSize{"half", 2},
                             DtypeSize{"float16", 2}, DtypeSize{"bfloat16", 2}, DtypeSize{"double", 8},
                             DtypeSize{"float64", 8}, DtypeSize{"int", 4},      DtypeSize{"int32", 4},
                             DtypeSize{"long", 8},    DtypeSize{"int64", 8},    DtypeSize{"short", 2},
                             DtypeSize{"int16", 2},   DtypeSize{"char", 1},     DtypeSize{"byte", 1},
                             DtypeSize{"int8", 1},    DtypeSize{"uint8", 1},    DtypeSize{"bool", 1}};

struct GroupWord {
  std::string_view word;
  CommKind kind;
};

// Whole words (split at non-letters) that name a parallelism. "etp" is the simulator's expert
// tensor parallelism communicator (parallelism/communicators.cpp), whose gathers and scatters it
// counts as ep, as Megatron-Core's EXPERT_TENSOR_PARALLEL_GROUP is below.
constexpr std::array kGroupWords{
    GroupWord{"tp", CommKind::tp},      GroupWord{"tensor", CommKind::tp}, GroupWord{"cp", CommKind::cp},
    GroupWord{"context", CommKind::cp}, GroupWord{"ep", CommKind::ep},     GroupWord{"expert", CommKind::ep},
    GroupWord{"etp", CommKind::ep},     GroupWord{"moe", CommKind::ep},    GroupWord{"dp", CommKind::dp},
    GroupWord{"data", CommKind::dp},    GroupWord{"ddp", CommKind::dp},    GroupWord{"fsdp", CommKind::fsdp},
    GroupWord{"shard", CommKind::fsdp}, GroupWord{"pp", CommKind::pp},     GroupWord{"pipeline", CommKind::pp},
    GroupWord{"pipe", CommKind::pp}};

std::optional<CommKind> kind_of_word(std::string_view word) {
  for (const GroupWord& g : kGroupWords)
    if (word == g.word) return g.kind;
  return std::nullopt;
}

// The first word that names a parallelism; a data-parallel group whose words also say it is
// sharded is FSDP's: PyTorch's DeviceMesh describes its groups as "mesh_<dimension>"
// (torch/distributed/device_mesh.py), and torchtitan shards with FSDP over "dp_shard" or its
// flattening with context parallelism "dp_shard_cp" (parallel_dims.py), replicating over
// "dp_replicate" (HSDP's all-reduce, dp) and reducing the loss over "dp" or "dp_cp".
CommKind kind_of_words(std::string_view text) {
  std::optional<CommKind> first;
  bool sharded = false;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && !std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::size_t j = i;
    while (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
    const std::string word = squeeze(text.substr(i, j - i));
    const std::optional<CommKind> kind = kind_of_word(word);
    if (!first) first = kind;
    sharded = sharded || word == "shard";
    i = j;
  }
  if (first == CommKind::dp && sharded) return CommKind::fsdp;
  return first.value_or(CommKind::other);
}

struct MegatronGroup {
  std::string_view description;
  CommKind kind;
};

// Megatron-Core's process groups by the group_desc parallel_state.py gives them, each the kind
// of the simulator's communicator that runs the same collectives (parallelism/communicators.cpp),
// so that compare puts measured and predicted time alike: the experts' gradient reduction
// (EXPERT_DATA_PARALLEL_GROUP and its partial groups) and the distributed optimizer's groups
// are dp, as the simulator's "dp experts" and dp are; expert tensor parallelism's gathers and
// scatters ep, as the simulator's "etp" is; the tied embedding's all-reduce pp. Groups that
// span several kinds, on which the simulator runs nothing (FP8 amax reductions, gradient
// norms), are other. The rest (TENSOR_MODEL_PARALLEL_GROUP, CONTEXT_PARALLEL_GROUP,
// PIPELINE_MODEL_PARALLEL_GROUP, DATA_PARALLEL_GROUP...) their words name.
constexpr std::array kMegatronGroups{MegatronGroup{"EXPERT_DATA_PARALLEL_GROUP", CommKind::dp},
                                     MegatronGroup{"INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP", CommKind::dp},
                                     MegatronGroup{"INTER_PARTIAL_EXPERT_DATA_PARALLEL_GROUP", CommKind::dp},
                                     MegatronGroup{"INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP", CommKind::dp},
                                     MegatronGroup{"INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP", CommKind::dp},
                                     MegatronGroup{"INTER_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP", CommKind::dp},
                                     MegatronGroup{"EXPERT_MODEL_PARALLEL_GROUP", CommKind::ep},
                                     MegatronGroup{"EXPERT_TENSOR_PARALLEL_GROUP", CommKind::ep},
                                     MegatronGroup{"EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", CommKind::ep},
                                     MegatronGroup{"EMBEDDING_GROUP", CommKind::pp},
                                     MegatronGroup{"POSITION_EMBEDDING_GROUP", CommKind::pp},
                                     MegatronGroup{"MODEL_PARALLEL_GROUP", CommKind::other},
                                     MegatronGroup{"EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP", CommKind::other},
                                     MegatronGroup{"TENSOR_AND_DATA_PARALLEL_GROUP", CommKind::other},
                                     MegatronGroup{"TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", CommKind::other},
                                     MegatronGroup{"TENSOR_AND_CONTEXT_PARALLEL_GROUP", CommKind::other}};

std::optional<CommKind> megatron_group_kind(std::string_view description) {
  for (const MegatronGroup& g : kMegatronGroups)
    if (description == g.description) return g.kind;
  return std::nullopt;
}

bool starts_with_any(std::string_view s, std::initializer_list<std::string_view> prefixes) {
  for (std::string_view p : prefixes)
    if (s.starts_with(p)) return true;
  return false;
}

bool contains_any(std::string_view s, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts)
    if (s.find(p) != std::string_view::npos) return true;
  return false;
}

// HTA's ComputeKernelGroupingPattern, which it inverts: the names that are not computation.
bool hta_not_compute(std::string_view name, std::string_view first_line) {
  if (starts_with_any(name, {"nccl", "Stream Wait Event", "runFunction", "hip", "job_exe", "packet", "pe_exe",
                             "cpum_exe_subgraph", "hccl", "collective_subgraph_execution"}))
    return true;
  if (contains_any(first_line, {"Memcpy", "Memset", "dma", "Sync"})) return true;
  return first_line.starts_with("cuda") && first_line.find("LaunchKernel", 4) != std::string_view::npos;
}

}  // namespace

HtaKernelType hta_kernel_type(std::string_view name) {
  const std::string_view first_line = name.substr(0, name.find('\n'));
  if (starts_with_any(name, {"nccl", "hip", "hccl"}) || first_line.find("ncclKernel") != std::string_view::npos)
    return HtaKernelType::communication;
  if (starts_with_any(name, {"Memcpy", "Memset", "hipMemcpy", "hipMemset", "dma"})) return HtaKernelType::memory;
  return hta_not_compute(name, first_line) ? HtaKernelType::other : HtaKernelType::computation;
}

bool is_comm_kernel(std::string_view name) {
  return name.starts_with("nccl") || name.find("ncclKernel") != std::string_view::npos;
}

bool is_memory_name(std::string_view name) {
  return name.find("Memcpy") != std::string_view::npos || name.find("Memset") != std::string_view::npos;
}

CollOp coll_op_of(std::string_view collective_name, std::string_view kernel_name) {
  if (!collective_name.empty()) {
    const CollOp op = op_of_squeezed(squeeze(collective_name));
    if (op != CollOp::other) return op;
  }
  return op_of_squeezed(squeeze(kernel_word(kernel_name)));
}

int dtype_bytes(std::string_view dtype) {
  const std::size_t colon = dtype.rfind(':');  // "c10::Half"
  const std::string key = squeeze(colon == std::string_view::npos ? dtype : dtype.substr(colon + 1));
  for (const DtypeSize& d : kDtypes)
    if (key == d.name) return d.bytes;
  if (key.starts_with("float8")) return 1;
  return 0;
}

CommKind kind_of_group(std::string_view name, std::string_view description) {
  if (const std::optional<CommKind> megatron = megatron_group_kind(description)) return *megatron;
  const CommKind k = kind_of_words(description);
  return k != CommKind::other ? k : kind_of_words(name);
}

}  // namespace stepsim::analysis
