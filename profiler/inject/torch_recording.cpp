#include "profiler/inject/torch_recording.h"

#include <utility>

#include "core/clock.h"

namespace partrain::profiler::inject {
namespace {

thread_local TorchWindow t_window;

}  // namespace

TorchRecording::TorchRecording(RankTracer& tracer, TorchNcclJoin::Deliver deliver)
    : tracer_(tracer), join_(std::move(deliver)) {}

int TorchRecording::add_group(TorchGroup group) {
  std::lock_guard lock(groups_mutex_);
  if (groups_.size() >= kMaxGroups) return -1;
  groups_.push_back(std::move(group));
  return static_cast<int>(groups_.size() - 1);
}

std::optional<CollectiveEvent> TorchRecording::event_of(int group, const TorchOp& op) {
  std::lock_guard lock(groups_mutex_);
  if (group < 0 || static_cast<size_t>(group) >= groups_.size()) {
    if (!warned_unknown_group_.exchange(true)) {
      tracer_.emit(StatEvent{"torch_records_without_group", tracer_.rank(), 1,
                             StatSeverity::kDataLoss,
                             "PyTorch collectives reported for a process group the recorder "
                             "never registered (left out of the trace)"});
    }
    return std::nullopt;
  }
  return torch_collective_event(groups_[static_cast<size_t>(group)], op);
}

std::optional<CollectiveEvent> TorchRecording::collective(int group, const TorchOp& op,
                                                          uint64_t window) {
  std::optional<CollectiveEvent> event = event_of(group, op);
  if (!event) return std::nullopt;
  // An op a final dump already holds, unfinished, is in the trace through that dump.
  (void)flight_.finished(group, *event,
                         [&](const CollectiveEvent& done) { join_.torch_op(window, done); });
  return event;
}

void TorchRecording::called(int group, const TorchOp& op) {
  std::optional<CollectiveEvent> event = event_of(group, op);
  if (!event) return;
  event->state = CollectiveState::kEnqueued;  // the backend does not have it yet
  flight_.issued(group, *event);
}

void TorchRecording::issued(int group, const TorchOp& op, FlightRecorder::Timing timing) {
  std::optional<CollectiveEvent> event = event_of(group, op);
  if (event) flight_.issued(group, *event, timing);
}

void TorchRecording::waited(int group, const TorchOp& op) {
  const int64_t now_ns = monotonic_ns();
  std::optional<CollectiveEvent> event = event_of(group, op);
  if (event) flight_.waited(group, *event, now_ns);
}

const TorchWindow& TorchRecording::window() { return t_window; }

uint64_t TorchRecording::open_window(uint64_t correlation) {
  if (t_window.depth++ == 0) {
    t_window.op = next_window_.fetch_add(1, std::memory_order_relaxed) + 1;
    t_window.correlation = correlation;
  }
  return t_window.op;
}

void TorchRecording::close_window() {
  if (t_window.depth == 0) return;  // unmatched: the module's post hook without its pre hook
  if (--t_window.depth == 0) t_window = TorchWindow{};
}

}  // namespace partrain::profiler::inject
