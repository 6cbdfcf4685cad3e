#include <cuda_runtime.h>
#include <nccl.h>
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

namespace partrain::comm {
namespace {

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown-host";
  return name.data();
}

Status nccl_error(ncclResult_t result, const char* call, const char* file, int line, int rank) {
  return failed("{} failed: {} ({}:{}, host {}, rank {}); set NCCL_DEBUG=INFO for NCCL's own "
                "account",
                call, ncclGetErrorString(result), file, line, host_name(), rank);
}

Status cuda_error(cudaError_t error, const char* call, const char* file, int line, int rank) {
  return failed("{} failed: {} ({}:{}, host {}, rank {})", call, cudaGetErrorString(error), file,
                line, host_name(), rank);
}

}  // namespace
}  // namespace partrain::comm

// The CHECK family for this file: on failure, return a Status naming the call, file:line,
// host and rank (`rank_` or the enclosing `rank`).
#define NCCL_CHECK(call, rank)                                                        \
  do {                                                                                \
    ncclResult_t nccl_result_ = (call);                                               \
    if (nccl_result_ != ncclSuccess) {                                                \
      return ::partrain::comm::nccl_error(nccl_result_, #call, __FILE__, __LINE__, rank); \
    }                                                                                 \
  } while (0)
#define CUDA_CHECK(call, rank)                                                      \
  do {                                                                              \
    cudaError_t cuda_error_ = (call);                                               \
    if (cuda_error_ != cudaSuccess) {                                               \
      return ::partrain::comm::cuda_error(cuda_error_, #call, __FILE__, __LINE__, rank); \
    }                                                                               \
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
  NcclWork(ncclComm_t comm, cudaEvent_t event, int device, int rank)
      : comm_(comm), event_(event), device_(device), rank_(rank) {}
  ~NcclWork() override { cudaEventDestroy(event_); }
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  Status wait() override {
    if (done_) return status_;
    status_ = poll_until_done();
    done_ = true;
    return status_;
  }
  bool is_completed() override { return done_ || cudaEventQuery(event_) == cudaSuccess; }

 private:
  Status poll_until_done() {
    CUDA_CHECK(cudaSetDevice(device_), rank_);
    for (;;) {
      const cudaError_t query = cudaEventQuery(event_);
      if (query == cudaSuccess) return Status::ok();
      if (query != cudaErrorNotReady) return cuda_error(query, "cudaEventQuery", __FILE__, __LINE__, rank_);
      ncclResult_t async_error = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(comm_, &async_error), rank_);
      if (async_error != ncclSuccess && async_error != ncclInProgress) {
        return nccl_error(async_error, "NCCL operation (asynchronous error)", __FILE__, __LINE__,
                          rank_);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  ncclComm_t comm_;
  cudaEvent_t event_;
  int device_;
  int rank_;
  bool done_ = false;
  Status status_;
};

class NcclComm final : public Comm {
 public:
  NcclComm(ncclComm_t comm, cudaStream_t stream, int* scratch, int device, int rank, int size,
           std::string id, std::vector<int> world_ranks)
      : comm_(comm),
        stream_(stream),
        scratch_(scratch),
        device_(device),
        rank_(rank),
        size_(size),
        id_(std::move(id)),
        world_ranks_(std::move(world_ranks)) {}

  ~NcclComm() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    ncclCommFinalize(comm_);
    ncclCommDestroy(comm_);
    cudaFree(scratch_);
    cudaStreamDestroy(stream_);
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
      NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_dtype(dtype), nccl_op(op), comm_, stream_),
                 rank_);
      return Status::ok();
    });
  }

  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType dtype,
                               ReduceOp op) override {
    return launch([&]() -> Status {
      NCCL_CHECK(ncclReduceScatter(send, recv, recv_count, nccl_dtype(dtype), nccl_op(op), comm_,
                                   stream_),
                 rank_);
      return Status::ok();
    });
  }

  WorkPtr all_gather_async(const void* send, void* recv, size_t send_count,
                           DType dtype) override {
    return launch([&]() -> Status {
      NCCL_CHECK(ncclAllGather(send, recv, send_count, nccl_dtype(dtype), comm_, stream_), rank_);
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
      NCCL_CHECK(ncclBroadcast(send, recv, count, nccl_dtype(dtype), root, comm_, stream_), rank_);
      return Status::ok();
    });
  }

  WorkPtr all_to_all_async(const void* send, void* recv, size_t count, DType dtype) override {
    return launch([&]() -> Status {
      const size_t block = count * dtype_size(dtype);
      const void* input = send;
      void* staged = nullptr;
      if (send == recv && count > 0) {
        // Grouped send/recv on one buffer would overwrite blocks not yet sent: stage the input,
        // stream-ordered so no host synchronisation is needed.
        CUDA_CHECK(cudaMallocAsync(&staged, block * static_cast<size_t>(size_), stream_), rank_);
        CUDA_CHECK(cudaMemcpyAsync(staged, send, block * static_cast<size_t>(size_),
                                   cudaMemcpyDeviceToDevice, stream_),
                   rank_);
        input = staged;
      }
      NCCL_CHECK(ncclGroupStart(), rank_);
      for (int peer = 0; peer < size_; ++peer) {
        const size_t offset = static_cast<size_t>(peer) * block;
        NCCL_CHECK(ncclSend(static_cast<const uint8_t*>(input) + offset, count, nccl_dtype(dtype),
                            peer, comm_, stream_),
                   rank_);
        NCCL_CHECK(ncclRecv(static_cast<uint8_t*>(recv) + offset, count, nccl_dtype(dtype), peer,
                            comm_, stream_),
                   rank_);
      }
      NCCL_CHECK(ncclGroupEnd(), rank_);
      if (staged != nullptr) CUDA_CHECK(cudaFreeAsync(staged, stream_), rank_);
      return Status::ok();
    });
  }

  WorkPtr barrier_async() override {
    return launch([&]() -> Status {
      NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream_), rank_);
      return Status::ok();
    });
  }

  WorkPtr send_async(const void* buffer, size_t count, DType dtype, int peer) override {
    if (Status s = check_peer("send", peer); !s.is_ok()) return completed_work(s);
    // A lone ncclSend waits in-kernel for the peer's recv; grouped, NCCL can progress both
    // directions of an exchange. (Two ranks that send before they recv should post the
    // pair through one group: see docs/collectives.md.)
    return launch([&]() -> Status {
      NCCL_CHECK(ncclGroupStart(), rank_);
      NCCL_CHECK(ncclSend(buffer, count, nccl_dtype(dtype), peer, comm_, stream_), rank_);
      NCCL_CHECK(ncclGroupEnd(), rank_);
      return Status::ok();
    });
  }

  WorkPtr recv_async(void* buffer, size_t count, DType dtype, int peer) override {
    if (Status s = check_peer("recv", peer); !s.is_ok()) return completed_work(s);
    return launch([&]() -> Status {
      NCCL_CHECK(ncclGroupStart(), rank_);
      NCCL_CHECK(ncclRecv(buffer, count, nccl_dtype(dtype), peer, comm_, stream_), rank_);
      NCCL_CHECK(ncclGroupEnd(), rank_);
      return Status::ok();
    });
  }

  WorkPtr send_recv_async(const void* send, int send_peer, void* recv, int recv_peer,
                          size_t count, DType dtype) override {
    if (Status s = check_peer("send", send_peer); !s.is_ok()) return completed_work(s);
    if (Status s = check_peer("recv", recv_peer); !s.is_ok()) return completed_work(s);
    // One group: NCCL progresses both directions together, so an exchange cannot deadlock.
    return launch([&]() -> Status {
      NCCL_CHECK(ncclGroupStart(), rank_);
      NCCL_CHECK(ncclSend(send, count, nccl_dtype(dtype), send_peer, comm_, stream_), rank_);
      NCCL_CHECK(ncclRecv(recv, count, nccl_dtype(dtype), recv_peer, comm_, stream_), rank_);
      NCCL_CHECK(ncclGroupEnd(), rank_);
      return Status::ok();
    });
  }

  StatusOr<std::unique_ptr<Comm>> split(int color, int key) override;

 private:
  Status check_peer(std::string_view op, int peer) const {
    if (peer >= 0 && peer < size_) return Status::ok();
    return invalid_argument("{} on communicator '{}' (rank {}): peer {} is not a rank of [0, {})",
                            op, id_, rank_, peer, size_);
  }

  // Issues the NCCL calls on the communication stream, then records the event Work waits on.
  template <typename Issue>
  WorkPtr launch(Issue&& issue) {
    std::lock_guard lock(mutex_);  // NCCL calls on one communicator must not interleave
    auto result = [&]() -> StatusOr<cudaEvent_t> {
      CUDA_CHECK(cudaSetDevice(device_), rank_);
      RETURN_IF_ERROR(issue());
      cudaEvent_t event = nullptr;
      CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), rank_);
      CUDA_CHECK(cudaEventRecord(event, stream_), rank_);
      return event;
    }();
    if (!result.is_ok()) return completed_work(result.status());
    return std::make_unique<NcclWork>(comm_, *result, device_, rank_);
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  int* scratch_;  // one device int for barrier()
  int device_;
  int rank_;
  int size_;
  std::string id_;
  std::vector<int> world_ranks_;
  std::mutex mutex_;
  uint64_t next_split_ = 0;
};

// Owns a new NCCL communicator's stream and scratch buffer until NcclComm takes them.
StatusOr<std::unique_ptr<Comm>> wrap(ncclComm_t comm, int device, int rank, int size,
                                     std::string id, std::vector<int> world_ranks) {
  cudaStream_t stream = nullptr;
  // Non-blocking: the communication stream must not serialise with the legacy default stream.
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), rank);
  int* scratch = nullptr;
  CUDA_CHECK(cudaMalloc(&scratch, sizeof(int)), rank);
  CUDA_CHECK(cudaMemset(scratch, 0, sizeof(int)), rank);
  return std::unique_ptr<Comm>(std::make_unique<NcclComm>(
      comm, stream, scratch, device, rank, size, std::move(id), std::move(world_ranks)));
}

StatusOr<std::unique_ptr<Comm>> NcclComm::split(int color, int key) {
  uint64_t split_seq = 0;
  ncclComm_t sub = nullptr;
  {
    std::lock_guard lock(mutex_);
    split_seq = next_split_++;
    CUDA_CHECK(cudaSetDevice(device_), rank_);
    NCCL_CHECK(ncclCommSplit(comm_, color == kNoColor ? NCCL_SPLIT_NOCOLOR : color, key, &sub,
                             nullptr),
               rank_);
  }
  if (color == kNoColor || sub == nullptr) return std::unique_ptr<Comm>();
  int sub_rank = 0;
  int sub_size = 0;
  NCCL_CHECK(ncclCommUserRank(sub, &sub_rank), rank_);
  NCCL_CHECK(ncclCommCount(sub, &sub_size), rank_);
  std::string id = fmt::format("{}/split{}/color{}", id_, split_seq, color);
  ASSIGN_OR_RETURN(std::unique_ptr<Comm> comm,
                   wrap(sub, device_, sub_rank, sub_size, std::move(id), {}));
  // Members' world ranks: NCCL does not say who joined, so gather them over the new group.
  int* gathered = nullptr;
  CUDA_CHECK(cudaMalloc(&gathered, sizeof(int) * static_cast<size_t>(sub_size)), rank_);
  const int mine = world_ranks_[static_cast<size_t>(rank_)];
  CUDA_CHECK(cudaMemcpy(gathered + sub_rank, &mine, sizeof(int), cudaMemcpyHostToDevice), rank_);
  Status status = comm->all_gather(gathered + sub_rank, gathered, 1, DType::kI32);
  std::vector<int> world(static_cast<size_t>(sub_size));
  if (status.is_ok()) {
    CUDA_CHECK(cudaMemcpy(world.data(), gathered, sizeof(int) * world.size(),
                          cudaMemcpyDeviceToHost),
               rank_);
  }
  cudaFree(gathered);
  RETURN_IF_ERROR(status);
  static_cast<NcclComm&>(*comm).world_ranks_ = std::move(world);
  return comm;
}

}  // namespace

StatusOr<std::unique_ptr<Comm>> create_nccl_comm(std::shared_ptr<rendezvous::Store> store,
                                                 int rank, int size, int cuda_device,
                                                 std::string id_prefix) {
  if (size < 1 || rank < 0 || rank >= size) {
    return invalid_argument("nccl communicator: rank {} of world size {} is out of range", rank,
                            size);
  }
  const std::string key = fmt::format("nccl/{}/unique_id", id_prefix);
  ncclUniqueId unique_id{};
  if (rank == 0) {
    NCCL_CHECK(ncclGetUniqueId(&unique_id), rank);
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
  int device_count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&device_count), rank);
  if (cuda_device < 0 || cuda_device >= device_count) {
    return invalid_argument("nccl communicator: rank {} asks for CUDA device {} but this host has "
                            "{}; NCCL needs one GPU per rank (use --backend gloo to share one)",
                            rank, cuda_device, device_count);
  }
  CUDA_CHECK(cudaSetDevice(cuda_device), rank);
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, size, unique_id, rank), rank);
  std::vector<int> world(static_cast<size_t>(size));
  std::iota(world.begin(), world.end(), 0);
  return wrap(comm, cuda_device, rank, size, std::move(id_prefix), std::move(world));
}

}  // namespace partrain::comm
