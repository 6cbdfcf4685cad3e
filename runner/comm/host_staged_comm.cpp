#include "runner/comm/host_staged_comm.h"

#include <functional>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "runner/comm/async_work.h"

namespace partrain::comm {
namespace {

// The host buffers of one operation and what to copy back once the host operation is done.
struct Staging {
  std::vector<uint8_t> send;
  std::vector<uint8_t> recv;
  void* device_recv = nullptr;  // null: nothing comes back (send, barrier)
};

// Finishes the host operation, then copies its result to the device. Observable when the host
// Work is, so the recording wrapper still sees the operation's own start and end.
class StagedWork final : public ObservableWork {
 public:
  StagedWork(WorkPtr host, std::unique_ptr<Staging> staging, runner::Device& device)
      : host_(std::move(host)), staging_(std::move(staging)), device_(device) {}

  Status wait() override {
    if (done_) return status_;
    status_ = host_->wait();
    if (status_.is_ok() && staging_->device_recv != nullptr) {
      device_.upload(staging_->device_recv, staging_->recv.data(), staging_->recv.size());
    }
    staging_.reset();
    done_ = true;
    if (on_end_) on_end_(monotonic_ns(), status_);
    return status_;
  }
  // A result is copied back in wait(), so until then only an operation with nothing to bring
  // back (a send) is complete when its host operation is.
  bool is_completed() override {
    return done_ || (staging_->device_recv == nullptr && host_->is_completed());
  }

  // The host operation's own start and end where it reports them (Gloo's do); otherwise its
  // start is now and its end the end of wait().
  void observe(StartCallback on_start, EndCallback on_end) override {
    if (auto* observable = dynamic_cast<ObservableWork*>(host_.get())) {
      observable->observe(std::move(on_start), std::move(on_end));
      return;
    }
    if (on_start) on_start(monotonic_ns());
    if (done_ && on_end) {
      on_end(monotonic_ns(), status_);
    } else {
      on_end_ = std::move(on_end);
    }
  }

 private:
  WorkPtr host_;
  std::unique_ptr<Staging> staging_;
  runner::Device& device_;
  bool done_ = false;
  Status status_;
  EndCallback on_end_;  // only when the host operation cannot be observed
};

class HostStagedComm final : public Comm {
 public:
  HostStagedComm(std::unique_ptr<Comm> host, runner::Device& device)
      : host_(std::move(host)), device_(device) {}

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& id() const override { return host_->id(); }
  const std::vector<int>& world_ranks() const override { return host_->world_ranks(); }
  std::string_view backend() const override { return host_->backend(); }

  WorkPtr all_reduce_async(const void* send, void* recv, size_t count, DType dtype,
                           ReduceOp op) override {
    auto s = stage(send, count * dtype_size(dtype), nullptr, 0);
    // In place on the host: the result overwrites the staged input (a moved vector keeps its
    // buffer, which the host operation holds).
    WorkPtr work = host_->all_reduce_async(s->send.data(), s->send.data(), count, dtype, op);
    s->recv = std::move(s->send);
    s->device_recv = recv;
    return finish(std::move(work), std::move(s));
  }

  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType dtype,
                               ReduceOp op) override {
    const size_t bytes = recv_count * dtype_size(dtype);
    auto s = stage(send, bytes * ranks(), recv, bytes);
    WorkPtr work =
        host_->reduce_scatter_async(s->send.data(), s->recv.data(), recv_count, dtype, op);
    return finish(std::move(work), std::move(s));
  }

  WorkPtr all_gather_async(const void* send, void* recv, size_t send_count,
                           DType dtype) override {
    const size_t bytes = send_count * dtype_size(dtype);
    auto s = stage(send, bytes, recv, bytes * ranks());
    WorkPtr work = host_->all_gather_async(s->send.data(), s->recv.data(), send_count, dtype);
    return finish(std::move(work), std::move(s));
  }

  WorkPtr broadcast_async(const void* send, void* recv, size_t count, DType dtype,
                          int root) override {
    const size_t bytes = count * dtype_size(dtype);
    // send is read on the root only (and may be null elsewhere).
    auto s = stage(rank() == root ? send : nullptr, bytes, recv, bytes);
    WorkPtr work = host_->broadcast_async(s->send.data(), s->recv.data(), count, dtype, root);
    return finish(std::move(work), std::move(s));
  }

  WorkPtr all_to_all_async(const void* send, void* recv, size_t count, DType dtype) override {
    const size_t bytes = count * dtype_size(dtype) * ranks();
    auto s = stage(send, bytes, recv, bytes);
    WorkPtr work = host_->all_to_all_async(s->send.data(), s->recv.data(), count, dtype);
    return finish(std::move(work), std::move(s));
  }

  WorkPtr barrier_async() override { return host_->barrier_async(); }

  WorkPtr send_async(const void* buffer, size_t count, DType dtype, int peer) override {
    auto s = stage(buffer, count * dtype_size(dtype), nullptr, 0);
    WorkPtr work = host_->send_async(s->send.data(), count, dtype, peer);
    return finish(std::move(work), std::move(s));
  }

  WorkPtr recv_async(void* buffer, size_t count, DType dtype, int peer) override {
    auto s = stage(nullptr, 0, buffer, count * dtype_size(dtype));
    WorkPtr work = host_->recv_async(s->recv.data(), count, dtype, peer);
    return finish(std::move(work), std::move(s));
  }

  WorkPtr send_recv_async(const void* send, int send_peer, void* recv, int recv_peer,
                          size_t count, DType dtype) override {
    const size_t bytes = count * dtype_size(dtype);
    auto s = stage(send, bytes, recv, bytes);
    WorkPtr work = host_->send_recv_async(s->send.data(), send_peer, s->recv.data(), recv_peer,
                                          count, dtype);
    return finish(std::move(work), std::move(s));
  }

  StatusOr<std::unique_ptr<Comm>> split(int color, int key) override {
    ASSIGN_OR_RETURN(std::unique_ptr<Comm> sub, host_->split(color, key));
    if (sub == nullptr) return sub;
    return stage_through_host(std::move(sub), device_);
  }

 private:
  size_t ranks() const { return static_cast<size_t>(host_->size()); }

  // Host buffers for an operation: the device input copied in now (it must be complete when
  // the operation is issued, as for NCCL), room for the result.
  std::unique_ptr<Staging> stage(const void* device_send, size_t send_bytes, void* device_recv,
                                 size_t recv_bytes) {
    auto s = std::make_unique<Staging>();
    s->send.resize(send_bytes);
    if (device_send != nullptr && send_bytes > 0) {
      device_.download(s->send.data(), device_send, send_bytes);
    }
    s->recv.resize(recv_bytes);
    s->device_recv = recv_bytes > 0 ? device_recv : nullptr;
    return s;
  }

  WorkPtr finish(WorkPtr host_work, std::unique_ptr<Staging> staging) {
    return std::make_unique<StagedWork>(std::move(host_work), std::move(staging), device_);
  }

  std::unique_ptr<Comm> host_;
  runner::Device& device_;
};

}  // namespace

std::unique_ptr<Comm> stage_through_host(std::unique_ptr<Comm> host, runner::Device& device) {
  return std::make_unique<HostStagedComm>(std::move(host), device);
}

}  // namespace partrain::comm
