#include "runner/comm/recording_comm.h"

#include <utility>

#include "core/clock.h"
#include "runner/comm/async_work.h"

namespace partrain::comm {

uint64_t nccl_tests_bytes(std::string_view op, size_t count, DType dtype, int comm_size) {
  return profiler::nccl_tests_size_bytes(op, static_cast<uint64_t>(count) * dtype_size(dtype),
                                         comm_size);
}

using profiler::CollectiveEvent;
using profiler::CollectiveState;

// One operation's entry, updated from whichever thread sees it start or end.
class OpTracker {
 public:
  OpTracker(profiler::FlightRecorder& recorder, uint64_t id, CollectiveEvent event)
      : recorder_(recorder), id_(id), event_(std::move(event)) {}

  void started(int64_t start_ns) {
    CollectiveEvent copy;
    {
      std::lock_guard lock(mutex_);
      if (event_.state != CollectiveState::kEnqueued) return;
      event_.state = CollectiveState::kStarted;
      event_.start_ns = start_ns;
      copy = event_;
    }
    recorder_.update(id_, copy);
  }

  void finished(int64_t end_ns, const Status& status) {
    CollectiveEvent copy;
    {
      std::lock_guard lock(mutex_);
      if (event_.state == CollectiveState::kCompleted || event_.state == CollectiveState::kFailed) {
        return;
      }
      if (event_.state == CollectiveState::kEnqueued) event_.start_ns = end_ns;
      event_.end_ns = end_ns;
      event_.state = status.is_ok() ? CollectiveState::kCompleted : CollectiveState::kFailed;
      copy = event_;
    }
    recorder_.update(id_, copy);
  }

 private:
  profiler::FlightRecorder& recorder_;
  const uint64_t id_;
  std::mutex mutex_;
  CollectiveEvent event_;
};

namespace {

// One backend op and the recorder entries it completes (two for an exchange).
class RecordingWork final : public Work {
 public:
  RecordingWork(WorkPtr inner, std::vector<std::shared_ptr<OpTracker>> trackers)
      : inner_(std::move(inner)), trackers_(std::move(trackers)) {
    if (auto* observable = dynamic_cast<ObservableWork*>(inner_.get())) {
      // The backend reports start and end from its own thread: exact, and without a wait().
      observable_ = true;
      observable->observe(
          [ts = trackers_](int64_t ns) {
            for (const auto& t : ts) t->started(ns);
          },
          [ts = trackers_](int64_t ns, const Status& s) {
            for (const auto& t : ts) t->finished(ns, s);
          });
    } else {
      // A stream-ordered backend (NCCL) is launched at enqueue; its end is seen by wait().
      for (const auto& tracker : trackers_) tracker->started(monotonic_ns());
    }
  }

  Status wait() override {
    Status status = inner_->wait();
    if (!observable_) {
      for (const auto& tracker : trackers_) tracker->finished(monotonic_ns(), status);
    }
    return status;
  }
  bool is_completed() override { return inner_->is_completed(); }

 private:
  WorkPtr inner_;
  std::vector<std::shared_ptr<OpTracker>> trackers_;
  bool observable_ = false;
};

}  // namespace

RecordingComm::RecordingComm(std::unique_ptr<Comm> inner, profiler::FlightRecorder& recorder)
    : inner_(std::move(inner)),
      recorder_(recorder),
      send_seq_(static_cast<size_t>(inner_->size()), 0),
      recv_seq_(static_cast<size_t>(inner_->size()), 0) {}

profiler::CollectiveEvent RecordingComm::describe(std::string_view op, DType dtype,
                                                  std::optional<ReduceOp> reduce, size_t count,
                                                  int peer) const {
  CollectiveEvent event;
  event.comm_id = inner_->id();
  event.op = op;
  event.dtype = dtype_name(dtype);
  event.reduce_op = reduce ? reduce_op_name(*reduce) : std::string_view();
  event.count = count;
  event.bytes = nccl_tests_bytes(op, count, dtype, inner_->size());
  event.peer = peer;
  event.rank = inner_->rank();
  event.group_ranks = inner_->world_ranks();
  return event;
}

std::shared_ptr<OpTracker> RecordingComm::track(CollectiveEvent event, Numbering numbering) {
  const bool peer_valid = event.peer >= 0 && event.peer < inner_->size();
  switch (numbering) {
    case Numbering::kCollective: event.seq = next_seq_++; break;
    // An invalid peer gets no number of its own: the inner comm rejects the op anyway.
    case Numbering::kSend:
      event.seq = peer_valid ? send_seq_[static_cast<size_t>(event.peer)]++ : 0;
      break;
    case Numbering::kRecv:
      event.seq = peer_valid ? recv_seq_[static_cast<size_t>(event.peer)]++ : 0;
      break;
  }
  event.label = label_;
  event.state = CollectiveState::kEnqueued;
  event.enqueue_ns = monotonic_ns();
  const uint64_t id = recorder_.record(event);
  return std::make_shared<OpTracker>(recorder_, id, std::move(event));
}

template <typename Issue>
WorkPtr RecordingComm::record(CollectiveEvent event, Numbering numbering, Issue&& issue) {
  // Numbering and issuing under one lock: the order of numbers is the order of issue.
  std::lock_guard lock(mutex_);
  auto tracker = track(std::move(event), numbering);
  return std::make_unique<RecordingWork>(issue(), std::vector{std::move(tracker)});
}

WorkPtr RecordingComm::all_reduce_async(const void* send, void* recv, size_t count, DType dtype,
                                        ReduceOp op) {
  return record(describe("all_reduce", dtype, op, count, -1), Numbering::kCollective,
                [&] { return inner_->all_reduce_async(send, recv, count, dtype, op); });
}

WorkPtr RecordingComm::reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                            DType dtype, ReduceOp op) {
  return record(describe("reduce_scatter", dtype, op, recv_count, -1), Numbering::kCollective,
                [&] { return inner_->reduce_scatter_async(send, recv, recv_count, dtype, op); });
}

WorkPtr RecordingComm::all_gather_async(const void* send, void* recv, size_t send_count,
                                        DType dtype) {
  return record(describe("all_gather", dtype, std::nullopt, send_count, -1),
                Numbering::kCollective,
                [&] { return inner_->all_gather_async(send, recv, send_count, dtype); });
}

WorkPtr RecordingComm::broadcast_async(const void* send, void* recv, size_t count, DType dtype,
                                       int root) {
  return record(describe("broadcast", dtype, std::nullopt, count, root), Numbering::kCollective,
                [&] { return inner_->broadcast_async(send, recv, count, dtype, root); });
}

WorkPtr RecordingComm::all_to_all_async(const void* send, void* recv, size_t count,
                                        DType dtype) {
  return record(describe("all_to_all", dtype, std::nullopt, count, -1), Numbering::kCollective,
                [&] { return inner_->all_to_all_async(send, recv, count, dtype); });
}

WorkPtr RecordingComm::barrier_async() {
  return record(describe("barrier", DType::kF32, std::nullopt, 0, -1), Numbering::kCollective,
                [&] { return inner_->barrier_async(); });
}

WorkPtr RecordingComm::send_async(const void* buffer, size_t count, DType dtype, int peer) {
  return record(describe("send", dtype, std::nullopt, count, peer), Numbering::kSend,
                [&] { return inner_->send_async(buffer, count, dtype, peer); });
}

WorkPtr RecordingComm::recv_async(void* buffer, size_t count, DType dtype, int peer) {
  return record(describe("recv", dtype, std::nullopt, count, peer), Numbering::kRecv,
                [&] { return inner_->recv_async(buffer, count, dtype, peer); });
}

WorkPtr RecordingComm::send_recv_async(const void* send, int send_peer, void* recv,
                                       int recv_peer, size_t count, DType dtype) {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<OpTracker>> trackers = {
      track(describe("send", dtype, std::nullopt, count, send_peer), Numbering::kSend),
      track(describe("recv", dtype, std::nullopt, count, recv_peer), Numbering::kRecv)};
  return std::make_unique<RecordingWork>(
      inner_->send_recv_async(send, send_peer, recv, recv_peer, count, dtype),
      std::move(trackers));
}

StatusOr<std::unique_ptr<Comm>> RecordingComm::split(int color, int key) {
  ASSIGN_OR_RETURN(std::unique_ptr<Comm> sub, inner_->split(color, key));
  if (!sub) return std::unique_ptr<Comm>();
  return std::unique_ptr<Comm>(std::make_unique<RecordingComm>(std::move(sub), recorder_));
}

void RecordingComm::set_label(std::string label) {
  std::lock_guard lock(mutex_);
  label_ = std::move(label);
}

std::string RecordingComm::label() const {
  std::lock_guard lock(mutex_);
  return label_;
}

OpLabel::OpLabel(Comm& comm, std::string_view label)
    : recording_(dynamic_cast<RecordingComm*>(&comm)) {
  if (recording_ == nullptr) return;
  previous_ = recording_->label();
  recording_->set_label(std::string(label));
}

OpLabel::~OpLabel() {
  if (recording_ != nullptr) recording_->set_label(std::move(previous_));
}

}  // namespace partrain::comm
