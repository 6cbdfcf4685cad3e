#include "profiler/trace_reader/communicator_name.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace partrain::profiler {
namespace {

TEST(CommunicatorName, TheBuiltInWorkloadsMeshGroupsByAxisAndIndex) {
  EXPECT_EQ(communicator_name("world"), "world");
  EXPECT_EQ(communicator_name("world/split0/color1"), "tp 1");
  EXPECT_EQ(communicator_name("world/split1/color0"), "dp 0");
  EXPECT_EQ(communicator_name("world/split1/color12"), "dp 12");
  EXPECT_EQ(communicator_name("world/split2/color3"), "pp 3");
  EXPECT_EQ(communicator_name("world/split3/color1"),
            "ep 1");  // a mixture of experts' groups
  EXPECT_EQ(communicator_name("world/split4/color0"), "expert-dp 0");
  EXPECT_EQ(communicator_name("world/split2/color3/split0/color0"), "pp 3 activations");
  EXPECT_EQ(communicator_name("world/split2/color3/split1/color0"), "pp 3 gradients");
  EXPECT_EQ(communicator_name("world/split2/color1/split2/color0"), "embedding 1");
  // A hybrid ZeRO's splits of dp group 1: shard group 2, and the replicas of each shard's place 0.
  EXPECT_EQ(communicator_name("world/split1/color1/split0/color2"), "dp 1 shard 2");
  EXPECT_EQ(communicator_name("world/split1/color1/split1/color0"), "dp 1 replicas 0");
}

TEST(CommunicatorName, OtherIdsAreShownAsTheyAre) {
  EXPECT_EQ(communicator_name("default_pg:0"), "default_pg:0");  // PyTorch's own names
  EXPECT_EQ(communicator_name("mesh_dp:3"), "mesh_dp:3");
  EXPECT_EQ(communicator_name("pg:1"), "pg:1");
  EXPECT_EQ(communicator_name("9f2c44e01a2b3c4d.split0.c1"), "9f2c44e01a2b3c4d.split0.c1");
  EXPECT_EQ(communicator_name("unmatched:rank3"), "unmatched:rank3");
  EXPECT_EQ(communicator_name("dp"), "dp");
  // Shapes the workloads never make are not guessed at.
  EXPECT_EQ(communicator_name("world/split6/color0"), "world/split6/color0");
  EXPECT_EQ(communicator_name("world/split3/color0/split0/color0"),
            "world/split3/color0/split0/color0");
  EXPECT_EQ(communicator_name("world/split0/color1/split0/color0"),
            "world/split0/color1/split0/color0");
  EXPECT_EQ(communicator_name("world/split2/color1/split0/color1"),
            "world/split2/color1/split0/color1");
  EXPECT_EQ(communicator_name("world/split1/color0/split2/color0"),
            "world/split1/color0/split2/color0");
  EXPECT_EQ(communicator_name("world/split0"), "world/split0");
  EXPECT_EQ(communicator_name("world/split0/colorx"), "world/split0/colorx");
  EXPECT_EQ(communicator_name("worlds"), "worlds");
  EXPECT_EQ(communicator_name(""), "");
}

TEST(CommunicatorBefore, NumbersInIdsCompareAsNumbers) {
  EXPECT_TRUE(communicator_before("world/split0/color2", "world/split0/color10"));
  EXPECT_FALSE(communicator_before("world/split0/color10", "world/split0/color2"));
  EXPECT_TRUE(communicator_before("world/split0/color10", "world/split1/color0"));  // tp before dp
  EXPECT_TRUE(communicator_before("mesh_dp:9", "mesh_dp:10"));
  EXPECT_TRUE(communicator_before("default_pg:0", "mesh_dp:0"));
  EXPECT_TRUE(communicator_before("pg", "pg:0"));
  EXPECT_FALSE(communicator_before("dp0", "dp0"));
  // Same numbers, different bytes: still ordered, so a map keeps both.
  EXPECT_NE(communicator_before("pg:01", "pg:1"), communicator_before("pg:1", "pg:01"));
}

TEST(CommunicatorBefore, SortsAMeshOfSixteenGroupsInCountingOrder) {
  std::vector<std::string> ids;
  for (int color = 15; color >= 0; --color)
    ids.push_back(fmt::format("world/split0/color{}", color));
  std::sort(ids.begin(), ids.end(),
            [](const std::string& a, const std::string& b) { return communicator_before(a, b); });
  for (int color = 0; color < 16; ++color) {
    EXPECT_EQ(communicator_name(ids[color]), fmt::format("tp {}", color));
  }
}

}  // namespace
}  // namespace partrain::profiler
