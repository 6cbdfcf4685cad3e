// Work finished by another thread (a communicator's worker): the caller waits on it, and the
// recording wrapper observes when it started and ended without polling. Also completed_work().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "runner/comm/comm.h"

namespace partrain::comm {

// A Work whose start and end can be observed (times are monotonic_ns).
class ObservableWork : public Work {
 public:
  using StartCallback = std::function<void(int64_t start_ns)>;
  using EndCallback = std::function<void(int64_t end_ns, const Status& status)>;
  // Each callback runs once: right away on this thread if that point has passed, otherwise on
  // the thread that reaches it. on_end runs before wait() returns to anyone.
  virtual void observe(StartCallback on_start, EndCallback on_end) = 0;
};

// The state a worker thread and the caller share for one operation.
class WorkState {
 public:
  void mark_started();
  void finish(Status status);

  Status wait();
  bool is_completed();
  void observe(ObservableWork::StartCallback on_start, ObservableWork::EndCallback on_end);

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool started_ = false;
  bool ending_ = false;  // end time and status are set; on_end may be running
  bool done_ = false;    // on_end has run; waiters may go
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  Status status_;
  ObservableWork::StartCallback on_start_;
  ObservableWork::EndCallback on_end_;
};

// The caller's handle on a WorkState.
class AsyncWork final : public ObservableWork {
 public:
  explicit AsyncWork(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}
  Status wait() override { return state_->wait(); }
  bool is_completed() override { return state_->is_completed(); }
  void observe(StartCallback on_start, EndCallback on_end) override {
    state_->observe(std::move(on_start), std::move(on_end));
  }

 private:
  std::shared_ptr<WorkState> state_;
};

}  // namespace partrain::comm
