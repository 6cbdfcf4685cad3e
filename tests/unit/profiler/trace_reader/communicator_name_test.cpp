#include "profiler/trace_reader/communicator_name.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(communicator_name("world/split0"), "world/split0");
  EXPECT_EQ(communicator_name("world/split0/colorx"), "world/split0/colorx");
  EXPECT_EQ(communicator_name("worlds"), "worlds");
  EXPECT_EQ(communicator_name(""), "");
}

}  // namespace
}  // namespace partrain::profiler
