// A simulated rendezvous of 64 nodes (node 0 the real launcher, the others from threads of the
// test): every node joins, node 0's run ends cleanly, in bounded time. The 1,024-node run and
// the scale table are in launch_scale_long_test.cpp (`ctest -L long`).
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/integration/simulated_rendezvous.h"

namespace partrain {
namespace {

TEST(LaunchScale, SixtyFourNodesJoinTheRendezvous) {
  const testing::RendezvousScale scale = testing::simulate_rendezvous(64);
  std::printf("64 nodes: rendezvous %.2f s, node 0 RSS %.1f MiB before, %.1f MiB joined\n",
              scale.rendezvous_seconds, scale.store_rss_mib, scale.store_joined_rss_mib);
  EXPECT_EQ(scale.failed_nodes, 0) << scale.first_error;
  EXPECT_EQ(scale.node_zero.exit_code, 0) << scale.node_zero.err;
  EXPECT_LT(scale.rendezvous_seconds, 60.0);
}

}  // namespace
}  // namespace partrain
