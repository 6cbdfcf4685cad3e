#include "profiler/nccl_tracker.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "core/hash.h"

namespace partrain::profiler {

std::string_view nccl_dtype_name(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "half";
    case ncclFloat32: return "float";
    case ncclFloat64: return "double";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat8e4m3: return "fp8_e4m3";
    case ncclFloat8e5m2: return "fp8_e5m2";
  }
  return "other";
}

size_t nccl_dtype_bytes(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
  }
  return 0;  // a type this ABI does not know: its bytes are unknown, not guessed
}

std::string_view nccl_reduce_op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
  }
  return "other";  // ncclRedOpCreatePreMulSum's user-defined operations
}

std::string_view nccl_result_name(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
  }
  return "ncclUnknownError";
}

std::string nccl_comm_id(std::span<const ncclUniqueId> unique_ids) {
  // The id's bytes are the same on every rank (rank 0 made it and the program broadcast it), so
  // any deterministic hash names the communicator alike everywhere; 64 bits of splitmix64 over
  // 8-byte words make an accidental clash between a job's communicators negligible.
  uint64_t hash = 0x6e63636c;  // "nccl"
  for (const ncclUniqueId& id : unique_ids) {
    for (size_t offset = 0; offset < sizeof(id.internal); offset += sizeof(uint64_t)) {
      uint64_t word = 0;
      std::memcpy(&word, id.internal + offset, sizeof(word));
      hash = splitmix64(hash ^ word);
    }
  }
  return fmt::format("nccl-{:016x}", hash);
}

NcclTracker::NcclTracker(CallSink on_call, CommSink on_comm, int world_rank, int world_size)
    : on_call_(std::move(on_call)),
      on_comm_(std::move(on_comm)),
      world_rank_(world_rank),
      world_size_(world_size) {}

std::vector<int> NcclTracker::world_members(int nranks, int rank) const {
  // Only the world communicator's members are known locally: its ranks are the world's.
  if (world_size_ <= 0 || nranks != world_size_ || rank != world_rank_) return {};
  std::vector<int> members(static_cast<size_t>(nranks));
  std::iota(members.begin(), members.end(), 0);
  return members;
}

std::string NcclTracker::local_comm_id(ncclComm_t comm) const {
  return fmt::format("nccl-r{}-{}", world_rank_, static_cast<void*>(comm));
}

void NcclTracker::register_comm(ncclComm_t comm, NcclCommInfo info) {
  Comm entry;
  entry.info = std::move(info);
  comms_[comm] = std::move(entry);  // a handle NCCL reuses after a destroy starts afresh
}

void NcclTracker::comm_initialised(ncclComm_t comm, std::span<const ncclUniqueId> ids, int nranks,
                                   int rank, std::string_view call, int64_t start_ns,
                                   int64_t end_ns, ncclResult_t result) {
  NcclCommEvent event{nccl_comm_id(ids), call, start_ns, end_ns, result};
  if (result == ncclSuccess || result == ncclInProgress) {
    std::lock_guard lock(mutex_);
    register_comm(comm, {event.comm_id, nranks, rank, world_members(nranks, rank)});
  }
  on_comm_(event);
}

void NcclTracker::comm_initialised_all(ncclComm_t comm, int index, int ndev, int64_t start_ns,
                                       int64_t end_ns, ncclResult_t result) {
  NcclCommEvent event;
  {
    std::lock_guard lock(mutex_);
    // One process made every member, so the id only has to be unique to this process's rank.
    if (index == 0) ++init_all_count_;
    event = {fmt::format("nccl-all-r{}-{}", world_rank_, init_all_count_), "ncclCommInitAll",
             start_ns, end_ns, result};
    if (result == ncclSuccess) register_comm(comm, {event.comm_id, ndev, index, {}});
  }
  on_comm_(event);
}

void NcclTracker::comm_split(ncclComm_t parent, int color, ncclComm_t child, int nranks, int rank,
                             int64_t start_ns, int64_t end_ns, ncclResult_t result) {
  NcclCommEvent event{"", "ncclCommSplit", start_ns, end_ns, result};
  {
    std::lock_guard lock(mutex_);
    auto found = comms_.find(parent);
    // Every member of the parent calls the split in the same order, so the parent's id, the
    // split's index and the colour name the child alike on all of its members.
    const std::string parent_id =
        found != comms_.end() ? found->second.info.id : local_comm_id(parent);
    const int index = found != comms_.end() ? found->second.splits++ : 0;
    event.comm_id = fmt::format("{}.split{}.c{}", parent_id, index, color);
    if (child == nullptr || color == PARTRAIN_NCCL_SPLIT_NOCOLOR) {
      event.comm_id = parent_id;  // this rank is in no child: the split shows on the parent
    } else if (result == ncclSuccess || result == ncclInProgress) {
      register_comm(child, {event.comm_id, nranks, rank, world_members(nranks, rank)});
    }
  }
  on_comm_(event);
}

void NcclTracker::comm_ended(ncclComm_t comm, std::string_view call, int64_t start_ns,
                             int64_t end_ns, ncclResult_t result) {
  NcclCommEvent event{"", call, start_ns, end_ns, result};
  {
    std::lock_guard lock(mutex_);
    auto found = comms_.find(comm);
    if (found == comms_.end()) return;
    event.comm_id = found->second.info.id;
    // ncclCommFinalize leaves the handle valid until ncclCommDestroy.
    if (call != "ncclCommFinalize") comms_.erase(found);
  }
  on_comm_(event);
}

void NcclTracker::comm_adopted(ncclComm_t comm, int nranks, int rank) {
  std::lock_guard lock(mutex_);
  if (comms_.contains(comm)) return;
  register_comm(comm, {local_comm_id(comm), nranks, rank, world_members(nranks, rank)});
}

bool NcclTracker::knows(ncclComm_t comm) const {
  std::lock_guard lock(mutex_);
  return comms_.contains(comm);
}

std::optional<NcclCommInfo> NcclTracker::comm_info(ncclComm_t comm) const {
  std::lock_guard lock(mutex_);
  auto found = comms_.find(comm);
  if (found == comms_.end()) return std::nullopt;
  return found->second.info;
}

void NcclTracker::call_made(const NcclCall& call, uint64_t correlation, int64_t enqueue_ns,
                            int64_t return_ns, ncclResult_t result, uint64_t torch_op) {
  NcclCallRecord record;
  record.correlation = correlation;
  record.torch_op = torch_op;
  record.stream = reinterpret_cast<uintptr_t>(call.stream);
  CollectiveEvent& event = record.event;
  event.op = call.op;
  event.dtype = nccl_dtype_name(call.dtype);
  event.reduce_op = call.reduce_op ? nccl_reduce_op_name(*call.reduce_op) : std::string_view();
  event.count = call.count;
  event.peer = call.peer >= 0 ? call.peer : call.root;
  event.enqueue_ns = enqueue_ns;
  event.start_ns = enqueue_ns;
  event.end_ns = return_ns;
  const bool ok = result == ncclSuccess || result == ncclInProgress;
  event.state = CollectiveState::kCompleted;
  std::optional<NcclCommEvent> rejected;
  {
    std::lock_guard lock(mutex_);
    auto found = comms_.find(call.comm);
    if (found == comms_.end()) {
      register_comm(call.comm, {local_comm_id(call.comm), 0, 0, {}});
      found = comms_.find(call.comm);
    }
    Comm& comm = found->second;
    event.comm_id = comm.info.id;
    event.rank = comm.info.rank;
    event.group_ranks = comm.info.world_ranks;
    event.group_size = comm.info.nranks;
    event.bytes = nccl_tests_size_bytes(call.op, call.count * nccl_dtype_bytes(call.dtype),
                                        comm.info.nranks);
    if (!ok) {
      // A call NCCL rejected never reached the other ranks: it takes no number (the calls after
      // it still match theirs) and is no collective; it shows on the communicator's track.
      rejected = NcclCommEvent{comm.info.id, call.op, enqueue_ns, return_ns, result};
    } else if (call.op == "send") {
      event.seq = comm.send_seq[call.peer]++;
    } else if (call.op == "recv") {
      event.seq = comm.recv_seq[call.peer]++;
    } else {
      event.seq = comm.next_seq++;
    }
    auto group = groups_.find(std::this_thread::get_id());
    if (group != groups_.end() && group->second.depth > 0 && !rejected) {
      event.state = CollectiveState::kEnqueued;  // issued by the outermost ncclGroupEnd
      group->second.calls.push_back(std::move(record));
      return;
    }
  }
  if (rejected) {
    on_comm_(*rejected);
  } else {
    on_call_(record);
  }
}

void NcclTracker::group_started() {
  std::lock_guard lock(mutex_);
  ++groups_[std::this_thread::get_id()].depth;
}

void NcclTracker::group_ended(uint64_t correlation, int64_t return_ns, ncclResult_t result) {
  std::vector<NcclCallRecord> issued;
  {
    std::lock_guard lock(mutex_);
    auto group = groups_.find(std::this_thread::get_id());
    if (group == groups_.end() || group->second.depth == 0) return;  // an unmatched GroupEnd
    if (--group->second.depth > 0) return;
    issued = std::move(group->second.calls);
    groups_.erase(group);
  }
  const bool ok = result == ncclSuccess || result == ncclInProgress;
  for (NcclCallRecord& record : issued) {
    record.correlation = correlation;  // the group's kernels are launched inside ncclGroupEnd
    record.event.end_ns = return_ns;
    record.event.state = ok ? CollectiveState::kCompleted : CollectiveState::kFailed;
    on_call_(record);
  }
}

std::optional<int> NcclTracker::launching_comm_nranks(ncclComm_t comm) const {
  std::lock_guard lock(mutex_);
  auto group = groups_.find(std::this_thread::get_id());
  if (group != groups_.end() && group->second.depth > 0) return std::nullopt;
  auto found = comms_.find(comm);
  return found == comms_.end() ? 0 : found->second.info.nranks;
}

int NcclTracker::open_group_fewest_ranks() const {
  std::lock_guard lock(mutex_);
  int fewest = std::numeric_limits<int>::max();
  auto group = groups_.find(std::this_thread::get_id());
  if (group == groups_.end()) return fewest;
  for (const NcclCallRecord& record : group->second.calls) {
    fewest = std::min(fewest, record.event.group_size);
  }
  return fewest;
}

void NcclTracker::flush_open_groups(int64_t now_ns) {
  std::vector<NcclCallRecord> open;
  {
    std::lock_guard lock(mutex_);
    for (auto& [thread, group] : groups_) {
      for (NcclCallRecord& record : group.calls) open.push_back(std::move(record));
    }
    groups_.clear();
  }
  for (NcclCallRecord& record : open) {
    record.event.end_ns = now_ns;
    on_call_(record);
  }
}

}  // namespace partrain::profiler
