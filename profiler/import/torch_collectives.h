// How PyTorch and NCCL name collectives in the traces they leave: c10d's ops ("c10d::allreduce_",
// record_param_comms' "Collective name" "allreduce"), gloo's annotations ("gloo:all_reduce"),
// NCCL's NVTX ranges ("ncclAllReduce"), and their element types (c10 ScalarType names "Float",
// Kineto's input types "float", "long int"), mapped onto partrain's vocabulary
// (collective_op_names(), collective_dtype_names()).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "profiler/p2p_seq.h"

namespace partrain::profiler {

// partrain's op name ("all_reduce", ...; "other" for a collective partrain has no name for), or
// nullopt when `name` is no collective in that naming (an init or wait record, an ATen op).
std::optional<std::string_view> op_of_c10d_op(std::string_view name);          // "c10d::allreduce_"
std::optional<std::string_view> op_of_collective_name(std::string_view name);  // "allreduce"
std::optional<std::string_view> op_of_gloo_annotation(std::string_view name);  // "gloo:all_reduce"
std::optional<std::string_view> op_of_nccl_call(std::string_view name);        // "ncclAllReduce"

bool is_rooted_op(std::string_view op);  // broadcast, reduce, gather, scatter
// Collectives whose members all finish within about one message latency of each other, so their
// ends can align clocks (a rooted op's root may finish long before the others).
bool ends_together(std::string_view op);

struct TorchDtype {
  std::string_view name = "other";  // partrain's dtype name
  uint32_t bytes = 0;               // element size, 0 when not known
};
// c10 ScalarType names ("Float", "BFloat16", "Long") and Kineto's input types ("float",
// "c10::BFloat16", "long int").
TorchDtype dtype_of_torch_name(std::string_view name);

// Element size of one of partrain's dtype names ("bfloat16": 2); 0 for "other".
uint32_t dtype_bytes(std::string_view partrain_dtype);

// Elements of one tensor's shape ([256], [4, 8]); nullopt when it is no shape.
std::optional<uint64_t> elements_of_shape(const nlohmann::json& dims);

}  // namespace partrain::profiler
