// A node's ranks get consecutive blocks of the CPUs the process may use, in local-rank order;
// too few CPUs is an error naming the counts; binding covers the threads already running and
// those started after.
#include "runner/worker/cpu_binding.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <thread>

namespace partrain::runner {
namespace {

TEST(RankCpus, ConsecutiveBlocksInLocalRankOrder) {
  const std::vector<int> allowed = {0, 2, 3, 5, 6, 7};  // as a cpuset can leave them
  EXPECT_EQ(*rank_cpus(allowed, 0, 3, 1), std::vector<int>{0});
  EXPECT_EQ(*rank_cpus(allowed, 2, 3, 1), std::vector<int>{3});
  EXPECT_EQ(*rank_cpus(allowed, 1, 3, 2), (std::vector<int>{3, 5}));
  EXPECT_EQ(*rank_cpus(allowed, 2, 3, 2), (std::vector<int>{6, 7}));
}

TEST(RankCpus, TooFewCpusNamesTheCountsAndTheWayOut) {
  StatusOr<std::vector<int>> cpus = rank_cpus({0, 1}, 0, 4, 1);
  ASSERT_FALSE(cpus.is_ok());
  EXPECT_EQ(cpus.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cpus.status().message(),
            "--cpu-bind core: 4 ranks on this node x 1 BLAS thread need 4 CPUs, and 2 are allowed "
            "here (sched_getaffinity); launch fewer ranks, fewer --blas-threads, or --cpu-bind "
            "none");
  EXPECT_FALSE(rank_cpus({0, 1, 2, 3}, 1, 2, 3).is_ok());  // 2 x 3 BLAS threads need 6
  EXPECT_FALSE(rank_cpus({0, 1}, 2, 2, 1).is_ok());        // no local rank 2 of 2
}

// Binds this process to `cpus` with a thread already running and one started after: 0 when
// all three threads (and this one) run on `cpus` only.
int bind_with_threads(const std::vector<int>& cpus) {
  std::vector<int> seen_before;
  std::vector<int> seen_after;
  std::atomic<bool> bound = false;
  std::thread before([&] {
    while (!bound) std::this_thread::yield();
    seen_before = allowed_cpus();
  });
  const bool ok = bind_process(cpus).is_ok();
  bound = true;
  std::thread after([&] { seen_after = allowed_cpus(); });
  before.join();
  after.join();
  return ok && allowed_cpus() == cpus && seen_before == cpus && seen_after == cpus ? 0 : 1;
}

// In a child process, so the test binary's own affinity is left alone.
TEST(BindProcess, BindsRunningThreadsAndThoseStartedAfter) {
  const std::vector<int> allowed = allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  EXPECT_EQ(allowed_cpus(), allowed);
  const std::vector<int> last = {allowed.back()};
  GTEST_FLAG_SET(death_test_style,
                 "threadsafe");  // the child re-runs the test alone: no fork of threads
  EXPECT_EXIT(std::exit(bind_with_threads(last)), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace partrain::runner
