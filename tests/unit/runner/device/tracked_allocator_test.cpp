#include "runner/device/tracked_allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace partrain::runner {
namespace {

using memory::Category;

TrackedBuffer allocate(TrackedAllocator& allocator, size_t bytes, Category category) {
  auto buffer = allocator.allocate(bytes, category);
  EXPECT_TRUE(buffer.is_ok()) << buffer.status().message();
  return std::move(buffer).value();
}

TEST(TrackedAllocator, CurrentAndPeakPerCategoryAndTheSplitAtTheTotalPeak) {
  TrackedAllocator allocator;
  auto params = allocate(allocator, 100, Category::kParams);
  {
    auto activations = allocate(allocator, 1000, Category::kActivations);
    EXPECT_EQ(allocator.current_bytes(Category::kActivations), 1000u);
  }  // freed: the total peak so far is 1100 = params 100 + activations 1000
  auto grads = allocate(allocator, 200, Category::kGrads);
  MemoryStats stats = allocator.stats();
  EXPECT_EQ(stats.current[Category::kParams], 100u);
  EXPECT_EQ(stats.current[Category::kGrads], 200u);
  EXPECT_EQ(stats.current[Category::kActivations], 0u);
  EXPECT_EQ(stats.peak[Category::kActivations], 1000u);
  EXPECT_EQ(stats.total_current, 300u);
  EXPECT_EQ(stats.total_peak, 1100u);
  EXPECT_EQ(stats.at_total_peak[Category::kParams], 100u);
  EXPECT_EQ(stats.at_total_peak[Category::kActivations], 1000u);
  EXPECT_EQ(stats.at_total_peak[Category::kGrads], 0u);  // grads came after the peak
  EXPECT_EQ(stats.at_total_peak.total(), stats.total_peak);

  auto optimizer = allocate(allocator, 900, Category::kOptimizer);  // 1200: a new total peak
  stats = allocator.stats();
  EXPECT_EQ(stats.total_peak, 1200u);
  EXPECT_EQ(stats.at_total_peak[Category::kActivations], 0u);
  EXPECT_EQ(stats.at_total_peak[Category::kOptimizer], 900u);
  EXPECT_EQ(stats.at_total_peak.total(), 1200u);

  allocator.reset_peaks();
  EXPECT_EQ(allocator.peak_bytes(Category::kActivations), 0u);
  EXPECT_EQ(allocator.stats().total_peak, 1200u);  // all still held
}

// A reused scratch buffer: kept while large enough, else replaced, the old one freed first so
// the peak is the larger alone; a failed growth leaves it empty.
TEST(TrackedAllocator, GrowKeepsALargeEnoughBufferAndNeverHoldsTwo) {
  TrackedAllocator allocator;
  TrackedBuffer scratch;
  ASSERT_TRUE(allocator.grow(scratch, 100, Category::kComm).is_ok());
  void* first = scratch.data();
  ASSERT_TRUE(allocator.grow(scratch, 60, Category::kComm).is_ok());
  EXPECT_EQ(scratch.data(), first);
  EXPECT_EQ(scratch.bytes(), 100u);
  ASSERT_TRUE(allocator.grow(scratch, 300, Category::kComm).is_ok());
  EXPECT_EQ(scratch.bytes(), 300u);
  EXPECT_EQ(allocator.current_bytes(Category::kComm), 300u);
  EXPECT_EQ(allocator.peak_bytes(Category::kComm), 300u) << "not 100 + 300";
  allocator.set_limit_bytes(500);
  EXPECT_FALSE(allocator.grow(scratch, 600, Category::kComm).is_ok());
  EXPECT_TRUE(scratch.empty());
  EXPECT_EQ(allocator.current_bytes(Category::kComm), 0u);
}

TEST(TrackedAllocator, BuffersAreMoveOnlyAndFreeOnce) {
  TrackedAllocator allocator;
  auto first = allocate(allocator, 64, Category::kComm);
  TrackedBuffer moved = std::move(first);
  EXPECT_TRUE(first.empty());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(moved.bytes(), 64u);
  EXPECT_EQ(allocator.current_bytes(Category::kComm), 64u);
  moved = allocate(allocator, 32, Category::kComm);  // the 64 bytes are freed by the assignment
  EXPECT_EQ(allocator.current_bytes(Category::kComm), 32u);
  moved.reset();
  moved.reset();
  EXPECT_EQ(allocator.stats().total_current, 0u);
}

TEST(TrackedAllocator, HostBuffersAre64ByteAligned) {
  TrackedAllocator allocator;
  std::vector<TrackedBuffer> buffers;
  for (size_t bytes : {1u, 3u, 63u, 65u, 1000u, 4097u}) {
    buffers.push_back(allocate(allocator, bytes, Category::kWorkspace));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffers.back().data()) % 64, 0u) << bytes << " bytes";
  }
  EXPECT_EQ(allocator.current_bytes(Category::kWorkspace), 1u + 3 + 63 + 65 + 1000 + 4097);
}

TEST(TrackedAllocator, ZeroBytesGiveAnEmptyBufferAndNoEvent) {
  TrackedAllocator allocator;
  int events = 0;
  allocator.set_observer([&](const MemoryEvent&) { ++events; });
  auto buffer = allocate(allocator, 0, Category::kParams);
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(events, 0);
}

TEST(TrackedAllocator, ObserverSeesEveryChangeAndMayAllocate) {
  TrackedAllocator allocator;
  std::vector<MemoryEvent> events;
  std::vector<TrackedBuffer> from_observer;
  allocator.set_observer([&](const MemoryEvent& event) {
    events.push_back(event);
    // Allocating from inside the callback would deadlock if it ran under the allocator's lock.
    if (event.category == Category::kParams && event.delta_bytes > 0) {
      from_observer.push_back(allocate(allocator, 8, Category::kOther));
    }
  });
  {
    auto params = allocate(allocator, 128, Category::kParams);
    auto more = allocate(allocator, 64, Category::kParams);
  }
  ASSERT_EQ(events.size(), 6u);  // +128 params, +8 other, +64 params, +8 other, -64, -128
  EXPECT_EQ(events[0].category, Category::kParams);
  EXPECT_EQ(events[0].delta_bytes, 128);
  EXPECT_EQ(events[0].category_bytes, 128u);
  EXPECT_EQ(events[1].category, Category::kOther);
  EXPECT_EQ(events[2].delta_bytes, 64);
  EXPECT_EQ(events[2].category_bytes, 192u);
  EXPECT_EQ(events[4].delta_bytes, -64);  // destroyed in reverse order
  EXPECT_EQ(events[4].category_bytes, 128u);
  EXPECT_EQ(events[5].delta_bytes, -128);
  EXPECT_EQ(events[5].category_bytes, 0u);
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_GE(events[i].timestamp_ns, events[i - 1].timestamp_ns);
  }
  EXPECT_GT(events[0].timestamp_ns, 0);

  allocator.set_observer({});  // removed: no more events
  auto quiet = allocate(allocator, 16, Category::kParams);
  EXPECT_EQ(events.size(), 6u);
}

TEST(TrackedAllocator, LimitFailureNamesSizeAndCategoryAndCountsNothing) {
  TrackedAllocator allocator;
  auto params = allocate(allocator, 1024 * 1024, Category::kParams);
  allocator.set_limit_bytes(64ull * 1024 * 1024);
  auto failed = allocator.allocate(256ull * 1024 * 1024, Category::kActivations);
  ASSERT_FALSE(failed.is_ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kFailed);
  EXPECT_THAT(failed.status().message(),
              ::testing::StartsWith("out of memory allocating 256.00 MiB of activations on host"));
  EXPECT_THAT(failed.status().message(), ::testing::HasSubstr("the limit is 64.00 MiB"));
  EXPECT_THAT(failed.status().message(), ::testing::HasSubstr("params 1.00 MiB"));
  EXPECT_EQ(allocator.stats().total_current, 1024u * 1024);
  EXPECT_EQ(allocator.stats().total_peak, 1024u * 1024);
  allocator.set_limit_bytes(std::nullopt);
  EXPECT_TRUE(allocator.allocate(4096, Category::kActivations).is_ok());
}

// A device whose raw allocation always fails, as cudaMalloc does when the GPU is full.
class FullMemory final : public RawMemory {
 public:
  std::string name() const override { return "cuda:3"; }
  void* allocate(size_t) override { return nullptr; }
  void free(void*, size_t) override { ADD_FAILURE() << "nothing was allocated"; }
};

TEST(TrackedAllocator, RawMemoryFailureNamesTheDevice) {
  TrackedAllocator allocator(std::make_unique<FullMemory>());
  auto failed = allocator.allocate(3 * 1024, Category::kGrads);
  ASSERT_FALSE(failed.is_ok());
  EXPECT_THAT(failed.status().message(),
              ::testing::StartsWith("out of memory allocating 3.00 KiB of grads on cuda:3"));
  EXPECT_EQ(allocator.stats().total_peak, 0u);
}

TEST(TrackedAllocator, ConcurrentAllocationsBalance) {
  TrackedAllocator allocator;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&allocator, t] {
      const auto category = memory::kAllCategories[static_cast<size_t>(t)];
      for (int i = 0; i < 500; ++i) {
        auto buffer = allocator.allocate(static_cast<size_t>(64 + i), category);
        ASSERT_TRUE(buffer.is_ok());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  MemoryStats stats = allocator.stats();
  EXPECT_EQ(stats.total_current, 0u);
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(stats.peak[memory::kAllCategories[static_cast<size_t>(t)]], 64u + 499);
  }
  EXPECT_LE(stats.total_peak, 4u * (64 + 499));
  EXPECT_EQ(stats.at_total_peak.total(), stats.total_peak);
}

}  // namespace
}  // namespace partrain::runner
