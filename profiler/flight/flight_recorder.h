// The flight recorder: the last N collectives and transfers of this rank with their state,
// kept in a ring so a hang or crash can be explained afterwards (PyTorch's NCCL flight recorder),
// plus an optional sink that sees every operation once it completes or fails.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <vector>

#include "profiler/collective_event.h"

namespace partrain::profiler {

class FlightRecorder {
 public:
  using Sink = std::function<void(const profiler::CollectiveEvent&)>;
  static constexpr size_t kDefaultCapacity = 2000;

  explicit FlightRecorder(size_t capacity = kDefaultCapacity, Sink sink = {});

  // Whether a watchdog times an unfinished entry: from its enqueue_ns, or not until
  // time_from() says (an op whose completion shows only once the program waits on it: a gloo
  // Work without a future, docs/pytorch.md).
  enum class Timing : uint8_t { kFromEnqueue, kUntimed };

  // Adds an entry (evicting the oldest when full) and returns its id for update(). The event
  // goes to `deliver`, when given (the caller's last word on an operation that never was in
  // flight), as update() delivers.
  uint64_t record(const profiler::CollectiveEvent& event, Timing timing = Timing::kFromEnqueue,
                  const Sink& deliver = {});
  // A watchdog times entry `id` (recorded untimed) from `since_ns` on (CLOCK_MONOTONIC).
  void time_from(uint64_t id, int64_t since_ns);
  // Entry `id`, recorded timed, turns out to be one a watchdog leaves alone until time_from().
  void stop_timing(uint64_t id);
  // Replaces entry `id` if it is still in the ring. The event then goes to `deliver` when given
  // (the caller's last word on the operation, whatever its state: one still in flight as the
  // process ends), else to the sink when it completed or failed; even when the ring has already
  // evicted it (callers finish each id once). False, and nothing delivered, for an entry
  // recorded before a final snapshot was taken: the dump holds the operation as it stood.
  // Entries recorded after it go on as before (a PyTorch program may survive the collective
  // error that dumped it).
  bool update(uint64_t id, const profiler::CollectiveEvent& event, const Sink& deliver = {});

  // Entries still in the ring, oldest first.
  std::vector<profiler::CollectiveEvent> snapshot() const;
  // The same, for a final dump: from here on, the operations it holds no longer reach the sink
  // when they finish. The dump writes the unfinished ones as they stood, so each operation reaches
  // the trace once (a failure that followed, as the rank's end tore its peers down, would have
  // been a second row). It waits for the deliveries under way: an operation it holds finished
  // has been delivered, so a flush after it carries the operation's row (a rank stopped by a
  // signal as its collective failed lost that row to the kill).
  std::vector<profiler::CollectiveEvent> final_snapshot();
  // Entries recorded from id `first` on (those still in the ring), oldest first: what happened
  // since total_recorded() was `first`, without copying the whole ring.
  std::vector<profiler::CollectiveEvent> since(uint64_t first) const;
  // The unfinished (enqueued or started) entry recorded first among those a watchdog times, if
  // any, and since when it is timed. Scans the ring in place, so polling it copies one entry,
  // not the ring.
  struct Unfinished {
    profiler::CollectiveEvent event;
    int64_t timed_from_ns = 0;  // its enqueue_ns, or when time_from() started its timing
  };
  std::optional<Unfinished> oldest_unfinished() const;
  size_t capacity() const { return capacity_; }
  uint64_t total_recorded() const;
  // Whether any operation was ever recorded. Lock-free: a signal handler may ask.
  bool recorded_any() const { return recorded_any_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    uint64_t id = 0;
    profiler::CollectiveEvent event;
    std::optional<int64_t> timed_from_ns;  // nullopt: untimed
  };

  std::vector<profiler::CollectiveEvent> snapshot_locked() const;  // mutex_ held
  Entry* entry_locked(uint64_t id);  // mutex_ held; null once the ring has overwritten it

  const size_t capacity_;
  const Sink sink_;
  mutable std::mutex mutex_;
  // Held shared from a delivering call's change of the ring until its delivery returns, and
  // exclusively by final_snapshot(); taken before mutex_.
  std::shared_mutex delivering_;
  std::atomic<bool> recorded_any_{false};
  std::vector<Entry> ring_;  // ring_[id % capacity_] holds entry id while it is recent enough
  uint64_t next_id_ = 0;
  // Guarded by mutex_: next_id_ when final_snapshot() was taken; ids below it no longer reach
  // the sink.
  std::optional<uint64_t> final_snapshot_end_;
};

}  // namespace partrain::profiler
