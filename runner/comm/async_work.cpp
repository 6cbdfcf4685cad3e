#include "runner/comm/async_work.h"

#include "core/clock.h"

namespace partrain::comm {

void WorkState::mark_started() {
  ObservableWork::StartCallback callback;
  int64_t start = monotonic_ns();
  {
    std::lock_guard lock(mutex_);
    if (started_) return;
    started_ = true;
    start_ns_ = start;
    callback = on_start_;
  }
  // Never call out while holding the lock: the callback takes the recorder's lock.
  if (callback) callback(start);
}

void WorkState::finish(Status status) {
  mark_started();  // an op that failed before it could start still has a start time
  ObservableWork::EndCallback callback;
  int64_t end = monotonic_ns();
  {
    std::lock_guard lock(mutex_);
    if (ending_) return;
    ending_ = true;
    end_ns_ = end;
    status_ = std::move(status);
    callback = on_end_;
  }
  if (callback) callback(end, status_);  // status_ no longer changes once ending_ is set
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  done_cv_.notify_all();
}

Status WorkState::wait() {
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  return status_;
}

bool WorkState::is_completed() {
  std::lock_guard lock(mutex_);
  return done_;
}

void WorkState::observe(ObservableWork::StartCallback on_start,
                        ObservableWork::EndCallback on_end) {
  bool replay_start = false;
  bool replay_end = false;
  int64_t start = 0;
  int64_t end = 0;
  {
    std::lock_guard lock(mutex_);
    on_start_ = on_start;
    on_end_ = on_end;
    // Points already passed were reached before these callbacks existed: replay them here.
    replay_start = started_;
    replay_end = ending_;
    start = start_ns_;
    end = end_ns_;
  }
  if (replay_start && on_start) on_start(start);
  if (replay_end && on_end) on_end(end, status_);
}

namespace {

class CompletedWork final : public ObservableWork {
 public:
  explicit CompletedWork(Status status) : status_(std::move(status)), time_ns_(monotonic_ns()) {}
  Status wait() override { return status_; }
  bool is_completed() override { return true; }
  void observe(StartCallback on_start, EndCallback on_end) override {
    if (on_start) on_start(time_ns_);
    if (on_end) on_end(time_ns_, status_);
  }

 private:
  Status status_;
  int64_t time_ns_;
};

}  // namespace

WorkPtr completed_work(Status status) { return std::make_unique<CompletedWork>(std::move(status)); }

}  // namespace partrain::comm
