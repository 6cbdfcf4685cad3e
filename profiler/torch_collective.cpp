#include "profiler/torch_collective.h"

#include <algorithm>
#include <array>
#include <utility>

namespace partrain::profiler {
namespace {

// HookOpName (torch/csrc/distributed/c10d/Hooks.hpp, 2.15) -> the trace's op. The *_BASE,
// *_COALESCED and list variants are one operation each, as NCCL runs them.
constexpr std::array<std::pair<std::string_view, std::string_view>, 19> kHookOps = {{
    {"ALLREDUCE", "all_reduce"},
    {"ALLREDUCE_COALESCED", "all_reduce"},
    {"BROADCAST", "broadcast"},
    {"REDUCE", "reduce"},
    {"ALLGATHER", "all_gather"},
    {"ALLGATHER_BASE", "all_gather"},
    {"ALLGATHER_COALESCED", "all_gather"},
    {"ALLGATHER_INTO_TENSOR_COALESCED", "all_gather"},
    {"REDUCE_SCATTER", "reduce_scatter"},
    {"REDUCE_SCATTER_BASE", "reduce_scatter"},
    {"REDUCE_SCATTER_TENSOR_COALESCED", "reduce_scatter"},
    {"ALLTOALL", "all_to_all"},
    {"ALLTOALL_BASE", "all_to_all"},
    {"BARRIER", "barrier"},
    {"SCATTER", "scatter"},
    {"GATHER", "gather"},
    {"SEND", "send"},
    {"RECV", "recv"},
    {"RECVANYSOURCE", "recv"},
}};

constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kDtypes = {{
    {"float32", "float"},
    {"bfloat16", "bfloat16"},
    {"float16", "half"},
    {"float64", "double"},
    {"int8", "int8"},
    {"uint8", "uint8"},
    {"int32", "int32"},
    {"uint32", "uint32"},
    {"int64", "int64"},
    {"uint64", "uint64"},
    {"float8_e4m3fn", "fp8_e4m3"},
    {"float8_e5m2", "fp8_e5m2"},
}};

// Elements of one rank's buffer as NCCL's count argument names it (nccl-tests' count).
uint64_t nccl_count(std::string_view op, uint64_t input_elements, uint64_t output_elements,
                    int group_size) {
  if (op == "all_gather" || op == "gather") return input_elements;
  if (op == "reduce_scatter" || op == "scatter") return output_elements;
  if (op == "all_to_all") return input_elements / static_cast<uint64_t>(std::max(group_size, 1));
  if (op == "barrier") return 0;
  // One buffer: an all_reduce's or broadcast's input (also its output), a send's input, a
  // recv's output.
  return input_elements > 0 ? input_elements : output_elements;
}

}  // namespace

std::string torch_comm_id(std::string_view group_name, std::string_view group_desc) {
  if (group_desc.empty()) return std::string(group_name);
  std::string id;
  id.reserve(group_desc.size() + 1 + group_name.size());
  id.append(group_desc).append(":").append(group_name);
  return id;
}

std::optional<std::string_view> torch_trace_op(std::string_view hook_op) {
  for (const auto& [hook, op] : kHookOps) {
    if (hook == hook_op) return op;
  }
  return std::nullopt;
}

std::string_view torch_trace_dtype(std::string_view torch_dtype) {
  for (const auto& [torch, trace] : kDtypes) {
    if (torch == torch_dtype) return trace;
  }
  return "other";
}

CollectiveSize torch_collective_size(std::string_view op, uint64_t input_elements,
                                     uint64_t output_elements, uint32_t element_bytes,
                                     int group_size) {
  const uint64_t count = nccl_count(op, input_elements, output_elements, group_size);
  // An all_to_all's whole buffer as it is: with split sizes (all_to_all_single's, uneven) it need
  // not be count x group size.
  const uint64_t bytes = op == "all_to_all"
                             ? input_elements * element_bytes
                             : nccl_tests_size_bytes(op, count * element_bytes, group_size);
  return {count, bytes};
}

std::optional<CollectiveEvent> torch_collective_event(const TorchGroup& group, const TorchOp& op) {
  std::optional<std::string_view> trace_op = torch_trace_op(op.hook_op);
  if (!trace_op) return std::nullopt;
  const int group_size = group.ranks.empty() ? 1 : static_cast<int>(group.ranks.size());
  CollectiveEvent event;
  event.comm_id = group.comm_id;
  event.seq = op.seq;
  event.op = *trace_op;
  // A barrier has no tensors; the built-in workloads' barrier says float, with no bytes.
  event.dtype = op.dtype.empty() ? std::string_view("float") : torch_trace_dtype(op.dtype);
  const CollectiveSize size = torch_collective_size(
      *trace_op, op.input_elements, op.output_elements, op.element_bytes, group_size);
  event.count = size.count;
  event.bytes = size.bytes;
  event.peer = op.root;
  event.rank = group.rank;
  event.group_ranks = group.ranks;
  event.group_size = group_size;
  event.enqueue_ns = op.issue_ns;
  event.start_ns = op.issued_ns > 0 ? op.issued_ns : op.issue_ns;
  if (op.failed) {
    event.state = CollectiveState::kFailed;
  } else if (op.completed_ns > 0) {
    event.state = CollectiveState::kCompleted;
  } else {
    event.state = CollectiveState::kStarted;  // issued; the process ended before it completed
  }
  event.end_ns = op.completed_ns >= event.start_ns ? op.completed_ns : event.start_ns;
  return event;
}

}  // namespace partrain::profiler
