#include "runner/device/tracked_allocator.h"

#include <cstdlib>
#include <numeric>
#include <utility>

#include "core/byte_size.h"
#include "core/clock.h"

namespace partrain::runner {

void* HostMemory::allocate(size_t bytes) {
  // std::aligned_alloc wants a multiple of the alignment.
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, rounded);
}

void HostMemory::free(void* pointer, size_t /*bytes*/) { std::free(pointer); }

uint64_t CategoryBytes::total() const {
  return std::accumulate(bytes.begin(), bytes.end(), uint64_t{0});
}

TrackedBuffer::TrackedBuffer(TrackedBuffer&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      category_(other.category_) {}

TrackedBuffer& TrackedBuffer::operator=(TrackedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    category_ = other.category_;
  }
  return *this;
}

void TrackedBuffer::reset() {
  if (data_ != nullptr) owner_->release(data_, bytes_, category_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

TrackedAllocator::TrackedAllocator(std::unique_ptr<RawMemory> memory)
    : memory_(std::move(memory)) {}

namespace {

std::string split_text(const CategoryBytes& split) {
  std::string text;
  for (memory::Category category : memory::kAllCategories) {
    if (split[category] == 0) continue;
    if (!text.empty()) text += ", ";
    text += fmt::format("{} {}", memory::category_name(category), format_bytes(split[category]));
  }
  return text.empty() ? "nothing" : text;
}

// "out of memory allocating 256.00 MiB of activations on host: ...": the first words are what fault
// injection and users look for; the rest says what held the memory.
Status out_of_memory(size_t bytes, memory::Category category, const std::string& memory_name,
                     std::string_view reason, const MemoryStats& stats) {
  return failed("out of memory allocating {} of {} on {}: {}; {} tracked in use ({})",
                format_bytes(bytes), memory::category_name(category), memory_name, reason,
                format_bytes(stats.total_current), split_text(stats.current));
}

void notify(const std::shared_ptr<const MemoryObserver>& observer, const MemoryEvent& event) {
  if (observer) (*observer)(event);
}

}  // namespace

Status TrackedAllocator::grow(TrackedBuffer& buffer, size_t bytes, memory::Category category) {
  if (buffer.bytes() >= bytes) return Status::ok();
  buffer.reset();
  ASSIGN_OR_RETURN(buffer, allocate(bytes, category));
  return Status::ok();
}

StatusOr<TrackedBuffer> TrackedAllocator::allocate(size_t bytes, memory::Category category) {
  if (bytes == 0) return TrackedBuffer();
  {
    // Reserve under the lock so concurrent requests cannot pass the limit together; the raw
    // allocation itself runs unlocked (cudaMalloc may synchronise the device).
    std::lock_guard lock(mutex_);
    if (limit_bytes_ && stats_.total_current + reserved_bytes_ + bytes > *limit_bytes_) {
      return out_of_memory(bytes, category, memory_->name(),
                           fmt::format("the limit is {}{}", format_bytes(*limit_bytes_),
                                       limit_why_.empty() ? "" : " (" + limit_why_ + ")"),
                           stats_);
    }
    reserved_bytes_ += bytes;
  }
  void* data = memory_->allocate(bytes);
  MemoryEvent event{};
  std::shared_ptr<const MemoryObserver> observer;
  {
    std::lock_guard lock(mutex_);
    reserved_bytes_ -= bytes;
    if (data != nullptr) {
      stats_.current[category] += bytes;
      stats_.total_current += bytes;
      if (stats_.current[category] > stats_.peak[category]) {
        stats_.peak[category] = stats_.current[category];
      }
      if (stats_.total_current > stats_.total_peak) {
        stats_.total_peak = stats_.total_current;
        stats_.at_total_peak = stats_.current;
      }
      event = MemoryEvent{category, static_cast<int64_t>(bytes), stats_.current[category],
                          monotonic_ns()};
      observer = observer_;
    }
  }
  if (data == nullptr) {
    return out_of_memory(bytes, category, memory_->name(), "the allocation was refused", stats());
  }
  notify(observer, event);
  return TrackedBuffer(this, data, bytes, category);
}

void TrackedAllocator::release(void* data, size_t bytes, memory::Category category) {
  memory_->free(data, bytes);
  MemoryEvent event{};
  std::shared_ptr<const MemoryObserver> observer;
  {
    std::lock_guard lock(mutex_);
    stats_.current[category] -= bytes;
    stats_.total_current -= bytes;
    event = MemoryEvent{category, -static_cast<int64_t>(bytes), stats_.current[category],
                        monotonic_ns()};
    observer = observer_;
  }
  notify(observer, event);
}

void TrackedAllocator::set_limit_bytes(std::optional<uint64_t> limit, std::string why) {
  std::lock_guard lock(mutex_);
  limit_bytes_ = limit;
  limit_why_ = std::move(why);
}

void TrackedAllocator::set_observer(MemoryObserver observer) {
  auto shared = observer ? std::make_shared<const MemoryObserver>(std::move(observer)) : nullptr;
  std::lock_guard lock(mutex_);
  observer_ = std::move(shared);
}

MemoryStats TrackedAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

uint64_t TrackedAllocator::current_bytes(memory::Category category) const {
  std::lock_guard lock(mutex_);
  return stats_.current[category];
}

uint64_t TrackedAllocator::peak_bytes(memory::Category category) const {
  std::lock_guard lock(mutex_);
  return stats_.peak[category];
}

void TrackedAllocator::reset_peaks() {
  std::lock_guard lock(mutex_);
  stats_.peak = stats_.current;
  stats_.total_peak = stats_.total_current;
  stats_.at_total_peak = stats_.current;
}

}  // namespace partrain::runner
