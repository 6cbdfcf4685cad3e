// The tracked allocator: every buffer of training memory belongs to a memory::Category, and each
// rank knows its current and peak bytes per category, the total peak and the split at that moment
// (DESIGN.md "Runtime"). Raw memory comes from a RawMemory, so a CUDA device plugs in cudaMalloc.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/status.h"
#include "memory/category.h"

namespace partrain::runner {

// Where the bytes come from. allocate returns nullptr when it cannot (the allocator turns that into
// a Status); free receives the size it was allocated with.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  virtual std::string name() const = 0;  // "host", "cuda:0": named in out-of-memory messages
  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* pointer, size_t bytes) = 0;
};

// Host memory aligned to 64 bytes (a cache line, and a full AVX-512 vector).
class HostMemory final : public RawMemory {
 public:
  static constexpr size_t kAlignment = 64;
  std::string name() const override { return "host"; }
  void* allocate(size_t bytes) override;
  void free(void* pointer, size_t bytes) override;
};

// Bytes per category, indexed by memory::Category.
struct CategoryBytes {
  std::array<uint64_t, memory::kAllCategories.size()> bytes{};

  uint64_t& operator[](memory::Category category) { return bytes[static_cast<size_t>(category)]; }
  uint64_t operator[](memory::Category category) const {
    return bytes[static_cast<size_t>(category)];
  }
  uint64_t total() const;
};

struct MemoryStats {
  CategoryBytes current;
  CategoryBytes peak;  // each category's own peak (they need not coincide in time)
  uint64_t total_current = 0;
  uint64_t total_peak = 0;
  CategoryBytes at_total_peak;  // the split when total_peak was reached (sums to total_peak)
};

// One change of tracked memory, as the profiler records it.
struct MemoryEvent {
  memory::Category category;
  int64_t delta_bytes;      // > 0 allocated, < 0 freed
  uint64_t category_bytes;  // that category's current bytes after the change
  int64_t timestamp_ns;     // core/clock.h monotonic_ns, taken when the change was counted
};
using MemoryObserver = std::function<void(const MemoryEvent&)>;

class TrackedAllocator;

// A block of tracked memory: move-only; frees and un-counts itself on destruction. The allocator
// that made it must outlive it.
class TrackedBuffer {
 public:
  TrackedBuffer() = default;
  TrackedBuffer(TrackedBuffer&& other) noexcept;
  TrackedBuffer& operator=(TrackedBuffer&& other) noexcept;
  TrackedBuffer(const TrackedBuffer&) = delete;
  TrackedBuffer& operator=(const TrackedBuffer&) = delete;
  ~TrackedBuffer() { reset(); }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  memory::Category category() const { return category_; }
  bool empty() const { return data_ == nullptr; }
  // Frees now (a no-op on an empty buffer).
  void reset();

 private:
  friend class TrackedAllocator;
  TrackedBuffer(TrackedAllocator* owner, void* data, size_t bytes, memory::Category category)
      : owner_(owner), data_(data), bytes_(bytes), category_(category) {}

  TrackedAllocator* owner_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  memory::Category category_ = memory::Category::kOther;
};

// Thread-safe. The observer is called after every counted change, outside the allocator's lock (so
// it may allocate or take its own locks); calls from different threads may arrive out of timestamp
// order, and the timestamps, not the arrival order, are what to sort by.
class TrackedAllocator {
 public:
  explicit TrackedAllocator(std::unique_ptr<RawMemory> memory = std::make_unique<HostMemory>());
  TrackedAllocator(const TrackedAllocator&) = delete;
  TrackedAllocator& operator=(const TrackedAllocator&) = delete;

  // A zero-byte request gives an empty buffer and no event. Fails with "out of memory allocating
  // 256.00 MiB of activations ..." when the raw memory refuses or the byte limit would be passed.
  StatusOr<TrackedBuffer> allocate(size_t bytes, memory::Category category);
  // Makes `buffer` (a scratch or staging buffer reused across calls) hold at least `bytes`: kept
  // when it does, else freed first, so a peak never holds the old and the new, and allocated
  // anew. On failure `buffer` is left empty.
  Status grow(TrackedBuffer& buffer, size_t bytes, memory::Category category);

  // Caps the total tracked bytes (std::nullopt: no cap): how tests and fault injection make an
  // allocation fail on purpose. `why`, when given, is named in the out-of-memory message.
  void set_limit_bytes(std::optional<uint64_t> limit, std::string why = {});
  void set_observer(MemoryObserver observer);  // an empty function removes it

  MemoryStats stats() const;
  uint64_t current_bytes(memory::Category category) const;
  uint64_t peak_bytes(memory::Category category) const;
  // Restarts the peaks from the current bytes (e.g. after initialisation, to see one step's peak).
  void reset_peaks();
  std::string memory_name() const { return memory_->name(); }

 private:
  friend class TrackedBuffer;
  void release(void* data, size_t bytes, memory::Category category);

  std::unique_ptr<RawMemory> memory_;
  mutable std::mutex mutex_;
  MemoryStats stats_;                    // guarded by mutex_
  std::optional<uint64_t> limit_bytes_;  // guarded by mutex_
  std::string limit_why_;                // guarded by mutex_
  uint64_t reserved_bytes_ = 0;          // guarded by mutex_: requested, raw allocation in progress
  std::shared_ptr<const MemoryObserver> observer_;  // guarded by mutex_; copied out to call
};

}  // namespace partrain::runner
