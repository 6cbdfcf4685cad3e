// One collective or point-to-point operation as the profiler records it: the row behind the
// `collectives` view and the flight recorder's entries. Built by the recording communicator
// (built-in workloads) and by NCCL interposition (foreign jobs).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace partrain::profiler {

enum class CollectiveState : uint8_t { kEnqueued, kStarted, kCompleted, kFailed };
std::string_view collective_state_name(CollectiveState state);

struct CollectiveEvent {
  std::string comm_id;     // identical on all member ranks
  uint64_t seq = 0;        // per communicator (collectives) or per (communicator, peer) (p2p)
  std::string_view op;     // all_reduce, reduce_scatter, all_gather, broadcast, send, recv, ...
  std::string_view dtype;  // float, bfloat16, half, int32, int64
  std::string_view reduce_op;  // sum, avg, max, min; empty when the op does not reduce
  uint64_t count = 0;          // elements of this rank's buffer (nccl-tests' count)
  uint64_t bytes = 0;          // bytes of the op's size S as nccl-tests counts it
  int peer = -1;  // send/recv peer or broadcast root, as a communicator rank; -1 otherwise
  int rank = 0;                // this rank within the communicator
  std::vector<int> group_ranks;  // members as world ranks, when known
  int group_size = 0;            // members; 0: as many as group_ranks (NCCL interposition knows
                                 // a communicator's size, not always its members' world ranks)
  int64_t enqueue_ns = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  CollectiveState state = CollectiveState::kEnqueued;
  // What NCCL chose for it, where its profiler plugin said (profiler/nccl_plugin_join.h): the
  // algorithm ("Ring", "Tree"...) and protocol ("LL", "LL128", "Simple"), empty when not
  // reported, and the channels it ran on (0: not reported).
  std::string algorithm;
  std::string protocol;
  int channels = 0;
  // What the op is for, where its caller said (comm::OpLabel): "moe_dispatch", "moe_combine";
  // empty otherwise. Stored as the op's slice name, so the timeline and `analyze` tell apart
  // ops of one communicator, op and size that do different jobs.
  std::string label;
};

// The op's size S as nccl-tests reports it, from the bytes of one rank's buffer (its count
// argument x element size): the whole gathered or scattered buffer for all_gather,
// reduce_scatter, all_to_all, gather and scatter (group_size x buffer), 0 for a barrier, the
// buffer otherwise. busbw = S / t x the op's factor (docs/collectives.md).
uint64_t nccl_tests_size_bytes(std::string_view op, uint64_t buffer_bytes, int group_size);

// Whether every member of one of these ops moves the same size, so that sizes that differ are a
// desync: all but all_to_all, whose members' splits are their own (all_to_all_single with split
// sizes, a mixture of experts' token dispatch).
bool members_move_one_size(std::string_view op);

}  // namespace partrain::profiler
