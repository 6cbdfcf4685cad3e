// Communicator: the collectives and point-to-point transfers every parallel strategy is built
// from, behind one interface for Gloo (CPU, host memory) and NCCL (GPU, device memory).
// Every operation is asynchronous: it returns a Work whose wait() yields the outcome; the
// blocking forms are enqueue + wait. Operations issued on one communicator run in issue order,
// which must be the same on every member rank (as in NCCL and torch.distributed).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "runner/comm/dtype.h"

namespace partrain::comm {

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation has finished; its buffers may then be reused.
  virtual Status wait() = 0;
  virtual bool is_completed() = 0;
};
using WorkPtr = std::unique_ptr<Work>;

// A Work that is already finished, with this outcome (errors found while enqueueing).
WorkPtr completed_work(Status status = Status::ok());

inline constexpr int kNoColor = -1;  // split(): this rank joins no sub-group

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Identical on every member rank; sub-groups get ids derived from their parent's.
  virtual const std::string& id() const = 0;
  // Member ranks as ranks of the world communicator, in this communicator's rank order.
  virtual const std::vector<int>& world_ranks() const = 0;
  virtual std::string_view backend() const = 0;  // "gloo" or "nccl"

  // In place when send == recv. count is the number of elements of each rank's buffer.
  virtual WorkPtr all_reduce_async(const void* send, void* recv, size_t count, DType dtype,
                                   ReduceOp op) = 0;
  // send holds size() * recv_count elements; rank r receives the reduction of block r.
  virtual WorkPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                       DType dtype, ReduceOp op) = 0;
  // recv holds size() * send_count elements, block r from rank r.
  virtual WorkPtr all_gather_async(const void* send, void* recv, size_t send_count,
                                   DType dtype) = 0;
  // root's send is copied into every rank's recv (send is read on root only).
  virtual WorkPtr broadcast_async(const void* send, void* recv, size_t count, DType dtype,
                                  int root) = 0;
  // Block j of send (count elements) goes to rank j; block i of recv comes from rank i.
  virtual WorkPtr all_to_all_async(const void* send, void* recv, size_t count, DType dtype) = 0;
  virtual WorkPtr barrier_async() = 0;
  // Point to point: the n-th send from a to b pairs with the n-th recv at b from a.
  virtual WorkPtr send_async(const void* buffer, size_t count, DType dtype, int peer) = 0;
  virtual WorkPtr recv_async(void* buffer, size_t count, DType dtype, int peer) = 0;
  // One send and one receive issued together, as a pipeline stage exchanges activations and
  // gradients: NCCL runs them as one group, so two ranks sending to each other cannot
  // deadlock. Recorded as a send and a recv. The default posts both and waits for both.
  virtual WorkPtr send_recv_async(const void* send, int send_peer, void* recv, int recv_peer,
                                  size_t count, DType dtype);

  // Collective over this communicator: ranks with the same color form a sub-group, ordered by
  // (key, rank). kNoColor returns a null communicator. Every member rank must call it.
  virtual StatusOr<std::unique_ptr<Comm>> split(int color, int key) = 0;

  // Blocking forms.
  Status all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
    return all_reduce_async(send, recv, count, dtype, op)->wait();
  }
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                        ReduceOp op) {
    return reduce_scatter_async(send, recv, recv_count, dtype, op)->wait();
  }
  Status all_gather(const void* send, void* recv, size_t send_count, DType dtype) {
    return all_gather_async(send, recv, send_count, dtype)->wait();
  }
  Status broadcast(const void* send, void* recv, size_t count, DType dtype, int root) {
    return broadcast_async(send, recv, count, dtype, root)->wait();
  }
  Status all_to_all(const void* send, void* recv, size_t count, DType dtype) {
    return all_to_all_async(send, recv, count, dtype)->wait();
  }
  Status barrier() { return barrier_async()->wait(); }
  Status send(const void* buffer, size_t count, DType dtype, int peer) {
    return send_async(buffer, count, dtype, peer)->wait();
  }
  Status recv(void* buffer, size_t count, DType dtype, int peer) {
    return recv_async(buffer, count, dtype, peer)->wait();
  }
  Status send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count,
                   DType dtype) {
    return send_recv_async(send, send_peer, recv, recv_peer, count, dtype)->wait();
  }
};

}  // namespace partrain::comm
