// A per-thread, fixed-capacity ring of variable-length records. One producer (the thread that
// owns it) appends without locks, allocation or waiting; one consumer (the recorder's flusher)
// drains. A record that does not fit is dropped and counted: training is never made to wait.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace partrain::profiler {

class RecordBuffer {
 public:
  // capacity_bytes is rounded up to a power of two (so positions wrap with a mask); each record
  // takes 4 bytes more than its length. Records longer than max_record_bytes are dropped.
  RecordBuffer(size_t capacity_bytes, size_t max_record_bytes);
  RecordBuffer(const RecordBuffer&) = delete;
  RecordBuffer& operator=(const RecordBuffer&) = delete;

  // Producer only. False when the record was dropped (full, or too long); never blocks.
  bool append(std::span<const uint8_t> record) noexcept;
  // Producer only: whether a record of `size` bytes would be dropped now for want of room that
  // a drain would make (false when it fits, and when it never could: too long).
  bool full_for(size_t size) noexcept;

  // Consumer only. Appends whole records, oldest first, to out as [u32 LE length][bytes] (the
  // collector's batch layout) while out stays within max_bytes; at least one record if any is
  // waiting. Returns the number of records moved.
  size_t drain(std::vector<uint8_t>& out, size_t max_bytes);
  // Consumer only: whether the producer has published nothing since the last drain.
  bool empty() const;

  size_t capacity() const { return mask_ + 1; }
  uint64_t appended() const { return appended_.load(std::memory_order_relaxed); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  // Set by the owning thread when it exits (or stops using this buffer): once drained, the
  // flusher may forget the buffer.
  void retire() { retired_.store(true, std::memory_order_release); }
  bool retired() const { return retired_.load(std::memory_order_acquire); }

 private:
  // Whether a record of `size` bytes fits the buffer at all (not too long for it).
  bool ever_fits(size_t size) const;
  // Producer only: whether a record of `size` bytes fits now (the consumer's tail re-read when
  // the cached one says no).
  bool room_for(size_t size) noexcept;
  void write_at(uint64_t pos, const uint8_t* bytes, size_t size);
  void read_at(uint64_t pos, uint8_t* bytes, size_t size) const;

  std::unique_ptr<uint8_t[]> data_;
  size_t mask_ = 0;
  size_t max_record_bytes_ = 0;
  // Positions count bytes since creation and never wrap (2^64 bytes is centuries away); the
  // producer publishes head_, the consumer publishes tail_, each on its own cache line.
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t cached_tail_ = 0;  // producer's last look at tail_, to avoid touching its line
  std::atomic<uint64_t> appended_{0};
  std::atomic<uint64_t> dropped_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  std::atomic<bool> retired_{false};
};

}  // namespace partrain::profiler
