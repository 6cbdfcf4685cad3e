#include "profiler/flight/flight_recorder.h"

#include <algorithm>
#include <utility>

namespace partrain::profiler {

FlightRecorder::FlightRecorder(size_t capacity, Sink sink)
    : capacity_(std::max<size_t>(capacity, 1)), sink_(std::move(sink)) {
  ring_.reserve(capacity_);
}

namespace {

bool finished(const profiler::CollectiveEvent& event) {
  return event.state == profiler::CollectiveState::kCompleted ||
         event.state == profiler::CollectiveState::kFailed;
}

}  // namespace

uint64_t FlightRecorder::record(const profiler::CollectiveEvent& event, Timing timing,
                                const Sink& deliver) {
  // Held only for a delivery: recording and moving an op on, twice per op, pay nothing for it.
  std::shared_lock delivering(delivering_, std::defer_lock);
  if (deliver) delivering.lock();
  uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    recorded_any_.store(true, std::memory_order_relaxed);
    id = next_id_++;
    Entry entry{id, event, std::nullopt};
    if (timing == Timing::kFromEnqueue) entry.timed_from_ns = event.enqueue_ns;
    if (ring_.size() < capacity_) {
      ring_.push_back(std::move(entry));
    } else {
      ring_[id % capacity_] = std::move(entry);
    }
  }
  if (deliver) deliver(event);
  return id;
}

FlightRecorder::Entry* FlightRecorder::entry_locked(uint64_t id) {
  const size_t index = static_cast<size_t>(id % capacity_);
  return index < ring_.size() && ring_[index].id == id ? &ring_[index] : nullptr;
}

void FlightRecorder::time_from(uint64_t id, int64_t since_ns) {
  std::lock_guard lock(mutex_);
  Entry* entry = entry_locked(id);
  if (entry != nullptr && !entry->timed_from_ns) entry->timed_from_ns = since_ns;
}

void FlightRecorder::stop_timing(uint64_t id) {
  std::lock_guard lock(mutex_);
  if (Entry* entry = entry_locked(id)) entry->timed_from_ns.reset();
}

bool FlightRecorder::update(uint64_t id, const profiler::CollectiveEvent& event,
                            const Sink& deliver) {
  const bool delivers = deliver || (sink_ && finished(event));
  std::shared_lock delivering(delivering_, std::defer_lock);
  if (delivers) delivering.lock();
  bool sink_open = false;
  {
    std::lock_guard lock(mutex_);
    if (Entry* entry = entry_locked(id)) entry->event = event;
    sink_open = !final_snapshot_end_ || id >= *final_snapshot_end_;
  }
  // The delivery writes to a trace; never hold the ring's lock while calling it.
  if (!sink_open) return false;
  if (delivers) (deliver ? deliver : sink_)(event);
  return true;
}

std::vector<profiler::CollectiveEvent> FlightRecorder::final_snapshot() {
  // An update either finished its entry and delivered it before (the snapshot holds it
  // finished, the trace has it) or comes after (the snapshot holds it unfinished, the sink
  // never gets it).
  std::unique_lock delivering(delivering_);
  std::lock_guard lock(mutex_);
  if (!final_snapshot_end_) final_snapshot_end_ = next_id_;
  return snapshot_locked();
}

std::vector<profiler::CollectiveEvent> FlightRecorder::snapshot() const {
  std::lock_guard lock(mutex_);
  return snapshot_locked();
}

std::vector<profiler::CollectiveEvent> FlightRecorder::snapshot_locked() const {
  std::vector<profiler::CollectiveEvent> events;
  events.reserve(ring_.size());
  // The oldest entry sits just after the newest once the ring has wrapped.
  const size_t start = ring_.size() < capacity_ ? 0 : static_cast<size_t>(next_id_ % capacity_);
  for (size_t i = 0; i < ring_.size(); ++i)
    events.push_back(ring_[(start + i) % ring_.size()].event);
  return events;
}

std::vector<profiler::CollectiveEvent> FlightRecorder::since(uint64_t first) const {
  std::lock_guard lock(mutex_);
  const uint64_t oldest = next_id_ - ring_.size();
  std::vector<profiler::CollectiveEvent> events;
  for (uint64_t id = std::max(first, oldest); id < next_id_; ++id) {
    events.push_back(ring_[id % capacity_].event);
  }
  return events;
}

std::optional<FlightRecorder::Unfinished> FlightRecorder::oldest_unfinished() const {
  std::lock_guard lock(mutex_);
  const Entry* oldest = nullptr;
  for (const Entry& entry : ring_) {
    const profiler::CollectiveState state = entry.event.state;
    if ((state != profiler::CollectiveState::kEnqueued &&
         state != profiler::CollectiveState::kStarted) ||
        !entry.timed_from_ns) {
      continue;
    }
    if (oldest == nullptr || entry.id < oldest->id) oldest = &entry;
  }
  if (oldest == nullptr) return std::nullopt;
  return Unfinished{oldest->event, *oldest->timed_from_ns};
}

uint64_t FlightRecorder::total_recorded() const {
  std::lock_guard lock(mutex_);
  return next_id_;
}

}  // namespace partrain::profiler
