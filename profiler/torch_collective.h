// PyTorch's collectives in the trace's words: the name a c10d process group gets (its comm_id),
// and a CollectiveEvent from what ProcessGroup's pre/post hooks report (HookOpName, tensors'
// element counts and dtype). Shared by the recorder the Python module feeds
// (share/python/partrain_torch, through libpartrain_inject.so) and by whoever imports PyTorch's
// own traces, so that both name groups and count bytes alike (docs/pytorch.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/collective_event.h"

namespace partrain::profiler {

// A process group as PyTorch knows it: `group_name` is c10d's name ("0" for the default group,
// "1", "2", ... for new_group, a hash for split_group: equal on every member), `group_desc` its
// description ("default_pg", "mesh_dp", "undefined").
// The trace's comm_id: "<desc>:<name>", e.g. "default_pg:0", "mesh_tp:2"; the name alone when
// the description is empty.
std::string torch_comm_id(std::string_view group_name, std::string_view group_desc);

// The trace's op for a c10d HookOpName ("ALLREDUCE", "ALLGATHER_BASE", "SEND", ...), or nullopt
// for what is no collective (SPLIT, NEW_WINDOW, UNKNOWN, names this version does not know).
std::optional<std::string_view> torch_trace_op(std::string_view hook_op);

// The trace's dtype for torch's name of it without "torch." ("float32", "bfloat16", "float16",
// "float8_e4m3fn"); "other" for the rest (bool, int16, complex types).
std::string_view torch_trace_dtype(std::string_view torch_dtype);

// One c10d op as the hooks saw it on this rank.
struct TorchOp {
  std::string_view hook_op;    // HookOpName
  std::string_view dtype;      // torch's dtype name of its first tensor ("" when it has none)
  uint64_t input_elements = 0;   // summed over its input tensors
  uint64_t output_elements = 0;  // summed over its output tensors
  uint32_t element_bytes = 0;
  int root = -1;  // root, or a send/recv's peer, as a group rank; -1 when it has none
  uint64_t seq = 0;  // per group (collectives) or per (group, direction, peer) (p2p)
  int64_t issue_ns = 0;      // the pre hook: the op was called (local monotonic ns)
  int64_t issued_ns = 0;     // the post hook: the backend has it
  int64_t completed_ns = 0;  // its Work completed (0: never seen completing)
  bool failed = false;
};

// A group's members as world ranks (index = group rank) and this rank's place in it.
struct TorchGroup {
  std::string comm_id;
  std::vector<int> ranks;
  int rank = 0;
};

// An op's count and bytes as the trace records them (below), from its tensors' elements as the
// hooks see them (input_elements, output_elements). Shared with the importers, so an imported
// op and a traced one read alike.
struct CollectiveSize {
  uint64_t count = 0;
  uint64_t bytes = 0;
};
CollectiveSize torch_collective_size(std::string_view op, uint64_t input_elements,
                                     uint64_t output_elements, uint32_t element_bytes,
                                     int group_size);

// The op as the trace records it (nullopt when it is no collective): count and bytes follow
// nccl-tests (count = elements of one rank's buffer as NCCL's count argument: the input of
// all_gather and gather, the output of reduce_scatter and scatter, a peer's share of
// all_to_all; bytes = nccl_tests_size_bytes), so a PyTorch all_gather and the built-in
// workloads' one read alike. Times stay local; the tracer moves them onto the timeline.
std::optional<CollectiveEvent> torch_collective_event(const TorchGroup& group, const TorchOp& op);

}  // namespace partrain::profiler
