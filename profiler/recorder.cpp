#include "profiler/recorder.h"

#include <algorithm>
#include <array>
#include <exception>

#include "core/log.h"
#include "core/thread_start.h"

namespace partrain::profiler {
namespace {

// The one piece of mutable global state in the recorder, by design: each thread's registration,
// mapping a recorder (by id, never by address, which a later recorder may reuse) to the buffer
// that thread appends to, and the thread's WaitForRoom scopes. Lookups are a scan of a few slots
// with no lock; the entries own their buffers jointly with the recorder, so either may go first. A
// thread that exits, or evicts an entry to serve a fifth recorder, retires the buffer so the
// flusher can release it once drained.
struct ThreadRegistration {
  struct Entry {
    uint64_t recorder_id = 0;
    std::shared_ptr<RecordBuffer> buffer;
  };
  std::array<Entry, 4> entries;
  size_t next_eviction = 0;
  // This thread's Recorder::WaitForRoom scopes: how many live, and until when a full buffer
  // waits for a drain.
  int room_wait_scopes = 0;
  std::chrono::steady_clock::time_point room_wait_until{};

  ~ThreadRegistration() {
    for (auto& entry : entries) {
      if (entry.buffer) entry.buffer->retire();
    }
  }
};
thread_local ThreadRegistration t_registration;

// Ids for recorders, so a thread's stale entry never matches a new recorder at the same address.
std::atomic<uint64_t> g_next_recorder_id{1};

}  // namespace

Recorder::Recorder(RecordSink& sink, RecorderOptions options)
    : sink_(sink), options_(options), id_(g_next_recorder_id.fetch_add(1)) {
  batch_.reserve(options_.max_batch_bytes);
  if (Status started = start_thread(flusher_, [this] { flusher_loop(); }); !started.is_ok()) {
    log::error(
        "trace recorder: cannot start its flusher thread ({}); events are flushed only "
        "on explicit flushes",
        started.message());
  }
}

Recorder::~Recorder() {
  if (flusher_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    flusher_.join();
  } else {
    drain_all();
  }
}

bool Recorder::record(std::span<const uint8_t> encoded_event) noexcept {
  RecordBuffer* buffer = nullptr;
  for (auto& entry : t_registration.entries) {
    if (entry.recorder_id == id_) {
      buffer = entry.buffer.get();
      break;
    }
  }
  if (buffer == nullptr) buffer = register_thread();
  if (buffer == nullptr) {
    unregistered_dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (t_registration.room_wait_scopes > 0 && buffer->full_for(encoded_event.size())) {
    wait_for_room(*buffer, encoded_event.size());
  }
  return buffer->append(encoded_event);
}

Recorder::WaitForRoom::WaitForRoom(std::chrono::milliseconds most) {
  if (t_registration.room_wait_scopes++ == 0) {
    t_registration.room_wait_until = std::chrono::steady_clock::now() + most;
  }
}

Recorder::WaitForRoom::~WaitForRoom() { --t_registration.room_wait_scopes; }

void Recorder::wait_for_room(RecordBuffer& buffer, size_t size) noexcept {
  constexpr auto kOneDrain = std::chrono::milliseconds(100);
  while (buffer.full_for(size)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        t_registration.room_wait_until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    (void)flush(std::min(left, kOneDrain));
  }
}

RecordBuffer* Recorder::register_thread() noexcept {
  try {
    auto buffer =
        std::make_shared<RecordBuffer>(options_.buffer_bytes_per_thread, options_.max_record_bytes);
    {
      std::lock_guard lock(buffers_mutex_);
      buffers_.push_back(buffer);
    }
    auto& slot = t_registration.entries[t_registration.next_eviction];
    t_registration.next_eviction = (t_registration.next_eviction + 1) % t_registration.entries.size();
    if (slot.buffer) slot.buffer->retire();
    slot.recorder_id = id_;
    slot.buffer = std::move(buffer);
    return slot.buffer.get();
  } catch (const std::exception& e) {
    // Out of memory for a buffer: this thread's events are dropped and counted, never thrown.
    if (unregistered_dropped_.load(std::memory_order_relaxed) == 0) {
      log::warn("trace recorder: no buffer for a thread ({}); its events are dropped", e.what());
    }
    return nullptr;
  }
}

void Recorder::flusher_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait_for(lock, options_.flush_interval,
                   [&] { return stop_ || flush_requested_ > flush_done_; });
    const bool stopping = stop_;
    const uint64_t target = flush_requested_;
    lock.unlock();
    drain_all();
    lock.lock();
    flush_done_ = target;
    flushed_.notify_all();
    if (stopping) return;
  }
}

bool Recorder::flush(std::chrono::milliseconds timeout) noexcept {
  if (!flusher_.joinable()) {
    drain_all();
    return true;
  }
  std::unique_lock lock(mutex_);
  const uint64_t target = ++flush_requested_;
  wake_.notify_all();
  return flushed_.wait_for(lock, timeout, [&] { return flush_done_ >= target; });
}

void Recorder::ship(uint32_t record_count) {
  if (record_count == 0) return;
  try {
    sink_.write_batch(batch_, record_count);
    shipped_.fetch_add(record_count, std::memory_order_relaxed);
    batches_.fetch_add(1, std::memory_order_relaxed);
  } catch (const std::exception& e) {
    // The profiler never throws into its host: the batch is lost, logged once and counted.
    if (sink_errors_.fetch_add(1, std::memory_order_relaxed) == 0) {
      log::error("trace recorder: the sink failed ({}); batches are being lost", e.what());
    }
  }
  batch_.clear();
}

void Recorder::drain_all() {
  std::lock_guard drain_lock(drain_mutex_);
  std::vector<std::shared_ptr<RecordBuffer>> buffers;
  {
    std::lock_guard lock(buffers_mutex_);
    buffers = buffers_;
  }
  uint32_t count = 0;
  for (const auto& buffer : buffers) {
    // Bounded: a producer outrunning the flusher must not keep it on one buffer forever.
    const size_t rounds = buffer->capacity() / std::max<size_t>(options_.max_batch_bytes, 1) + 2;
    for (size_t round = 0; round < rounds && !buffer->empty(); ++round) {
      count += static_cast<uint32_t>(buffer->drain(batch_, options_.max_batch_bytes));
      if (batch_.size() >= options_.max_batch_bytes || !buffer->empty()) {
        ship(count);
        count = 0;
      }
    }
  }
  ship(count);

  uint64_t dropped = unregistered_dropped_.load(std::memory_order_relaxed) +
                     forgotten_dropped_.load(std::memory_order_relaxed);
  for (const auto& buffer : buffers) dropped += buffer->dropped();
  if (dropped > reported_dropped_) {
    try {
      sink_.dropped(dropped - reported_dropped_);
    } catch (const std::exception& e) {
      if (sink_errors_.fetch_add(1, std::memory_order_relaxed) == 0) {
        log::error("trace recorder: the sink failed ({}); drop counts are being lost", e.what());
      }
    }
    reported_dropped_ = dropped;
  }

  // Release buffers whose threads are gone and whose records have all been shipped. retired()
  // is read before empty() so nothing appended before retirement is missed.
  std::lock_guard lock(buffers_mutex_);
  std::erase_if(buffers_, [&](const std::shared_ptr<RecordBuffer>& buffer) {
    if (!buffer->retired() || !buffer->empty()) return false;
    forgotten_dropped_.fetch_add(buffer->dropped(), std::memory_order_relaxed);
    forgotten_appended_.fetch_add(buffer->appended(), std::memory_order_relaxed);
    return true;
  });
}

RecorderStats Recorder::stats() const {
  RecorderStats stats;
  stats.recorded = forgotten_appended_.load(std::memory_order_relaxed);
  stats.dropped = unregistered_dropped_.load(std::memory_order_relaxed) +
                  forgotten_dropped_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(buffers_mutex_);
    for (const auto& buffer : buffers_) {
      stats.recorded += buffer->appended();
      stats.dropped += buffer->dropped();
    }
  }
  stats.shipped = shipped_.load(std::memory_order_relaxed);
  stats.batches = batches_.load(std::memory_order_relaxed);
  stats.sink_errors = sink_errors_.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace partrain::profiler
