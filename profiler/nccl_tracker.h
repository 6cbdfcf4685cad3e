// What a foreign program's NCCL calls mean for the trace: which communicator a handle is (an id
// every member computes alike from the ncclUniqueId or the split it came from), each call's
// per-communicator sequence number, nccl-tests byte count and outcome, and NCCL's group
// semantics (calls between ncclGroupStart and the outermost ncclGroupEnd are issued together at
// the end). Pure bookkeeping, fed by profiler/inject/nccl_interpose.cpp and by tests; it never
// calls NCCL. Thread-safe: group depth is per thread, as NCCL's is.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "profiler/collective_event.h"
#include "profiler/nccl_abi.h"

namespace partrain::profiler {

// One collective or point-to-point call's arguments as the program passed them.
struct NcclCall {
  std::string_view op;  // the trace's op name: all_reduce, send, ...
  ncclComm_t comm = nullptr;
  size_t count = 0;  // the call's count argument (sendcount, recvcount)
  ncclDataType_t dtype = ncclFloat32;
  std::optional<ncclRedOp_t> reduce_op;
  int peer = -1;  // send/recv peer, communicator rank
  int root = -1;  // broadcast/reduce/gather/scatter root, communicator rank
  cudaStream_t stream = nullptr;
};

// A finished call, ready for the trace. `correlation` is the external correlation id the GPU
// work it launched carries: its own, or its group's (pushed around ncclGroupEnd). `torch_op`:
// the PyTorch op (c10d hook window, profiler/torch_nccl_join.h) the call was made in, 0 if none.
struct NcclCallRecord {
  CollectiveEvent event;
  uint64_t correlation = 0;
  uintptr_t stream = 0;
  uint64_t torch_op = 0;
};

// A communicator's creation or end, or a call NCCL rejected, for the communicator's track.
struct NcclCommEvent {
  std::string comm_id;
  std::string_view call;  // ncclCommInitRank, ncclCommSplit, ncclCommDestroy; a rejected op's name
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  ncclResult_t result = ncclSuccess;
};

// What a communicator is, as every member agrees.
struct NcclCommInfo {
  std::string id;
  int nranks = 0;
  int rank = 0;
  std::vector<int> world_ranks;  // members as world ranks, when known (else empty)
};

std::string_view nccl_dtype_name(ncclDataType_t dtype);
size_t nccl_dtype_bytes(ncclDataType_t dtype);
std::string_view nccl_reduce_op_name(ncclRedOp_t op);
std::string_view nccl_result_name(ncclResult_t result);  // "ncclInvalidArgument"
// "nccl-" and 16 hex digits of a hash of the ncclUniqueId(s): equal on every member.
std::string nccl_comm_id(std::span<const ncclUniqueId> unique_ids);

class NcclTracker {
 public:
  using CallSink = std::function<void(const NcclCallRecord&)>;
  using CommSink = std::function<void(const NcclCommEvent&)>;

  // world_size: the job's world size when a launcher said (WORLD_SIZE), 0 if unknown; a
  // communicator of that size whose rank is the process's world rank is taken to be the world.
  NcclTracker(CallSink on_call, CommSink on_comm, int world_rank = -1, int world_size = 0);

  // Communicator lifecycle, after the real call returned `result` (a failed init registers
  // nothing). nranks/rank of split and initAll children are what NCCL reports for them.
  void comm_initialised(ncclComm_t comm, std::span<const ncclUniqueId> ids, int nranks, int rank,
                        std::string_view call, int64_t start_ns, int64_t end_ns,
                        ncclResult_t result);
  void comm_initialised_all(ncclComm_t comm, int index, int ndev, int64_t start_ns,
                            int64_t end_ns, ncclResult_t result);
  void comm_split(ncclComm_t parent, int color, ncclComm_t child, int nranks, int rank,
                  int64_t start_ns, int64_t end_ns, ncclResult_t result);
  void comm_ended(ncclComm_t comm, std::string_view call, int64_t start_ns, int64_t end_ns,
                  ncclResult_t result);
  // A handle never seen created (made by an API this library does not interpose): known from
  // now on under an id of this process only.
  void comm_adopted(ncclComm_t comm, int nranks, int rank);
  bool knows(ncclComm_t comm) const;

  // A collective or p2p call: numbered when it is made, recorded when it returns (or, inside a
  // group, when the outermost ncclGroupEnd returns). `correlation` is the id pushed around it;
  // `torch_op` the PyTorch op whose hook window the calling thread is in (0: none).
  // One NCCL rejects is no collective: it goes to the comm sink with its result.
  void call_made(const NcclCall& call, uint64_t correlation, int64_t enqueue_ns,
                 int64_t return_ns, ncclResult_t result, uint64_t torch_op = 0);
  void group_started();
  // `correlation` is the id pushed around ncclGroupEnd: the group's kernels carry it.
  void group_ended(uint64_t correlation, int64_t return_ns, ncclResult_t result);
  // The ranks of `comm` (0: a handle not known, or whose size NCCL did not say) when a call this
  // thread makes on it now launches its kernels; nullopt inside ncclGroupStart/ncclGroupEnd,
  // where calls launch nothing until the outermost end. One lock, per NCCL call.
  std::optional<int> launching_comm_nranks(ncclComm_t comm) const;
  // The fewest ranks of a communicator among the calls of this thread's open group (those its
  // next ncclGroupEnd issues); INT_MAX when it holds none.
  int open_group_fewest_ranks() const;

  // Group calls still waiting for their ncclGroupEnd (a program that exits inside a group).
  // They are recorded as enqueued, never issued.
  void flush_open_groups(int64_t now_ns);

  std::optional<NcclCommInfo> comm_info(ncclComm_t comm) const;

 private:
  struct Comm {
    NcclCommInfo info;
    uint64_t next_seq = 0;
    std::map<int, uint64_t> send_seq;  // per peer
    std::map<int, uint64_t> recv_seq;
    int splits = 0;  // ncclCommSplit calls made on it: numbers its children
  };
  struct OpenGroup {
    int depth = 0;
    std::vector<NcclCallRecord> calls;
  };

  void register_comm(ncclComm_t comm, NcclCommInfo info);
  // The id of a handle never seen created: this rank's own, as no other member can compute it.
  std::string local_comm_id(ncclComm_t comm) const;
  std::vector<int> world_members(int nranks, int rank) const;

  const CallSink on_call_;
  const CommSink on_comm_;
  const int world_rank_;
  const int world_size_;
  mutable std::mutex mutex_;
  std::unordered_map<ncclComm_t, Comm> comms_;
  std::unordered_map<std::thread::id, OpenGroup> groups_;
  int init_all_count_ = 0;
};

}  // namespace partrain::profiler
