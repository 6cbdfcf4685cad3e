#include "profiler/flight/torch_flight.h"

#include <iterator>
#include <optional>

namespace partrain::profiler {

void TorchFlight::issued(int group, const CollectiveEvent& event, FlightRecorder::Timing timing) {
  const Key key{group, event.enqueue_ns};
  {
    std::lock_guard lock(mutex_);
    auto found = in_flight_.find(key);
    if (found != in_flight_.end()) {
      // Called, now issued: the one entry moves on (an unfinished update reaches no sink), left
      // to its wait from here when its completion shows only then.
      if (timing == FlightRecorder::Timing::kUntimed) recorder_.stop_timing(found->second);
      (void)recorder_.update(found->second, event);
      return;
    }
  }
  const uint64_t id = recorder_.record(event, timing);
  std::lock_guard lock(mutex_);
  in_flight_[key] = id;
  // Ops whose completion never came (the module stopped recording) are forgotten once the ring
  // has evicted them: their update would find nothing anyway.
  if (in_flight_.size() > 2 * recorder_.capacity()) {
    const uint64_t total = recorder_.total_recorded();
    const uint64_t oldest_kept = total > recorder_.capacity() ? total - recorder_.capacity() : 0;
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      it = it->second < oldest_kept ? in_flight_.erase(it) : std::next(it);
    }
  }
}

void TorchFlight::waited(int group, const CollectiveEvent& event, int64_t since_ns) {
  std::lock_guard lock(mutex_);
  auto found = in_flight_.find(Key{group, event.enqueue_ns});
  if (found != in_flight_.end()) recorder_.time_from(found->second, since_ns);
}

bool TorchFlight::finished(int group, const CollectiveEvent& event,
                           const FlightRecorder::Sink& deliver) {
  std::optional<uint64_t> id;
  {
    std::lock_guard lock(mutex_);
    auto found = in_flight_.find(Key{group, event.enqueue_ns});
    if (found != in_flight_.end()) {
      id = found->second;
      in_flight_.erase(found);
    }
  }
  if (id) return recorder_.update(*id, event, deliver);
  // Never reported in flight (its Work was done when issued): it enters finished.
  (void)recorder_.record(event, FlightRecorder::Timing::kFromEnqueue, deliver);
  return true;
}

}  // namespace partrain::profiler
