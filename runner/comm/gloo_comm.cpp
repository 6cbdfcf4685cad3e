#include "runner/comm/gloo_comm.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <utility>
#include <vector>

#include "runner/comm/async_work.h"
#include "runner/comm/gloo_headers.h"
#include "runner/comm/gloo_ring_reduce_scatter.h"
#include "runner/comm/gloo_store_adapter.h"
#include "runner/comm/reduce_kernels.h"
#include "runner/comm/serial_executor.h"

namespace partrain::comm {
namespace {

// Point-to-point slots: above Gloo's prefixes and the ring reduce-scatter's (0x10); the source
// rank is part of the slot so the two directions of a pair never share one.
constexpr uint64_t kP2pSlotPrefix = 0x11;
constexpr uint64_t kP2pSeqMask = (uint64_t{1} << 40) - 1;

std::chrono::milliseconds to_ms(Nanoseconds timeout) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

bool looks_like_timeout(std::string_view what) {
  return what.find("imed out") != std::string_view::npos ||
         what.find("not set within") != std::string_view::npos;
}

// Gloo's typed setters only use sizeof(T): pick an unsigned type of the element's width.
template <typename Fn>
void with_element_type(DType dtype, Fn&& fn) {
  switch (dtype_size(dtype)) {
    case 2: fn(uint16_t{}); return;
    case 4: fn(uint32_t{}); return;
    default: fn(uint64_t{}); return;
  }
}

// Gloo's TCP device moves every pair's bytes on one progress thread (an epoll loop). Woken by a
// peer's bytes it preempts what runs on its core, often this rank's collective thread in the
// middle of a send, holding the pair's lock, which the progress thread only try-locks, again and
// again, until the scheduler's next tick (3.3 ms at HZ 300); with a rank per core both ranks'
// progress threads spun so at once, and tp 2 of the built-in GPT on 2 cores spent 2.4 ms on a
// 256 KiB all-reduce that takes 0.3 ms alone. Under SCHED_BATCH a thread keeps its fair share
// of the core but does not preempt on wakeup; a thread inherits its creator's policy, so the
// device is created under it. Only a thread under the default policy is switched (and back): a
// caller under another one (chrt -b, -i) has chosen, and its threads inherit that.
std::shared_ptr<gloo::transport::Device> create_tcp_device(const gloo::transport::tcp::attr& attr) {
  const int policy = sched_getscheduler(0);
  sched_param param{};
  const bool switched = policy == SCHED_OTHER && sched_setscheduler(0, SCHED_BATCH, &param) == 0;
  auto restore = [&] {
    if (switched) sched_setscheduler(0, SCHED_OTHER, &param);
  };
  try {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    restore();
    return device;
  } catch (...) {
    restore();
    throw;
  }
}

// What every communicator of one world shares: where to bootstrap and the TCP device.
struct Bootstrap {
  std::shared_ptr<rendezvous::Store> store;
  std::shared_ptr<gloo::transport::Device> device;  // null while the world has one rank
  GlooOptions options;
};

StatusOr<std::shared_ptr<gloo::Context>> connect_full_mesh(const Bootstrap& boot, int rank,
                                                           int size, const std::string& id) {
  try {
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(to_ms(boot.options.timeout));
    GlooStoreAdapter store(boot.store, fmt::format("gloo/{}/", id), boot.options.timeout);
    auto device = boot.device;  // connectFullMesh takes the pointer by non-const reference
    context->connectFullMesh(store, device);
    return std::shared_ptr<gloo::Context>(std::move(context));
  } catch (const std::exception& e) {
    return make_status(looks_like_timeout(e.what()) ? StatusCode::kTimeout
                                                    : StatusCode::kUnavailable,
                       "gloo bootstrap of communicator '{}' (rank {} of {}) failed: {}; check "
                       "that every rank started and can reach the others",
                       id, rank, size, e.what());
  }
}

class GlooComm final : public Comm {
 public:
  GlooComm(Bootstrap boot, std::shared_ptr<gloo::Context> context, int rank, int size,
           std::string id, std::vector<int> world_ranks)
      : boot_(std::move(boot)),
        context_(std::move(context)),
        rank_(rank),
        size_(size),
        id_(std::move(id)),
        world_ranks_(std::move(world_ranks)),
        send_seq_(static_cast<size_t>(size), 0),
        recv_seq_(static_cast<size_t>(size), 0) {}

  ~GlooComm() override {
    // Transfers nobody will complete (a recv whose sender is gone) would hold the waiter thread
    // until the timeout; abort them so destruction is prompt. Queued collectives still run.
    std::lock_guard lock(mutex_);
    for (auto& [id, pending] : pending_p2p_) {
      if (pending.is_send) {
        pending.buffer->abortWaitSend();
      } else {
        pending.buffer->abortWaitRecv();
      }
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& id() const override { return id_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }
  std::string_view backend() const override { return "gloo"; }

  WorkPtr all_reduce_async(const void* send, void* recv, size_t count, DType dtype,
                           ReduceOp op) override {
    return enqueue("all_reduce", [=, this](uint32_t tag) {
      if (count == 0) return;
      if (send != recv) std::memmove(recv, send, count * dtype_size(dtype));
      if (size_ > 1) {
        gloo::AllreduceOptions opts(context_);
        with_element_type(dtype, [&](auto element) {
          using T = decltype(element);
          opts.setOutput(static_cast<T*>(recv), count);
        });
        opts.setReduceFunction(make_reduce_function(dtype, op));
        opts.setTag(tag);
        opts.setTimeout(timeout());
        gloo::allreduce(opts);
      }
      if (op == ReduceOp::kAvg) divide_for_avg(recv, count, dtype, size_);
    });
  }

  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType dtype,
                               ReduceOp op) override {
    return enqueue("reduce_scatter", [=, this](uint32_t tag) {
      if (recv_count == 0) return;
      if (size_ == 1) {
        std::memmove(recv, send, recv_count * dtype_size(dtype));
      } else {
        gloo_ring_reduce_scatter(*context_, send, recv, recv_count, dtype, op, tag, timeout());
      }
      if (op == ReduceOp::kAvg) divide_for_avg(recv, recv_count, dtype, size_);
    });
  }

  WorkPtr all_gather_async(const void* send, void* recv, size_t send_count,
                           DType dtype) override {
    return enqueue("all_gather", [=, this](uint32_t tag) {
      if (send_count == 0) return;
      const size_t block = send_count * dtype_size(dtype);
      // Our block first, then Gloo's in-place form; memmove because send may lie inside recv.
      auto* own = static_cast<uint8_t*>(recv) + static_cast<size_t>(rank_) * block;
      if (own != send) std::memmove(own, send, block);
      if (size_ == 1) return;
      gloo::AllgatherOptions opts(context_);
      with_element_type(dtype, [&](auto element) {
        using T = decltype(element);
        opts.setOutput(static_cast<T*>(recv), send_count * static_cast<size_t>(size_));
      });
      opts.setTag(tag);
      opts.setTimeout(timeout());
      gloo::allgather(opts);
    });
  }

  WorkPtr broadcast_async(const void* send, void* recv, size_t count, DType dtype,
                          int root) override {
    if (root < 0 || root >= size_) {
      return completed_work(invalid_argument(
          "broadcast on communicator '{}': root {} is not a rank of [0, {})", id_, root, size_));
    }
    return enqueue("broadcast", [=, this](uint32_t tag) {
      if (count == 0) return;
      if (rank_ == root && send != recv) std::memmove(recv, send, count * dtype_size(dtype));
      if (size_ == 1) return;
      gloo::BroadcastOptions opts(context_);
      with_element_type(dtype, [&](auto element) {
        using T = decltype(element);
        opts.setOutput(static_cast<T*>(recv), count);
      });
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(timeout());
      gloo::broadcast(opts);
    });
  }

  WorkPtr all_to_all_async(const void* send, void* recv, size_t count, DType dtype) override {
    return enqueue("all_to_all", [=, this](uint32_t tag) {
      if (count == 0) return;
      const size_t total = count * static_cast<size_t>(size_);
      const size_t bytes = total * dtype_size(dtype);
      if (size_ == 1) {
        std::memmove(recv, send, bytes);
        return;
      }
      // Gloo's all-to-all needs distinct input and output; stage an in-place input.
      std::vector<uint8_t> staged;
      const void* input = send;
      if (send == recv) {
        staged.assign(static_cast<const uint8_t*>(send), static_cast<const uint8_t*>(send) + bytes);
        input = staged.data();
      }
      gloo::AlltoallOptions opts(context_);
      with_element_type(dtype, [&](auto element) {
        using T = decltype(element);
        opts.setInput(static_cast<T*>(const_cast<void*>(input)), total);
        opts.setOutput(static_cast<T*>(recv), total);
      });
      opts.setTag(tag);
      opts.setTimeout(timeout());
      gloo::alltoall(opts);
    });
  }

  WorkPtr barrier_async() override {
    return enqueue("barrier", [this](uint32_t tag) {
      if (size_ == 1) return;
      gloo::BarrierOptions opts(context_);
      opts.setTag(tag);
      opts.setTimeout(timeout());
      gloo::barrier(opts);
    });
  }

  WorkPtr send_async(const void* buffer, size_t count, DType dtype, int peer) override {
    return post_p2p(true, const_cast<void*>(buffer), count, dtype, peer);
  }
  WorkPtr recv_async(void* buffer, size_t count, DType dtype, int peer) override {
    return post_p2p(false, buffer, count, dtype, peer);
  }

  StatusOr<std::unique_ptr<Comm>> split(int color, int key) override;

 private:
  std::chrono::milliseconds timeout() const { return to_ms(boot_.options.timeout); }

  Status gloo_error(std::string_view op, const std::exception& e) const {
    return make_status(looks_like_timeout(e.what()) ? StatusCode::kTimeout : StatusCode::kFailed,
                       "gloo {} on communicator '{}' (rank {} of {}, world rank {}) failed: {}; "
                       "a peer may have exited or stalled, check the other ranks' output",
                       op, id_, rank_, size_, world_ranks_[static_cast<size_t>(rank_)], e.what());
  }

  // Runs body on the worker thread after every collective issued before it.
  WorkPtr enqueue(std::string_view op, std::function<void(uint32_t tag)> body) {
    auto state = std::make_shared<WorkState>();
    std::lock_guard lock(mutex_);  // tags must follow queue order
    const uint32_t tag = next_tag_++;
    worker_.post([this, state, op, tag, body = std::move(body)] {
      state->mark_started();
      Status status;
      try {
        body(tag);
      } catch (const std::exception& e) {  // Gloo throws; nothing may escape the worker
        status = gloo_error(op, e);
      }
      state->finish(std::move(status));
    });
    return std::make_unique<AsyncWork>(std::move(state));
  }

  WorkPtr post_p2p(bool is_send, void* buffer, size_t count, DType dtype, int peer);

  struct PendingTransfer {
    std::shared_ptr<gloo::transport::UnboundBuffer> buffer;
    bool is_send = false;
  };

  Bootstrap boot_;
  std::shared_ptr<gloo::Context> context_;  // null when size == 1: nothing to connect
  int rank_;
  int size_;
  std::string id_;
  std::vector<int> world_ranks_;

  std::mutex mutex_;  // guards everything below up to the executors
  uint32_t next_tag_ = 0;
  uint64_t next_split_ = 0;
  std::vector<uint64_t> send_seq_;  // per peer: sends issued to it
  std::vector<uint64_t> recv_seq_;  // per peer: recvs issued from it
  uint64_t next_transfer_ = 0;
  std::map<uint64_t, PendingTransfer> pending_p2p_;

  // Declared last so they are joined first, while everything their tasks touch still exists.
  SerialExecutor p2p_waiter_;  // waits for posted transfers, in posting order
  SerialExecutor worker_;      // runs collectives, in issue order
};

WorkPtr GlooComm::post_p2p(bool is_send, void* buffer, size_t count, DType dtype, int peer) {
  const std::string_view op = is_send ? "send" : "recv";
  if (peer < 0 || peer >= size_) {
    return completed_work(invalid_argument("{} on communicator '{}' (rank {}): peer {} is not a "
                                           "rank of [0, {})",
                                           op, id_, rank_, peer, size_));
  }
  if (peer == rank_) {
    return completed_work(invalid_argument("{} on communicator '{}' (rank {}): peer is this rank; "
                                           "Gloo connects distinct ranks only, copy locally",
                                           op, id_, rank_));
  }
  uint64_t seq = 0;
  {
    std::lock_guard lock(mutex_);
    seq = (is_send ? send_seq_ : recv_seq_)[static_cast<size_t>(peer)]++;
  }
  if (count == 0) return completed_work();
  // The n-th send from a to b and the n-th recv at b from a compute the same slot.
  const int source = is_send ? rank_ : peer;
  const uint64_t slot =
      (kP2pSlotPrefix << 56) | (static_cast<uint64_t>(source) << 40) | (seq & kP2pSeqMask);

  std::shared_ptr<gloo::transport::UnboundBuffer> transfer;
  try {
    transfer = context_->createUnboundBuffer(buffer, count * dtype_size(dtype));
    // Posting does not block: two ranks sending to each other both get here, then both wait.
    if (is_send) {
      transfer->send(peer, slot);
    } else {
      transfer->recv(peer, slot);
    }
  } catch (const std::exception& e) {
    return completed_work(gloo_error(op, e));
  }
  auto state = std::make_shared<WorkState>();
  state->mark_started();
  uint64_t transfer_id = 0;
  {
    std::lock_guard lock(mutex_);
    transfer_id = next_transfer_++;
    pending_p2p_.emplace(transfer_id, PendingTransfer{transfer, is_send});
  }
  p2p_waiter_.post([this, state, transfer, transfer_id, is_send, op, peer] {
    Status status;
    try {
      const bool done = is_send ? transfer->waitSend(timeout()) : transfer->waitRecv(timeout());
      if (!done) {
        status = failed("gloo {} on communicator '{}' (rank {}, peer {}) was aborted: the "
                        "communicator was destroyed first",
                        op, id_, rank_, peer);
      }
    } catch (const std::exception& e) {
      status = gloo_error(op, e);
    }
    {
      std::lock_guard lock(mutex_);
      pending_p2p_.erase(transfer_id);
    }
    state->finish(std::move(status));
  });
  return std::make_unique<AsyncWork>(std::move(state));
}

StatusOr<std::unique_ptr<Comm>> make_gloo_comm(Bootstrap boot, int rank, int size, std::string id,
                                               std::vector<int> world_ranks) {
  std::shared_ptr<gloo::Context> context;
  if (size > 1) {
    ASSIGN_OR_RETURN(context, connect_full_mesh(boot, rank, size, id));
  }
  return std::unique_ptr<Comm>(std::make_unique<GlooComm>(
      std::move(boot), std::move(context), rank, size, std::move(id), std::move(world_ranks)));
}

StatusOr<std::unique_ptr<Comm>> GlooComm::split(int color, int key) {
  // Every member learns every (color, key) through the parent, in the parent's issue order.
  const std::array<int64_t, 2> mine = {color, key};
  std::vector<int64_t> all(2 * static_cast<size_t>(size_));
  Status gathered = all_gather(mine.data(), all.data(), 2, DType::kI64);
  if (!gathered.is_ok()) return gathered.with_context("while splitting");
  uint64_t split_seq = 0;
  {
    std::lock_guard lock(mutex_);
    split_seq = next_split_++;
  }
  if (color == kNoColor) return std::unique_ptr<Comm>();
  if (color < 0) {
    return invalid_argument("split of communicator '{}': color {} is negative (only kNoColor "
                            "= {} may be)",
                            id_, color, kNoColor);
  }
  std::vector<int> members;  // parent ranks, ordered by (key, parent rank)
  for (int r = 0; r < size_; ++r) {
    if (all[2 * static_cast<size_t>(r)] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[2 * static_cast<size_t>(a) + 1] < all[2 * static_cast<size_t>(b) + 1];
  });
  std::vector<int> world;
  int new_rank = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == rank_) new_rank = static_cast<int>(i);
    world.push_back(world_ranks_[static_cast<size_t>(members[i])]);
  }
  // Same (parent, split number, color) on every member, hence the same id and store keys.
  std::string id = fmt::format("{}/split{}/color{}", id_, split_seq, color);
  return make_gloo_comm(boot_, new_rank, static_cast<int>(members.size()), std::move(id),
                        std::move(world));
}

}  // namespace

StatusOr<std::unique_ptr<Comm>> create_gloo_comm(std::shared_ptr<rendezvous::Store> store,
                                                 int rank, int size, GlooOptions options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return invalid_argument("gloo communicator: rank {} of world size {} is out of range", rank,
                            size);
  }
  if (!store && size > 1) return invalid_argument("gloo communicator: no rendezvous store");
  Bootstrap boot{std::move(store), nullptr, std::move(options)};
  if (size > 1) {
    try {
      gloo::transport::tcp::attr attr;
      attr.hostname = boot.options.hostname;
      boot.device = create_tcp_device(attr);
    } catch (const std::exception& e) {
      return unavailable("gloo: cannot open a TCP device on '{}' (rank {}): {}; pass an address "
                         "of this host that the other ranks can reach",
                         boot.options.hostname, rank, e.what());
    }
  }
  std::vector<int> world(static_cast<size_t>(size));
  std::iota(world.begin(), world.end(), 0);
  std::string id = boot.options.id_prefix;
  return make_gloo_comm(std::move(boot), rank, size, std::move(id), std::move(world));
}

}  // namespace partrain::comm
