#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "runner/comm/nccl_comm.h"
#include "runner/comm/nccl_runtime.h"

namespace partrain::comm {
namespace {

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown-host";
  return name.data();
}

Status nccl_error(const NcclRuntime& rt, ncclResult_t result, const char* call, const char* file,
                  int line, int rank) {
  return failed("{} failed: {} ({}:{}, host {}, rank {}); set NCCL_DEBUG=INFO for NCCL's own "
                "account",
                call, rt.ncclGetErrorString(result), file, line, host_name(), rank);
}

Status cuda_error(const NcclRuntime& rt, cudaError_t error, const char* call, const char* file,
                  int line, int rank) {
  return failed("{} failed: {} ({}:{}, host {}, rank {})", call, rt.cudaGetErrorString(error),
                file, line, host_name(), rank);
}

}  // namespace
}  // namespace partrain::comm

// The CHECK family for this file: `rt` is the NcclRuntime the call goes through, `call` the
// member and its arguments. On failure, return a Status naming the call, file:line, host and rank.
#define NCCL_CHECK(rt, call, rank)                                                              \
  do {                                                                                          \
    ncclResult_t nccl_result_ = (rt).call;                                                      \
    if (nccl_result_ != ncclSuccess) {                                                          \
      return ::partrain::comm::nccl_error(rt, nccl_result_, #call, __FILE__, __LINE__, rank);   \
    }                                                                                           \
  } while (0)
#define CUDA_CHECK(rt, call, rank)                                                              \
  do {                                                                                          \
    cudaError_t cuda_error_ = (rt).call;                                                        \
    if (cuda_error_ != cudaSuccess) {                                                           \
      return ::partrain::comm::cuda_error(rt, cuda_error_, #call, __FILE__, __LINE__, rank);    \
    }                                                                                           \
  } while (0)

namespace partrain::comm {
namespace {

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return ncclFloat32;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF16: return ncclFloat16;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;  // NCCL >= 2.10
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

// Finished when an event recorded on the communication stream after the op has fired. The
// wait polls so that NCCL's asynchronous errors (a peer gone, a network failure) surface
// instead of hanging in cudaEventSynchronize.
class NcclWork final : public Work {
 public:
  NcclWork(const NcclRuntime& rt, ncclComm_t comm, cudaEvent_t event, int device, int rank)
      : rt_(rt), comm_(comm), event_(event), device_(device), rank_(rank) {}
  ~NcclWork() override { rt_.cudaEventDestroy(event_); }
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  Status wait() override {
    if (done_) return status_;
    status_ = poll_until_done();
    done_ = true;
    return status_;
  }
  bool is_completed() override { return done_ || rt_.cudaEventQuery(event_) == cudaSuccess; }

 private:
  Status poll_until_done() {
    CUDA_CHECK(rt_, cudaSetDevice(device_), rank_);
    for (;;) {
      const cudaError_t query = rt_.cudaEventQuery(event_);
      if (query == cudaSuccess) return Status::ok();
      if (query != cudaErrorNotReady) {
        return cuda_error(rt_, query, "cudaEventQuery", __FILE__, __LINE__, rank_);
      }
      ncclResult_t async_error = ncclSuccess;
      NCCL_CHECK(rt_, ncclCommGetAsyncError(comm_, &async_error), rank_);
      if (async_error != ncclSuccess && async_error != ncclInProgress) {
        return nccl_error(rt_, async_error, "NCCL operation (asynchronous error)", __FILE__,
                          __LINE__, rank_);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  const NcclRuntime& rt_;
  ncclComm_t comm_;
  cudaEvent_t event_;
  int device_;
  int rank_;
  bool done_ = false;
  Status status_;
};

// What a communicator owns besides its ncclComm_t: the communication stream, the event the
// compute stream's progress is marked with (null without a compute stream), a device int for
// barrier().
struct NcclStreams {
  cudaStream_t communication = nullptr;
  cudaStream_t compute = nullptr;
  cudaEvent_t compute_ready = nullptr;
  int* scratch = nullptr;
};

class NcclComm final : public Comm {
 public:
  NcclComm(const NcclRuntime& rt, ncclComm_t comm, NcclStreams streams, int device, int rank,
           int size, std::string id, std::vector<int> world_ranks)
      : rt_(rt),
        comm_(comm),
        streams_(streams),
        device_(device),
        rank_(rank),
        size_(size),
        id_(std::move(id)),
        world_ranks_(std::move(world_ranks)) {}

  ~NcclComm() override {
    rt_.cudaSetDevice(device_);
    rt_.cudaStreamSynchronize(streams_.communication);
    rt_.ncclCommFinalize(comm_);
    rt_.ncclCommDestroy(comm_);
    rt_.cudaFree(streams_.scratch);
    if (streams_.compute_ready != nullptr) rt_.cudaEventDestroy(streams_.compute_ready);
    rt_.cudaStreamDestroy(streams_.communication);
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& id() const override { return id_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }
  std::string_view backend() const override { return "nccl"; }

  WorkPtr all_reduce_async(const void* send, void* recv, size_t count, DType dtype,
                           ReduceOp op) override {
    return launch([&]() -> Status {
      NCCL_CHECK(rt_, ncclAllReduce(send, recv, count, nccl_dtype(dtype), nccl_op(op), comm_, stream()),
                 rank_);
      return Status::ok();
    });
  }

  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType dtype,
                               ReduceOp op) override {
    return launch([&]() -> Status {
      NCCL_CHECK(rt_,
                 ncclReduceScatter(send, recv, recv_count, nccl_dtype(dtype), nccl_op(op), comm_,
                                stream()),
                 rank_);
      return Status::ok();
    });
  }

  WorkPtr all_gather_async(const void* send, void* recv, size_t send_count,
                           DType dtype) override {
    return launch([&]() -> Status {
      NCCL_CHECK(rt_, ncclAllGather(send, recv, send_count, nccl_dtype(dtype), comm_, stream()),
                 rank_);
      return Status::ok();
    });
  }

  WorkPtr broadcast_async(const void* send, void* recv, size_t count, DType dtype,
                          int root) override {
    if (root < 0 || root >= size_) {
      return completed_work(invalid_argument(
          "broadcast on communicator '{}': root {} is not a rank of [0, {})", id_, root, size_));
    }
    return launch([&]() -> Status {
      NCCL_CHECK(rt_, ncclBroadcast(send, recv, count, nccl_dtype(dtype), root, comm_, stream()),
                 rank_);
      return Status::ok();
    });
  }

  WorkPtr all_to_all_async(const void* send, void* recv, size_t count, DType dtype) override {
    return launch([&]() -> Status {
      const size_t bytes = count * dtype_size(dtype) * static_cast<size_t>(size_);
      const void* input = send;
      void* staged = nullptr;
      if (send == recv && count > 0) {
        // Grouped send/recv on one buffer would overwrite blocks not yet sent: stage the input,
        // stream-ordered so no host synchronisation is needed.
        CUDA_CHECK(rt_, cudaMallocAsync(&staged, bytes, stream()), rank_);
        CUDA_CHECK(rt_,
                   cudaMemcpyAsync(staged, send, bytes, cudaMemcpyDeviceToDevice, stream()),
                   rank_);
        input = staged;
      }
      const size_t block = count * dtype_size(dtype);
      NCCL_CHECK(rt_, ncclGroupStart(), rank_);
      for (int peer = 0; peer < size_; ++peer) {
        const size_t offset = static_cast<size_t>(peer) * block;
        NCCL_CHECK(rt_,
                   ncclSend(static_cast<const uint8_t*>(input) + offset, count, nccl_dtype(dtype),
                        peer, comm_, stream()),
                   rank_);
        NCCL_CHECK(rt_,
                   ncclRecv(static_cast<uint8_t*>(recv) + offset, count, nccl_dtype(dtype), peer,
                        comm_, stream()),
                   rank_);
      }
      NCCL_CHECK(rt_, ncclGroupEnd(), rank_);
      if (staged != nullptr) CUDA_CHECK(rt_, cudaFreeAsync(staged, stream()), rank_);
      return Status::ok();
    });
  }

  WorkPtr barrier_async() override {
    return launch([&]() -> Status {
      NCCL_CHECK(rt_,
                 ncclAllReduce(streams_.scratch, streams_.scratch, 1, ncclInt32, ncclSum, comm_,
                            stream()),
                 rank_);
      return Status::ok();
    });
  }

  WorkPtr send_async(const void* buffer, size_t count, DType dtype, int peer) override {
    if (Status s = check_peer("send", peer); !s.is_ok()) return completed_work(s);
    // A lone ncclSend waits in-kernel for the peer's recv; grouped, NCCL can progress both
    // directions of an exchange. (Two ranks that send before they recv should post the
    // pair through one group: see docs/collectives.md.)
    return launch([&]() -> Status {
      NCCL_CHECK(rt_, ncclGroupStart(), rank_);
      NCCL_CHECK(rt_, ncclSend(buffer, count, nccl_dtype(dtype), peer, comm_, stream()), rank_);
      NCCL_CHECK(rt_, ncclGroupEnd(), rank_);
      return Status::ok();
    });
  }

  WorkPtr recv_async(void* buffer, size_t count, DType dtype, int peer) override {
    if (Status s = check_peer("recv", peer); !s.is_ok()) return completed_work(s);
    return launch([&]() -> Status {
      NCCL_CHECK(rt_, ncclGroupStart(), rank_);
      NCCL_CHECK(rt_, ncclRecv(buffer, count, nccl_dtype(dtype), peer, comm_, stream()), rank_);
      NCCL_CHECK(rt_, ncclGroupEnd(), rank_);
      return Status::ok();
    });
  }

  WorkPtr send_recv_async(const void* send, int send_peer, void* recv, int recv_peer,
                          size_t count, DType dtype) override {
    if (Status s = check_peer("send", send_peer); !s.is_ok()) return completed_work(s);
    if (Status s = check_peer("recv", recv_peer); !s.is_ok()) return completed_work(s);
    // One group: NCCL progresses both directions together, so an exchange cannot deadlock.
    return launch([&]() -> Status {
      NCCL_CHECK(rt_, ncclGroupStart(), rank_);
      NCCL_CHECK(rt_, ncclSend(send, count, nccl_dtype(dtype), send_peer, comm_, stream()), rank_);
      NCCL_CHECK(rt_, ncclRecv(recv, count, nccl_dtype(dtype), recv_peer, comm_, stream()), rank_);
      NCCL_CHECK(rt_, ncclGroupEnd(), rank_);
      return Status::ok();
    });
  }

  StatusOr<std::unique_ptr<Comm>> split(int color, int key) override;

 private:
  cudaStream_t stream() const { return streams_.communication; }

  Status check_peer(std::string_view op, int peer) const {
    if (peer >= 0 && peer < size_) return Status::ok();
    return invalid_argument("{} on communicator '{}' (rank {}): peer {} is not a rank of [0, {})",
                            op, id_, rank_, peer, size_);
  }

  // Orders the communication stream after the compute queued so far, issues the NCCL calls on
  // it, then records the event Work waits on.
  template <typename Issue>
  WorkPtr launch(Issue&& issue) {
    std::lock_guard lock(mutex_);  // NCCL calls on one communicator must not interleave
    auto result = [&]() -> StatusOr<cudaEvent_t> {
      CUDA_CHECK(rt_, cudaSetDevice(device_), rank_);
      if (streams_.compute != nullptr) {
        CUDA_CHECK(rt_, cudaEventRecord(streams_.compute_ready, streams_.compute), rank_);
        CUDA_CHECK(rt_, cudaStreamWaitEvent(stream(), streams_.compute_ready, 0), rank_);
      }
      RETURN_IF_ERROR(issue());
      cudaEvent_t event = nullptr;
      CUDA_CHECK(rt_, cudaEventCreateWithFlags(&event, cudaEventDisableTiming), rank_);
      CUDA_CHECK(rt_, cudaEventRecord(event, stream()), rank_);
      return event;
    }();
    if (!result.is_ok()) return completed_work(result.status());
    return std::make_unique<NcclWork>(rt_, comm_, *result, device_, rank_);
  }

  const NcclRuntime& rt_;
  ncclComm_t comm_;
  NcclStreams streams_;
  int device_;
  int rank_;
  int size_;
  std::string id_;
  std::vector<int> world_ranks_;
  std::mutex mutex_;
  uint64_t next_split_ = 0;
};

// Creates a new NCCL communicator's streams and scratch buffer and hands all of it to NcclComm;
// on failure, what was made so far is released (the ncclComm_t included).
StatusOr<std::unique_ptr<Comm>> wrap(const NcclRuntime& rt, ncclComm_t comm,
                                     cudaStream_t compute_stream, int device, int rank, int size,
                                     std::string id, std::vector<int> world_ranks) {
  NcclStreams streams;
  streams.compute = compute_stream;
  Status status = [&]() -> Status {
    // Non-blocking: the communication stream must not serialise with the legacy default stream.
    CUDA_CHECK(rt, cudaStreamCreateWithFlags(&streams.communication, cudaStreamNonBlocking),
               rank);
    if (compute_stream != nullptr) {
      CUDA_CHECK(rt, cudaEventCreateWithFlags(&streams.compute_ready, cudaEventDisableTiming),
                 rank);
    }
    CUDA_CHECK(rt, cudaMalloc(reinterpret_cast<void**>(&streams.scratch), sizeof(int)), rank);
    CUDA_CHECK(rt, cudaMemset(streams.scratch, 0, sizeof(int)), rank);
    return Status::ok();
  }();
  if (!status.is_ok()) {
    if (streams.scratch != nullptr) rt.cudaFree(streams.scratch);
    if (streams.compute_ready != nullptr) rt.cudaEventDestroy(streams.compute_ready);
    if (streams.communication != nullptr) rt.cudaStreamDestroy(streams.communication);
    rt.ncclCommDestroy(comm);
    return status;
  }
  return std::unique_ptr<Comm>(std::make_unique<NcclComm>(
      rt, comm, streams, device, rank, size, std::move(id), std::move(world_ranks)));
}

StatusOr<std::unique_ptr<Comm>> NcclComm::split(int color, int key) {
  uint64_t split_seq = 0;
  ncclComm_t sub = nullptr;
  {
    std::lock_guard lock(mutex_);
    split_seq = next_split_++;
    CUDA_CHECK(rt_, cudaSetDevice(device_), rank_);
    NCCL_CHECK(rt_,
               ncclCommSplit(comm_, color == kNoColor ? NCCL_SPLIT_NOCOLOR : color, key, &sub,
                          nullptr),
               rank_);
  }
  if (color == kNoColor || sub == nullptr) return std::unique_ptr<Comm>();
  int sub_rank = 0;
  int sub_size = 0;
  NCCL_CHECK(rt_, ncclCommUserRank(sub, &sub_rank), rank_);
  NCCL_CHECK(rt_, ncclCommCount(sub, &sub_size), rank_);
  std::string id = fmt::format("{}/split{}/color{}", id_, split_seq, color);
  ASSIGN_OR_RETURN(std::unique_ptr<Comm> comm, wrap(rt_, sub, streams_.compute, device_, sub_rank,
                                                    sub_size, std::move(id), {}));
  // Members' world ranks: NCCL does not say who joined, so gather them over the new group.
  int* gathered = nullptr;
  CUDA_CHECK(rt_,
             cudaMalloc(reinterpret_cast<void**>(&gathered),
                         sizeof(int) * static_cast<size_t>(sub_size)),
             rank_);
  const int mine = world_ranks_[static_cast<size_t>(rank_)];
  Status status = [&]() -> Status {
    CUDA_CHECK(rt_, cudaMemcpy(gathered + sub_rank, &mine, sizeof(int), cudaMemcpyHostToDevice),
               rank_);
    return comm->all_gather(gathered + sub_rank, gathered, 1, DType::kI32);
  }();
  std::vector<int> world(static_cast<size_t>(sub_size));
  if (status.is_ok()) {
    status = [&]() -> Status {
      CUDA_CHECK(rt_,
                 cudaMemcpy(world.data(), gathered, sizeof(int) * world.size(),
                             cudaMemcpyDeviceToHost),
                 rank_);
      return Status::ok();
    }();
  }
  rt_.cudaFree(gathered);
  RETURN_IF_ERROR(status);
  static_cast<NcclComm&>(*comm).world_ranks_ = std::move(world);
  return comm;
}

}  // namespace

StatusOr<std::unique_ptr<Comm>> create_nccl_comm(std::shared_ptr<rendezvous::Store> store,
                                                 int rank, int size, NcclCommOptions options,
                                                 std::string id_prefix,
                                                 const NcclRuntime& rt) {
  if (size < 1 || rank < 0 || rank >= size) {
    return invalid_argument("nccl communicator: rank {} of world size {} is out of range", rank,
                            size);
  }
  // The device first: a rank without its GPU must say so before rank 0 publishes an id the
  // others would wait on.
  int device_count = 0;
  CUDA_CHECK(rt, cudaGetDeviceCount(&device_count), rank);
  if (options.cuda_device < 0 || options.cuda_device >= device_count) {
    return invalid_argument(
        "nccl communicator: rank {} needs CUDA device {} but this host has {} GPU(s); NCCL runs "
        "one rank per GPU, so start at most {} rank(s) per node, or use --comm gloo (host-staged, "
        "several ranks may share a GPU)",
        rank, options.cuda_device, device_count, device_count);
  }
  CUDA_CHECK(rt, cudaSetDevice(options.cuda_device), rank);
  const std::string key = fmt::format("nccl/{}/unique_id", id_prefix);
  ncclUniqueId unique_id{};
  if (rank == 0) {
    NCCL_CHECK(rt, ncclGetUniqueId(&unique_id), rank);
    RETURN_IF_ERROR(store->set(key, std::string_view(unique_id.internal, sizeof(unique_id))));
  } else {
    ASSIGN_OR_RETURN(std::string value, store->get(key, std::chrono::minutes(5)));
    if (value.size() != sizeof(unique_id)) {
      return failed("nccl communicator '{}': the unique id in the store has {} bytes, expected "
                    "{}; was rank 0 built with a different NCCL?",
                    id_prefix, value.size(), sizeof(unique_id));
    }
    std::memcpy(unique_id.internal, value.data(), sizeof(unique_id));
  }
  ncclComm_t comm = nullptr;
  NCCL_CHECK(rt, ncclCommInitRank(&comm, size, unique_id, rank), rank);
  std::vector<int> world(static_cast<size_t>(size));
  std::iota(world.begin(), world.end(), 0);
  return wrap(rt, comm, static_cast<cudaStream_t>(options.compute_stream), options.cuda_device,
              rank, size, std::move(id_prefix), std::move(world));
}

StatusOr<std::unique_ptr<Comm>> create_nccl_comm(std::shared_ptr<rendezvous::Store> store,
                                                 int rank, int size, NcclCommOptions options,
                                                 std::string id_prefix) {
  return create_nccl_comm(std::move(store), rank, size, options, std::move(id_prefix),
                          linked_nccl_runtime());
}

}  // namespace partrain::comm
