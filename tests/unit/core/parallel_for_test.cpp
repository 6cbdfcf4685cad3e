#include "core/parallel_for.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace partrain {
namespace {

// Every index of [0, n) visited exactly once, in contiguous ranges of at least min_range (but for
// the last), whatever n and min_range.
TEST(ParallelFor, VisitsEveryIndexOnceInContiguousRanges) {
  for (const auto& [n, min_range] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {1, 1}, {7, 100}, {1000, 1}, {1000, 3}, {100003, 1000}, {1 << 20, 1 << 10}}) {
    SCOPED_TRACE(::testing::Message() << "n " << n << " min_range " << min_range);
    std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
    std::mutex mutex;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    parallel_for(n, min_range, [&](int64_t begin, int64_t end) {
      {
        std::lock_guard lock(mutex);
        ranges.emplace_back(begin, end);
      }
      for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[static_cast<size_t>(i)].load(), 1) << i;
    EXPECT_EQ(ranges.empty(), n == 0);
    const auto cores = static_cast<size_t>(std::max(1u, std::thread::hardware_concurrency()));
    EXPECT_LE(ranges.size(), cores);
    if (ranges.size() > 1) {
      for (const auto& [begin, end] : ranges) {
        if (end != n) {
          EXPECT_GE(end - begin, min_range);
        }
      }
    }
  }
}

TEST(ParallelFor, SmallWorkStaysOnTheCallersThread) {
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  parallel_for(100, 64, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 100);
    ran_on = std::this_thread::get_id();
  });
  EXPECT_EQ(ran_on, caller);
}

}  // namespace
}  // namespace partrain
