#include "profiler/record_buffer.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "profiler/collector_protocol.h"

namespace partrain::profiler {
namespace {

// Only the producer writes these counters, so a plain load + store is enough (no locked RMW on
// the hot path); readers on other threads see a recent value.
void bump(std::atomic<uint64_t>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

}  // namespace

RecordBuffer::RecordBuffer(size_t capacity_bytes, size_t max_record_bytes)
    : max_record_bytes_(max_record_bytes) {
  const size_t capacity = std::bit_ceil(std::max<size_t>(capacity_bytes, 64));
  data_ = std::make_unique<uint8_t[]>(capacity);
  mask_ = capacity - 1;
}

void RecordBuffer::write_at(uint64_t pos, const uint8_t* bytes, size_t size) {
  const size_t at = static_cast<size_t>(pos) & mask_;
  const size_t first = std::min(size, capacity() - at);
  std::memcpy(data_.get() + at, bytes, first);
  if (first < size) std::memcpy(data_.get(), bytes + first, size - first);
}

void RecordBuffer::read_at(uint64_t pos, uint8_t* bytes, size_t size) const {
  const size_t at = static_cast<size_t>(pos) & mask_;
  const size_t first = std::min(size, capacity() - at);
  std::memcpy(bytes, data_.get() + at, first);
  if (first < size) std::memcpy(bytes + first, data_.get(), size - first);
}

bool RecordBuffer::ever_fits(size_t size) const {
  return size <= max_record_bytes_ && kRecordLengthBytes + size <= capacity();
}

bool RecordBuffer::room_for(size_t size) noexcept {
  const size_t total = kRecordLengthBytes + size;
  const uint64_t head = head_.load(std::memory_order_relaxed);
  if (capacity() - (head - cached_tail_) >= total) return true;
  cached_tail_ = tail_.load(std::memory_order_acquire);
  return capacity() - (head - cached_tail_) >= total;
}

bool RecordBuffer::append(std::span<const uint8_t> record) noexcept {
  if (!ever_fits(record.size()) || !room_for(record.size())) {
    bump(dropped_);
    return false;
  }
  const size_t total = kRecordLengthBytes + record.size();
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const auto length = static_cast<uint32_t>(record.size());
  const uint8_t prefix[kRecordLengthBytes] = {
      static_cast<uint8_t>(length), static_cast<uint8_t>(length >> 8),
      static_cast<uint8_t>(length >> 16), static_cast<uint8_t>(length >> 24)};
  write_at(head, prefix, kRecordLengthBytes);
  if (!record.empty()) write_at(head + kRecordLengthBytes, record.data(), record.size());
  // Release: the consumer that sees the new head sees the bytes written before it.
  head_.store(head + total, std::memory_order_release);
  bump(appended_);
  return true;
}

bool RecordBuffer::full_for(size_t size) noexcept { return ever_fits(size) && !room_for(size); }

bool RecordBuffer::empty() const {
  return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_relaxed);
}

size_t RecordBuffer::drain(std::vector<uint8_t>& out, size_t max_bytes) {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  const uint64_t head = head_.load(std::memory_order_acquire);
  uint64_t end = tail;
  size_t taken = 0;
  size_t room = max_bytes > out.size() ? max_bytes - out.size() : 0;
  while (end < head) {
    uint8_t prefix[kRecordLengthBytes];
    read_at(end, prefix, kRecordLengthBytes);
    const size_t total = kRecordLengthBytes + (size_t{prefix[0]} | size_t{prefix[1]} << 8 |
                                               size_t{prefix[2]} << 16 | size_t{prefix[3]} << 24);
    if (total > room && taken > 0) break;
    room = total > room ? 0 : room - total;
    end += total;
    ++taken;
  }
  if (taken == 0) return 0;
  const size_t bytes = static_cast<size_t>(end - tail);
  const size_t old_size = out.size();
  out.resize(old_size + bytes);
  read_at(tail, out.data() + old_size, bytes);
  // Release: the producer that sees the new tail may overwrite what was just copied.
  tail_.store(end, std::memory_order_release);
  return taken;
}

}  // namespace partrain::profiler
