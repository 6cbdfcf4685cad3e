#include "analyzers/bandwidth.h"

#include <gtest/gtest.h>

namespace partrain::analyzers {
namespace {

TEST(BusbwFactor, NcclTestsDefinitions) {
  EXPECT_DOUBLE_EQ(*busbw_factor("all_reduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(*busbw_factor("all_reduce", 1), 0.0);
  EXPECT_DOUBLE_EQ(*busbw_factor("all_gather", 4), 0.75);
  EXPECT_DOUBLE_EQ(*busbw_factor("reduce_scatter", 8), 0.875);
  EXPECT_DOUBLE_EQ(*busbw_factor("all_to_all", 2), 0.5);
  EXPECT_DOUBLE_EQ(*busbw_factor("broadcast", 8), 1.0);
  EXPECT_DOUBLE_EQ(*busbw_factor("send_recv", 8), 1.0);
  EXPECT_DOUBLE_EQ(*busbw_factor("gather", 4), 0.75);  // nccl-tests' gather_perf, scatter_perf
  EXPECT_DOUBLE_EQ(*busbw_factor("scatter", 2), 0.5);
  EXPECT_FALSE(busbw_factor("barrier", 8).has_value());
  EXPECT_FALSE(busbw_factor("all_reduce", 0).has_value());
}

TEST(CollectiveBandwidth, AlgbwIsSizeOverTime) {
  // 1 GB in 0.1 s on 8 ranks: algbw 10 GB/s, busbw 10 x 2 x 7/8 = 17.5 GB/s.
  Bandwidth bw = collective_bandwidth("all_reduce", 1e9, 0.1, 8);
  EXPECT_DOUBLE_EQ(bw.algbw_gbps, 10.0);
  EXPECT_DOUBLE_EQ(bw.busbw_gbps, 17.5);
  EXPECT_DOUBLE_EQ(collective_bandwidth("all_reduce", 1e9, 0, 8).algbw_gbps, 0.0);
  // An op without nccl-tests' factor (monitored_barrier's, a new one) moves its bytes once: its
  // busbw is its algbw, not 0 B/s.
  EXPECT_DOUBLE_EQ(collective_bandwidth("alltoall_base_v2", 1e9, 0.1, 8).busbw_gbps, 10.0);
}

}  // namespace
}  // namespace partrain::analyzers
