#include "tests/support/standin_nccl/standin_nccl.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>

namespace partrain::testing {
namespace {

constexpr auto kPeerTimeout = std::chrono::seconds(20);  // a test's ranks that never meet fail

// The ranks of one communicator (a ncclCommInitRank id, or one color of a split).
struct Group;

struct StandinStream {
  int id;
};
struct StandinEvent {
  int id;
  bool never_completes = false;
};
struct StandinComm {
  int id;
  std::shared_ptr<Group> group;
  int rank;
  int world_rank;     // the test thread that made it, for faults
  uint64_t seq = 0;   // collectives issued, the key peers meet under
};

// One rank's part of a collective.
struct Contribution {
  std::string op;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t reduce = ncclSum;
  int root = 0;
  int color = 0;
  int key = 0;
  ncclComm_t* split_out = nullptr;
  int world_rank = 0;
};

struct Slot {
  std::vector<Contribution> parts;
  int arrived = 0;
  int left = 0;
  bool done = false;
  ncclResult_t result = ncclSuccess;
};

struct Group {
  explicit Group(int ranks) : size(ranks) {}
  const int size;
  std::mutex mutex;
  std::condition_variable changed;
  int joined = 0;
  std::map<uint64_t, Slot> slots;
};

// A point-to-point transfer waiting in a group's mailbox: sends are copied at ncclGroupEnd.
using MailboxKey = std::tuple<const Group*, int, int>;  // group, from, to

struct PendingP2p {
  bool is_send;
  StandinComm* comm;
  const void* send;
  void* recv;
  size_t bytes;
  int peer;
};

size_t dtype_bytes(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

std::string dtype_name(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    default: return fmt::format("dtype{}", static_cast<int>(dtype));
  }
}

std::string op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return fmt::format("op{}", static_cast<int>(op));
  }
}

template <typename T>
void reduce_into(T* out, const std::vector<const T*>& inputs, size_t count, ncclRedOp_t op) {
  for (size_t i = 0; i < count; ++i) {
    T value = inputs[0][i];
    for (size_t r = 1; r < inputs.size(); ++r) {
      const T x = inputs[r][i];
      switch (op) {
        case ncclMax: value = std::max(value, x); break;
        case ncclMin: value = std::min(value, x); break;
        case ncclProd: value = value * x; break;
        default: value = value + x; break;
      }
    }
    if (op == ncclAvg) value = value / static_cast<T>(inputs.size());
    out[i] = value;
  }
}

// out = op over inputs (each `count` elements); false for a dtype the stand-in cannot reduce.
bool reduce(void* out, const std::vector<const void*>& inputs, size_t count,
            ncclDataType_t dtype, ncclRedOp_t op) {
  auto typed = [&]<typename T>(T*) {
    std::vector<const T*> in;
    for (const void* p : inputs) in.push_back(static_cast<const T*>(p));
    reduce_into(static_cast<T*>(out), in, count, op);
  };
  switch (dtype) {
    case ncclFloat32: typed(static_cast<float*>(nullptr)); return true;
    case ncclFloat64: typed(static_cast<double*>(nullptr)); return true;
    case ncclInt32: typed(static_cast<int32_t*>(nullptr)); return true;
    case ncclInt64: typed(static_cast<int64_t*>(nullptr)); return true;
    default: return false;
  }
}

class State {
 public:
  mutable std::mutex mutex;
  int gpus = 1;
  int next_id = 1;
  std::map<int, std::vector<std::string>> logs;
  std::map<const void*, std::string> names;   // live streams, events, comms
  std::set<const void*> device_buffers;        // live cudaMalloc'd memory
  std::map<std::pair<int, std::string>, int> faults;
  std::map<int, ncclResult_t> broken;
  std::map<std::string, std::shared_ptr<Group>> forming;  // by unique id
  int next_unique_id = 1;
  std::map<MailboxKey, std::deque<std::vector<uint8_t>>> mailbox;
  std::condition_variable mail;
};

State& state() {
  static State s;
  return s;
}

thread_local int bound_rank = -1;
thread_local int group_depth = 0;
thread_local std::vector<PendingP2p> pending;

void log_call(const std::string& line) {
  std::lock_guard lock(state().mutex);
  state().logs[bound_rank].push_back(line);
}

// The fault planned for this rank's next call of `function`, if any (and logs the call).
std::optional<int> take_fault(const std::string& function) {
  std::lock_guard lock(state().mutex);
  auto it = state().faults.find({bound_rank, function});
  if (it == state().faults.end()) return std::nullopt;
  int result = it->second;
  state().faults.erase(it);
  state().logs[bound_rank].push_back(function + " -> injected failure");
  return result;
}

std::string name_of(const void* handle) {
  std::lock_guard lock(state().mutex);
  auto it = state().names.find(handle);
  return it == state().names.end() ? "?" : it->second;
}

template <typename T>
T* make_handle(char prefix, T value) {
  std::lock_guard lock(state().mutex);
  value.id = state().next_id++;
  auto* handle = new T(std::move(value));
  state().names[handle] = fmt::format("{}{}", prefix, handle->id);
  return handle;
}

template <typename T>
bool drop_handle(T* handle) {
  std::lock_guard lock(state().mutex);
  if (state().names.erase(handle) == 0) return false;
  delete handle;
  return true;
}

StandinComm* as_comm(ncclComm_t comm) { return reinterpret_cast<StandinComm*>(comm); }
ncclComm_t as_nccl(StandinComm* comm) { return reinterpret_cast<ncclComm_t>(comm); }

// ---- the collective engine: every rank deposits its part; the last to arrive does the work.

ncclResult_t execute(const Group& group, std::vector<Contribution>& parts) {
  const Contribution& first = parts[0];
  for (const Contribution& p : parts) {
    if (p.op != first.op || p.count != first.count || p.dtype != first.dtype ||
        p.reduce != first.reduce || p.root != first.root) {
      return ncclInvalidUsage;  // ranks disagree: real NCCL would hang or corrupt
    }
  }
  const size_t element = dtype_bytes(first.dtype);
  const size_t size = static_cast<size_t>(group.size);
  if (first.op == "split") return ncclSuccess;  // done by the caller, which makes handles
  if (element == 0) return ncclInvalidArgument;
  const size_t bytes = first.count * element;
  if (first.op == "all_reduce") {
    std::vector<uint8_t> result(bytes);
    std::vector<const void*> inputs;
    for (const Contribution& p : parts) inputs.push_back(p.send);
    if (!reduce(result.data(), inputs, first.count, first.dtype, first.reduce)) {
      return ncclInvalidArgument;
    }
    for (const Contribution& p : parts) std::memcpy(p.recv, result.data(), bytes);
  } else if (first.op == "reduce_scatter") {
    std::vector<std::vector<uint8_t>> results(size, std::vector<uint8_t>(bytes));
    for (size_t r = 0; r < size; ++r) {
      std::vector<const void*> inputs;
      for (const Contribution& p : parts) {
        inputs.push_back(static_cast<const uint8_t*>(p.send) + r * bytes);
      }
      if (!reduce(results[r].data(), inputs, first.count, first.dtype, first.reduce)) {
        return ncclInvalidArgument;
      }
    }
    for (size_t r = 0; r < size; ++r) std::memcpy(parts[r].recv, results[r].data(), bytes);
  } else if (first.op == "all_gather") {
    std::vector<uint8_t> result(bytes * size);
    for (size_t r = 0; r < size; ++r) std::memcpy(result.data() + r * bytes, parts[r].send, bytes);
    for (const Contribution& p : parts) std::memcpy(p.recv, result.data(), result.size());
  } else if (first.op == "broadcast") {
    if (first.root < 0 || first.root >= group.size) return ncclInvalidArgument;
    std::vector<uint8_t> result(bytes);
    std::memcpy(result.data(), parts[static_cast<size_t>(first.root)].send, bytes);
    for (const Contribution& p : parts) std::memcpy(p.recv, result.data(), bytes);
  } else {
    return ncclInternalError;
  }
  return ncclSuccess;
}

// Makes the split's communicators: per color, members ordered by (key, parent rank).
void make_split(std::vector<Contribution>& parts) {
  std::map<int, std::vector<int>> members;
  for (size_t r = 0; r < parts.size(); ++r) {
    if (parts[r].color != NCCL_SPLIT_NOCOLOR) members[parts[r].color].push_back(static_cast<int>(r));
  }
  for (size_t r = 0; r < parts.size(); ++r) {
    if (parts[r].color == NCCL_SPLIT_NOCOLOR) *parts[r].split_out = nullptr;
  }
  for (auto& [color, ranks] : members) {
    std::stable_sort(ranks.begin(), ranks.end(), [&](int a, int b) {
      return parts[static_cast<size_t>(a)].key < parts[static_cast<size_t>(b)].key;
    });
    auto group = std::make_shared<Group>(static_cast<int>(ranks.size()));
    group->joined = group->size;
    for (size_t i = 0; i < ranks.size(); ++i) {
      Contribution& part = parts[static_cast<size_t>(ranks[i])];
      StandinComm* comm = make_handle('C', StandinComm{0, group, static_cast<int>(i),
                                                       part.world_rank});
      *part.split_out = as_nccl(comm);
    }
  }
}

ncclResult_t collective(ncclComm_t handle, Contribution part) {
  StandinComm* comm = as_comm(handle);
  Group& group = *comm->group;
  part.world_rank = bound_rank;
  std::unique_lock lock(group.mutex);
  const uint64_t seq = comm->seq++;
  Slot& slot = group.slots[seq];
  slot.parts.resize(static_cast<size_t>(group.size));
  slot.parts[static_cast<size_t>(comm->rank)] = part;
  if (++slot.arrived == group.size) {
    slot.result = execute(group, slot.parts);
    if (slot.result == ncclSuccess && part.op == "split") make_split(slot.parts);
    slot.done = true;
    group.changed.notify_all();
  } else if (!group.changed.wait_for(lock, kPeerTimeout, [&] { return slot.done; })) {
    return ncclSystemError;  // a peer never came: the test's ranks issued different sequences
  }
  const ncclResult_t result = slot.result;
  if (++slot.left == group.size) group.slots.erase(seq);
  return result;
}

// ---- point-to-point: sends are copied into the peer's mailbox at ncclGroupEnd, before any of
// the group's receives waits, so an exchange cannot deadlock (as NCCL's fused group).

ncclResult_t run_p2p(std::vector<PendingP2p> transfers) {
  auto& s = state();
  for (const PendingP2p& t : transfers) {
    if (!t.is_send) continue;
    std::lock_guard lock(s.mutex);
    const auto* bytes = static_cast<const uint8_t*>(t.send);
    s.mailbox[{t.comm->group.get(), t.comm->rank, t.peer}].emplace_back(bytes, bytes + t.bytes);
    s.mail.notify_all();
  }
  for (const PendingP2p& t : transfers) {
    if (t.is_send) continue;
    std::unique_lock lock(s.mutex);
    auto& queue = s.mailbox[{t.comm->group.get(), t.peer, t.comm->rank}];
    if (!s.mail.wait_for(lock, kPeerTimeout, [&] { return !queue.empty(); })) {
      return ncclSystemError;
    }
    std::vector<uint8_t> message = std::move(queue.front());
    queue.pop_front();
    if (message.size() != t.bytes) return ncclInvalidUsage;  // sizes of a send/recv pair differ
    std::memcpy(t.recv, message.data(), t.bytes);
  }
  return ncclSuccess;
}

ncclResult_t p2p(PendingP2p transfer) {
  if (group_depth > 0) {
    pending.push_back(transfer);
    return ncclSuccess;
  }
  return run_p2p({transfer});
}

// ---- NCCL

const char* get_error_string(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

#define STANDIN_FAULT(function, type) \
  if (auto fault = take_fault(function)) return static_cast<type>(*fault)

ncclResult_t get_unique_id(ncclUniqueId* id) {
  STANDIN_FAULT("ncclGetUniqueId", ncclResult_t);
  std::memset(id, 0, sizeof *id);
  std::string text;
  {
    std::lock_guard lock(state().mutex);
    text = fmt::format("U{}", state().next_unique_id++);
  }
  std::memcpy(id->internal, text.data(), text.size());
  log_call(fmt::format("ncclGetUniqueId() -> {}", text));
  return ncclSuccess;
}

ncclResult_t comm_init_rank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  const std::string text(id.internal);
  log_call(fmt::format("ncclCommInitRank(nranks={}, id={}, rank={})", nranks, text, rank));
  STANDIN_FAULT("ncclCommInitRank", ncclResult_t);
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  std::shared_ptr<Group> group;
  {
    std::lock_guard lock(state().mutex);
    auto& forming = state().forming[text];
    if (!forming) forming = std::make_shared<Group>(nranks);
    group = forming;
  }
  if (group->size != nranks) return ncclInvalidUsage;
  StandinComm* comm = make_handle('C', StandinComm{0, group, rank, bound_rank});
  std::unique_lock lock(group->mutex);
  ++group->joined;
  group->changed.notify_all();
  if (!group->changed.wait_for(lock, kPeerTimeout, [&] { return group->joined == nranks; })) {
    return ncclSystemError;
  }
  *out = as_nccl(comm);
  return ncclSuccess;
}

ncclResult_t comm_split(ncclComm_t comm, int color, int key, ncclComm_t* out, ncclConfig_t*) {
  STANDIN_FAULT("ncclCommSplit", ncclResult_t);
  Contribution part;
  part.op = "split";
  part.color = color;
  part.key = key;
  part.split_out = out;
  const ncclResult_t result = collective(comm, part);
  log_call(fmt::format("ncclCommSplit({}, color={}, key={}) -> {}", name_of(comm), color, key,
                       *out == nullptr ? "none" : name_of(*out)));
  return result;
}

ncclResult_t comm_finalize(ncclComm_t comm) {
  log_call(fmt::format("ncclCommFinalize({})", name_of(comm)));
  return ncclSuccess;
}

ncclResult_t comm_destroy(ncclComm_t comm) {
  log_call(fmt::format("ncclCommDestroy({})", name_of(comm)));
  return drop_handle(as_comm(comm)) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t comm_get_async_error(ncclComm_t comm, ncclResult_t* error) {
  std::lock_guard lock(state().mutex);
  auto it = state().broken.find(as_comm(comm)->world_rank);
  *error = it == state().broken.end() ? ncclSuccess : it->second;
  return ncclSuccess;
}

ncclResult_t comm_user_rank(ncclComm_t comm, int* rank) {
  log_call(fmt::format("ncclCommUserRank({})", name_of(comm)));
  *rank = as_comm(comm)->rank;
  return ncclSuccess;
}

ncclResult_t comm_count(ncclComm_t comm, int* count) {
  log_call(fmt::format("ncclCommCount({})", name_of(comm)));
  *count = as_comm(comm)->group->size;
  return ncclSuccess;
}

ncclResult_t all_reduce(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                        ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  log_call(fmt::format("ncclAllReduce(count={}, {}, {}, {}, {})", count, dtype_name(dtype),
                       op_name(op), name_of(comm), name_of(stream)));
  STANDIN_FAULT("ncclAllReduce", ncclResult_t);
  return collective(comm, {.op = "all_reduce", .send = send, .recv = recv, .count = count,
                           .dtype = dtype, .reduce = op});
}

ncclResult_t reduce_scatter(const void* send, void* recv, size_t recv_count, ncclDataType_t dtype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  log_call(fmt::format("ncclReduceScatter(recvcount={}, {}, {}, {}, {})", recv_count,
                       dtype_name(dtype), op_name(op), name_of(comm), name_of(stream)));
  STANDIN_FAULT("ncclReduceScatter", ncclResult_t);
  return collective(comm, {.op = "reduce_scatter", .send = send, .recv = recv,
                           .count = recv_count, .dtype = dtype, .reduce = op});
}

ncclResult_t all_gather(const void* send, void* recv, size_t send_count, ncclDataType_t dtype,
                        ncclComm_t comm, cudaStream_t stream) {
  log_call(fmt::format("ncclAllGather(sendcount={}, {}, {}, {})", send_count, dtype_name(dtype),
                       name_of(comm), name_of(stream)));
  STANDIN_FAULT("ncclAllGather", ncclResult_t);
  return collective(comm, {.op = "all_gather", .send = send, .recv = recv, .count = send_count,
                           .dtype = dtype});
}

ncclResult_t broadcast(const void* send, void* recv, size_t count, ncclDataType_t dtype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  log_call(fmt::format("ncclBroadcast(count={}, {}, root={}, {}, {})", count, dtype_name(dtype),
                       root, name_of(comm), name_of(stream)));
  STANDIN_FAULT("ncclBroadcast", ncclResult_t);
  return collective(comm, {.op = "broadcast", .send = send, .recv = recv, .count = count,
                           .dtype = dtype, .root = root});
}

ncclResult_t send(const void* buffer, size_t count, ncclDataType_t dtype, int peer,
                  ncclComm_t comm, cudaStream_t stream) {
  log_call(fmt::format("ncclSend(count={}, {}, peer={}, {}, {})", count, dtype_name(dtype), peer,
                       name_of(comm), name_of(stream)));
  STANDIN_FAULT("ncclSend", ncclResult_t);
  return p2p({true, as_comm(comm), buffer, nullptr, count * dtype_bytes(dtype), peer});
}

ncclResult_t recv(void* buffer, size_t count, ncclDataType_t dtype, int peer, ncclComm_t comm,
                  cudaStream_t stream) {
  log_call(fmt::format("ncclRecv(count={}, {}, peer={}, {}, {})", count, dtype_name(dtype), peer,
                       name_of(comm), name_of(stream)));
  STANDIN_FAULT("ncclRecv", ncclResult_t);
  return p2p({false, as_comm(comm), nullptr, buffer, count * dtype_bytes(dtype), peer});
}

ncclResult_t group_start() {
  log_call("ncclGroupStart()");
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t group_end() {
  log_call("ncclGroupEnd()");
  if (group_depth == 0) return ncclInvalidUsage;
  if (--group_depth > 0) return ncclSuccess;
  return run_p2p(std::exchange(pending, {}));
}

// ---- CUDA runtime

const char* cuda_get_error_string(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorNotReady: return "device not ready";
    default: return "unknown error";
  }
}

cudaError_t cuda_get_device_count(int* count) {
  log_call("cudaGetDeviceCount()");
  STANDIN_FAULT("cudaGetDeviceCount", cudaError_t);
  std::lock_guard lock(state().mutex);
  *count = state().gpus;
  return state().gpus == 0 ? cudaErrorNoDevice : cudaSuccess;
}

cudaError_t cuda_set_device(int device) {
  STANDIN_FAULT("cudaSetDevice", cudaError_t);
  std::lock_guard lock(state().mutex);
  // Not logged: the communicator sets its device before each use, which would only add noise.
  return device >= 0 && device < state().gpus ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cuda_stream_create_with_flags(cudaStream_t* stream, unsigned int flags) {
  STANDIN_FAULT("cudaStreamCreateWithFlags", cudaError_t);
  auto* handle = make_handle('S', StandinStream{});
  *stream = reinterpret_cast<cudaStream_t>(handle);
  log_call(fmt::format("cudaStreamCreateWithFlags({}) -> {}",
                       flags == cudaStreamNonBlocking ? "non-blocking" : "default",
                       name_of(handle)));
  return cudaSuccess;
}

cudaError_t cuda_stream_synchronize(cudaStream_t stream) {
  log_call(fmt::format("cudaStreamSynchronize({})", name_of(stream)));
  return cudaSuccess;
}

cudaError_t cuda_stream_destroy(cudaStream_t stream) {
  log_call(fmt::format("cudaStreamDestroy({})", name_of(stream)));
  return drop_handle(reinterpret_cast<StandinStream*>(stream)) ? cudaSuccess
                                                               : cudaErrorInvalidValue;
}

cudaError_t cuda_stream_wait_event(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  log_call(fmt::format("cudaStreamWaitEvent({}, {})", name_of(stream), name_of(event)));
  return cudaSuccess;
}

cudaError_t cuda_event_create_with_flags(cudaEvent_t* event, unsigned int flags) {
  STANDIN_FAULT("cudaEventCreateWithFlags", cudaError_t);
  auto* handle = make_handle('E', StandinEvent{});
  *event = reinterpret_cast<cudaEvent_t>(handle);
  log_call(fmt::format("cudaEventCreateWithFlags({}) -> {}",
                       flags == cudaEventDisableTiming ? "disable-timing" : "default",
                       name_of(handle)));
  return cudaSuccess;
}

cudaError_t cuda_event_record(cudaEvent_t event, cudaStream_t stream) {
  log_call(fmt::format("cudaEventRecord({}, {})", name_of(event), name_of(stream)));
  STANDIN_FAULT("cudaEventRecord", cudaError_t);
  std::lock_guard lock(state().mutex);
  reinterpret_cast<StandinEvent*>(event)->never_completes = state().broken.contains(bound_rank);
  return cudaSuccess;
}

cudaError_t cuda_event_query(cudaEvent_t event) {
  // Not logged: Work::wait polls it.
  return reinterpret_cast<StandinEvent*>(event)->never_completes ? cudaErrorNotReady
                                                                  : cudaSuccess;
}

cudaError_t cuda_event_destroy(cudaEvent_t event) {
  log_call(fmt::format("cudaEventDestroy({})", name_of(event)));
  return drop_handle(reinterpret_cast<StandinEvent*>(event)) ? cudaSuccess
                                                             : cudaErrorInvalidValue;
}

cudaError_t allocate(void** pointer, size_t bytes) {
  *pointer = std::malloc(std::max<size_t>(bytes, 1));
  if (*pointer == nullptr) return cudaErrorMemoryAllocation;
  std::lock_guard lock(state().mutex);
  state().device_buffers.insert(*pointer);
  return cudaSuccess;
}

cudaError_t release(void* pointer) {
  {
    std::lock_guard lock(state().mutex);
    if (state().device_buffers.erase(pointer) == 0) return cudaErrorInvalidValue;
  }
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cuda_malloc(void** pointer, size_t bytes) {
  log_call(fmt::format("cudaMalloc({} B)", bytes));
  STANDIN_FAULT("cudaMalloc", cudaError_t);
  return allocate(pointer, bytes);
}

cudaError_t cuda_free(void* pointer) {
  log_call("cudaFree()");
  return release(pointer);
}

cudaError_t cuda_malloc_async(void** pointer, size_t bytes, cudaStream_t stream) {
  log_call(fmt::format("cudaMallocAsync({} B, {})", bytes, name_of(stream)));
  STANDIN_FAULT("cudaMallocAsync", cudaError_t);
  return allocate(pointer, bytes);
}

cudaError_t cuda_free_async(void* pointer, cudaStream_t stream) {
  log_call(fmt::format("cudaFreeAsync({})", name_of(stream)));
  return release(pointer);
}

cudaError_t cuda_memset(void* pointer, int value, size_t bytes) {
  log_call(fmt::format("cudaMemset({}, {} B)", value, bytes));
  std::memset(pointer, value, bytes);
  return cudaSuccess;
}

std::string copy_kind(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToDevice: return "host-to-device";
    case cudaMemcpyDeviceToHost: return "device-to-host";
    case cudaMemcpyDeviceToDevice: return "device-to-device";
    default: return "other";
  }
}

cudaError_t cuda_memcpy(void* destination, const void* source, size_t bytes, cudaMemcpyKind kind) {
  log_call(fmt::format("cudaMemcpy({} B, {})", bytes, copy_kind(kind)));
  std::memcpy(destination, source, bytes);
  return cudaSuccess;
}

cudaError_t cuda_memcpy_async(void* destination, const void* source, size_t bytes,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  log_call(fmt::format("cudaMemcpyAsync({} B, {}, {})", bytes, copy_kind(kind), name_of(stream)));
  std::memcpy(destination, source, bytes);
  return cudaSuccess;
}

const comm::NcclRuntime kRuntime{
    .ncclGetErrorString = &get_error_string,
    .ncclGetUniqueId = &get_unique_id,
    .ncclCommInitRank = &comm_init_rank,
    .ncclCommSplit = &comm_split,
    .ncclCommFinalize = &comm_finalize,
    .ncclCommDestroy = &comm_destroy,
    .ncclCommGetAsyncError = &comm_get_async_error,
    .ncclCommUserRank = &comm_user_rank,
    .ncclCommCount = &comm_count,
    .ncclAllReduce = &all_reduce,
    .ncclReduceScatter = &reduce_scatter,
    .ncclAllGather = &all_gather,
    .ncclBroadcast = &broadcast,
    .ncclSend = &send,
    .ncclRecv = &recv,
    .ncclGroupStart = &group_start,
    .ncclGroupEnd = &group_end,
    .cudaGetErrorString = &cuda_get_error_string,
    .cudaGetDeviceCount = &cuda_get_device_count,
    .cudaSetDevice = &cuda_set_device,
    .cudaStreamCreateWithFlags = &cuda_stream_create_with_flags,
    .cudaStreamSynchronize = &cuda_stream_synchronize,
    .cudaStreamDestroy = &cuda_stream_destroy,
    .cudaStreamWaitEvent = &cuda_stream_wait_event,
    .cudaEventCreateWithFlags = &cuda_event_create_with_flags,
    .cudaEventRecord = &cuda_event_record,
    .cudaEventQuery = &cuda_event_query,
    .cudaEventDestroy = &cuda_event_destroy,
    .cudaMalloc = &cuda_malloc,
    .cudaFree = &cuda_free,
    .cudaMallocAsync = &cuda_malloc_async,
    .cudaFreeAsync = &cuda_free_async,
    .cudaMemset = &cuda_memset,
    .cudaMemcpy = &cuda_memcpy,
    .cudaMemcpyAsync = &cuda_memcpy_async,
};

}  // namespace

StandinNccl& StandinNccl::instance() {
  static StandinNccl standin;
  return standin;
}

const comm::NcclRuntime& StandinNccl::runtime() const { return kRuntime; }

void StandinNccl::reset(int gpus) {
  std::lock_guard lock(state().mutex);
  auto& s = state();
  s.gpus = gpus;
  s.logs.clear();
  s.faults.clear();
  s.broken.clear();
  s.forming.clear();
  s.mailbox.clear();
  s.next_unique_id = 1;
}

void StandinNccl::bind_thread(int rank) {
  bound_rank = rank;
  group_depth = 0;
  pending.clear();
}

std::vector<std::string> StandinNccl::calls(int rank) const {
  std::lock_guard lock(state().mutex);
  auto it = state().logs.find(rank);
  return it == state().logs.end() ? std::vector<std::string>{} : it->second;
}

cudaStream_t StandinNccl::create_stream() {
  return reinterpret_cast<cudaStream_t>(make_handle('S', StandinStream{}));
}

std::string StandinNccl::handle_name(const void* handle) const { return name_of(handle); }

void StandinNccl::fail_next(int rank, const std::string& function, int result) {
  std::lock_guard lock(state().mutex);
  state().faults[{rank, function}] = result;
}

void StandinNccl::break_rank(int rank, ncclResult_t error) {
  std::lock_guard lock(state().mutex);
  state().broken[rank] = error;
}

int StandinNccl::live_handles() const {
  std::lock_guard lock(state().mutex);
  return static_cast<int>(state().names.size() + state().device_buffers.size());
}

}  // namespace partrain::testing
