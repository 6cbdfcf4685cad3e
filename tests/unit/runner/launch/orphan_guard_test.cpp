// The orphan guard starts without running atfork handlers: OpenBLAS's, which never returned under
// ulimit -v, held the launcher in fork() before its first rank, deaf to SIGTERM.
#include "runner/launch/orphan_guard.h"

#include <gtest/gtest.h>

#include <chrono>

#include "tests/support/stuck_atfork.h"

namespace partrain::launch {
namespace {

TEST(OrphanGuard, StartsWithoutRunningAtforkHandlers) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<OrphanGuard> guard = [] {
    testing::StuckAtfork stuck;
    return OrphanGuard::start();
  }();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_TRUE(guard.is_ok()) << guard.status().message();
  guard->dismiss();
}

}  // namespace
}  // namespace partrain::launch
