// The rendezvous at scale, simulated on one machine (node 0 the real launcher, nodes 1..N-1 from
// threads of the test over loopback): 1,024 nodes join in bounded time, and the table of
// rendezvous time and node 0's memory for 8, 64, 256 and 1,024 nodes that docs/reliability.md
// quotes.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/integration/simulated_rendezvous.h"

namespace partrain {
namespace {

TEST(LaunchScaleLong, AThousandAndTwentyFourNodesJoinTheRendezvous) {
  const testing::RendezvousScale scale = testing::simulate_rendezvous(1024);
  EXPECT_EQ(scale.failed_nodes, 0) << scale.first_error;
  EXPECT_EQ(scale.node_zero.exit_code, 0) << scale.node_zero.err;
  EXPECT_LT(scale.rendezvous_seconds, 120.0);
}

TEST(LaunchScaleLong, Table) {
  std::printf("| nodes | rendezvous | node 0 RSS before | when all had joined | peak |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  for (int nnodes : {8, 64, 256, 1024}) {
    const testing::RendezvousScale scale = testing::simulate_rendezvous(nnodes);
    EXPECT_EQ(scale.failed_nodes, 0) << nnodes << ": " << scale.first_error;
    EXPECT_EQ(scale.node_zero.exit_code, 0) << scale.node_zero.err;
    std::printf("| %d | %.2f s | %.1f MiB | %.1f MiB | %.1f MiB |\n", nnodes,
                scale.rendezvous_seconds, scale.store_rss_mib, scale.store_joined_rss_mib,
                scale.store_peak_rss_mib);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace partrain
