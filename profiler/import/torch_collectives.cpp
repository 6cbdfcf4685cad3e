#include "profiler/import/torch_collectives.h"

#include <array>
#include <utility>

#include "profiler/trace_event.h"

namespace partrain::profiler {
namespace {

// The vocabulary's own string_view, so a CollectiveEvent can hold it (its op is a view).
std::string_view vocabulary_op(std::string_view op) {
  for (std::string_view known : collective_op_names()) {
    if (known == op) return known;
  }
  return collective_op_names()[0];  // "other"
}

std::string_view vocabulary_dtype(std::string_view dtype) {
  for (std::string_view known : collective_dtype_names()) {
    if (known == dtype) return known;
  }
  return collective_dtype_names()[0];
}

template <size_t N>
std::optional<std::string_view> look_up(
    const std::array<std::pair<std::string_view, std::string_view>, N>& table,
    std::string_view name) {
  for (const auto& [from, to] : table) {
    if (from == name) return vocabulary_op(to);
  }
  return std::nullopt;
}

// c10d's dispatcher ops (torch/csrc/distributed/c10d/Ops.cpp), as the profiler names them.
constexpr std::array<std::pair<std::string_view, std::string_view>, 20> kC10dOps = {{
    {"allreduce_", "all_reduce"},
    {"allreduce_coalesced_", "all_reduce"},
    {"allgather_", "all_gather"},
    {"_allgather_base_", "all_gather"},
    {"allgather_coalesced_", "all_gather"},
    {"allgather_into_tensor_coalesced_", "all_gather"},
    {"reduce_scatter_", "reduce_scatter"},
    {"_reduce_scatter_base_", "reduce_scatter"},
    {"reduce_scatter_tensor_coalesced_", "reduce_scatter"},
    {"broadcast_", "broadcast"},
    {"reduce_", "reduce"},
    {"gather_", "gather"},
    {"scatter_", "scatter"},
    {"alltoall_", "all_to_all"},
    {"alltoall_base_", "all_to_all"},
    {"barrier", "barrier"},
    {"monitored_barrier_", "barrier"},
    {"send", "send"},
    {"recv_", "recv"},
    {"recv_any_source_", "recv"},
}};

// record_param_comms' "Collective name": c10d's op names as the backends pass them.
constexpr std::array<std::pair<std::string_view, std::string_view>, 20> kCollectiveNames = {{
    {"allreduce", "all_reduce"},
    {"allreduce_coalesced", "all_reduce"},
    {"allreduce_sparse", "all_reduce"},
    {"allgather", "all_gather"},
    {"_allgather_base", "all_gather"},
    {"allgather_coalesced", "all_gather"},
    {"allgather_into_tensor_coalesced", "all_gather"},
    {"reduce_scatter", "reduce_scatter"},
    {"_reduce_scatter_base", "reduce_scatter"},
    {"reduce_scatter_tensor_coalesced", "reduce_scatter"},
    {"broadcast", "broadcast"},
    {"reduce", "reduce"},
    {"gather", "gather"},
    {"scatter", "scatter"},
    {"all_to_all", "all_to_all"},
    {"alltoall", "all_to_all"},
    {"alltoall_base", "all_to_all"},
    {"barrier", "barrier"},
    {"send", "send"},
    {"recv", "recv"},
}};

// ProcessGroupGloo's RECORD_FUNCTION names.
constexpr std::array<std::pair<std::string_view, std::string_view>, 13> kGlooAnnotations = {{
    {"all_reduce", "all_reduce"},
    {"sparse_all_reduce", "all_reduce"},
    {"all_gather", "all_gather"},
    {"reduce_scatter", "reduce_scatter"},
    {"broadcast", "broadcast"},
    {"reduce", "reduce"},
    {"gather", "gather"},
    {"scatter", "scatter"},
    {"all_to_all", "all_to_all"},
    {"barrier", "barrier"},
    {"send", "send"},
    {"recv", "recv"},
    {"recvAnySource", "recv"},
}};

// NCCL's API functions (their NVTX range names).
constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kNcclCalls = {{
    {"ncclAllReduce", "all_reduce"},
    {"ncclAllGather", "all_gather"},
    {"ncclReduceScatter", "reduce_scatter"},
    {"ncclBroadcast", "broadcast"},
    {"ncclBcast", "broadcast"},
    {"ncclReduce", "reduce"},
    {"ncclAlltoAll", "all_to_all"},
    {"ncclGather", "gather"},
    {"ncclScatter", "scatter"},
    {"ncclSend", "send"},
    {"ncclRecv", "recv"},
    {"ncclAllToAll", "all_to_all"},
}};

struct DtypeName {
  std::string_view torch;
  std::string_view partrain;
  uint32_t bytes;
};
constexpr std::array<DtypeName, 26> kDtypes = {{
    {"Float", "float", 4},
    {"float", "float", 4},
    {"BFloat16", "bfloat16", 2},
    {"c10::BFloat16", "bfloat16", 2},
    {"Half", "half", 2},
    {"c10::Half", "half", 2},
    {"Double", "double", 8},
    {"double", "double", 8},
    {"Char", "int8", 1},
    {"signed char", "int8", 1},
    {"Byte", "uint8", 1},
    {"unsigned char", "uint8", 1},
    {"Int", "int32", 4},
    {"int", "int32", 4},
    {"UInt32", "uint32", 4},
    {"unsigned int", "uint32", 4},
    {"Long", "int64", 8},
    {"long int", "int64", 8},
    {"long", "int64", 8},
    {"UInt64", "uint64", 8},
    {"unsigned long", "uint64", 8},
    {"Float8_e4m3fn", "fp8_e4m3", 1},
    {"c10::Float8_e4m3fn", "fp8_e4m3", 1},
    {"Float8_e5m2", "fp8_e5m2", 1},
    {"c10::Float8_e5m2", "fp8_e5m2", 1},
    {"Bool", "other", 1},
}};

}  // namespace

std::optional<std::string_view> op_of_c10d_op(std::string_view name) {
  constexpr std::string_view kPrefix = "c10d::";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  return look_up(kC10dOps, name.substr(kPrefix.size()));
}

std::optional<std::string_view> op_of_collective_name(std::string_view name) {
  if (name == "init" || name == "wait" || name.empty()) return std::nullopt;
  if (auto op = look_up(kCollectiveNames, name)) return op;
  return vocabulary_op("other");  // "coalesced", "_allgather_into_tensor_coalesced", newer ops
}

std::optional<std::string_view> op_of_gloo_annotation(std::string_view name) {
  constexpr std::string_view kPrefix = "gloo:";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  return look_up(kGlooAnnotations, name.substr(kPrefix.size()));
}

std::optional<std::string_view> op_of_nccl_call(std::string_view name) {
  return look_up(kNcclCalls, name);
}

bool is_rooted_op(std::string_view op) {
  return op == "broadcast" || op == "reduce" || op == "gather" || op == "scatter";
}

bool ends_together(std::string_view op) {
  return op == "all_reduce" || op == "all_gather" || op == "reduce_scatter" || op == "all_to_all" ||
         op == "barrier";
}

TorchDtype dtype_of_torch_name(std::string_view name) {
  for (const DtypeName& d : kDtypes) {
    if (d.torch == name) return {vocabulary_dtype(d.partrain), d.bytes};
  }
  return {};
}

uint32_t dtype_bytes(std::string_view partrain_dtype) {
  for (const DtypeName& d : kDtypes) {
    if (d.partrain == partrain_dtype && d.partrain != "other") return d.bytes;
  }
  return 0;
}

std::optional<uint64_t> elements_of_shape(const nlohmann::json& dims) {
  if (!dims.is_array()) return std::nullopt;
  uint64_t elements = 1;
  for (const nlohmann::json& d : dims) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) return std::nullopt;
    elements *= static_cast<uint64_t>(d.get<int64_t>());
  }
  return elements;
}

}  // namespace partrain::profiler
